"""Fair, reentrant locks: Mutex and ReadWriteLock (Curator's InterProcessMutex and
InterProcessReadWriteLock, node for node)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_bytes, check_flag, check_int, check_recipe_acl, check_timeout
from ..._exceptions import (
    ClientClosedError,
    DeadlockError,
    InvalidArgumentError,
    LockLostError,
    NoConnectionError,
    NoNodeError,
    SessionExpiredError,
)
from ..._session import (
    Client,
    ErrorPolicy,
    Fence,
    Transaction,
    check_error_policy,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL
from .._kit import (
    LOCK_NAME,
    READ_LOCK_NAME,
    WRITE_LOCK_NAME,
    Contender,
    Decision,
    Hold,
    HoldContext,
    LockHolding,
    LossMonitor,
    Participant,
    Rule,
    acquiring_task,
    current_task,
    default_node_data,
    mutex_rule,
    not_owner,
    read_children,
    read_rule,
    recipe_path,
    sequence_key,
    sort_contenders,
    task_owned_acquire,
    wait_lost_within,
)
from ._handoff import MAX_LOCAL_GRANTS, LocalQueue, LockOwner, fencing_token

__all__ = [
    "Mutex",
    "QuietMutex",
    "ReadWriteLock",
]

log = logging.getLogger("aiocoord")

REVOKE_MESSAGE = b"__REVOKE__"
"""What a revocation request writes into a contender's node (Curator's Revoker)."""


class _LockHold(Hold):
    def __init__(self, contender: Contender, grant: int = 0) -> None:
        super().__init__()
        self.contender = contender
        self.grant = grant
        """Which grant on the node this is (0 first; more only with local hand-off)."""
        self.count = 1
        self.revoke_requested = asyncio.Event()
        self.revocation_read = asyncio.Event()
        """Set once the node's data has been read (or could not be): from then on
        ``revoke_requested`` tells requests made before the grant too."""
        self.revocation_watch: asyncio.Task[Any] | None = None

    async def wait_revoked(self) -> None:
        await self.revoke_requested.wait()

    def stop_watching(self) -> None:
        if self.revocation_watch is not None:
            self.revocation_watch.cancel()
            self.revocation_watch = None


async def _watch_revocation(client: Client, node: str, hold: _LockHold) -> None:
    """Set ``hold.revoke_requested`` once someone writes REVOKE_MESSAGE into ``node``.

    The first read also finds a request made while the node was still waiting
    in the queue: the message stays in the node's data.
    """
    try:
        while True:
            try:
                data, _stat, watch = await retry_on_connection_loss(
                    client, functools.partial(client.watch_data, node)
                )
            except NoConnectionError:
                continue  # still cut off: the session may yet come back, or end
            except (NoNodeError, SessionExpiredError, ClientClosedError):
                return  # released, or gone with the session (the hold's loss tells that)
            async with watch:
                if data == REVOKE_MESSAGE:
                    log.info("lock node %r: revocation requested", node)
                    hold.revoke_requested.set()
                    return
                hold.revocation_read.set()
                try:
                    await watch  # a change or the delete: read again
                except (SessionExpiredError, ClientClosedError):
                    return
    finally:
        hold.revocation_read.set()


class Mutex:
    """A fair, reentrant distributed lock (Curator's InterProcessMutex).

    Contenders are served in the order they asked; each waits only on the one
    queued just ahead of it. The lock belongs to the asyncio task that acquired
    it: that task may acquire again (a hold count), while any other task, in
    this process or another, waits its turn.

    ``async with mutex:`` holds it for a block; ``mutex.hold()`` does the same
    and cancels the block if the lock is lost (see :class:`HoldContext`).
    What counts as losing it is the error policy: by default a SUSPENDED
    connection already does (:class:`~aiocoord.StandardErrorPolicy`); with
    :class:`~aiocoord.SessionErrorPolicy` only an expired session does.

    ``acl`` (default: the client's ``default_acl``) is the ACL of every node
    the lock makes, the lock path and its missing parents included.

    ``local_handoff=N`` (opt-in) lets the tasks sharing this object pass the
    lock among themselves: the object keeps one node in the queue for all of
    them, and once it holds, up to N of its waiting tasks take the lock in
    turn, in the order they asked, with no server request. Then the node is
    given up, so other processes queued behind it are served, and a new one
    queues at the back for the tasks still waiting. Other processes thus wait
    at most N of this object's grants per turn. Every grant has its own,
    larger fencing token.

    ``revocable=True`` (Curator's ``makeRevocable``) lets others ask a holder
    to give the lock up: :meth:`request_revocation` (or Curator's
    ``Revoker.attemptRevoke``) marks its node, and the holder's
    :meth:`wait_revoked` returns. Releasing stays the holder's decision.
    """

    _lock_name = LOCK_NAME
    _lock_names: tuple[str, ...] = (LOCK_NAME,)
    _last_blocker_shortcut = True
    _mutex_queue = True
    """One holder, nobody queues ahead: the client's contenders may share what
    they learn of the queue (see QueueView)."""
    _telemetry_kind = "mutex"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
        local_handoff: int = 0,
        revocable: bool = False,
    ) -> None:
        recipe_path(client, path, "lock")
        bound = check_int(
            local_handoff, "local_handoff", path=path, minimum=0, maximum=MAX_LOCAL_GRANTS
        )
        self._revocable = check_flag(revocable, "revocable", path=path)
        self._client = client
        self.path = path
        self._data = default_node_data() if data is None else check_bytes(data, "data", path=path)
        self._acl = check_recipe_acl(acl, path)
        """The ACL of our nodes and of the parents made for them (None: the client's)."""
        error_policy = check_error_policy(error_policy, path)
        self._tags: _telemetry.Tags | None = _telemetry.recipe_tags(
            client.telemetry, self._telemetry_kind, path, client.namespace
        )
        self._monitor = LossMonitor(
            client, error_policy or client.error_policy, f"lock {path!r}", tags=self._tags
        )
        self._holds: dict[asyncio.Task[Any], _LockHold] = {}
        self._mutex_rule = mutex_rule(1, self._lock_names)
        self._local = (
            LocalQueue(
                LockOwner(
                    client,
                    path,
                    self._monitor,
                    self._new_contender,
                    self._grant,
                    self._release_task,
                ),
                bound,
            )
            if bound
            else None
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} held={self.is_held}>"

    # --- acquiring ----------------------------------------------------------------

    def _contender_for(self, task: asyncio.Task[Any]) -> Contender:
        return self._contender(self._mutex_rule)

    def _contender(self, rule: Rule, fixed_suffix: str | None = None) -> Contender:
        return Contender(
            self._client,
            self.path,
            self._lock_name,
            self._lock_names,
            rule,
            self._data,
            fixed_suffix=fixed_suffix,
            last_blocker_shortcut=self._last_blocker_shortcut,
            acl=self._acl,
            mutex=self._mutex_queue,
        )

    def _new_contender(self) -> Contender:
        return self._contender(self._mutex_rule)

    def _before_acquire(self, task: asyncio.Task[Any]) -> None:
        """Refuse an acquisition that could never be granted."""

    @task_owned_acquire
    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Wait for the lock; False if ``timeout`` seconds passed first.

        ``timeout`` bounds the wait, not the first look at the queue:
        ``timeout=0`` tries exactly once (as :meth:`try_acquire`), and succeeds
        on a free lock. Cancellation (including an enclosing deadline) leaves
        no node behind. Waiting rides out SUSPENDED; if the session is lost
        meanwhile, the wait goes on in the new session, at the back of the queue.

        The lock belongs to the calling task. An acquire that is all its task
        runs (``asyncio.create_task(mutex.acquire())``, ``ensure_future``, or
        ``asyncio.wait_for(mutex.acquire(), t)`` on Python 3.11, which runs it in
        a task of its own) raises :class:`~aiocoord.DetachedAcquireError` before
        any node is created: use ``acquire(timeout=t)``, ``asyncio.timeout()``
        or ``anyio.fail_after()``. If a task ends while holding the lock, the
        lock is released and a warning logged.
        """
        timeout = check_timeout(timeout, path=self.path)
        task = acquiring_task(f"lock {self.path!r}")
        hold = self._holds.get(task)
        if hold is not None:
            if hold.lost:
                raise LockLostError(self.path, hold.reason)
            hold.count += 1
            return True
        self._before_acquire(task)
        with _telemetry.span("aiocoord.lock.acquire", self._tags, duration=_telemetry.WAIT) as op:
            if self._local is not None:
                if not await self._local.acquire(task, timeout):
                    op.outcome("timeout")
                    return False
            else:
                contender = self._contender_for(task)
                if not await contender.acquire(timeout=timeout):
                    op.outcome("timeout")
                    return False
                if contender.position is not None:
                    op.set("aiocoord.queue_position", contender.position)
                try:
                    self._grant(task, contender, 0)
                except BaseException:
                    # Granted but not recorded (an error policy that raised): nobody
                    # could release this node, so give it back before reporting.
                    await run_cleanup(self._client, contender.release)
                    raise
            op.outcome("acquired")
            if op.recording:
                granted = self._holds[task]
                op.set(
                    "aiocoord.fencing_token", fencing_token(granted.contender.czxid, granted.grant)
                )
        if self._revocable:
            await self._read_revocation(task)
        return True

    async def _read_revocation(self, task: asyncio.Task[Any]) -> None:
        """Wait for the new hold's first look at its node, so that a request made
        while it queued shows in ``revoke_requested`` when acquire returns (one
        round trip, as Curator's revocable lock pays before its own wait)."""
        hold = self._holds.get(task)
        if hold is None or hold.revocation_watch is None:
            return
        try:
            await hold.revocation_read.wait()
        except BaseException:
            # Cancelled holding a lock the caller will never know it has.
            await run_cleanup(self._client, functools.partial(self._release_task, task))
            raise

    def _grant(self, task: asyncio.Task[Any], contender: Contender, grant: int) -> None:
        """Record that ``task`` holds. Called with no await since the decision that
        granted it: the monitor judges every transition."""
        hold = _LockHold(contender, grant)
        try:
            self._holds[task] = hold
            self._monitor.add(
                hold, contender.session_id, token=fencing_token(contender.czxid, grant)
            )
        except BaseException:
            self._holds.pop(task, None)
            self._monitor.discard(hold)
            raise
        task.add_done_callback(self._on_owner_done)
        if self._revocable and contender.node is not None and not hold.lost:
            # Refused while the client closes: the node goes with its session then.
            with contextlib.suppress(RuntimeError):
                hold.revocation_watch = self._client.start_background(
                    _watch_revocation(self._client, contender.node, hold),
                    name=f"aiocoord-lock-revocation {contender.node}",
                )

    @task_owned_acquire
    async def try_acquire(self) -> bool:
        """Take the lock if it is free now (one look at the queue); never wait."""
        return await self.acquire(timeout=0)

    async def release(self) -> None:
        """Release one hold of the calling task; the last one deletes the lock node.

        The delete survives connection loss (it waits for the session, retries,
        and counts an expired session as done); until it is done, the lock
        still counts as held here.
        """
        task = current_task()
        hold = self._holds.get(task)
        if hold is None:
            raise not_owner(self.path)
        if hold.count > 1:
            hold.count -= 1
            return
        await self._release_task(task)

    async def _release_task(self, task: asyncio.Task[Any]) -> None:
        """Give up ``task``'s hold (whatever its count)."""
        hold = self._holds[task]
        if self._local is None:
            # Counted as held here until the node is gone.
            await hold.contender.release()
        del self._holds[task]
        hold.stop_watching()
        self._monitor.discard(hold)
        task.remove_done_callback(self._on_owner_done)
        if self._local is not None:
            await self._local.release()

    def _on_owner_done(self, task: asyncio.Task[Any]) -> None:
        """A task ended while holding the lock: nobody can release it any more, so do it."""
        hold = self._holds.pop(task, None)
        if hold is None:
            return
        hold.stop_watching()
        if not self._client.closed:
            hold.mark_lost("its owning task ended")
        self._monitor.discard(hold)
        if self._client.closed:
            return  # the node went with the session
        log.warning(
            "task %r ended while holding the lock on %r; releasing it "
            "(was it acquired through asyncio.wait_for on Python 3.11?)",
            task.get_name(),
            self.path,
        )
        # Refused while the client closes: the node goes with its session then.
        with contextlib.suppress(RuntimeError):
            self._client.start_background(
                self._release_orphan(hold.contender), name=f"aiocoord-orphan-release {self.path}"
            )

    async def _release_orphan(self, contender: Contender) -> None:
        local = self._local
        await run_cleanup(self._client, contender.release if local is None else local.release)

    async def __aenter__(self) -> Mutex:
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        hold = self._holds.get(current_task())
        await self.release()
        if hold is not None and hold.lost and exc_type is None:
            raise LockLostError(self.path, hold.reason)

    def hold(self, *, cancel_on_loss: bool = True, timeout: float | None = None) -> HoldContext:
        """``async with mutex.hold():`` run a block that is cancelled if the lock is lost.

        Raises OperationTimeoutError if ``timeout`` passes before the lock is had,
        and LockLostError on leaving the block after a loss.
        """
        holding = LockHolding(
            self.path,
            check_timeout(timeout, path=self.path),
            acquire=self.acquire,
            release=self.release,
            caller_hold=self._hold_of_caller,
        )
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    # --- local state ------------------------------------------------------------------

    def _hold_of_caller(self) -> _LockHold | None:
        return self._holds.get(current_task())

    def _hold_to_watch(self) -> _LockHold:
        """The calling task's hold; from a task that holds none, the one hold of this
        object (the holder handed its wait to another task). NotOwnerError if
        there is none, or several (readers) of which the caller is not one."""
        hold = self._holds.get(current_task())
        if hold is None and len(self._holds) == 1:
            hold = next(iter(self._holds.values()))
        if hold is None:
            raise not_owner(self.path)
        return hold

    def _owned_by(self, task: asyncio.Task[Any]) -> bool:
        hold = self._holds.get(task)
        return hold is not None and not hold.lost

    @property
    def is_held(self) -> bool:
        """True while some task of this process holds the lock through this object
        and it has not been lost."""
        return any(not hold.lost for hold in self._holds.values())

    def is_owned_by_current_task(self) -> bool:
        """Whether the calling task holds the lock and has not lost it."""
        return self._owned_by(current_task())

    @property
    def hold_count(self) -> int:
        """How many times the calling task holds the lock (0 if it does not)."""
        hold = self._holds.get(current_task())
        return hold.count if hold is not None else 0

    def _caller_hold_or_raise(self) -> _LockHold:
        hold = self._holds.get(current_task())
        if hold is None:
            raise not_owner(self.path)
        if hold.lost:
            raise LockLostError(self.path, hold.reason)
        return hold

    @property
    def node(self) -> str:
        """The calling task's lock node (NotOwnerError if it holds none)."""
        node = self._caller_hold_or_raise().contender.node
        assert node is not None
        return node

    @property
    def fencing_token(self) -> int:
        """A number that grows with every grant of this lock, across all holders, forever.

        It is the lock node's creation zxid times 65,536, plus the number of
        the grant on that node (0, unless tasks hand the lock on locally: see
        ``local_handoff``). Hand it to the resource the lock guards, which
        refuses writes that carry a smaller token than it has seen: a holder
        that lost the lock without knowing (a long pause) is turned away.
        """
        hold = self._caller_hold_or_raise()
        return fencing_token(hold.contender.czxid, hold.grant)

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the calling task's hold is lost (at once if it already is; a
        release is no loss): True; False if ``timeout`` passed first.

        The hold is looked up when the wait starts, in the task that awaits it.
        A task that holds nothing through this object waits on the object's one
        hold instead, so a holder may hand the wait to a task of its own
        (``tg.start_soon(lock.wait_lost)``, ``asyncio.create_task(lock.wait_lost())``,
        started while it holds). NotOwnerError if there is no hold to wait on,
        or several (readers) and the caller holds none of them.
        """
        return await wait_lost_within(self._hold_to_watch(), timeout, self.path)

    @property
    def revoke_requested(self) -> bool:
        """Whether someone asked the calling task to give up its hold (False if it
        holds none). Only a ``revocable`` Mutex learns of requests."""
        hold = self._holds.get(current_task())
        return hold is not None and hold.revoke_requested.is_set()

    async def wait_revoked(self, *, timeout: float | None = None) -> bool:
        """Wait until someone asks the calling task to give the lock up: True; False
        if ``timeout`` passed first.

        Returns at once if the request came while the task was still queued
        (``acquire`` returns only after looking).
        NotOwnerError if the task holds nothing; InvalidArgumentError unless
        the Mutex is ``revocable``. The hold is looked up as :meth:`wait_lost`
        does, so a holder may hand this wait to a task of its own too.
        """
        seconds = check_timeout(timeout, path=self.path)
        hold = self._hold_to_watch()
        if not self._revocable:
            raise InvalidArgumentError(
                "revocable", "this lock was made without revocable=True", self.path
            )
        with anyio.move_on_after(seconds):
            await hold.wait_revoked()
            return True
        return False

    async def request_revocation(self, node: str | Participant) -> bool:
        """Ask the contender that owns ``node`` (a node of this lock, as
        :meth:`participants` lists them) to give the lock up.

        Writes Curator's revocation message into the node, so a revocable
        Curator InterProcessMutex hears it too. Only a request: the holder
        decides. False if the node no longer exists.
        """
        path = node.node if isinstance(node, Participant) else node
        path = _paths.validate_path(path)
        if _paths.parent(path) != self.path:
            raise InvalidArgumentError("node", f"{path!r} is not a node of this lock", self.path)
        client = self._client
        try:
            await retry_on_connection_loss(
                client, functools.partial(client.set, path, REVOKE_MESSAGE)
            )
        except NoNodeError:
            return False
        return True

    def fence(self) -> Fence:
        """The calling task's proof of holding, for any transaction to require.

        ``client.transaction().guard(lock.fence())`` applies only while the lock
        node exists; several fences (two locks, a lock and a lease) may guard
        one transaction. NotOwnerError if the calling task holds nothing.
        """
        return Fence(self.node, self.path)

    def transaction(self) -> Transaction:
        """A transaction that applies only while the calling task still holds the lock.

        It carries a check on the lock node: if the lock was lost (the node is
        gone), nothing is applied and ``commit()`` raises LockLostError.
        """
        return self._client.transaction().guard(self.fence())

    async def participants(self) -> list[Participant]:
        """Every contender, in queue order, with its node data; ``holds`` says which
        hold the lock (the first one; for a read-write lock, the readers with no
        writer ahead too).

        A contender that left between the listing and the read of its data is
        not listed; any other failed read raises."""
        found = await read_children(
            self._client, self.path, select=lambda n: sort_contenders(n, self._lock_names)
        )
        names = [child.name for child in found]
        return [
            Participant(
                None, child.path, child.data, self._rule_for(child.name)(names, child.name).holds
            )
            for child in found
        ]

    def _rule_for(self, name: str) -> Rule:
        """The rule that decides whether the contender ``name`` holds."""
        return self._mutex_rule


class _SideOfReadWriteLock(Mutex):
    _lock_names = (WRITE_LOCK_NAME, READ_LOCK_NAME)
    _mutex_queue = False

    def _rule_for(self, name: str) -> Rule:
        if READ_LOCK_NAME in name:
            return read_rule(self._lock_names)
        return self._mutex_rule

    def __init__(self, owner: ReadWriteLock, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owner = owner

    def __repr__(self) -> str:
        side = "write_lock" if self._lock_name == WRITE_LOCK_NAME else "read_lock"
        return f"<ReadWriteLock.{side} {self.path!r} held={self.is_held}>"


class _WriteLock(_SideOfReadWriteLock):
    _lock_name = WRITE_LOCK_NAME
    _telemetry_kind = "write_lock"
    # A downgrading writer's read node joins the queue ahead of later writers.
    _last_blocker_shortcut = False

    def _before_acquire(self, task: asyncio.Task[Any]) -> None:
        if self._owner.read_lock._owned_by(task):
            raise DeadlockError(
                f"{self.path!r}: a read lock cannot be upgraded to the write lock; "
                "release the read lock first"
            )


class _ReadLock(_SideOfReadWriteLock):
    _lock_name = READ_LOCK_NAME
    _telemetry_kind = "read_lock"

    def _contender_for(self, task: asyncio.Task[Any]) -> Contender:
        writer = self._owner.write_lock
        readers = read_rule(self._lock_names)

        def rule(names: Sequence[str], me: str) -> Decision:
            # The write lock's holder may also read (a downgrade).
            if writer._owned_by(task):
                return Decision(True)
            return readers(names, me)

        # A downgrade: the writer's read node takes the write node's place in
        # the queue (same sort key, not a new sequence number), so a writer
        # queued behind the write node stays behind the read lock once the
        # write lock is released. Curator does the same since CURATOR-621.
        suffix: str | None = None
        write_hold = writer._holds.get(task)
        if write_hold is not None and not write_hold.lost and write_hold.contender.node:
            suffix = sequence_key(_paths.basename(write_hold.contender.node), self._lock_names)
        return self._contender(rule, suffix)


class ReadWriteLock:
    """Many readers or one writer (Curator's InterProcessReadWriteLock).

    Fair: requests are served in arrival order, so a waiting writer holds back
    readers that come after it and writers never starve. Both locks are
    reentrant per task; the writer may also take the read lock (and then
    release the write lock: a downgrade). Taking the write lock while holding
    only the read lock would wait forever, so it raises DeadlockError.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
        revocable: bool = False,
    ) -> None:
        options = {"data": data, "error_policy": error_policy, "acl": acl, "revocable": revocable}
        self.write_lock: Mutex = _WriteLock(self, client, path, **options)
        self.read_lock: Mutex = _ReadLock(self, client, path, **options)
        self.path = path

    def __repr__(self) -> str:
        return (
            f"<ReadWriteLock {self.path!r} write_held={self.write_lock.is_held} "
            f"read_held={self.read_lock.is_held}>"
        )

    async def participants(self) -> list[Participant]:
        """Readers and writers in queue order (node names tell which is which)."""
        return await self.write_lock.participants()


class QuietMutex(Mutex):
    """A Mutex that a recipe uses inside itself (a semaphore's queue, a counter's
    promoted lock): it reports no telemetry of its own, so nothing is emitted
    for a recipe the user did not make; the outer recipe's spans cover it."""

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        data: bytes | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        super().__init__(client, path, data=data, acl=acl)
        self._tags = None
        self._monitor.tags = None
