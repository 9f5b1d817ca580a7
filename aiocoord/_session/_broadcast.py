"""One producer, many listeners: sync callbacks and async iterators that miss nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from .._exceptions import ArgumentTypeError

__all__ = ["Broadcast", "Subscription"]

T = TypeVar("T")

log = logging.getLogger("aiocoord")


class Subscription(Generic[T]):
    """Every value published after its creation, in order, as an async iterator.

    Values queue up until read (none are dropped); iteration ends when the
    publisher closes, after the values queued before, or raises the error the
    publisher failed with. ``aclose()`` or ``async with`` stops listening early.
    """

    def __init__(self, hub: Broadcast[T]) -> None:
        self._queue: deque[T] = deque()
        self._wakeup = asyncio.Event()
        self._ended = False
        self._error: BaseException | None = None
        self._hub = hub
        hub._subscriptions.add(self)

    def _push(self, value: T) -> None:
        self._queue.append(value)
        self._wakeup.set()

    def _end(self, error: BaseException | None = None) -> None:
        self._ended = True
        self._error = error
        self._wakeup.set()

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> T:
        while not self._queue:
            if self._ended:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._queue.popleft()

    async def aclose(self) -> None:
        """Stop listening: values queued already are still read, then iteration ends."""
        self._hub._subscriptions.discard(self)
        self._end()

    async def __aenter__(self) -> Subscription[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "ended" if self._ended else "open"
        return f"<Subscription {state} queued={len(self._queue)}>"


class Broadcast(Generic[T]):
    """Publishes values to callbacks (called at once, in order) and subscriptions."""

    def __init__(self) -> None:
        self._subscriptions: weakref.WeakSet[Subscription[T]] = weakref.WeakSet()
        self._listeners: list[Callable[[T], object]] = []

    def subscribe(self) -> Subscription[T]:
        return Subscription(self)

    def add_listener(self, callback: Callable[[T], object]) -> None:
        if not callable(callback):  # else it would fail later, in the publisher's task
            raise ArgumentTypeError("callback", "a callable", callback)
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
        for subscription in list(self._subscriptions):
            subscription._push(value)

    def close(self, error: BaseException | None = None) -> None:
        """End every subscription: cleanly, or (with ``error``) by raising it to each."""
        for subscription in list(self._subscriptions):
            subscription._end(error)
        self._subscriptions.clear()
