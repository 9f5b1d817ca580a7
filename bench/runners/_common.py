"""What every Python runner shares: its command line, the measured window, the
statistics it keeps, the mutual-exclusion check, and the one JSON line it prints.

A runner is a subprocess of the driver (``bench/run.py``), so that each library
runs alone in a process pinned to its own core. It is called as::

    python -m bench.runners.<name> SCENARIO CONTENDERS SECONDS CONNECT PATH
                                   [--variant V] [--warmup S]
    python -m bench.runners.<name> --list

and prints one JSON object on its last line of stdout: the result, or with
``--list`` the scenarios it offers. Java's runner (``bench/java/Bench.java``)
speaks the same protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import itertools
import json
import math
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Gate",
    "Ledger",
    "Offer",
    "RunArgs",
    "Stats",
    "Window",
    "cache_events_verdict",
    "main",
    "node_value",
    "percentiles",
    "read_rss_kib",
    "read_stamp",
    "result",
    "stamp",
    "tree_paths",
    "tree_size",
]

Result = dict[str, Any]
CONTENDER_LEVELS = (1, 8, 32)
DEFAULT_WARMUP = 1.0


@dataclass(frozen=True, slots=True)
class RunArgs:
    """One run as the driver asks for it; ``path`` is a fresh znode all of the run's own."""

    scenario: str
    contenders: int
    seconds: float
    connect: str
    path: str
    variant: str = ""
    warmup: float = DEFAULT_WARMUP
    """Unmeasured seconds first: connections settle, caches and (in Java) the JIT warm up."""


@dataclass(frozen=True, slots=True)
class Offer:
    """A scenario (and variant) a runner can run, at which contender counts."""

    scenario: str
    run: Callable[[RunArgs], Result | Awaitable[Result]]
    variant: str = ""
    contenders: tuple[int, ...] = CONTENDER_LEVELS


class Window:
    """The measured interval: operations that finish inside it count.

    Contenders keep working until it ends; what happens during the warm-up
    before it, or after it while they stop, is not counted.
    """

    def __init__(self, seconds: float, warmup: float) -> None:
        self.start = time.perf_counter() + warmup
        self.end = self.start + seconds

    def over(self) -> bool:
        return time.perf_counter() >= self.end

    def counts(self, finished: float) -> bool:
        return self.start <= finished < self.end

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(slots=True)
class Stats:
    """One contender's tally (merged at the end, so threads never share one)."""

    window: Window
    ops: int = 0
    conflicts: float = 0
    failures: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)

    def record(self, kind: str, started: float, finished: float) -> None:
        """Count one operation of ``kind`` and its latency, if it finished in the window."""
        if self.window.counts(finished):
            self.ops += 1
            self.samples.setdefault(kind, []).append(finished - started)


class Gate:
    """The correctness check of a lock: how many contenders are inside at once.

    ``enter`` and ``leave`` wrap the critical section; more than one inside is a
    violation, kept as a message (the first one) for the result.
    """

    def __init__(self, *, threads: bool = False) -> None:
        self.inside = 0
        self.max_inside = 0
        self.entries = 0
        self.violation: str | None = None
        self._lock = threading.Lock() if threads else None

    def enter(self) -> None:
        if self._lock is not None:
            with self._lock:
                self._enter()
        else:
            self._enter()

    def _enter(self) -> None:
        self.inside += 1
        self.entries += 1
        if self.inside > self.max_inside:
            self.max_inside = self.inside
        if self.inside > 1 and self.violation is None:
            self.violation = f"{self.inside} contenders inside the critical section at once"

    def leave(self) -> None:
        if self._lock is not None:
            with self._lock:
                self.inside -= 1
        else:
            self.inside -= 1


# --- queues ----------------------------------------------------------------------------

QUEUE_CONSUMERS = (1, 4, 8)
"""Consumer counts of the queue scenario (one producer besides them)."""
QUEUE_BACKLOG = 200
"""The queue scenario's producer keeps at most this many items put but not yet
taken, so that the consumers are what is measured (not a backlog growing without
bound). Bench.java uses the same numbers."""
PRODUCER_CONCURRENCY = 8
"""Puts the producer keeps outstanding (tasks or threads sharing its one session)."""
DRAIN_ITEMS = 10_000
"""Items the drain scenario puts, then takes with one consumer."""
DRAIN_LIMIT_S = 600.0
"""The drain scenario gives up (and says so) if taking every item takes longer."""
QUEUE_GRACE_S = 60.0
"""Bound on taking what is left in the queue after the window."""


