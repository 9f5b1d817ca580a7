"""The partitioner beside kazoo's SetPartitioner, on the same server, side by side.

For each change (a member joins, a member leaves, a member's session expires and
its process is gone) and each library: MEMBERS members (one client, one session
each), ITEMS items, ``settle`` / ``time_boundary`` SETTLE seconds. Once every
member is stable, the change is made, and a poll (every POLL_S) times how long
until every member is stable again with every item owned once; the items whose
owner changed are counted. Each trial runs in a subprocess of its own (one
library at a time, alternating), REPEAT trials per change and library; the
report gives the median with the spread (min-max).

The server is fresh, standalone, ``forceSync=yes`` (as production runs it),
``tickTime=2000``; with ``--nosync`` also ``forceSync=no``. Writes
``bench/results/<date>-partitioner.{json,md}``. Run with
``.venv/bin/python -m bench.partition`` (needs the bench extra: kazoo).

"Stable": aiocoord, every member's ``assignment.stable``; kazoo, every member's
partitioner in its ``acquired`` state (each driven by a thread of its own, as
kazoo's documentation shows: ``release_set()`` when asked, ``wait_for_acquire()``
while allocating).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
MEMBERS = 4
ITEMS = [f"item-{n:02}" for n in range(32)]
SETTLE = 1.0
REPEAT = 3
POLL_S = 0.005
BOUND_S = 60.0
CHANGES = ("join", "leave", "expiry")
LIBRARIES = ("aiocoord", "kazoo")
TICK_TIME_MS = 2000


def _moved(before: dict[str, str], after: dict[str, str]) -> int:
    return sum(1 for item in ITEMS if before.get(item) != after.get(item))


def _complete(owned: list[frozenset[str]]) -> bool:
    return sum(map(len, owned)) == len(ITEMS) and frozenset().union(*owned) == frozenset(ITEMS)


# --- aiocoord -------------------------------------------------------------------------------


async def _aiocoord_trial(connect: str, path: str, change: str) -> dict[str, Any]:
    import aiocoord
    from aiocoord.testing import expire_session

    clients = [aiocoord.connect(connect, session_timeout=10) for _ in range(MEMBERS)]
    await asyncio.gather(*(c.start() for c in clients))
    parts = [
        aiocoord.Partitioner(c, path, ITEMS, participant_id=f"m{i}", settle=SETTLE)
        for i, c in enumerate(clients)
    ]
    first = parts[:-1] if change == "join" else parts

    def owners(members: list[aiocoord.Partitioner]) -> dict[str, str]:
        return {item: p.participant_id for p in members for item in p.owned}

    async def stable(members: list[aiocoord.Partitioner]) -> None:
        # Polled, as kazoo's members are: both sides are timed the same way.
        async with asyncio.timeout(BOUND_S):
            while not (  # noqa: ASYNC110
                all(p.assignment.stable for p in members) and _complete([p.owned for p in members])
            ):
                await asyncio.sleep(POLL_S)

    try:
        await asyncio.gather(*(p.start() for p in first))
        await stable(first)
        before = owners(first)
        started = time.perf_counter()
        if change == "join":
            await parts[-1].start()
            after_members = parts
        elif change == "leave":
            await parts[-1].aclose()
            after_members = parts[:-1]
        else:
            await expire_session(clients[-1])
            after_members = parts[:-1]
            # The process is gone: its partitioner takes no further part.
            await parts[-1].aclose()
        await stable(after_members)
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "moved": _moved(before, owners(after_members))}
    finally:
        for part in parts:
            await part.aclose()
        for client in clients:
            await client.aclose()


# --- kazoo --------------------------------------------------------------------------------


class _KazooMember:
    """One kazoo SetPartitioner with a thread driving it."""

    def __init__(self, client: Any, path: str, identifier: str) -> None:
        self.client = client
        self.identifier = identifier
        self.partitioner = client.SetPartitioner(
            path, set=ITEMS, identifier=identifier, time_boundary=SETTLE
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drive, daemon=True)
        self.thread.start()

    def _drive(self) -> None:
        p = self.partitioner
        while not self.stop.is_set():
            if p.failed:
                return
            if p.release:
                p.release_set()
            elif p.allocating:
                p.wait_for_acquire(timeout=0.05)
            else:
                time.sleep(POLL_S)

    @property
    def stable(self) -> bool:
        return bool(self.partitioner.acquired)

    @property
    def owned(self) -> frozenset[str]:
        p = self.partitioner
        return frozenset(p) if p.acquired else frozenset()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(5)
        if not self.partitioner.failed:
            self.partitioner.finish()


def _kazoo_trial(connect: str, path: str, change: str) -> dict[str, Any]:
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    clients = [KazooClient(hosts=connect, timeout=10.0) for _ in range(MEMBERS)]
    for client in clients:
        client.start(timeout=15)
    count = MEMBERS - 1 if change == "join" else MEMBERS
    members = [_KazooMember(clients[i], path, f"m{i}") for i in range(count)]

    def owners(group: list[_KazooMember]) -> dict[str, str]:
        return {item: m.identifier for m in group for item in m.owned}

    def stable(group: list[_KazooMember]) -> None:
        deadline = time.monotonic() + BOUND_S
        while not (all(m.stable for m in group) and _complete([m.owned for m in group])):
            if time.monotonic() > deadline:
                raise TimeoutError("kazoo members never became stable")
            time.sleep(POLL_S)

    try:
        stable(members)
        before = owners(members)
        started = time.perf_counter()
        if change == "join":
            members.append(_KazooMember(clients[-1], path, f"m{MEMBERS - 1}"))
            after_members = members
        elif change == "leave":
            members[-1].finish()
            after_members = members[:-1]
        else:
            victim = clients[-1]
            killer = KazooClient(hosts=connect, client_id=victim.client_id, timeout=10.0)
            killer.start(timeout=15)
            killer.stop()
            killer.close()
            members[-1].stop.set()  # the process is gone
            after_members = members[:-1]
        stable(after_members)
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "moved": _moved(before, owners(after_members))}
    finally:
        for member in members:
            member.stop.set()
        for client in clients:
            client.stop()
            client.close()


# --- driving ------------------------------------------------------------------------------


def _trial(library: str, connect: str, path: str, change: str) -> dict[str, Any]:
    """One trial in a subprocess of its own; its result (or error) as a dict."""
    command = [sys.executable, "-m", "bench.partition", "--trial", library, connect, path, change]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BOUND_S * 3)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def _run_on(force_sync: bool, repeat: int) -> dict[str, Any]:
    from aiocoord.testing import ZooKeeperServer

    results: dict[str, Any] = {}
    async with ZooKeeperServer(force_sync=force_sync, tick_time_ms=TICK_TIME_MS) as server:
        for change in CHANGES:
            for library in LIBRARIES:
                results.setdefault(change, {})[library] = []
            for trial in range(repeat):
                for library in LIBRARIES:  # side by side: alternating, same server
                    path = f"/bench-partition/{library}-{change}-{trial}"
                    outcome = await asyncio.to_thread(
                        _trial, library, server.connect_string, path, change
                    )
                    print(f"  {change:6} {library:8} trial {trial + 1}: {outcome}", flush=True)
                    results[change][library].append(outcome)
    return results


def _summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    good = [t for t in trials if "seconds" in t]
    if not good:
        return {"error": [t.get("error") for t in trials]}
    seconds = [t["seconds"] for t in good]
    moved = [t["moved"] for t in good]
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "moved_median": statistics.median(moved),
        "moved_min": min(moved),
        "moved_max": max(moved),
        "trials": len(good),
        "failed": len(trials) - len(good),
    }


def _table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| change | library | to stable, median (min-max) | items moved, median (min-max) |",
        "| --- | --- | --- | --- |",
    ]
    for change in CHANGES:
        for library in LIBRARIES:
            s = _summary(results[change][library])
            if "error" in s:
                lines.append(f"| {change} | {library} | failed: {s['error']} | |")
                continue
            lines.append(
                f"| {change} | {library} | {s['median_s']:.3f} s "
                f"({s['min_s']:.3f}-{s['max_s']:.3f}) | {s['moved_median']:g} "
                f"({s['moved_min']}-{s['moved_max']}) |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial", nargs=4, metavar=("LIBRARY", "CONNECT", "PATH", "CHANGE"))
    parser.add_argument("--nosync", action="store_true", help="also on a forceSync=no server")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--tag", default="partitioner")
    args = parser.parse_args()
    if args.trial:
        library, connect, path, change = args.trial
        if library == "aiocoord":
            outcome = asyncio.run(_aiocoord_trial(connect, path, change))
        else:
            outcome = _kazoo_trial(connect, path, change)
        print(json.dumps(outcome))
        return
    record: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "members": MEMBERS,
        "items": len(ITEMS),
        "settle_s": SETTLE,
        "repeat": args.repeat,
        "servers": {},
    }
    configs = [("sync", True)] + ([("nosync", False)] if args.nosync else [])
    for name, force_sync in configs:
        print(f"server: forceSync={'yes' if force_sync else 'no'}", flush=True)
        record["servers"][name] = asyncio.run(_run_on(force_sync, args.repeat))
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"{record['date']}-{args.tag}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [f"# Partitioner beside kazoo's SetPartitioner ({record['date']})", ""]
    for name, results in record["servers"].items():
        lines += [f"## forceSync={'yes' if name == 'sync' else 'no'}", "", *_table(results), ""]
    stem.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
