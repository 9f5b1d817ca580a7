"""aiocoord under the benchmark: Mutex hand-offs, AtomicLong increments (also bounded,
against a ShardedCounter), pipelined and single round trips, leader hand-over,
double barrier release, Queue throughput and drain, TreeCache build and event
latency, and the memory cost of many waiters on one Mutex."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import aiocoord
from aiocoord.testing import four_letter_word

from . import _aio
from ._common import (
    CREATE_DEPTH,
    QUEUE_CONSUMERS,
    Gate,
    Offer,
    Result,
    RunArgs,
    Stats,
    Window,
    main,
    node_value,
    read_rss_kib,
    result,
    tree_paths,
)

LIBRARY = "aiocoord"
SHARED_CLIENT = "shared-client"
"""Variant: all contenders are tasks of one process sharing one client (one session)."""
LOCAL_HANDOFF = "local-handoff"
"""Mutex variant: the shared client's tasks share one ``Mutex(local_handoff=HANDOFF_BOUND)``."""
HANDOFF_BOUND = 64
"""Grants per turn of the shared node in the local-handoff variant."""
TAKE = "take"
"""Queue variant: consumers take at least once (``async with queue.take()``)."""
SINGLE_ZNODE = "single-znode"
"""Bounded variant: ``AtomicLong.increment(upper=BOUND)``, one znode."""
SHARDED = "sharded"
"""Bounded variant: ``ShardedCounter(upper=BOUND).increment()``, escrow over shards."""
BOUND = 10**12
"""The bounded scenario's upper bound: far more than a run can reach, so nothing sells out."""

MEMORY_WAITERS = 10_000
QUEUE_TIMEOUT = 300.0
"""Bound on waiting for every waiter of the memory scenario to be queued."""
DRAIN_TIMEOUT = 300.0
"""Bound on handing the lock down the whole queue at the end of the memory scenario."""
BARRIER_STAGING_S = 0.05
"""Double barrier: how long the first participants get to queue before the last enters."""
STOP_GRACE_S = 60.0
"""Bound on one round's enters or leaves, and on the participants stopping."""
RSS_LIMIT_KIB = 16 * 1024 * 1024
"""The memory scenario gives up (and reports it) if the process grows past this."""


@contextlib.asynccontextmanager
async def _clients(connect: str, count: int) -> AsyncIterator[list[aiocoord.Client]]:
    """``count`` connected clients (separate sessions), closed on exit."""
    clients = [aiocoord.connect(connect) for _ in range(count)]
    try:
        await asyncio.gather(*(client.start() for client in clients))
        yield clients
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


async def _mutex(args: RunArgs) -> Result:
    lock_path = f"{args.path}/lock"
    if args.variant in (SHARED_CLIENT, LOCAL_HANDOFF):
        bound = HANDOFF_BOUND if args.variant == LOCAL_HANDOFF else 0
        async with _clients(args.connect, 1) as (client,):
            # Owned per task: one object serves all.
            shared = aiocoord.Mutex(client, lock_path, local_handoff=bound)
            return await _aio.mutex(args, LIBRARY, [shared] * args.contenders)
    async with _clients(args.connect, args.contenders) as clients:
        locks = [aiocoord.Mutex(client, lock_path) for client in clients]
        return await _aio.mutex(args, LIBRARY, locks)


class _Counter:
    """An AtomicLong (defaults: retry, coalescing) as the counter scenarios drive it:
    unbounded, or bounded by ``upper``; or, for the bounded scenario's sharded
    variant, a ShardedCounter (defaults but the bound)."""

    def __init__(self, client: aiocoord.Client, path: str, variant: str, upper: int | None) -> None:
        self._upper = upper
        self.counter: aiocoord.AtomicLong | aiocoord.ShardedCounter
        if variant == SHARDED:
            assert upper is not None
            self.counter = aiocoord.ShardedCounter(client, path, upper=upper)
        else:
            self.counter = aiocoord.AtomicLong(client, path)

    async def initialize(self) -> None:
        if isinstance(self.counter, aiocoord.ShardedCounter):
            await self.counter.initialize()
        else:
            await self.counter.initialize(0)

    async def increment(self) -> tuple[bool, float]:
        if isinstance(self.counter, aiocoord.ShardedCounter):
            result = await self.counter.increment()
        else:
            result = await self.counter.increment(upper=self._upper)
        stats = result.stats
        # Attempts that did not write: the failed compare-and-sets (a coalesced
        # write's attempts are shared by every call it carried: count them once).
        # An add applied by the combining queue won none of its tries (often it
        # made none: it joined a busy queue at once).
        won = result.succeeded and not stats.queued_time
        failed = stats.optimistic_tries + stats.promoted_tries - (1 if won else 0)
        return result.succeeded, failed / stats.batch_size