class Ledger:
    """The exactly-once check of a queue.

    The producer puts unique items (``item()`` numbers them) and records each
    acknowledged put; consumers record every item they take. At the end every
    acknowledged item must have been taken exactly once: none twice (a
    duplicate), none never (a loss).
    """

    def __init__(self, *, threads: bool = False) -> None:
        self._numbers = itertools.count()
        self.acked: set[int] = set()
        self.taken: set[int] = set()
        self.duplicates = 0
        self.foreign = 0
        self._lock = threading.Lock() if threads else None

    def item(self) -> tuple[int, bytes]:
        """A new unique item: its number, and the bytes to put."""
        number = next(self._numbers)
        return number, b"%d" % number

    def put_done(self, number: int) -> None:
        if self._lock is not None:
            with self._lock:
                self.acked.add(number)
        else:
            self.acked.add(number)

    def took(self, data: bytes) -> None:
        """A consumer took ``data`` (counted twice if it had been taken before)."""
        if self._lock is not None:
            with self._lock:
                self._took(data)
        else:
            self._took(data)

    def _took(self, data: bytes) -> None:
        try:
            number = int(data)
        except ValueError:
            self.foreign += 1
            return
        if number in self.taken:
            self.duplicates += 1
        else:
            self.taken.add(number)

    def complete(self) -> bool:
        """Whether every acknowledged item has been taken."""
        if self._lock is not None:
            with self._lock:
                return len(self.taken) >= len(self.acked) and self.acked <= self.taken
        return len(self.taken) >= len(self.acked) and self.acked <= self.taken

    def check(self) -> tuple[str | None, dict[str, Any]]:
        """The violation (None if every acknowledged item was taken exactly once),
        and the counts for the result's ``extra``."""
        lost = len(self.acked - self.taken)
        unacked = len(self.taken - self.acked)
        problems = []
        if self.duplicates:
            problems.append(f"{self.duplicates} items taken twice")
        if lost:
            problems.append(f"{lost} acknowledged items never taken")
        if self.foreign:
            problems.append(f"{self.foreign} items taken that no producer put")
        extra = {
            "items": len(self.taken),
            "acked": len(self.acked),
            "duplicates": self.duplicates,
            "lost": lost,
            "taken_unacknowledged": unacked,
        }
        return ("; ".join(problems) or None), extra


# --- caches -----------------------------------------------------------------------------

TREE_SHAPE = (10, 10, 100)
"""The cache_build tree below its root: 10 x 10 x 100 = 10,000 leaves (10,111 nodes
with the root and inner nodes)."""
SMALL_TREE_SHAPE = (10, 10, 10)
"""The cache_events tree (1,000 leaves), also what cache_build warms up on."""
VALUE_SIZE = 100
"""Bytes of every node's value."""
SET_RATE = 1000
"""Sets per second on the leaves in cache_events (each leaf once per second)."""
CREATE_DEPTH = 1000
"""Creates kept outstanding while a runner builds a tree (not measured)."""
CONVERGE_S = 30.0
"""Bound on a cache catching up with the last sets after the window."""


def tree_paths(root: str, shape: Sequence[int]) -> list[str]:
    """Every node below ``root`` of a tree with ``shape[i]`` children per node at
    depth ``i``, parents before children (the order to create them in)."""
    levels = [[root]]
    for fan_out in shape:
        levels.append([f"{parent}/n{i:03d}" for parent in levels[-1] for i in range(fan_out)])
    return [path for level in levels[1:] for path in level]


def tree_size(shape: Sequence[int]) -> int:
    """Nodes of such a tree, its root included."""
    return 1 + sum(math.prod(shape[: i + 1]) for i in range(len(shape)))


def node_value(path: str) -> bytes:
    """The VALUE_SIZE-byte value a tree's node is created with (its path, padded)."""
    return path.encode().ljust(VALUE_SIZE, b".")[:VALUE_SIZE]


def stamp(nanoseconds: int) -> bytes:
    """A VALUE_SIZE-byte value carrying a send time (``time.perf_counter_ns()``)."""
    return b"%020d" % nanoseconds + b"." * (VALUE_SIZE - 20)


def read_stamp(data: bytes | None) -> int | None:
    """The send time a :func:`stamp` value carries, or None for another value."""
    if data is None or len(data) < 20 or not data[:20].isdigit():
        return None
    return int(data[:20])


