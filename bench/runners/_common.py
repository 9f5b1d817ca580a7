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
import json
import math
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Gate",
    "Offer",
    "RunArgs",
    "Stats",
    "Window",
    "main",
    "percentiles",
    "read_rss_kib",
    "result",
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
