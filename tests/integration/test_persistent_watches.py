"""Persistent and persistent-recursive watches (``addWatch``, ZooKeeper >= 3.6)."""

from __future__ import annotations

import pytest

import aiocoord
from aiocoord import ConnectionState, EventType, SessionExpiredError, WatchEvent
from aiocoord.testing import drop_connection, expire_session, four_letter_word


async def _watched_paths(coord: aiocoord.Client) -> str:
    """The server's own list of watches by path (the ``wchp`` admin command)."""
    host, port = coord.connected_to or coord.hosts[0]
    return await four_letter_word(host, port, "wchp")


async def test_a_persistent_watch_sees_every_event_on_its_node_and_outlives_a_delete(
    coord: aiocoord.Client,
) -> None:
    async with await coord.add_watch("/p") as watch:
        await coord.create("/p", b"1")
        await coord.set("/p", b"2")
        await coord.create("/p/child")
        await coord.delete("/p/child")
        await coord.delete("/p")
        await coord.create("/p")
        seen = [await anext(watch) for _ in range(6)]
    assert seen == [
        WatchEvent(EventType.CREATED, "/p"),
        WatchEvent(EventType.CHANGED, "/p"),
        WatchEvent(EventType.CHILD, "/p"),
        WatchEvent(EventType.CHILD, "/p"),
        WatchEvent(EventType.DELETED, "/p"),
        WatchEvent(EventType.CREATED, "/p"),
    ]
    assert coord.pending_watches == 0


async def test_a_recursive_watch_sees_the_whole_subtree_but_no_child_events(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/tree")
    async with await coord.add_watch("/tree", recursive=True) as watch:
        await coord.create("/tree/a")
        await coord.create("/tree/a/b", b"x")
        await coord.set("/tree/a/b", b"y")
        await coord.create("/elsewhere")
        await coord.delete("/tree/a/b")
        seen = [await anext(watch) for _ in range(4)]
        assert watch.pending == 0
    assert seen == [
        WatchEvent(EventType.CREATED, "/tree/a"),
        WatchEvent(EventType.CREATED, "/tree/a/b"),
        WatchEvent(EventType.CHANGED, "/tree/a/b"),
        WatchEvent(EventType.DELETED, "/tree/a/b"),
    ]


async def test_a_one_shot_and_a_persistent_watch_on_other_paths_both_fire(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/both")
    await coord.create("/both/n", b"1")
    async with await coord.add_watch("/both", recursive=True) as tree:
        _data, _stat, once = await coord.watch_data("/both/n")
        await coord.set("/both/n", b"2")
        assert await once == WatchEvent(EventType.CHANGED, "/both/n")
        assert await anext(tree) == WatchEvent(EventType.CHANGED, "/both/n")


async def test_a_persistent_watch_is_rearmed_after_a_reconnect(
    coord: aiocoord.Client, state_log
) -> None:
    log = state_log(coord)
    async with await coord.add_watch("/r", recursive=True) as watch:
        drop_connection(coord)
        await log.wait_for(ConnectionState.RECONNECTED)
        await coord.create("/r")
        assert await anext(watch) == WatchEvent(EventType.CREATED, "/r")


async def test_closing_the_last_local_watch_removes_the_servers_watch(
    coord: aiocoord.Client,
) -> None:
    server_path = f"{coord.namespace}/gone"
    first = await coord.add_watch("/gone")
    second = await coord.add_watch("/gone")
    assert server_path in await _watched_paths(coord)
    await first.aclose()
    await coord.create("/gone")
    assert await anext(second) == WatchEvent(EventType.CREATED, "/gone")
    assert server_path in await _watched_paths(coord)
    await second.aclose()
    # The removal went out before the first sync. A server before 3.9 refuses
    # to remove one kind of watch, and the fallback is sent on that refusal,
    # before the first sync's reply is seen: the second sync comes after it.
    await coord.sync("/")
    await coord.sync("/")
    assert server_path not in await _watched_paths(coord)
    assert [event async for event in second] == []
    assert coord.pending_watches == 0


async def test_a_lost_session_ends_a_persistent_watch_with_an_error(
    coord: aiocoord.Client,
) -> None:
    watch = await coord.add_watch("/expiring")
    await expire_session(coord)
    with pytest.raises(SessionExpiredError):
        await anext(watch)
    assert coord.pending_watches == 0


async def test_closing_the_client_ends_iteration(client_factory) -> None:
    client = client_factory()
    await client.start()
    watch = await client.add_watch("/closing")
    await client.aclose()
    assert [event async for event in watch] == []


async def test_a_bad_path_is_refused_before_sending(coord: aiocoord.Client) -> None:
    with pytest.raises(aiocoord.InvalidPathError):
        await coord.add_watch("no-slash")
    assert coord.pending_watches == 0


async def test_closing_a_persistent_watch_spares_a_one_shot_watch_on_the_same_path(
    coord: aiocoord.Client,
) -> None:
    stat, once = await coord.watch_exists("/mixed")
    assert stat is None
    persistent = await coord.add_watch("/mixed")
    await persistent.aclose()
    await coord.sync("/")
    await coord.sync("/")
    await coord.create("/mixed")
    assert await once == WatchEvent(EventType.CREATED, "/mixed")
