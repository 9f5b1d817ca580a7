"""Local views of znodes kept current by a persistent watch: node, children and tree caches.

One persistent watch per cache (recursive for children and tree caches,
ZooKeeper >= 3.6) tells the cache *that* a path changed; what the view holds
always comes from reading the server. The rule that keeps it right:

- A watch event is only a hint: it asks for the path to be read. Reads go out
  in batches (one pipelined round trip each), and their replies are applied in
  the order they were sent. ZooKeeper answers one session's requests in order,
  so every reply shows the tree at least as new as the one before: a path's
  view only ever moves forward, and its events come in zxid order.
- A change is notified before any reply that shows it, and a batch is sent
  after the hints it serves were received: so every change is read after it
  happened, and once the hints stop the view equals the server's tree.
- Within a batch, parents are read before their children (sorted by depth): a
  child whose parent is not in the view is left out until its parent is read
  (which then lists its children).
- The server does not replay what a persistent watch missed while the client
  was away. After a reconnection the cache checks the Stat of every node it
  holds (pipelined ``exists``, no data) and re-reads only what moved: the data
  where ``mzxid`` changed, the children where ``pzxid``/``cversion`` differ from
  the last listing. After a new session it adds a new watch and does the same.

The rules live in :class:`_View` (no I/O); :class:`_Cache` sends the reads.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_int
from ..._exceptions import (
    ClientClosedError,
    CoordinationError,
    InvalidArgumentError,
    NoNodeError,
    SessionError,
    SessionExpiredError,
    SessionMovedError,
    UnimplementedError,
)
from ..._session import (
    ChangeStream,
    Client,
    PersistentWatch,
    check_client,
    run_cleanup,
)
from ..._types import EventType, Stat, WatchEvent
from .._kit import Feed, Hold, Lifecycle, Phase, Reconnects, Resource, end_record, start_record

__all__ = [
    "CacheEvent",
    "CacheEventType",
    "CacheStats",
    "ChildrenCache",
    "KeptChildrenCache",
    "NodeCache",
    "TreeCache",
]

log = logging.getLogger("aiocoord")

Entry = tuple[bytes | None, Stat]
"""What a cache holds for a node: its data (None when larger than the cache keeps) and Stat."""

DEFAULT_MAX_BUFFER = 10_000
"""Events a cache's ``events()`` iterator holds before it overflows."""

_BATCH_LIMIT = 10_000
"""Most reads in one pipelined round trip (bounds what one batch holds in memory)."""

_CUT_OFF = (SessionError, SessionMovedError)
"""Replies that say nothing about the node: the read is sent again once connected."""

# What a path needs read (flags, combined per path).
_DATA = 1
"""Its data and Stat (``getData``)."""
_CHECK = 2
"""Its Stat, compared with the view's (after an outage): re-read what moved."""
_LIST = 4
"""Its children's names (``getChildren``)."""


class _Read(enum.Enum):
    """One request of a batch."""

    GET = _DATA
    GET_CHECKED = _DATA | _CHECK
    EXISTS = _CHECK
    CHILDREN = _LIST


class CacheEventType(enum.Enum):
    """What a :class:`CacheEvent` reports."""

    CREATED = "created"
    """A node entered the view (path, data, Stat)."""
    UPDATED = "updated"
    """A node's data changed (path, new data, new Stat)."""
    DELETED = "deleted"
    """A node left the view (path, and the data and Stat it last had)."""
    INITIALIZED = "initialized"
    """The first complete view (``snapshot``): once per iterator, after the build."""
    RESYNCED = "resynced"
    """The view was repaired after a reconnection or a new session, or an iterator
    that overflowed starts again: ``snapshot`` holds the whole view."""
    OVERFLOWED = "overflowed"
    """The iterator fell more than ``max_buffer`` events behind: its buffered events
    were dropped, and RESYNCED (with a snapshot) comes next."""


