"""Watch requests and change streams: reads that leave a watch behind.

A read sent with the watch flag registers its local :class:`Watch` from the
reply handler (before the next frame is read), of the kind the reply implies,
so the event that follows the reply always finds it. The change streams loop
over such reads, riding out lost sessions.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

from .. import _paths
from .._exceptions import (
    ClientClosedError,
    CoordinationError,
    MarshallingError,
    NoConnectionError,
    NoNodeError,
    SessionExpiredError,
)
from .._types import Stat
from . import _zk
from ._engine import SessionEngine
from ._requests import RequestBuilder
from ._retry import RetryPolicy, call_with_retry
from ._watch import PersistentWatch, Watch, WatchKind, WatchRegistry

__all__ = ["Watcher"]

T = TypeVar("T")

_UNSEEN = object()
"""What a change stream has yielded before its first snapshot."""


_EXISTS_KINDS = {0: WatchKind.DATA, _zk.NO_NODE_CODE: WatchKind.EXIST}
"""The watch an exists read sets, by its reply's code."""


class Watcher:
    """Sends watched reads for one client and builds change streams on them."""

    def __init__(
        self,
        engine: SessionEngine,
        requests: RequestBuilder,
        registry: WatchRegistry,
        retry_policy: Callable[[], RetryPolicy],
    ) -> None:
        self._engine = engine
        self._requests = requests
        self._registry = registry
        self._retry_policy = retry_policy
        # addWatch requests in flight, by (kind, server path): a removeWatches
        # sent while one is in flight would undo it on the server.
        self._adding: collections.Counter[tuple[WatchKind, str]] = collections.Counter()
        # One-shot reads in flight that rely on a persistent watch held on
        # their path, by server path; and persistent watches closed locally
        # whose server-side removal waits for such one-shot watches.
        self._serving: collections.Counter[str] = collections.Counter()
        self._pending_removal: set[tuple[WatchKind, str, str]] = set()
        self._individual_removal = True
        """Until the server refuses it: removing one kind of watch (ZooKeeper >= 3.9)."""

    async def _call_watched(
        self, build: Callable[..., _zk.Op], path: str, kinds: dict[int, WatchKind]
    ) -> tuple[Any, Watch]:
        """Send the read ``build(path, watch=...)``; return its reply (or raise its
        error) and the watch it set.

        ``kinds`` maps reply codes to the watch the server set for them. A
        reply with another code set none, and its error is raised. Where a
        persistent watch held on the same path already brings the events, the
        read goes without the watch flag and the local watch rides on it:
        servers before 3.9 keep one watch mode per path and connection
        (ZOOKEEPER-4466), so a one-shot watch set there would replace the
        persistent one, which would then end when the one-shot fired.
        """
        _paths.validate_path(path)
        server_path = self._requests.server_path(path)
        served = self._registry.serves(server_path, kinds.values())
        out: list[Watch] = []

        def hook(code: int) -> None:
            kind = kinds.get(code)
            if kind is not None:
                watch = Watch(self._registry, kind, path, server_path)
                self._registry.add(watch)
                out.append(watch)

        if served:
            # Keeps the persistent watch on the server until the reply has
            # registered the local watch (see _remove).
            self._serving[server_path] += 1
        try:
            result = await self._engine.call(build(path, watch=not served), hook)
        except asyncio.CancelledError:
            for watch in out:
                watch.cancel()
            raise
        except CoordinationError:
            if not out:
                raise
            result = None  # an error that set a watch (exists on a missing node)
        finally:
            if served:
                self._serving[server_path] -= 1
                if not self._serving[server_path]:
                    del self._serving[server_path]
                self._retry_removals(server_path)
        return result, out[0]

    def exists(self, path: str) -> Awaitable[tuple[Stat | None, Watch]]:
        # The read itself, not a coroutine around it: one level fewer to resume
        # on the reply (recipes wait on their predecessor with this).
        return self._call_watched(self._requests.exists, path, _EXISTS_KINDS)

    async def data(self, path: str) -> tuple[bytes, Stat, Watch]:
        result, watch = await self._call_watched(self._requests.get, path, {0: WatchKind.DATA})
        data, stat = result
        return data, stat, watch

    async def children(self, path: str) -> tuple[list[str], Stat, Watch]:
        result, watch = await self._call_watched(
            self._requests.children, path, {0: WatchKind.CHILD}
        )
        names, stat = result
        return names, stat, watch

    async def add(self, path: str, *, recursive: bool) -> PersistentWatch:
        kind = WatchKind.RECURSIVE if recursive else WatchKind.PERSISTENT
        _paths.validate_path(path)
        server_path = self._requests.server_path(path)
        op = _zk.add_watch_op(path, server_path, recursive)
        watch = PersistentWatch(self._registry, kind, path, server_path, self._remove)

        def hook(code: int) -> None:
            if code == 0:
                self._registry.add_persistent(watch)

        key = (kind, server_path)
        self._adding[key] += 1
        try:
            await self._engine.call(op, hook)
        except BaseException:
            self._added(key)
            await watch.aclose()
            raise
        self._added(key)
        return watch

    def _added(self, key: tuple[WatchKind, str]) -> None:
        self._adding[key] -= 1
        if not self._adding[key]:
            del self._adding[key]

    def _remove(self, watch: PersistentWatch) -> None:
        """Forget ``watch``; if it was the last local one, remove the server's too.

        Removal is sent at once, so a later addWatch on the path is applied
        after it. Servers before 3.9 only remove all of a path's watches at
        once (type ANY): then only when no local watch of any kind is left on
        the path, since a removed one-shot watch would never fire. While
        one-shot watches on the path may ride on this one (see
        :meth:`_call_watched`), removal waits until they are done.
        """
        if not self._registry.discard_persistent(watch):
            return
        self._pending_removal.add((watch.kind, watch.path, watch.server_path))
        self._retry_removals(watch.server_path)

    def _retry_removals(self, server_path: str) -> None:
        """Send the removals waiting on ``server_path`` that nothing holds back now."""
        for key in [k for k in self._pending_removal if k[2] == server_path]:
            kind, path, _ = key
            if self._registry.holds(kind, server_path):
                self._pending_removal.discard(key)  # added again: keep the server's
                continue
            if self._adding[(kind, server_path)]:
                self._pending_removal.discard(key)  # the addWatch in flight re-adds it
                continue
            if self._serving[server_path]:
                return  # a read relying on it is in flight: its end retries
            riding = self._registry.one_shot_pending(server_path)
            if riding:
                for one_shot in riding:
                    one_shot.add_done_callback(lambda _w: self._retry_removals(server_path))
                return
            self._pending_removal.discard(key)
            self._send_removal(kind, path, server_path)

    def _send_removal(self, kind: WatchKind, path: str, server_path: str) -> None:
        if not self._individual_removal:
            self._remove_all(path, server_path)
            return
        watcher_type = (
            _zk.WATCHER_TYPE_PERSISTENT_RECURSIVE
            if kind is WatchKind.RECURSIVE
            else _zk.WATCHER_TYPE_PERSISTENT
        )
        sent = self._engine.send_now(_zk.remove_watches_op(path, server_path, watcher_type))
        if sent is not None:
            sent.add_done_callback(lambda reply: self._removed(reply, path, server_path))

    def _removed(self, reply: asyncio.Future[Any], path: str, server_path: str) -> None:
        if not reply.cancelled() and isinstance(reply.exception(), MarshallingError):
            self._individual_removal = False
            self._remove_all(path, server_path)

    def _remove_all(self, path: str, server_path: str) -> None:
        adding = any(p == server_path for _kind, p in self._adding)
        if not adding and not self._registry.watching(server_path):
            self._engine.send_now(_zk.remove_watches_op(path, server_path, _zk.WATCHER_TYPE_ANY))

    def data_changes(self, path: str) -> AsyncGenerator[tuple[bytes, Stat] | None, None]:
        async def read(watched: str) -> tuple[tuple[bytes, Stat], Watch]:
            data, stat, watch = await self.data(watched)
            return (data, stat), watch

        return self._changes(path, read, lambda s: (s[1].mzxid, s[1].version))

    def children_changes(self, path: str) -> AsyncGenerator[list[str] | None, None]:
        async def read(watched: str) -> tuple[list[str], Watch]:
            names, _stat, watch = await self.children(watched)
            return sorted(names), watch

        return self._changes(path, read, lambda names: names)

    async def _retry(self, operation: Callable[[str], Awaitable[T]], path: str) -> T:
        return await call_with_retry(self._retry_policy(), lambda: operation(path))

    async def _reconnected(self) -> bool:
        """Wait for a connection, through lost sessions; False once the client closes."""
        try:
            await self._engine.wait_for_session()
        except ClientClosedError:
            return False
        return True

    async def _changes(
        self,
        path: str,
        read: Callable[[str], Awaitable[tuple[T, Watch]]],
        identity: Callable[[T], object],
    ) -> AsyncGenerator[T | None, None]:
        """Read with a watch (or, while the node is missing, watch for its
        creation), yield what is new, wait; until the client closes."""
        last: object = _UNSEEN
        while True:
            watch: Watch | None = None
            try:
                snapshot: T | None
                try:
                    snapshot, watch = await self._retry(read, path)
                except NoNodeError:
                    stat, watch = await self._retry(self.exists, path)
                    if stat is not None:
                        continue  # created in between: read it
                    snapshot = None
                seen = None if snapshot is None else identity(snapshot)
                if seen != last:
                    last = seen
                    yield snapshot
                assert watch is not None
                await watch
            except ClientClosedError:
                return
            except SessionExpiredError:
                continue
            except NoConnectionError:
                # A stream rides out an outage however long: wait for the
                # connection without bound, then read again.
                if not await self._reconnected():
                    return
            finally:
                if watch is not None:
                    watch.cancel()
