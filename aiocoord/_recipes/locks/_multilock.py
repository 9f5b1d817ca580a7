"""All-or-nothing acquisition of several locks (Curator's InterProcessMultiLock)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import anyio

from ... import _telemetry
from ..._checks import check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    HoldLostError,
    InvalidArgumentError,
    LockLostError,
    NotOwnerError,
)
from ..._session import Fence, Transaction
from .._kit import (
    Deadline,
    Hold,
    HoldContext,
    LockHolding,
    acquiring_task,
    end_record,
    start_record,
    task_owned_acquire,
    wait_lost_within,
)

__all__ = ["Lockable", "MultiLock"]

_LOCKABLE = ("acquire", "release", "fence", "wait_lost", "transaction")


class Lockable(Protocol):
    """What MultiLock needs of the locks it takes: every lock here (``Mutex``, both
    ``ReadWriteLock`` sides, ``SemaphoreMutex``, and ``MultiLock`` itself)."""

    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Wait for the lock; False if ``timeout`` seconds passed first (``0``: try once)."""

    async def release(self) -> None:
        """Release what the calling task acquired (one acquire's worth, if reentrant)."""

    def fence(self) -> Fence:
        """The calling task's proof of holding, for a transaction to require."""

    @property
    def fencing_token(self) -> int | tuple[int, ...]:
        """The calling task's grant's number, for stores outside ZooKeeper."""

    def transaction(self) -> Transaction:
        """A transaction guarded by :meth:`fence`."""

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the hold is lost: True; False if ``timeout`` passed first."""


class _Taken(NamedTuple):
    """One acquire() not yet released: the locks it took, its hold (lost when any
    of theirs is), and the task that watches them."""

    locks: list[Lockable]
    hold: Hold
    watcher: asyncio.Task[None]


class MultiLock:
    """Takes its locks in the given order and releases them in reverse.

    Acquisition is all or nothing: if one lock cannot be had in time (or an
    error or cancellation strikes), the ones already taken are released first.
    Give every process the same order, or two of them may each wait on a lock
    the other holds.

    Acquisitions nest like the locks they take: each ``release()`` undoes the
    calling task's latest ``acquire()``, so reentrant locks are released as
    many times as they were taken.

    A MultiLock is a holder like its locks (and may be one of another
    MultiLock's locks): its hold is lost as soon as any of its locks' is;
    :meth:`fence` guards a transaction by all of them; :attr:`fencing_token`
    is the tuple of their tokens, in order. Its locks' losses are watched from
    a task of its own, so each lock's ``wait_lost()`` must find the one hold
    to wait on (see ``Mutex.wait_lost``): a read lock that other tasks hold
    through the same object cannot be watched, and counts as lost.
    """

    def __init__(self, locks: Sequence[Lockable]) -> None:
        # Set before any check: a repr (of an object whose constructor refused
        # its argument, in a traceback or a debugger) must not fail again.
        self._locks: list[Lockable] = []
        # Per task, one entry per acquire() not yet released.
        self._taken: dict[asyncio.Task[Any] | None, list[_Taken]] = {}
        if isinstance(locks, str | bytes) or not isinstance(locks, Sequence):
            raise ArgumentTypeError("locks", "a sequence of locks", locks)
        if not locks:
            raise InvalidArgumentError("locks", "MultiLock needs at least one lock")
        for index, lock in enumerate(locks):
            if not all(callable(getattr(lock, name, None)) for name in _LOCKABLE):
                raise ArgumentTypeError(
                    f"locks[{index}]", "a lock (with acquire, release and fence)", lock
                )
        self._locks = list(locks)
        # Spans only: the member locks report their own waits and holds, so a
        # MultiLock adds no metric (it has no client, hence no Telemetry names).
        # Its spans carry the member locks' paths, as given to them.
        paths = [_name_of(lock) for lock in self._locks]
        attributes: dict[str, Any] = {_telemetry.RECIPE: "multi_lock", "aiocoord.paths": paths}
        self._tags = _telemetry.Tags(
            "multi_lock", ",".join(paths), attributes, {_telemetry.RECIPE: "multi_lock"}
        )

    @task_owned_acquire
    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Take every lock in order; False if ``timeout`` passed first (none kept then).

        ``timeout`` bounds the whole acquisition: each lock gets what is left of it.
        """
        timeout = check_timeout(timeout)
        acquiring_task("MultiLock")
        deadline = Deadline(timeout)
        taken: list[Lockable] = []
        # The member locks' acquire spans nest under this one.
        with _telemetry.span("aiocoord.multilock.acquire", self._tags) as op:
            try:
                for lock in self._locks:
                    if not await lock.acquire(timeout=deadline.remaining()):
                        await _release_all(taken)
                        op.outcome("timeout")
                        return False
                    taken.append(lock)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _release_all(taken, suppress=True)
                raise
            op.outcome("acquired")
        hold = Hold()
        hold.subject = f"multi-lock {self._tags.path}"
        start_record(hold, "aiocoord.multilock.hold", self._tags)
        watcher = asyncio.create_task(_watch(taken, hold), name="aiocoord-multilock-watch")
        self._taken.setdefault(asyncio.current_task(), []).append(_Taken(taken, hold, watcher))
        return True

    @task_owned_acquire
    async def try_acquire(self) -> bool:
        """Take every lock if each is free now; never wait."""
        return await self.acquire(timeout=0)

    async def release(self) -> None:
        """Undo the calling task's latest acquire: every lock, last taken first.

        The first error is raised after all were tried.
        """
        task = asyncio.current_task()
        stack = self._taken.get(task)
        if not stack:
            raise NotOwnerError("this MultiLock is not held by the calling task")
        taken = stack.pop()
        if not stack:
            del self._taken[task]
        taken.watcher.cancel()
        try:
            await _release_all(taken.locks)
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(asyncio.CancelledError):
                    await taken.watcher
            end_record(taken.hold)

    def _latest(self) -> _Taken | None:
        """The calling task's latest acquire not yet released."""
        stack = self._taken.get(asyncio.current_task())
        return stack[-1] if stack else None

    def _held(self) -> _Taken:
        taken = self._latest()
        if taken is None:
            raise NotOwnerError("this MultiLock is not held by the calling task")
        if taken.hold.lost:
            raise LockLostError(self._tags.path, taken.hold.reason)
        return taken

    @property
    def is_held(self) -> bool:
        """Whether the calling task holds every lock (through an acquire not yet
        released) and none of them is lost."""
        taken = self._latest()
        return taken is not None and not taken.hold.lost

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the calling task's hold is lost (any of its locks' is): True;
        False if ``timeout`` passed first.

        As a Mutex's: the hold is looked up when the wait starts, and a task that
        holds nothing through this object waits on the object's one hold, so a
        holder may hand the wait to a task of its own. NotOwnerError if there is
        no hold to wait on, or several and the caller holds none of them.
        """
        taken = self._latest()
        if taken is None:
            holders = [stack[-1] for stack in self._taken.values() if stack]
            if len(holders) != 1:
                raise NotOwnerError("this MultiLock is not held by the calling task")
            (taken,) = holders
        return await wait_lost_within(taken.hold, timeout, self._tags.path)

    def fence(self) -> Fence:
        """The guard of every lock the calling task holds: ``txn.guard(multi.fence())``
        applies only while it still holds all of them (else a failed lock's
        ``LockLostError``). NotOwnerError if it holds none."""
        fences = [lock.fence() for lock in self._held().locks]
        first, *rest = fences
        return dataclasses.replace(first, also=(*first.also, *rest))

    @property
    def fencing_token(self) -> tuple[int, ...]:
        """The calling task's locks' fencing tokens, in order (a nested MultiLock's
        flattened in its place): compare each with its own resource's last."""
        tokens: list[int] = []
        for lock in self._held().locks:
            token = lock.fencing_token
            tokens.extend(token if isinstance(token, tuple) else (token,))
        return tuple(tokens)

    def transaction(self) -> Transaction:
        """A transaction (on the first lock's client) that applies only while the
        calling task holds every lock: guarded by :meth:`fence`."""
        locks = self._held().locks
        return locks[0].transaction().guard(*(lock.fence() for lock in locks[1:]))

    def hold(
        self, *, cancel_on_loss: bool = True, timeout: float | None = None
    ) -> HoldContext[None]:
        """``async with multi.hold():`` take every lock, run the block, release them;
        with ``cancel_on_loss`` the block is cancelled when any lock is lost, and
        leaving it then raises LockLostError. OperationTimeoutError if ``timeout``
        passes first."""
        holding = LockHolding(
            self._tags.path,
            check_timeout(timeout),
            acquire=self.acquire,
            release=self.release,
            caller_hold=lambda: taken.hold if (taken := self._latest()) else None,
        )
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    async def __aenter__(self) -> MultiLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.release()

    def __repr__(self) -> str:
        # Never raises: getattr's default guards a half-built object too.
        locks = getattr(self, "_locks", [])
        taken = getattr(self, "_taken", {})
        return f"<MultiLock {[_name_of(lock) for lock in locks]!r} held={bool(taken)}>"


async def _watch(locks: Sequence[Lockable], hold: Hold) -> None:
    """Mark ``hold`` lost once any of ``locks`` is lost (or cannot be watched)."""

    async def one(lock: Lockable) -> None:
        try:
            await lock.wait_lost()
            reason = f"{_name_of(lock)} was lost"
        except HoldLostError as error:
            reason = str(error)
        except Exception as error:  # cannot tell: count it lost, never held unseen
            reason = f"watching {_name_of(lock)} failed: {error!r}"
        hold.mark_lost(reason)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for lock in locks:
            group.start_soon(one, lock)


def _name_of(lock: object) -> str:
    """A lock's path for a repr; its type's name if it has no readable str path."""
    try:
        path = getattr(lock, "path", None)
    except Exception:  # a property that raises: the repr must not
        path = None
    return path if isinstance(path, str) else type(lock).__name__


async def _release_all(locks: Sequence[Lockable], *, suppress: bool = False) -> None:
    first: BaseException | None = None
    for lock in reversed(locks):
        try:
            await lock.release()
        except Exception as error:
            first = first or error
    if first is not None and not suppress:
        raise first
