"""The benchmark driver behind ``make bench``.

For each server configuration (``SERVER_CONFIGS``: standalone with
``forceSync=yes`` as production runs it, standalone with the test kit's
``forceSync=no``, and a 3-node ensemble) starts fresh ZooKeeper servers (pinned
to core 0), finds the runners (every
``bench/runners/*_runner.py``, and Curator plus the plain Java client from
``bench/java/Bench.java``, compiled now), asks each what it offers, and runs
every scenario, library and contender count as its own subprocess pinned to
core 1, each in a fresh znode that is deleted afterwards. Around every run it
reads the servers' received-packet counters (``srvr``), so that a run's record
says how many requests the whole run cost the servers. Writes
``bench/results/<date>.{json,md,png}``.

Environment: ``BENCH_SECONDS`` (measured seconds per run, default 10),
``BENCH_REPEAT`` (runs per measurement, the median is reported; default 3),
``BENCH_ONLY`` (comma-separated scenario names), ``BENCH_WARMUP`` (unmeasured
seconds at the start of every run, default 5: Curator's JVM needs about that
long to reach its steady speed), ``BENCH_WAITERS`` (waiters in the memory
scenario, default what the runner offers: 10,000), ``BENCH_SERVERS``
(comma-separated server configurations, default all: ``sync,nosync,ensemble``),
``BENCH_TAG`` (written as ``<date>-<tag>.*`` instead of ``<date>.*``),
``BENCH_LIBRARIES`` (comma-separated library names, default all).

Run as ``.venv/bin/python -m bench.run`` or ``.venv/bin/python bench/run.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiocoord
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer, four_letter_word
from bench import report

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS = BENCH_DIR / "results"
JAVA_LIBS = Path("/usr/share/java")
SCENARIOS = (
    "mutex",
    "counter",
    "bounded",
    "pipelined",
    "latency",
    "election",
    "barrier",
    "queue",
    "drain",
    "cache_build",
    "cache_events",
    "discovery_events",
    "discovery_pick",
    "memory",
)
SERVER_CORE, CLIENT_CORE = 0, 1
TICK_TIME_MS = 2000


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One way to run the server; every configuration gets its own fresh servers."""

    name: str
    title: str
    members: int
    force_sync: bool
    scenarios: tuple[str, ...] | None = None
    """What runs on it (None: every scenario)."""
    warmup_s: float = 8.0
    """Load the fresh servers this long first, so that their JIT has compiled the
    request path before any library is measured."""

    def runs(self, scenario: str) -> bool:
        return self.scenarios is None or scenario in self.scenarios


