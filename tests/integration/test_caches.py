"""NodeCache, ChildrenCache and TreeCache: views kept current by one persistent watch.

Every test ends by comparing the cache's view with the tree read from the
server. Waits are on the cache's own events (a listener, or an events()
iterator), never on time: a writer finishes with a marker node, and the view
that shows the marker shows every change made before it (the marker's event
comes after theirs, and the reads it causes come after theirs too).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable

import pytest
import pytest_asyncio
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    CacheEvent,
    CacheEventType,
    ChildrenCache,
    ConnectionState,
    NodeCache,
    NoNodeError,
    Stat,
    TreeCache,
)
from aiocoord.testing import (
    TcpProxy,
    ZooKeeperTarget,
    drop_connection,
    expire_session,
    four_letter_word,
)

pytestmark = pytest.mark.timeout(90)


CREATED = CacheEventType.CREATED
UPDATED = CacheEventType.UPDATED
DELETED = CacheEventType.DELETED
INITIALIZED = CacheEventType.INITIALIZED
RESYNCED = CacheEventType.RESYNCED
OVERFLOWED = CacheEventType.OVERFLOWED


class Recorder:
    """A cache listener that keeps every event and lets a test await a condition on them."""

    def __init__(self, cache: aiocoord.TreeCache | ChildrenCache | NodeCache) -> None:
        self.events: list[CacheEvent] = []
        self._changed = asyncio.Event()
        cache.add_listener(self._on_event)

    def _on_event(self, event: CacheEvent) -> None:
        self.events.append(event)
        self._changed.set()

    async def until(self, condition: Callable[[list[CacheEvent]], bool]) -> None:
        async with asyncio.timeout(EVENT_TIMEOUT):
            while not condition(self.events):
                self._changed.clear()
                await self._changed.wait()

    async def saw(self, kind: CacheEventType, path: str | None = None, *, count: int = 1) -> None:
        await self.until(lambda events: len(self.of(kind, path)) >= count)

    def of(self, kind: CacheEventType, path: str | None = None) -> list[CacheEvent]:
        return [e for e in self.events if e.type is kind and (path is None or e.path == path)]

    def for_path(self, path: str) -> list[CacheEventType]:
        return [e.type for e in self.events if e.path == path and e.snapshot is None]

    def index(self, kind: CacheEventType, path: str) -> int:
        return next(i for i, e in enumerate(self.events) if e.type is kind and e.path == path)


@contextlib.asynccontextmanager
async def recorded(cache: TreeCache) -> AsyncIterator[tuple[TreeCache, Recorder]]:
    """Start ``cache`` with a Recorder attached first (so it hears the build too)."""
    rec = Recorder(cache)
    async with cache:
        yield cache, rec


def replay(events: list[CacheEvent], root: str) -> dict[str, tuple]:
    """Rebuild the view from its events alone, checking each against the one before:
    a path is created only when absent, updated and deleted only when present, its
    zxids only grow, parents come before their children and go after them, and
    each snapshot (INITIALIZED, RESYNCED) equals what the events built."""
    view: dict[str, tuple] = {}
    created: dict[str, int] = {}
    for event in events:
        path, stat = event.path, event.stat
        if event.snapshot is not None:
            assert view_of(event.snapshot.items()) == view, event
            continue
        assert stat is not None, event
        if event.type is CREATED:
            assert path not in view, event
            assert path == root or (path.rsplit("/", 1)[0] or "/") in view, event
            assert stat.czxid > created.get(path, 0), event
            created[path] = stat.czxid
        elif event.type is UPDATED:
            assert view[path][1] == stat.czxid and view[path][2] < stat.mzxid, event
        else:
            assert event.type is DELETED and view[path][1:] == (stat.czxid, stat.mzxid), event
            assert not [p for p in view if p.startswith(path.rstrip("/") + "/")], event
            del view[path]
            continue
        view[path] = (event.data, stat.czxid, stat.mzxid)
    return view


async def server_tree(client: aiocoord.Client, root: str) -> dict[str, tuple[bytes, int, int]]:
    """``path -> (data, czxid, mzxid)`` of ``root`` and everything below, read level by
    level with pipelined reads (empty if ``root`` does not exist)."""
    found: dict[str, tuple[bytes, int, int]] = {}
    level = [root]
    while level:
        pipeline = client.pipeline()
        for path in level:
            pipeline.get(path)
            pipeline.children(path)
        results = await pipeline.execute()
        following: list[str] = []
        for i, path in enumerate(level):
            got, listed = results[2 * i], results[2 * i + 1]
            if isinstance(got, NoNodeError) or isinstance(listed, NoNodeError):
                continue
            data, stat = got
            found[path] = (data, stat.czxid, stat.mzxid)
            following += [f"{path.rstrip('/')}/{name}" for name in listed[0]]
        level = following
    return found


def view_of(snapshot: Iterable[tuple[str, tuple[bytes | None, Stat]]]) -> dict[str, tuple]:
    return {path: (data, stat.czxid, stat.mzxid) for path, (data, stat) in snapshot}


async def assert_view_is_the_tree(
    cache: TreeCache | ChildrenCache | NodeCache,
    client: aiocoord.Client,
    rec: Recorder | None = None,
) -> None:
    """The cache's view is the server's tree; and, with ``rec`` (attached before the
    start), its events alone tell the same story."""
    tree = await server_tree(client, cache.path)
    depth = cache.max_depth
    if depth is not None:
        base = cache.path.count("/")
        tree = {p: v for p, v in tree.items() if p == cache.path or p.count("/") - base <= depth}
    assert view_of(cache.snapshot().items()) == tree
    if rec is not None:
        assert replay(rec.events, cache.path) == tree


async def finish_with_marker(writer: aiocoord.Client, rec: Recorder, path: str) -> None:
    """Create ``path`` (after the writer's other changes) and wait for the cache to show it."""
    await writer.create(path, b"end")
    await rec.saw(CREATED, path)


@pytest_asyncio.fixture
async def pair(started) -> tuple[aiocoord.Client, aiocoord.Client]:
    """(the cache's client, another client that writes)."""
    cache_client, writer = await started(2)
    return cache_client, writer


# --- the view and its events ---------------------------------------------------------------


async def test_a_tree_cache_sees_creates_updates_and_deletes_at_every_depth_in_order(
    pair,
) -> None:
    client, writer = pair
    await writer.create("/t/a", b"a0", make_parents=True)
    cache = TreeCache(client, "/t")
    rec = Recorder(cache)
    async with cache:
        assert cache.initialized
        assert await cache.wait_initialized(timeout=0) is True  # built: at once
        assert [e.type for e in rec.events] == [CREATED, CREATED, INITIALIZED]
        assert [e.path for e in rec.events[:2]] == ["/t", "/t/a"]
        initialized = rec.events[-1]
        assert initialized.snapshot is not None and set(initialized.snapshot) == {"/t", "/t/a"}

        await writer.create("/t/a/b", b"b0")
        await writer.create("/t/a/b/c", b"c0")
        await writer.create("/t/d", b"d0")
        # Each created node seen first: so each set below is a new version to the cache.
        await rec.until(lambda events: len(rec.of(CREATED)) == 5)
        for path in ("/t/a", "/t/a/b", "/t/a/b/c", "/t/d"):
            await writer.set(path, path.encode())
        await rec.until(lambda events: len(rec.of(UPDATED)) == 4)
        assert cache.get("/t/a/b/c")[0] == b"/t/a/b/c"  # type: ignore[index]
        assert cache.children("/t") == ["a", "d"]
        assert cache.children("/t/a/b") == ["c"]
        await assert_view_is_the_tree(cache, writer, rec)

        await writer.delete("/t/a", recursive=True)
        await rec.saw(DELETED, "/t/a")
        for path in ("/t/a/b", "/t/a/b/c"):
            assert rec.for_path(path) == [CREATED, UPDATED, DELETED]
        assert rec.for_path("/t/a") == [CREATED, UPDATED, DELETED]
        # Parents come before their children, and go after them.
        assert rec.index(CREATED, "/t/a/b") < rec.index(CREATED, "/t/a/b/c")
        assert rec.index(DELETED, "/t/a/b/c") < rec.index(DELETED, "/t/a/b")
        assert rec.index(DELETED, "/t/a/b") < rec.index(DELETED, "/t/a")
        deleted = rec.of(DELETED, "/t/a/b/c")[0]
        assert deleted.data == b"/t/a/b/c" and deleted.stat is not None  # the last known
        assert cache.get("/t/a") is None and cache.children("/t") == ["d"]
        await assert_view_is_the_tree(cache, writer, rec)
    assert client.pending_watches == 0 and client.background_tasks == 0


async def test_events_of_one_path_come_in_zxid_order_and_end_at_the_last_write(pair) -> None:
    client, writer = pair
    await writer.create("/z/n", b"0", make_parents=True)
    async with recorded(TreeCache(client, "/z")) as (cache, rec):
        # Sets sent back to back: the cache reads in batches and may skip versions.
        await asyncio.gather(*(writer.set("/z/n", b"%d" % i) for i in range(1, 501)))
        await finish_with_marker(writer, rec, "/z/end")
        updates = rec.of(UPDATED, "/z/n")
        zxids = [e.stat.mzxid for e in updates]  # type: ignore[union-attr]
        assert zxids == sorted(set(zxids))
        versions = [e.stat.version for e in updates]  # type: ignore[union-attr]
        assert versions == sorted(set(versions))
        assert updates[-1].data == b"500" and updates[-1].stat.version == 500  # type: ignore[union-attr]
        await assert_view_is_the_tree(cache, writer, rec)


async def test_a_burst_of_10000_changes_leaves_the_view_equal_to_the_tree(pair) -> None:
    client, writer = pair
    async with recorded(TreeCache(client, "/burst")) as (cache, rec):
        await writer.ensure_path("/burst")
        pipeline = writer.pipeline()
        for d in range(20):
            pipeline.create(f"/burst/d{d}")
        await pipeline.execute()
        # 10,000 changes from another client: creates, sets, deletes, over two levels.
        pipeline = writer.pipeline()
        for i in range(4000):
            pipeline.create(f"/burst/d{i % 20}/n{i}", b"%d" % i)
        for i in range(4000):
            pipeline.set(f"/burst/d{i % 20}/n{i}", b"v%d" % i)
        for i in range(0, 4000, 2):
            pipeline.delete(f"/burst/d{i % 20}/n{i}")
        ops = len(pipeline)
        results = await pipeline.execute()
        assert ops == 10_000 and not [r for r in results if isinstance(r, Exception)]
        await finish_with_marker(writer, rec, "/burst/end")
        await assert_view_is_the_tree(cache, writer, rec)
        assert len(cache.snapshot()) == 1 + 20 + 2000 + 1


async def test_a_10000_node_tree_builds_with_pipelined_reads(pair) -> None:
    client, writer = pair
    # Three levels: 100 parents of 100 nodes each, 100-byte values.
    await writer.create("/big", b"")
    value = b"x" * 100
    pipeline = writer.pipeline()
    for p in range(100):
        pipeline.create(f"/big/p{p}", value)
        for n in range(100):
            pipeline.create(f"/big/p{p}/n{n}", value)
    assert not [r for r in await pipeline.execute() if isinstance(r, Exception)]
    cache = TreeCache(client, "/big")
    began = time.perf_counter()
    async with cache:
        took = time.perf_counter() - began
        stats = cache.statistics()
        assert stats.nodes == 1 + 100 + 100 * 100
        # getData per node, getChildren per parent: a handful of round trips, not one per node.
        assert stats.data_reads == stats.nodes
        assert stats.child_listings == 101
        assert stats.round_trips <= 6
        await assert_view_is_the_tree(cache, writer)
    print(f"built a {stats.nodes}-node view in {took:.2f} s, {stats.round_trips} round trips")


async def test_a_root_that_appears_later_fills_the_view_and_empties_it_when_it_goes(
    pair,
) -> None:
    client, writer = pair
    async with recorded(TreeCache(client, "/late")) as (cache, rec):
        assert cache.initialized and cache.snapshot() == {} and cache.get() is None
        await writer.create("/late/a/b", b"b", make_parents=True)
        await rec.saw(CREATED, "/late/a/b")
        assert [e.path for e in rec.of(CREATED)] == ["/late", "/late/a", "/late/a/b"]
        await writer.delete("/late", recursive=True)
        await rec.saw(DELETED, "/late")
        assert [e.path for e in rec.of(DELETED)] == ["/late/a/b", "/late/a", "/late"]
        assert cache.snapshot() == {}
        await writer.create("/late", b"again")
        await rec.saw(CREATED, "/late", count=2)
        assert cache.get() is not None and cache.get()[0] == b"again"  # type: ignore[index]


async def test_max_depth_limits_the_view_and_its_events(pair) -> None:
    client, writer = pair
    await writer.create("/deep/a/b/c", b"c", make_parents=True)
    async with (
        TreeCache(client, "/deep", max_depth=1) as shallow,
        ChildrenCache(client, "/deep") as kids,
        NodeCache(client, "/deep/a") as node,
        TreeCache(client, "/deep", max_depth=0) as alone,
    ):
        rec = Recorder(shallow)
        assert set(shallow.snapshot()) == {"/deep", "/deep/a"}
        assert set(kids.snapshot()) == {"/deep", "/deep/a"}
        assert kids.children() == ["a"] and shallow.children("/deep/a") == []
        assert set(node.snapshot()) == {"/deep/a"} and set(alone.snapshot()) == {"/deep"}
        assert shallow.max_depth == 1
        await writer.create("/deep/a/b/c2", b"deeper")
        await writer.set("/deep/a/b", b"changed")
        await writer.set("/deep/a", b"a1")
        await writer.create("/deep/e", b"e")
        await finish_with_marker(writer, rec, "/deep/end")
        assert {e.path for e in rec.events} == {"/deep/a", "/deep/e", "/deep/end"}
        for cache in (shallow, kids, node, alone):
            await assert_view_is_the_tree(cache, writer)
        assert node.get() is not None and node.get()[0] == b"a1"  # type: ignore[index]


async def test_data_over_the_limit_is_not_kept_but_its_stat_is(pair) -> None:
    client, writer = pair
    await writer.create("/sizes/small", b"x" * 10, make_parents=True)
    await writer.create("/sizes/large", b"y" * 1000)
    async with TreeCache(client, "/sizes", max_cached_data=100) as cache:
        rec = Recorder(cache)
        assert cache.get("/sizes/small")[0] == b"x" * 10  # type: ignore[index]
        data, stat = cache.get("/sizes/large")  # type: ignore[misc]
        assert data is None and stat.data_length == 1000
        await writer.set("/sizes/large", b"z" * 2000)
        await rec.saw(UPDATED, "/sizes/large")
        event = rec.of(UPDATED, "/sizes/large")[0]
        assert event.data is None and event.stat.data_length == 2000  # type: ignore[union-attr]
        await writer.set("/sizes/large", b"small now")
        await rec.saw(UPDATED, "/sizes/large", count=2)
        assert cache.get("/sizes/large")[0] == b"small now"  # type: ignore[index]


# --- consumers ------------------------------------------------------------------------------


async def test_an_iterator_made_before_start_sees_the_build_then_initialized(pair) -> None:
    client, writer = pair
    await writer.create("/it/a", b"a", make_parents=True)
    cache = TreeCache(client, "/it")
    events = cache.events()
    async with cache:
        await writer.set("/it/a", b"a1")
        seen = [await anext(events) for _ in range(4)]
        assert [(e.type, e.path) for e in seen] == [
            (CREATED, "/it"),
            (CREATED, "/it/a"),
            (INITIALIZED, "/it"),
            (UPDATED, "/it/a"),
        ]
        late = cache.events()
        first = await anext(late)
        assert first.type is INITIALIZED and first.snapshot == cache.snapshot()
    # Closing the cache ends every iterator.
    assert [e async for e in events] == [] and [e async for e in late] == []
    assert [e async for e in cache.events()] == []


async def test_a_slow_consumer_overflows_then_resyncs_with_a_fresh_snapshot(pair) -> None:
    client, writer = pair
    await writer.create("/slow", b"")
    async with recorded(TreeCache(client, "/slow")) as (cache, rec):
        slow = cache.events(max_buffer=5)
        assert (await anext(slow)).type is INITIALIZED
        buffered: list[int] = []
        cache.add_listener(lambda _event: buffered.append(slow.pending))
        pipeline = writer.pipeline()
        for i in range(50):
            pipeline.create(f"/slow/n{i}", b"%d" % i)
        await pipeline.execute()
        await finish_with_marker(writer, rec, "/slow/end")
        assert slow.pending == 0 and slow.dropped == 51  # bounded, and said so
        assert max(buffered) == 5
        overflowed = await anext(slow)
        assert overflowed.type is OVERFLOWED
        await writer.set("/slow/n0", b"while overflowed")  # covered by the snapshot
        await rec.saw(UPDATED, "/slow/n0")
        resynced = await anext(slow)
        assert resynced.type is RESYNCED and resynced.snapshot is not None
        assert resynced.snapshot == cache.snapshot()
        assert resynced.snapshot["/slow/n0"][0] == b"while overflowed"
        await writer.set("/slow/n1", b"after")
        following = await anext(slow)
        assert (following.type, following.path, following.data) == (UPDATED, "/slow/n1", b"after")
        await slow.aclose()


async def test_a_failing_listener_is_logged_and_the_others_still_hear(pair, caplog) -> None:
    client, writer = pair

    def broken(event: CacheEvent) -> None:
        raise RuntimeError("listener bug")

    cache = TreeCache(client, "/listener")
    cache.add_listener(broken)
    rec = Recorder(cache)
    async with cache:
        await writer.create("/listener", b"1")
        await rec.saw(CREATED, "/listener")
        cache.remove_listener(broken)
        cache.remove_listener(broken)  # not registered: ignored
        await writer.set("/listener", b"2")
        await rec.saw(UPDATED, "/listener")
    failures = [r for r in caplog.records if "listener" in r.getMessage() and r.exc_info]
    assert len(failures) == 2  # INITIALIZED, then the CREATED
    caplog.clear()  # logged on purpose: not a failure of this test


# --- life cycle -----------------------------------------------------------------------------


async def _watches(target: ZooKeeperTarget, word: str) -> str:
    return await four_letter_word(*_address(target), word)


def _total_watches(wchs: str) -> int:
    return int(wchs.rsplit("Total watches:", 1)[1].split()[0])


async def test_closing_a_cache_removes_its_watch_on_the_server(pair, zookeeper) -> None:
    client, _writer = pair
    session = f"0x{client.session_id:x}"
    server_path = f"{zookeeper.namespace}/watched"
    before = _total_watches(await _watches(zookeeper, "wchs"))
    async with TreeCache(client, "/watched"), NodeCache(client, "/watched/n"):
        wchc = await _watches(zookeeper, "wchc")
        mine = wchc.split(session, 1)[1].split("0x", 1)[0]
        assert server_path in mine and f"{server_path}/n" in mine
        assert _total_watches(await _watches(zookeeper, "wchs")) == before + 2
    # The removals went out before these syncs (and the fallback removal of a
    # server before 3.9, sent on its refusal, before the second one's reply).
    await client.sync("/")
    await client.sync("/")
    assert server_path not in await _watches(zookeeper, "wchc")
    assert _total_watches(await _watches(zookeeper, "wchs")) == before
    assert client.pending_watches == 0 and client.background_tasks == 0


async def test_start_twice_and_bad_arguments_are_refused(pair) -> None:
    client, _writer = pair
    with pytest.raises(aiocoord.InvalidPathError):
        TreeCache(client, "no-slash")
    with pytest.raises(ValueError):
        TreeCache(client, "/a", max_depth=-1)
    with pytest.raises(TypeError):
        TreeCache(client, "/a", max_cached_data="10")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        NodeCache(client, "/a", max_buffer=0)
    cache = TreeCache(client, "/twice")
    with pytest.raises(ValueError):
        cache.events(max_buffer=0)
    async with cache:
        with pytest.raises(RuntimeError):
            await cache.start()
    with pytest.raises(RuntimeError):
        await cache.start()
    never = TreeCache(client, "/never")
    await never.aclose()
    with pytest.raises(RuntimeError):
        await never.wait_initialized()
    with pytest.raises(RuntimeError):
        await never.start()


async def test_a_server_without_add_watch_fails_start_clearly(pair, monkeypatch) -> None:
    client, _writer = pair

    async def refused(path: str, *, recursive: bool = False) -> aiocoord.PersistentWatch:
        raise aiocoord.UnimplementedError(path)

    monkeypatch.setattr(client, "add_watch", refused)
    cache = TreeCache(client, "/old-server")
    with pytest.raises(aiocoord.UnimplementedError) as caught:
        await cache.start()
    assert "ZooKeeper 3.6" in "".join(caught.value.__notes__)
    assert client.pending_watches == 0 and client.background_tasks == 0


async def test_an_unreadable_node_fails_start_and_leaves_nothing(pair) -> None:
    client, writer = pair
    await writer.create("/secret", b"")
    await writer.create(
        "/secret/hidden", b"", acl=[aiocoord.ACL(aiocoord.Perm.WRITE, "world", "anyone")]
    )
    cache = TreeCache(client, "/secret")
    with pytest.raises(aiocoord.NoAuthError):
        await cache.start()
    assert client.pending_watches == 0 and client.background_tasks == 0


async def test_closing_the_client_ends_the_cache(client_factory) -> None:
    client = client_factory()
    await client.start()
    cache = TreeCache(client, "/closing")
    await cache.start()
    events = cache.events()
    assert (await anext(events)).type is INITIALIZED
    await client.aclose()
    assert [e async for e in events] == []
    await cache.aclose()


async def test_cancelling_start_leaves_nothing_behind(client_factory, zookeeper) -> None:
    async with (
        TcpProxy(*_address(zookeeper)) as proxy,
        aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace) as client,
    ):
        cache = TreeCache(client, "/cancelled")
        proxy.hold()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await cache.start()
        proxy.release()
        assert client.pending_watches == 0 and client.background_tasks == 0


