"""The caches' pure rules, without a server: what to read, and what a reply changes.

A :class:`_View` gets replies in the order their requests were sent (as
ZooKeeper answers one session) and emits the view's changes; these tests feed
it replies by hand, as the cache's task would.
"""

from __future__ import annotations

import pytest

import aiocoord
from aiocoord import CacheEvent, CacheEventType, NoNodeError, Stat, TreeCache, WatchEvent
from aiocoord._recipes.caches._cache import _CHECK, _DATA, _LIST, _Read, _View
from aiocoord._types import EventType

CREATED = CacheEventType.CREATED
UPDATED = CacheEventType.UPDATED
DELETED = CacheEventType.DELETED


def stat(
    czxid: int, mzxid: int | None = None, *, pzxid: int | None = None, children: int = 0
) -> Stat:
    """A Stat with the fields the rules look at (versions count the zxids' distance)."""
    mzxid = czxid if mzxid is None else mzxid
    pzxid = czxid if pzxid is None else pzxid
    return Stat(
        czxid=czxid,
        mzxid=mzxid,
        ctime=0,
        mtime=0,
        version=mzxid - czxid,
        cversion=pzxid - czxid,
        aversion=0,
        ephemeral_owner=0,
        data_length=0,
        num_children=children,
        pzxid=pzxid,
    )


class Harness:
    def __init__(self, root: str = "/r", *, max_depth: int | None = None, max_data=None) -> None:
        self.events: list[CacheEvent] = []
        self.view = _View(root, max_depth, max_data, self.events.append)

    def changes(self) -> list[tuple[CacheEventType, str]]:
        out = [(e.type, e.path) for e in self.events]
        self.events.clear()
        return out

    def take(self) -> list[tuple[str, _Read]]:
        return self.view.take()

    def build(self, tree: dict[str, tuple[bytes, Stat, list[str]]]) -> None:
        """Answer every read from ``tree`` (path -> data, stat, children) until none is left."""
        while self.view.wants:
            for path, read in self.take():
                self.view.apply(path, read, answer(tree, path, read))


def answer(tree: dict[str, tuple[bytes, Stat, list[str]]], path: str, read: _Read) -> object:
    if path not in tree:
        return None if read is _Read.EXISTS else NoNodeError(path)
    data, st, names = tree[path]
    if read is _Read.EXISTS:
        return st
    if read is _Read.CHILDREN:
        return list(names), st
    return data, st


TREE = {
    "/r": (b"root", stat(1, pzxid=4, children=2), ["a", "b"]),
    "/r/a": (b"a", stat(2, pzxid=5, children=1), ["c"]),
    "/r/b": (b"b", stat(3), []),
    "/r/a/c": (b"c", stat(5), []),
}


def built(**options: object) -> Harness:
    h = Harness(**options)  # type: ignore[arg-type]
    h.view.want("/r", _DATA)
    h.build(TREE)
    return h


# --- building ----------------------------------------------------------------------------------


def test_a_build_reads_each_level_in_one_batch_and_lists_only_nodes_with_children() -> None:
    h = Harness()
    h.view.want("/r", _DATA)
    batches = []
    while h.view.wants:
        batch = h.take()
        batches.append(batch)
        for path, read in batch:
            h.view.apply(path, read, answer(TREE, path, read))
    assert batches == [
        [("/r", _Read.GET)],
        [("/r", _Read.CHILDREN)],
        [("/r/a", _Read.GET), ("/r/b", _Read.GET)],
        [("/r/a", _Read.CHILDREN)],
        [("/r/a/c", _Read.GET)],
    ]
    assert h.changes() == [
        (CREATED, "/r"),
        (CREATED, "/r/a"),
        (CREATED, "/r/b"),
        (CREATED, "/r/a/c"),
    ]
    assert h.view.children("/r") == ["a", "b"] and h.view.nodes["/r/a/c"][0] == b"c"


def test_a_missing_root_makes_an_empty_view() -> None:
    h = Harness()
    h.view.want("/r", _DATA)
    h.build({})
    assert h.view.nodes == {} and h.changes() == []


def test_max_depth_stops_listing_at_its_level() -> None:
    h = built(max_depth=1)
    assert set(h.view.nodes) == {"/r", "/r/a", "/r/b"}
    h.view.hint(WatchEvent(EventType.CHANGED, "/r/a/c"))  # too deep: not even read
    assert h.view.wants == {}
    only = built(max_depth=0)
    assert set(only.view.nodes) == {"/r"}


def test_data_over_the_limit_is_not_kept_but_its_stat_is() -> None:
    h = built(max_data=1)
    assert h.view.nodes["/r/a"][0] == b"a"
    assert h.view.nodes["/r"][0] is None and h.view.nodes["/r"][1].czxid == 1


