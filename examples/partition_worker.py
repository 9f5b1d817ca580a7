"""Shards of work split among workers with a Partitioner, on an embedded ZooKeeper
(or AIOCOORD_ZK).

Three workers (each its own process: one client apiece) share 12 shards, 4
each. A fourth joins: only the shards it takes move. Then worker-2 stalls (a
long pause: its session expires): it owns nothing from the moment its client
knows, the others take its shards over (and only those), and a write it had
prepared under a shard's fence is refused by ZooKeeper when it carries on.

Run: python examples/partition_worker.py

Expected output:

    3 workers share 12 shards: 4 + 4 + 4
    worker-4 joined: 3 shards moved, all to worker-4
    worker-2 paused past its session timeout: it owns nothing from then on
    its 3 shards moved to the others, and no other shard moved: True
    worker-2's write prepared before the pause: refused (PartitionLostError)
    every shard has one owner, 4 + 4 + 4: True
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence

import aiocoord
from aiocoord.testing import ZooKeeperServer, expire_session

SHARDS = [f"shard-{n:02}" for n in range(12)]


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


async def settled(workers: Sequence[aiocoord.Partitioner]) -> dict[str, str]:
    """Wait until these workers are stable and own every shard once; shard -> owner."""
    changed = asyncio.Event()

    def on_change(_assignment: aiocoord.Assignment) -> None:
        changed.set()

    for worker in workers:
        worker.add_listener(on_change)

    def done() -> bool:
        owned = [w.owned for w in workers]
        return (
            all(w.assignment.stable for w in workers)
            and sum(map(len, owned)) == len(SHARDS)
            and frozenset().union(*owned) == frozenset(SHARDS)
        )

    try:
        async with asyncio.timeout(30):
            while not done():
                changed.clear()
                await changed.wait()
    finally:
        for worker in workers:
            worker.remove_listener(on_change)
    return {shard: w.participant_id for w in workers for shard in w.owned}


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-partition-demo-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(5)]
        await asyncio.gather(*(c.start() for c in clients))
        workers = [
            aiocoord.Partitioner(
                client, "/shards", SHARDS, participant_id=f"worker-{n}", settle=0.3
            )
            for n, client in enumerate(clients[:4], start=1)
        ]
        w1, w2, w3, w4 = workers
        try:
            await clients[4].create("/offsets", b"")
            await asyncio.gather(w1.start(), w2.start(), w3.start())
            before = await settled([w1, w2, w3])
            sizes = " + ".join(str(len(w.owned)) for w in (w1, w2, w3))
            print(f"3 workers share {len(SHARDS)} shards: {sizes}")

            await w4.start()
            after = await settled(workers)
            moved = {s for s in SHARDS if before[s] != after[s]}
            print(
                f"worker-4 joined: {len(moved)} shards moved, "
                f"all to {'worker-4' if moved == w4.owned else 'several'}"
            )

            # worker-2 prepares a write under one of its shards' fence, then stalls.
            lost = asyncio.Event()
            clients[1].add_listener(
                lambda state: lost.set() if state is aiocoord.ConnectionState.LOST else None
            )
            shard = sorted(w2.owned)[0]
            stale = w2.transaction(shard).create(f"/offsets/{shard}", b"from worker-2")
            its_shards = set(w2.owned)
            await expire_session(clients[1])
            await lost.wait()
            nothing = "nothing" if not w2.owned else sorted(w2.owned)
            print(f"worker-2 paused past its session timeout: it owns {nothing} from then on")
            await w2.aclose()  # the stalled process is gone for good
            end = await settled([w1, w3, w4])
            moved = {s for s in SHARDS if after[s] != end[s]}
            print(
                f"its {len(its_shards)} shards moved to the others, "
                f"and no other shard moved: {moved == its_shards}"
            )
            try:
                await stale.commit()
                print("worker-2's write prepared before the pause: applied (a bug)")
            except aiocoord.PartitionLostError as error:
                print(
                    f"worker-2's write prepared before the pause: refused ({type(error).__name__})"
                )
            sizes = " + ".join(str(len(w.owned)) for w in (w1, w3, w4))
            print(f"every shard has one owner, {sizes}: {len(end) == len(SHARDS)}")
        finally:
            for worker in workers:
                await worker.aclose()
            for client in clients:
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