SERVER_CONFIGS = (
    ServerConfig("sync", "standalone, forceSync=yes (as production runs it)", 1, True),
    ServerConfig(
        "nosync",
        "standalone, forceSync=no (the test kit's setting)",
        1,
        False,
        tuple(s for s in SCENARIOS if s != "memory"),
    ),
    ServerConfig(
        "ensemble",
        "3-node ensemble on this machine, forceSync=yes (every write is a quorum round)",
        3,
        True,
        ("mutex", "counter"),
        # Three JVMs compiling on one core: a fresh ensemble's mutex rate rose
        # from 90 to 450 hand-offs/s over its first 70 s and settled near
        # 500 after about three minutes (2026-11-26); with 8 s, and still with
        # 90 s, the first repeat of a run sat on that ramp.
        warmup_s=180.0,
    ),
)
"""The first is the headline configuration."""
ZNODE_ROOT = "/bench"
LIST_TIMEOUT = 60.0
RUN_OVERHEAD = 120.0
"""Seconds a run may take beyond warm-up and window: connecting, stopping, checking."""
MEMORY_TIMEOUT = 900.0
WORK_TIMEOUTS = {"drain": 780.0, "cache_build": 780.0}
"""Seconds a run of a scenario that measures a fixed amount of work (not a window)
may take besides its warm-up: the runners give up on the work after 600 s."""
QUIET_LOAD = 0.2
"""Before each run, wait until the rest of the machine uses less than this many cores..."""
QUIET_WAIT_S = 10.0
"""...but no longer than this."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Config:
    seconds: float
    repeat: int
    only: tuple[str, ...]
    waiters: int | None
    warmup: float = 5.0
    servers: tuple[ServerConfig, ...] = SERVER_CONFIGS
    libraries: tuple[str, ...] = ()
    """Only these libraries' runs (empty: all)."""

    @classmethod
    def from_env(cls) -> Config:
        only = tuple(s.strip() for s in os.environ.get("BENCH_ONLY", "").split(",") if s.strip())
        unknown = sorted(set(only) - set(SCENARIOS))
        if unknown:
            raise SystemExit(f"BENCH_ONLY: unknown scenarios {unknown}; known: {SCENARIOS}")
        waiters = os.environ.get("BENCH_WAITERS")
        known = {c.name: c for c in SERVER_CONFIGS}
        names = [n.strip() for n in os.environ.get("BENCH_SERVERS", "").split(",") if n.strip()]
        if unknown := sorted(set(names) - set(known)):
            raise SystemExit(f"BENCH_SERVERS: unknown {unknown}; known: {sorted(known)}")
        return cls(
            seconds=float(os.environ.get("BENCH_SECONDS", "10")),
            repeat=max(1, int(os.environ.get("BENCH_REPEAT", "3"))),
            only=only or SCENARIOS,
            waiters=int(waiters) if waiters else None,
            warmup=float(os.environ.get("BENCH_WARMUP", "5")),
            servers=tuple(c for c in SERVER_CONFIGS if c.name in names)
            if names
            else SERVER_CONFIGS,
            libraries=tuple(
                n.strip() for n in os.environ.get("BENCH_LIBRARIES", "").split(",") if n.strip()
            ),
        )


@dataclass(frozen=True, slots=True)
class Runner:
    """A command that runs one library's scenarios (see ``bench/runners/_common.py``)."""

    name: str
    command: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Subject:
    """One thing measured: a library's scenario (variant) at a contender count."""

    runner: Runner
    library: str
    scenario: str
    variant: str
    contenders: int

    @property
    def label(self) -> str:
        return f"{self.library}/{self.variant}" if self.variant else self.library


# --- finding the runners --------------------------------------------------------------


def python_runners() -> list[Runner]:
    """Every ``bench/runners/*_runner.py``: adding a runner is adding such a module."""
    return [
        Runner(path.stem, (sys.executable, "-m", f"bench.runners.{path.stem}"))
        for path in sorted((BENCH_DIR / "runners").glob("*_runner.py"))
    ]


def java_runners(build_dir: Path, notes: list[str]) -> list[Runner]:
    """Compile Bench.java (with BenchDiscovery.java) against Debian's Curator and
    ZooKeeper jars; its two runners."""
    javac, java = shutil.which("javac"), shutil.which("java")
    recipes = JAVA_LIBS / "curator-recipes.jar"
    discovery = JAVA_LIBS / "curator-x-discovery.jar"
    if javac is None or java is None or not recipes.is_file() or not discovery.is_file():
        notes.append(
            "Curator and the Java client were skipped: javac, curator-recipes.jar or "
            "curator-x-discovery.jar missing"
        )
        return []
    # curator-recipes.jar's manifest pulls in Curator's other jars, Guava and ZooKeeper;
    # curator-x-discovery.jar's, Jackson.
    compile_cp = os.pathsep.join([str(recipes), str(discovery)])
    sources = [str(BENCH_DIR / "java" / name) for name in ("Bench.java", "BenchDiscovery.java")]
    command = [javac, "-Xlint:all,-path", "-d", str(build_dir), "-cp", compile_cp, *sources]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        notes.append(f"Bench.java did not compile: {done.stderr.strip()[-500:]}")
        return []
    run_cp = os.pathsep.join([str(build_dir), compile_cp, str(JAVA_LIBS / "slf4j-nop.jar")])
    base = (java, "-Xmx1g", "-cp", run_cp, "Bench")
    return [Runner("curator", (*base, "curator")), Runner("java", (*base, "java"))]


