"""Client CPU per operation of aiocoord's OpenTelemetry instrumentation (#28).

Rates on a shared machine are noisy; the CPU an operation costs the client is
not. This starts one local ZooKeeper (``forceSync=yes`` by default, as the
bench rows) and, round after round, runs one fresh worker process per telemetry
set-up against it, interleaved, so every set-up sees the same server and the
same drift of load. Each worker runs the bench's loops in one process:

- ``mutex``: ``CPU_CONTENDERS`` (default 8) contenders, one client each, loop
  acquire / ``sleep(0)`` / release on one Mutex, ``CPU_GRANTS`` grants in all;
- ``counter``: one AtomicLong, one caller, ``CPU_ADDS`` increments;

after a warm-up of the same loops, and reports the process's CPU time (user +
system) divided by the operations: microseconds per operation, along with the
time spent in the garbage collector (``gc.callbacks``) and its collections.

Set-ups (``CPU_VARIANTS``, comma-separated): those of bench/telemetry_setups.py,
by default ``no-otel``, ``api``, ``sdk-metrics``, ``sdk`` (BatchSpanProcessor,
every span), ``sdk-sampled`` (1 trace in 100) and ``sdk-simple``
(SimpleSpanProcessor into an in-memory exporter).

``CPU_INSIDE=1`` also sums the time spent inside aiocoord's telemetry entry
points (``perf_counter`` around each outermost call, dropping the rare call
over 0.5 ms, which was preempted): what the calls cost where they run, to set
against what they cost in a hot loop (bench/telemetry_noop.py). A second table
splits what each set-up adds to ``no-otel``: inside the calls, in the garbage
collector, and the rest of the client. ``CPU_INSIDE=api`` also sums, inside
those calls, the time in the OpenTelemetry API and SDK calls they make (the rest
is aiocoord's own code), printed per worker.

Run::

    .venv/bin/python -m bench.telemetry_cpu

``CPU_ROUNDS`` (default 3). ``CPU_GC_FREEZE=1``: each worker calls
``gc.freeze()`` after its warm-up (the objects made so far leave the
collector's generations). ``CPU_PROFILE=VARIANT:SCENARIO`` instead runs one
worker under cProfile and prints its top entries (``CPU_PROFILE_OUT=FILE``
also saves them); ``CPU_SYNC=no`` uses a
``forceSync=no`` server.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import telemetry_setups as setups

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = (
    setups.NO_OTEL,
    setups.API,
    setups.SDK_METRICS,
    setups.SDK,
    setups.SDK_SAMPLED,
    setups.SDK_SIMPLE,
)
SCENARIOS = ("mutex", "counter")


# --- the worker -----------------------------------------------------------------------


class _GcClock:
    """Time spent in the garbage collector, and its collections by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections[info["generation"]] += 1

    def reset(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]


async def _mutex_loop(connect: str, path: str, contenders: int) -> Callable[[int], Any]:
    import aiocoord

    clients = [aiocoord.connect(connect) for _ in range(contenders)]
    await asyncio.gather(*(client.start() for client in clients))
    locks = [aiocoord.Mutex(client, path) for client in clients]

    async def run(grants: int) -> None:
        left = grants

        async def contender(lock: aiocoord.Mutex) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await lock.acquire()
                try:
                    await asyncio.sleep(0)
                finally:
                    await lock.release()

        await asyncio.gather(*(contender(lock) for lock in locks))

    run.clients = clients  # type: ignore[attr-defined]
    return run


async def _counter_loop(connect: str, path: str) -> Callable[[int], Any]:
    import aiocoord

    client = aiocoord.connect(connect)
    await client.start()
    counter = aiocoord.AtomicLong(client, path)
    await counter.initialize(0)

    async def run(adds: int) -> None:
        for _ in range(adds):
            await counter.increment()

    run.clients = [client]  # type: ignore[attr-defined]
    return run


_inside = [0.0, 0.0]
_depth = [0]
_api_depth = [0]
_in_api = [0.0]
_dropped = [0]
OUTLIER_S = 0.0005
_by_call: dict[str, float] = {}


