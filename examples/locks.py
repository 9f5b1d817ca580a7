"""The lock family at work on an embedded ZooKeeper (or AIOCOORD_ZK).

Four "processes" (one client each, a few tasks apiece) update a shared record
under a Mutex using a fenced transaction; readers share a ReadWriteLock while a
writer waits its turn; a Semaphore caps concurrent jobs at 2; a Lease picks
one scheduler that must keep renewing. Each part checks its own guarantee and
says so.

Run: python examples/locks.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


async def mutex_demo(clients: list[aiocoord.Client]) -> None:
    await clients[0].create("/record", b"0")
    inside = 0
    tokens: list[int] = []

    async def worker(client: aiocoord.Client) -> None:
        nonlocal inside
        lock = aiocoord.Mutex(client, "/locks/record")
        for _ in range(5):
            async with lock.hold(cancel_on_loss=True):
                inside += 1
                assert inside == 1, "two holders at once"
                data, _stat = await client.get("/record")
                # The write applies only if we still hold the lock.
                await lock.transaction().set("/record", b"%d" % (int(data) + 1)).commit()
                tokens.append(lock.fencing_token)
                inside -= 1

    await asyncio.gather(*(worker(c) for c in clients for _ in range(2)))
    total = int((await clients[0].get("/record"))[0])
    print(
        f"mutex: {total} updates by {len(clients) * 2} tasks, never two holders; "
        f"fencing tokens strictly increasing: {tokens == sorted(set(tokens))}"
    )


async def read_write_demo(clients: list[aiocoord.Client]) -> None:
    readers_now = 0
    peak = 0
    log: list[str] = []

    async def reader(client: aiocoord.Client, name: str) -> None:
        nonlocal readers_now, peak
        async with aiocoord.ReadWriteLock(client, "/locks/config").read_lock:
            readers_now += 1
            peak = max(peak, readers_now)
            log.append(f"{name} reads")
            await asyncio.sleep(0.05)
            readers_now -= 1

    async def writer(client: aiocoord.Client) -> None:
        async with aiocoord.ReadWriteLock(client, "/locks/config").write_lock:
            assert readers_now == 0
            log.append("writer writes alone")

    await asyncio.gather(
        reader(clients[0], "r1"),
        reader(clients[1], "r2"),
        writer(clients[2]),
        reader(clients[3], "r3"),
    )
    print(f"read-write lock: up to {peak} readers at once; order: {', '.join(log)}")


async def semaphore_demo(clients: list[aiocoord.Client]) -> None:
    running = 0
    peak = 0

    async def job(client: aiocoord.Client) -> None:
        nonlocal running, peak
        async with aiocoord.Semaphore(client, "/limits/jobs", max_leases=2):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1

    await asyncio.gather(*(job(c) for c in clients for _ in range(3)))
    print(f"semaphore: 12 jobs, at most {peak} at a time (limit 2)")


async def lease_demo(clients: list[aiocoord.Client]) -> None:
    leases = [
        aiocoord.Lease(c, "/leases/scheduler", ttl=5, holder=f"node-{i}")
        for i, c in enumerate(clients)
    ]
    won = await asyncio.gather(*(lease.try_acquire() for lease in leases))
    winner = won.index(True)
    await leases[winner].renew()
    print(
        f"lease: node-{winner} is the scheduler for the next "
        f"{leases[winner].remaining:.1f} s ({won.count(True)} winner of {len(won)})"
    )
    await leases[winner].release()


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-locks-demo-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(4)]
        try:
            await asyncio.gather(*(c.start() for c in clients))
            await mutex_demo(clients)
            await read_write_demo(clients)
            await semaphore_demo(clients)
            await lease_demo(clients)
        finally:
            for client in clients:
                await client.close()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
