"""LeaderLatch and LeaderElection, on one base (:class:`Leading`) that holds what
both share: the constructor, whether we lead and its stream, who leads, and what
a leader holds.

LeaderLatch takes part for as long as the latch is open (Curator's LeaderLatch,
node for node: ``_c_<uuid>-aio-latch-<seq>`` holding the participant id);
LeaderElection leads in turns, one term at a time (Curator's LeaderSelector:
a Mutex's ``_c_<uuid>-aio-lock-<seq>`` holding the participant id). See
``_common`` for the tag and the hand-over rule, ``_participant`` for the
participant both are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio

from ..._checks import check_flag, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
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
from .._kit import (
    LOCK_NAME,
    Contender,
    Deadline,
    Hold,
    HoldContext,
    Lifecycle,
    NotifyingHold,
    Participant,
    Phase,
    Resource,
    native_cancel_pending,
    wait_lost_within,
)
from ._common import LATCH_NAME, end_term, give_up, gives_way, node_gone, settle, stop
from ._participant import TAKEN_OVER, Candidacy, GivenUp

__all__ = ["GROUP_KIND", "GroupElection", "LeaderElection", "LeaderLatch", "Leading"]

log = logging.getLogger("aiocoord")


# --- what both share -----------------------------------------------------------------------


class Term(NotifyingHold):
    """One stretch of leadership: a hold that tells its recipe the moment it is lost."""


class Leading:
    """The members LeaderLatch and LeaderElection share: one constructor (its
    checks are :class:`Candidacy`'s), who is there and who leads, whether we lead
    and its stream, and what a leader holds (fence, token, transaction, proclaim,
    the wait for its loss).

    A subclass names its queue's node (``_lock_name``), itself in messages
    (``_what``) and its telemetry label (``_kind``; a subclass may give another,
    as a group's elections do), sets up its own state in :meth:`_setup`, and says
    what it leads on now in :meth:`_leading_on`.
    """

    _lock_name: ClassVar[str]
    _what: ClassVar[str]
    _kind: ClassVar[str]

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
            lock_name=self._lock_name,
            what=self._what,
            kind=self._kind,
            participant_id=participant_id,
            error_policy=error_policy,
            acl=acl,
            priority=priority,
        )
        self.participant_id = candidacy.participant_id
        """This participant's id, stored in its node as UTF-8 (Curator's latch or
        LeaderSelector id); ``<host>:<pid>:<random hex>`` unless one was given."""
        self.priority = candidacy.priority
        """This participant's priority (None: the lowest)."""
        self._client = client
        self.path = path
        self._leader = False
        self._changes: Broadcast[bool] = Broadcast(f"leadership of {path!r}")
        self._setup()

    def _setup(self) -> None:
        """The subclass's own state, set up once the shared part is."""

    def _leading_on(self) -> tuple[Term, str, int]:
        """While leading: the term, our node and its creation zxid. NotOwnerError
        when not leading (LeadershipLostError for a term that is lost)."""
        raise NotImplementedError

    def _set_leader(self, leading: bool) -> None:
        """Whether we lead now: the state :attr:`has_leadership` reads and
        :meth:`changes` streams."""
        if self._leader is leading:
            return
        self._leader = leading
        self._changes.publish(leading)

    # --- whether we lead ------------------------------------------------------------------

    @property
    def has_leadership(self) -> bool:
        """Whether this participant leads now (local state: no I/O)."""
        return self._leader

    @property
    def is_held(self) -> bool:
        """The holder contract's name for :attr:`has_leadership`."""
        return self._leader

    def changes(self) -> ChangeStream[bool]:
        """``has_leadership`` now, then each time it changes; changes are queued
        until read, none dropped. A latch's stream ends when the latch closes
        (raising what ended it otherwise: ClientClosedError, or the error of a
        failed background task); an election, which is never started or closed,
        streams until the stream is closed (``aclose()``, or ``async with``)."""
        return self._changes.subscribe(first=[self._leader])

    def add_listener(self, callback: Callable[[bool], object]) -> None:
        """Call ``callback(leading)`` as :meth:`changes` yields (each time
        ``has_leadership`` changes), in order, from the task that changed it (a
        callback must not block; its errors are logged), until removed."""
        self._changes.add_listener(callback, self.path)

    def remove_listener(self, callback: Callable[[bool], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._changes.remove_listener(callback)

    # --- who is there ------------------------------------------------------------------------

    async def participants(self) -> list[Participant]:
        """Every participant in queue order, with its id; the first leads (``holds``,
        with its ``fencing_token``).

        Curator's order: during a hand-over the first may be a participant that
        is about to give way; :meth:`leader` and :meth:`leader_changes` say who leads."""
        return await self._candidacy.participants()

    async def leader(self) -> Participant | None:
        """The leading participant; None if nobody takes part (where Curator returns
        an empty dummy participant)."""
        return await self._candidacy.leader()

    def leader_changes(self) -> ChangeStream[Participant | None]:
        """Who leads, now and after every change: the stream of
        :meth:`LeaderObserver.changes`, whether or not this participant leads or
        takes part."""
        return self._candidacy.leader_changes()

    # --- what a leader holds -----------------------------------------------------------------

    @property
    def fencing_token(self) -> int:
        """While leading: a number that grows with every term of every participant.

        It is our node's creation zxid. Hand it to the resource the leader writes
        to, which refuses a smaller token than it has seen. NotOwnerError when
        not leading (LeadershipLostError once a term's leadership is lost).
        """
        return self._leading_on()[2]

    def fence(self) -> Fence:
        """Proof of leading, for ``client.transaction().guard(x.fence())``: the
        transaction applies only while our node exists, else it raises
        LeadershipLostError. Errors as :attr:`fencing_token`."""
        return self._candidacy.fence(self._leading_on()[1])

    def transaction(self) -> Transaction:
        """A transaction that applies only while we still lead (our node exists);
        otherwise ``commit()`` applies nothing and raises LeadershipLostError."""
        return self._candidacy.transaction(self._leading_on()[1])

    async def proclaim(self, data: bytes) -> None:
        """While leading: advertise ``data`` (what :meth:`leader_changes` and
        :meth:`LeaderObserver.changes` report as the leader's ``data``) without
        ending the term.

        Written to the election node in a transaction guarded by our node, so a
        leader that lost its term writes nothing: LeadershipLostError then;
        NotOwnerError when not leading. Our own node keeps holding our id,
        which is what Curator reads. The proclaimed data lasts for this term.
        """
        with self._candidacy.span("aiocoord.leader.proclaim") as op:
            await self._candidacy.proclaim(self._leading_on()[1], data)
            op.outcome("proclaimed")

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """While leading: wait until this term's leadership is lost: True; False if
        ``timeout`` passed first. NotOwnerError when not leading.

        The term belongs to this object, not to a task: any task may wait on it
        (``tg.start_soon(x.wait_lost)`` from inside the term).
        """
        term = self._waited_term()
        return await wait_lost_within(term, timeout, self.path)

    def _waited_term(self) -> Term:
        """The term :meth:`wait_lost` waits on (a lost one answers at once)."""
        return self._leading_on()[0]


# --- LeaderLatch --------------------------------------------------------------------------


class _LatchTerm(Term):
    """One stretch of leadership of a latch: lost when the connection state, the
    session or our node says so (reported to the latch at once)."""

    def __init__(self, contender: Contender, on_lost: Callable[[], None]) -> None:
        super().__init__(on_lost)
        self.contender = contender
        self.ending: asyncio.Task[None] | None = None
        """Giving the node up, when the term was ended on purpose (resign, hand-over)."""
        self.requeue = True
        """After such an end: queue again (or leave the election)."""


class LeaderLatch(Leading, Resource):
    """Take part in an election for as long as the latch is open (Curator's LeaderLatch).

    ``async with LeaderLatch(client, path, participant_id="me") as latch:``
    joins the queue (the first participant leads) and leaves it on exit. Meanwhile
    ``has_leadership`` says whether we lead now, ``await wait_leader()`` waits
    for it, and ``async for leading in latch.changes()`` follows it (as
    :meth:`add_listener`'s callbacks do).

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
    :meth:`leader_changes` follows who leads. With ``priority`` (an int; None, the
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

    _lock_name = LATCH_NAME
    _what = "leader latch"
    _kind = "leader_latch"

    def _setup(self) -> None:
        path = self.path
        self._life = Lifecycle(f"leader latch {path!r}", self._open, self._shut)
        Resource.__init__(self, self._life)
        self._term: _LatchTerm | None = None
        self._contender: Contender | None = None
        self._task: asyncio.Task[Any] | None = None
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

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._changes.close(error)

    # --- leading ----------------------------------------------------------------------------

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

    def _leading_term(self) -> _LatchTerm:
        term = self._term
        if term is None or term.lost or not self._leader:
            raise NotOwnerError(f"leader latch {self.path!r} does not lead")
        return term

    def _leading_on(self) -> tuple[Term, str, int]:
        term = self._leading_term()
        node = term.contender.node
        assert node is not None
        return term, node, term.contender.czxid

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

    async def hand_over(self, *, to: str, timeout: float | None = None, wait: bool = True) -> None:
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
        hand-over still goes on). With ``wait=False`` it returns once our node
        is gone, without following who leads next. InvalidArgumentError if
        ``to`` is not queued; NotOwnerError when not leading; LeadershipLostError
        if the term is lost (its session ends) before the hand-over is under way.
        """
        timeout = check_timeout(timeout, path=self.path)
        check_flag(wait, "wait", path=self.path)
        with self._candidacy.hand_over_span(to) as op:
            target = await self._candidacy.hand_over_target(self._leading_on()[1], to)
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
            if wait:
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


# --- LeaderElection ----------------------------------------------------------------------


@dataclass(slots=True)
class _Term:
    node: str
    czxid: int
    hold: Term
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
            hold = Term(lambda: election._set_leader(False))
            candidacy.start_term(hold, contender)
            candidacy.elected(op, contender, position, gave_way)
        node = contender.node
        assert node is not None
        self._contender = contender
        election._term = _Term(node, contender.czxid, hold)
        if not hold.lost:
            election._set_leader(True)
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
            election._set_leader(False)
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


class LeaderElection(Leading):
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
    participant; :meth:`changes` follows whether we lead (as
    :meth:`add_listener`'s callbacks do), :meth:`leader_changes` who leads. With ``priority`` (an
    int; None, the default, is below every int) a participant that queues
    behind a leader of lower priority takes over at once, by a hand-over from
    that leader, whose term ends through the loss path ("priority take-over
    by ..."). Curator participants take no part in priorities.

    ``acl`` (default: the client's ``default_acl``) is the ACL of our node and
    of the missing parents made for it.
    """

    # The queue of Curator's LeaderSelector: an InterProcessMutex's nodes.
    _lock_name = LOCK_NAME
    _what = "leader election"
    _kind = "leader_election"

    def _setup(self) -> None:
        self._term: _Term | None = None
        self._busy = False
        self._leave = False

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

    def _current_term(self) -> _Term:
        term = self._term
        if term is None:
            raise NotOwnerError(f"{self.path!r}: this participant does not lead (not in a term)")
        if term.hold.lost:
            raise LeadershipLostError(self.path, term.hold.reason)
        return term

    def _leading_on(self) -> tuple[Term, str, int]:
        term = self._current_term()
        return term.hold, term.node, term.czxid

    def _waited_term(self) -> Term:
        term = self._term
        if term is None:
            raise NotOwnerError(f"{self.path!r}: this participant does not lead (not in a term)")
        return term.hold

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


GROUP_KIND = "leader_election_group"
"""The telemetry label of a LeaderElectionGroup and its elections."""


class GroupElection(LeaderElection):
    """One of a LeaderElectionGroup's elections: it reports as the group, one recipe."""

    _kind = GROUP_KIND