def _address(zookeeper: ZooKeeperTarget) -> tuple[str, int]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    return host, int(port)


# --- faults ---------------------------------------------------------------------------------


async def test_a_reconnect_repairs_the_view_by_stat_without_rereading_everything(
    zookeeper, client_factory, state_log
) -> None:
    writer = client_factory()
    await writer.start()
    await writer.create("/gap/keep", b"k", make_parents=True)
    pipeline = writer.pipeline()
    for i in range(200):
        pipeline.create(f"/gap/keep/n{i}", b"%d" % i)
    await writer.create("/gap/goes/x", b"x", make_parents=True)
    await pipeline.execute()
    async with (
        TcpProxy(*_address(zookeeper)) as proxy,
        aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace) as client,
    ):
        log = state_log(client)
        async with recorded(TreeCache(client, "/gap")) as (cache, rec):
            before = cache.statistics()
            seen = len(rec.events)
            proxy.refuse()
            proxy.cut()
            await log.wait_for(ConnectionState.SUSPENDED)
            # Changes the watch will never report: made while the client is away.
            await writer.set("/gap/keep/n7", b"changed")
            await writer.create("/gap/keep/new", b"new")
            await writer.delete("/gap/goes", recursive=True)
            proxy.refuse(False)
            await log.wait_for(ConnectionState.RECONNECTED)
            await rec.saw(RESYNCED)
            after = cache.statistics()
            assert after.resyncs == 1
            # One Stat check per node held; data read again only where it moved.
            assert after.stat_reads - before.stat_reads == before.nodes
            assert after.data_reads - before.data_reads == 2  # n7 and the new node
            assert after.child_listings - before.child_listings == 2  # /gap and /gap/keep
            changes = [(e.type, e.path) for e in rec.events[seen:] if e.type is not RESYNCED]
            assert len(changes) == 4 and set(changes) == {
                (UPDATED, "/gap/keep/n7"),
                (CREATED, "/gap/keep/new"),
                (DELETED, "/gap/goes/x"),
                (DELETED, "/gap/goes"),
            }
            assert changes.index((DELETED, "/gap/goes/x")) < changes.index((DELETED, "/gap/goes"))
            await assert_view_is_the_tree(cache, writer, rec)


