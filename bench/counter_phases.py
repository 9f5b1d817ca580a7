"""Where a queued counter add's time goes: its steps' latencies (#30).

Rates say how many adds a configuration does; this says why. It runs N sessions
in one process (``make bench``'s harness), each incrementing one counter in a
loop, on fresh servers started as ``make bench`` starts them (``forceSync=yes``,
standalone or a 3-node ensemble, pinned to core 0; this process on core 1),
and times each step of the combining queue as it runs:

- *enqueue*: the request's create and the listing pipelined with it (a write);
- *wait*: the wait for the request just ahead to go (a watch and its event);
- *read*: the read of the queue's state (the result, or the next write's input);
- *combine*: the first in line's reads and its transaction (a write).

Each step's count per add, mean and median, and its time per add (mean times
count). The steps are timed by wrapping the combining queue's private methods:
a scratch instrument for benchmarks, not an API.

Run: ``.venv/bin/python -m bench.counter_phases`` (``PHASES_SERVER``: ``ensemble``
(default) or ``sync``; ``PHASES_SESSIONS``, default 8; ``PHASES_WARMUP``
seconds, default 60: an ensemble's three JVMs compile for a minute;
``PHASES_SECONDS``, default 8).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiocoord
from aiocoord._recipes.counters import _combining
from bench import run as driver

STEPS = {
    "enqueue": "_enqueue",
    "wait": "_wait_gone",
    "read": "_read_state",
    "combine": "_combine",
    "queued add": "submit",
}
"""Reported name: the combining queue's method that does the step."""


def _time_steps(durations: dict[str, list[float]]) -> None:
    """Wrap each step's method so that every call's duration lands in ``durations``."""

    def timed(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                durations[name].append(time.perf_counter() - started)

        return wrapper

    for name, attribute in STEPS.items():
        setattr(
            _combining.Combiner, attribute, timed(name, getattr(_combining.Combiner, attribute))
        )


async def _measure(server: str, sessions: int, warmup: float, seconds: float) -> str:
    durations: dict[str, list[float]] = collections.defaultdict(list)
    _time_steps(durations)
    config = next(c for c in driver.SERVER_CONFIGS if c.name == server)
    _client_pin, server_pin = driver.pin_commands()
    async with driver.start_servers(config, server_pin) as servers:
        if server_pin:
            os.sched_setaffinity(0, {driver.CLIENT_CORE})
        clients = [aiocoord.connect(servers.connect_string) for _ in range(sessions)]
        try:
            await asyncio.gather(*(client.start() for client in clients))
            counters = [aiocoord.AtomicLong(client, "/phases/counter") for client in clients]
            await counters[0].initialize(0)
            latencies: list[float] = []  # one per add finished in the window
            measuring = stop = False

            async def run(counter: aiocoord.AtomicLong) -> None:
                while not stop:
                    started = time.perf_counter()
                    await counter.increment()
                    if measuring:
                        latencies.append(time.perf_counter() - started)

            tasks = [asyncio.create_task(run(counter)) for counter in counters]
            await asyncio.sleep(warmup)
            durations.clear()
            measuring = True
            began = time.perf_counter()
            await asyncio.sleep(seconds)
            measuring = False
            elapsed = time.perf_counter() - began
            stop = True
            await asyncio.gather(*tasks)
        finally:
            for client in clients:
                await client.aclose()
    done = len(latencies)
    lines = [
        f"{server}, {sessions} sessions in one process: {done / elapsed:,.0f} adds/s, "
        f"add p50 {1e3 * statistics.median(latencies):.2f} ms",
        "",
        "| step | per add | mean ms | p50 ms | ms per add |",
        "|---|---|---|---|---|",
    ]
    for name in STEPS:
        spent = durations.get(name, [])
        if not spent:
            continue
        lines.append(
            f"| {name} | {len(spent) / done:.2f} | {1e3 * statistics.mean(spent):.2f} "
            f"| {1e3 * statistics.median(spent):.2f} | {1e3 * sum(spent) / done:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    print(
        asyncio.run(
            _measure(
                os.environ.get("PHASES_SERVER", "ensemble"),
                int(os.environ.get("PHASES_SESSIONS", "8")),
                float(os.environ.get("PHASES_WARMUP", "60")),
                float(os.environ.get("PHASES_SECONDS", "8")),
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
