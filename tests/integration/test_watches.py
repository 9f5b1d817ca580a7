"""Watches as awaitables and async iterators."""

from __future__ import annotations

import asyncio

import pytest
from _waiting import waiting

import aiocoord
from aiocoord import EventType, NoNodeError


async def test_data_watch_fires_once_on_change(coord: aiocoord.Client) -> None:
    await coord.create("/w", b"1")
    data, stat, watch = await coord.watch_data("/w")
    assert (data, stat.version) == (b"1", 0) and not watch.done()
    await coord.set("/w", b"2")
    assert await watch == aiocoord.WatchEvent(EventType.CHANGED, "/w")
    assert coord.pending_watches == 0


async def test_data_watch_fires_on_delete(coord: aiocoord.Client) -> None:
    await coord.create("/w")
    _data, _stat, watch = await coord.watch_data("/w")
    await coord.delete("/w")
    assert (await watch).type is EventType.DELETED


async def test_watch_data_on_missing_node_raises_and_leaves_no_watch(
    coord: aiocoord.Client,
) -> None:
    with pytest.raises(NoNodeError):
        await coord.watch_data("/absent")
    assert coord.pending_watches == 0


async def test_exists_watch_on_missing_node_fires_on_create(coord: aiocoord.Client) -> None:
    stat, watch = await coord.watch_exists("/later")
    assert stat is None
    await coord.create("/later")
    assert (await watch).type is EventType.CREATED


async def test_children_watch_fires_on_child_change(coord: aiocoord.Client) -> None:
    await coord.create("/parent")
    names, _stat, watch = await coord.watch_children("/parent")
    assert names == []
    await coord.set("/parent", b"data changes do not fire child watches")
    await coord.create("/parent/kid")
    assert (await watch).type is EventType.CHILD


async def test_many_local_waiters_share_one_server_watch(coord: aiocoord.Client) -> None:
    await coord.create("/shared")
    watches = [(await coord.watch_data("/shared"))[2] for _ in range(5)]
    assert coord.pending_watches == 5
    await coord.set("/shared", b"x")
    events = await asyncio.gather(*watches)
    assert {e.type for e in events} == {EventType.CHANGED}
    assert coord.pending_watches == 0


async def test_cancelled_watch_is_forgotten(coord: aiocoord.Client) -> None:
    await coord.create("/c")
    _data, _stat, watch = await coord.watch_data("/c")
    waiter = asyncio.create_task(_await(watch))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert coord.pending_watches == 0
    await coord.set("/c", b"fires into nothing")
    await coord.sync("/c")


async def _await(watch: aiocoord.Watch) -> aiocoord.WatchEvent:
    return await watch


async def test_wait_changed_times_out_under_caller_deadline(coord: aiocoord.Client) -> None:
    await coord.create("/quiet")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await coord.wait_changed("/quiet")
    assert coord.pending_watches == 0


async def test_wait_changed_timeout_raises_and_cancels_the_watch(coord: aiocoord.Client) -> None:
    await coord.create("/still")
    with pytest.raises(aiocoord.OperationTimeoutError, match="/still"):
        await coord.wait_changed("/still", timeout=0.1)
    assert coord.pending_watches == 0


async def test_wait_changed_sees_the_next_change(coord: aiocoord.Client) -> None:
    await coord.create("/n")
    waiter = asyncio.create_task(coord.wait_changed("/n"))
    await waiting(coord)  # its exists request is answered: the watch is set
    await coord.delete("/n")
    assert (await waiter).type is EventType.DELETED


async def test_data_changes_iterates_over_states(coord: aiocoord.Client) -> None:
    seen: list[bytes | None] = []
    changes = coord.data_changes("/it")
    first = await anext(changes)
    assert first is None  # not there yet
    await coord.create("/it", b"a")
    snapshot = await anext(changes)
    assert snapshot is not None
    seen.append(snapshot[0])
    await coord.set("/it", b"b")
    snapshot = await anext(changes)
    assert snapshot is not None
    seen.append(snapshot[0])
    await coord.delete("/it")
    assert await anext(changes) is None
    await changes.aclose()
    assert seen == [b"a", b"b"]
    assert coord.pending_watches == 0


async def test_children_changes_iterates_over_sorted_listings(coord: aiocoord.Client) -> None:
    await coord.create("/kids")
    changes = coord.children_changes("/kids")
    assert await anext(changes) == []
    await coord.create("/kids/b")
    assert await anext(changes) == ["b"]
    await coord.create("/kids/a")
    assert await anext(changes) == ["a", "b"]
    await changes.aclose()
    assert coord.pending_watches == 0


async def test_close_fails_pending_watches(client_factory) -> None:
    client = client_factory()
    await client.start()
    await client.create("/z")
    _stat, watch = await client.watch_exists("/z")
    await client.aclose()
    with pytest.raises(aiocoord.ClientClosedError):
        await watch