@dataclass(frozen=True, slots=True, repr=False)
class CacheEvent:
    """One change of a cache's view, or a mark in its history (see :class:`CacheEventType`).

    ``path`` is the node's (the cache's own path for INITIALIZED, RESYNCED and
    OVERFLOWED). ``data`` is None when the node's data is larger than the
    cache keeps. ``snapshot`` (INITIALIZED and RESYNCED only) maps every path
    in the view to ``(data, stat)``.
    """

    type: CacheEventType
    path: str
    data: bytes | None = None
    stat: Stat | None = None
    snapshot: Mapping[str, Entry] | None = None

    def __repr__(self) -> str:
        if self.snapshot is not None:
            return f"<CacheEvent {self.type.value} {self.path!r} nodes={len(self.snapshot)}>"
        if self.stat is None:
            return f"<CacheEvent {self.type.value} {self.path!r}>"
        size = "not kept" if self.data is None else f"{len(self.data)} bytes"
        return (
            f"<CacheEvent {self.type.value} {self.path!r} {size} "
            f"version={self.stat.version} mzxid=0x{self.stat.mzxid:x}>"
        )


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a cache has done so far (for monitoring and tests): its ``statistics()``."""

    nodes: int
    """Nodes in the view now."""
    round_trips: int
    """Batches of reads sent (each one pipelined round trip)."""
    data_reads: int
    """``getData`` requests sent."""
    stat_reads: int
    """``exists`` requests sent: the Stat checks after an outage."""
    child_listings: int
    """``getChildren`` requests sent."""
    resyncs: int
    """Repairs completed after a reconnection or a new session (RESYNCED events)."""


# --- the view: pure rules -------------------------------------------------------------------


class _View:
    """The nodes a cache holds and what must be read next; no I/O.

    Replies go in through :meth:`apply`, in the order their requests were
    sent; changes come out through ``emit`` as :class:`CacheEvent` objects.
    """

    def __init__(
        self,
        root: str,
        max_depth: int | None,
        max_data: int | None,
        emit: Callable[[CacheEvent], object],
    ) -> None:
        self.root = root
        self.max_depth = max_depth
        self.max_data = max_data
        self.nodes: dict[str, Entry] = {}
        self.kids: dict[str, set[str]] = {}
        """Child names of each node that has children in the view."""
        self.listed: dict[str, tuple[int, int]] = {}
        """``(pzxid, cversion)`` as of which a node's children in the view were complete."""
        self.wants: dict[str, int] = {}
        """What each path needs read, in the order first asked."""
        self._emit = emit
        self._base = 0 if root == "/" else root.count("/")

    # --- paths ---------------------------------------------------------------

    def depth(self, path: str) -> int:
        """0 for the root, 1 for its children, and so on."""
        return 0 if path == self.root else path.count("/") - self._base

    def within(self, path: str) -> bool:
        """Whether ``path`` is within ``max_depth`` of the root."""
        return self.max_depth is None or self.depth(path) <= self.max_depth

    def _may_list(self, path: str) -> bool:
        return self.max_depth is None or self.depth(path) < self.max_depth

    def _may_add(self, path: str) -> bool:
        """The root, or a node within the depth whose parent is in the view."""
        return path == self.root or (self.within(path) and _paths.parent(path) in self.nodes)

    def _kept(self, data: bytes) -> bytes | None:
        return data if self.max_data is None or len(data) <= self.max_data else None

    # --- what to read ------------------------------------------------------------

    def want(self, path: str, flags: int) -> None:
        self.wants[path] = self.wants.get(path, 0) | flags

    def hint(self, event: WatchEvent) -> None:
        """A watch event: read the path again (child events say nothing the
        children's own events do not)."""
        if event.type is not EventType.CHILD and self.within(event.path):
            self.want(event.path, _DATA)

    def plan_repair(self) -> None:
        """After an outage: check every node held, and look for the root if missing."""
        for path in self.nodes:
            self.want(path, _CHECK)
        if self.root not in self.nodes:
            self.want(self.root, _DATA)

    def take(self, limit: int = _BATCH_LIMIT) -> list[tuple[str, _Read]]:
        """The next batch: up to ``limit`` reads, shallowest paths first (then in the
        order asked), each path's data or Stat before its children."""
        order = sorted(self.wants, key=self.depth)
        batch: list[tuple[str, _Read]] = []
        for path in order:
            if len(batch) >= limit:
                break
            flags = self.wants.pop(path)
            if flags & _DATA:
                batch.append((path, _Read.GET_CHECKED if flags & _CHECK else _Read.GET))
            elif flags & _CHECK:
                batch.append((path, _Read.EXISTS))
            if flags & _LIST:
                batch.append((path, _Read.CHILDREN))
        return batch

    def requeue(self, reads: Iterable[tuple[str, _Read]]) -> None:
        """Reads that got no answer (the connection dropped): ask for them again."""
        for path, read in reads:
            self.want(path, read.value)

    # --- replies ------------------------------------------------------------------

    def apply(self, path: str, read: _Read, result: Any) -> None:
        """Take the reply to ``read`` of ``path`` (a value, or the NoNodeError it got;
        None from ``exists`` on a missing node). Another error is raised."""
        flags = self.wants.get(path)
        if flags is not None:
            # What the reply answers was asked before it was sent: it is answered.
            flags &= ~read.value
            if flags:
                self.wants[path] = flags
            else:
                del self.wants[path]
        if result is None or isinstance(result, NoNodeError):
            if path in self.nodes:
                self._remove(path)
        elif isinstance(result, BaseException):
            raise result
        elif read is _Read.EXISTS:
            self._checked(path, result)
        elif read is _Read.CHILDREN:
            names, stat = result
            self._listed(path, names, stat)
        else:
            data, stat = result
            self._read(path, data, stat, checked=read is _Read.GET_CHECKED)

    def _read(self, path: str, data: bytes, stat: Stat, *, checked: bool) -> None:
        entry = self.nodes.get(path)
        if entry is not None and entry[1].czxid != stat.czxid:
            if stat.czxid < entry[1].czxid:
                return  # an older incarnation: replies never go back in time
            self._remove(path)  # deleted and made again
            entry = None
        if entry is None:
            if self._may_add(path):
                self._add(path, data, stat)
            return
        old = entry[1]
        if stat.mzxid > old.mzxid:
            kept = self._kept(data)
            self.nodes[path] = (kept, stat)
            self._emit(CacheEvent(CacheEventType.UPDATED, path, kept, stat))
        elif stat.mzxid == old.mzxid:
            self.nodes[path] = (entry[0], stat)
        else:
            return
        if checked:
            self._check_children(path, stat)

    def _checked(self, path: str, stat: Stat) -> None:
        entry = self.nodes.get(path)
        if entry is None:
            if self._may_add(path):
                self.want(path, _DATA)  # appeared while we were away
            return
        if stat.czxid != entry[1].czxid:
            self._remove(path)
            if self._may_add(path):
                self.want(path, _DATA)
            return
        if stat.mzxid != entry[1].mzxid:
            self.want(path, _DATA | _CHECK)  # the data read checks the children too
            return
        self.nodes[path] = (entry[0], stat)
        self._check_children(path, stat)

    def _check_children(self, path: str, stat: Stat) -> None:
        """List the children if they changed since the last listing."""
        if self._may_list(path) and self.listed.get(path) != (stat.pzxid, stat.cversion):
            self.want(path, _LIST)

    def _listed(self, path: str, names: list[str], stat: Stat) -> None:
        entry = self.nodes.get(path)
        if entry is None:
            return  # not (or no longer) in the view: adding it lists it
        if stat.czxid != entry[1].czxid:
            self._remove(path)
            if self._may_add(path):
                self.want(path, _DATA)
            return
        present = self.kids.get(path, set())
        fresh = set(names)
        for name in sorted(present - fresh):
            self._remove(_paths.join(path, name))
        if self._may_list(path):
            for name in names:
                if name not in present:
                    self.want(_paths.join(path, name), _DATA)
        self.listed[path] = (stat.pzxid, stat.cversion)
        if stat.mzxid == entry[1].mzxid:
            self.nodes[path] = (entry[0], stat)
        else:
            self.want(path, _DATA)

    def _add(self, path: str, data: bytes, stat: Stat) -> None:
        kept = self._kept(data)
        self.nodes[path] = (kept, stat)
        if path != self.root:
            self.kids.setdefault(_paths.parent(path), set()).add(_paths.basename(path))
        if stat.num_children and self._may_list(path):
            self.want(path, _LIST)
        else:
            self.listed[path] = (stat.pzxid, stat.cversion)
        self._emit(CacheEvent(CacheEventType.CREATED, path, kept, stat))

    def _remove(self, path: str) -> None:
        """Take ``path`` and everything below it out of the view, deepest first."""
        for name in sorted(self.kids.pop(path, ())):
            self._remove(_paths.join(path, name))
        data, stat = self.nodes.pop(path)
        self.listed.pop(path, None)
        if path != self.root:
            parent = _paths.parent(path)
            siblings = self.kids.get(parent)
            if siblings is not None:
                siblings.discard(_paths.basename(path))
                if not siblings:
                    del self.kids[parent]
        self._emit(CacheEvent(CacheEventType.DELETED, path, data, stat))

    # --- reading the view ---------------------------------------------------------------

    def snapshot(self) -> Mapping[str, Entry]:
        return types.MappingProxyType(dict(self.nodes))

    def children(self, path: str) -> list[str]:
        return sorted(self.kids.get(path, ()))


