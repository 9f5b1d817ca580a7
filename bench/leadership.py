"""Balanced leadership (#29): how many of 200 elections each of 20 processes leads,
and how long LeaderElectionGroup takes to spread them.

``.venv/bin/python -m bench.leadership [--processes 20] [--elections 200] [--repeat 3]``

On a fresh ``forceSync=yes`` server, one worker process joins every election
first and leads them all (the "piled on the oldest process" start); then the
other workers join at once. Each worker is an OS process with one client and
one LeaderElectionGroup over the same paths. The controller reads every
election's leader (two pipelined round trips) every 50 ms and records when the
fleet has *settled*: every election led and no process above
``ceil(elections / processes)``, staying so until the end of the run (a
``--hold`` seconds window after settling, in which any leader change counts as
a flap). The same start with ``balance=False`` is the baseline.
Bounded: every run gives up after ``--limit`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import aiocoord
from aiocoord.testing import ZooKeeperServer

RESULTS = Path(__file__).resolve().parent / "results"
BASE = "/bench-leadership"


def paths(elections: int) -> list[str]:
    return [f"{BASE}/e{i:03d}" for i in range(elections)]


async def worker(connect: str, name: str, elections: int, balance: bool) -> None:
    async with aiocoord.connect(connect) as client:
        group = aiocoord.LeaderElectionGroup(
            client, paths(elections), participant_id=name, balance=balance
        )

        async def term(_path: str) -> None:
            await asyncio.Event().wait()

        def dump() -> None:  # kill -USR1 <worker>: its tasks' stacks, for a stuck run
            with open(f"/tmp/aiocoord-leadership-{name}.txt", "w") as out:
                for task in asyncio.all_tasks():
                    task.print_stack(limit=12, file=out)

        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)
        print("READY", flush=True)
        await group.run(term)


async def leaders(client: aiocoord.Client, elections: int) -> dict[str, str | None]:
    """Each election's leader id, as an observer sees it."""
    observers = [aiocoord.LeaderObserver(client, p) for p in paths(elections)]
    found = await asyncio.gather(*(o.leader() for o in observers))
    return {o.path: (p.id if p else None) for o, p in zip(observers, found, strict=True)}


async def spawn(
    connect: str, name: str, elections: int, balance: bool
) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.leadership",
        "--worker",
        connect,
        name,
        str(elections),
        "1" if balance else "0",
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"READY"
    return proc


async def one_run(
    processes: int, elections: int, balance: bool, hold: float, limit: float
) -> dict[str, object]:
    fair = math.ceil(elections / processes)
    async with ZooKeeperServer(force_sync=True) as server:
        connect = server.connect_string
        async with aiocoord.connect(connect) as client:
            procs = [await spawn(connect, "w00", elections, balance)]
            start = time.perf_counter()
            while True:  # the first worker leads everything
                now = await leaders(client, elections)
                if all(v == "w00" for v in now.values()):
                    break
                if time.perf_counter() - start > limit:
                    raise TimeoutError("the first worker did not lead every election")
                await asyncio.sleep(0.05)
            procs += await asyncio.gather(
                *(spawn(connect, f"w{i:02d}", elections, balance) for i in range(1, processes))
            )
            joined = time.perf_counter()
            settled_at: float | None = None
            last: dict[str, str | None] = {}
            flaps = 0
            changes = 0
            samples = 0
            max_seen = elections
            while True:
                now = await leaders(client, elections)
                samples += 1
                moved = sum(1 for k, v in now.items() if last.get(k) != v) if last else 0
                changes += moved
                last = now
                counts = Counter(v for v in now.values() if v is not None)
                top = max(counts.values()) if counts else 0
                ok = len(counts) and all(v is not None for v in now.values()) and top <= fair
                elapsed = time.perf_counter() - joined
                if settled_at is None and ok:
                    settled_at = elapsed
                elif settled_at is not None:
                    flaps += moved
                    if not ok:
                        settled_at = None  # it came undone: not settled yet
                max_seen = top
                if settled_at is not None and elapsed - settled_at >= hold:
                    break
                if elapsed > limit:
                    break
                await asyncio.sleep(0.05)
            for proc in procs:
                proc.terminate()
            await asyncio.gather(*(p.wait() for p in procs))
            counts = Counter(v for v in last.values() if v is not None)
            return {
                "balance": balance,
                "processes": processes,
                "elections": elections,
                "fair_share": fair,
                "settled": settled_at is not None,
                "settle_s": settled_at,
                "max_leaders": max(counts.values()) if counts else 0,
                "min_leaders": min(counts.get(f"w{i:02d}", 0) for i in range(processes)),
                "leaderless": sum(1 for v in last.values() if v is None),
                "leader_changes_after_join": changes,
                "flaps_after_settling": flaps if settled_at is not None else None,
                "samples": samples,
                "max_seen_last": max_seen,
            }


async def main_async(args: argparse.Namespace) -> None:
    runs = []
    for balance in (True, False):
        for _ in range(args.repeat if balance else 1):
            # The baseline never settles: a snapshot after 10 s is enough.
            limit = args.limit if balance else min(args.limit, 10.0)
            result = await one_run(args.processes, args.elections, balance, args.hold, limit)
            print(json.dumps(result), flush=True)
            runs.append(result)
    balanced = [r for r in runs if r["balance"]]
    settle = [r["settle_s"] for r in balanced if r["settle_s"] is not None]
    summary = {
        "runs": runs,
        "settle_s_median": statistics.median(settle) if settle else None,
        "settle_s_spread": [min(settle), max(settle)] if settle else None,
    }
    out = RESULTS / "2026-11-25-leadership.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        connect, name, elections, balance = sys.argv[2:6]
        asyncio.run(worker(connect, name, int(elections), balance == "1"))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--elections", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--limit", type=float, default=120.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
