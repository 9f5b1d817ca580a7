"""The scenario loops for asyncio libraries (aiocoord, aiozk).

Each function takes what differs between libraries as small callables or
adapters, runs the contenders for the window, checks the scenario's invariant
and returns the result line. A new asyncio runner (for instance aiocoord's
``AtomicLong`` once it exists) only builds its clients and adapters and calls
one of these.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from ._common import (
    CONVERGE_S,
    DRAIN_ITEMS,
    DRAIN_LIMIT_S,
    PRODUCER_CONCURRENCY,
    QUEUE_BACKLOG,
    QUEUE_GRACE_S,
    SET_RATE,
    SMALL_TREE_SHAPE,
    TREE_SHAPE,
    Gate,
    Ledger,
    Result,
    RunArgs,
    Stats,
    Window,
    cache_events_verdict,
    node_value,
    pipelined_result,
    read_rss_kib,
    read_stamp,
    result,
    stamp,
    tree_paths,
    tree_size,
)

__all__ = [
    "AsyncCounter",
    "AsyncLock",
    "AsyncTreeCache",
    "cache_build",
    "cache_events",
    "counter",
    "drain",
    "latency",
    "mutex",
    "pipelined",
    "queue",
]

STOP_GRACE = 60.0
"""How long contenders may take to finish their last operation after the window."""
PIPELINE_DEPTH = 1000
"""Requests kept outstanding by the pipelined scenario."""


class AsyncLock(Protocol):
    """A lock as the mutex scenario drives it (aiocoord's Mutex, aiozk's Lock, ...)."""

    def acquire(self) -> Awaitable[object]: ...

    def release(self) -> Awaitable[object]: ...


class AsyncCounter(Protocol):
    """A shared counter as the counter scenario drives it."""

    async def increment(self) -> tuple[bool, float]:
        """Add one; return (applied, how many compare-and-set attempts failed: a
        fraction when one attempt served several coalesced calls)."""
        ...


async def _run_until_stopped(window: Window, contenders: Sequence[Awaitable[None]]) -> None:
    async with asyncio.timeout(window.end - time.perf_counter() + STOP_GRACE):
        await asyncio.gather(*contenders)


async def mutex(args: RunArgs, library: str, locks: Sequence[AsyncLock]) -> Result:
    """Hand-offs per second: every contender loops acquire, a tiny critical section
    that yields to the event loop (so a second holder would be caught inside),
    release. One lock object per contender, or one shared by several tasks."""
    window = Window(args.seconds, args.warmup)
    gate = Gate()
    tallies = [Stats(window) for _ in locks]

    async def contender(lock: AsyncLock, stats: Stats) -> None:
        while not window.over():
            started = time.perf_counter()
            await lock.acquire()
            held = time.perf_counter()
            try:
                gate.enter()
                await asyncio.sleep(0)
                gate.leave()
            finally:
                await lock.release()
            stats.record("acquire", started, held)

    await _run_until_stopped(
        window, [contender(lk, st) for lk, st in zip(locks, tallies, strict=True)]
    )
    return result(
        args, library, window, tallies, violation=gate.violation, extra={"entries": gate.entries}
    )


async def counter(
    args: RunArgs,
    library: str,
    counters: Sequence[AsyncCounter],
    final_value: Callable[[], Awaitable[int]],
) -> Result:
    """Successful increments per second under contention, with failed CAS attempts.

    Afterwards the counter must read exactly the number of increments that
    reported success (over the whole run, warm-up included).
    """
    window = Window(args.seconds, args.warmup)
    tallies = [Stats(window) for _ in counters]
    applied = 0

    async def contender(shared: AsyncCounter, stats: Stats) -> None:
        nonlocal applied
        while not window.over():
            started = time.perf_counter()
            ok, conflicts = await shared.increment()
            finished = time.perf_counter()
            if ok:
                applied += 1
                stats.record("increment", started, finished)
            if window.counts(finished):
                stats.conflicts += conflicts
                stats.failures += 0 if ok else 1

    await _run_until_stopped(
        window, [contender(c, st) for c, st in zip(counters, tallies, strict=True)]
    )
    value = await final_value()
    violation = None
    if value != applied:
        violation = f"counter reads {value} after {applied} successful increments"
    return result(args, library, window, tallies, violation=violation, extra={"final_value": value})


async def pipelined(
    args: RunArgs,
    library: str,
    set_data: Callable[[bytes], Awaitable[int]],
    final_version: Callable[[], Awaitable[int]],
    depth: int = PIPELINE_DEPTH,
) -> Result:
    """Raw request throughput: ``depth`` sets of one node outstanding at all times.

    The window of outstanding requests is a pool of ``depth`` tasks, each sending
    its next request as soon as its last is answered (the same as a semaphore of
    ``depth`` around one task per request, without creating a task per request).
    ``set_data`` returns the node's new version. The versions acknowledged must
    be exactly 1..n, and the node's final version n.
    """
    window = Window(args.seconds, args.warmup)
    stats = Stats(window)
    acked = 0
    version_sum = 0
    payload = b"x" * 16

    async def sender() -> None:
        nonlocal acked, version_sum
        while not window.over():
            started = time.perf_counter()
            version = await set_data(payload)
            stats.record("set", started, time.perf_counter())
            acked += 1
            version_sum += version

    await _run_until_stopped(window, [sender() for _ in range(depth)])
    return pipelined_result(
        args,
        library,
        window,
        stats,
        acked=acked,
        version_sum=version_sum,
        final_version=await final_version(),
        depth=depth,
    )


async def latency(
    args: RunArgs,
    library: str,
    set_data: Callable[[bytes], Awaitable[object]],
    get_data: Callable[[], Awaitable[bytes]],
) -> Result:
    """Single round trips: set a node, then read it back, one request at a time.

    Each read must return what the set before it wrote.
    """
    window = Window(args.seconds, args.warmup)
    stats = Stats(window)
    violation = None
    sequence = 0
    while not window.over():
        sequence += 1
        data = str(sequence).encode()
        started = time.perf_counter()
        await set_data(data)
        written = time.perf_counter()
        read = await get_data()
        stats.record("set", started, written)
        stats.record("get", written, time.perf_counter())
        if read != data and violation is None:
            violation = f"read {read!r} right after writing {data!r}"
    return result(args, library, window, [stats], violation=violation)


# --- queues -------------------------------------------------------------------------

Put = Callable[[bytes], Awaitable[object]]
"""Put one item into the queue (returns once the put is acknowledged)."""
Get = Callable[[], Awaitable[bytes]]
"""Take one item from the queue, waiting for one if it is empty."""


async def _flow(
    window: Window, ledger: Ledger, put: Put, gets: Sequence[Get], tallies: Sequence[Stats]
) -> bool:
    """One producer and a consumer per ``gets`` until the window ends; then the
    consumers take what is left. True if every acknowledged item was taken.

    The producer keeps PRODUCER_CONCURRENCY puts outstanding and at most
    QUEUE_BACKLOG items put but not taken (a permit per item, given back by the
    consumer that takes it).
    """
    permits = asyncio.Semaphore(QUEUE_BACKLOG)

    async def produce() -> None:
        while not window.over():
            try:
                async with asyncio.timeout(0.1):
                    await permits.acquire()
            except TimeoutError:
                continue
            number, data = ledger.item()
            await put(data)
            ledger.put_done(number)

    async def consume(get: Get, stats: Stats) -> None:
        while True:
            started = time.perf_counter()
            data = await get()
            stats.record("take", started, time.perf_counter())
            ledger.took(data)
            permits.release()

    consumers = [
        asyncio.create_task(consume(get, stats)) for get, stats in zip(gets, tallies, strict=True)
    ]
    complete = False
    try:
        async with asyncio.timeout(window.end - time.perf_counter() + STOP_GRACE):
            await asyncio.gather(*(produce() for _ in range(PRODUCER_CONCURRENCY)))
        deadline = time.perf_counter() + QUEUE_GRACE_S
        while not (complete := ledger.complete()):
            if time.perf_counter() > deadline or any(task.done() for task in consumers):
                break
            await asyncio.sleep(0.01)
    finally:
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
    for task in consumers:
        if not task.cancelled() and task.exception() is not None:
            raise RuntimeError("a consumer failed") from task.exception()
    return complete


async def queue(args: RunArgs, library: str, put: Put, gets: Sequence[Get]) -> Result:
    """Items per second through one queue: one producer, one consumer per ``gets``
    entry (each in its own session). Every acknowledged item must be taken
    exactly once, checked after the consumers took what was left at the end."""
    window = Window(args.seconds, args.warmup)
    ledger = Ledger()
    tallies = [Stats(window) for _ in gets]
    complete = await _flow(window, ledger, put, gets, tallies)
    violation, extra = ledger.check()
    if not complete and violation is None:
        violation = f"items still missing {QUEUE_GRACE_S:g} s after the window"
    extra |= {"backlog": QUEUE_BACKLOG, "producer_concurrency": PRODUCER_CONCURRENCY}
    return result(args, library, window, tallies, violation=violation, extra=extra)


async def drain(
    args: RunArgs, library: str, put: Put, get: Get, warm_put: Put, warm_get: Get
) -> Result:
    """Produce DRAIN_ITEMS items (PRODUCER_CONCURRENCY puts outstanding), then take
    them all with one consumer in another session; the rate is the drain's.

    The warm-up runs the producer and the consumer on another queue (``warm_*``).
    Every item must be taken exactly once. A drain slower than DRAIN_LIMIT_S
    stops there and reports the part it did.
    """
    warm_ledger = Ledger()
    if args.warmup > 0:
        warm = Window(args.warmup, 0.0)
        await _flow(warm, warm_ledger, warm_put, [warm_get], [Stats(warm)])
    ledger = Ledger()

    async def produce() -> None:
        while (item := ledger.item())[0] < DRAIN_ITEMS:
            await put(item[1])
            ledger.put_done(item[0])

    started = time.perf_counter()
    await asyncio.gather(*(produce() for _ in range(PRODUCER_CONCURRENCY)))
    produce_s = time.perf_counter() - started
    stats = Stats(Window(DRAIN_LIMIT_S + STOP_GRACE, 0.0))
    taken = 0
    gave_up = False
    started = time.perf_counter()
    try:
        async with asyncio.timeout(DRAIN_LIMIT_S):
            while taken < DRAIN_ITEMS:
                began = time.perf_counter()
                data = await get()
                stats.record("take", began, time.perf_counter())
                ledger.took(data)
                taken += 1
    except TimeoutError:
        gave_up = True
    drain_s = time.perf_counter() - started
    return drain_result(
        args,
        library,
        ledger,
        stats,
        produce_s=produce_s,
        drain_s=drain_s,
        gave_up=gave_up,
        warm_items=len(warm_ledger.taken),
    )


def drain_result(
    args: RunArgs,
    library: str,
    ledger: Ledger,
    stats: Stats,
    *,
    produce_s: float,
    drain_s: float,
    gave_up: bool,
    warm_items: int,
) -> Result:
    """The drain scenario's result, the same for every Python runner. ``warm_items``:
    items the warm-up took (the run's server requests are per item of the whole run)."""
    violation, extra = ledger.check()
    if gave_up:
        # Slow, not wrong: only duplicates count against an unfinished drain.
        violation = f"{ledger.duplicates} items taken twice" if ledger.duplicates else None
        extra["gave_up_after_s"] = DRAIN_LIMIT_S
    extra |= {
        "produce_s": produce_s,
        "produce_rate": DRAIN_ITEMS / produce_s,
        "drain_s": drain_s,
        "producer_concurrency": PRODUCER_CONCURRENCY,
        "warm_items": warm_items,
    }
    return result(args, library, drain_s, [stats], violation=violation, extra=extra)


# --- caches -------------------------------------------------------------------------

OnUpdate = Callable[[str, bytes | None], None]
"""Called by a cache's listener with a node's path and new data when it changes."""


class AsyncTreeCache(Protocol):
    """A tree cache as the cache scenarios drive it."""

    async def start(self) -> None:
        """Build the view; return once it is initialized."""
        ...

    async def close(self) -> None: ...

    def value(self, path: str) -> bytes | None:
        """A node's data in the view (None if the node is not there)."""
        ...

    def paths(self) -> list[str]:
        """Every path in the view."""
        ...


MakeTree = Callable[[str, Sequence[int]], Awaitable[None]]
"""Create a root and the tree of a shape below it (pipelined; not measured)."""
OpenCache = Callable[[str, OnUpdate | None], AsyncTreeCache]
"""A new (not started) cache of a path, calling ``on_update`` on every change."""


def check_tree(
    cache_paths: Sequence[str],
    value: Callable[[str], bytes | None],
    root: str,
    shape: Sequence[int],
) -> str | None:
    """A tree cache's view must hold exactly the tree, every node with its value."""
    expected = [root, *tree_paths(root, shape)]
    if len(cache_paths) != len(expected):
        return f"the cache holds {len(cache_paths)} nodes, the tree has {len(expected)}"
    wrong = sum(1 for path in expected if value(path) != node_value(path))
    return f"{wrong} nodes missing or with the wrong value" if wrong else None


async def cache_build(
    args: RunArgs, library: str, make_tree: MakeTree, open_cache: OpenCache
) -> Result:
    """Seconds until a cache of a TREE_SHAPE tree (made beforehand) is initialized,
    and the client's RSS growth per node; the view must equal the tree.

    The warm-up builds and closes caches of a SMALL_TREE_SHAPE tree.
    """
    root, warm_root = f"{args.path}/tree", f"{args.path}/warm"
    await make_tree(root, TREE_SHAPE)
    builds = 0
    if args.warmup > 0:
        await make_tree(warm_root, SMALL_TREE_SHAPE)
        deadline = time.perf_counter() + args.warmup
        while builds == 0 or time.perf_counter() < deadline:
            warm = open_cache(warm_root, None)
            await warm.start()
            await warm.close()
            builds += 1
    gc.collect()
    rss_before = read_rss_kib()
    cache = open_cache(root, None)
    started = time.perf_counter()
    async with asyncio.timeout(DRAIN_LIMIT_S):
        await cache.start()
    build_s = time.perf_counter() - started
    try:
        gc.collect()
        rss_after = read_rss_kib()
        violation = check_tree(cache.paths(), cache.value, root, TREE_SHAPE)
    finally:
        await cache.close()
    return cache_build_result(
        args,
        library,
        build_s,
        violation,
        {"rss_before_kib": rss_before, "rss_after_kib": rss_after, "warm_builds": builds},
    )


def cache_build_result(
    args: RunArgs, library: str, build_s: float, violation: str | None, extra: dict[str, float]
) -> Result:
    """The cache_build result: ``rate`` is nodes per second of the build."""
    nodes = tree_size(TREE_SHAPE)
    extra = dict(extra)
    extra |= {
        "nodes": nodes,
        "build_s": build_s,
        "rss_per_node_bytes": (extra["rss_after_kib"] - extra["rss_before_kib"]) * 1024 / nodes,
    }
    outcome = result(args, library, build_s, [], violation=violation, extra=extra)
    outcome["ops"] = nodes
    outcome["rate"] = nodes / build_s
    return outcome


async def cache_events(
    args: RunArgs,
    library: str,
    make_tree: MakeTree,
    open_cache: OpenCache,
    set_data: Callable[[str, bytes], Awaitable[object]],
) -> Result:
    """Event latency of a cache of a SMALL_TREE_SHAPE tree while another client
    (``set_data``, its own session) sets SET_RATE leaves per second, each value
    carrying its send time: from the set being sent to the cache's listener
    seeing it. Afterwards the view must equal the last value set on every leaf."""
    root = f"{args.path}/tree"
    await make_tree(root, SMALL_TREE_SHAPE)
    leaves = tree_paths(root, SMALL_TREE_SHAPE)[-math.prod(SMALL_TREE_SHAPE) :]
    stats: Stats | None = None  # set once the window starts
    received: set[int] = set()

    def on_update(path: str, data: bytes | None) -> None:
        arrived = time.perf_counter_ns()
        sent = read_stamp(data)
        if sent is None or stats is None:
            return
        received.add(sent)
        stats.record("event", sent / 1e9, arrived / 1e9)

    cache = open_cache(root, on_update)
    await cache.start()
    try:
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        last: dict[str, bytes] = {}
        sent_at: list[int] = []
        pending: set[asyncio.Task[object]] = set()

        async def send(path: str) -> object:
            now = time.perf_counter_ns()
            data = stamp(now)
            last[path] = data
            sent_at.append(now)
            return await set_data(path, data)

        period = 1e9 / SET_RATE
        due = float(time.perf_counter_ns())
        count = 0
        while not window.over():
            now = time.perf_counter_ns()
            while due <= now:
                task = asyncio.create_task(send(leaves[count % len(leaves)]))
                pending.add(task)
                task.add_done_callback(pending.discard)
                count += 1
                due += period
            await asyncio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
        async with asyncio.timeout(STOP_GRACE):
            await asyncio.gather(*pending)
        deadline = time.perf_counter() + CONVERGE_S
        stale = [p for p, data in last.items() if cache.value(p) != data]
        while stale and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
            stale = [p for p in stale if cache.value(p) != last[p]]
    finally:
        await cache.close()
    violation, extra = cache_events_verdict(window, stale, sent_at, received, leaves)
    return result(args, library, window, [stats], violation=violation, extra=extra)
