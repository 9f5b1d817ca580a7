"""The counter with one single-task process per session, and what each add costs.

``make bench``'s counter scenario runs every session of a library in one
process. Issue #30 measures the counter as applications run it: one process
per session, each with one task incrementing in a loop. This harness does that
for aiocoord (one ``python`` process per session, all pinned to the client
core) and runs Curator's ``DistributedAtomicLong`` through ``bench/java``'s
runner (one JVM, one CuratorFramework and one thread per session: Java threads
need no process of their own to run in parallel).

Beside the rate and latencies it records what each committed add cost, which
does not depend on how loaded the machine is:

- server requests per add: the servers' ``srvr`` "Received" counters around
  the whole run (connects and pings included, negligible against thousands of
  adds), divided by the counter's final value (every add that was applied);
- server writes per add: the leader's ``Zxid`` advance over the run divided
  the same way (failed writes take a zxid and a log append too);
- for aiocoord, the requests each process sent by kind (counted where the
  session layer hands a request to the socket), its socket reads (``(reads)``:
  each a wake-up of the process), its event loop's passes (``(loop passes)``:
  beyond one per read, hops between tasks) and its CPU time per add.

And who got the adds: each session's count in the window (``adds_per_session``)
and the longest add (``max``; for aiocoord also an add begun in the window and
finished after it). The rate alone rewards a mode in which one session wins
nearly every compare-and-set while the others wait seconds: p99 stays low,
because the winner's adds are nearly all of them.

Usage::

    .venv/bin/python -m bench.counter_processes [--servers sync,ensemble]
        [--sessions 1,8,32] [--libraries aiocoord,aiocoord-cas,curator]
        [--seconds 10] [--warmup 5] [--repeat 3] [--out FILE.json]

``aiocoord`` is ``AtomicLong`` with its defaults; ``aiocoord-cas`` is
``AtomicLong(combine=False)`` (plain compare-and-set under its default retry);
``aiocoord-promoted`` adds ``promoted_to_lock``; ``aiocoord-apart`` gives each
process a counter of its own (no contention: one request and one wake-up per
add, what a wake-up costs with that many processes on the client core);
``aiocoord-floor`` is ``aiocoord-apart`` with two reads of the counter before
each add: three requests and three wake-ups per add and next to no recipe
work, the least a queued add can cost (it learns its result through
ZooKeeper: its request's reply, the event of the write that applied it, the
read of its result);
``curator`` is ``DistributedAtomicLong`` with ``RetryNTimes(10, 1)`` as in
``make bench``, every session a thread of one JVM; ``curator-apart`` is the
same with one JVM per session, started together as aiocoord's processes are
(Java services that each hold one session, as Python services do). An
aiocoord mode with ``+uvloop`` (``aiocoord+uvloop``) runs its processes on
uvloop's event loop instead of asyncio's (the ``(loop passes)`` count is
asyncio's only).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiocoord
from aiocoord.testing import four_letter_word
from bench import run as bench_run

OPCODES = {
    1: "create",
    2: "delete",
    3: "exists",
    4: "get",
    5: "set",
    8: "children",
    12: "children2",
    13: "check",
    14: "multi",
    15: "create2",
    11: "ping",
}
AIOCOORD_MODES = (
    "aiocoord",
    "aiocoord-cas",
    "aiocoord-promoted",
    "aiocoord-apart",
    "aiocoord-floor",
)
OWN_COUNTER = ("aiocoord-apart", "aiocoord-floor")
"""Modes in which each process has a counter of its own."""
UVLOOP = "+uvloop"
CURATOR_APART = "curator-apart"
"""Curator with one JVM per session (``curator``: one JVM, a thread per session)."""
READY_BOUND = 120.0
"""How long the workers may take to start and connect, all of them."""


# --- the worker: one session, one task --------------------------------------------------


def _count_requests() -> collections.Counter[str]:
    """Count every request the session layer sends, by kind (this process only)."""
    from aiocoord._session import _connection

    sent: collections.Counter[str] = collections.Counter()
    submit, submit_all = _connection.Connection.submit, _connection.Connection.submit_all

    def counted_submit(self: Any, op: Any, hook: Any = None) -> Any:
        sent[OPCODES.get(op.opcode, str(op.opcode))] += 1
        return submit(self, op, hook)

    def counted_submit_all(self: Any, ops: Any) -> Any:
        for op in ops:
            sent[OPCODES.get(op.opcode, str(op.opcode))] += 1
        return submit_all(self, ops)

    # Each socket read is a wake-up of the process (on one core, a context
    # switch to it), which is what a queued add's client CPU goes on.
    buffer_updated = _connection.Connection.buffer_updated

    def counted_buffer_updated(self: Any, nbytes: int) -> None:
        sent["(reads)"] += 1
        buffer_updated(self, nbytes)

    # Each pass of the event loop runs what became ready together: passes
    # beyond one per read are hops between tasks and callbacks.
    run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def counted_run_once(self: Any) -> None:
        sent["(loop passes)"] += 1
        run_once(self)

    asyncio.base_events.BaseEventLoop._run_once = counted_run_once  # type: ignore[attr-defined]
    _connection.Connection.submit = counted_submit  # type: ignore[method-assign]
    _connection.Connection.submit_all = counted_submit_all  # type: ignore[method-assign]
    _connection.Connection.buffer_updated = counted_buffer_updated  # type: ignore[method-assign]
    return sent


async def _worker(args: argparse.Namespace) -> dict[str, Any]:
    sent = _count_requests()
    async with aiocoord.connect(args.connect) as client:
        path = f"{args.path}/counter"
        if args.mode in OWN_COUNTER:
            # Each process its own counter: no contention, one write per add.
            path = f"{path}-{os.getpid()}"
        options: dict[str, Any] = {}
        if args.mode == "aiocoord-cas":
            options["combine"] = False
        elif args.mode == "aiocoord-promoted":
            options["promoted_to_lock"] = aiocoord.PromotedToLock(f"{args.path}/counter-lock")
        counter = aiocoord.AtomicLong(client, path, **options)
        await counter.initialize(0)
        # Start together: once every process has said it is ready (32 take
        # seconds to import and connect on one core), the driver gives a
        # wall-clock instant.
        print("ready", flush=True)
        start = args.start or float(
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        )
        await asyncio.sleep(max(0.0, start - time.time()))
        late = time.time() - start
        begin = time.perf_counter()
        window_start = begin + args.warmup
        window_end = window_start + args.seconds
        latencies: list[float] = []
        applied = failures = unknown = 0
        longest = 0.0
        cpu_start = sent_start = None
        while True:
            now = time.perf_counter()
            if now >= window_end:
                break
            if cpu_start is None and now >= window_start:
                cpu_start, sent_start = time.process_time(), collections.Counter(sent)
            started = time.perf_counter()
            if args.mode == "aiocoord-floor":
                await client.get(path)
                await client.get(path)
            try:
                result = await counter.increment()
            except aiocoord.OutcomeUnknownError:
                unknown += 1
                continue
            finished = time.perf_counter()
            if result.succeeded:
                applied += 1
            if started < window_end <= finished:
                # Started in the window, done after it: a starved add shows here.
                longest = max(longest, finished - started)
            if window_start <= finished < window_end:
                if result.succeeded:
                    latencies.append(finished - started)
                else:
                    failures += 1
        cpu = time.process_time() - (cpu_start or 0.0)
        window_sent = sent - (sent_start or collections.Counter())
    return {
        "applied": applied,
        "window_ops": len(latencies),
        "latencies": latencies,
        "longest_s": max([longest, *latencies]),
        "failures": failures,
        "unknown": unknown,
        "cpu_window_s": cpu,
        "late_s": late,
        "sent_window": dict(window_sent),
    }


# --- the driver -------------------------------------------------------------------------


def _percentile(ordered: list[float], p: float) -> float:
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000 if ordered else math.nan


async def _srvr(servers: bench_run.Servers) -> tuple[int, int]:
    """(packets received, summed over members; the highest zxid among members)."""
    received = zxid = 0
    for member in servers.connect_string.split(","):
        host, port = member.rsplit(":", 1)
        text = await four_letter_word(host, int(port), "srvr")
        for line in text.splitlines():
            if line.startswith("Received:"):
                received += int(line.split(":", 1)[1])
            elif line.startswith("Zxid:"):
                zxid = max(zxid, int(line.split(":", 1)[1].strip(), 16) & 0xFFFFFFFF)
    return received, zxid


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _run_aiocoord(
    mode: str, sessions: int, args: argparse.Namespace, connect: str, path: str, pin: list[str]
) -> dict[str, Any]:
    mode, uvloop, _ = mode.partition(UVLOOP)
    command = [
        *pin,
        sys.executable,
        "-m",
        "bench.counter_processes",
        "worker",
        "--connect",
        connect,
        "--path",
        path,
        "--mode",
        mode,
        "--warmup",
        f"{args.warmup:g}",
        "--seconds",
        f"{args.seconds:g}",
        *(["--loop", "uvloop"] if uvloop else []),
    ]
    # Each worker writes its result to a file: a result line of a few hundred
    # KiB through a pipe came out cut short now and then on uvloop.
    with tempfile.TemporaryDirectory(prefix="counter-workers-") as results:
        files = [Path(results, f"{index}.json") for index in range(sessions)]
        procs = [
            await asyncio.create_subprocess_exec(
                *command,
                "--result",
                str(file),
                cwd=bench_run.REPO,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for file in files
        ]
        errors = [asyncio.ensure_future(p.stderr.read()) for p in procs]
        await _start_together(procs, errors)
        await asyncio.gather(*(p.wait() for p in procs))
        lines = []
        for proc, err, file in zip(procs, await asyncio.gather(*errors), files, strict=True):
            if proc.returncode != 0:
                raise RuntimeError(f"worker failed: {err.decode()[-1500:]}")
            lines.append(json.loads(file.read_text()))
    latencies = sorted(x for line in lines for x in line["latencies"])
    sent: collections.Counter[str] = collections.Counter()
    for line in lines:
        sent.update(line["sent_window"])
    window_ops = sum(line["window_ops"] for line in lines)
    return {
        "rate": window_ops / args.seconds,
        "p50": _percentile(latencies, 50),
        "p99": _percentile(latencies, 99),
        "max": 1000 * max(line["longest_s"] for line in lines),
        "adds_per_session": sorted(line["window_ops"] for line in lines),
        "applied": sum(line["applied"] for line in lines),
        "failures": sum(line["failures"] for line in lines),
        "unknown": sum(line["unknown"] for line in lines),
        "start_spread_ms": 1000 * max(line["late_s"] for line in lines),
        "client_cpu_us_per_add": 1e6
        * sum(line["cpu_window_s"] for line in lines)
        / max(1, window_ops),
        "sent_per_add": {k: v / max(1, window_ops) for k, v in sorted(sent.items())},
    }


async def _start_together(
    procs: list[asyncio.subprocess.Process], errors: list[asyncio.Future[bytes]]
) -> None:
    """Wait for every worker's "ready" (connected), then give them all one
    wall-clock instant to start at: 32 processes take seconds to import and
    connect on one core, and each measures its own window from that instant."""
    try:
        ready = await asyncio.wait_for(
            asyncio.gather(*(p.stdout.readline() for p in procs)),
            READY_BOUND,
        )
    except TimeoutError:
        ready = []
    if len(ready) < len(procs) or any(line.strip() != b"ready" for line in ready):
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
        outputs = await asyncio.gather(*errors)
        raise RuntimeError(f"a worker did not start: {b''.join(outputs).decode()[-1500:]}")
    start = time.time() + 0.25
    for proc in procs:
        proc.stdin.write(f"{start:.6f}\n".encode())
        proc.stdin.close()


def _curator_command(
    sessions: int, args: argparse.Namespace, connect: str, path: str, pin: list[str], java: Any
) -> list[str]:
    """The Java runner's counter scenario with ``sessions`` threads, pinned."""
    return [
        *pin,
        *java.command,
        "counter",
        str(sessions),
        f"{args.seconds:g}",
        connect,
        path,
        "--warmup",
        f"{args.warmup:g}",
    ]


