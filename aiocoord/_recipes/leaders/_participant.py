"""What LeaderLatch and LeaderElection share, once: the constructor and its
checks, the queue they join, who is there and who leads, the leadership
stream and its listeners, and what a leader does beyond leading (proclaim,
its fence and token, the first half of a hand-over, the priority watch), and
its telemetry: the campaign span, the term as a hold (``aiocoord.leader.term``),
the terms-held gauge. :class:`Candidacy` is the participant; ``_leaders.Leading``
is the public face both recipes inherit from it. Each recipe keeps what
differs: what a term is, how one starts and how one ends."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ... import _telemetry
from ..._checks import check_bytes, check_recipe_acl
from ..._exceptions import LeadershipLostError, OperationTimeoutError
from ..._session import ChangeStream, Client, ErrorPolicy, Fence, Transaction
from ..._types import ACL
from .._kit import Contender, Hold, LossMonitor, Participant, mutex_rule
from ._common import (
    Record,
    check_arguments,
    check_priority,
    hand_over_target,
    node_name,
    participants,
    priority_contender,
)
from ._observe import observe, wait_next_leader

__all__ = ["TAKEN_OVER", "Candidacy", "GivenUp", "leader_tags"]

log = logging.getLogger("aiocoord")

TAKEN_OVER = "taken_over"
"""A term's telemetry outcome when a participant of a higher priority took over."""


@dataclass(frozen=True, slots=True)
class GivenUp:
    """How a leader ended its term on purpose, for the term span's
    ``aiocoord.hold.given_up`` event (the loss's own reason, which the term's
    block sees, stays short: ``resigned``, ``handed over to 'b'``)."""

    reason: str
    attributes: Mapping[str, str | bool] = field(default_factory=dict)

    @classmethod
    def resign(cls, requeue: bool) -> GivenUp:
        """A resign: whether the participant queues again or leaves the election."""
        how = "queued again" if requeue else "left the election"
        return cls(f"resigned; {how}", {"aiocoord.requeue": requeue})

    @classmethod
    def hand_over(cls, to: str) -> GivenUp:
        """A hand-over to participant ``to`` (an id)."""
        return cls(f"handed over to {to!r}", {"aiocoord.target": to})


