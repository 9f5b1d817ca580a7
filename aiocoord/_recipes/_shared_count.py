"""A shared integer everyone can watch (Curator's SharedCount, same 4-byte encoding)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .. import _paths
from .._exceptions import BadVersionError, CorruptValueError, NodeExistsError, NoNodeError
from .._session._broadcast import Broadcast, Subscription
from .._session._client import Client
from ._counter import CounterOverflowError

__all__ = ["SharedCount", "VersionedValue"]

T = TypeVar("T")

_INT = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class VersionedValue(Generic[T]):
    """A value and the node version it was read at: the ticket for a conditional set."""

    version: int
    value: T


class SharedCount:
    """An int kept in one znode, with local reads and change notifications.

    ``async with SharedCount(client, path, seed) as count:`` creates the node
    with ``seed`` if missing and keeps ``count.count`` current from a watch.
    Changes arrive in order through ``count.changes()`` (an async iterator) and
    listeners; fast successive changes may be seen as their latest value only.
    """

    def __init__(self, client: Client, path: str, seed: int) -> None:
        _paths.validate_path(path)
        self._client = client
        self.path = path
        self._seed = seed
        self._current: VersionedValue[int] | None = None
        self._changes: Broadcast[int] = Broadcast()
        self._watcher: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    def _encode(self, value: int) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"count must be int, not {type(value).__name__}")
        if not -(2**31) <= value < 2**31:
            raise CounterOverflowError(f"{value} does not fit a 32-bit SharedCount")
        return _INT.pack(value)

    def _decode(self, data: bytes) -> int:
        if len(data) != 4:
            raise CorruptValueError(self.path, data, "a 4-byte SharedCount value")
        value: int = _INT.unpack(data)[0]
        return value

    async def start(self) -> None:
        """Create the node with the seed if needed, read it, and start watching."""
        if self._watcher is not None:
            raise RuntimeError("SharedCount already started")
        with contextlib.suppress(NodeExistsError):
            await self._client.create(self.path, self._encode(self._seed), make_parents=True)
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        await self._ready.wait()

    async def aclose(self) -> None:
        """Stop watching; iterators from :meth:`changes` end."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self._changes.close()

    async def __aenter__(self) -> SharedCount:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _watch(self) -> None:
        changes = self._client.data_changes(self.path)
        try:
            async for snapshot in changes:
                if snapshot is None:
                    continue  # deleted: keep the last value until it is back
                data, stat = snapshot
                self._update(VersionedValue(stat.version, self._decode(data)))
                self._ready.set()
        finally:
            self._ready.set()
            await changes.aclose()

    def _update(self, value: VersionedValue[int]) -> None:
        current = self._current
        if current is not None and value.version <= current.version:
            return  # older news than what we already know
        self._current = value
        if current is None or current.value != value.value:
            self._changes.publish(value.value)

    @property
    def versioned_value(self) -> VersionedValue[int]:
        if self._current is None:
            raise RuntimeError("SharedCount not started")
        return self._current

    @property
    def count(self) -> int:
        return self.versioned_value.value

    async def try_set_count(self, previous: VersionedValue[int], new: int) -> bool:
        """Set ``new`` only if nobody changed the count since ``previous`` was read."""
        try:
            stat = await self._client.set(self.path, self._encode(new), version=previous.version)
        except (BadVersionError, NoNodeError):
            return False
        self._update(VersionedValue(stat.version, new))
        return True

    async def set_count(self, new: int) -> None:
        """Set ``new`` unconditionally."""
        stat = await self._client.set(self.path, self._encode(new))
        self._update(VersionedValue(stat.version, new))

    def changes(self) -> Subscription[int]:
        """Every new value from now on, as an async iterator."""
        return self._changes.subscribe()

    def add_listener(self, callback: Callable[[int], object]) -> None:
        self._changes.add_listener(callback)

    def remove_listener(self, callback: Callable[[int], object]) -> None:
        self._changes.remove_listener(callback)
