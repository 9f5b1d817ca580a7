"""The controller of a chaos run: starts everything, runs the nemesis, stops
everything it started (by PID, always), reads the end state, checks, reports.

The run, in order:

1. Move into a private network namespace if partitions are possible here
   (:class:`~chaos._nemesis.Partitioner`), before any thread or process exists.
2. Start a 3-node :class:`~aiocoord.testing.ZooKeeperEnsemble`, the fenced store
   (on 127.0.0.1) and the worker processes; wait until every worker is ready.
3. Run the nemesis's schedule for ``duration`` seconds; heal whatever is left.
4. Stop the workers (each finishes its operations), then have each compare its
   caches with the server's tree and say which of its group members are alive,
   read the group from the server, then let the workers exit. A worker that does
   not answer in time is killed and reported as hung.
5. Read the end state: counter values, the shared count, the sharded counter,
   what is left in the queues, and the recipe paths (which must empty once the
   workers' sessions are gone).
6. Close the store and the ensemble; check that no process we started is left.
7. Merge the histories, run every check, write the report.

The whole run is bounded: ``duration`` plus :data:`HARD_GRACE` at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import struct
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiocoord
from aiocoord._process import dying_with_parent
from aiocoord.testing import ZooKeeperEnsemble

from ._checks import run_checks
from ._discovery import read_discovery
from ._history import HistoryWriter, load_history, merge_files
from ._layout import (
    AQUEUE,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_LONG,
    DQUEUE,
    DUMP_STACKS,
    GROUP,
    IDQUEUE,
    ORPHAN_PATHS,
    PQUEUE,
    QUEUE,
    ROOT,
    SEMAPHORE,
    SESSION_TIMEOUT,
    SHARDED,
    SHARDED_SHARDS,
    SHARDED_UPPER,
    SHARED_COUNT,
    TREE,
    WITNESS,
)
from ._nemesis import FAULT_KINDS, Fault, Nemesis, Partitioner, schedule
from ._partitions import read_partitions
from ._report import render
from ._store import FencedStore, StoreServer
from ._worker import CACHE_SETTLE, STOP_BOUND, WorkerConfig

__all__ = ["HARD_GRACE", "RunConfig", "run"]

REPO = Path(__file__).resolve().parent.parent
HARD_GRACE = 150.0
"""Seconds the run may take beyond ``duration`` (start, stop, end reads) before it
is cut short and reported as failed."""
READY_TIMEOUT = 60.0
LATE_FAULTS = 60.0
"""How long past ``duration`` the run waits for faults that slipped behind their
schedule (on a loaded machine) before it cancels the rest."""
EXIT_TIMEOUT = 20.0
ORPHAN_WAIT = 2 * SESSION_TIMEOUT + 6.0
"""Sessions of killed workers expire within this; their ephemeral nodes go with them."""
TICK_MS = 500
VALIDATE_TIMEOUT = 5.0
"""How long the store may wait for ZooKeeper to say which lease nodes exist."""
QUEUES = ((QUEUE, False), (AQUEUE, False), (PQUEUE, True), (DQUEUE, True), (IDQUEUE, True))
"""Every queue path, and whether its items are in Curator's envelope."""
_ENVELOPE = struct.Struct(">iBi")


def unwrap(data: bytes) -> bytes:
    """The item in Curator's queue envelope (version, opcode 1, length, item,
    opcode 2), or ``data`` itself if it is not one (the check then names it)."""
    if len(data) > _ENVELOPE.size:
        version, opcode, size = _ENVELOPE.unpack_from(data)
        end = _ENVELOPE.size + size
        if (version, opcode) == (65537, 1) and end < len(data) and data[end] == 2:
            return data[_ENVELOPE.size : end]
    return data


@dataclass(frozen=True, slots=True)
class RunConfig:
    seed: int
    duration: float
    workers: int
    out: Path
    partitions: bool = True


