"""All-or-nothing acquisition of several locks (Curator's InterProcessMultiLock)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, Protocol

import anyio

__all__ = ["Lockable", "MultiLock"]


class Lockable(Protocol):
    """Anything with ``acquire(timeout) -> bool`` and ``release()``: every lock here."""

    async def acquire(self, timeout: float | None = None) -> bool: ...

    async def release(self) -> None: ...


class MultiLock:
    """Takes its locks in the given order and releases them in reverse.

    Acquisition is all or nothing: if one lock cannot be had in time (or an
    error or cancellation strikes), the ones already taken are released first.
    Give every process the same order, or two of them may each wait on a lock
    the other holds.
    """

    def __init__(self, locks: Sequence[Lockable]) -> None:
        if not locks:
            raise ValueError("MultiLock needs at least one lock")
        self._locks = list(locks)
        self._taken: list[Lockable] = []

    async def acquire(self, timeout: float | None = None) -> bool:
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        taken: list[Lockable] = []
        try:
            for lock in self._locks:
                remaining = None if timeout is None else max(0.0, deadline - time.monotonic())
                if not await lock.acquire(remaining):
                    await _release_all(taken)
                    return False
                taken.append(lock)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _release_all(taken, suppress=True)
            raise
        self._taken = taken
        return True

    async def release(self) -> None:
        """Release every lock, last taken first; the first error is raised after all tried."""
        taken, self._taken = self._taken, []
        await _release_all(taken)

    async def __aenter__(self) -> MultiLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.release()


async def _release_all(locks: Sequence[Lockable], *, suppress: bool = False) -> None:
    first: BaseException | None = None
    for lock in reversed(locks):
        try:
            await lock.release()
        except Exception as error:
            first = first or error
    if first is not None and not suppress:
        raise first
