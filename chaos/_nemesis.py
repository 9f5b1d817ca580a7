"""The nemesis: a seeded schedule of faults, and how each is injected and healed.

Faults come one at a time, so that the ensemble keeps (or quickly regains) its
quorum and every fault's effect can be told apart. The schedule is a list of
cycles; each cycle holds every kind of fault once, in a seeded random order, so
even a short run injects each kind. Kinds:

- ``kill-leader`` / ``kill-follower``: SIGKILL an ensemble member, wait, start it again.
- ``pause-member``: SIGSTOP a member (the leader or a follower) for longer than
  the session timeout, then SIGCONT.
- ``partition-leader``: cut the leader off from its followers (see
  :class:`Partitioner`), then heal; only where the machine allows it.
- ``pause-worker``: SIGSTOP a worker process for longer than its session
  timeout, then SIGCONT: the classic paused holder.
- ``expire-session`` / ``drop-connection``: a worker expires one of its own
  sessions (``aiocoord.testing.expire_session``) or cuts one of its connections
  (``drop_connection``), when the controller asks.
- ``stall-client``: a worker holds one client's proxies (``TcpProxy.hold``) for
  longer than the session timeout: that client's network drops everything, both
  ways, while its process and the servers run on; the session expires on the
  server, and the client must tell its holders before anyone else can take over.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer

from ._history import HistoryWriter

__all__ = [
    "FAULT_KINDS",
    "Fault",
    "Nemesis",
    "Partitioner",
    "WorkerTarget",
    "schedule",
]

FAULT_KINDS = (
    "kill-leader",
    "kill-follower",
    "pause-member",
    "partition-leader",
    "pause-worker",
    "expire-session",
    "drop-connection",
    "stall-client",
)
WORKER_COMMANDS = {"expire-session": "expire", "drop-connection": "drop", "stall-client": "stall"}
"""The faults a worker carries out on its own client, and the command that asks for each."""
WARMUP = 2.0
"""Seconds of calm at the start, for the workers to get going."""
TAIL = 2.0
"""Seconds of calm at the end, before the workers are stopped."""
RECOVERY = 1.5
"""Seconds a fault is expected to take beyond its length (restart, re-election, reconnects)."""
REPLY_TIMEOUT = 30.0
"""How long the controller waits for a worker to carry out a fault on its client."""
QUORUM_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Fault:
    """One scheduled fault: when (seconds after the run starts), what, for how long."""

    at: float
    kind: str
    length: float
    """Seconds the fault lasts (down, paused, cut off); 0 for instant ones."""
    pick: int
    """A seeded number that chooses the target."""


def fault_length(kind: str, session_timeout: float, rng: random.Random) -> float:
    """How long a fault of ``kind`` lasts: pauses and partitions outlast the session."""
    if kind == "pause-worker":
        # Long enough past the expiry for others to take over what it held.
        return round(session_timeout + rng.uniform(1.5, 2.5), 3)
    if kind == "stall-client":
        # Past the expiry, so that others take over while the client is cut off.
        return round(session_timeout + rng.uniform(1.0, 2.0), 3)
    if kind in ("pause-member", "partition-leader"):
        return round(session_timeout + rng.uniform(0.5, 1.0), 3)
    if kind in ("kill-leader", "kill-follower"):
        return round(rng.uniform(1.0, 2.0), 3)
    return 0.0


def schedule(
    seed: int, duration: float, session_timeout: float, kinds: Sequence[str] = FAULT_KINDS
) -> list[Fault]:
    """The faults of a run, in order: cycles of every kind (each in a seeded order),
    as many as fit before ``duration``; a kind too long for the time left is passed
    over for a shorter one."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = WARMUP
    end = duration - TAIL
    while True:
        cycle = list(kinds)
        rng.shuffle(cycle)
        placed = 0
        for kind in cycle:
            length = fault_length(kind, session_timeout, rng)
            if at + length + RECOVERY > end:
                continue
            faults.append(Fault(round(at, 3), kind, length, rng.randrange(1 << 30)))
            at += length + RECOVERY + rng.uniform(0.3, 1.0)
            placed += 1
        if not placed:
            return faults


# --- partitions -------------------------------------------------------------------------

_CLONE_NEWNET = 0x40000000


