"""What LeaderLatch and LeaderElection share, once: the constructor's checks,
the queue they join, who is there and who leads, and what a leader does
beyond leading (proclaim, its fence, the first half of a hand-over, the
priority watch). Each recipe keeps what differs: what a term is, how one
starts and how one ends."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..._checks import check_bytes, check_recipe_acl
from ..._exceptions import LeadershipLostError
from ..._session import ChangeStream, Client, ErrorPolicy, Fence, Transaction
from ..._types import ACL
from .._kit._contenders import Contender, mutex_rule
from .._kit._holding import LossMonitor
from .._kit._participants import Participant
from ._common import (
    Record,
    check_arguments,
    check_priority,
    hand_over_target,
    node_name,
    participants,
    priority_contender,
)
from ._observe import observe

__all__ = ["Candidacy"]

log = logging.getLogger("aiocoord")


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
            client, error_policy or client.error_policy, f"leadership of {path!r}"
        )

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

    def observe(self) -> ChangeStream[Participant | None]:
        return observe(self.client, self.path)

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