def _time_calls() -> None:
    """Wrap aiocoord's telemetry entry points to sum the time spent inside them
    (``CPU_INSIDE=1``): what the calls cost where they run, in the real client."""
    from aiocoord import _telemetry

    def timed(owner: Any, name: str) -> None:
        inner = getattr(owner, name)
        label = f"{getattr(owner, '__name__', '')}.{name}"
        # Wall time (a cheap clock: a CPU-time clock is a system call that costs
        # more than some of the calls timed). An interval over OUTLIER_S had
        # the process preempted inside: dropped, and counted.
        clock = time.perf_counter

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _depth[0]:  # called by another wrapped entry point: counted there
                return inner(*args, **kwargs)
            _depth[0] = 1
            started = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = clock() - started
                _depth[0] = 0
                if spent > OUTLIER_S:
                    _dropped[0] += 1
                else:
                    _inside[0] += spent
                    _inside[1] += 1
                    _by_call[label] = _by_call.get(label, 0.0) + spent

        setattr(owner, name, wrapper)

    def timed_api(owner: Any, name: str) -> None:
        inner = getattr(owner, name)
        clock = time.perf_counter

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _depth[0] or _api_depth[0]:  # only the outermost, inside ours
                return inner(*args, **kwargs)
            _api_depth[0] = 1
            started = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                _api_depth[0] = 0
                _in_api[0] += clock() - started

        setattr(owner, name, wrapper)

    if not _telemetry.AVAILABLE:
        return
    if os.environ.get("CPU_INSIDE") == "api":
        # What the OpenTelemetry API and SDK take of the time inside our calls
        # (the rest is aiocoord's own code around them).
        from opentelemetry import context, trace
        from opentelemetry.sdk import trace as sdk_trace
        from opentelemetry.sdk.metrics._internal import instrument

        for owner, name in (
            (sdk_trace.Tracer, "start_span"),
            (sdk_trace.Span, "end"),
            (sdk_trace.Span, "set_attributes"),
            (sdk_trace.Span, "set_attribute"),
            (sdk_trace.Span, "is_recording"),
            (sdk_trace.Span, "get_span_context"),
            (instrument._Histogram, "record"),
            (context, "attach"),
            (context, "detach"),
            (context, "get_current"),
            (trace, "set_span_in_context"),
        ):
            timed_api(owner, name)
    for name in ("__enter__", "__exit__", "set", "outcome"):
        timed(_telemetry._Scope, name)
    timed(_telemetry.HoldRecord, "end")
    for name in ("start_hold", "record", "add", "detached_context", "event", "span"):
        timed(_telemetry, name)


async def _work(connect: str, variant: str, scenario: str, count: int) -> dict[str, float]:
    clock = _GcClock()
    if os.environ.get("CPU_INSIDE"):
        _time_calls()
    path = f"/telemetry-cpu-{os.getpid()}"
    async with setups.configure(variant):
        if scenario == "mutex":
            run = await _mutex_loop(connect, path, int(os.environ.get("CPU_CONTENDERS", "8")))
        else:
            run = await _counter_loop(connect, path)
        try:
            await run(max(count // 5, 100))  # warm-up
            if os.environ.get("CPU_GC_FREEZE"):
                gc.freeze()  # what an application may do once started: see the docstring
            profile = os.environ.get("CPU_PROFILE")
            profiler: Any = None
            if profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            clock.reset()
            _inside[0] = _inside[1] = 0.0
            _dropped[0] = 0
            _in_api[0] = 0.0
            _by_call.clear()
            wall = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_SELF)
            await run(count)
            after = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.perf_counter() - wall
            if profiler is not None:
                import pstats

                profiler.disable()
                if os.environ.get("CPU_PROFILE_OUT"):
                    profiler.dump_stats(os.environ["CPU_PROFILE_OUT"])
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(35)
                stats.sort_stats("cumtime").print_stats(45)
        finally:
            await asyncio.gather(*(client.aclose() for client in run.clients))  # type: ignore[attr-defined]
    if _by_call:
        calls = {name: round(spent / count * 1e6, 1) for name, spent in _by_call.items()}
        print(
            f"{variant} {scenario} inside, µs/op: {calls}; {_dropped[0]} preempted calls dropped; "
            f"in the OpenTelemetry API/SDK: {_in_api[0] / count * 1e6:.1f}",
            file=sys.stderr,
        )
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    return {
        "cpu_us": (user + system) / count * 1e6,
        "user_us": user / count * 1e6,
        "gc_us": clock.seconds / count * 1e6,
        "gc0": clock.collections[0] / count * 1000,
        "gc1": clock.collections[1] / count * 1000,
        "gc2": clock.collections[2] / count * 1000,
        "rate": count / wall,
        "inside_us": _inside[0] / count * 1e6,
        "inside_calls": _inside[1] / count,
    }


def _worker(connect: str, variant: str, scenario: str) -> None:
    if variant == setups.NO_OTEL:
        setups.block()
    count = int(os.environ.get("CPU_GRANTS" if scenario == "mutex" else "CPU_ADDS", "2000"))
    print(json.dumps(asyncio.run(_work(connect, variant, scenario, count))))


# --- the driver ----------------------------------------------------------------------


def _run_worker(connect: str, variant: str, scenario: str, capture: bool) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "bench.telemetry_cpu", "--worker", connect, variant, scenario]
    stdout = subprocess.PIPE if capture else None
    out = subprocess.run(args, env=env, check=True, stdout=stdout, text=True, cwd=ROOT)
    return out.stdout if capture else ""


