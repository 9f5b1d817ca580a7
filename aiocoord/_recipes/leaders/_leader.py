"""Leader election: LeaderLatch and LeaderElection (Curator's LeaderLatch and
LeaderSelector, node for node).

Participants queue as protected, ephemeral, sequential nodes under the election
path, each holding its participant id (UTF-8). The lowest sequence number
leads; every other participant watches only the one just ahead of it.

- :class:`LeaderLatch` nodes are ``_c_<uuid>-latch-<seq>``. A participant
  stays in the queue until it closes; ``has_leadership`` says whether it leads
  now, and a background task follows the queue and the connection.
- :class:`LeaderElection` nodes are a Mutex's, ``_c_<uuid>-lock-<seq>`` (Curator's
  LeaderSelector is an InterProcessMutex). Leading is holding that lock for one
  block, a *term*, which is cancelled the moment leadership is lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ..._checks import check_flag, check_recipe_acl, check_text, check_timeout
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
from ..._session import (
    Broadcast,
    ChangeStream,
    Client,
    ErrorPolicy,
    Fence,
    Transaction,
    check_error_policy,
    retry_on_connection_loss,
)
from ..._types import ACL
from .._kit._args import generated_participant_id, recipe_path
from .._kit._contenders import LOCK_NAME, Contender, mutex_rule, sort_contenders
from .._kit._holding import Hold, HoldContext, LossMonitor, native_cancel_pending
from .._kit._lifecycle import Lifecycle, Phase
from .._kit._participants import Participant
from .._kit._waits import Deadline, wait_gone

__all__ = ["LeaderElection", "LeaderLatch"]

log = logging.getLogger("aiocoord")

LATCH_NAME = "latch-"
"""Curator's LeaderLatch node name."""


async def _participants(client: Client, path: str, lock_name: str) -> list[Participant]:
    """The participants under ``path`` in queue order (their data read in one round trip)."""

    async def read() -> list[Participant]:
        try:
            names = await client.children(path)
        except NoNodeError:
            return []
        ordered = sort_contenders(names, (lock_name,))
        if not ordered:
            return []
        pipeline = client.pipeline()
        for name in ordered:
            pipeline.get(f"{path}/{name}")
        found: list[Participant] = []
        for name, result in zip(ordered, await pipeline.execute(), strict=True):
            if isinstance(result, NoNodeError):
                continue  # it left between the listing and the read
            if isinstance(result, Exception):
                raise result
            data, _stat = result
            # Java decodes with replacement too: both sides show the same id.
            node_id = data.decode("utf-8", errors="replace")
            found.append(Participant(node_id, f"{path}/{name}", data, not found))
        return found

    return await retry_on_connection_loss(client, read)


def _check_arguments(
    client: Client,
    path: str,
    participant_id: str | None,
    error_policy: ErrorPolicy | None,
    what: str,
) -> tuple[str, bytes]:
    """Validate a recipe's arguments (before any I/O): the participant id (a
    generated one for None) and its bytes, what our node holds."""
    recipe_path(client, path, what)
    check_error_policy(error_policy, path)
    if participant_id is None:
        participant_id = generated_participant_id()
    return participant_id, check_text(participant_id, "participant_id", path=path)


async def _node_gone(client: Client, node: str, session_id: int) -> str:
    """Wait until our ``node`` (owned by session ``session_id``) is gone; say why.

    Rides out SUSPENDED (the watch survives a reconnection to the same session)
    and outages of any length.
    """
    try:
        gone = await wait_gone(client, node, session=session_id, outlast_outages=True)
    except ClientClosedError:
        return "the client was closed"
    assert gone is not None  # no deadline
    return gone.value


async def _stop(task: asyncio.Task[Any] | None) -> asyncio.CancelledError | None:
    """Cancel ``task`` and wait for it to end, even if the caller is cancelled
    meanwhile: that cancellation is returned, for the caller to raise once its
    own cleanup is done (a native ``Task.cancel()`` goes through anyio shields)."""
    if task is None:
        return None
    task.cancel()
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError as error:
        # The task ends at its next step, with nothing awaited by it left behind.
        return error
    return None


# --- LeaderLatch --------------------------------------------------------------------------


class _LatchTerm(Hold):
    """One stretch of leadership of a latch: lost when the connection state, the
    session or our node says so (reported to the latch at once)."""

    def __init__(self, contender: Contender, on_lost: Callable[[], None]) -> None:
        super().__init__()
        self.contender = contender
        self._on_lost = on_lost

    def mark_lost(self, reason: str, *, warn: bool = True) -> None:
        if self.lost:
            return
        super().mark_lost(reason, warn=warn)
        self._on_lost()