# --- changes -----------------------------------------------------------------------------------


def test_hints_ask_for_data_and_child_events_say_nothing_more() -> None:
    h = built()
    for kind in (EventType.CREATED, EventType.CHANGED, EventType.DELETED):
        h.view.hint(WatchEvent(kind, f"/r/{kind.name}"))
    h.view.hint(WatchEvent(EventType.CHILD, "/r"))
    assert h.view.wants == {"/r/CREATED": _DATA, "/r/CHANGED": _DATA, "/r/DELETED": _DATA}


def test_a_path_only_moves_forward_and_reports_each_new_version_once() -> None:
    h = built()
    h.changes()
    h.view.apply("/r/b", _Read.GET, (b"b2", stat(3, 9)))
    h.view.apply("/r/b", _Read.GET, (b"b1", stat(3, 7)))  # older: ignored
    h.view.apply("/r/b", _Read.GET, (b"b2", stat(3, 9, pzxid=10)))  # same version
    assert h.changes() == [(UPDATED, "/r/b")]
    data, st = h.view.nodes["/r/b"]
    assert data == b"b2" and st.pzxid == 10  # the newer Stat is kept quietly


def test_a_node_made_again_replaces_the_old_one_and_its_subtree() -> None:
    h = built()
    h.changes()
    h.view.apply("/r/a", _Read.GET, (b"new a", stat(20, children=0)))
    assert h.changes() == [(DELETED, "/r/a/c"), (DELETED, "/r/a"), (CREATED, "/r/a")]
    assert h.view.children("/r/a") == [] and h.view.nodes["/r/a"][0] == b"new a"


def test_a_missing_node_takes_its_subtree_with_it_deepest_first() -> None:
    h = built()
    h.changes()
    h.view.apply("/r/a", _Read.GET, NoNodeError("/r/a"))
    assert h.changes() == [(DELETED, "/r/a/c"), (DELETED, "/r/a")]
    h.view.apply("/r", _Read.EXISTS, None)
    gone = h.events
    assert [e.path for e in gone] == ["/r/b", "/r"]
    # A DELETED event carries what the node last held.
    assert gone[0].data == b"b" and gone[0].stat == TREE["/r/b"][1]
    assert h.view.nodes == {} and h.view.kids == {} and h.view.listed == {}


def test_a_child_whose_parent_is_not_in_the_view_waits_for_its_parent() -> None:
    h = Harness()
    h.view.apply("/r/x", _Read.GET, (b"x", stat(7)))  # the root is not in the view
    assert h.view.nodes == {} and h.changes() == []
    h.view.apply("/r", _Read.GET, (b"r", stat(6, pzxid=7, children=1)))
    assert h.view.wants == {"/r": _LIST}  # listing it finds the child again


def test_a_reply_answers_what_was_asked_before_it_but_not_more() -> None:
    h = built()
    h.view.want("/r/b", _DATA | _CHECK | _LIST)
    h.view.apply("/r/b", _Read.GET, (b"b", TREE["/r/b"][1]))
    assert h.view.wants == {"/r/b": _CHECK | _LIST}
    h.view.apply("/r/b", _Read.EXISTS, TREE["/r/b"][1])
    assert h.view.wants == {"/r/b": _LIST}


def test_reads_cut_off_by_a_dropped_connection_are_asked_again() -> None:
    h = built()
    h.view.want("/r/a", _DATA | _CHECK)
    h.view.want("/r/b", _CHECK | _LIST)
    batch = h.take()
    assert batch == [("/r/a", _Read.GET_CHECKED), ("/r/b", _Read.EXISTS), ("/r/b", _Read.CHILDREN)]
    assert h.view.wants == {}
    h.view.requeue(batch)
    assert h.view.wants == {"/r/a": _DATA | _CHECK, "/r/b": _CHECK | _LIST}


def test_a_batch_goes_shallowest_first_then_in_the_order_asked_and_has_a_limit() -> None:
    h = Harness()
    for path in ("/r/z/deep", "/r/b", "/r", "/r/a"):
        h.view.want(path, _DATA)
    assert [p for p, _ in h.view.take(limit=3)] == ["/r", "/r/b", "/r/a"]
    assert h.view.wants == {"/r/z/deep": _DATA}


def test_depth_counts_from_the_root_also_for_the_namespace_root() -> None:
    assert _View("/", None, None, print).depth("/a/b") == 2
    assert _View("/", None, None, print).depth("/") == 0
    assert _View("/x/y", None, None, print).depth("/x/y/z") == 1


# --- repair after an outage -----------------------------------------------------------------------


