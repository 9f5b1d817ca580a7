"""The scenario loops for asyncio libraries (aiocoord, aiozk).

Each function takes what differs between libraries as small callables or
adapters, runs the contenders for the window, checks the scenario's invariant
and returns the result line. A new asyncio runner (for instance aiocoord's
``AtomicLong`` once it exists) only builds its clients and adapters and calls
one of these.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from ._common import Gate, Result, RunArgs, Stats, Window, pipelined_result, result

__all__ = ["AsyncCounter", "AsyncLock", "counter", "latency", "mutex", "pipelined"]

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
