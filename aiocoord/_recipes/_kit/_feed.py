"""What a kept view tells its consumers: the event streams, the listeners, and
whether the first view is built, written once for every cache.

A view (a node, children or tree cache, a service cache) is built, then kept
current until it stops: closed, its client closed, or failed. Its consumers
see the same shape everywhere: ``events()`` streams (bounded; a consumer that
falls behind reads what the view says instead), listeners called with the
same events, ``wait_initialized()`` for the first complete view, and, once
the view has stopped, streams that end at once the way the others did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import anyio

from ..._checks import check_int, check_timeout
from ..._exceptions import ClientClosedError
from ..._session import Broadcast, ChangeStream, end_stream
from ._lifecycle import Lifecycle
from ._pulse import Pulse

__all__ = ["Feed"]

E = TypeVar("E")


class Feed(Generic[E]):
    """The consumer side of one kept view, whose events are ``E``.

    ``initialized_mark()`` makes the event that opens a stream made once the
    view is built (INITIALIZED, with the view); ``overflow``, what a consumer
    that fell more than its bound behind reads instead of what it missed (one
    per read, each made when read). ``life`` is the view's: a closed view hands
    out ended streams and fails its waits.
    """

    __slots__ = (
        "_broadcast",
        "_initialized_mark",
        "_life",
        "_name",
        "_overflow",
        "_path",
        "changed",
        "failure",
        "initialized",
        "max_buffer",
        "stopped",
    )

    def __init__(
        self,
        life: Lifecycle,
        name: str,
        path: str,
        *,
        max_buffer: int,
        initialized_mark: Callable[[], E],
        overflow: Sequence[Callable[[], E]],
    ) -> None:
        self._life = life
        self._name = name
        self._path = path
        self._broadcast: Broadcast[E] = Broadcast(name)
        self._initialized_mark = initialized_mark
        self._overflow = tuple(overflow)
        self.max_buffer = max_buffer
        """Each stream's bound unless ``events()`` is given another."""
        self.initialized = False
        """Whether the first complete view was built."""
        self.failure: BaseException | None = None
        """Why the view stopped, if not closed by its owner."""
        self.stopped = False
        """Whether the view stopped (closed, its client closed, or failed)."""
        self.changed = Pulse()
        """Fired when the view is built and when it stops."""

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "built" if self.initialized else "building"
        return f"<Feed {self._name} {state}>"

    def events(self, max_buffer: int | None = None) -> ChangeStream[E]:
        """A stream of every event from now on (see the caches' ``events()``)."""
        limit = self.max_buffer if max_buffer is None else max_buffer
        check_int(limit, "max_buffer", path=self._path, minimum=1)
        if self.stopped or self._life.closed:
            ended: ChangeStream[E] = ChangeStream(max_buffer=limit, name=self._name)
            end_stream(ended, self.failure)
            return ended
        first = [self._initialized_mark()] if self.initialized else []
        return self._broadcast.subscribe(max_buffer=limit, overflow=self._overflow, first=first)

    def add_listener(self, callback: Callable[[E], object]) -> None:
        self._broadcast.add_listener(callback, self._path)

    def remove_listener(self, callback: Callable[[E], object]) -> None:
        self._broadcast.remove_listener(callback)

    def publish(self, event: E) -> None:
        """Hand ``event`` to every listener and stream, in order."""
        self._broadcast.publish(event)

    def built(self) -> None:
        """The first complete view is built: tell the streams (INITIALIZED) and
        wake the waiters; only the first call does anything."""
        if self.initialized:
            return
        self.initialized = True
        self._broadcast.publish(self._initialized_mark())
        self.changed.fire()

    def stop(self, failure: BaseException | None, *, tell_consumers: bool = True) -> None:
        """The view stops: end the streams (raising ``failure`` in them if
        ``tell_consumers``) and wake the waiters, who learn ``failure`` (the first
        one kept)."""
        if failure is not None and self.failure is None:
            self.failure = failure
        self.stopped = True
        self._broadcast.close(failure if tell_consumers else None)
        self.changed.fire()

    async def wait_initialized(self, *, timeout: float | None = None) -> bool:
        """Wait until the first complete view is built (at once if it is): True;
        False if ``timeout`` passed first. Raises why the view stopped,
        ClientClosedError if its client closed first, RecipeClosedError if it
        was closed first."""
        seconds = check_timeout(timeout, path=self._path)
        with anyio.move_on_after(seconds):
            while not self.initialized:
                if self.failure is not None:
                    raise self.failure
                self._life.check_open()
                if self.stopped:
                    raise ClientClosedError("client closed")
                await self.changed.wait()
            return True
        return False