async def lease_nodes_alive(
    client: aiocoord.Client, leases: list[tuple[int, str]]
) -> set[int] | None:
    """For the fenced store: the tokens whose lease node still exists (created at
    that zxid), read after a ``sync``; None if ZooKeeper did not answer in time,
    or if the server answering is too far behind to tell.

    ``sync`` does not make a read current on a leader that was paused and does
    not know yet that it was deposed: it answers from its own, older tree. A
    lease node missing there proves nothing unless that tree has seen the node
    made, that is, unless its parent's last child change (``pzxid``) is at
    least the node's creation zxid (the token).
    """
    alive: set[int] = set()
    try:
        async with asyncio.timeout(VALIDATE_TIMEOUT):
            await client.sync(SEMAPHORE)
            for token, node in leases:
                stat = await client.exists(node)
                if stat is not None and stat.czxid == token:
                    alive.add(token)
                    continue
                if not await _seen_since(client, node, token):
                    return None
    except (TimeoutError, aiocoord.CoordinationError):
        return None
    return alive


async def _seen_since(client: aiocoord.Client, node: str, zxid: int) -> bool:
    """Whether the server's tree has seen the children of ``node``'s parent change
    at or after ``zxid`` (the nearest existing ancestor's, if the parent is gone:
    its deletion changed the grandparent's children)."""
    path = node
    while path.count("/") > 1:
        path = path.rsplit("/", 1)[0]
        stat = await client.exists(path)
        if stat is not None:
            return stat.pzxid >= zxid
    return False


