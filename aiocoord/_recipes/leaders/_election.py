"""LeaderElection: lead in turns, one term at a time (Curator's LeaderSelector,
node for node: a Mutex's ``_c_<uuid>-aio-lock-<seq>`` holding the participant
id; see ``_common`` for the tag and the hand-over rule)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ... import _telemetry
from ..._checks import check_flag, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    ConnectionLossError,
    HoldLostError,
    LeadershipLostError,
    NoNodeError,
    NotOwnerError,
    OperationTimeoutError,
    SessionExpiredError,
)
from ..._session import ChangeStream, Client, ErrorPolicy, Fence, Transaction
from ..._types import ACL
from .._kit._contenders import LOCK_NAME, Contender
from .._kit._holding import Hold, HoldContext
from .._kit._participants import Participant
from .._kit._waits import Deadline
from ._common import give_up, gives_way, node_gone, settle, stop
from ._observe import LeaderObserver, count_as
from ._participant import TAKEN_OVER, Candidacy, GivenUp

__all__ = ["LeaderElection", "report_as"]

log = logging.getLogger("aiocoord")


# --- LeaderElection ----------------------------------------------------------------------


@dataclass(slots=True)
class _Term:
    node: str
    czxid: int
    hold: Hold
    giving_up: bool = False
    """The term was ended on purpose (resign, hand-over): once its block is over,
    its node goes, with the hand-over's record if ``to`` is set."""
    to: str | None = None
    given_up: asyncio.Future[None] | None = field(default=None)
    """Done once the node is gone, after such an end."""


class _ElectionHolding:
    """A LeaderElection's side of :class:`HoldContext`: one term as leader."""

    def __init__(self, election: LeaderElection, timeout: float | None) -> None:
        self._election = election
        self._timeout = timeout
        self.path = election.path
        self._contender: Contender | None = None
        self._watcher: asyncio.Task[Any] | None = None
        self._stopping = False

    async def take_hold(self) -> tuple[LeaderElection, Hold]:
        election = self._election
        if election._busy:
            raise RuntimeError(
                f"{election!r} is already taking part (in hold() or run()): one "
                "LeaderElection is one participant; make one per task that competes"
            )
        election._busy = True
        self._stopping = False
        candidacy = election._candidacy
        with candidacy.campaign() as op:
            try:
                contender, position, gave_way = await self._lead()
            except BaseException:
                election._busy = False
                raise
            # The grant rests on a reply from the session owning our node; with no
            # await until the monitor has the hold, every later state counts.
            hold = Hold()
            candidacy.start_term(hold, contender)
            candidacy.elected(op, contender, position, gave_way)
        node = contender.node
        assert node is not None
        self._contender = contender
        election._term = _Term(node, contender.czxid, hold)
        try:
            self._watcher = election._client.start_background(
                self._watch(hold, node, contender.session_id),
                name=f"aiocoord-leader-node-watch {election.path}",
                on_error=lambda error: hold.mark_lost(f"watching its node failed: {error!r}"),
            )
        except BaseException:
            await self.end_hold(hold, completed=False)
            raise
        return election, hold

    async def _lead(self) -> tuple[Contender, int | None, int]:
        """Queue until our node heads the queue and the rule says we lead (see
        ``_common``: a hand-over or a higher priority may make us give way and
        queue again, behind the one that is to lead). The contender, how many
        stood ahead at the first look, and how often we gave way (telemetry)."""
        election = self._election
        deadline = Deadline(self._timeout)
        position: int | None = None
        gave_way = 0
        while True:
            contender = election._new_contender()
            if not await contender.acquire(timeout=deadline.remaining()):
                raise OperationTimeoutError(
                    f"did not become leader of {election.path!r} within {self._timeout} s"
                )
            if position is None:
                position = contender.position
            try:
                if not await self._gives_way(contender):
                    return contender, position, gave_way
            except BaseException:
                await contender.release()
                raise
            gave_way += 1
            await contender.release()

    async def _gives_way(self, contender: Contender) -> bool:
        client = self._election._client
        node = contender.node
        assert node is not None
        while True:
            try:
                return await gives_way(client, self.path, node, contender.session_id)
            except SessionExpiredError:
                return False  # the monitor finds the term lost at once
            except NoNodeError:
                return False  # our node is gone: the term's watch reports it
            except ConnectionLossError:
                await client.wait_connected()

    async def _watch(self, hold: Hold, node: str, session_id: int) -> None:
        """Mark the term lost once our node is gone (deleted by someone else, or
        with the session); hand over to a participant of a higher priority that
        queues meanwhile."""
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch_priority, hold, node)
                reason = await node_gone(self._election._client, node, session_id)
                group.cancel_scope.cancel()
        except asyncio.CancelledError:
            if not self._stopping:  # not the term's end: the client is closing
                hold.mark_lost("the client was closed")
            raise
        hold.mark_lost(reason)

    async def _watch_priority(self, hold: Hold, node: str) -> None:
        election = self._election
        found = await election._candidacy.priority_take_over(node)
        term = election._term
        if found is None or term is None or term.hold is not hold or hold.lost:
            return
        to, reason = found
        election._end_term(term, reason, to, TAKEN_OVER)

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        election = self._election
        contender, self._contender = self._contender, None
        assert contender is not None
        term = election._term
        try:
            election._term = None  # not leading from here on; the node goes next
            self._stopping = True
            # Judge the term before our own delete can look like a loss: the
            # monitor lets go, and the watcher is told to stop first and reaped
            # after the delete, which goes out without waiting for it (the next
            # leader waits on that).
            election._candidacy.end_term(hold)
            watcher, self._watcher = self._watcher, None
            if watcher is not None:
                watcher.cancel()
            try:
                if term is not None and term.giving_up:
                    # Ended on purpose, and the block is over: only now does the
                    # node go (with the hand-over's record), so the next leader's
                    # block never overlaps ours.
                    try:
                        await settle(
                            election._client.start_background(
                                give_up(election._client, self.path, term.node, term.to),
                                name=f"aiocoord-leader-give-up {term.node}",
                            )
                        )
                    finally:
                        if term.given_up is not None and not term.given_up.done():
                            term.given_up.set_result(None)
                await contender.release()  # finishes the delete even if cancelled meanwhile
            finally:
                cancelled = await stop(watcher)
            if cancelled is not None:
                raise cancelled
        finally:
            election._busy = False

    def lost_error(self, reason: str) -> HoldLostError:
        return LeadershipLostError(self.path, reason)


