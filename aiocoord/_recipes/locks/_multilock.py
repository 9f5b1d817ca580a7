"""All-or-nothing acquisition of several locks (Curator's InterProcessMultiLock)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import anyio

from ... import _telemetry
from ..._checks import check_timeout
from ..._exceptions import ArgumentTypeError, InvalidArgumentError, NotOwnerError
from ..._session import Fence
from .._kit._holding import acquiring_task, task_owned_acquire
from .._kit._waits import Deadline

__all__ = ["Lockable", "MultiLock"]

_LOCKABLE = ("acquire", "release", "fence")


class Lockable(Protocol):
    """Anything with ``acquire(*, timeout) -> bool``, ``release()`` and ``fence()``:
    every lock here."""

    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Wait for the lock; False if ``timeout`` seconds passed first (``0``: try once)."""

    async def release(self) -> None:
        """Release what the calling task acquired (one acquire's worth, if reentrant)."""

    def fence(self) -> Fence:
        """The calling task's proof of holding, for a transaction to require."""


class _Taken(NamedTuple):
    """One acquire() not yet released: the locks it took, and its hold's span."""

    locks: list[Lockable]
    record: _telemetry.HoldRecord | None


class MultiLock:
    """Takes its locks in the given order and releases them in reverse.

    Acquisition is all or nothing: if one lock cannot be had in time (or an
    error or cancellation strikes), the ones already taken are released first.
    Give every process the same order, or two of them may each wait on a lock
    the other holds.

    Acquisitions nest like the locks they take: each ``release()`` undoes the
    calling task's latest ``acquire()``, so reentrant locks are released as
    many times as they were taken.
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
        record = _telemetry.start_hold("aiocoord.multilock.hold", self._tags)
        self._taken.setdefault(asyncio.current_task(), []).append(_Taken(taken, record))
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
        try:
            await _release_all(taken.locks)
        finally:
            if taken.record is not None:
                taken.record.end("released")

    @property
    def is_held(self) -> bool:
        """Whether the calling task holds every lock (through an acquire not yet released)."""
        return bool(self._taken.get(asyncio.current_task()))

    def fences(self) -> list[Fence]:
        """One fence per lock the calling task holds: ``txn.guard(*multi.fences())``
        applies only while it still holds all of them. NotOwnerError if it holds none."""
        stack = self._taken.get(asyncio.current_task())
        if not stack:
            raise NotOwnerError("this MultiLock is not held by the calling task")
        return [lock.fence() for lock in stack[-1].locks]

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
