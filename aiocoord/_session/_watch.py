"""ZooKeeper watches as awaitable objects and async iterators.

One-shot watches: the server keeps one per (path, kind) and connection and
fires it once. Persistent watches (ZooKeeper >= 3.6, ``addWatch``) stay until
removed, on one node or on a whole subtree (recursive). The server sends each
event once per connection; the client side keeps every local waiter in a
:class:`WatchRegistry` and hands the event to each that it concerns. Watches
are registered from the reply handler, before the next frame is read, so an
event that follows the reply always finds its waiter.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Self

from .._exceptions import ClientClosedError
from .._types import EventType, WatchEvent
from ._stream import ChangeStream, end_stream, push

__all__ = ["PersistentWatch", "Watch", "WatchKind", "WatchRegistry"]


class WatchKind(enum.Enum):
    DATA = "data"
    """Set by get_data, or by exists on a node that exists."""
    EXIST = "exist"
    """Set by exists on a node that does not exist."""
    CHILD = "child"
    PERSISTENT = "persistent"
    """Every event on one node, until removed (``addWatch``)."""
    RECURSIVE = "persistent-recursive"
    """Created, changed and deleted events on a node and all below it, until removed."""

    # The registry keys its tables by kind on every watch set and fired: members
    # are singletons, so identity hashes them, in C (Enum's own hashes the name
    # in Python).
    __hash__ = object.__hash__


_ONE_SHOT = (WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD)


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
    ``cancel()`` (or cancelling the task awaiting it) detaches it, and so does
    leaving ``async with watch:``, as for a :class:`PersistentWatch`.
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
        """Whether the watch has fired, failed or been cancelled (awaiting it will not wait)."""
        return self._future.done()

    def cancel(self) -> None:
        """Stop waiting; the server-side watch, if any, fires later into nothing."""
        self._registry._discard(self)
        self._future.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.cancel()

    def add_done_callback(self, callback: Callable[[Watch], object]) -> None:
        """Call ``callback(watch)`` once it fires, fails or is cancelled (soon, if it has)."""
        self._future.add_done_callback(lambda _future: callback(self))

    def failure(self) -> BaseException | None:
        """Why the watch failed (SessionExpiredError, ClientClosedError); None while
        pending, once fired, or if cancelled."""
        future = self._future
        if not future.done() or future.cancelled():
            return None
        return future.exception()

    def _on_done(self, _future: asyncio.Future[WatchEvent]) -> None:
        self._registry._discard(self)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<Watch {self.kind.value} {self.path!r} {state}>"


class WatchRegistry:
    """Every pending local watch, by kind and server path."""

    def __init__(self) -> None:
        self._by_kind: dict[WatchKind, dict[str, set[Watch]]] = {k: {} for k in _ONE_SHOT}
        self._persistent: dict[WatchKind, dict[str, set[PersistentWatch]]] = {
            WatchKind.PERSISTENT: {},
            WatchKind.RECURSIVE: {},
        }

    def add(self, watch: Watch) -> None:
        self._by_kind[watch.kind].setdefault(watch._server_path, set()).add(watch)

    def _discard(self, watch: Watch) -> None:
        table = self._by_kind[watch.kind]
        waiters = table.get(watch._server_path)
        if waiters is not None:
            waiters.discard(watch)
            if not waiters:
                del table[watch._server_path]

    def add_persistent(self, watch: PersistentWatch) -> None:
        self._persistent[watch.kind].setdefault(watch.server_path, set()).add(watch)

    def holds(self, kind: WatchKind, server_path: str) -> bool:
        """Whether a persistent watch of ``kind`` is held on ``server_path``."""
        return server_path in self._persistent[kind]

    def discard_persistent(self, watch: PersistentWatch) -> bool:
        """Forget ``watch``; True if it was the last local one of its kind on its path
        (so the server-side watch can go too)."""
        table = self._persistent[watch.kind]
        waiters = table.get(watch.server_path)
        if waiters is None or watch not in waiters:
            return False
        waiters.discard(watch)
        if waiters:
            return False
        del table[watch.server_path]
        return True

    def watching(self, server_path: str) -> bool:
        """Whether any local watch, of any kind, waits on ``server_path``."""
        return any(server_path in table for table in self._by_kind.values()) or any(
            server_path in table for table in self._persistent.values()
        )

    def one_shot_pending(self, server_path: str) -> list[Watch]:
        """The one-shot watches waiting on ``server_path``."""
        return [w for table in self._by_kind.values() for w in table.get(server_path, ())]

    def serves(self, server_path: str, kinds: Iterable[WatchKind]) -> bool:
        """Whether a persistent watch held on exactly ``server_path`` already brings
        every event a one-shot watch of ``kinds`` there would fire on.

        A persistent watch sees all of its node's events; a recursive one all
        but child events (see :meth:`fire` for those).
        """
        if server_path in self._persistent[WatchKind.PERSISTENT]:
            return True
        return server_path in self._persistent[WatchKind.RECURSIVE] and all(
            kind is not WatchKind.CHILD for kind in kinds
        )

    def fire(self, event_type: EventType, server_path: str, user_path: str) -> None:
        event = WatchEvent(event_type, user_path)
        for kind in _FIRES[event_type]:
            _resolve(self._by_kind[kind].pop(server_path, None), event)
        if event_type in (EventType.CREATED, EventType.DELETED) and server_path != "/":
            # A node created or deleted changed its parent's children: fire a
            # child watch there too. The server sends that event as well, unless
            # a recursive watch on the parent took the watch's place (servers
            # before 3.9 keep one watch mode per path and connection,
            # ZOOKEEPER-4466); whichever comes first fires it.
            waiters = self._by_kind[WatchKind.CHILD].pop(_parent(server_path), None)
            if waiters:
                child_event = WatchEvent(EventType.CHILD, _parent(user_path))
                _resolve(waiters, child_event)
        for persistent in self._persistent[WatchKind.PERSISTENT].get(server_path, ()):
            push(persistent, event)
        recursive = self._persistent[WatchKind.RECURSIVE]
        if recursive and event_type is not EventType.CHILD:
            # A recursive watch sees its node and everything below; the server
            # sends no child events for it (those come only from other watches).
            for ancestor in _self_and_ancestors(server_path):
                for persistent in recursive.get(ancestor, ()):
                    push(persistent, event)

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
        for ptable in self._persistent.values():
            persistent = [w for ws in ptable.values() for w in ws]
            ptable.clear()
            for pwatch in persistent:
                # The client closing ends a watch's iteration cleanly.
                end_stream(pwatch, None if isinstance(error, ClientClosedError) else error)

    def paths(self, kind: WatchKind) -> list[str]:
        if kind in self._persistent:
            return list(self._persistent[kind])
        return list(self._by_kind[kind])

    def __len__(self) -> int:
        one_shot = sum(len(ws) for table in self._by_kind.values() for ws in table.values())
        persistent = sum(len(ws) for table in self._persistent.values() for ws in table.values())
        return one_shot + persistent

    def __iter__(self) -> Iterator[Watch | PersistentWatch]:
        for table in self._by_kind.values():
            for waiters in table.values():
                yield from waiters
        for ptable in self._persistent.values():
            for pwaiters in ptable.values():
                yield from pwaiters


def _resolve(waiters: set[Watch] | None, event: WatchEvent) -> None:
    for watch in waiters or ():
        if not watch._future.done():
            watch._future.set_result(event)


def _parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def _self_and_ancestors(path: str) -> Iterator[str]:
    yield path
    while path not in ("/", ""):
        path = path.rpartition("/")[0] or "/"
        yield path


class PersistentWatch(ChangeStream[WatchEvent]):
    """A persistent watch: ``async for event in watch`` yields every event it sees.

    A :class:`~aiocoord.ChangeStream` of watch events: events wait in the watch
    until read, in the order the server sent them. The watch survives
    reconnection to the same session (it is re-armed), but the server does not
    replay what changed while the client was disconnected: after RECONNECTED,
    re-read what matters. Iteration ends when the watch is closed
    (:meth:`aclose`) or the client closes. It raises
    :class:`~aiocoord.SessionExpiredError` if the session is lost, since the
    server forgot the watch and events may have been missed: read the state
    afresh and add a new watch.
    """

    def __init__(
        self,
        registry: WatchRegistry,
        kind: WatchKind,
        path: str,
        server_path: str,
        remove: Callable[[PersistentWatch], object],
    ) -> None:
        super().__init__(on_close=self._detach, name=f"{kind.value} watch {path!r}")
        self._remove = remove
        self._registry = registry
        self.kind = kind
        self.path = path
        self.server_path = server_path

    @property
    def recursive(self) -> bool:
        """Whether it covers everything below its node too (see :meth:`Client.add_watch`)."""
        return self.kind is WatchKind.RECURSIVE

    def _detach(self) -> None:
        if not self.ended:  # else ended by the client or the session: nothing to remove
            self._remove(self)

    async def aclose(self) -> None:
        """Stop watching; the server-side watch goes when no local one needs it."""
        await super().aclose()

    def __repr__(self) -> str:
        state = "closed" if self.ended else f"{self.pending} pending"
        return f"<PersistentWatch {self.kind.value} {self.path!r} {state}>"
