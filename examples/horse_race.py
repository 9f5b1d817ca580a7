"""A horse race on a DoubleBarrier, on an embedded ZooKeeper (or AIOCOORD_ZK).

Five horses, each its own process (one client apiece), trot up to the gate one
by one, at random moments. The gate is a DoubleBarrier for five: nobody
starts until all five are in, so they start together. Each runs a race of
random length; leaving the barrier waits until every horse has finished, so
no horse leaves the track while another is still running. The script checks
both from the order of what happened, and says so.

Run: python examples/horse_race.py

Expected output (``...`` stands for the finishes, in whatever order and time
they come, and for the winner):

    the gate opens when all 5 horses are in
    ...
    all 5 horses started together
    race over: all 5 horses finished before any left the track
    winner: horse-...
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer

HORSES = 5


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


async def horse(client: aiocoord.Client, name: str, events: list[tuple[str, str]]) -> None:
    await asyncio.sleep(random.uniform(0, 0.5))  # trotting up to the gate
    events.append(("arrived", name))
    gate = aiocoord.DoubleBarrier(client, "/race", HORSES)
    async with gate.entered(timeout=30):  # waits for all five
        events.append(("started", name))
        started_at = time.monotonic()
        await asyncio.sleep(random.uniform(0.05, 0.4))  # the race
        events.append(("finished", name))
        print(f"{name} finishes in {time.monotonic() - started_at:.2f} s")
    # Leaving waited for every horse to finish and leave.
    events.append(("left", name))


def all_before(events: list[tuple[str, str]], first: str, then: str) -> bool:
    """Whether every ``first`` event came before every ``then`` event."""
    kinds = [kind for kind, _name in events]
    last_first = max(i for i, kind in enumerate(kinds) if kind == first)
    first_then = min(i for i, kind in enumerate(kinds) if kind == then)
    return last_first < first_then


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-horse-race-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(HORSES)]
        events: list[tuple[str, str]] = []
        try:
            await asyncio.gather(*(c.start() for c in clients))
            print(f"the gate opens when all {HORSES} horses are in")
            await asyncio.gather(
                *(horse(c, f"horse-{i + 1}", events) for i, c in enumerate(clients))
            )
        finally:
            for client in clients:
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)
    if all_before(events, "arrived", "started"):
        print(f"all {HORSES} horses started together")
    else:
        print("a horse jumped the gun")
    if all_before(events, "finished", "left"):
        print(f"race over: all {HORSES} horses finished before any left the track")
    else:
        print("a horse left the track while another was still running")
    winner = next(name for kind, name in events if kind == "finished")
    print(f"winner: {winner}")


if __name__ == "__main__":
    asyncio.run(main())
