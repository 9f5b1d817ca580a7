"""One-shot ZooKeeper watches as awaitable objects.

The server keeps one watch per (path, kind) and connection and fires it once.
The client side keeps every local waiter for that watch in a
:class:`WatchRegistry`; a fired event resolves all of them. Watches are
registered from the reply handler, before the next frame is read, so an event
that follows the reply always finds its waiter.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Generator, Iterator
from typing import Any

from .._types import EventType, WatchEvent

__all__ = ["Watch", "WatchKind", "WatchRegistry"]


class WatchKind(enum.Enum):
    DATA = "data"
    """Set by get_data, or by exists on a node that exists."""
    EXIST = "exist"
    """Set by exists on a node that does not exist."""
    CHILD = "child"


# Which local watch kinds an event type fires (ZooKeeper's client rules).
_FIRES: dict[EventType, tuple[WatchKind, ...]] = {
    EventType.CREATED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.CHANGED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.DELETED: (WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD),
    EventType.CHILD: (WatchKind.CHILD,),
}


class Watch:
    """A one-shot watch: ``await watch`` gives the :class:`WatchEvent` that fired it.

    It fails with :class:`~aiocoord.SessionExpiredError` if the session is lost
    first (the server forgot it) and with :class:`~aiocoord.ClientClosedError`
    when the client closes. A watch survives reconnection to the same session.
    ``cancel()`` (or cancelling the task awaiting it) detaches it.
    """

    __slots__ = ("_future", "_registry", "_server_path", "kind", "path")

    def __init__(
        self, registry: WatchRegistry, kind: WatchKind, path: str, server_path: str
    ) -> None:
        self._registry = registry
        self.kind = kind
        self.path = path
        self._server_path = server_path
        self._future: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()
        self._future.add_done_callback(self._on_done)

    def __await__(self) -> Generator[Any, None, WatchEvent]:
        return self._future.__await__()

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> None:
        """Stop waiting; the server-side watch, if any, fires later into nothing."""
        self._registry._discard(self)
        self._future.cancel()

    def _on_done(self, _future: asyncio.Future[WatchEvent]) -> None:
        self._registry._discard(self)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<Watch {self.kind.value} {self.path!r} {state}>"


class WatchRegistry:
    """Every pending local watch, by kind and server path."""

    def __init__(self) -> None:
        self._by_kind: dict[WatchKind, dict[str, set[Watch]]] = {k: {} for k in WatchKind}

    def add(self, watch: Watch) -> None:
        self._by_kind[watch.kind].setdefault(watch._server_path, set()).add(watch)

    def _discard(self, watch: Watch) -> None:
        table = self._by_kind[watch.kind]
        waiters = table.get(watch._server_path)
        if waiters is not None:
            waiters.discard(watch)
            if not waiters:
                del table[watch._server_path]

    def fire(self, event_type: EventType, server_path: str, user_path: str) -> None:
        event = WatchEvent(event_type, user_path)
        for kind in _FIRES[event_type]:
            waiters = self._by_kind[kind].pop(server_path, None)
            for watch in waiters or ():
                if not watch._future.done():
                    watch._future.set_result(event)

    def fail_all(self, error: BaseException) -> None:
        for table in self._by_kind.values():
            waiters = [w for ws in table.values() for w in ws]
            table.clear()
            for watch in waiters:
                if not watch._future.done():
                    watch._future.set_exception(error)
                    # Nobody may be awaiting a watch the session took away;
                    # mark the exception retrieved so asyncio does not log it.
                    watch._future.exception()

    def paths(self, kind: WatchKind) -> list[str]:
        return list(self._by_kind[kind])

    def __len__(self) -> int:
        return sum(len(ws) for table in self._by_kind.values() for ws in table.values())

    def __iter__(self) -> Iterator[Watch]:
        for table in self._by_kind.values():
            for waiters in table.values():
                yield from waiters
