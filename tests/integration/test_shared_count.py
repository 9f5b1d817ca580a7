"""SharedCount: Curator's shared integer, its conditional set, listeners and faults."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator

import anyio
import pytest
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ConnectionState,
    CorruptValueError,
    CounterOverflowError,
    SharedCount,
    VersionedValue,
)
from aiocoord.testing import drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)


def encoded(value: int) -> bytes:
    return struct.pack(">i", value)


class WarningsAbout(logging.Handler):
    """Collects aiocoord's WARNING records that mention ``needle``; ``seen`` is set on one."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.WARNING)
        self.needle = needle
        self.records: list[logging.LogRecord] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.records.append(record)
            self.seen.set()


@pytest.fixture
def warnings_about() -> Iterator[Callable[[str], WarningsAbout]]:
    logger = logging.getLogger("aiocoord")
    handlers: list[WarningsAbout] = []

    def make(needle: str) -> WarningsAbout:
        handler = WarningsAbout(needle)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler

    yield make
    for handler in handlers:
        logger.removeHandler(handler)


async def next_value(changes: aiocoord.ChangeStream[int]) -> int:
    with anyio.fail_after(EVENT_TIMEOUT):
        return await anext(changes)


def own_tasks(before: set[asyncio.Task[object]]) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() - before if not t.done()]


async def test_two_clients_share_one_count(started) -> None:
    a, b = await started(2)
    async with SharedCount(a, "/shared", 5) as left, SharedCount(b, "/shared", 99) as right:
        assert left.count == right.count == 5  # the seed applies only to the creator
        seen: list[int] = []
        right.add_listener(seen.append)
        changes = right.changes()
        assert await left.try_set_count(left.versioned_value, 6)
        assert await next_value(changes) == 6
        stale = VersionedValue(0, 5)
        assert not await left.try_set_count(stale, 7)
        await left.set_count(8)
        assert await next_value(changes) == 8
        assert right.count == 8 and right.versioned_value.version == 2
        assert seen == [6, 8]
        await changes.aclose()
    assert (await a.get("/shared"))[0] == encoded(8)
    with pytest.raises(CounterOverflowError):
        await SharedCount(a, "/shared", 2**31).start()


async def test_try_set_compares_with_the_local_value_first(started) -> None:
    """Curator's trySetValue refuses a ``previous`` that differs (version or value) from
    the value it holds, so ZooKeeper's -1 ("any version") never acts as a wildcard."""
    a, b = await started(2)
    async with SharedCount(a, "/try", 5) as count:
        assert not await count.try_set_count(VersionedValue(-1, 5), 6)
        assert not await count.try_set_count(VersionedValue(0, 4), 6)  # right version only
        data, stat = await a.get("/try")
        assert (data, stat.version) == (encoded(5), 0)  # nothing was written
        assert count.versioned_value == VersionedValue(0, 5)

        # Another process writes. Whether or not the watch has told us yet, the
        # old ticket fails, and the count then shows what the server holds.
        await b.set("/try", encoded(9))
        assert not await count.try_set_count(VersionedValue(0, 5), 6)
        assert count.versioned_value == VersionedValue(1, 9)
        assert await count.try_set_count(count.versioned_value, 10)
        assert count.versioned_value == VersionedValue(2, 10)
        assert (await a.get("/try"))[0] == encoded(10)


async def test_try_set_needs_a_started_count(coord: aiocoord.Client) -> None:
    count = SharedCount(coord, "/unstarted", 1)
    with pytest.raises(RuntimeError, match="not started"):
        await count.try_set_count(VersionedValue(0, 1), 2)
    assert await coord.exists("/unstarted") is None


async def test_start_fails_on_bytes_that_are_not_a_count(coord: aiocoord.Client) -> None:
    """Curator's start() fails when the value cannot be read; so does this one, and
    it leaves nothing behind: no task, no watch, a later start() may try again."""
    await coord.create("/bad", b"abc")
    count = SharedCount(coord, "/bad", 0)
    before = set(asyncio.all_tasks())
    watches = coord.pending_watches
    for _attempt in range(2):
        with pytest.raises(CorruptValueError, match="/bad"):
            await count.start()
        assert own_tasks(before) == []
        assert coord.pending_watches == watches
        with pytest.raises(RuntimeError, match="not started"):
            count.count  # noqa: B018
    await coord.set("/bad", encoded(3))
    async with count:
        assert count.versioned_value == VersionedValue(1, 3)

    failed = SharedCount(coord, "/bad2", 0)
    await coord.create("/bad2", b"\x00")
    with pytest.raises(CorruptValueError):
        await failed.start()
    await failed.aclose()  # harmless after a failed start
    await failed.aclose()