async def _run_curator_apart(
    sessions: int,
    args: argparse.Namespace,
    servers: bench_run.Servers,
    path: str,
    pin: list[str],
    java: Any,
) -> dict[str, Any]:
    """Curator as the aiocoord workers run: one JVM per session, each with one
    thread, started together. Java applications that each hold one session pay
    a process of their own per session too (its start-up is outside the window).

    Each JVM first increments a counter of its own (``warmAlone`` in the Java
    runner: its compilers' warm-up), so the server's counters are read again
    once all are ready, and the record's ``srvr_before`` replaces the driver's."""
    command = [
        *_curator_command(1, args, servers.connect_string, path, pin, java),
        "--apart",
        "yes",
    ]
    cpu_before = _children_cpu()
    procs = [
        await asyncio.create_subprocess_exec(
            *command,
            cwd=bench_run.REPO,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(sessions)
    ]
    errors = [asyncio.ensure_future(p.stderr.read()) for p in procs]
    await _start_together(procs, errors)
    # Every JVM is warm and sleeping until the start instant, a quarter second away.
    before = await _srvr(servers)
    # Read while they run: a result line with every latency outgrows a pipe's buffer.
    outputs = await asyncio.gather(*(p.stdout.read() for p in procs))
    await asyncio.gather(*(p.wait() for p in procs))
    lines = []
    for proc, out, err in zip(procs, outputs, await asyncio.gather(*errors), strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"curator failed: {err.decode()[-1500:]}")
        lines.append(json.loads(out.decode().strip().splitlines()[-1]))
    latencies = sorted(ns / 1e9 for line in lines for ns in line["extra"]["latencies_ns"])
    ops = sum(line["ops"] for line in lines)
    applied = sum(line["extra"]["applied"] for line in lines)
    return {
        "rate": ops / args.seconds,
        "p50": _percentile(latencies, 50),
        "p99": _percentile(latencies, 99),
        "max": 1000 * latencies[-1] if latencies else math.nan,
        "adds_per_session": sorted(line["ops"] for line in lines),
        "applied": applied,
        "failures": sum(line["failures"] for line in lines),
        "unknown": 0,
        "conflicts_per_add": sum(line["conflicts"] for line in lines) / max(1, ops),
        "client_cpu_us_per_add_whole_run": 1e6 * (_children_cpu() - cpu_before) / max(1, applied),
        "srvr_before": before,
    }


async def _run_curator(
    sessions: int, args: argparse.Namespace, connect: str, path: str, pin: list[str], java: Any
) -> dict[str, Any]:
    command = _curator_command(sessions, args, connect, path, pin, java)
    cpu_before = _children_cpu()
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=bench_run.REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"curator failed: {err.decode()[-1500:]}")
    line = json.loads(out.decode().strip().splitlines()[-1])
    latency = next(iter(line["latency_ms"].values()), {})
    return {
        "rate": line["rate"],
        "p50": latency.get("p50", math.nan),
        "p99": latency.get("p99", math.nan),
        "max": latency.get("max", math.nan),
        "adds_per_session": line.get("ops_per_contender", []),
        "applied": line["extra"]["final_value"],
        "failures": line["failures"],
        "conflicts_per_add": line["conflicts"] / max(1, line["ops"]),
        "client_cpu_us_per_add_whole_run": 1e6
        * (_children_cpu() - cpu_before)
        / max(1, line["extra"]["final_value"]),
        "violation": line.get("violation"),
    }