async def _drive() -> None:
    from aiocoord.testing import ZooKeeperServer

    rounds = int(os.environ.get("CPU_ROUNDS", "3"))
    variants = os.environ.get("CPU_VARIANTS", ",".join(VARIANTS)).split(",")
    scenarios = os.environ.get("CPU_SCENARIOS", ",".join(SCENARIOS)).split(",")
    sync = os.environ.get("CPU_SYNC", "yes") != "no"
    load_before = os.getloadavg()
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    async with ZooKeeperServer(force_sync=sync) as server:
        profile = os.environ.get("CPU_PROFILE")
        if profile:
            variant, scenario = profile.split(":")
            await asyncio.to_thread(_run_worker, server.connect_string, variant, scenario, False)
            return
        for round_no in range(rounds):
            order = variants if round_no % 2 == 0 else variants[::-1]
            for scenario in scenarios:
                for variant in order:
                    out = await asyncio.to_thread(
                        _run_worker, server.connect_string, variant, scenario, True
                    )
                    sample = json.loads(out.strip().splitlines()[-1])
                    samples.setdefault((scenario, variant), []).append(sample)
            print(f"round {round_no + 1}/{rounds} done", file=sys.stderr)
    load_after = os.getloadavg()
    _print_tables(samples)
    print(
        f"\nrounds: {rounds}; server forceSync={'yes' if sync else 'no'}; load average "
        f"(1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}"
    )


def _print_tables(samples: dict[tuple[str, str], list[dict[str, float]]]) -> None:
    keys = ("cpu_us", "user_us", "gc_us", "gc0", "gc1", "gc2", "rate", "inside_us", "inside_calls")
    medians = {
        key: {name: statistics.median(run[name] for run in runs) for name in keys}
        for key, runs in samples.items()
    }
    print(
        "| scenario | set-up | CPU µs/op (range) | user µs/op | in gc µs/op "
        "| gen0/1/2 collections per 1000 ops | ops/s (noisy) | inside the calls µs/op |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (scenario, variant), runs in samples.items():
        med = medians[scenario, variant]
        cpu = [run["cpu_us"] for run in runs]
        inside = f"{med['inside_us']:.1f} ({med['inside_calls']:.0f} calls)"
        print(
            f"| {scenario} | {variant} | {med['cpu_us']:.0f} ({min(cpu):.0f}-{max(cpu):.0f}) "
            f"| {med['user_us']:.0f} | {med['gc_us']:.1f} "
            f"| {med['gc0']:.1f} / {med['gc1']:.2f} / {med['gc2']:.3f} "
            f"| {med['rate']:.0f} | {inside} |"
        )
    print(
        "\n| scenario | set-up | added CPU µs/op | inside the calls | in gc | the rest |"
        "\n|---|---|---|---|---|---|"
    )
    for (scenario, variant), med in medians.items():
        base = medians.get((scenario, setups.NO_OTEL))
        if base is None or variant == setups.NO_OTEL:
            continue
        added = med["cpu_us"] - base["cpu_us"]
        gc_added = med["gc_us"] - base["gc_us"]
        rest = added - med["inside_us"] - gc_added
        print(
            f"| {scenario} | {variant} | {added:.0f} | {med['inside_us']:.0f} "
            f"| {gc_added:.0f} | {rest:.0f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(*sys.argv[2:5])
    else:
        asyncio.run(_drive())
