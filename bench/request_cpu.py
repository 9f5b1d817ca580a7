"""Client CPU per ZooKeeper request, by operation, for interleaved builds (#30).

Rates on a shared machine are noisy; the CPU a request costs the client is
not. This starts one local ``forceSync=no`` standalone server (the server's
disk stays out of the picture) and, round after round, runs a fresh worker
process per source tree, so that builds are measured interleaved against the
same server. Each worker sends, for every operation (get, set, create, delete,
children, exists), ``REQUESTS`` requests two ways:

- ``seq``: one after the other from one task (a request's full round trip);
- ``conc``: from ``TASKS`` tasks at once (replies batch up in reads and writes);

and reports the process's CPU time (user + system, ``getrusage``)
divided by the requests: microseconds per request (``user:`` rows: user time
only, the interpreter's share; the rest is the kernel's, system calls). The medians over the
rounds are printed as a markdown table, one column per tree, with the spread.

Run::

    .venv/bin/python -m bench.request_cpu [TREE ...]

Each TREE is a directory holding an ``aiocoord`` package (a git worktree or an
exported commit: ``git archive REV | tar -x -C /tmp/before``); the default is
this checkout. ``CPU_ROUNDS`` (default 5), ``CPU_REQUESTS`` (default 4000),
``CPU_TASKS`` (default 32). ``CPU_PROFILE=seq`` or ``conc`` instead runs one
worker on this checkout under cProfile and prints its top entries.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ("get", "set", "create", "delete", "children", "exists")


# --- the worker (runs with PYTHONPATH set to one tree) -------------------------


async def _measure(connect: str, requests: int, tasks: int) -> dict[str, float]:
    import aiocoord  # the tree's, by PYTHONPATH

    results: dict[str, float] = {}
    async with aiocoord.connect(connect) as client:
        base = f"/cpu-{os.getpid()}"
        await client.create(base, b"")
        await client.create(f"{base}/node", b"x" * 64)
        for i in range(8):
            await client.create(f"{base}/node/c{i}", b"")
        payload = b"y" * 64
        node = f"{base}/node"

        ops: dict[str, Callable[[int], Awaitable[Any]]] = {
            "get": lambda i: client.get(node),
            "set": lambda i: client.set(node, payload),
            "create": lambda i: client.create(f"{base}/n{i}", payload),
            "delete": lambda i: client.delete(f"{base}/n{i}"),
            "children": lambda i: client.children(node),
            "exists": lambda i: client.exists(node),
        }

        async def run_seq(op: Callable[[int], Awaitable[Any]], start: int) -> None:
            for i in range(start, start + requests):
                await op(i)

        async def run_conc(op: Callable[[int], Awaitable[Any]], start: int) -> None:
            per = requests // tasks

            async def one(first: int) -> None:
                for i in range(first, first + per):
                    await op(i)

            await asyncio.gather(*(one(start + t * per) for t in range(tasks)))

        for mode, runner in (("seq", run_seq), ("conc", run_conc)):
            start = 0 if mode == "seq" else requests
            for name in OPERATIONS:
                op = ops[name]
                # Warm-up: caches (paths, ACL records) and the interpreter's.
                if name not in ("create", "delete"):
                    for _ in range(200):
                        await op(0)
                before = resource.getrusage(resource.RUSAGE_SELF)
                await runner(op, start)
                after = resource.getrusage(resource.RUSAGE_SELF)
                user = after.ru_utime - before.ru_utime
                system = after.ru_stime - before.ru_stime
                results[f"{mode}/{name}"] = (user + system) / requests * 1e6
                results[f"user:{mode}/{name}"] = user / requests * 1e6
        await client.delete(base, recursive=True)
    return results


def _worker(connect: str) -> None:
    requests = int(os.environ.get("CPU_REQUESTS", "4000"))
    tasks = int(os.environ.get("CPU_TASKS", "32"))
    profile = os.environ.get("CPU_PROFILE")
    if profile:
        _profiled(connect, requests, tasks, profile)
        return
    print(json.dumps(asyncio.run(_measure(connect, requests, tasks))))


def _profiled(connect: str, requests: int, tasks: int, mode: str) -> None:
    import cProfile
    import pstats

    import aiocoord

    async def main() -> None:
        async with aiocoord.connect(connect) as client:
            node = f"/cpu-prof-{os.getpid()}"
            await client.create(node, b"x" * 64)
            for _ in range(200):
                await client.get(node)
            profiler = cProfile.Profile()
            profiler.enable()
            if mode == "seq":
                for _ in range(requests):
                    await client.get(node)
                    await client.set(node, b"y" * 64)
            else:
                per = requests // tasks

                async def one() -> None:
                    for _ in range(per):
                        await client.get(node)
                        await client.set(node, b"y" * 64)

                await asyncio.gather(*(one() for _ in range(tasks)))
            profiler.disable()
            await client.delete(node)
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)

    asyncio.run(main())


# --- the driver ---------------------------------------------------------------------


async def _drive(trees: list[Path]) -> None:
    from aiocoord.testing import ZooKeeperServer

    rounds = int(os.environ.get("CPU_ROUNDS", "5"))
    load_before = os.getloadavg()
    samples: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    async with ZooKeeperServer(force_sync=False) as server:
        if os.environ.get("CPU_PROFILE"):
            env = dict(os.environ, PYTHONPATH=str(trees[0]))
            args = [sys.executable, __file__, "--worker", server.connect_string]
            await asyncio.to_thread(subprocess.run, args, env=env, check=True)
            return
        for round_no in range(rounds):
            # Alternate the order too: neither tree always goes first.
            order = trees if round_no % 2 == 0 else trees[::-1]
            for tree in order:
                env = dict(os.environ, PYTHONPATH=str(tree))
                args = [sys.executable, __file__, "--worker", server.connect_string]
                out = await asyncio.to_thread(
                    subprocess.run, args, env=env, check=True, capture_output=True, text=True
                )
                samples[tree].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {round_no + 1}/{rounds} done", file=sys.stderr)
    load_after = os.getloadavg()
    keys = [f"{mode}/{name}" for mode in ("seq", "conc") for name in OPERATIONS]
    for tree_samples in samples.values():
        # The mean over operations of each run: steadier than any one cell.
        for sample in tree_samples:
            for prefix in ("", "user:"):
                for mode in ("seq", "conc"):
                    values = [sample[f"{prefix}{mode}/{name}"] for name in OPERATIONS]
                    sample[f"{prefix}{mode}/mean"] = statistics.mean(values)
    keys += ["seq/mean", "conc/mean", "user:seq/mean", "user:conc/mean"]
    names = [str(tree) for tree in trees]
    ratio_head = " ratio, paired by round |" if len(trees) == 2 else ""
    print("| request | " + " | ".join(names) + " |" + ratio_head)
    print("|---" * (len(trees) + 1 + (len(trees) == 2)) + "|")
    for key in keys:
        cells = []
        for tree in trees:
            values = [sample[key] for sample in samples[tree]]
            median = statistics.median(values)
            cells.append(f"{median:.1f} ({min(values):.1f}-{max(values):.1f})")
        ratio = ""
        if len(trees) == 2:
            # Each round's two workers ran back to back: their ratio cancels the
            # load that moved between rounds. The median of those, and their range.
            first, second = (samples[tree] for tree in trees)
            pairs = [b[key] / a[key] for a, b in zip(first, second, strict=True)]
            ratio = f" {statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f}) |"
        print(f"| {key} | " + " | ".join(cells) + " |" + ratio)
    print(
        f"\nCPU µs per request, median of {rounds} interleaved rounds (min-max);"
        f" load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        _worker(sys.argv[2])
        return
    trees = [Path(arg).resolve() for arg in sys.argv[1:]] or [ROOT]
    for tree in trees:
        if not (tree / "aiocoord" / "__init__.py").exists():
            raise SystemExit(f"{tree} holds no aiocoord package")
    started = time.monotonic()
    asyncio.run(_drive(trees))
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