async def _counter(args: RunArgs) -> Result:
    """The counter scenario, and the bounded one (the same loop, bounded far away)."""
    path = f"{args.path}/counter"
    count = 1 if args.variant == SHARED_CLIENT else args.contenders
    upper = BOUND if args.scenario == "bounded" else None
    async with _clients(args.connect, count) as clients:
        counters = [
            _Counter(clients[i % count], path, args.variant, upper) for i in range(args.contenders)
        ]
        await counters[0].initialize()

        async def final_value() -> int:
            return (await counters[0].counter.get()).post_value

        return await _aio.counter(args, LIBRARY, counters, final_value)


async def _pipelined(args: RunArgs) -> Result:
    node = f"{args.path}/node"
    async with _clients(args.connect, 1) as (client,):
        await client.create(node, b"", make_parents=True)

        async def set_data(data: bytes) -> int:
            return (await client.set(node, data)).version

        async def final_version() -> int:
            return (await client.get(node))[1].version

        return await _aio.pipelined(args, LIBRARY, set_data, final_version)


async def _latency(args: RunArgs) -> Result:
    node = f"{args.path}/node"
    async with _clients(args.connect, 1) as (client,):
        await client.create(node, b"", make_parents=True)

        async def set_data(data: bytes) -> object:
            return await client.set(node, data)

        async def get_data() -> bytes:
            return (await client.get(node))[0]

        return await _aio.latency(args, LIBRARY, set_data, get_data)


# --- leader election and double barrier --------------------------------------------


async def _election(args: RunArgs) -> Result:
    """Leader hand-over: every contender runs ``LeaderElection.run`` with an empty
    term. A sample is the time from one term's end (the leader gives leadership up)
    to the next term's start, in another session."""
    async with _clients(args.connect, args.contenders) as clients:
        window = Window(args.seconds, args.warmup)
        gate = Gate()
        stats = Stats(window)
        last_end = 0.0

        async def term() -> None:
            nonlocal last_end
            started = time.perf_counter()
            gate.enter()
            previous = last_end
            await asyncio.sleep(0)  # a second leader, if there were one, could run here
            gate.leave()
            if previous:
                stats.record("handover", previous, started)
            last_end = time.perf_counter()

        elections = [
            aiocoord.LeaderElection(client, f"{args.path}/election", participant_id=f"p{i}")
            for i, client in enumerate(clients)
        ]
        tasks = [asyncio.create_task(election.run(term)) for election in elections]
        try:
            done, _ = await asyncio.wait(tasks, timeout=window.end - time.perf_counter())
            for task in done:
                task.result()  # a participant that stopped early failed: say why
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=STOP_GRACE_S)
        return result(
            args, LIBRARY, window, [stats], violation=gate.violation, extra={"terms": gate.entries}
        )


async def _barrier(args: RunArgs) -> Result:
    """Double barrier release: in each round all participants but one enter and
    wait, then the last one enters. A sample is the time from the last enter call
    until every participant's enter has returned; then all leave."""
    members = args.contenders
    path = f"{args.path}/barrier"
    async with _clients(args.connect, members) as clients:
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        violation: str | None = None
        rounds = 0

        async def enter(barrier: aiocoord.DoubleBarrier) -> float:
            await barrier.enter()
            return time.perf_counter()

        while not window.over() and violation is None:
            barriers = [aiocoord.DoubleBarrier(client, path, members) for client in clients]
            entering = [asyncio.create_task(enter(b)) for b in barriers[:-1]]
            await asyncio.sleep(BARRIER_STAGING_S)
            started = time.perf_counter()
            entering.append(asyncio.create_task(enter(barriers[-1])))
            async with asyncio.timeout(STOP_GRACE_S):
                entered = await asyncio.gather(*entering)
            if min(entered) < started:
                violation = "a participant passed enter before the last one entered"
            stats.record("release", started, max(entered))
            async with asyncio.timeout(STOP_GRACE_S):
                left = await asyncio.gather(*(b.leave(timeout=STOP_GRACE_S) for b in barriers))
            if not all(left):
                violation = "a participant's leave timed out"
            rounds += 1
        return result(args, LIBRARY, window, [stats], violation=violation, extra={"rounds": rounds})


# --- queues ------------------------------------------------------------------------


def _getter(queue: aiocoord.Queue[bytes], variant: str) -> _aio.Get:
    """A consumer's take: ``get`` (exactly once) or, for the take variant, an
    at-least-once ``take`` whose body just returns the item (then it is deleted)."""
    if variant == TAKE:

        async def take() -> bytes:
            async with queue.take() as item:
                data: bytes = item
            return data

        return take

    async def get() -> bytes:
        data: bytes = await queue.get()
        return data

    return get