async def _measure_one(
    library: str,
    sessions: int,
    args: argparse.Namespace,
    client: aiocoord.Client,
    servers: bench_run.Servers,
    pins: tuple[list[str], Any],
) -> dict[str, Any]:
    """One run of one library at one session count, in a fresh znode."""
    client_pin, java = pins
    path = f"{bench_run.ZNODE_ROOT}/c-{uuid.uuid4().hex[:8]}"
    await client.ensure_path(path)
    load = os.getloadavg()[0]
    before = await _srvr(servers)
    connect = servers.connect_string
    if library == "curator":
        record = await _run_curator(sessions, args, connect, path, client_pin, java)
    elif library == CURATOR_APART:
        record = await _run_curator_apart(sessions, args, servers, path, client_pin, java)
        before = record.pop("srvr_before")
    else:
        record = await _run_aiocoord(library, sessions, args, connect, path, client_pin)
    after = await _srvr(servers)
    counters = ["counter"]
    if library.partition(UVLOOP)[0] in OWN_COUNTER:
        counters = [name for name in await client.children(path) if name.startswith("counter-")]
    final = 0
    for name in counters:
        data, _stat = await client.get(f"{path}/{name}")
        final += int.from_bytes(data, "big", signed=True)
    if library != "curator":
        applied, unknown = record["applied"], record["unknown"]
        if not applied <= final <= applied + unknown:
            record["violation"] = f"counter reads {final} after {applied} adds ({unknown} unknown)"
    record |= {
        "library": library,
        "sessions": sessions,
        "load1": load,
        "final": final,
        "requests_per_add": (after[0] - before[0]) / max(1, final),
        "writes_per_add": (after[1] - before[1]) / max(1, final),
    }
    with contextlib.suppress(Exception):
        await bench_run.delete_tree(client, path)
    return record