def offered(runner: Runner, pin: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Ask a runner what it offers: [(library, offer)]."""
    done = subprocess.run(
        [*pin, *runner.command, "--list"],
        capture_output=True,
        text=True,
        timeout=LIST_TIMEOUT,
        cwd=REPO,
        check=False,
    )
    line = _last_json_line(done.stdout)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{runner.name} --list failed: {done.stderr.strip()[-800:]}")
    return [(line["library"], offer) for offer in line["offers"]]


def plan(runners: Sequence[Runner], config: Config, pin: Sequence[str]) -> list[Subject]:
    subjects = []
    for runner in runners:
        for library, offer in offered(runner, pin):
            if offer["scenario"] not in config.only:
                continue
            if config.libraries and library not in config.libraries:
                continue
            levels = offer["contenders"]
            if offer["scenario"] == "memory" and config.waiters:
                levels = [config.waiters]
            for contenders in levels:
                subjects.append(
                    Subject(runner, library, offer["scenario"], offer["variant"], contenders)
                )
    order = {name: i for i, name in enumerate(SCENARIOS)}
    subjects.sort(key=lambda s: (order[s.scenario], s.contenders, s.library != "aiocoord"))
    return subjects


# --- running ----------------------------------------------------------------------------


def _busy_seconds() -> tuple[float, float]:
    """All cores' busy and stolen time so far (/proc/stat), in seconds."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def _process_seconds(pid: int) -> float:
    """CPU time (user + system) of a live process, from /proc/<pid>/stat."""
    try:
        after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU time of this driver and its reaped children (the runners)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class CpuMeter:
    """What the machine did during a run besides the benchmark: every core's busy
    time minus the server's, the runner's and the driver's. Another workload on
    the machine (a test suite, a build) shows up here and makes numbers noisy."""

    def __init__(self, server_pids: Sequence[int]) -> None:
        self._server_pids = tuple(server_pids)
        self._start = self._sample()

    def _sample(self) -> tuple[float, float, float, float, float]:
        busy, steal = _busy_seconds()
        server = sum(_process_seconds(pid) for pid in self._server_pids)
        return time.monotonic(), busy, steal, server, _own_seconds()

    def read(self) -> dict[str, float]:
        """Average cores used since the meter started: by others, stolen, by the
        server, by the runner and driver."""
        now = self._sample()
        wall, busy, steal, server, own = (b - a for a, b in zip(self._start, now, strict=True))
        wall = max(wall, 1e-6)
        return {
            "other_cores": max(0.0, busy - server - own) / wall,
            "steal_cores": steal / wall,
            "server_cores": server / wall,
            "client_cores": own / wall,
        }


async def wait_for_quiet(server_pids: Sequence[int]) -> float:
    """Wait (at most QUIET_WAIT_S) until other processes use under QUIET_LOAD cores."""
    started = time.monotonic()
    while time.monotonic() - started < QUIET_WAIT_S:
        meter = CpuMeter(server_pids)
        await asyncio.sleep(1.0)
        if meter.read()["other_cores"] < QUIET_LOAD:
            break
    return time.monotonic() - started


async def warm_up_server(client: aiocoord.Client, seconds: float) -> None:
    """Exercise the fresh server's request paths (writes, reads, sequential
    ephemerals, children, watches) so that its JIT has compiled them before any
    library is measured; the first library would otherwise pay for it."""
    path = f"{ZNODE_ROOT}/warm-up"
    await client.ensure_path(f"{path}/lock")
    deadline = time.monotonic() + seconds
    mutex = aiocoord.Mutex(client, f"{path}/lock")

    async def writer() -> None:
        while time.monotonic() < deadline:
            await client.set(path, b"warm")
            await client.get(path)

    async def locker() -> None:
        while time.monotonic() < deadline:
            async with mutex:
                await asyncio.sleep(0)

    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*[writer() for _ in range(200)], *[locker() for _ in range(4)])
    await client.delete_recursive(path)


