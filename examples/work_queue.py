"""A work queue on an embedded ZooKeeper (or AIOCOORD_ZK): no job lost when a worker dies.

Two producers (one client each, as two processes would have) put 40 jobs on a
Queue. Three workers take them at least once: ``async with queue.take() as
job`` keeps the job in ZooKeeper, marked as taken by an ephemeral node, until
the block returns. The first worker takes a job and hangs on it; after the
others have done a few jobs, its process exits (its client closes) in the
middle of that job. Its session ends, the mark goes with it, and the job goes
back to the queue: another worker does it. Nothing is lost, and nothing is
left in the queue.

Run: python examples/work_queue.py

Expected output (``...`` stands for the job and the worker, which vary):

    2 producers put 40 jobs on /jobs
    worker-1 took job ... and hangs on it
    worker-1's process exited in the middle of job ...
    job ... went back to the queue and worker-... did it
    jobs done: 40 of 40, none lost: True
    done twice: 0 (at least once: a job is done again only if its worker dies after the work)
    the queue is empty, and no job is still marked as taken: True
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer

JOBS = 40


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


class Work:
    """Who did which job: what the workers record and the example checks."""

    def __init__(self) -> None:
        self.done: dict[int, list[str]] = collections.defaultdict(list)
        self.progress = asyncio.Condition()
        self.hanging_job: int | None = None
        self.hanging = asyncio.Event()

    async def record(self, job: int, worker: str) -> None:
        async with self.progress:
            self.done[job].append(worker)
            self.progress.notify_all()

    async def wait_done(self, count: int) -> None:
        async with self.progress:
            await self.progress.wait_for(lambda: len(self.done) >= count)


async def worker(client: aiocoord.Client, name: str, work: Work, *, hang: bool = False) -> None:
    queue = aiocoord.Queue(client, "/jobs", codec=aiocoord.Codec.JSON)
    while True:
        async with queue.take() as job:
            if hang:
                work.hanging_job = job["id"]
                work.hanging.set()
                await asyncio.Event().wait()  # stuck, until the process dies
            await asyncio.sleep(0.005)  # the work itself
            await work.record(job["id"], name)


async def emptied(client: aiocoord.Client, path: str) -> None:
    """Return once ``path`` has no children (or is gone)."""
    async with contextlib.aclosing(client.children_changes(path)) as changes:
        async for names in changes:
            if not names:
                return


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-work-queue-demo-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(5)]
        await asyncio.gather(*(c.start() for c in clients))
        producers, workers = clients[:2], clients[2:]
        work = Work()
        tasks: list[asyncio.Task[None]] = []
        try:
            halves = [range(0, JOBS, 2), range(1, JOBS, 2)]
            await asyncio.gather(
                *(
                    aiocoord.Queue(p, "/jobs", codec=aiocoord.Codec.JSON).put_many(
                        [{"id": i, "task": f"resize image {i}"} for i in half]
                    )
                    for p, half in zip(producers, halves, strict=True)
                )
            )
            print(f"2 producers put {JOBS} jobs on /jobs")

            tasks.append(asyncio.create_task(worker(workers[0], "worker-1", work, hang=True)))
            await work.hanging.wait()
            stuck = work.hanging_job
            print(f"worker-1 took job {stuck} and hangs on it")
            for i, client in enumerate(workers[1:], start=2):
                tasks.append(asyncio.create_task(worker(client, f"worker-{i}", work)))
            await work.wait_done(10)

            await workers[0].aclose()  # the process exits: its session, and its mark, end
            print(f"worker-1's process exited in the middle of job {stuck}")
            await work.wait_done(JOBS)
            assert stuck is not None
            print(f"job {stuck} went back to the queue and {work.done[stuck][0]} did it")

            all_done = sorted(work.done) == list(range(JOBS))
            print(f"jobs done: {len(work.done)} of {JOBS}, none lost: {all_done}")
            twice = sum(len(by) > 1 for by in work.done.values())
            print(
                f"done twice: {twice} (at least once: a job is done again only if its "
                "worker dies after the work)"
            )
            # The last commits may still be on their way: wait for them (on watches).
            observer = producers[0]
            queue = aiocoord.Queue(observer, "/jobs")
            async with asyncio.timeout(10):
                await emptied(observer, "/jobs")
                await emptied(observer, queue.lock_path)
            empty = await queue.size() == 0
            print(f"the queue is empty, and no job is still marked as taken: {empty}")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for client in clients:
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