async def _queue(args: RunArgs) -> Result:
    """One producer and ``contenders`` consumers on one ``Queue``, each in its own session."""
    path = f"{args.path}/queue"
    async with _clients(args.connect, 1 + args.contenders) as (producer, *consumers):
        queue = aiocoord.Queue(producer, path)
        gets = [_getter(aiocoord.Queue(client, path), args.variant) for client in consumers]
        return await _aio.queue(args, LIBRARY, queue.put, gets)


async def _drain(args: RunArgs) -> Result:
    """Put DRAIN_ITEMS items with one client, then take them all with another."""
    async with _clients(args.connect, 2) as (producer, consumer):

        def ends(path: str) -> tuple[_aio.Put, _aio.Get]:
            return (
                aiocoord.Queue(producer, path).put,
                _getter(aiocoord.Queue(consumer, path), args.variant),
            )

        put, get = ends(f"{args.path}/queue")
        warm_put, warm_get = ends(f"{args.path}/warm")
        return await _aio.drain(args, LIBRARY, put, get, warm_put, warm_get)


# --- caches ------------------------------------------------------------------------


def _tree_maker(client: aiocoord.Client) -> _aio.MakeTree:
    """Create a tree with pipelined creates, CREATE_DEPTH per round trip (parents
    are sent before their children, and one session's requests apply in order)."""

    async def make_tree(root: str, shape: Sequence[int]) -> None:
        paths = [root, *tree_paths(root, shape)]
        for start in range(0, len(paths), CREATE_DEPTH):
            pipeline = client.pipeline()
            for path in paths[start : start + CREATE_DEPTH]:
                pipeline.create(path, node_value(path))
            for outcome in await pipeline.execute():
                if isinstance(outcome, Exception):
                    raise outcome

    return make_tree


class _TreeCache:
    """aiocoord's TreeCache as the cache scenarios drive it."""

    def __init__(self, client: aiocoord.Client, path: str, on_update: _aio.OnUpdate | None) -> None:
        self._cache = aiocoord.TreeCache(client, path)
        if on_update is not None:

            def listener(event: aiocoord.CacheEvent) -> None:
                if event.type is aiocoord.CacheEventType.UPDATED:
                    on_update(event.path, event.data)

            self._cache.add_listener(listener)

    async def start(self) -> None:
        await self._cache.start()

    async def close(self) -> None:
        await self._cache.aclose()

    def value(self, path: str) -> bytes | None:
        entry = self._cache.get(path)
        return None if entry is None else entry[0]

    def paths(self) -> list[str]:
        return list(self._cache.snapshot())


async def _cache_build(args: RunArgs) -> Result:
    async with _clients(args.connect, 2) as (writer, reader):
        return await _aio.cache_build(
            args,
            LIBRARY,
            _tree_maker(writer),
            lambda path, on_update: _TreeCache(reader, path, on_update),
        )


async def _cache_events(args: RunArgs) -> Result:
    async with _clients(args.connect, 2) as (writer, reader):
        return await _aio.cache_events(
            args,
            LIBRARY,
            _tree_maker(writer),
            lambda path, on_update: _TreeCache(reader, path, on_update),
            lambda path, data: writer.set(path, data),
        )


# --- memory: many waiters on one Mutex ---------------------------------------------


async def _server_counts(connect: str) -> dict[str, int]:
    """The server's znode, ephemeral and watch counts (``mntr``)."""
    host, port = connect.rsplit(":", 1)
    text = await four_letter_word(host, int(port), "mntr")
    wanted = {"zk_znode_count", "zk_ephemerals_count", "zk_watch_count"}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if key in wanted:
            counts[key.removeprefix("zk_")] = int(value)
    return counts