# --- the caches -------------------------------------------------------------------------------


class _Stop(Exception):
    """The cache's watch ended with the client."""


class _Cache(Resource):
    """What the three caches share: the watch, the reads, the view, the consumers."""

    _recursive = True
    _kind = "TreeCache"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        max_depth: int | None,
        max_cached_data: int | None,
        max_buffer: int,
    ) -> None:
        # A cache creates nothing, so the root and /zookeeper are fine to watch.
        check_client(client, path)
        _paths.validate_path(path)
        if max_depth is not None:
            check_int(max_depth, "max_depth", path=path, minimum=0)
        if max_cached_data is not None:
            check_int(max_cached_data, "max_cached_data", path=path, minimum=0)
        check_int(max_buffer, "max_buffer", path=path, minimum=1)
        self._client = client
        self._path = path
        self._view = _View(path, max_depth, max_cached_data, self._emit)
        kind = re.sub(r"(?<!^)(?=[A-Z])", "_", self._kind).lower()  # tree_cache
        self._tags = _telemetry.recipe_tags(client.telemetry, kind, path, client.namespace)
        self._resync: Hold | None = None
        """A resync under way: timed and traced as a hold (telemetry on)."""
        self._outer_reports = False
        """Kept inside another recipe, which reports the build and size
        (:class:`KeptChildrenCache`)."""
        self._life = Lifecycle(f"{self._kind} {path!r}", self._open, self._shut, restartable=False)
        super().__init__(self._life)
        self._halting = False
        self._watch: PersistentWatch | None = None
        self._task: asyncio.Task[Any] | None = None
        self._feed: Feed[CacheEvent] = Feed(
            self._life,
            f"events of {path!r}",
            path,
            max_buffer=max_buffer,
            initialized_mark=lambda: self._mark(CacheEventType.INITIALIZED),
            # What a consumer that fell behind reads instead of the events it
            # missed: OVERFLOWED, then RESYNCED with the view as it is when read.
            overflow=(
                lambda: CacheEvent(CacheEventType.OVERFLOWED, path),
                lambda: CacheEvent(CacheEventType.RESYNCED, path, snapshot=self.snapshot()),
            ),
        )
        # Set by the state listener, read by the cache's task.
        self._reconnects = Reconnects(client, self._on_reconnected, on_lost=self._on_lost)
        self._repair_due = False
        self._session_lost = False
        self._repairing = False
        self._wait_scope: anyio.CancelScope | None = None
        self._counts = {"round_trips": 0, "data": 0, "stat": 0, "list": 0, "resyncs": 0}

    def __repr__(self) -> str:
        phase = self._life.phase
        if phase is Phase.CLOSED:
            state = "closed"
        elif isinstance(self._feed.failure, ClientClosedError):
            state = "client closed"
        elif self._feed.failure is not None:
            state = "failed"
        elif phase is Phase.STARTED and self._repairing:
            state = "resyncing"
        else:
            state = phase.value
        return f"<{self._kind} {self._path!r} {state} nodes={len(self._view.nodes)}>"

    # --- local reads ---------------------------------------------------------------

    @property
    def path(self) -> str:
        """The cache's node: the root of what it keeps."""
        return self._path

    @property
    def max_depth(self) -> int | None:
        """How deep the view goes below the node (None: all the way; 0 for a
        NodeCache, 1 for a ChildrenCache)."""
        return self._view.max_depth

    @property
    def initialized(self) -> bool:
        """Whether the first complete view has been built."""
        return self._feed.initialized

    def get(self, path: str | None = None) -> Entry | None:
        """``(data, stat)`` of a node in the view (default: the cache's node), or
        None if it is not there. ``data`` is None when larger than the cache keeps.
        The Stat's data fields are current; its child fields (``num_children``,
        ``cversion``, ``pzxid``) are as of the node's last read.

        InvalidArgumentError for a path the cache does not follow (not its node
        or below it, or deeper than ``max_depth``): a typo is not a missing node."""
        return self._view.nodes.get(self._covered(path))

    def children(self, path: str | None = None) -> list[str]:
        """The sorted names of a node's children in the view (default: the cache's
        node's); empty if it has none or is not there. InvalidArgumentError for a
        path outside the cache, as :meth:`get`."""
        return self._view.children(self._covered(path))

    def _covered(self, path: str | None) -> str:
        """``path`` (default: the cache's node) if the cache follows it, else raise."""
        if path is None:
            return self._path
        _paths.validate_path(path)
        root = self._path
        if path != root and not path.startswith(root.rstrip("/") + "/"):
            raise InvalidArgumentError("path", f"it is outside the {self._kind} of {root!r}", path)
        if not self._view.within(path):
            raise InvalidArgumentError(
                "path",
                f"it is deeper than the {self._kind} of {root!r} goes"
                f" (max_depth={self._view.max_depth})",
                path,
            )
        return path

    def snapshot(self) -> Mapping[str, Entry]:
        """The whole view now: a read-only mapping of path to ``(data, stat)``,
        which later changes do not touch."""
        return self._view.snapshot()

    def statistics(self) -> CacheStats:
        """Counts of the reads the cache sent and the repairs it made."""
        counts = self._counts
        return CacheStats(
            nodes=len(self._view.nodes),
            round_trips=counts["round_trips"],
            data_reads=counts["data"],
            stat_reads=counts["stat"],
            child_listings=counts["list"],
            resyncs=counts["resyncs"],
        )

    # --- consumers --------------------------------------------------------------------

    def events(self, *, max_buffer: int | None = None) -> ChangeStream[CacheEvent]:
        """Every event from now on, as a :class:`~aiocoord.ChangeStream` holding at
        most ``max_buffer`` events (default: the cache's ``max_buffer``).

        Made before the view is complete, it sees a CREATED event for each node
        added from then on (every node, if made before :meth:`start`), then
        INITIALIZED; made later, it starts with INITIALIZED. Either way, that
        event's snapshot is the whole view at that moment.

        A consumer that falls more than ``max_buffer`` events behind is told so:
        the buffered events are dropped (counted in the stream's ``dropped``),
        the next event read is OVERFLOWED, and the one after it RESYNCED with a
        snapshot of the view taken as it is read; events follow from there.
        Iteration ends when the cache closes (after the events buffered), or
        raises the error the cache stopped on. ``aclose()`` (or ``async with``)
        stops listening.
        """
        return self._feed.events(max_buffer)

    def add_listener(self, callback: Callable[[CacheEvent], object]) -> None:
        """Call ``callback(event)`` for every event from now on, in order, from the
        cache's task (a callback must not block; its errors are logged)."""
        self._feed.add_listener(callback)

    def remove_listener(self, callback: Callable[[CacheEvent], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._feed.remove_listener(callback)

    def _mark(self, kind: CacheEventType) -> CacheEvent:
        return CacheEvent(kind, self._path, snapshot=self._view.snapshot())

    def _emit(self, event: CacheEvent) -> None:
        self._feed.publish(event)

    # --- life cycle -------------------------------------------------------------------------

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`): the watch, the task, the first view."""
        if self._outer_reports:
            await self._open_and_build()
            return
        with _telemetry.span("aiocoord.cache.build", self._tags) as op:
            await self._open_and_build()
            op.outcome("built")
            op.set("aiocoord.nodes", len(self._view.nodes))
        view = self._view
        _telemetry.track_cache(self, self._tags, lambda: len(view.nodes))

    async def _open_and_build(self) -> None:
        client = self._client
        self._reconnects.listen()
        try:
            try:
                self._watch = await client.retry(
                    client.add_watch, self._path, recursive=self._recursive
                )
            except UnimplementedError as error:
                error.add_note(
                    "caches need persistent watches (addWatch, ZooKeeper 3.6 or later);"
                    " this server does not have them"
                )
                raise
            self._view.want(self._path, _DATA)
            self._task = client.start_background(
                self._run(), name=f"aiocoord-{self._kind} {self._path}", on_error=self._fail
            )
            await self.wait_initialized()
        except BaseException:
            await run_cleanup(client, self._halt)
            raise

    async def _shut(self, started: bool) -> None:
        """The closing (see :class:`Lifecycle`)."""
        await self._halt()
        self._finish(None)

    async def _halt(self) -> None:
        """Stop the task and remove the watch."""
        self._halting = True
        _telemetry.track_cache(self, self._tags, tracked=False)
        self._reconnects.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # unlike awaiting it, never swallows our own cancellation
        await self._close_watch()

    async def wait_initialized(self, *, timeout: float | None = None) -> bool:
        """Wait until the first complete view is built (at once if it is): True;
        False if ``timeout`` passed first.

        Raises the error the cache stopped on, ClientClosedError if its client
        closed first, RecipeClosedError if it was closed first.
        """
        return await self._feed.wait_initialized(timeout=timeout)

    async def _close_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.aclose()  # the server's watch goes with the last local one

    def _finish(self, failure: BaseException | None, *, tell_consumers: bool = True) -> None:
        """The cache stops keeping its view: end the consumers (raising ``failure``
        to them if ``tell_consumers``), wake the waiters."""
        self._reconnects.stop()
        self._feed.stop(failure, tell_consumers=tell_consumers)

    def _fail(self, error: BaseException) -> None:
        self._finish(error)

    def _on_lost(self) -> None:
        self._session_lost = True
        self._wake()

    def _on_reconnected(self) -> None:
        # The watch is back (re-armed, or added again after a new session),
        # but what changed meanwhile was not reported: check the view.
        self._repair_due = True
        self._wake()

    def _wake(self) -> None:
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    # --- the task ---------------------------------------------------------------------------

    async def _run(self) -> None:
        failure: BaseException | None = None
        closed = False
        try:
            await self._keep()
        except (_Stop, ClientClosedError):
            closed = True
        except asyncio.CancelledError:
            closed = not self._halting  # the client's close, not ours
            raise
        except CoordinationError as error:
            log.warning("%s %r stopped: %r", self._kind, self._path, error)
            failure = error
        except Exception as error:
            failure = error
            raise  # a bug: the client logs it
        finally:
            await self._close_watch()
            if closed:
                # Iterators end quietly with the client, as its own do; waiters learn why.
                self._finish(ClientClosedError("client closed"), tell_consumers=False)
            else:
                self._finish(failure)

    async def _keep(self) -> None:
        """Drain hints, send a batch, apply it; repair after outages; until cancelled."""
        view = self._view
        while True:
            if self._session_lost:
                self._session_lost = False
                await self._close_watch()  # the session took it (and maybe some events)
                self._watch = await self._add_watch()
                self._begin_repair()
            if self._repair_due:
                self._repair_due = False
                self._begin_repair()
            watch = self._watch
            assert watch is not None
            while watch.pending:
                view.hint(await watch.__anext__())
            if not view.wants:
                self._settled()
                await self._wait_for_work(watch)
                continue
            await self._send_batch()

    def _begin_repair(self) -> None:
        self._view.plan_repair()
        self._repairing = True
        if self._resync is None:
            self._resync = Hold()
            start_record(self._resync, "aiocoord.cache.resync", self._tags)
        log.debug("%s %r: checking %d nodes", self._kind, self._path, len(self._view.nodes))

    def _settled(self) -> None:
        """Nothing left to read: the view is complete (or repaired)."""
        if not self._feed.initialized:
            self._repairing = False
            self._feed.built()
        elif self._repairing:
            self._repairing = False
            self._counts["resyncs"] += 1
            resync, self._resync = self._resync, None
            if resync is not None:
                end_record(resync, "resynced")
            self._emit(self._mark(CacheEventType.RESYNCED))

    async def _wait_for_work(self, watch: PersistentWatch) -> None:
        """Wait for a watch event or an outage's end."""
        with anyio.CancelScope() as scope:
            self._wait_scope = scope
            try:
                if self._session_lost or self._repair_due:
                    return
                try:
                    event = await watch.__anext__()
                except StopAsyncIteration:
                    raise _Stop() from None
                except SessionExpiredError:
                    self._session_lost = True
                    return
                self._view.hint(event)
            finally:
                self._wait_scope = None

    async def _add_watch(self) -> PersistentWatch:
        client = self._client
        while True:
            try:
                return await client.add_watch(self._path, recursive=self._recursive)
            except ClientClosedError:
                raise
            except SessionError:
                await client.wait_connected()

    async def _send_batch(self) -> None:
        view = self._view
        reads = view.take()
        pipeline = self._client.pipeline()
        counts = self._counts
        for path, read in reads:
            if read is _Read.EXISTS:
                pipeline.exists(path)
                counts["stat"] += 1
            elif read is _Read.CHILDREN:
                pipeline.children(path)
                counts["list"] += 1
            else:
                pipeline.get(path)
                counts["data"] += 1
        counts["round_trips"] += 1
        try:
            results = await pipeline.execute()
        except ClientClosedError:
            raise
        except SessionError as error:
            log.debug("%s %r: %d reads not sent (%r)", self._kind, self._path, len(reads), error)
            view.requeue(reads)
            await self._client.wait_connected()
            return
        for index, ((path, read), result) in enumerate(zip(reads, results, strict=True)):
            if isinstance(result, ClientClosedError):
                raise result
            if isinstance(result, _CUT_OFF):
                # Cut off here: this read and those after it got no answer.
                log.debug(
                    "%s %r: %d reads cut off (%r); sending them again",
                    self._kind,
                    self._path,
                    len(reads) - index,
                    result,
                )
                view.requeue(reads[index:])
                await self._client.wait_connected()
                return
            view.apply(path, read, result)


class TreeCache(_Cache):
    """A local copy of a node and everything below it, kept current.

    ``async with TreeCache(client, "/config") as cache:`` builds the view and
    keeps it current until the block ends; ``cache.get(path)``,
    ``cache.children(path)`` and ``cache.snapshot()`` read it without a round
    trip, and ``async for event in cache.events():`` follows its changes.

    ``max_depth`` limits the view (0: the node only; 1: it and its children).
    Data longer than ``max_cached_data`` bytes is not kept: such a node has
    ``None`` for data, with its Stat (events say when it changes).
    ``max_buffer`` bounds each :meth:`events` iterator.

    One persistent recursive watch on the node (which need not exist) serves
    the cache; the server sends it every change below, also below
    ``max_depth``. Events for one path come in zxid order (a burst may be read
    once, so intermediate versions can be skipped, never the last one, and a
    node created and deleted between two reads may not appear at all);
    parents appear before their children and disappear after them. Once
    changes stop, the view equals the server's tree. After a reconnection or
    a new session the view is repaired (each node's Stat is checked, and only
    what moved is read again), then RESYNCED.

    ``start()`` adds the watch and returns once the view is built (a node that
    does not exist yet makes an empty view). It raises UnimplementedError on a
    server without persistent watches (ZooKeeper < 3.6), or the error a read
    failed with (such as NoAuthError), and the cache is closed then: a cache
    starts once. ``aclose()`` removes the watch; :meth:`events` iterators end
    after what they buffered, and the view stays readable. The same holds for
    a ChildrenCache and a NodeCache.
    """

    _kind = "TreeCache"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        max_depth: int | None = None,
        max_cached_data: int | None = None,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> None:
        super().__init__(
            client,
            path,
            max_depth=max_depth,
            max_cached_data=max_cached_data,
            max_buffer=max_buffer,
        )


class ChildrenCache(_Cache):
    """A local copy of a node and its children (their data and Stat), kept current.

    A :class:`TreeCache` one level deep: ``cache.children()`` lists the
    children, ``cache.get(path)`` reads one. Grandchildren are not kept, but
    the server still sends their changes to the cache's recursive watch.
    """

    _kind = "ChildrenCache"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        max_cached_data: int | None = None,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> None:
        super().__init__(
            client, path, max_depth=1, max_cached_data=max_cached_data, max_buffer=max_buffer
        )


class NodeCache(_Cache):
    """A local copy of one node's data and Stat, kept current.

    ``cache.get()`` is ``(data, stat)``, or None while the node does not
    exist. One persistent (not recursive) watch on the node serves it.
    """

    _recursive = False
    _kind = "NodeCache"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        max_cached_data: int | None = None,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> None:
        super().__init__(
            client, path, max_depth=0, max_cached_data=max_cached_data, max_buffer=max_buffer
        )


class KeptChildrenCache(ChildrenCache):
    """A ChildrenCache kept inside another recipe (a ServiceCache's), labelled as
    that recipe from the start: its resync spans carry ``tags``, and it makes no
    build span and no ``aiocoord.cache.size`` entry of its own (the outer recipe
    reports its own build and size, in its own terms)."""

    def __init__(
        self, client: Client, path: str, *, max_buffer: int, tags: _telemetry.Tags
    ) -> None:
        super().__init__(client, path, max_buffer=max_buffer)
        self._tags = tags
        self._outer_reports = True
