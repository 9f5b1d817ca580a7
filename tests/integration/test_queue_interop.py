"""Curator's DistributedPriorityQueue, DistributedDelayQueue, DistributedIdQueue and
DistributedQueue (with a lockPath) on the same znodes as aiocoord's queues, both ways
(tests/interop/CuratorDistributedQueues.java).

Curator's plain DistributedQueue (``buildQueue``) names items ``queue-<seq>``, wraps
them in the same envelope, and takes them in name order. No aiocoord class writes
that exact name, but :class:`PriorityQueue` and :class:`IdQueue` both read it, in
sequence order; :class:`PriorityQueue` orders by the whole name, as Curator's plain
queue does, so the two agree on the order of any mix of their items (its own, of
any priority, are ``queue-`` items in the same envelope for Curator). It is the
class the take-marker tests pair with Curator's DistributedQueue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest
from _curator import finish, read_line, send_line, start_curator
from _kit import EVENT_TIMEOUT
from _waiting import waiting

import aiocoord
from aiocoord import Codec, DelayQueue, IdQueue, PriorityQueue, QueueEmptyError
from aiocoord._recipes.queues._rules import (
    id_name,
    parse_id,
    priority_name,
    without_sequence,
)
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(60)


PRIORITY_ITEMS = [
    ("p5a", 5),
    ("m3a", -3),
    ("z0a", 0),
    ("max", 2**31 - 1),
    ("p5b", 5),
    ("min", -(2**31)),
    ("z0b", 0),
    ("m3b", -3),
    ("p256", 256),
    ("m1", -1),
]
BY_PRIORITY = [item for item, _p in sorted(PRIORITY_ITEMS, key=lambda entry: entry[1])]
"""Lowest priority first, in put order within a priority (a stable sort)."""


class Curator:
    """One running CuratorDistributedQueues program: commands in, lines out.

    Lines are read as they come and handed out by kind (``PUT``, ``GOT``...), so
    a consumer's output may interleave with the answers to commands.
    """

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._unread: list[str] = []

    async def line(self, kind: str, timeout: float = EVENT_TIMEOUT) -> list[str]:
        """The words after ``kind`` of its next ``kind`` line."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    for i, line in enumerate(self._unread):
                        words = line.split()
                        if words[0] == kind:
                            del self._unread[i]
                            return words[1:]
                    line = await read_line(self.proc)
                    assert not line.startswith(("OVERLAP", "ERROR")), line
                    self._unread.append(line)
        except TimeoutError:
            raise AssertionError(
                f"no {kind} line in {timeout} s; other lines: {self._unread}"
            ) from None

    async def got(self) -> tuple[str, int]:
        """The next item its consumer consumed, and when (epoch ms) it began on it."""
        item, began = await self.line("GOT")
        return item, int(began)

    async def put(self, item: str, key: object = None) -> None:
        await send_line(self.proc, f"put {item}" + ("" if key is None else f" {key}"))
        assert await self.line("PUT") == [item]

    async def consume(self) -> None:
        await send_line(self.proc, "consume")
        assert await self.line("CONSUMING") == []

    async def finish(self) -> list[str]:
        """Close its stdin and wait for it to end: every line it printed and no
        one read yet (ending with DONE)."""
        rest = (await finish(self.proc, timeout=30)).split("\n")
        return [*self._unread, *(line for line in rest if line)]