def _log(record: dict[str, Any]) -> None:
    brief = {
        k: (round(v, 3) if isinstance(v, float) else v)
        for k, v in record.items()
        if k != "sent_per_add"
    }
    print(json.dumps(brief), file=sys.stderr, flush=True)
    if "sent_per_add" in record:
        sent = {k: round(v, 2) for k, v in record["sent_per_add"].items()}
        print(f"    sent per add: {sent}", file=sys.stderr, flush=True)


async def _on_server(
    name: str, args: argparse.Namespace, pins: tuple[list[str], Any], server_pin: list[str]
) -> list[dict[str, Any]]:
    records = []
    config = next(c for c in bench_run.SERVER_CONFIGS if c.name == name)
    async with (
        bench_run.start_servers(config, server_pin) as servers,
        aiocoord.connect(servers.connect_string) as client,
    ):
        await client.ensure_path(bench_run.ZNODE_ROOT)
        await bench_run.warm_up_server(client, config.warmup_s)
        for repeat in range(args.repeat):
            for sessions in args.sessions:
                for library in args.libraries:
                    record = await _measure_one(library, sessions, args, client, servers, pins)
                    record |= {"server": name, "repeat": repeat}
                    _log(record)
                    records.append(record)
    return records


async def _measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    client_pin, server_pin = bench_run.pin_commands()
    records: list[dict[str, Any]] = []
    with bench_run.build_dir() as tmp:
        notes: list[str] = []
        java = next((r for r in bench_run.java_runners(tmp, notes) if r.name == "curator"), None)
        if java is None and {"curator", CURATOR_APART} & set(args.libraries):
            raise SystemExit(f"Curator unavailable: {notes}")
        for name in args.servers:
            records += await _on_server(name, args, (client_pin, java), server_pin)
    return records