class Candidacy:
    """One participant of the election at ``path``, as both recipes see it:
    checked arguments (before any I/O) and the operations that do not depend on
    how the recipe leads. ``node`` arguments are our leader node's full path,
    which the recipe gives only while it leads."""

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        lock_name: str,
        what: str,
        kind: str,
        participant_id: str | None,
        error_policy: ErrorPolicy | None,
        acl: Sequence[ACL] | None,
        priority: int | None,
    ) -> None:
        self.participant_id, self.data = check_arguments(
            client, path, participant_id, error_policy, what
        )
        self.priority = check_priority(priority, path)
        self.acl = check_recipe_acl(acl, path)
        self.client = client
        self.path = path
        self.lock_name = lock_name
        """Curator's node name for this recipe's queue."""
        self.what = what
        """The recipe's name in messages."""
        self.monitor = LossMonitor(
            client,
            error_policy or client.error_policy,
            f"leadership of {path!r}",
            span_name="aiocoord.leader.term",
        )
        self.kind = kind
        """The recipe's telemetry label (a group's elections report as the group)."""
        self.tags = leader_tags(client, kind, path, self.participant_id)
        self.monitor.tags = self.tags
        self._counted: dict[Hold, dict[str, object]] = {}
        """Terms counted in ``aiocoord.leader.terms.held`` (telemetry on), with the
        attributes they were counted under."""

    # --- telemetry --------------------------------------------------------------------------

    def span(self, name: str) -> _telemetry.SpanScope:
        """A span of one leader operation (resign, hand-over, proclaim)."""
        return _telemetry.span(name, self.tags)

    @contextlib.contextmanager
    def hand_over_span(self, to: object) -> Iterator[_telemetry.SpanScope]:
        """The span of a hand-over to participant ``to``."""
        with self.span("aiocoord.leader.hand_over") as scope:
            if isinstance(to, str):  # a wrong type is refused inside the span
                scope.set("aiocoord.target", to)
            yield scope

    async def next_leader(self, hand_over: _telemetry.SpanScope, timeout: float | None) -> None:
        """After a hand-over: wait until somebody leads (see ``wait_next_leader``),
        and say who on the hand-over's span."""
        try:
            leader = await wait_next_leader(self.client, self.path, timeout)
        except OperationTimeoutError:
            hand_over.outcome("timeout")
            raise
        hand_over.set("aiocoord.next_leader", leader.id)

    def campaign(self) -> _telemetry.SpanScope:
        """The span of waiting to lead: timed as a lock's wait, counted as queued."""
        return _telemetry.span("aiocoord.leader.campaign", self.tags, duration=_telemetry.WAIT)

    def elected(
        self,
        campaign: _telemetry.SpanScope,
        contender: Contender,
        position: int | None,
        gave_way: int,
    ) -> None:
        """The campaign ends in a term: how it went, on its span."""
        campaign.outcome("elected")
        if campaign.recording:
            if position is not None:
                campaign.set("aiocoord.queue_position", position)
            campaign.set("aiocoord.gave_way", gave_way)
            campaign.set("aiocoord.fencing_token", contender.czxid)

    def start_term(self, hold: Hold, contender: Contender) -> None:
        """A term starts on ``contender``'s node: watched from now on (the caller has
        not awaited since the decision), and timed and traced as a hold."""
        self.monitor.add(hold, contender.session_id, token=contender.czxid)
        if hold.record is not None:
            attributes = self._counted[hold] = self.tags.metric_attributes
            _telemetry.add("aiocoord.leader.terms.held", 1, attributes)

    def end_term(self, hold: Hold) -> None:
        """The term is over (given up or lost): no longer watched; its hold ends."""
        self.monitor.discard(hold)
        attributes = self._counted.pop(hold, None)
        if attributes is not None:
            _telemetry.add("aiocoord.leader.terms.held", -1, attributes)

    @staticmethod
    def ending(hold: Hold, reason: str, outcome: str, given_up: GivenUp | None = None) -> None:
        """Before a term is ended on purpose (``resigned``, ``handed_over``, or
        :data:`TAKEN_OVER`): how its hold ends. A take-over is no choice of
        this leader's: a loss, with its reason, for the lost-holds counter. A
        resign or hand-over is: ``given_up`` says how, on the term's span only."""
        if hold.lost:
            return  # lost first: it ends as lost
        hold.outcome = outcome
        if hold.record is None:
            return
        if outcome == TAKEN_OVER:
            hold.record.lost(reason)
        elif given_up is not None:
            hold.record.given_up(given_up.reason, given_up.attributes)

    def contender(self, *, last_blocker_shortcut: bool = True) -> Contender:
        """A node in the queue: Curator's node name with our tag and priority (see
        ``_common``), holding our id."""
        return Contender(
            self.client,
            self.path,
            node_name(self.lock_name, self.priority),
            (self.lock_name,),
            mutex_rule(1, (self.lock_name,)),
            self.data,
            last_blocker_shortcut=last_blocker_shortcut,
            acl=self.acl,
        )

    def fence(self, node: str) -> Fence:
        return Fence(node, self.path, lost_error=LeadershipLostError)

    def transaction(self, node: str) -> Transaction:
        return self.client.transaction().guard(self.fence(node))

    async def participants(self) -> list[Participant]:
        return await participants(self.client, self.path, self.lock_name)

    async def leader(self) -> Participant | None:
        found = await self.participants()
        return found[0] if found else None

    def leader_changes(self) -> ChangeStream[Participant | None]:
        return observe(self.client, self.path, self.tags)

    async def proclaim(self, node: str, data: bytes) -> None:
        """Write ``data`` to the election record as ``node``'s, guarded by ``node``."""
        data = check_bytes(data, "data", path=self.path)
        record = Record(node.rsplit("/", 1)[1], data)
        await self.transaction(node).set(self.path, record.encode()).commit()

    async def hand_over_target(self, node: str, to: str) -> str:
        """Before a hand-over from ``node``: the node (name) of participant ``to``
        (see ``_common.hand_over_target``)."""
        return await hand_over_target(self.client, self.path, self.lock_name, to, node)

    async def priority_take_over(self, node: str) -> tuple[str, str] | None:
        """While leading on ``node``: wait until a participant of a higher priority
        queues; its node name and the loss's reason (None if that cannot be
        followed: the session ended, and the term with it)."""
        found = await priority_contender(self.client, self.path, node.rsplit("/", 1)[1])
        if found is None:
            return None
        to, to_id = found
        log.info("%s %r: priority take-over by %r", self.what, self.path, to_id)
        return to, f"priority take-over by {to_id!r}"


def leader_tags(client: Client, kind: str, path: str, participant_id: str) -> _telemetry.Tags:
    """The telemetry labels of participant ``participant_id`` of the election at
    ``path``, reported as recipe ``kind``."""
    tags = _telemetry.recipe_tags(client.telemetry, kind, path, client.namespace)
    attributes = {**tags.span_attributes, "aiocoord.participant_id": participant_id}
    return _telemetry.Tags(tags.kind, tags.path, attributes, tags.metric_attributes)