def cache_events_verdict(
    window: Window,
    stale: Sequence[str],
    sent_at: Sequence[int],
    received: Collection[int],
    leaves: Sequence[str],
) -> tuple[str | None, dict[str, Any]]:
    """The cache_events run's violation (leaves the cache never caught up with)
    and its counts: sets sent (by their :func:`stamp`), how many no event carried."""
    violation = None
    if stale:
        violation = (
            f"{len(stale)} leaves still stale in the cache {CONVERGE_S:g} s after the last set"
        )
    in_window = sum(1 for ns in sent_at if window.counts(ns / 1e9))
    extra = {
        "sets": len(sent_at),
        "sets_per_s": in_window / window.seconds,
        "missed_events": sum(1 for ns in sent_at if ns not in received),
        "leaves": len(leaves),
    }
    return violation, extra


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50/p90/p99/max of latencies in seconds, reported in milliseconds."""
    ordered = sorted(samples)
    n = len(ordered)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * n) - 1)] * 1000

    if not n:
        return {"n": 0}
    return {"n": n, "p50": rank(50), "p90": rank(90), "p99": rank(99), "max": ordered[-1] * 1000}


def result(
    args: RunArgs,
    library: str,
    window: Window | float,
    stats: Iterable[Stats],
    *,
    violation: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Result:
    """Merge the contenders' tallies into the result line the driver reads."""
    seconds = window.seconds if isinstance(window, Window) else window
    ops = failures = 0
    conflicts = 0.0
    samples: dict[str, list[float]] = {}
    for tally in stats:
        ops += tally.ops
        conflicts += tally.conflicts
        failures += tally.failures
        for kind, values in tally.samples.items():
            samples.setdefault(kind, []).extend(values)
    return {
        "library": library,
        "variant": args.variant,
        "scenario": args.scenario,
        "contenders": args.contenders,
        "window_s": seconds,
        "ops": ops,
        "rate": ops / seconds,
        "latency_ms": {kind: percentiles(values) for kind, values in samples.items()},
        "conflicts": conflicts,
        "failures": failures,
        "violation": violation,
        "extra": extra or {},
    }


def pipelined_result(
    args: RunArgs,
    library: str,
    window: Window,
    stats: Stats,
    *,
    acked: int,
    version_sum: int,
    final_version: int,
    depth: int,
    errors: Sequence[BaseException] = (),
) -> Result:
    """The pipelined scenario's result and check, the same for every library: the
    versions acknowledged must be exactly 1..acked, and the node's final one acked."""
    violation = None
    if errors:
        violation = f"{len(errors)} sets failed: {errors[0]!r}"
    elif final_version != acked or version_sum != acked * (acked + 1) // 2:
        violation = f"{acked} sets acknowledged but the node is at version {final_version}"
    return result(
        args, library, window, [stats], violation=violation, extra={"depth": depth, "acked": acked}
    )


def read_rss_kib(key: str = "VmRSS") -> int:
    """This process's resident set size in KiB (``VmHWM`` for its peak), from
    /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="one benchmark run; prints a JSON line")
    parser.add_argument("--list", action="store_true", help="print the offered scenarios")
    parser.add_argument("scenario", nargs="?")
    parser.add_argument("contenders", nargs="?", type=int)
    parser.add_argument("seconds", nargs="?", type=float)
    parser.add_argument("connect", nargs="?")
    parser.add_argument("path", nargs="?")
    parser.add_argument("--variant", default="")
    parser.add_argument("--warmup", type=float, default=DEFAULT_WARMUP)
    return parser.parse_args(argv)


def main(library: str, offers: Sequence[Offer], argv: Sequence[str] | None = None) -> None:
    """Run the offer the command line names and print its result as one JSON line."""
    ns = _parse(sys.argv[1:] if argv is None else argv)
    if ns.list:
        listing = [
            {"scenario": o.scenario, "variant": o.variant, "contenders": list(o.contenders)}
            for o in offers
        ]
        print(json.dumps({"library": library, "offers": listing}), flush=True)
        return
    if None in (ns.scenario, ns.contenders, ns.seconds, ns.connect, ns.path):
        raise SystemExit(
            "usage: SCENARIO CONTENDERS SECONDS CONNECT PATH [--variant V] [--warmup S]"
        )
    args = RunArgs(
        ns.scenario, ns.contenders, ns.seconds, ns.connect, ns.path, ns.variant, ns.warmup
    )
    offer = next(
        (o for o in offers if o.scenario == args.scenario and o.variant == args.variant), None
    )
    if offer is None:
        raise SystemExit(f"{library} offers no {args.scenario!r} variant {args.variant!r}")
    try:
        outcome = offer.run(args)
        if inspect.isawaitable(outcome):
            outcome = asyncio.run(_awaited(outcome))
    except Exception as error:
        traceback.print_exc()
        print(json.dumps({"library": library, "error": f"{type(error).__name__}: {error}"}))
        raise SystemExit(1) from None
    print(json.dumps(outcome), flush=True)


async def _awaited(outcome: Awaitable[Result]) -> Result:
    return await outcome