class LeaderLatch:
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
    ) -> None:
        self.participant_id, self._data = _check_arguments(
            client, path, participant_id, error_policy, "leader latch"
        )
        """This participant's id, stored in its node as UTF-8 (Curator's latch id);
        ``<host>:<pid>:<random hex>`` unless one was given."""
        self._acl = check_recipe_acl(acl, path)
        self._client = client
        self.path = path
        self._monitor = LossMonitor(
            client, error_policy or client.error_policy, f"leadership of {path!r}"
        )
        self._life = Lifecycle(f"leader latch {path!r}", self._open, self._shut)
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

    async def start(self) -> None:
        """Join the election: our node is in the queue when this returns.

        A background task then follows the queue and the connection until
        :meth:`aclose` (or the client closes). A latch starts once
        (RuntimeError if started again, RecipeClosedError once closed); if
        this raises, no node is left and it may be started again. An
        :meth:`aclose` meanwhile makes it raise RecipeClosedError at once.
        """
        await self._life.start()

    async def aclose(self) -> None:
        """Leave the election: stop leading, then delete our node (shielded, bounded).

        Cancels a :meth:`start` under way; once this returns, no node of ours
        is in the queue, nor will one appear later (a create still in flight
        is found by its marker and deleted first). Idempotent, and fine before
        :meth:`start`. ``changes()`` iterations end; ``wait_leader()`` raises.
        """
        await self._life.aclose()

    async def __aenter__(self) -> LeaderLatch:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`): queue up, start following the queue."""
        self._contender = contender = self._new_contender()
        try:
            await contender.queue()
            self._task = self._client.start_background(
                self._follow(contender), name=f"aiocoord-leader-latch {self.path}"
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
        await _stop(task)  # the close runs in a task of its own: nothing cancels it
        contender, self._contender = self._contender, None
        if contender is not None:
            await contender.abandon()  # shielded and time-bounded
        self._end(None)

    def _new_contender(self) -> Contender:
        return Contender(
            self._client,
            self.path,
            LATCH_NAME,
            (LATCH_NAME,),
            mutex_rule(1, (LATCH_NAME,)),
            self._data,
            # Read the queue again after every wake-up, so a decision to lead
            # also sees that our own node is still there.
            last_blocker_shortcut=False,
            acl=self._acl,
        )

    # --- the background task ------------------------------------------------------------

    async def _follow(self, contender: Contender) -> None:
        try:
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
                if not leads:
                    # Our node went with the session or was deleted: queue again, at the back.
                    await contender.abandon()
                    continue
                if native_cancel_pending():
                    raise asyncio.CancelledError
                # The decision rests on a reply from the session owning our node; with
                # no await until the monitor has the term, every later state counts.
                term = _LatchTerm(contender, lambda: self._set_leader(False))
                self._monitor.add(term, contender.session_id)
                try:
                    if not term.lost:
                        self._term = term
                        self._set_leader(True)
                        await self._until_lost(term)
                        log.info("leader latch %r: leadership lost: %s", self.path, term.reason)
                finally:
                    self._monitor.discard(term)
                    self._term = None
                    if not term.lost:  # cancelled: the latch or its client is closing
                        term.mark_lost("the latch was closed", warn=False)
                    self._set_leader(False)
                # Same node: read the queue again (once reconnected), which also
                # tells whether the node survived.
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

    async def _until_lost(self, term: _LatchTerm) -> None:
        contender = term.contender
        assert contender.node is not None
        with anyio.CancelScope() as scope:
            term.add_scope(scope)  # a connection state or lost session ends the wait
            try:
                reason = await _node_gone(self._client, contender.node, contender.session_id)
                term.mark_lost(reason)
            finally:
                term.remove_scope(scope)
        if native_cancel_pending():
            raise asyncio.CancelledError

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

    def fence(self) -> Fence:
        """Proof of leading, for ``client.transaction().guard(latch.fence())``: the
        transaction applies only while our node exists (NotOwnerError when not leading)."""
        node = self._leading_term().contender.node
        assert node is not None
        return Fence(node, self.path, lost_error=LeadershipLostError)

    def transaction(self) -> Transaction:
        """A transaction that applies only while our node exists; if it is gone,
        ``commit()`` applies nothing and raises LeadershipLostError."""
        return self._client.transaction().guard(self.fence())

    async def participants(self) -> list[Participant]:
        """Every participant in queue order, with its id; the first leads (``holds``)."""
        return await _participants(self._client, self.path, LATCH_NAME)

    async def leader(self) -> Participant | None:
        """The leading participant; None if nobody takes part (where Curator returns
        an empty dummy participant)."""
        participants = await self.participants()
        return participants[0] if participants else None


# --- LeaderElection ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Term:
    node: str
    czxid: int
    hold: Hold


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
        contender = election._new_contender()
        try:
            if not await contender.acquire(timeout=self._timeout):
                raise OperationTimeoutError(
                    f"did not become leader of {election.path!r} within {self._timeout} s"
                )
        except BaseException:
            election._busy = False
            raise
        # The grant rests on a reply from the session owning our node; with no
        # await until the monitor has the hold, every later state counts.
        hold = Hold()
        election._monitor.add(hold, contender.session_id)
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

    async def _watch(self, hold: Hold, node: str, session_id: int) -> None:
        """Mark the term lost once our node is gone (deleted by someone else, or
        with the session)."""
        try:
            reason = await _node_gone(self._election._client, node, session_id)
        except asyncio.CancelledError:
            if not self._stopping:  # not the term's end: the client is closing
                hold.mark_lost("the client was closed")
            raise
        hold.mark_lost(reason)

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        election = self._election
        contender, self._contender = self._contender, None
        assert contender is not None
        try:
            election._term = None  # not leading from here on; the node goes next
            self._stopping = True
            # Judge the term before our own delete can look like a loss: the
            # monitor lets go, and the watcher is told to stop first and reaped
            # after the delete, which goes out without waiting for it (the next
            # leader waits on that).
            election._monitor.discard(hold)
            watcher, self._watcher = self._watcher, None
            if watcher is not None:
                watcher.cancel()
            try:
                await contender.release()  # finishes the delete even if cancelled meanwhile
            finally:
                cancelled = await _stop(watcher)
            if cancelled is not None:
                raise cancelled
        finally:
            election._busy = False

    def lost_error(self, reason: str) -> HoldLostError:
        return LeadershipLostError(self.path, reason)


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
    ) -> None:
        self.participant_id, self._data = _check_arguments(
            client, path, participant_id, error_policy, "leader election"
        )
        """This participant's id, stored in its node as UTF-8 (Curator's
        LeaderSelector id); ``<host>:<pid>:<random hex>`` unless one was given
        (where Curator stores the client's IP address)."""
        self._acl = check_recipe_acl(acl, path)
        self._client = client
        self.path = path
        self._monitor = LossMonitor(
            client, error_policy or client.error_policy, f"leadership of {path!r}"
        )
        self._rule = mutex_rule(1, (LOCK_NAME,))
        self._term: _Term | None = None
        self._busy = False

    def __repr__(self) -> str:
        return (
            f"<LeaderElection {self.path!r} id={self.participant_id!r} "
            f"leading={self.has_leadership}>"
        )

    def _new_contender(self) -> Contender:
        # The queue of Curator's LeaderSelector: an InterProcessMutex's nodes.
        return Contender(
            self._client,
            self.path,
            LOCK_NAME,
            (LOCK_NAME,),
            self._rule,
            self._data,
            # As the Mutex: once the last node ahead is gone we lead, without
            # listing the queue again (a hand-over is one notification, where
            # Curator's selector lists again). Our own node being deleted by
            # someone else meanwhile is the one case this misses: the term's
            # node watch reports it within a round trip and cancels the term.
            acl=self._acl,
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

    @property
    def is_held(self) -> bool:
        """The holder contract's name for :attr:`has_leadership`."""
        return self.has_leadership

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

    def fence(self) -> Fence:
        """Proof of leading, for any transaction to require (``txn.guard(election.fence())``).

        The transaction applies only while our node exists; a failed guard
        raises LeadershipLostError. Errors as :attr:`fencing_token`.
        """
        return Fence(self._current_term().node, self.path, lost_error=LeadershipLostError)

    def transaction(self) -> Transaction:
        """A transaction that applies only while we still lead (our node exists);
        otherwise ``commit()`` applies nothing and raises LeadershipLostError."""
        return self._client.transaction().guard(self.fence())

    async def wait_lost(self) -> None:
        """Inside a term: wait until its leadership is lost (NotOwnerError outside one).

        The term belongs to this object, not to a task: any task may wait on it
        (``tg.start_soon(election.wait_lost)`` from inside the term).
        """
        term = self._term
        if term is None:
            raise NotOwnerError(f"{self.path!r}: this participant does not lead (not in a term)")
        await term.hold.wait_lost()

    async def participants(self) -> list[Participant]:
        """Every participant in queue order, with its id; the first leads (``holds``)."""
        return await _participants(self._client, self.path, LOCK_NAME)

    async def leader(self) -> Participant | None:
        """The leading participant; None if nobody takes part (where Curator returns
        an empty dummy participant)."""
        participants = await self.participants()
        return participants[0] if participants else None