async def test_bad_bytes_are_reported_and_the_next_good_value_is_picked_up(
    started, warnings_about: Callable[[str], WarningsAbout]
) -> None:
    a, b = await started(2)
    warnings = warnings_about("/flaky")
    async with SharedCount(a, "/flaky", 1) as count:
        changes = count.changes()
        await b.set("/flaky", b"abc")
        with anyio.fail_after(EVENT_TIMEOUT):
            await warnings.seen.wait()
        assert warnings.records[0].levelno == logging.WARNING
        assert count.versioned_value == VersionedValue(0, 1)  # the last good value stays
        # A conditional set on the old ticket fails without raising.
        assert not await count.try_set_count(count.versioned_value, 5)
        assert count.versioned_value == VersionedValue(0, 1)

        await b.set("/flaky", encoded(2))
        assert await next_value(changes) == 2
        assert count.versioned_value == VersionedValue(2, 2)
        await changes.aclose()


async def test_start_notifies_nobody(coord: aiocoord.Client) -> None:
    """Curator reads the value in start() without calling listeners."""
    count = SharedCount(coord, "/quiet", 3)
    seen: list[int] = []
    count.add_listener(seen.append)
    changes = count.changes()
    async with count:
        assert count.count == 3 and seen == []
        await count.set_count(4)
        assert seen == [4]
        assert await next_value(changes) == 4  # the first item is the write, not the start
    await changes.aclose()


async def test_every_write_notifies_even_an_equal_value(started) -> None:
    """Curator calls listeners for every version it reads, equal value or not."""
    a, b = await started(2)
    async with SharedCount(a, "/same", 5) as writer, SharedCount(b, "/same", 0) as reader:
        mine: list[int] = []
        writer.add_listener(mine.append)
        changes = reader.changes()
        await writer.set_count(5)
        assert mine == [5]
        assert await next_value(changes) == 5
        assert reader.versioned_value == VersionedValue(1, 5)
        assert await writer.try_set_count(writer.versioned_value, 5)
        assert mine == [5, 5]
        assert await next_value(changes) == 5
        assert reader.versioned_value == VersionedValue(2, 5)
        await changes.aclose()


async def test_reconnection_rereads_and_notifies(coord: aiocoord.Client, state_log) -> None:
    """After RECONNECTED (CURATOR-311), and after a new session, the value is read
    again and listeners hear it, changed or not."""
    log = state_log(coord)
    async with SharedCount(coord, "/rc", 7) as count:
        seen: list[int] = []
        count.add_listener(seen.append)
        changes = count.changes()
        drop_connection(coord)
        with anyio.fail_after(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.RECONNECTED)
        assert await next_value(changes) == 7
        assert seen == [7]
        assert count.versioned_value == VersionedValue(0, 7)

        await expire_session(coord)
        # Claiming the session to expire it may cut the connection first: one
        # announcement per reconnection, the new session's CONNECTED included.
        comebacks = [s for s in log.states if s.is_connected]
        assert comebacks[-1] is ConnectionState.CONNECTED
        while len(seen) < len(comebacks):
            assert await next_value(changes) == 7
        assert seen == [7] * len(comebacks)
        assert count.versioned_value == VersionedValue(0, 7)
        await changes.aclose()


async def test_a_write_made_while_the_session_was_gone_is_picked_up(started, state_log) -> None:
    a, b = await started(2)
    log = state_log(b)
    async with SharedCount(b, "/away", 5) as count:
        changes = count.changes()
        await expire_session(b, wait=False)
        await a.set("/away", encoded(11))
        with anyio.fail_after(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.CONNECTED)
            async for value in changes:
                if value == 11:
                    break
        assert count.versioned_value == VersionedValue(1, 11)
        await changes.aclose()


async def test_a_deleted_and_recreated_node_is_followed(started) -> None:
    """Version numbers restart with a new node; the new value must not be taken for old news."""
    a, b = await started(2)
    async with SharedCount(a, "/reborn", 5) as count:
        changes = count.changes()
        await b.set("/reborn", encoded(6))
        assert await next_value(changes) == 6
        await b.delete("/reborn")
        await b.create("/reborn", encoded(1))
        assert await next_value(changes) == 1
        assert count.versioned_value == VersionedValue(0, 1)
        assert await count.try_set_count(count.versioned_value, 2)
        await changes.aclose()


async def test_close_ends_iterators_and_the_watcher(coord: aiocoord.Client) -> None:
    before = set(asyncio.all_tasks())
    count = SharedCount(coord, "/closing", 0)
    await count.start()
    changes = count.changes()
    await count.aclose()
    with anyio.fail_after(EVENT_TIMEOUT):
        assert [v async for v in changes] == []
    assert own_tasks(before) == []
    await count.aclose()
