"""The one change stream: every "what changed" the library reports is a ChangeStream,
fed by a Broadcast (which also calls listeners) or read from a source."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Generic, TypeVar

from .._exceptions import ArgumentTypeError

__all__ = ["Broadcast", "ChangeStream", "end_stream", "push"]

T = TypeVar("T")

log = logging.getLogger("aiocoord")


class ChangeStream(Generic[T]):
    """Changes, in order, as an async iterator: ``async for change in stream``.

    Every stream the library hands out is one of these (connection states,
    leadership, a group's members, a counter's values, a cache's events, a
    node's data or children, a persistent watch's events). It is also an
    async context manager: ``async with recipe.changes() as changes:`` stops
    listening when the block ends, as ``await changes.aclose()`` does.

    Changes wait in the stream until read. A stream made with a bound
    (``max_buffer``, the caches' event streams) holds at most that many; a
    consumer that falls further behind is told so: the buffered changes are
    dropped (counted in :attr:`dropped`) and it reads what the stream says
    instead (a cache: OVERFLOWED, then RESYNCED with a fresh snapshot), then
    the changes from there on. Without a bound none is dropped. Some streams
    read the latest state when asked instead of buffering (``data_changes``,
    ``children_changes``, a group's members): they skip intermediate states,
    never the latest one.

    Iteration ends when the source ends (after the changes buffered before),
    or raises the error the source failed with; after :meth:`aclose`, the
    changes already buffered are still read, then iteration ends.
    """

    def __init__(
        self,
        *,
        max_buffer: int | None = None,
        overflow: Sequence[Callable[[], T]] = (),
        on_close: Callable[[], object] | None = None,
        source: AsyncIterator[T] | None = None,
        name: str = "",
    ) -> None:
        self._queue: deque[T] = deque()
        self._wakeup = asyncio.Event()
        self._max = max_buffer
        self._overflow = tuple(overflow)
        """What a consumer reads after falling behind, one per read, each made when read."""
        self._resync: list[Callable[[], T]] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._on_close = on_close
        self._source = source
        self._name = name
        self.dropped = 0
        """Changes dropped so far because this consumer fell behind its ``max_buffer``."""

    @property
    def pending(self) -> int:
        """Changes buffered and not yet read."""
        return len(self._queue)

    @property
    def max_buffer(self) -> int | None:
        """The most changes this stream buffers before it overflows (None: no bound)."""
        return self._max

    @property
    def ended(self) -> bool:
        """Whether the source ended or :meth:`aclose` was called (buffered changes
        may still be read)."""
        return self._ended

    # --- the producer side ---------------------------------------------------------

    def _push(self, value: T) -> None:
        if self._ended:
            return
        if self._resync is not None:
            self.dropped += 1  # the resync read later covers it
            return
        if self._max is not None and len(self._queue) >= self._max:
            self.dropped += len(self._queue) + 1
            self._queue.clear()
            self._resync = list(self._overflow)
        else:
            self._queue.append(value)
        self._wakeup.set()

    def _end(self, error: BaseException | None = None) -> None:
        if not self._ended:
            self._ended = True
            self._error = error
        self._wakeup.set()

    # --- the consumer side ---------------------------------------------------------

    def __aiter__(self) -> ChangeStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._source is not None:
            if self._ended:
                raise StopAsyncIteration
            return await self._source.__anext__()
        while True:
            resync = self._resync
            if resync is not None:
                make = resync.pop(0)
                if not resync:
                    self._resync = None
                return make()
            if self._queue:
                return self._queue.popleft()
            if self._ended:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()

    async def aclose(self) -> None:
        """Stop listening: changes already buffered are still read, then iteration ends.
        Idempotent."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        self._end()
        source, self._source = self._source, None
        if source is not None:
            self._ended = True
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

    async def __aenter__(self) -> ChangeStream[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "ended" if self._ended else "overflowed" if self._resync is not None else "open"
        bound = "" if self._max is None else f"/{self._max}"
        name = f" {self._name}" if self._name else ""
        return (
            f"<ChangeStream{name} {state} pending={len(self._queue)}{bound} dropped={self.dropped}>"
        )


def push(stream: ChangeStream[T], value: T) -> None:
    """Hand ``value`` to ``stream`` (the producer's side: for the session's own
    streams that no :class:`Broadcast` feeds)."""
    stream._push(value)


def end_stream(stream: ChangeStream[T], error: BaseException | None = None) -> None:
    """End ``stream``: cleanly, or (with ``error``) by raising it once read out."""
    stream._end(error)


class Broadcast(Generic[T]):
    """Publishes values to callbacks (called at once, in order) and to streams.

    The one machinery behind every recipe's ``changes()``/``events()`` and its
    ``add_listener``/``remove_listener``.
    """

    def __init__(self, what: str = "") -> None:
        # Weak: a stream its consumer dropped without closing it is not kept.
        self._streams: weakref.WeakSet[ChangeStream[T]] = weakref.WeakSet()
        self._listeners: list[Callable[[T], object]] = []
        self._what = what
        self._closed = False
        self._error: BaseException | None = None

    @property
    def has_listeners(self) -> bool:
        """Whether any callback is registered."""
        return bool(self._listeners)

    def subscribe(
        self,
        *,
        max_buffer: int | None = None,
        overflow: Sequence[Callable[[], T]] = (),
        first: Sequence[T] = (),
    ) -> ChangeStream[T]:
        """A stream of every value published from now on (after ``first``); one
        made after :meth:`close` holds ``first`` and then ends as the others did."""
        stream: ChangeStream[T] = ChangeStream(
            max_buffer=max_buffer, overflow=overflow, name=self._what
        )
        stream._on_close = lambda: self._streams.discard(stream)
        for value in first:
            stream._push(value)
        if self._closed:
            stream._end(self._error)
        else:
            self._streams.add(stream)
        return stream

    def add_listener(self, callback: Callable[[T], object], path: object = None) -> None:
        if not callable(callback):  # else it would fail later, in the publisher's task
            raise ArgumentTypeError("callback", "a callable", callback, path)
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[T], object]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def publish(self, value: T) -> None:
        for callback in list(self._listeners):
            try:
                callback(value)
            except Exception:
                log.exception("listener %r failed", callback)
        for stream in list(self._streams):
            stream._push(value)

    def close(self, error: BaseException | None = None) -> None:
        """End every stream: cleanly, or (with ``error``) by raising it to each.
        Streams made later end the same way."""
        if not self._closed:
            self._closed, self._error = True, error
        for stream in list(self._streams):
            stream._end(error)
        self._streams.clear()
