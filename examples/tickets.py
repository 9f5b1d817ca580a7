"""A ticket sale: 1000 tickets, 100,000 buyers, several processes, no oversell.

The main process starts an embedded ZooKeeper (or uses AIOCOORD_ZK), then
launches worker processes. Each worker runs many concurrent buyers on one
client; a buyer gets a ticket only if a bounded increment of the shared
counter succeeds (``sold.increment(upper=TICKETS)``), and the value it
returns is the ticket's number. The main process prints a live summary while
the sale runs, then proves the outcome: exactly 1000 tickets sold, each
number sold once, every sale recorded by a buyer, the counter at 1000.

Run: make demo   (or: python examples/tickets.py [--workers 4 --buyers 25000])

Expected output with the default arguments and AIOCOORD_ZK set (run alone, it
first says where its embedded ZooKeeper listens). The ``...`` line stands for
the live summary, a line every half second; ``...`` within a line, for the time:

    selling 1000 tickets to 100,000 buyers in 4 processes
    ...
    done in ... s: 1000 sold, 99,000 refused, 0 unknown, counter at 1000
      [ok] all worker processes exited cleanly
      [ok] exactly 1000 tickets sold (no oversell)
      [ok] no ticket number sold twice
      [ok] numbers are exactly 1..1000
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
    hosts: str, namespace: str, tickets: int, buyers: int, concurrency: int, think: float
) -> None:
    sold: list[int] = []
    refused = unknown = 0
    queue = iter(range(buyers))

    async def buyer_loop(counter: aiocoord.AtomicLong) -> None:
        nonlocal refused, unknown
        for _buyer in queue:  # each buyer tries once, after a moment's thought
            await asyncio.sleep(random.expovariate(1 / think))
            try:
                result = await counter.increment(upper=tickets)
            except aiocoord.OutcomeUnknownError:
                unknown += 1  # the connection dropped mid-write: honestly unknown
                continue
            if result.succeeded:
                sold.append(result.post_value)  # the ticket's number, 1..tickets
            else:
                refused += 1

    def report(final: bool = False) -> None:
        line = {"sold": len(sold), "refused": refused, "unknown": unknown}
        if final:
            line["tickets"] = sold  # type: ignore[assignment]
        print(json.dumps(line), flush=True)

    async with aiocoord.connect(hosts, namespace=namespace) as client:
        counter = aiocoord.AtomicLong(client, COUNTER, retry=aiocoord.RetryForever(0.001))
        tasks = [asyncio.create_task(buyer_loop(counter)) for _ in range(concurrency)]
        while not all(t.done() for t in tasks):
            report()
            await asyncio.wait(tasks, timeout=0.25)
        await asyncio.gather(*tasks)
    report(final=True)


# --- the organiser ------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-tickets-{os.getpid()}"
        async with aiocoord.connect(hosts, namespace=namespace) as client:
            await aiocoord.AtomicLong(client, COUNTER).force_set(0)
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--worker",
                    hosts,
                    namespace,
                    "--tickets",
                    str(args.tickets),
                    "--buyers",
                    str(args.buyers),
                    "--concurrency",
                    str(args.concurrency),
                    stdout=asyncio.subprocess.PIPE,
                )
                for _ in range(args.workers)
            ]
            total_buyers = args.workers * args.buyers
            print(
                f"selling {args.tickets} tickets to {total_buyers:,} buyers "
                f"in {args.workers} processes"
            )
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

            counter_value = (await aiocoord.AtomicLong(client, COUNTER).get()).post_value
            numbers = [n for f in finals for n in f.get("tickets", [])]  # type: ignore[attr-defined]
            refused = sum(int(f.get("refused", 0)) for f in finals)  # type: ignore[call-overload]
            unknown = sum(int(f.get("unknown", 0)) for f in finals)  # type: ignore[call-overload]
            await client.delete_recursive("/sale")
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)

    print(
        f"done in {elapsed:.1f} s: {len(numbers)} sold, {refused:,} refused, "
        f"{unknown} unknown, counter at {counter_value}"
    )
    checks = {
        "all worker processes exited cleanly": all(c == 0 for c in codes),
        f"exactly {args.tickets} tickets sold (no oversell)": len(numbers) == args.tickets,
        "no ticket number sold twice": len(set(numbers)) == len(numbers),
        f"numbers are exactly 1..{args.tickets}": sorted(numbers)
        == list(range(1, args.tickets + 1)),
        "every sale recorded by a buyer (none lost)": counter_value == len(numbers) + unknown,
        "every buyer answered": len(numbers) + refused + unknown == total_buyers,
    }
    for claim, held in checks.items():
        print(f"  [{'ok' if held else 'FAILED'}] {claim}")
    return 0 if all(checks.values()) else 1


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("HOSTS", "NAMESPACE"))
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
                arguments.tickets,
                arguments.buyers,
                arguments.concurrency,
                arguments.think,
            )
        )
    else:
        sys.exit(asyncio.run(main(arguments)))