def pin_commands() -> tuple[list[str], list[str]]:
    """``taskset`` prefixes for the clients, and what pins the server; empty if impossible."""
    taskset = shutil.which("taskset")
    cores = os.sched_getaffinity(0)
    if taskset is None or not {SERVER_CORE, CLIENT_CORE} <= cores:
        return [], []
    return [taskset, "-c", str(CLIENT_CORE)], [taskset, "-a", "-cp", str(SERVER_CORE)]


def _last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                parsed: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                return None
            return parsed
    return None


@dataclass(frozen=True, slots=True)
class Servers:
    """The running servers of one configuration."""

    config: ServerConfig
    connect_string: str
    pids: tuple[int, ...]


async def run_one(
    subject: Subject,
    config: Config,
    client: aiocoord.Client,
    servers: Servers,
    pin: Sequence[str],
    repeat: int,
) -> dict[str, Any]:
    """Run one subject once in its own subprocess and znode; the run's record."""
    slug = re.sub(r"[^a-z0-9-]", "_", f"{subject.scenario}-{subject.label}-{subject.contenders}")
    path = f"{ZNODE_ROOT}/{slug}-r{repeat}-{uuid.uuid4().hex[:8]}"
    await client.ensure_path(path)
    command = [
        *pin,
        *subject.runner.command,
        subject.scenario,
        str(subject.contenders),
        f"{config.seconds:g}",
        servers.connect_string,
        path,
    ]
    command += ["--warmup", f"{config.warmup:g}"]
    if subject.variant:
        command += ["--variant", subject.variant]
    if subject.scenario == "memory":
        timeout = MEMORY_TIMEOUT
    elif subject.scenario in WORK_TIMEOUTS:
        timeout = config.warmup + WORK_TIMEOUTS[subject.scenario]
    else:
        timeout = config.warmup + config.seconds + RUN_OVERHEAD
    record: dict[str, Any] = {
        "server": servers.config.name,
        "library": subject.library,
        "variant": subject.variant,
        "scenario": subject.scenario,
        "contenders": subject.contenders,
        "repeat": repeat,
        "path": path,
    }
    record["quiet_wait_s"] = await wait_for_quiet(servers.pids)
    packets_before = await server_packets(servers)
    meter = CpuMeter(servers.pids)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=REPO,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # SIGKILL to our own child's PID, nothing else
        await proc.wait()
        record["error"] = f"timed out after {timeout:g} s (killed)"
        stdout, stderr = b"", b""
    finally:
        record["wall_s"] = time.monotonic() - started
        record["cpu"] = meter.read()
        packets_after = await server_packets(servers)
        if packets_before is not None and packets_after is not None:
            record["server_packets"] = packets_after - packets_before
        try:
            await asyncio.wait_for(delete_tree(client, path), 120)
        except Exception as error:
            record.setdefault("error", f"cleaning up {path} failed: {error!r}")
    line = _last_json_line(stdout.decode(errors="replace"))
    if "error" not in record:
        if line is None or proc.returncode != 0 or "error" in line:
            tail = stderr.decode(errors="replace").strip().splitlines()[-15:]
            reason = (line or {}).get("error") or f"exit status {proc.returncode}"
            record["error"] = reason
            record["stderr_tail"] = tail
        else:
            record |= line
            record["repeat"] = repeat
            record["server"] = servers.config.name
    return record


async def server_packets(servers: Servers) -> int | None:
    """Packets the servers have received from clients so far (``srvr``'s
    "Received", summed over an ensemble's members); None if one cannot say."""
    total = 0
    for member in servers.connect_string.split(","):
        host, port = member.rsplit(":", 1)
        try:
            text = await four_letter_word(host, int(port), "srvr")
        except OSError:
            return None
        received = [line for line in text.splitlines() if line.startswith("Received:")]
        if not received:
            return None
        total += int(received[0].split(":", 1)[1])
    return total


