"""One-shot and persistent watches overlapping in one session (#29's suspected loss).

Many election-like paths in one client, each with a persistent (or recursive)
watch on the path and a chain of contenders whose exists-watches sit on their
predecessor: every waiter must wake when its predecessor goes.
"""

from __future__ import annotations

import asyncio

import pytest

import aiocoord
from aiocoord import EventType
from aiocoord.testing import drop_connection

PATHS = 50
CONTENDERS = 5


async def _chain(coord: aiocoord.Client, base: str, children_watch: bool) -> None:
    """Queue CONTENDERS sequential nodes; each waits on its predecessor, then leaves."""
    nodes = [
        await coord.create(f"{base}/n-", ephemeral=True, sequential=True) for _ in range(CONTENDERS)
    ]
    watches = []
    for before in nodes[:-1]:
        stat, watch = await coord.watch_exists(before)
        assert stat is not None
        watches.append(watch)
    if children_watch:
        # What a leader minding priority holds: a child watch on the path itself.
        _names, _stat, child = await coord.watch_children(base)
    await coord.delete(nodes[0])
    if children_watch:
        assert await child == aiocoord.WatchEvent(EventType.CHILD, base)
    for index, watch in enumerate(watches):
        event = await watch
        assert event.type is EventType.DELETED and event.path == nodes[index]
        await coord.delete(nodes[index + 1])


@pytest.mark.parametrize("recursive", [False, True], ids=["persistent", "recursive"])
@pytest.mark.parametrize("children_watch", [False, True], ids=["", "children"])
async def test_exists_watches_under_persistent_watches_all_fire(
    coord: aiocoord.Client, recursive: bool, children_watch: bool
) -> None:
    bases = [f"/e{i}" for i in range(PATHS)]
    for base in bases:
        await coord.create(base)
    persistent = [await coord.add_watch(base, recursive=recursive) for base in bases]
    async with asyncio.timeout(10):
        async with asyncio.TaskGroup() as chains:
            for base in bases:
                chains.create_task(_chain(coord, base, children_watch))
    # Events of a request's change come before its reply: all are queued by now.
    # Each contender's node was created and deleted under a watched path.
    assert [watch.pending for watch in persistent] == [CONTENDERS * 2] * PATHS
    for watch in persistent:
        await watch.aclose()


async def _next(watch: aiocoord.PersistentWatch) -> aiocoord.WatchEvent:
    async with asyncio.timeout(5):  # bounded: a lost server-side watch never delivers
        return await anext(watch)


async def _fired(watch: aiocoord.Watch) -> aiocoord.WatchEvent:
    async with asyncio.timeout(5):
        return await watch


# ZooKeeper before 3.9 keeps one watch mode per (connection, path) (ZOOKEEPER-4466):
# a one-shot watch and a persistent one on the same path overwrite each other there.


async def test_a_data_watch_on_a_recursively_watched_path_leaves_the_recursive_watch(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/r", b"0")
    async with await coord.add_watch("/r", recursive=True) as recursive:
        _data, _stat, watch = await coord.watch_data("/r")
        await coord.set("/r", b"1")
        assert await _fired(watch) == aiocoord.WatchEvent(EventType.CHANGED, "/r")
        await coord.create("/r/a")
        await coord.set("/r", b"2")
        seen = [await _next(recursive) for _ in range(3)]
    assert [event.type for event in seen] == [
        EventType.CHANGED,
        EventType.CREATED,
        EventType.CHANGED,
    ]


async def test_an_exists_watch_on_a_persistently_watched_path_leaves_the_persistent_watch(
    coord: aiocoord.Client,
) -> None:
    async with await coord.add_watch("/p") as persistent:
        _stat, watch = await coord.watch_exists("/p")
        await coord.create("/p")
        assert await _fired(watch) == aiocoord.WatchEvent(EventType.CREATED, "/p")
        await coord.set("/p", b"1")
        await coord.create("/p/a")
        seen = [await _next(persistent) for _ in range(3)]
    assert [event.type for event in seen] == [EventType.CREATED, EventType.CHANGED, EventType.CHILD]


async def test_a_child_watch_on_a_persistently_watched_path_leaves_the_persistent_watch(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/p")
    async with await coord.add_watch("/p") as persistent:
        _names, _stat, watch = await coord.watch_children("/p")
        await coord.create("/p/a")
        assert await _fired(watch) == aiocoord.WatchEvent(EventType.CHILD, "/p")
        await coord.create("/p/b")
        seen = [await _next(persistent) for _ in range(2)]
    assert seen == [aiocoord.WatchEvent(EventType.CHILD, "/p")] * 2


async def test_a_child_watch_fires_though_a_recursive_watch_came_after_it(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/r")
    _names, _stat, watch = await coord.watch_children("/r")
    async with await coord.add_watch("/r", recursive=True) as recursive:
        await coord.create("/r/a")
        assert await _next(recursive) == aiocoord.WatchEvent(EventType.CREATED, "/r/a")
        assert await _fired(watch) == aiocoord.WatchEvent(EventType.CHILD, "/r")


async def test_a_one_shot_watch_riding_on_a_persistent_one_outlives_its_close(
    coord: aiocoord.Client,
) -> None:
    persistent = await coord.add_watch("/p")
    _stat, watch = await coord.watch_exists("/p")
    await persistent.aclose()
    await coord.create("/p")
    assert await _fired(watch) == aiocoord.WatchEvent(EventType.CREATED, "/p")


async def test_watches_sharing_a_path_are_all_armed_again_after_reconnecting(
    coord: aiocoord.Client, state_log
) -> None:
    log = state_log(coord)
    await coord.create("/r")
    async with await coord.add_watch("/r", recursive=True) as recursive:
        _names, _stat, children = await coord.watch_children("/r")
        _data, _stat, data = await coord.watch_data("/r")
        drop_connection(coord)
        await log.wait_for(aiocoord.ConnectionState.RECONNECTED)
        await coord.create("/r/a")
        await coord.set("/r", b"1")
        assert await _fired(children) == aiocoord.WatchEvent(EventType.CHILD, "/r")
        assert await _fired(data) == aiocoord.WatchEvent(EventType.CHANGED, "/r")
        await coord.set("/r", b"2")
        seen = [await _next(recursive) for _ in range(3)]
    assert [event.type for event in seen] == [
        EventType.CREATED,
        EventType.CHANGED,
        EventType.CHANGED,
    ]