class WorkerHandle:
    """A worker process and the lines it sends back."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self._replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.ensure_future(self._read())

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc.returncode is None else None

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            with contextlib.suppress(json.JSONDecodeError):
                message = json.loads(line)
                if isinstance(message, dict):
                    self._replies.put_nowait(message)

    async def send(self, command: dict[str, Any]) -> bool:
        stdin = self.proc.stdin
        if stdin is None or self.proc.returncode is not None:
            return False
        try:
            stdin.write(json.dumps(command).encode() + b"\n")
            async with asyncio.timeout(5):
                await stdin.drain()
        except (OSError, TimeoutError):
            return False
        return True

    async def expect(self, reply: str, timeout: float) -> dict[str, Any] | None:
        """The next reply named ``reply`` (others are dropped); None after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    message = await self._replies.get()
                    if message.get("reply") == reply:
                        return message
        except TimeoutError:
            return None

    async def request(self, command: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        if not await self.send(command):
            return None
        return await self.expect(str(command["cmd"]), timeout)

    async def kill(self) -> None:
        """SIGCONT (it may be paused), SIGUSR1 (the worker writes every thread's stack to
        its stderr, raw/<name>.stderr: where it hung), and SIGKILL a second later, by
        its PID; wait for it to be reaped."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
                os.kill(self.proc.pid, DUMP_STACKS)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await self.proc.wait()
                os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self.proc.wait()
        self._reader.cancel()

    async def wait_exit(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self.proc.wait()
        except TimeoutError:
            return False
        self._reader.cancel()
        return True


class Controller:
    def __init__(self, config: RunConfig, partitioner: Partitioner) -> None:
        self.config = config
        self.partitioner = partitioner
        self.raw = config.out / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.t0 = time.monotonic()
        self.history = HistoryWriter(self.raw / "controller.jsonl", worker="controller", t0=self.t0)
        # The servers log (slf4j-simple, INFO) to their data dirs; kept in raw/.
        self.ensemble = ZooKeeperEnsemble(3, tick_time_ms=TICK_MS, log=True)
        self.fenced = FencedStore(self.history.write)
        self.store = StoreServer(self.fenced)
        self.workers: list[WorkerHandle] = []
        self.worker_problems: dict[str, str] = {}
        self.pids: dict[str, set[int]] = {"zookeeper": set(), "workers": set()}
        self._stderr: list[Any] = []

    def log(self, message: str) -> None:
        print(f"[chaos {self.history.now():7.1f}s] {message}", file=sys.stderr, flush=True)

    def track_members(self) -> None:
        for member in self.ensemble.members:
            if member.pid is not None:
                self.pids["zookeeper"].add(member.pid)

    # --- starting ---------------------------------------------------------------------

    async def start_workers(self) -> None:
        members = self.config.workers
        for index in range(self.config.workers):
            name = f"w{index}"
            worker_config = WorkerConfig(
                name=name,
                connect=self.ensemble.connect_string,
                store_port=self.store.port,
                history=str(self.raw / f"{name}.jsonl"),
                t0=self.t0,
                seed=self.config.seed,
                members=members,
            )
            stderr = (self.raw / f"{name}.stderr").open("wb")
            self._stderr.append(stderr)
            # Each worker dies with the controller (no preexec_fn: see aiocoord._process).
            command = [sys.executable, "-m", "chaos._worker", worker_config.to_json()]
            proc = await asyncio.create_subprocess_exec(
                *dying_with_parent(command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=REPO,
            )
            self.pids["workers"].add(proc.pid)
            self.workers.append(WorkerHandle(name, proc))
        replies = await asyncio.gather(*(w.expect("ready", READY_TIMEOUT) for w in self.workers))
        for worker, reply in zip(self.workers, replies, strict=True):
            if reply is None or not reply.get("ok"):
                detail = "no answer" if reply is None else reply.get("error")
                raise RuntimeError(f"worker {worker.name} did not start: {detail}")

    async def prepare(self, client: aiocoord.Client) -> None:
        await client.delete_recursive(ROOT)
        for path in (ROOT, TREE, WITNESS, f"{ROOT}/counter"):
            await client.ensure_path(path)

    # --- stopping ---------------------------------------------------------------------

    async def stop_workers(self, client: aiocoord.Client) -> None:
        """stop, final, exit: each answered in time, or the worker is killed. The group
        is read between final and exit, while the members the workers keep are alive."""
        alive = [w for w in self.workers if w.proc.returncode is None]
        for worker in alive:
            await worker.send({"cmd": "stop"})
        replies = await asyncio.gather(*(w.expect("stopped", STOP_BOUND + 15) for w in alive))
        answering = []
        for worker, reply in zip(alive, replies, strict=True):
            if reply is None:
                self.worker_problems[worker.name] = (
                    f"did not stop within {STOP_BOUND + 15:g} s: killed"
                )
                await worker.kill()
                continue
            if reply.get("hung"):
                self.worker_problems[worker.name] = (
                    f"drivers still running {STOP_BOUND:g} s after stop: {reply['hung']}"
                )
            for driver, failure in sorted((reply.get("crashed") or {}).items()):
                self.worker_problems[f"{worker.name}/{driver}"] = f"crashed: {failure}"
            answering.append(worker)
        for worker in answering:
            await worker.send({"cmd": "final"})
        finals = await asyncio.gather(*(w.expect("final", CACHE_SETTLE + 45) for w in answering))
        for worker, reply in zip(answering, finals, strict=True):
            if reply is None:
                self.worker_problems[worker.name] = "did not compare its cache in time: killed"
                await worker.kill()
                continue
            for record in reply.get("records") or []:
                self.history.write(dict(record))
        await self.read_group(client)
        await read_discovery(client, self.history)
        await read_partitions(client, self.history)
        for worker in self.workers:
            if worker.proc.returncode is None:
                await worker.send({"cmd": "exit"})
        for worker in self.workers:
            if not await worker.wait_exit(EXIT_TIMEOUT):
                self.worker_problems.setdefault(
                    worker.name, f"did not exit within {EXIT_TIMEOUT:g} s: killed"
                )
                await worker.kill()

    # --- the end state -----------------------------------------------------------------

    async def read_group(self, client: aiocoord.Client) -> None:
        """The group's members and their data, as the server has them."""
        members: dict[str, str] = {}
        try:
            async with asyncio.timeout(20):
                await client.sync(GROUP)
                for name in sorted(await client.children(GROUP)):
                    with contextlib.suppress(aiocoord.NoNodeError):
                        data, _stat = await client.get(f"{GROUP}/{name}")
                        members[name] = data.hex()
        except aiocoord.NoNodeError:
            pass  # an empty group's container was swept away
        except (TimeoutError, aiocoord.CoordinationError) as error:
            self.history.write({"type": "final", "what": "group", "error": repr(error)})
            return
        self.history.write({"type": "final", "what": "group", "members": members})

    async def read_end_state(self, client: aiocoord.Client) -> None:
        counters: Sequence[tuple[str, aiocoord.AtomicLong | aiocoord.AtomicInt]] = (
            (COUNTER_LONG, aiocoord.AtomicLong(client, COUNTER_LONG)),
            (COUNTER_INT, aiocoord.AtomicInt(client, COUNTER_INT)),
            (COUNTER_BOUNDED, aiocoord.AtomicLong(client, COUNTER_BOUNDED)),
        )
        for path, counter in counters:
            value = (await counter.get()).post_value
            self.history.write({"type": "final", "what": "counter", "path": path, "value": value})
        shared: dict[str, int | None] = {"value": None, "version": None}
        with contextlib.suppress(aiocoord.NoNodeError):
            data, stat = await client.get(SHARED_COUNT)
            value = aiocoord.Codec.INT.decode(data, SHARED_COUNT)
            shared = {"value": value, "version": stat.version}
        self.history.write({"type": "final", "what": "shared-count", **shared})
        sharded = aiocoord.ShardedCounter(
            client, SHARDED, upper=SHARDED_UPPER, shards=SHARDED_SHARDS
        )
        total = (await sharded.get()).post_value
        shards = [[s.count, s.quota] for s in await sharded.snapshot()]
        self.history.write({"type": "final", "what": "sharded", "total": total, "shards": shards})
        for path, envelope in QUEUES:
            items: list[str] = []
            try:
                names = sorted(await client.children(path))
            except aiocoord.NoNodeError:
                names = []
            for name in names:
                with contextlib.suppress(aiocoord.NoNodeError):
                    data, _stat = await client.get(f"{path}/{name}")
                    items.append((unwrap(data) if envelope else data).decode(errors="replace"))
            self.history.write({"type": "final", "what": "queue", "path": path, "items": items})
        witnessed = sorted(await client.children(WITNESS))
        self.history.write({"type": "final", "what": "witness", "nodes": witnessed})
        # Killed workers' sessions take up to a session timeout to expire.
        started = time.monotonic()
        while True:
            listing: dict[str, list[str]] = {}
            for path in ORPHAN_PATHS:
                try:
                    listing[path] = sorted(await client.children(path))
                except aiocoord.NoNodeError:
                    listing[path] = []
            if not any(listing.values()) or time.monotonic() - started > ORPHAN_WAIT:
                break
            await asyncio.sleep(0.25)
        waited = round(time.monotonic() - started, 3)
        self.history.write({"type": "final", "what": "orphans", "paths": listing, "waited": waited})

    def check_processes(self) -> None:
        """Every process we started must be gone (not even a zombie), and no child left."""
        started = set().union(*self.pids.values())
        left = [pid for pid in sorted(started) if Path(f"/proc/{pid}").exists()]
        me = os.getpid()
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:
                    children.append(int(entry.name))
        described = [f"pid {pid}" for pid in sorted(set(left) | set(children))]
        self.history.write(
            {
                "type": "final",
                "what": "processes",
                "checked": len(started),
                "left": described,
            }
        )

    # --- the run -------------------------------------------------------------------------

    async def run(self) -> str | None:
        """Run everything; the error that cut the run short, if any."""
        config = self.config
        self.history.write(
            {
                "type": "run",
                "seed": config.seed,
                "duration": config.duration,
                "workers": config.workers,
                "members": config.workers,
                "session_timeout": SESSION_TIMEOUT,
                "partitions": "yes (the leader's quorum and election ports are cut off with "
                "tc in a private network namespace)"
                if self.partitioner.available
                else "no",
                "partition_reason": self.partitioner.reason,
                "python": sys.version.split()[0],
            }
        )
        error: str | None = None
        try:
            async with asyncio.timeout(config.duration + HARD_GRACE):
                await self._run()
        except TimeoutError:
            error = f"the run did not finish within duration + {HARD_GRACE:g} s"
            self.log(error)
        except Exception as failure:
            error = f"{type(failure).__name__}: {failure}"
            self.log("the run failed:\n" + traceback.format_exc())
        finally:
            with contextlib.suppress(Exception):
                self.partitioner.heal()
            for worker in self.workers:
                await worker.kill()
            await self.store.aclose()
            for member in self.ensemble.members:
                with contextlib.suppress(OSError):
                    shutil.copy(member.log_path, self.raw / f"zookeeper-{member.myid}.log")
            await self.ensemble.aclose()
            for stream in self._stderr:
                stream.close()
        self.worker_end()
        self.check_processes()
        self.history.write(
            {
                "type": "run",
                "connect": self.ensemble.connect_string,
                "pids": {kind: sorted(pids) for kind, pids in self.pids.items()},
            }
        )
        self.history.close()
        return error

    def worker_end(self) -> None:
        self.history.write(
            {
                "type": "final",
                "what": "workers",
                "count": len(self.workers),
                "problems": self.worker_problems,
            }
        )

    async def _run(self) -> None:
        config = self.config
        self.log(f"starting a 3-node ensemble (seed {config.seed})")
        await self.ensemble.start(timeout=READY_TIMEOUT)
        self.track_members()
        await self.store.start()
        async with aiocoord.connect(self.ensemble.connect_string, session_timeout=20) as client:
            await self.prepare(client)
            self.fenced.validate = functools.partial(lease_nodes_alive, client)
            self.log(f"starting {config.workers} workers")
            await self.start_workers()
            kinds = [
                k for k in FAULT_KINDS if self.partitioner.available or k != "partition-leader"
            ]
            faults = schedule(config.seed, config.duration, SESSION_TIMEOUT, kinds)
            self.log(f"running {config.duration:g} s with {len(faults)} faults scheduled")
            nemesis = Nemesis(
                self.ensemble, self.workers, self.history, self.partitioner, SESSION_TIMEOUT
            )
            start = asyncio.get_running_loop().time()
            faulting = asyncio.ensure_future(nemesis.run(faults, start, self._on_fault))
            try:
                await asyncio.sleep(config.duration)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(LATE_FAULTS):
                        await asyncio.shield(faulting)
            finally:
                faulting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await faulting
                await nemesis.heal()
                self.track_members()
            await self.ensemble.wait_quorum(timeout=READY_TIMEOUT)
            self.log("stopping the workers")
            await self.stop_workers(client)
            self.log("reading the end state")
            await self.read_end_state(client)

    def _on_fault(self, fault: Fault) -> None:
        self.log(f"fault: {fault.kind} ({fault.length:g} s)")
        self.track_members()


async def run(config: RunConfig, partitioner: Partitioner) -> int:
    """One chaos run; the exit status (0 only if every invariant held).

    ``partitioner`` has entered its network namespace already, or says why not.
    """
    started = time.monotonic()
    controller = Controller(config, partitioner)
    error = await controller.run()
    raw = sorted(controller.raw.glob("*.jsonl"))
    merge_files(raw, config.out / "history.jsonl")
    history = load_history(raw)
    verdicts = run_checks(history)
    report = render(
        history,
        verdicts,
        run_error=error,
        out=str(config.out),
        wall=time.monotonic() - started,
    )
    (config.out / "report.txt").write_text(report)
    print(report, end="")
    return 0 if error is None and all(v.passed for v in verdicts) else 1