def _shares(adds: list[int]) -> str:
    """Each session's adds in the window as least / median / most: a mode can
    reach a high rate by letting one session win nearly every time."""
    if not adds:
        return "—"
    ordered = sorted(adds)
    return f"{ordered[0]:,} / {ordered[len(ordered) // 2]:,} / {ordered[-1]:,}"


def summarize(records: list[dict[str, Any]]) -> str:
    """A markdown table: per server, session count and library, the run with the
    median rate, the spread of rates, and the median of each cost."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for record in records:
        key = (record["server"], record["sessions"], record["library"])
        groups.setdefault(key, []).append(record)
    lines = [
        "| server | sessions | library | increments/s | spread | p50 ms | p99 ms | max ms "
        "| adds per session | server requests/add | server writes/add | client CPU µs/add "
        "| failed | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[len(ordered) // 2]

    for (server, sessions, library), runs in sorted(groups.items()):
        rates = [r["rate"] for r in runs]
        mid = sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]
        spread = (max(rates) - min(rates)) / max(median(rates), 1e-9)
        cpu = [r.get("client_cpu_us_per_add", math.nan) for r in runs]
        loads = [r["load1"] for r in runs]
        violation = next((r["violation"] for r in runs if r.get("violation")), None)
        longest = f"{mid['max']:,.0f}" if "max" in mid else "—"
        lines.append(
            f"| {server} | {sessions} | {library} | {mid['rate']:,.0f} | {spread:.0%} "
            f"| {mid['p50']:.2f} | {mid['p99']:.1f} "
            f"| {longest} "
            f"| {_shares(mid.get('adds_per_session', []))} "
            f"| {median([r['requests_per_add'] for r in runs]):.2f} "
            f"| {median([r['writes_per_add'] for r in runs]):.2f} "
            f"| {'—' if library.startswith('curator') else f'{median(cpu):,.0f}'} "
            f"| {sum(r['failures'] for r in runs)} "
            f"| {min(loads):.1f}-{max(loads):.1f}"
            + (f" VIOLATION {violation}" if violation else "")
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="driver", choices=("driver", "worker"))
    parser.add_argument("--servers", default="sync,ensemble")
    parser.add_argument("--sessions", default="1,8,32")
    parser.add_argument("--libraries", default="aiocoord,curator")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--report", default="", help="print the table of a --out file and stop")
    # worker options
    parser.add_argument("--connect", default="")
    parser.add_argument("--path", default="")
    parser.add_argument("--mode", default="aiocoord", choices=AIOCOORD_MODES)
    parser.add_argument("--start", type=float, default=0.0)
    parser.add_argument("--loop", default="asyncio", choices=("asyncio", "uvloop"))
    parser.add_argument("--result", default="", help="write the worker's result there")
    args = parser.parse_args()
    if args.role == "worker":
        if args.loop == "uvloop":
            import uvloop

            uvloop.install()
        profile = os.environ.get("COUNTER_PROFILE")
        if profile and not os.path.exists(profile):
            import cProfile

            Path(profile).touch()  # one worker profiles: the first to get here
            profiler = cProfile.Profile()
            outcome = profiler.runcall(asyncio.run, _worker(args))
            profiler.dump_stats(profile)
        else:
            outcome = asyncio.run(_worker(args))
        if args.result:
            Path(args.result).write_text(json.dumps(outcome))
        else:
            print(json.dumps(outcome))
        return 0
    if args.report:
        print(summarize(json.loads(Path(args.report).read_text())))
        return 0
    args.servers = [s for s in args.servers.split(",") if s]
    args.sessions = [int(s) for s in args.sessions.split(",") if s]
    args.libraries = [s for s in args.libraries.split(",") if s]
    records = asyncio.run(_measure(args))
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