class Partitioner:
    """Cuts ports off on the loopback interface of a private network namespace.

    The servers of an ensemble all listen on 127.0.0.1 (the launcher puts every
    member there), so they cannot be split across network namespaces, each of
    which has its own loopback. Instead the whole run moves into one private
    namespace (``unshare(CLONE_NEWNET)`` as root, before anything starts), where
    traffic control can starve chosen ports without touching the rest of the
    machine: packets to or from them go to an HTB class limited to 8 bit/s with a
    one-packet queue, so they are as good as dropped. Cutting the leader's quorum
    and election ports separates it from its followers; its client port stays
    reachable, so its clients see a server that stops serving.
    """

    def __init__(self) -> None:
        self.available = False
        self.reason = "not set up"
        self._tc = shutil.which("tc") or "/usr/sbin/tc"
        self._cut = False

    def enter_namespace(self) -> None:
        """Move this process into a private network namespace (call before any thread
        or child process exists) and check that ports can be cut there."""
        if os.geteuid() != 0:
            self.reason = "not root: a private network namespace needs CAP_SYS_ADMIN"
            return
        if not os.path.exists(self._tc):
            self.reason = "no `tc` (iproute2) to cut ports with"
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(_CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                self.reason = f"unshare(CLONE_NEWNET) failed: {os.strerror(errno)}"
                return
        except (OSError, AttributeError) as error:
            self.reason = f"unshare unavailable: {error}"
            return
        ip = shutil.which("ip") or "/usr/sbin/ip"
        for command in ([ip, "link", "set", "lo", "up"],):
            if (problem := _run(command)) is not None:
                self.reason = f"in the new namespace, {problem}"
                return
        problem = self._install() or self._remove()
        if problem is not None:
            self.reason = f"traffic control cannot cut ports here: {problem}"
            return
        self.available, self.reason = True, ""

    def _install(self, ports: Sequence[int] = ()) -> str | None:
        tc = self._tc
        commands = [
            [tc, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"],
            [tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb",
             "rate", "10gbit"],
            [tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb",
             "rate", "8bit", "ceil", "8bit"],
            [tc, "qdisc", "add", "dev", "lo", "parent", "1:20", "handle", "20:", "pfifo",
             "limit", "1"],
        ]  # fmt: skip
        for port in ports:
            for field in ("dport", "sport"):
                commands.append(
                    [tc, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip",
                     "prio", "1", "u32", "match", "ip", field, str(port), "0xffff",
                     "flowid", "1:20"]
                )  # fmt: skip
        for command in commands:
            if (problem := _run(command)) is not None:
                return problem
        return None

    def _remove(self) -> str | None:
        return _run([self._tc, "qdisc", "del", "dev", "lo", "root"])

    def cut(self, ports: Sequence[int]) -> None:
        """Starve every packet to or from ``ports``."""
        problem = self._install(ports)
        self._cut = True
        if problem is not None:
            raise RuntimeError(problem)

    def heal(self) -> None:
        """Let everything through again (idempotent)."""
        if self._cut:
            self._cut = False
            self._remove()


def _run(command: list[str]) -> str | None:
    """Run a short command; None if it worked, else what went wrong."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{' '.join(command)}: {error}"
    if done.returncode != 0:
        return f"`{' '.join(command)}` failed: {done.stderr.strip()[:200]}"
    return None


def quorum_ports(member: ZooKeeperServer) -> list[int]:
    """A member's quorum and election ports, from the ``zoo.cfg`` the launcher wrote."""
    prefix = f"server.{member.myid}="
    for line in (member.data_dir / "zoo.cfg").read_text().splitlines():
        if line.startswith(prefix):
            _host, peer, election = line[len(prefix) :].split(":")[:3]
            return [int(peer), int(election)]
    raise RuntimeError(f"no {prefix} line in {member.data_dir / 'zoo.cfg'}")


# --- injecting ------------------------------------------------------------------------------


class WorkerTarget(Protocol):
    """What the nemesis needs of a worker: its process and a way to ask it things."""

    name: str

    @property
    def pid(self) -> int | None: ...

    async def request(self, command: dict[str, Any], timeout: float) -> dict[str, Any] | None: ...


class Nemesis:
    """Injects scheduled faults into the ensemble and the workers, and records each."""

    def __init__(
        self,
        ensemble: ZooKeeperEnsemble,
        workers: Sequence[WorkerTarget],
        history: HistoryWriter,
        partitioner: Partitioner,
        session_timeout: float,
    ) -> None:
        self._ensemble = ensemble
        self._workers = workers
        self._history = history
        self._partitioner = partitioner
        self._session_timeout = session_timeout
        self._paused_members: set[ZooKeeperServer] = set()
        self._killed_members: set[ZooKeeperServer] = set()
        self._paused_workers: set[int] = set()

    async def run(
        self,
        faults: Sequence[Fault],
        start: float,
        after: Callable[[Fault], object] = lambda _fault: None,
    ) -> None:
        """Inject ``faults`` at their times (``start`` is the run's t=0 on the event
        loop's clock); each one is healed before the next, then ``after`` is called
        with it.

        A fault that has slipped behind its time (a loaded machine recovers
        slowly) is injected late rather than left out, so that every run covers
        every kind its schedule holds; the controller bounds how long past the
        run's duration it waits for the last ones.
        """
        loop = asyncio.get_running_loop()
        for fault in faults:
            delay = start + fault.at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.inject(fault)
            after(fault)

    async def inject(self, fault: Fault) -> None:
        started = self._history.now()
        record: dict[str, Any] = {
            "type": "fault",
            "t": started,
            "kind": fault.kind,
            "length": fault.length,
            "ok": True,
        }
        actions: dict[str, Callable[[Fault, dict[str, Any]], Awaitable[None]]] = {
            "kill-leader": self._kill_leader,
            "kill-follower": self._kill_follower,
            "pause-member": self._pause_member,
            "partition-leader": self._partition_leader,
            "pause-worker": self._pause_worker,
            **dict.fromkeys(WORKER_COMMANDS, self._ask_worker),
        }
        try:
            async with asyncio.timeout(fault.length + QUORUM_TIMEOUT + REPLY_TIMEOUT):
                await actions[fault.kind](fault, record)
        except Exception as error:
            record |= {"ok": False, "error": f"{type(error).__name__}: {error}"[:300]}
        finally:
            with contextlib.suppress(Exception):
                await self.heal()
        record["end"] = self._history.now()
        self._history.write(record)

    async def heal(self) -> None:
        """Undo whatever is still in effect: resume, restart, reconnect, continue."""
        self._partitioner.heal()
        for pid in list(self._paused_workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self._paused_workers.discard(pid)
        for member in list(self._paused_members):
            if member.is_running:
                member.resume()
            self._paused_members.discard(member)
        for member in list(self._killed_members):
            await member.start(timeout=QUORUM_TIMEOUT)
            self._killed_members.discard(member)

    async def _kill_leader(self, fault: Fault, record: dict[str, Any]) -> None:
        await self._kill(await self._ensemble.leader(timeout=QUORUM_TIMEOUT), fault, record)

    async def _kill_follower(self, fault: Fault, record: dict[str, Any]) -> None:
        await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)
        followers = await self._ensemble.followers()
        if not followers:
            raise RuntimeError("no follower to kill")
        await self._kill(followers[fault.pick % len(followers)], fault, record)

    async def _kill(self, member: ZooKeeperServer, fault: Fault, record: dict[str, Any]) -> None:
        record["target"] = f"member {member.myid} (pid {member.pid})"
        self._killed_members.add(member)
        await member.kill()
        await asyncio.sleep(fault.length)
        await member.start(timeout=QUORUM_TIMEOUT)
        self._killed_members.discard(member)
        await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)

    async def _pause_member(self, fault: Fault, record: dict[str, Any]) -> None:
        leader = await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)
        members = self._ensemble.members
        # Half the time the leader, else a follower.
        member = leader if fault.pick % 2 else members[(fault.pick // 2) % len(members)]
        role = "leader" if member is leader else "follower"
        record["target"] = f"member {member.myid} ({role}, pid {member.pid})"
        self._paused_members.add(member)
        # pause() waits (blocking) until every JVM thread has stopped: off the loop.
        await asyncio.to_thread(member.pause)
        await asyncio.sleep(fault.length)
        member.resume()
        self._paused_members.discard(member)
        await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)

    async def _partition_leader(self, fault: Fault, record: dict[str, Any]) -> None:
        if not self._partitioner.available:
            raise RuntimeError(f"partitions unavailable: {self._partitioner.reason}")
        leader = await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)
        ports = quorum_ports(leader)
        record["target"] = f"member {leader.myid} (leader) cut off on ports {ports}"
        self._partitioner.cut(ports)
        await asyncio.sleep(fault.length)
        self._partitioner.heal()
        await self._ensemble.wait_quorum(timeout=QUORUM_TIMEOUT)
        record["new_leader"] = (await self._ensemble.leader()).myid

    async def _pause_worker(self, fault: Fault, record: dict[str, Any]) -> None:
        worker = self._workers[fault.pick % len(self._workers)]
        pid = worker.pid
        if pid is None:
            raise RuntimeError(f"{worker.name} is not running")
        record["target"] = f"{worker.name} (pid {pid})"
        record["worker"] = worker.name
        self._paused_workers.add(pid)
        os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(fault.length)
        os.kill(pid, signal.SIGCONT)
        self._paused_workers.discard(pid)

    async def _ask_worker(self, fault: Fault, record: dict[str, Any]) -> None:
        worker = self._workers[fault.pick % len(self._workers)]
        client = (fault.pick // len(self._workers)) % 2
        command = WORKER_COMMANDS[fault.kind]
        record["target"] = f"{worker.name} client {client}"
        record["worker"] = worker.name
        record["client"] = client
        reply = await worker.request(
            {"cmd": command, "client": client, "length": fault.length},
            fault.length + REPLY_TIMEOUT,
        )
        if reply is None:
            raise RuntimeError(f"{worker.name} did not answer")
        if not reply.get("ok"):
            raise RuntimeError(f"{worker.name}: {reply.get('error')}")
        # Give the client time to reconnect before the next fault.
        await asyncio.sleep(1.0)