async def _wait_for(condition: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Poll ``condition`` every 0.1 s; False if ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def _sequence(node: str) -> int:
    return int(node[-10:])


async def _memory(args: RunArgs) -> Result:
    """``contenders`` tasks wait on one Mutex held by another task of the same client.

    Measures the client's RSS per waiting task and what the server holds for
    them (znodes, watches), then hands the lock down the whole queue: every
    waiter must get it exactly once, alone and in queue order, and afterwards
    no node or watch may be left, on either side.
    """
    waiters = args.contenders
    gate = Gate()
    order: list[int] = []
    violations: list[str] = []
    extra: dict[str, object] = {"waiters": waiters}
    async with _clients(args.connect, 1) as (client,):
        mutex = aiocoord.Mutex(client, f"{args.path}/lock")
        held, done_holding = asyncio.Event(), asyncio.Event()

        async def holder() -> None:
            async with mutex:
                gate.enter()
                held.set()
                await done_holding.wait()
                gate.leave()

        async def waiter() -> None:
            async with mutex:
                gate.enter()
                order.append(_sequence(mutex.node))
                await asyncio.sleep(0)
                gate.leave()

        holding = asyncio.create_task(holder())
        await held.wait()
        gc.collect()
        rss_before = read_rss_kib()
        server_before = await _server_counts(args.connect)
        started = time.perf_counter()
        tasks = [asyncio.create_task(waiter()) for _ in range(waiters)]

        async def all_queued() -> bool:
            if read_rss_kib() > RSS_LIMIT_KIB:
                raise MemoryError(f"RSS passed {RSS_LIMIT_KIB // 1024} MiB")
            return client.pending_watches >= waiters

        try:
            queued = await _wait_for(all_queued, QUEUE_TIMEOUT)
        except MemoryError as error:
            queued = False
            violations.append(f"gave up while queueing: {error}")
        extra["queue_s"] = time.perf_counter() - started
        if queued:
            gc.collect()
            rss_waiting = read_rss_kib()
            server_waiting = await _server_counts(args.connect)
            extra |= {
                "rss_before_kib": rss_before,
                "rss_waiting_kib": rss_waiting,
                "rss_per_waiter_bytes": (rss_waiting - rss_before) * 1024 / waiters,
                "server_znodes_per_waiter": (
                    server_waiting["znode_count"] - server_before["znode_count"]
                )
                / waiters,
                "server_watches_per_waiter": (
                    server_waiting["watch_count"] - server_before["watch_count"]
                )
                / waiters,
                "server_waiting": server_waiting,
            }
        elif not violations:
            violations.append(
                f"only {client.pending_watches} of {waiters} waiters queued in {QUEUE_TIMEOUT} s"
            )

        # Hand the lock down the queue (or, if queueing failed, cancel the waiters).
        drain_started = time.perf_counter()
        if not queued:
            for task in tasks:
                task.cancel()
        done_holding.set()
        await holding
        finished, pending = await asyncio.wait(tasks, timeout=DRAIN_TIMEOUT)
        drain_s = time.perf_counter() - drain_started
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=60)
            violations.append(f"{len(pending)} waiters still waiting after {DRAIN_TIMEOUT} s")
        failed = [t for t in finished if not t.cancelled() and t.exception() is not None]
        if failed:
            violations.append(f"{len(failed)} waiters failed: {failed[0].exception()!r}")
        extra |= {"drain_s": drain_s, "peak_rss_kib": read_rss_kib("VmHWM")}
        if queued:
            extra["handoffs_per_s"] = len(order) / drain_s
            if len(order) != waiters:
                violations.append(f"{len(order)} of {waiters} waiters got the lock")
            if any(b <= a for a, b in itertools.pairwise(order)):
                violations.append("waiters got the lock out of queue order")

        # Nothing may be left behind: no node, no local watch, no server watch.
        async def clean() -> bool:
            try:
                left = await client.children(f"{args.path}/lock")
            except aiocoord.NoNodeError:
                left = []
            counts = await _server_counts(args.connect)
            return (
                not left
                and client.pending_watches == 0
                and counts["watch_count"] <= server_before["watch_count"]
            )

        if not await _wait_for(clean, 10.0):
            counts = await _server_counts(args.connect)
            violations.append(
                f"left behind: {client.pending_watches} local watches, server {counts}"
            )
    if gate.violation:
        violations.insert(0, gate.violation)
    outcome = result(args, LIBRARY, 1.0, [], violation="; ".join(violations) or None, extra=extra)
    outcome["window_s"] = drain_s
    outcome["ops"] = len(order)
    outcome["rate"] = len(order) / drain_s
    return outcome


OFFERS = [
    Offer("mutex", _mutex),
    Offer("mutex", _mutex, variant=SHARED_CLIENT, contenders=(32,)),
    Offer("mutex", _mutex, variant=LOCAL_HANDOFF, contenders=(32,)),
    Offer("counter", _counter),
    Offer("counter", _counter, variant=SHARED_CLIENT, contenders=(32,)),
    Offer("bounded", _counter, variant=SINGLE_ZNODE, contenders=(8,)),
    Offer("bounded", _counter, variant=SHARDED, contenders=(8,)),
    Offer("pipelined", _pipelined, contenders=(1,)),
    Offer("latency", _latency, contenders=(1,)),
    Offer("election", _election, contenders=(8,)),
    Offer("barrier", _barrier, contenders=(8, 32)),
    Offer("queue", _queue, contenders=QUEUE_CONSUMERS),
    Offer("queue", _queue, variant=TAKE, contenders=QUEUE_CONSUMERS),
    Offer("drain", _drain, contenders=(1,)),
    Offer("drain", _drain, variant=TAKE, contenders=(1,)),
    Offer("cache_build", _cache_build, contenders=(1,)),
    Offer("cache_events", _cache_events, contenders=(1,)),
    Offer("memory", _memory, contenders=(MEMORY_WAITERS,)),
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