def test_a_repair_checks_every_stat_and_rereads_only_what_moved() -> None:
    h = built()
    h.changes()
    h.view.plan_repair()
    batch = h.take()
    assert sorted(batch) == sorted((p, _Read.EXISTS) for p in TREE)
    # Meanwhile (unseen by the watch): /r/b's data changed, /r/a/c went, /r/d came.
    now = dict(TREE)
    now["/r"] = (b"root", stat(1, pzxid=12, children=3), ["a", "b", "d"])
    now["/r/a"] = (b"a", stat(2, pzxid=11, children=0), [])
    now["/r/b"] = (b"b2", stat(3, 10), [])
    now["/r/d"] = (b"d", stat(12), [])
    del now["/r/a/c"]
    for path, read in batch:
        h.view.apply(path, read, answer(now, path, read))
    assert h.changes() == [(DELETED, "/r/a/c")]
    assert h.view.wants == {"/r": _LIST, "/r/a": _LIST, "/r/b": _DATA | _CHECK}
    h.build(now)
    assert h.changes() == [(UPDATED, "/r/b"), (CREATED, "/r/d")]
    assert set(h.view.nodes) == {"/r", "/r/a", "/r/b", "/r/d"}


def test_a_repair_that_finds_nothing_changed_asks_for_nothing_more() -> None:
    h = built()
    h.changes()
    h.view.plan_repair()
    h.build(TREE)
    assert h.changes() == [] and h.view.wants == {}


def test_a_repair_notices_a_node_made_again_and_a_root_that_appeared() -> None:
    h = built()
    h.changes()
    h.view.plan_repair()
    now = dict(TREE)
    now["/r/b"] = (b"b again", stat(30), [])
    for path, read in h.take():
        h.view.apply(path, read, answer(now, path, read))
    assert h.changes() == [(DELETED, "/r/b")]
    h.build(now)
    assert h.changes() == [(CREATED, "/r/b")]

    empty = Harness()
    empty.view.plan_repair()
    assert empty.view.wants == {"/r": _DATA}


def test_a_listing_drops_children_that_went_and_asks_for_new_ones() -> None:
    h = built()
    h.changes()
    h.view.apply("/r", _Read.CHILDREN, (["b", "e"], stat(1, pzxid=40, children=2)))
    assert h.changes() == [(DELETED, "/r/a/c"), (DELETED, "/r/a")]
    assert h.view.wants == {"/r/e": _DATA}
    assert h.view.listed["/r"] == (40, 39)


# --- consumers ----------------------------------------------------------------------------------


@pytest.fixture
def cache(client: aiocoord.Client) -> TreeCache:
    return TreeCache(client, "/c")


def _event(i: int) -> CacheEvent:
    return CacheEvent(UPDATED, f"/c/n{i}", b"%d" % i, stat(1, i + 1))


async def test_a_consumer_that_falls_behind_is_told_then_resynced_then_follows(
    cache: TreeCache,
) -> None:
    consumer = cache.events(max_buffer=3)
    for i in range(3):
        cache._emit(_event(i))
    assert consumer.pending == 3 and consumer.dropped == 0
    for i in range(3, 10):
        cache._emit(_event(i))
    assert consumer.pending == 0 and consumer.dropped == 10  # never more than 3 held
    assert (await anext(consumer)).type is CacheEventType.OVERFLOWED
    cache._emit(_event(10))  # dropped too: the snapshot read next covers it
    resynced = await anext(consumer)
    assert resynced.type is CacheEventType.RESYNCED and resynced.snapshot == {}
    cache._emit(_event(11))
    assert (await anext(consumer)).path == "/c/n11"
    assert consumer.dropped == 11


async def test_a_consumer_reads_what_it_buffered_then_ends_with_the_cache(cache: TreeCache) -> None:
    consumer = cache.events(max_buffer=5)
    cache._emit(_event(1))
    cache._finish(None)
    assert [e.path async for e in consumer] == ["/c/n1"]
    assert [e async for e in cache.events()] == []  # made after the end: ended


async def test_a_failed_cache_raises_its_error_to_consumers_after_their_events(
    cache: TreeCache,
) -> None:
    consumer = cache.events()
    cache._emit(_event(1))
    cache._finish(aiocoord.NoAuthError("/c/secret"))
    assert (await anext(consumer)).path == "/c/n1"
    with pytest.raises(aiocoord.NoAuthError):
        await anext(consumer)
    with pytest.raises(aiocoord.NoAuthError):
        await cache.wait_initialized()


async def test_a_closed_consumer_hears_nothing_more(cache: TreeCache) -> None:
    consumer = cache.events()
    await consumer.aclose()
    cache._emit(_event(1))
    assert [e async for e in consumer] == []