@contextlib.asynccontextmanager
async def curator(
    classpath: str, zookeeper: ZooKeeperTarget, kind: str, path: str, *options: str
) -> AsyncIterator[Curator]:
    proc = await start_curator(
        classpath,
        "CuratorDistributedQueues",
        kind,
        zookeeper.connect_string,
        zookeeper.namespace + path,
        *options,
    )
    try:
        yield Curator(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def children_become(client: aiocoord.Client, path: str, names: list[str]) -> None:
    """Wait (on a children watch) until the children of ``path`` are ``names`` (none:
    or the node is gone). Curator deletes an item, and then its marker, after its
    consumer has printed the item."""
    changes = client.children_changes(path)
    seen: list[str] | None = None
    try:
        async with asyncio.timeout(EVENT_TIMEOUT):
            async for seen in changes:
                if sorted(seen or []) == sorted(names):
                    return
    except TimeoutError:
        raise AssertionError(f"{path} has {seen}, not {names}") from None
    finally:
        await changes.aclose()


async def until_empty(client: aiocoord.Client, path: str) -> None:
    await children_become(client, path, [])


def now_ms() -> int:
    return int(time.time() * 1000)


# --- priority ------------------------------------------------------------------------


async def test_curators_priority_items_come_out_of_a_priority_queue_by_priority(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    async with curator(curator_classpath, zookeeper, "priority", "/pq") as java:
        for item, priority in PRIORITY_ITEMS:
            await java.put(item, priority)
        assert await java.finish() == ["DONE"]
    names = await coord.children("/pq")
    assert sorted(map(without_sequence, names)) == sorted(
        priority_name(priority) for _item, priority in PRIORITY_ITEMS
    )
    queue = PriorityQueue(coord, "/pq", codec=Codec.UTF8)
    assert [await queue.get(timeout=EVENT_TIMEOUT) for _ in PRIORITY_ITEMS] == BY_PRIORITY
    assert await queue.size() == 0


async def test_priority_queue_items_are_consumed_by_curator_by_priority(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = PriorityQueue(coord, "/pq", codec=Codec.UTF8)
    for item, priority in PRIORITY_ITEMS:
        await queue.put(item, priority)
    async with curator(curator_classpath, zookeeper, "priority", "/pq") as java:
        await java.consume()
        got = [(await java.got())[0] for _ in PRIORITY_ITEMS]
        await until_empty(coord, "/pq")
        assert await java.finish() == ["DONE"]
    assert got == BY_PRIORITY


# --- delay ---------------------------------------------------------------------------


async def test_curators_delayed_items_are_taken_by_a_delay_queue_once_due_not_before(
    curator_classpath: str, zookeeper: ZooKeeperTarget, started
) -> None:
    (client,) = await started(1)
    queue = DelayQueue(client, "/dq", codec=Codec.UTF8)
    taken: list[tuple[str, int]] = []

    async def consume() -> None:
        while len(taken) < 3:
            item = await queue.get()
            taken.append((item, now_ms()))

    async with curator(curator_classpath, zookeeper, "delay", "/dq") as java:
        consumer = asyncio.create_task(consume())
        try:
            await waiting(client)  # the consumer waits before anything is put
            start = now_ms()
            due = {"late": start + 1000, "soon": start + 500, "now": start}
            for item, at in due.items():  # the latest first
                await java.put(item, at)
            async with asyncio.timeout(EVENT_TIMEOUT):
                await consumer
        finally:
            consumer.cancel()
        assert await java.finish() == ["DONE"]
    assert [item for item, _at in taken] == ["now", "soon", "late"]
    for item, at in taken:
        assert at >= due[item], f"{item} taken {due[item] - at} ms before it was due"
        assert at - due[item] < 5000, f"{item} taken {at - due[item]} ms late"


async def test_delay_queue_items_are_consumed_by_curator_once_due_not_before(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = DelayQueue(coord, "/dq", codec=Codec.UTF8)
    async with curator(curator_classpath, zookeeper, "delay", "/dq") as java:
        await java.consume()  # Curator's consumer is there before anything is put
        start = time.time()
        due = {"late": start + 1.0, "soon": start + 0.5, "now": start}
        for item, at in due.items():  # the latest first
            await queue.put(item, at=at)
        taken = [await java.got() for _ in due]
        await until_empty(coord, "/dq")
        assert await java.finish() == ["DONE"]
    assert [item for item, _at in taken] == ["now", "soon", "late"]
    for item, at in taken:
        due_ms = round(due[item] * 1000)  # as DelayQueue puts it in the name
        assert at >= due_ms, f"{item} taken {due_ms - at} ms before it was due"
        assert at - due_ms < 5000, f"{item} taken {at - due_ms} ms late"


# --- id ------------------------------------------------------------------------------

ID_ITEMS = [("a1", "a"), ("b1", "b"), ("a2", "a"), ("t1", "team/7"), ("c1", "c"), ("b2", "b")]


async def test_curators_id_items_are_removed_by_id_queue_remove_and_taken_in_order(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    async with curator(curator_classpath, zookeeper, "id", "/iq") as java:
        for item, item_id in ID_ITEMS:
            await java.put(item, item_id)
        assert await java.finish() == ["DONE"]
    names = await coord.children("/iq")
    assert sorted(map(without_sequence, names)) == sorted(id_name(i) for _item, i in ID_ITEMS)
    queue = IdQueue(coord, "/iq", codec=Codec.UTF8)
    assert await queue.contains("team/7")
    assert await queue.remove("a") == 2
    assert await queue.remove("team/7") == 1  # Curator made it team_7, as aiocoord does
    assert await queue.remove("a") == 0
    assert not await queue.contains("a")
    assert [await queue.get(timeout=EVENT_TIMEOUT) for _ in range(3)] == ["b1", "c1", "b2"]
    assert await queue.size() == 0


async def test_id_queue_items_are_removed_by_curators_remove_and_consumed_in_order(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = IdQueue(coord, "/iq", codec=Codec.UTF8)
    for item, item_id in [*ID_ITEMS, ("c2", "c"), ("d1", "d")]:
        await queue.put(item, item_id)
    async with curator(curator_classpath, zookeeper, "id", "/iq") as java:
        for item_id, count in [("a", 2), ("c", 2), ("a", 0)]:
            await send_line(java.proc, f"remove {item_id}")
            assert await java.line("REMOVED") == [item_id, str(count)]
        assert not await queue.contains("a")
        assert not await queue.contains("c")
        assert await queue.contains("team/7")
        remaining = ["b1", "t1", "b2", "d1"]
        assert await queue.size() == len(remaining)
        await java.consume()
        got = [(await java.got())[0] for _ in remaining]
        await until_empty(coord, "/iq")
        assert await java.finish() == ["DONE"]
    assert got == remaining


async def test_curators_plain_distributed_queue_items_are_read_in_order_by_priority_and_id_queues(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    items = [f"plain-{i}" for i in range(12)]
    async with curator(curator_classpath, zookeeper, "plain", "/plain") as java:
        for item in items:
            await java.put(item)
        assert await java.finish() == ["DONE"]
    names = await coord.children("/plain")
    assert {without_sequence(name) for name in names} == {"queue-"}
    assert all(parse_id(name) is None for name in names)
    by_priority = PriorityQueue(coord, "/plain", codec=Codec.UTF8)
    by_id = IdQueue(coord, "/plain", codec=Codec.UTF8)
    half = len(items) // 2
    assert [await by_priority.get(timeout=EVENT_TIMEOUT) for _ in range(half)] == items[:half]
    assert [await by_id.get(timeout=EVENT_TIMEOUT) for _ in range(half, len(items))] == items[half:]


# --- take markers: Curator's DistributedQueue with lockPath -----------------------------


async def test_an_item_an_aiocoord_taker_holds_is_skipped_by_curators_locked_queue(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = PriorityQueue(coord, "/locked", codec=Codec.UTF8)
    items = [f"h{i}" for i in range(6)]
    await queue.put_many(items)
    lock = f"lock={zookeeper.namespace}{queue.lock_path}"
    async with curator(curator_classpath, zookeeper, "plain", "/locked", lock) as java:
        async with (taking := queue.take()) as held:
            assert held == "h0" and taking.node is not None
            await java.consume()
            assert [(await java.got())[0] for _ in items[1:]] == items[1:]
            # Curator went over h0 and left it alone: still there, still marked by us.
            name = taking.node.rsplit("/", 1)[1]
            await children_become(coord, "/locked", [name])
            await children_become(coord, queue.lock_path, [name])
            _data, stat = await coord.get(f"{queue.lock_path}/{name}")
            assert stat.ephemeral_owner == coord.session_id
        await until_empty(coord, "/locked")
        await until_empty(coord, queue.lock_path)
        assert await java.finish() == ["DONE"]


async def test_an_item_an_aiocoord_taker_gives_back_is_then_consumed_by_curator(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = PriorityQueue(coord, "/locked", codec=Codec.UTF8)
    await queue.put_many(["back", "other"])
    lock = f"lock={zookeeper.namespace}{queue.lock_path}"
    async with curator(curator_classpath, zookeeper, "plain", "/locked", lock) as java:
        with pytest.raises(RuntimeError, match="work failed"):
            async with queue.take() as held:
                assert held == "back"
                await java.consume()
                assert (await java.got())[0] == "other"  # not "back", which we hold
                raise RuntimeError("work failed")
        # Back in the queue, unmarked. Curator's consumer may not look at it again
        # until the queue's children change (it does not watch the markers): a new
        # item makes sure it does.
        await queue.put("wake")
        assert [(await java.got())[0] for _ in range(2)] == ["back", "wake"]
        await until_empty(coord, "/locked")
        await until_empty(coord, queue.lock_path)
        assert await java.finish() == ["DONE"]


async def test_an_item_curators_locked_queue_holds_is_skipped_by_aiocoord_takers(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord, children_of
) -> None:
    queue = PriorityQueue(coord, "/locked", codec=Codec.UTF8)
    items = [f"c{i}" for i in range(5)]
    lock = f"lock={zookeeper.namespace}{queue.lock_path}"
    async with curator(curator_classpath, zookeeper, "plain", "/locked", lock, "hold") as java:
        for item in items:
            await java.put(item)
        await java.consume()
        assert await java.line("HOLD") == ["c0"]  # marked, and kept, by Curator
        (name,) = await children_of(coord, queue.lock_path)
        _data, stat = await coord.get(f"{queue.lock_path}/{name}")
        assert stat.is_ephemeral and stat.ephemeral_owner != coord.session_id
        taken = []
        for _ in items[1:]:
            async with queue.take(timeout=EVENT_TIMEOUT) as item:
                taken.append(item)
        assert taken == items[1:]
        with pytest.raises(QueueEmptyError):
            async with queue.take(timeout=0):
                pytest.fail("took the item Curator holds")
        assert await children_of(coord, "/locked") == [name]  # still there
        await send_line(java.proc, "release")
        assert (await java.got())[0] == "c0"
        await until_empty(coord, "/locked")
        await until_empty(coord, queue.lock_path)
        assert await java.finish() == ["DONE"]


async def test_curator_and_aiocoord_takers_share_a_queue_each_item_once_never_two_at_once(
    curator_classpath: str, zookeeper: ZooKeeperTarget, started, children_of
) -> None:
    producer, *takers = await started(3)
    await producer.ensure_path("/inwork")
    queue = PriorityQueue(producer, "/shared", codec=Codec.UTF8)
    ours = [f"a{i}" for i in range(20)]
    theirs = [f"j{i}" for i in range(20)]
    options = (
        f"lock={zookeeper.namespace}{queue.lock_path}",
        f"inwork={zookeeper.namespace}/inwork",
        "hold",
    )
    async with curator(curator_classpath, zookeeper, "plain", "/shared", *options) as java:
        await queue.put_many(ours)  # queue-1000000000<seq>
        await java.consume()
        # Curator holds its first item, one of aiocoord's, until aiocoord has done
        # one: Curator's, which come first by name (queue-<seq>).
        assert await java.line("HOLD") == ["a0"]
        for item in theirs:
            await java.put(item)
        by_curator: list[str] = []
        by_aiocoord: list[str] = []
        progress = asyncio.Event()

        async def take(client: aiocoord.Client) -> None:
            mine = PriorityQueue(client, "/shared", codec=Codec.UTF8)
            try:
                while True:
                    async with mine.take() as item:
                        # NodeExistsError if anyone else is working on it now.
                        await client.create(f"/inwork/{item}", ephemeral=True)
                        await client.delete(f"/inwork/{item}")
                    by_aiocoord.append(item)
                    progress.set()
            finally:
                progress.set()

        async def read() -> None:
            try:
                while True:
                    by_curator.append((await java.got())[0])
                    progress.set()
            finally:
                progress.set()

        tasks = [asyncio.create_task(take(client)) for client in takers]
        tasks.append(asyncio.create_task(read()))

        async def until(condition: Callable[[], bool]) -> None:
            while not condition():
                await progress.wait()
                progress.clear()
                for task in tasks:
                    if task.done():
                        task.result()  # raises what went wrong

        try:
            async with asyncio.timeout(EVENT_TIMEOUT * 2):
                await until(lambda: bool(by_aiocoord))
                await send_line(java.proc, "release")
                await until(lambda: len(by_curator) + len(by_aiocoord) == len(ours + theirs))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await until_empty(producer, "/shared")
        await until_empty(producer, queue.lock_path)
        assert await java.finish() == ["DONE"]
    assert by_curator[0] == "a0" and "j0" in by_aiocoord
    assert sorted(by_curator + by_aiocoord) == sorted(ours + theirs)  # each once, none lost
    assert await children_of(producer, "/inwork") == []


# --- paths that must outlive an empty queue ---------------------------------------------
#
# Curator's DistributedQueue.start() makes the queue path and the lock path persistent
# nodes (only their parents containers), and never makes them again: its puts and its
# markers are created without parents. Were they containers, the server would delete
# them once empty, and from then on Curator's puts would fail (NoNodeException), its
# consumer would hear no new item, and with a lockPath it would take nothing.


async def sweep(client: aiocoord.Client) -> None:
    """Wait until the server's container sweep has run over everything empty now.

    A container of our own that just lost its child goes in the next sweep, with
    every other empty container; but the sweep sends its deletes one by one, in no
    set order. So twice: once the second one is gone, the first sweep's deletes
    are all done.
    """
    for _ in range(2):
        await client.create("/sweep", container=True)
        await client.create("/sweep/child")
        await client.delete("/sweep/child")
        changes = client.children_changes("/sweep")
        try:
            async with asyncio.timeout(EVENT_TIMEOUT):
                async for names in changes:
                    if names is None:
                        break
        finally:
            await changes.aclose()


async def test_a_queue_path_aiocoord_made_stays_for_curators_distributed_queue(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    queue = PriorityQueue(coord, "/made", codec=Codec.UTF8)
    await queue.put("first")  # aiocoord makes /made
    async with curator(curator_classpath, zookeeper, "plain", "/made") as java:
        await java.consume()
        assert (await java.got())[0] == "first"
        await until_empty(coord, "/made")
        await sweep(coord)
        # As a container, the node would be gone, and Curator's put would print
        # "ERROR org.apache.zookeeper.KeeperException$NoNodeException".
        await java.put("second")
        assert (await java.got())[0] == "second"
        assert await coord.exists("/made") is not None
        assert await java.finish() == ["DONE"]


async def test_a_lock_path_aiocoord_made_stays_for_curators_locked_queue(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord
) -> None:
    await coord.create("/made")  # the queue node as Curator makes it: only the lock path
    queue = PriorityQueue(coord, "/made", codec=Codec.UTF8)
    await queue.put_many(["x", "y"])
    holding, done = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with queue.take() as item:  # aiocoord makes /made-taken
            assert item == "x"
            holding.set()
            await done.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    lock = f"lock={zookeeper.namespace}{queue.lock_path}"
    try:
        async with curator(curator_classpath, zookeeper, "plain", "/made", lock) as java:
            await java.consume()
            assert (await java.got())[0] == "y"
            done.set()
            await holder
            await until_empty(coord, queue.lock_path)
            await sweep(coord)
            assert await coord.exists(queue.lock_path) is not None
            await queue.put("z")
            # With the lock path swept away, Curator's marker create would fail
            # (NoNode) and it would never take z.
            assert (await java.got())[0] == "z"
            assert await java.finish() == ["DONE"]
    finally:
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)