class Burst:
    """Another client changing a tree: creates, sets and deletes under ``root``, in
    pipelined rounds of 50. It runs half its rounds, then waits until allowed
    more (so a fault lands in its middle), and rides out faults itself."""

    def __init__(self, writer: aiocoord.Client, root: str, rounds: int = 60) -> None:
        self.writer = writer
        self.root = root
        self.rounds = rounds
        self.halfway = asyncio.Event()
        self._allowed = rounds // 2
        self._more = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Burst:
        for d in range(5):
            await self.writer.create(f"{self.root}/d{d}", b"", make_parents=True)
        return self

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def __aexit__(self, *exc_info: object) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait([self.task])

    async def wait_halfway(self) -> None:
        async with asyncio.timeout(EVENT_TIMEOUT):
            await self.halfway.wait()

    def allow(self, rounds: int | None = None) -> None:
        """Let ``rounds`` more rounds go (None: all the rest)."""
        self._allowed += self.rounds if rounds is None else rounds
        self._more.set()

    async def done(self) -> None:
        assert self.task is not None
        self.allow()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await self.task

    async def _run(self) -> None:
        for r in range(self.rounds):
            while not self._allowed:
                self.halfway.set()
                self._more.clear()
                await self._more.wait()
            self._allowed -= 1
            pipeline = self.writer.pipeline()
            for i in range(50):
                path = f"{self.root}/d{i % 5}/n{i}"
                if r == 0:
                    pipeline.create(path, b"0")
                elif r % 7 == 3:
                    pipeline.delete(path)
                elif r % 7 == 4:
                    pipeline.create(path, b"%d" % r)
                else:
                    pipeline.set(path, b"%d" % r)
            while True:
                # A round cut by a fault is sent again: creates and deletes that
                # had gone through then fail harmlessly, and sets apply again.
                try:
                    results = await pipeline.execute()
                except aiocoord.SessionError:
                    results = [aiocoord.ConnectionLossError()]
                if not any(isinstance(r, aiocoord.SessionError) for r in results):
                    break
                await self.writer.wait_connected()


