"""The lock family at work on an embedded ZooKeeper (or AIOCOORD_ZK).

Four "processes" (one client each, a few tasks apiece) update a shared record
under a Mutex using a fenced transaction; readers share a ReadWriteLock while a
writer waits its turn (and a reader that comes after the writer waits behind
it); a Semaphore caps concurrent jobs at 2; a SemaphoreMutex passes one turn
at a time; a MultiLock takes two locks all or nothing; a Lease picks one
scheduler that must keep renewing, and one that stops renewing lapses. Each
part checks its own guarantee and says so.

Run: python examples/locks.py

Expected output (``...`` stands for the lease's winner, which varies):

    mutex: 40 updates by 8 tasks, never two holders; fencing tokens strictly increasing: True
    read-write lock: r1 and r2 read together, then the writer writes alone, then r3 reads
    semaphore: 12 jobs, never more than 2 at a time: True
    semaphore mutex: 8 turns, never two at once: True
    multi lock: /multi/b was held, so it gave up and let /multi/a go: True
    lease: node-... is the scheduler (1 winner of 4), renewed for another 5 s
    lease: unrenewed, it lapsed after its 0.5 s TTL and another holder took it: True
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


async def queue_reaches(client: aiocoord.Client, path: str, length: int) -> None:
    """Return once ``length`` contenders queue on the lock at ``path`` (on a watch)."""
    async with contextlib.aclosing(client.children_changes(path)) as queue:
        async for names in queue:
            if names is not None and len(names) >= length:
                return


async def read_write_demo(clients: list[aiocoord.Client]) -> None:
    path = "/locks/config"
    readers_now = 0
    log: list[str] = []
    both_reading = asyncio.Barrier(3)  # r1, r2 and this function meet here
    stop_reading = asyncio.Event()

    async def early_reader(client: aiocoord.Client) -> None:
        nonlocal readers_now
        async with aiocoord.ReadWriteLock(client, path).read_lock:
            readers_now += 1
            await both_reading.wait()  # both readers are inside at once
            await stop_reading.wait()
            readers_now -= 1

    async def writer(client: aiocoord.Client) -> None:
        async with aiocoord.ReadWriteLock(client, path).write_lock:
            assert readers_now == 0, "the writer got in while someone read"
            log.append("the writer writes alone")

    async def late_reader(client: aiocoord.Client) -> None:
        async with aiocoord.ReadWriteLock(client, path).read_lock:
            log.append("r3 reads")

    readers = [asyncio.create_task(early_reader(c)) for c in clients[:2]]
    await both_reading.wait()
    log.append("r1 and r2 read together")
    writing = asyncio.create_task(writer(clients[2]))
    await queue_reaches(clients[3], path, 3)  # the writer waits behind the readers
    reading = asyncio.create_task(late_reader(clients[3]))
    await queue_reaches(clients[3], path, 4)  # r3 queues behind the writer: it waits too
    stop_reading.set()
    await asyncio.gather(*readers, writing, reading)
    print(f"read-write lock: {', then '.join(log)}")


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
    print(f"semaphore: 12 jobs, never more than 2 at a time: {peak <= 2}")


async def semaphore_mutex_demo(clients: list[aiocoord.Client]) -> None:
    inside = 0
    overlap = False

    async def turn(client: aiocoord.Client) -> None:
        nonlocal inside, overlap
        async with aiocoord.SemaphoreMutex(client, "/locks/turns"):
            inside += 1
            overlap = overlap or inside > 1
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(turn(c) for c in clients for _ in range(2)))
    print(f"semaphore mutex: 8 turns, never two at once: {not overlap}")


async def multi_lock_demo(clients: list[aiocoord.Client]) -> None:
    holder = aiocoord.Mutex(clients[0], "/multi/b")
    await holder.acquire()
    both = aiocoord.MultiLock(
        [aiocoord.Mutex(clients[1], "/multi/a"), aiocoord.Mutex(clients[1], "/multi/b")]
    )
    got_both = await both.acquire(timeout=0.2)
    other = aiocoord.Mutex(clients[2], "/multi/a")
    a_is_free = await other.try_acquire()
    print(
        "multi lock: /multi/b was held, so it gave up and let /multi/a go: "
        f"{not got_both and a_is_free}"
    )
    await other.release()
    await holder.release()


async def lease_demo(clients: list[aiocoord.Client]) -> None:
    leases = [
        aiocoord.Lease(c, "/leases/scheduler", ttl=5, participant_id=f"node-{i}")
        for i, c in enumerate(clients)
    ]
    won = await asyncio.gather(*(lease.try_acquire() for lease in leases))
    winner = won.index(True)
    await leases[winner].renew()
    assert leases[winner].is_held
    print(
        f"lease: node-{winner} is the scheduler ({won.count(True)} winner of {len(won)}), "
        f"renewed for another {leases[winner].ttl:g} s"
    )
    await leases[winner].release()

    # A holder that stops renewing (hung, cut off) loses the lease after its TTL.
    quiet = aiocoord.Lease(clients[0], "/leases/short", ttl=0.5, participant_id="quiet")
    assert await quiet.try_acquire()
    await quiet.wait_lost()  # nobody renews it: this returns once the TTL has passed
    # The holder's own clock runs out first (it counts from before its create),
    # others judge by the server's clock: a few tries bridge that gap.
    successor = aiocoord.Lease(clients[1], "/leases/short", ttl=0.5, participant_id="next")
    taken = False
    for _ in range(40):
        if taken := await successor.try_acquire():
            break
        await asyncio.sleep(0.05)
    await successor.release()
    print(f"lease: unrenewed, it lapsed after its 0.5 s TTL and another holder took it: {taken}")


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-locks-demo-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(4)]
        try:
            await asyncio.gather(*(c.start() for c in clients))
            await mutex_demo(clients)
            await read_write_demo(clients)
            await semaphore_demo(clients)
            await semaphore_mutex_demo(clients)
            await multi_lock_demo(clients)
            await lease_demo(clients)
        finally:
            for client in clients:
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