CLEANUP_BATCH = 1000
"""Listings or deletes per pipelined round trip when a run's znode is deleted."""


async def delete_tree(client: aiocoord.Client, path: str) -> None:
    """Delete ``path`` and everything below it: the tree is listed level by level
    and deleted deepest level first, CLEANUP_BATCH requests per round trip (a
    cache scenario leaves 10,000 nodes behind); ``delete_recursive`` then takes
    whatever is left (a node that appeared meanwhile)."""
    levels = [[path]]
    while levels[-1]:
        below: list[str] = []
        for start in range(0, len(levels[-1]), CLEANUP_BATCH):
            chunk = levels[-1][start : start + CLEANUP_BATCH]
            pipeline = client.pipeline()
            for node in chunk:
                pipeline.children(node)
            for node, outcome in zip(chunk, await pipeline.execute(), strict=True):
                if not isinstance(outcome, Exception):
                    below += [f"{node}/{name}" for name in outcome[0]]
        levels.append(below)
    for level in reversed(levels):
        for start in range(0, len(level), CLEANUP_BATCH):
            pipeline = client.pipeline()
            for node in level[start : start + CLEANUP_BATCH]:
                pipeline.delete(node)
            await pipeline.execute()
    await client.delete_recursive(path)


def describe(record: dict[str, Any]) -> str:
    if "error" in record:
        return f"ERROR {record['error']}"
    if record.get("violation"):
        return f"VIOLATION {record['violation']}"
    extra = record.get("extra", {})
    if "build_s" in extra:
        return f"{extra['build_s']:.2f} s to build {extra['nodes']:,} nodes"
    latency: dict[str, float] = next(iter(record["latency_ms"].values()), {})
    p99 = f", p99 {latency['p99']:.2f} ms" if "p99" in latency else ""
    per_item = ""
    items = extra.get("items", 0) + extra.get("warm_items", 0)
    if items and record.get("server_packets") is not None:
        per_item = f", {record['server_packets'] / items:.1f} server requests per item"
    return f"{record['rate']:,.0f} ops/s{p99}{per_item}"


# --- facts about the machine ------------------------------------------------------------


def machine_facts() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = "unknown"
    with contextlib.suppress(OSError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "memory": memory,
        "kernel": platform.release(),
    }


def _jar_version(jar: Path, artifact: str) -> str | None:
    """The version in a jar's Maven metadata (``group/artifact``), if readable."""
    with contextlib.suppress(OSError, KeyError, zipfile.BadZipFile):
        with zipfile.ZipFile(jar) as archive:
            text = archive.read(f"META-INF/maven/{artifact}/pom.properties").decode()
        for line in text.splitlines():
            if line.startswith("version="):
                return line.split("=", 1)[1].strip()
    return None