@pytest.mark.timeout(120)
async def test_a_server_restart_in_the_middle_of_a_burst_is_repaired(
    private_zookeeper, state_log
) -> None:
    connect = private_zookeeper.connect_string
    async with (
        aiocoord.connect(connect, namespace="/restart") as client,
        aiocoord.connect(connect, namespace="/restart") as writer,
        Burst(writer, "/tree") as burst,
        recorded(TreeCache(client, "/tree")) as (cache, rec),
    ):
        log = state_log(client)
        burst.start()
        await burst.wait_halfway()
        await private_zookeeper.stop()
        await log.wait_for(ConnectionState.SUSPENDED)
        burst.allow()  # its next round waits for the server
        await private_zookeeper.start()
        await log.wait_for(ConnectionState.RECONNECTED)
        await rec.saw(RESYNCED)
        await burst.done()
        await finish_with_marker(writer, rec, "/tree/end")
        await assert_view_is_the_tree(cache, writer, rec)


async def test_a_session_expiry_in_the_middle_of_a_burst_rebuilds_the_view(pair) -> None:
    client, writer = pair
    async with (
        Burst(writer, "/expiry") as burst,
        recorded(TreeCache(client, "/expiry")) as (cache, rec),
    ):
        burst.start()
        await burst.wait_halfway()
        burst.allow()  # the writer goes on while the session goes
        await expire_session(client)
        await rec.saw(RESYNCED)
        await burst.done()
        await finish_with_marker(writer, rec, "/expiry/end")
        await assert_view_is_the_tree(cache, writer, rec)
        assert cache.statistics().resyncs == 1
    assert client.pending_watches == 0


