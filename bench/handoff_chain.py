"""Where a mutex hand-off's time goes, and the client CPU per hand-off (#30).

Runs the mutex scenario's loop in this process (N sessions, one Mutex each, on
a fresh ``forceSync=yes`` standalone server) with timestamps at each link of
the chain from one holder's release to the next holder's acquire returning:

- ``release -> event``: the holder calls release (its delete leaves at once)
  until the successor's session reads the watch event (the server's disk sync
  of the delete, and any write queued ahead of it, is in here);
- ``event -> woken``: until the successor's waiting task runs again;
- ``woken -> acquired``: until its acquire returns (any further request:
  a re-read of the queue);
- ``acquired -> release``: the critical section and the loop.

Also the process's CPU seconds per hand-off over the window, and with
``CHAIN_PROFILE=1`` a cProfile of the window (``CHAIN_PROFILE_SORT``, default
``tottime``; ``CHAIN_PROFILE_TOP`` functions, default 25; its first line counts
the calls, a measure of client work that load does not change).
``.venv/bin/python -m bench.handoff_chain [contenders] [seconds]``.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiocoord
from aiocoord._recipes._kit import _contenders
from aiocoord._session import _engine
from aiocoord.testing import ZooKeeperServer
from bench import run as driver

_marks: dict[str, float] = {}


def _instrument() -> None:
    release = _contenders.Contender.release
    wait_change = _contenders.wait_change
    on_event = _engine.SessionEngine._on_event_frame

    async def timed_release(self: Any) -> None:
        _marks["release"] = time.perf_counter()
        await release(self)

    async def timed_wait_change(*args: Any, **kwargs: Any) -> Any:
        result = await wait_change(*args, **kwargs)
        _marks["woken"] = time.perf_counter()
        return result

    def timed_event(self: Any, frame: bytes) -> None:
        _marks["event"] = time.perf_counter()
        on_event(self, frame)

    _contenders.Contender.release = timed_release  # type: ignore[method-assign]
    _contenders.wait_change = timed_wait_change  # type: ignore[assignment]
    _engine.SessionEngine._on_event_frame = timed_event  # type: ignore[method-assign]


async def main(contenders: int, seconds: float) -> None:
    _instrument()
    segments: dict[str, list[float]] = {
        "release -> event": [],
        "event -> woken": [],
        "woken -> acquired": [],
        "acquired -> release": [],
    }
    client_pin, server_pin = driver.pin_commands()
    if client_pin:
        os.sched_setaffinity(0, {driver.CLIENT_CORE})
    async with ZooKeeperServer(tick_time_ms=driver.TICK_TIME_MS, force_sync=True) as server:
        if server_pin and server.pid is not None:
            await asyncio.to_thread(driver.subprocess.run, [*server_pin, str(server.pid)])
        clients = [aiocoord.connect(server.connect_string) for _ in range(contenders)]
        await asyncio.gather(*(c.start() for c in clients))
        try:
            await driver.warm_up_server(clients[0], 3.0)
            locks = [aiocoord.Mutex(c, "/chain/lock") for c in clients]
            measuring = False
            stop = time.perf_counter() + 2.0 + seconds
            handoffs = 0
            last_acquired = 0.0

            async def contender(lock: aiocoord.Mutex) -> None:
                nonlocal handoffs, last_acquired
                while time.perf_counter() < stop:
                    _marks.pop("woken", None)
                    await lock.acquire()
                    now = time.perf_counter()
                    if measuring:
                        handoffs += 1
                        if "woken" in _marks and _marks["event"] <= _marks["woken"] <= now:
                            release, event = _marks["release"], _marks["event"]
                            if last_acquired <= release <= event:
                                segments["acquired -> release"].append(release - last_acquired)
                                segments["release -> event"].append(event - release)
                                segments["event -> woken"].append(_marks["woken"] - event)
                                segments["woken -> acquired"].append(now - _marks["woken"])
                    last_acquired = now
                    await asyncio.sleep(0)
                    await lock.release()

            async def window() -> tuple[float, float, int]:
                nonlocal measuring
                await asyncio.sleep(2.0)
                measuring = True
                profile = cProfile.Profile() if os.environ.get("CHAIN_PROFILE") else None
                if profile is not None:
                    profile.enable()
                cpu, wall = time.process_time(), time.perf_counter()
                await asyncio.sleep(seconds)
                measuring = False
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                if profile is not None:
                    profile.disable()
                    stats = pstats.Stats(profile)
                    order = os.environ.get("CHAIN_PROFILE_SORT", "tottime")
                    top = int(os.environ.get("CHAIN_PROFILE_TOP", "25"))
                    stats.sort_stats(order).print_stats(top)
                return cpu, wall, handoffs

            results = await asyncio.gather(window(), *(contender(lock) for lock in locks))
            cpu, wall, count = results[0]
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))
    print(
        f"{contenders} sessions: {count / wall:,.0f} hand-offs/s, "
        f"client CPU {1000 * cpu / count:.3f} ms per hand-off "
        f"({cpu / wall:.2f} of a core), load {os.getloadavg()[0]:.2f}"
    )
    for name, values in segments.items():
        if values:
            print(
                f"  {name:20s} median {1000 * statistics.median(values):.3f} ms  "
                f"mean {1000 * statistics.fmean(values):.3f} ms  (n={len(values)})"
            )


if __name__ == "__main__":
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 32,
            float(sys.argv[2]) if len(sys.argv) > 2 else 5.0,
        )
    )