class LeaderElection:
    """Lead in turns, one participant at a time (Curator's LeaderSelector).

    ``async with election.hold():`` waits until this participant leads,
    then runs the block as leader: a *term*. The block is cancelled when
    leadership is lost, and leaving it then raises
    :class:`~aiocoord.LeadershipLostError`; leaving it in any way gives
    leadership up, to the next participant in the queue.
    ``await election.run(fn)`` calls ``fn`` for each term, queueing again
    after each (Curator's autoRequeue).

    Leadership is lost when the connection enters a state the error policy
    calls an error (by default SUSPENDED already; with
    :class:`~aiocoord.SessionErrorPolicy` only LOST), when the session
    expires, and when another client deletes our node.

    The guarantee: at most one participant's node heads the queue at a time,
    and a leader's block is cancelled as soon as its client learns of a loss.
    The limit: a leader that is paused, or cut off before its client notices,
    can still act for a while after another took over. Fence what the leader
    writes (:meth:`transaction`, or :attr:`fencing_token` for other stores)
    to close that gap.

    One object is one participant: a second ``hold()`` or ``run()``
    while one is active raises RuntimeError. Make one LeaderElection per
    competing task.

    Beyond Curator's selector: a leader can :meth:`proclaim` what it
    advertises, :meth:`resign`, or :meth:`hand_over` leadership to a named
    participant; :meth:`observe` follows who leads. With ``priority`` (an
    int; None, the default, is below every int) a participant that queues
    behind a leader of lower priority takes over at once, by a hand-over from
    that leader, whose term ends through the loss path ("priority take-over
    by ..."). Curator participants take no part in priorities.

    ``acl`` (default: the client's ``default_acl``) is the ACL of our node and
    of the missing parents made for it.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        participant_id: str | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
        priority: int | None = None,
    ) -> None:
        # The queue of Curator's LeaderSelector: an InterProcessMutex's nodes.
        self._candidacy = candidacy = Candidacy(
            client,
            path,
            lock_name=LOCK_NAME,
            what="leader election",
            kind="leader_election",
            participant_id=participant_id,
            error_policy=error_policy,
            acl=acl,
            priority=priority,
        )
        self.participant_id = candidacy.participant_id
        """This participant's id, stored in its node as UTF-8 (Curator's
        LeaderSelector id); ``<host>:<pid>:<random hex>`` unless one was given
        (where Curator stores the client's IP address)."""
        self.priority = candidacy.priority
        """This participant's priority (None: the lowest)."""
        self._client = client
        self.path = path
        self._term: _Term | None = None
        self._busy = False
        self._leave = False
        self._observer = LeaderObserver(client, path)
        count_as(self._observer, candidacy.tags)  # its listeners' changes count as ours

    def _new_contender(self) -> Contender:
        # As the Mutex: once the last node ahead is gone we lead, without
        # listing the queue again (a hand-over is one notification, where
        # Curator's selector lists again). Our own node being deleted by
        # someone else meanwhile is the one case this misses: the term's
        # node watch reports it within a round trip and cancels the term.
        return self._candidacy.contender()

    def __repr__(self) -> str:
        return (
            f"<LeaderElection {self.path!r} id={self.participant_id!r} "
            f"leading={self.has_leadership}>"
        )

    def hold(
        self, *, cancel_on_loss: bool = True, timeout: float | None = None
    ) -> HoldContext[LeaderElection]:
        """``async with election.hold():`` wait to lead, then run the block as leader
        (a *term*).

        Raises OperationTimeoutError if ``timeout`` seconds pass before we lead
        (no node is left behind), and LeadershipLostError on leaving the block
        after a loss (with ``cancel_on_loss``, the block was cancelled at the
        loss). Leaving the block deletes our node: the next participant leads.
        Waiting rides out SUSPENDED; a lost session while waiting queues us
        again, at the back.
        """
        holding = _ElectionHolding(self, check_timeout(timeout, path=self.path))
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    async def run(self, fn: Callable[[], Awaitable[object]], *, requeue: bool = True) -> None:
        """``await fn()`` each time this participant leads, until cancelled.

        Each term ends when ``fn`` returns (leadership is then given up, and we
        queue again behind the others) or when leadership is lost (``fn`` is
        cancelled; the loss is logged and we queue again). With
        ``requeue=False`` there is one term: a loss then raises
        LeadershipLostError. An exception from ``fn`` ends ``run`` with that
        exception (Curator logs it and queues again; a failing leader that
        keeps coming back usually hides a bug, so it is left to the caller to
        catch and retry). Queueing rides out SUSPENDED and lost sessions, and
        with ``requeue`` also ZooKeeper being out of reach for longer than the
        request timeout; it ends on ClientClosedError.
        """
        if not callable(fn):
            raise ArgumentTypeError("fn", "an async callable", fn, self.path)
        check_flag(requeue, "requeue", path=self.path)
        while True:
            leading = False
            try:
                async with self.hold():
                    leading = True
                    await fn()
            except LeadershipLostError as error:
                if self._leave:  # resign(requeue=False)
                    self._leave = False
                    return
                if not requeue:
                    raise
                log.info("%s; queueing again", error)
            except ConnectionLossError as error:
                if leading or not requeue:
                    raise  # from fn: its own error
                # ZooKeeper out of reach for a whole request timeout while queueing.
                log.info("%r: cannot queue (%s); trying again once connected", self, error)
                await self._client.wait_connected()
            else:
                if not requeue:
                    return

    # --- local state ------------------------------------------------------------------

    @property
    def has_leadership(self) -> bool:
        """Whether this participant is in a term and has not lost it (local state)."""
        term = self._term
        return term is not None and not term.hold.lost

    def _current_term(self) -> _Term:
        term = self._term
        if term is None:
            raise NotOwnerError(f"{self.path!r}: this participant does not lead (not in a term)")
        if term.hold.lost:
            raise LeadershipLostError(self.path, term.hold.reason)
        return term

    @property
    def fencing_token(self) -> int:
        """Inside a term: a number that grows with every term of every participant.

        It is the leader node's creation zxid. Hand it to the resource the leader
        writes to, which refuses a smaller token than it has seen. NotOwnerError
        outside a term, LeadershipLostError once the term's leadership is lost.
        """
        return self._current_term().czxid

    @property
    def is_held(self) -> bool:
        """The holder contract's name for :attr:`has_leadership`."""
        return self.has_leadership

    def fence(self) -> Fence:
        """Proof of leading, for any transaction to require (``txn.guard(election.fence())``).

        The transaction applies only while our node exists; a failed guard
        raises LeadershipLostError. Errors as :attr:`fencing_token`.
        """
        return self._candidacy.fence(self._current_term().node)

    def transaction(self) -> Transaction:
        """A transaction that applies only while we still lead (our node exists);
        otherwise ``commit()`` applies nothing and raises LeadershipLostError."""
        return self._candidacy.transaction(self._current_term().node)

    async def participants(self) -> list[Participant]:
        """Every participant in queue order: see :meth:`LeaderLatch.participants`."""
        return await self._candidacy.participants()

    async def leader(self) -> Participant | None:
        """The leading participant; None if nobody takes part (where Curator returns
        an empty dummy participant)."""
        return await self._candidacy.leader()

    def observe(self) -> ChangeStream[Participant | None]:
        """Who leads, now and after every change: see :meth:`LeaderObserver.observe`
        (the same stream, whether or not this participant takes part)."""
        return self._candidacy.observe()

    async def proclaim(self, data: bytes) -> None:
        """Inside a term: advertise ``data`` without ending the term, as
        :meth:`LeaderLatch.proclaim` (LeadershipLostError once the term is lost,
        NotOwnerError outside a term). The proclaimed data lasts for this term."""
        with self._candidacy.span("aiocoord.leader.proclaim") as op:
            await self._candidacy.proclaim(self._current_term().node, data)
            op.outcome("proclaimed")

    async def wait_lost(self) -> None:
        """Inside a term: wait until its leadership is lost (NotOwnerError outside one).

        The term belongs to this object, not to a task: any task may wait on it
        (``tg.start_soon(election.wait_lost)`` from inside the term).
        """
        term = self._term
        if term is None:
            raise NotOwnerError(f"{self.path!r}: this participant does not lead (not in a term)")
        await term.hold.wait_lost()

    def add_listener(self, callback: Callable[[Participant | None], object]) -> None:
        """Call ``callback(leader)`` as :meth:`observe` yields, from a task of the
        client (a callback must not block; its errors are logged), until removed."""
        self._observer.add_listener(callback)

    def remove_listener(self, callback: Callable[[Participant | None], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._observer.remove_listener(callback)

    def _end_term(
        self,
        term: _Term,
        reason: str,
        to: str | None,
        outcome: str,
        given_up: GivenUp | None = None,
    ) -> asyncio.Future[None]:
        """End the term on purpose: leadership is dropped now (the block is
        cancelled through the loss path), the node goes once the block is over.
        ``outcome`` and ``given_up``: how its hold ends, for telemetry."""
        if term.given_up is None:
            self._candidacy.ending(term.hold, reason, outcome, given_up)
            term.giving_up, term.to = True, to
            term.given_up = asyncio.get_running_loop().create_future()
            term.hold.mark_lost(reason, warn=False)
        return term.given_up

    async def resign(self, *, requeue: bool = True) -> None:
        """Inside a term: end it now.

        Leadership is dropped first: the term's block is cancelled through the
        usual loss path (leaving ``hold()`` raises LeadershipLostError saying
        "resigned"); once the block is over our node is deleted, so the next
        participant leads (its term never overlaps ours). Returns then.
        :meth:`run` queues again behind the others, or with ``requeue=False``
        returns. NotOwnerError outside a term. Called from the term's own block
        (with ``cancel_on_loss``), the call is cancelled with the block.
        """
        check_flag(requeue, "requeue", path=self.path)
        with self._candidacy.span("aiocoord.leader.resign") as op:
            term = self._current_term()
            op.set("aiocoord.fencing_token", term.czxid)
            self._leave = not requeue
            ending = self._end_term(term, "resigned", None, "resigned", GivenUp.resign(requeue))
            op.outcome("resigned")  # done, even if the term's own block is cancelled now
            await settle(ending)

    async def hand_over(self, *, to: str, timeout: float | None = None, wait: bool = True) -> None:
        """Inside a term: pass leadership to participant ``to`` (an id), who leads next.

        The term ends as for :meth:`resign` (the loss's reason says "handed
        over to ..."). The election record names ``to``'s node, and every
        aiocoord participant that reaches the head before it gives way and
        queues again; ``to`` clears the record once it leads. If ``to``
        leaves first, the record is ignored (it names a node, not an id), so
        nothing waits on a participant that is gone. Curator participants
        ignore the record: one ahead of ``to`` leads as usual.

        Returns once somebody leads again (``to``, unless it left meanwhile);
        OperationTimeoutError if nobody does within ``timeout`` seconds (the
        hand-over still goes on). With ``wait=False`` it returns once our node
        is gone, without following who leads next. InvalidArgumentError if
        ``to`` is not queued; NotOwnerError outside a term; LeadershipLostError
        if the term is lost (its session ends) before the hand-over is under
        way. Called from the term's own block
        (with ``cancel_on_loss``), the call is cancelled with the block once
        the hand-over is under way.
        """
        timeout = check_timeout(timeout, path=self.path)
        check_flag(wait, "wait", path=self.path)
        with self._candidacy.hand_over_span(to) as op:
            node = self._current_term().node
            target = await self._candidacy.hand_over_target(node, to)
            term = self._current_term()  # still ours after the read?
            if term.node != node:
                raise NotOwnerError(f"{self.path!r}: the term ended while handing over")
            op.set("aiocoord.fencing_token", term.czxid)
            ending = self._end_term(
                term, f"handed over to {to!r}", target, "handed_over", GivenUp.hand_over(to)
            )
            op.outcome("handed_over")
            await settle(ending)
            if wait:
                await self._candidacy.next_leader(op, timeout)


def report_as(election: LeaderElection, kind: str) -> _telemetry.Tags:
    """Report ``election``'s telemetry as recipe ``kind`` (a LeaderElectionGroup's
    elections report as the group); its tags from now on."""
    tags = election._candidacy.relabel(kind)
    count_as(election._observer, tags)
    return tags
