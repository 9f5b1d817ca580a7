"""Leader failover on an embedded ZooKeeper (or AIOCOORD_ZK): three workers, one leader.

Three workers (one client each, as three processes would have) run a
LeaderElection; whoever leads "does work": it writes a shared record through a
fenced transaction, which applies only while its writer still leads. Then the
leader goes away, twice: the first one's session expires (a long pause, a
network partition), the second one's process exits (its client closes). Each
time the old leader's work is cancelled the moment its client knows, and the
next worker in the queue takes over. The worker whose session expired queues
again, at the back. A write it prepared while leading is refused afterwards.

Run: python examples/leader_failover.py

Expected output:

    term 1: worker-1 leads and writes the record
    term 1: worker-1's session expired; its work was cancelled
    term 2: worker-2 leads and writes the record
    term 2: worker-2's process exited; its work was cancelled
    term 3: worker-3 leads and writes the record
    queue: worker-3 (leader), worker-1 (back again after its session expired)
    a write worker-1 prepared while it led was refused: LeadershipLostError
    each old leader's work was cancelled: True
    fencing tokens strictly increasing: True
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer, expire_session


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


class Cluster:
    """What the workers do, and what an observer outside them checks."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.tokens: list[int] = []
        self.started: asyncio.Queue[str] = asyncio.Queue()
        self.cancelled: dict[str, asyncio.Event] = {}
        self.prepared: dict[str, aiocoord.Transaction] = {}

    async def worker(self, client: aiocoord.Client, name: str) -> None:
        election = aiocoord.LeaderElection(client, "/election", participant_id=name)
        self.cancelled[name] = asyncio.Event()

        async def lead() -> None:
            self.events.append(f"{name} starts")
            try:
                self.tokens.append(election.fencing_token)
                await election.transaction().set("/record", name.encode()).commit()
                self.prepared[name] = election.transaction().set("/record", b"stale")
                self.started.put_nowait(name)
                await asyncio.Event().wait()  # lead until leadership goes
            except asyncio.CancelledError:
                self.events.append(f"{name} cancelled")
                self.cancelled[name].set()
                raise

        with contextlib.suppress(aiocoord.ClientClosedError):  # its "process" exited
            await election.run(lead)


async def queue_reaches(client: aiocoord.Client, length: int) -> None:
    """Return once ``length`` workers queue in the election (on a watch)."""
    async with contextlib.aclosing(client.children_changes("/election")) as queue:
        async for names in queue:
            if names is not None and len(names) >= length:
                return


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-leader-demo-{os.getpid()}"
        observer = aiocoord.connect(hosts, namespace=namespace)
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(3)]
        await asyncio.gather(observer.start(), *(c.start() for c in clients))
        await observer.create("/record", b"")
        cluster = Cluster()
        names = [f"worker-{i}" for i in (1, 2, 3)]
        workers = []
        try:
            for i, (client, name) in enumerate(zip(clients, names, strict=True)):
                workers.append(asyncio.create_task(cluster.worker(client, name)))
                await queue_reaches(observer, i + 1)  # they queue in this order

            leader = await cluster.started.get()
            print(f"term 1: {leader} leads and writes the record")
            await expire_session(clients[0])
            await cluster.cancelled[leader].wait()
            print(f"term 1: {leader}'s session expired; its work was cancelled")

            leader = await cluster.started.get()
            print(f"term 2: {leader} leads and writes the record")
            await queue_reaches(observer, 3)  # worker-1 queued again, in a new session
            await clients[1].aclose()
            await cluster.cancelled[leader].wait()
            print(f"term 2: {leader}'s process exited; its work was cancelled")

            leader = await cluster.started.get()
            print(f"term 3: {leader} leads and writes the record")
            queue = await aiocoord.LeaderElection(observer, "/election").participants()
            print(
                f"queue: {queue[0].id} (leader), {queue[1].id} "
                "(back again after its session expired)"
            )
            try:
                await cluster.prepared["worker-1"].commit()
                refused = "nothing: it was applied"
            except aiocoord.LeadershipLostError as error:
                refused = type(error).__name__
            print(f"a write worker-1 prepared while it led was refused: {refused}")
            # Which comes first, the old leader hearing of its loss or the next one
            # starting, is a race between two processes that no lock can settle: an
            # expired leader learns of it only when it next hears from ZooKeeper.
            # The fence is what keeps its late writes out (refused above).
            cancelled = all(f"{name} cancelled" in cluster.events for name in names[:2])
            print(f"each old leader's work was cancelled: {cancelled}")
            tokens = cluster.tokens
            print(f"fencing tokens strictly increasing: {tokens == sorted(set(tokens))}")
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for client in (*clients, observer):
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