async def test_connections_dropped_again_and_again_in_a_burst_lose_nothing(pair, state_log) -> None:
    client, writer = pair
    log = state_log(client)
    loop = asyncio.get_running_loop()
    async with (
        Burst(writer, "/drops", rounds=100) as burst,
        recorded(TreeCache(client, "/drops")) as (cache, rec),
    ):
        # Where the events stood at each reconnection (listeners run in order: the
        # cache's own, added first, has asked for a repair by then).
        marks: list[int] = []
        client.add_listener(
            lambda state: (
                marks.append(len(rec.events)) if state is ConnectionState.RECONNECTED else None
            )
        )
        armed = False

        def drop_on_update(event: CacheEvent) -> None:
            # Called by the cache's task as it applies a batch: the drop runs once
            # that task has sent its next batch, cutting those reads off.
            nonlocal armed
            if armed and event.type is UPDATED:
                armed = False
                loop.call_soon(drop_connection, client)

        cache.add_listener(drop_on_update)
        burst.start()
        await burst.wait_halfway()
        for drops in range(1, 6):
            armed = True
            burst.allow(8)  # six rounds of sets among them, at least
            await log.wait_for(ConnectionState.RECONNECTED, count=drops)
        await rec.until(lambda events: any(e.type is RESYNCED for e in events[marks[-1] :]))
        await burst.done()
        await finish_with_marker(writer, rec, "/drops/end")
        await assert_view_is_the_tree(cache, writer, rec)


@pytest.mark.ensemble
@pytest.mark.timeout(180)
async def test_an_ensemble_failover_in_the_middle_of_a_burst_is_repaired(
    zookeeper_ensemble, state_log
) -> None:
    connect = zookeeper_ensemble.connect_string
    async with (
        aiocoord.connect(connect, namespace="/failover") as client,
        aiocoord.connect(connect, namespace="/failover") as writer,
        Burst(writer, "/tree") as burst,
        recorded(TreeCache(client, "/tree")) as (cache, rec),
    ):
        log = state_log(client)
        burst.start()
        await burst.wait_halfway()
        host = client.connected_to
        assert host is not None
        member = next(m for m in zookeeper_ensemble.members if m.port == host[1])
        await member.kill()
        burst.allow()
        await log.wait_for(ConnectionState.RECONNECTED)
        await rec.saw(RESYNCED)
        await burst.done()
        await finish_with_marker(writer, rec, "/tree/end")
        await assert_view_is_the_tree(cache, writer, rec)
