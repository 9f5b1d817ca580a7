"""A ticket sale: 1000 tickets, 100,000 buyers, several processes, no oversell.

The main process starts an embedded ZooKeeper (or uses AIOCOORD_ZK), then
runs the sale twice, each time launching worker processes. Each worker runs
many concurrent buyers on one client; a buyer gets a ticket only if a bounded
increment of the shared counter succeeds. The main process prints a live
summary while the sale runs, then proves the outcome.

The first sale counts on one znode (``AtomicLong``, ``increment(upper=1000)``):
the value an increment returns is the ticket's number, so the proof also
covers the numbers (each sold once, exactly 1..1000). Every change of one
znode waits for the one before it, though, so across processes this counter
goes no faster than one write commit per sale. The second sale splits the
1000 tickets over 8 shards (``ShardedCounter``, escrow): each sale writes one
shard, shards that run out take room from the others, and "sold out" comes
only when every shard is empty. Its proof reads every shard at one instant:
each within its quota, the quotas adding up to exactly 1000.

Run: make demo   (or: python examples/tickets.py [--workers 4 --buyers 25000])

Expected output with the default arguments and AIOCOORD_ZK set (run alone, it
first says where its embedded ZooKeeper listens). The ``...`` lines stand for
the live summary, a line every half second; ``...`` within a line, for the time:

    selling 1000 tickets to 100,000 buyers in 4 processes
    one counter node (AtomicLong):
    ...
    done in ... s: 1000 sold, 99,000 refused, 0 unknown, counter at 1000
      [ok] all worker processes exited cleanly
      [ok] exactly 1000 tickets sold (no oversell)
      [ok] no ticket number sold twice
      [ok] numbers are exactly 1..1000
      [ok] every sale recorded by a buyer (none lost)
      [ok] every buyer answered
    8 shards (ShardedCounter):
    ...
    done in ... s: 1000 sold, 99,000 refused, 0 unknown, counter at 1000
      [ok] all worker processes exited cleanly
      [ok] exactly 1000 tickets sold (no oversell)
      [ok] every shard within its quota, the quotas adding up to 1000
      [ok] every sale recorded by a buyer (none lost)
      [ok] every buyer answered
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer

COUNTER = "/sale/sold"
SHARDED = "/sale/sharded"
SHARDS = 8


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        print(f"embedded ZooKeeper on {server.connect_string}")
        yield server.connect_string


# --- a worker process -------------------------------------------------------------


async def worker(
    hosts: str,
    namespace: str,
    sharded: bool,
    tickets: int,
    buyers: int,
    concurrency: int,
    think: float,
) -> None:
    sold: list[int] = []
    refused = unknown = 0
    queue = iter(range(buyers))

    async def buyer_loop(counter: aiocoord.AtomicLong | aiocoord.ShardedCounter) -> None:
        nonlocal refused, unknown
        for _buyer in queue:  # each buyer tries once, after a moment's thought
            await asyncio.sleep(random.expovariate(1 / think))
            try:
                if isinstance(counter, aiocoord.ShardedCounter):
                    result = await counter.increment()  # its bound is the counter's own
                else:
                    result = await counter.increment(upper=tickets)
            except aiocoord.OutcomeUnknownError:
                unknown += 1  # the connection dropped mid-write: honestly unknown
                continue
            if result.succeeded:
                # One counter node: the ticket's number, 1..tickets. Shards: the
                # count of the shard that sold it (numbers repeat across shards).
                sold.append(result.post_value)
            else:
                refused += 1

    def report(final: bool = False) -> None:
        line = {"sold": len(sold), "refused": refused, "unknown": unknown}
        if final:
            line["tickets"] = sold  # type: ignore[assignment]
        print(json.dumps(line), flush=True)

    async with aiocoord.connect(hosts, namespace=namespace) as client:
        retry = aiocoord.RetryForever(0.001)
        counter: aiocoord.AtomicLong | aiocoord.ShardedCounter
        if sharded:
            counter = aiocoord.ShardedCounter(
                client, SHARDED, upper=tickets, shards=SHARDS, retry=retry
            )
        else:
            counter = aiocoord.AtomicLong(client, COUNTER, retry=retry)
        tasks = [asyncio.create_task(buyer_loop(counter)) for _ in range(concurrency)]
        while not all(t.done() for t in tasks):
            report()
            await asyncio.wait(tasks, timeout=0.25)
        await asyncio.gather(*tasks)
    report(final=True)


# --- the organiser ------------------------------------------------------------------


async def sale(
    client: aiocoord.Client, hosts: str, namespace: str, args: argparse.Namespace, sharded: bool
) -> bool:
    """Run one sale in worker processes, then check it; True if every check held."""
    counter: aiocoord.AtomicLong | aiocoord.ShardedCounter
    if sharded:
        print(f"{SHARDS} shards (ShardedCounter):")
        counter = aiocoord.ShardedCounter(client, SHARDED, upper=args.tickets, shards=SHARDS)
        await counter.initialize()
    else:
        print("one counter node (AtomicLong):")
        counter = aiocoord.AtomicLong(client, COUNTER)
        await counter.force_set(0)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            hosts,
            namespace,
            *(["--sharded"] if sharded else []),
            "--tickets",
            str(args.tickets),
            "--buyers",
            str(args.buyers),
            "--concurrency",
            str(args.concurrency),
            "--think",
            str(args.think),
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(args.workers)
    ]
    latest: list[dict[str, int]] = [{"sold": 0, "refused": 0} for _ in procs]
    finals: list[dict[str, object]] = [{} for _ in procs]
    started = time.monotonic()

    async def follow(i: int, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = json.loads(raw)
            if "tickets" in line:
                finals[i] = line
            latest[i] = line

    async def show() -> None:
        while True:
            await asyncio.sleep(0.5)
            sold = sum(x["sold"] for x in latest)
            refused = sum(x["refused"] for x in latest)
            elapsed = time.monotonic() - started
            print(
                f"  {elapsed:5.1f} s  sold {sold:5d}  refused {refused:7,d}  "
                f"{(sold + refused) / elapsed:8,.0f} attempts/s"
            )

    ticker = asyncio.create_task(show())
    await asyncio.gather(*(follow(i, p) for i, p in enumerate(procs)))
    codes = [await p.wait() for p in procs]
    ticker.cancel()
    elapsed = time.monotonic() - started

    counter_value = (await counter.get()).post_value
    numbers = [n for f in finals for n in f.get("tickets", [])]  # type: ignore[attr-defined]
    refused = sum(int(f.get("refused", 0)) for f in finals)  # type: ignore[call-overload]
    unknown = sum(int(f.get("unknown", 0)) for f in finals)  # type: ignore[call-overload]
    print(
        f"done in {elapsed:.1f} s: {len(numbers)} sold, {refused:,} refused, "
        f"{unknown} unknown, counter at {counter_value}"
    )
    checks = {
        "all worker processes exited cleanly": all(c == 0 for c in codes),
        f"exactly {args.tickets} tickets sold (no oversell)": len(numbers) == args.tickets,
    }
    if isinstance(counter, aiocoord.ShardedCounter):
        shards = await counter.snapshot()  # every shard, read at one instant
        within = all(0 <= s.count <= s.quota for s in shards)
        adding_up = sum(s.quota for s in shards) == args.tickets
        checks[f"every shard within its quota, the quotas adding up to {args.tickets}"] = (
            within and adding_up
        )
    else:
        checks["no ticket number sold twice"] = len(set(numbers)) == len(numbers)
        checks[f"numbers are exactly 1..{args.tickets}"] = sorted(numbers) == list(
            range(1, args.tickets + 1)
        )
    checks["every sale recorded by a buyer (none lost)"] = counter_value == len(numbers) + unknown
    checks["every buyer answered"] = len(numbers) + refused + unknown == args.workers * args.buyers
    for claim, held in checks.items():
        print(f"  [{'ok' if held else 'FAILED'}] {claim}")
    return all(checks.values())


async def main(args: argparse.Namespace) -> int:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-tickets-{os.getpid()}"
        print(
            f"selling {args.tickets} tickets to {args.workers * args.buyers:,} buyers "
            f"in {args.workers} processes"
        )
        async with aiocoord.connect(hosts, namespace=namespace) as client:
            held = [
                await sale(client, hosts, namespace, args, sharded) for sharded in (False, True)
            ]
            await client.delete_recursive("/sale")
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)
    return 0 if all(held) else 1


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("HOSTS", "NAMESPACE"))
    parser.add_argument("--sharded", action="store_true", help="(worker) sell from the shards")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--tickets", type=int, default=1000)
    parser.add_argument("--buyers", type=int, default=25_000, help="buyers per worker")
    parser.add_argument("--concurrency", type=int, default=500, help="buyers at once per worker")
    parser.add_argument("--think", type=float, default=0.05, help="mean seconds before buying")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        hosts, namespace = arguments.worker
        asyncio.run(
            worker(
                hosts,
                namespace,
                arguments.sharded,
                arguments.tickets,
                arguments.buyers,
                arguments.concurrency,
                arguments.think,
            )
        )
    else:
        sys.exit(asyncio.run(main(arguments)))