def versions(zookeeper: str) -> dict[str, str]:
    found = {"python": platform.python_version()}
    if match := re.match(r"[\d.]+", zookeeper):  # "3.8.0-${mvngit.commit.id}, built on ..."
        found["zookeeper"] = match.group(0)
    java = shutil.which("java")
    if java:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
        first = (done.stderr or done.stdout).strip().splitlines()[0]  # openjdk version "17.0.15"
        if match := re.match(r'(\S+) version "([^"]+)"', first):
            found["java"] = f"{match.group(1)} {match.group(2)}"
    curator = _jar_version(JAVA_LIBS / "curator-recipes.jar", "org.apache.curator/curator-recipes")
    if curator:
        found["curator"] = curator
    for package in ("aiocoord", "aiozk", "kazoo", "matplotlib"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        if commit:
            found["aiocoord"] += f" (commit {commit}, with the work tree's changes)"
    return found


# --- servers -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def start_servers(config: ServerConfig, pin: Sequence[str]) -> AsyncIterator[Servers]:
    """Fresh servers for one configuration, pinned to the server core; closed on exit."""
    options: dict[str, Any] = {"tick_time_ms": TICK_TIME_MS, "force_sync": config.force_sync}
    target: ZooKeeperServer | ZooKeeperEnsemble
    if config.members == 1:
        target = ZooKeeperServer(**options)
        members = [target]
    else:
        target = ZooKeeperEnsemble(config.members, **options)
        members = list(target.members)
    async with target:
        pids = tuple(m.pid for m in members if m.pid is not None)
        if pin:
            for pid in pids:
                await asyncio.to_thread(
                    subprocess.run, [*pin, str(pid)], check=True, capture_output=True
                )
        yield Servers(config, target.connect_string, pids)


async def server_version(servers: Servers) -> str:
    host, port = servers.connect_string.split(",")[0].rsplit(":", 1)
    text = await four_letter_word(host, int(port), "srvr")
    for line in text.splitlines():
        if line.startswith("Zookeeper version:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


# --- the whole run --------------------------------------------------------------------------


@contextlib.contextmanager
def build_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="aiocoord-bench-") as tmp:
        yield Path(tmp)


async def main() -> int:
    config = Config.from_env()
    notes: list[str] = []
    client_pin, server_pin = pin_commands()
    if not client_pin:
        notes.append("not pinned: taskset missing or cores 0 and 1 not both available")
    today = datetime.date.today().isoformat()
    started = datetime.datetime.now().astimezone()
    with build_dir() as tmp:
        runners = python_runners() + java_runners(tmp, notes)
        subjects = plan(runners, config, client_pin)
        total = config.repeat * sum(
            1 for c in config.servers for s in subjects if c.runs(s.scenario)
        )
        log(f"bench: {len(subjects)} measurements x {config.repeat}, {config.seconds:g} s each")
        runs: list[dict[str, Any]] = []
        zk_version = "unknown"
        for server_config in config.servers:
            todo = [s for s in subjects if server_config.runs(s.scenario)]
            if not todo:
                continue
            log(f"bench: server {server_config.name}: {server_config.title}")
            async with start_servers(server_config, server_pin) as servers:
                zk_version = await server_version(servers)
                async with aiocoord.connect(servers.connect_string) as client:
                    await client.ensure_path(ZNODE_ROOT)
                    log(f"bench: warming the server up for {server_config.warmup_s:g} s")
                    await warm_up_server(client, server_config.warmup_s)
                    for repeat in range(config.repeat):
                        for subject in todo:
                            done = len(runs) + 1
                            record = await run_one(
                                subject, config, client, servers, client_pin, repeat
                            )
                            runs.append(record)
                            log(
                                f"[{done}/{total}] {server_config.name} {subject.scenario} "
                                f"x{subject.contenders} {subject.label}: {describe(record)} "
                                f"({record['wall_s']:.1f} s, "
                                f"other load {record['cpu']['other_cores']:.2f} cores)"
                            )
    document = {
        "date": today,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "versions": versions(zk_version),
        "config": {
            "seconds": config.seconds,
            "warmup_s": config.warmup,
            "repeat": config.repeat,
            "scenarios": list(config.only),
            "pinned": bool(client_pin),
            "servers": [
                {
                    "name": c.name,
                    "title": c.title,
                    "members": c.members,
                    "force_sync": c.force_sync,
                    "server_warmup_s": c.warmup_s,
                }
                for c in config.servers
            ],
            "tick_time_ms": TICK_TIME_MS,
        },
        "notes": notes,
        "runs": runs,
        "results": report.summarize(runs),
    }
    RESULTS.mkdir(exist_ok=True)
    tag = os.environ.get("BENCH_TAG", "").strip()
    written = report.write(document, RESULTS / (f"{today}-{tag}" if tag else today))
    for path in written:
        log(f"wrote {path.relative_to(REPO)}")
    failed = [r for r in runs if "error" in r]
    if failed:
        log(f"{len(failed)} runs failed; see the notes in the report")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
