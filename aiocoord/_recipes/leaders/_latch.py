"""LeaderLatch: take part in an election for as long as the latch is open
(Curator's LeaderLatch, node for node: ``_c_<uuid>-aio-latch-<seq>`` holding
the participant id; see ``_common`` for the tag and the hand-over rule)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from ..._checks import check_flag, check_timeout
from ..._exceptions import (
    ClientClosedError,
    ConnectionLossError,
    HoldLostError,
    LeadershipLostError,
    NoNodeError,
    NotOwnerError,
    OperationTimeoutError,
    SessionExpiredError,
)
from ..._session import Broadcast, ChangeStream, Client, ErrorPolicy, Fence, Transaction
from ..._types import ACL
from .._kit._contenders import Contender
from .._kit._holding import Hold, HoldContext, native_cancel_pending
from .._kit._lifecycle import Lifecycle, Phase, Resource
from .._kit._participants import Participant
from .._kit._waits import Deadline
from ._common import LATCH_NAME, end_term, gives_way, node_gone, settle, stop
from ._participant import TAKEN_OVER, Candidacy, GivenUp

__all__ = ["LATCH_NAME", "LeaderLatch"]

log = logging.getLogger("aiocoord")


# --- LeaderLatch --------------------------------------------------------------------------


class _LatchTerm(Hold):
    """One stretch of leadership of a latch: lost when the connection state, the
    session or our node says so (reported to the latch at once)."""

    def __init__(self, contender: Contender, on_lost: Callable[[], None]) -> None:
        super().__init__()
        self.contender = contender
        self._on_lost = on_lost
        self.ending: asyncio.Task[None] | None = None
        """Giving the node up, when the term was ended on purpose (resign, hand-over)."""
        self.requeue = True
        """After such an end: queue again (or leave the election)."""

    def mark_lost(self, reason: str, *, warn: bool = True) -> None:
        if self.lost:
            return
        super().mark_lost(reason, warn=warn)
        self._on_lost()


class LeaderLatch(Resource):
    """Take part in an election for as long as the latch is open (Curator's LeaderLatch).

    ``async with LeaderLatch(client, path, participant_id="me") as latch:``
    joins the queue (the first participant leads) and leaves it on exit. Meanwhile
    ``has_leadership`` says whether we lead now, ``await wait_leader()`` waits
    for it, and ``async for leading in latch.changes()`` follows it.

    Leadership is dropped (and reported) when the connection enters a state
    the error policy calls an error (by default SUSPENDED already; with
    :class:`~aiocoord.SessionErrorPolicy` only LOST), when the session is
    lost, and when another client deletes our node. After a reconnection to
    the same session our node still stands, so the queue is read again and we
    may lead again at once; after a lost session or a deleted node, a new node
    joins at the back of the queue.

    A leader may have lost leadership without knowing yet (a long pause):
    guard writes with :meth:`fence` or :meth:`transaction` to be safe.

    Beyond Curator's latch: a leader can :meth:`proclaim` what it advertises,
    :meth:`resign`, or :meth:`hand_over` leadership to a named participant;
    :meth:`observe` follows who leads. With ``priority`` (an int; None, the
    default, is below every int) a participant that queues behind a leader of
    lower priority takes over at once, by a hand-over from that leader (Curator
    participants take no part in priorities).

    ``acl`` (default: the client's ``default_acl``) is the ACL of our node and
    of the missing parents made for it.

    ``start()`` joins the election: our node is in the queue when it returns,
    and a task of the client follows the queue and the connection until
    ``aclose()``, which stops leading, deletes our node, ends ``changes()``
    iterations and makes ``wait_leader()`` raise. A failed start leaves no
    node and may be tried again.
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
        self._candidacy = candidacy = Candidacy(
            client,
            path,
            lock_name=LATCH_NAME,
            what="leader latch",
            kind="leader_latch",
            participant_id=participant_id,
            error_policy=error_policy,
            acl=acl,
            priority=priority,
        )
        self.participant_id = candidacy.participant_id
        """This participant's id, stored in its node as UTF-8 (Curator's latch id);
        ``<host>:<pid>:<random hex>`` unless one was given."""
        self.priority = candidacy.priority
        """This participant's priority (None: the lowest)."""
        self._client = client
        self.path = path
        self._life = Lifecycle(f"leader latch {path!r}", self._open, self._shut)
        super().__init__(self._life)
        self._leader = False
        self._lost = asyncio.Event()
        self._lost.set()
        self._term: _LatchTerm | None = None
        self._contender: Contender | None = None
        self._task: asyncio.Task[Any] | None = None
        self._changes: Broadcast[bool] = Broadcast(f"leadership of {path!r}")
        self._ended = False
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        state = "failed" if self._error is not None else self._life.phase.value
        return (
            f"<LeaderLatch {self.path!r} id={self.participant_id!r} {state} leader={self._leader}>"
        )

    # --- taking part -----------------------------------------------------------------

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`): queue up, start following the queue."""
        self._contender = contender = self._new_contender()
        try:
            await contender.queue()
            self._task = self._client.start_background(
                self._follow(), name=f"aiocoord-leader-latch {self.path}"
            )
        except BaseException:  # an error, the client closing, or a cancellation
            if self._contender is contender:
                self._contender = None
            await contender.abandon()  # shielded; finds a node whose create's reply was lost
            raise

    async def _shut(self, started: bool) -> None:
        """The closing (see :class:`Lifecycle`): stop claiming leadership before our
        node goes, never after."""
        self._set_leader(False)
        task, self._task = self._task, None
        await stop(task)  # the close runs in a task of its own: nothing cancels it
        contender, self._contender = self._contender, None
        if contender is not None:
            await contender.abandon()  # shielded and time-bounded
        self._end(None)

    def _new_contender(self) -> Contender:
        # Read the queue again after every wake-up, so a decision to lead also
        # sees that our own node is still there.
        return self._candidacy.contender(last_blocker_shortcut=False)

    # --- the background task ------------------------------------------------------------

    async def _follow(self) -> None:
        try:
            while True:
                term = await self._campaign()
                try:
                    if not term.lost:
                        self._term = term
                        self._set_leader(True)
                        await self._until_lost(term)
                        log.info("leader latch %r: leadership lost: %s", self.path, term.reason)
                finally:
                    self._candidacy.end_term(term)
                    self._term = None
                    if not term.lost:  # cancelled: the latch or its client is closing
                        term.mark_lost("the latch was closed", warn=False)
                    self._set_leader(False)
                if term.ending is not None:
                    # Ended on purpose: our node is being given up; queue again
                    # behind the others once it is gone (or stay out).
                    await settle(term.ending)
                    await term.contender.abandon()
                    if not term.requeue:
                        await asyncio.Event().wait()  # out of the election until closed
                # Else the same node: read the queue again (once reconnected), which
                # also tells whether the node survived.
        except asyncio.CancelledError:
            if not self._life.closed:  # the client is closing
                self._set_leader(False)
                self._end(ClientClosedError(f"leader latch {self.path!r}: the client was closed"))
            raise
        except BaseException as error:
            self._set_leader(False)
            leftover, self._contender = self._contender, None
            if leftover is not None:
                await leftover.abandon()  # leave the queue before telling anyone
            self._end(error)
            raise  # logged by the client's background runner

    async def _campaign(self) -> _LatchTerm:
        """Wait until our node leads (queueing again whenever it must): the new
        term, already watched (it may be lost at once). One
        ``aiocoord.leader.campaign`` span, a root one: the latch's task runs
        for no caller."""
        contender = self._contender
        assert contender is not None
        position: int | None = None
        gave_way = 0
        with self._candidacy.campaign() as op:
            while True:
                # An anyio scope in a step below (a timeout, a term's) can take a
                # close's cancellation for its own: never take another turn then.
                if native_cancel_pending():
                    raise asyncio.CancelledError
                if contender.node is None:
                    self._contender = contender = self._new_contender()
                    try:
                        await contender.queue()
                    except (ConnectionLossError, SessionExpiredError) as error:
                        await contender.abandon()
                        await self._wait_for_zookeeper(error)
                        continue
                try:
                    leads = await contender.wait_turn()
                except ConnectionLossError as error:
                    await self._wait_for_zookeeper(error)
                    continue  # same node: read the queue again
                if position is None:
                    position = contender.position
                if not leads:
                    # Our node went with the session or was deleted: queue again, at the back.
                    await contender.abandon()
                    continue
                assert contender.node is not None
                try:
                    way = await gives_way(
                        self._client, self.path, contender.node, contender.session_id
                    )
                except NoNodeError:
                    way = True  # our node is gone: we do not lead
                except ConnectionLossError as error:
                    await self._wait_for_zookeeper(error)
                    continue
                except SessionExpiredError:
                    await contender.abandon()
                    continue
                if way:
                    # A hand-over names another participant, or one of a higher
                    # priority waits: we never lead; queue again, behind it.
                    gave_way += 1
                    await contender.release()
                    await contender.abandon()
                    continue
                if native_cancel_pending():
                    raise asyncio.CancelledError
                # The decision rests on a reply from the session owning our node; with
                # no await until the monitor has the term, every later state counts.
                term = _LatchTerm(contender, lambda: self._set_leader(False))
                self._candidacy.start_term(term, contender)
                self._candidacy.elected(op, contender, position, gave_way)
                return term

    async def _until_lost(self, term: _LatchTerm) -> None:
        contender = term.contender
        assert contender.node is not None
        node = contender.node
        with anyio.CancelScope() as scope:
            term.add_scope(scope)  # a connection state or lost session ends the wait
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._watch_priority, term, node)
                    reason = await node_gone(self._client, node, contender.session_id)
                    term.mark_lost(reason)
            finally:
                term.remove_scope(scope)
        if native_cancel_pending():
            raise asyncio.CancelledError

    async def _watch_priority(self, term: _LatchTerm, node: str) -> None:
        """While leading: hand over to a participant of a higher priority that queues."""
        found = await self._candidacy.priority_take_over(node)
        if found is None or term.lost:
            return
        to, reason = found
        self._end_term(term, reason, to, requeue=True, outcome=TAKEN_OVER)

    def _end_term(
        self,
        term: _LatchTerm,
        reason: str,
        to: str | None,
        *,
        requeue: bool,
        outcome: str,
        given_up: GivenUp | None = None,
    ) -> None:
        node = term.contender.node
        assert node is not None
        term.requeue = requeue
        self._candidacy.ending(term, reason, outcome, given_up)
        term.ending = end_term(self._client, self.path, node, term, reason, to)

    async def _wait_for_zookeeper(self, error: BaseException) -> None:
        log.info("leader latch %r: %s; waiting for ZooKeeper", self.path, error)
        await self._client.wait_connected()

    def _set_leader(self, leading: bool) -> None:
        if self._leader is leading:
            return
        self._leader = leading
        if leading:
            self._lost = asyncio.Event()
        else:
            self._lost.set()
        self._changes.publish(leading)

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._changes.close(error)

    # --- leading ----------------------------------------------------------------------------

    @property
    def has_leadership(self) -> bool:
        """Whether this participant leads now (local state: no I/O)."""
        return self._leader

    @property
    def is_held(self) -> bool:
        """The holder contract's name for :attr:`has_leadership`."""
        return self._leader

    def hold(
        self, *, cancel_on_loss: bool = True, timeout: float | None = None
    ) -> HoldContext[LeaderLatch]:
        """``async with latch.hold():`` wait until we lead, then run the block as leader.

        With ``cancel_on_loss`` the block is cancelled when leadership is lost
        (closing the latch counts); leaving it after a loss raises
        LeadershipLostError. Leaving it gives nothing up: the latch stays in the
        election until closed. OperationTimeoutError if ``timeout`` passes before
        we lead; the errors of :meth:`wait_leader` otherwise.
        """
        holding = _LatchHolding(self, check_timeout(timeout, path=self.path))
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    @property
    def node(self) -> str | None:
        """Our node in the queue; None when not queued (not started, closed, or between
        a lost node and its replacement)."""
        contender = self._contender
        return contender.node if contender is not None else None

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        self._life.check_open()
        if self._life.phase is Phase.NEW:
            raise RuntimeError(
                f"leader latch {self.path!r} is not started: use 'async with' or start()"
            )

    async def wait_leader(self, *, timeout: float | None = None) -> bool:
        """Wait until this participant leads: True; False if ``timeout`` passed first
        (Curator's ``await``).

        Raises RuntimeError if the latch is not started, RecipeClosedError if it
        is closed (also while waiting), ClientClosedError if its client closed,
        and the error of a failed background task.
        """
        timeout = check_timeout(timeout, path=self.path)
        self._check_usable()
        if self._leader:
            return True
        subscription = self._changes.subscribe()
        try:
            with anyio.move_on_after(timeout):
                async for _leading in subscription:
                    if self._leader:
                        return True
                self._check_usable()
                raise AssertionError("the latch ended without saying why")
            return False
        finally:
            await subscription.aclose()

    async def wait_lost(self) -> None:
        """Wait until this participant stops leading (NotOwnerError if it does not lead)."""
        if not self._leader:
            raise NotOwnerError(f"leader latch {self.path!r} does not lead")
        await self._lost.wait()

    def changes(self) -> ChangeStream[bool]:
        """``has_leadership`` now, then each time it changes; ends when the latch closes.

        Raises what ended the latch otherwise (ClientClosedError, or the error of a
        failed background task). Changes are queued until read, none dropped.
        """
        return self._changes.subscribe(first=[self._leader])

    def add_listener(self, callback: Callable[[bool], object]) -> None:
        """Call ``callback(leading)`` each time ``has_leadership`` changes, in order,
        from the task that changed it (a callback must not block; its errors are
        logged)."""
        self._changes.add_listener(callback, self.path)

    def remove_listener(self, callback: Callable[[bool], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._changes.remove_listener(callback)

    def _leading_term(self) -> _LatchTerm:
        term = self._term
        if term is None or term.lost or not self._leader:
            raise NotOwnerError(f"leader latch {self.path!r} does not lead")
        return term

    @property
    def fencing_token(self) -> int:
        """While leading: a number that grows with every new leader of this path.

        It is our node's creation zxid. Hand it to the resource the leader writes
        to, which refuses a smaller token than it has seen. NotOwnerError when
        not leading.
        """
        return self._leading_term().contender.czxid

    def _leader_node(self) -> str:
        node = self._leading_term().contender.node
        assert node is not None
        return node

    def fence(self) -> Fence:
        """Proof of leading, for ``client.transaction().guard(latch.fence())``: the
        transaction applies only while our node exists (NotOwnerError when not leading)."""
        return self._candidacy.fence(self._leader_node())

    def transaction(self) -> Transaction:
        """A transaction that applies only while our node exists; if it is gone,
        ``commit()`` applies nothing and raises LeadershipLostError."""
        return self._candidacy.transaction(self._leader_node())

    async def participants(self) -> list[Participant]:
        """Every participant in queue order, with its id; the first leads (``holds``,
        with its ``fencing_token``).

        Curator's order: during a hand-over the first may be a participant that
        is about to give way; :meth:`leader` and :meth:`observe` say who leads."""
        return await self._candidacy.participants()

    async def leader(self) -> Participant | None:
        """The leading participant; None if nobody takes part (where Curator returns
        an empty dummy participant)."""
        return await self._candidacy.leader()

    def observe(self) -> ChangeStream[Participant | None]:
        """Who leads, now and after every change: see :meth:`LeaderObserver.observe`
        (the same stream, whether or not this latch leads or is started)."""
        return self._candidacy.observe()

    async def proclaim(self, data: bytes) -> None:
        """While leading: advertise ``data`` (what :meth:`observe` and
        :meth:`LeaderObserver.observe` report as the leader's ``data``) without
        ending the term.

        Written to the election node in a transaction guarded by our node, so a
        leader that lost its term writes nothing: LeadershipLostError then;
        NotOwnerError when not leading. Our own node keeps holding our id,
        which is what Curator reads. The proclaimed data lasts for this term.
        """
        with self._candidacy.span("aiocoord.leader.proclaim") as op:
            await self._candidacy.proclaim(self._leader_node(), data)
            op.outcome("proclaimed")

    async def resign(self, *, requeue: bool = True) -> None:
        """While leading: end the term now, and queue again at the back (or, with
        ``requeue=False``, leave the election: the latch closes).

        Leadership is dropped first (``hold()`` blocks are cancelled, their
        exit raises LeadershipLostError saying "resigned"), then our node is
        deleted, so the next participant leads. NotOwnerError when not leading.
        """
        check_flag(requeue, "requeue", path=self.path)
        with self._candidacy.span("aiocoord.leader.resign") as op:
            term = self._leading_term()
            op.set("aiocoord.fencing_token", term.contender.czxid)
            self._end_term(
                term,
                "resigned",
                None,
                requeue=requeue,
                outcome="resigned",
                given_up=GivenUp.resign(requeue),
            )
            op.outcome("resigned")
            await settle(term.ending)
            if not requeue:
                await self.aclose()

    async def hand_over(self, *, to: str, timeout: float | None = None) -> None:
        """While leading: pass leadership to participant ``to`` (an id), who leads next.

        Our term ends as for :meth:`resign` (the loss's reason says "handed
        over to ..."); we queue again behind the others. The election record
        names ``to``'s node, and every aiocoord participant that reaches the
        head before it gives way; ``to`` clears the record once it leads. If
        ``to`` leaves first, the record is ignored (it names a node, not an
        id), so nothing waits on a participant that is gone. Curator
        participants ignore the record: one ahead of ``to`` leads as usual.

        Returns once somebody leads again (``to``, unless it left meanwhile);
        OperationTimeoutError if nobody does within ``timeout`` seconds (the
        hand-over still goes on). InvalidArgumentError if ``to`` is not queued;
        NotOwnerError when not leading; LeadershipLostError if the term is lost
        (its session ends) before the hand-over is under way.
        """
        timeout = check_timeout(timeout, path=self.path)
        with self._candidacy.hand_over_span(to) as op:
            target = await self._candidacy.hand_over_target(self._leader_node(), to)
            term = self._leading_term()  # still ours after the read?
            op.set("aiocoord.fencing_token", term.contender.czxid)
            reason = f"handed over to {to!r}"
            self._end_term(
                term,
                reason,
                target,
                requeue=True,
                outcome="handed_over",
                given_up=GivenUp.hand_over(to),
            )
            op.outcome("handed_over")
            await settle(term.ending)
            await self._candidacy.next_leader(op, timeout)


class _LatchHolding:
    """A LeaderLatch's side of :class:`HoldContext`: the block runs while we lead."""

    def __init__(self, latch: LeaderLatch, timeout: float | None) -> None:
        self._latch = latch
        self._timeout = timeout
        self.path = latch.path

    async def take_hold(self) -> tuple[LeaderLatch, Hold]:
        latch = self._latch
        deadline = Deadline(self._timeout)
        while True:
            if not await latch.wait_leader(timeout=deadline.remaining()):
                raise OperationTimeoutError(
                    f"did not become leader of {latch.path!r} within {self._timeout} s"
                )
            term = latch._term
            if term is not None and not term.lost:
                return latch, term

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        """The latch stays in the election: leaving the block gives nothing up."""

    def lost_error(self, reason: str) -> HoldLostError:
        return LeadershipLostError(self.path, reason)
