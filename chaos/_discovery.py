"""Service discovery in a chaos run: the worker's drivers, the controller's end
reading, the checks, and the registrant process a worker starts and kills.

Each worker keeps one DYNAMIC instance registered per client for the whole run
(``<worker>-keep-<i>``, its payload updated now and then) and follows the service
with a :class:`aiocoord.ServiceCache` on its session-policy client. Three drivers:

- ``discovery-update``: updates a kept instance's payload (the last one sent for sure
  is what the server must hold at the end).
- ``discovery-list``: lists the service on the server and reads the cache's view; no
  listing may hold an id twice.
- ``discovery-crash``: starts a registrant process (``python -m chaos._discovery
  registrant ...``: its own session, one DYNAMIC instance ``<worker>-gone-<n>``),
  checks that the server lists it once it says it is registered, SIGKILLs it, and
  records when its instance disappears: within a session timeout (give or take the
  server's ticks), unless a fault in between may have held the session (a new leader
  restarts every session's clock; a paused member or worker stalls the clocks).

The checks (``discovery.listed``, ``discovery.dead-gone``, ``discovery.unique``,
``discovery.cache``) are registered in :data:`chaos._checks.CHECKS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import aiocoord
from aiocoord import (
    CoordinationError,
    NoNodeError,
    ServiceCache,
    ServiceDiscovery,
    ServiceInstance,
)
from aiocoord._process import dying_with_parent

from ._history import History, HistoryWriter
from ._layout import ROOT, SESSION_TIMEOUT

if TYPE_CHECKING:
    from ._checks import Verdict
    from ._worker import Worker

__all__ = [
    "DISCOVERY",
    "DiscoveryDriver",
    "check_cache",
    "check_dead_gone",
    "check_listed",
    "check_unique",
    "read_discovery",
]

DISCOVERY = f"{ROOT}/discovery"
"""The base path: one service, :data:`SERVICE`."""
SERVICE = "svc"
TICK_S = 0.5
"""The ensemble's tick (the controller's TICK_MS): a session expires within a tick or
two after its timeout."""
GONE_SLACK = 2 * TICK_S + 1.0
"""Beyond the session timeout: the server's ticks, and the observer's sync and read."""
GONE_BOUND = 3 * SESSION_TIMEOUT + 10.0
"""How long a worker waits for a killed registrant's instance to disappear."""
SPAWN_BOUND = 30.0
"""How long a registrant process may take to say it registered."""
CACHE_SETTLE = 15.0


def _instance(instance_id: str, worker: str, n: int) -> ServiceInstance:
    return ServiceInstance(
        name=SERVICE,
        id=instance_id,
        address="127.0.0.1",
        port=10_000 + n % 50_000,
        payload={"worker": worker, "n": n},
        uri_spec="{scheme}://{address}:{port}",
    )


def _payload_text(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


class DiscoveryDriver:
    """A worker's discovery recipes and drivers (see the module's docstring)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.discoveries: list[ServiceDiscovery] = []
        self.kept: list[ServiceInstance] = []
        self.sure: dict[str, bool] = {}
        """Per kept instance: whether its last update surely reached the server."""
        self.cache: ServiceCache | None = None
        """The cache of :data:`SERVICE` on the session-policy client."""
        self._serial = itertools.count(1)

    async def start(self) -> None:
        """Register one instance per client and start the cache (part of the worker's
        connect, bounded by it)."""
        name = self.worker.name
        for index, client in enumerate(self.worker.clients):
            discovery = ServiceDiscovery(client, DISCOVERY)
            await discovery.start()
            self.discoveries.append(discovery)
            instance = _instance(f"{name}-keep-{index}", name, 0)
            await discovery.register(instance)
            self.kept.append(instance)
        self.cache = self.discoveries[-1].cache(SERVICE)
        await self.cache.start()

    async def aclose(self) -> None:
        for closable in (self.cache, *reversed(self.discoveries)):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    if closable is not None:
                        await closable.aclose()

    def drivers(self) -> list[tuple[str, Any]]:
        return [
            ("discovery-update", self.update_loop("discovery-update")),
            ("discovery-list", self.list_loop("discovery-list")),
            ("discovery-crash", self.crash_loop("discovery-crash")),
        ]

    # --- drivers ---------------------------------------------------------------------

    async def update_loop(self, driver: str) -> None:
        from ._worker import Outcome

        async def update(index: int, instance: ServiceInstance) -> Outcome:
            try:
                await self.discoveries[index].update(instance)
            except CoordinationError as error:
                return Outcome("unknown", type(error).__name__)
            return Outcome("ok", None, {"payload": _payload_text(instance.payload)})

        async def step(rng: random.Random) -> None:
            index = rng.randrange(len(self.kept))
            n = next(self._serial)
            changed = _instance(self.kept[index].id, self.worker.name, n)
            done = await self.worker.op(
                "discovery", "update", lambda _op: update(index, changed), id=changed.id
            )
            self.kept[index] = changed
            self.sure[changed.id] = done.status == "ok"

        await self.worker.forever(driver, step, 1.0)

    async def list_loop(self, driver: str) -> None:
        from ._worker import Outcome

        discovery = self.discoveries[0]

        async def listing() -> Outcome:
            assert self.cache is not None
            cached = [i.id for i in self.cache.instances()]
            try:
                listed = [i.id for i in await discovery.instances(SERVICE)]
            except CoordinationError as error:
                return Outcome("fail", type(error).__name__, {"cache": cached})
            return Outcome("ok", None, {"server": listed, "cache": cached})

        async def step(_rng: random.Random) -> None:
            await self.worker.op("discovery", "list", lambda _op: listing())

        await self.worker.forever(driver, step, 0.5)

    async def crash_loop(self, driver: str) -> None:
        from ._worker import Outcome

        client = self.worker.clients[0]
        serial = itertools.count(1)

        async def gone(path: str) -> bool:
            """Whether the node is gone, on a read after a sync (a member may lag)."""
            await client.sync(path)
            return await client.exists(path) is None

        async def crash(instance_id: str) -> Outcome:
            path = f"{DISCOVERY}/{SERVICE}/{instance_id}"
            value: dict[str, Any] = {"id": instance_id}
            # The registrant dies with the worker; no preexec_fn: this process has
            # threads (the child watcher's), and Python run between fork and exec
            # could hang the child, and with it this whole event loop.
            command = [sys.executable, "-m", "chaos._discovery", "registrant"]
            command += [self.worker.config.connect, instance_id, self.worker.name]
            proc = await asyncio.create_subprocess_exec(
                *dying_with_parent(command),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                assert proc.stdout is not None
                try:
                    async with asyncio.timeout(SPAWN_BOUND):
                        line = await proc.stdout.readline()
                except TimeoutError:
                    line = b""
                if line.strip() != b"registered":
                    return Outcome("fail", f"the registrant did not register: {line!r}", value)
                value["registered"] = self.worker.now()
                try:
                    value["visible"] = not await gone(path)
                except CoordinationError as error:
                    value["visible"] = None  # could not look: not judged
                    value["look_error"] = type(error).__name__
                value["killed"] = self.worker.now()
                proc.kill()  # the registrant dies with its session open
                await proc.wait()
                deadline = time.monotonic() + GONE_BOUND
                while time.monotonic() < deadline:
                    with contextlib.suppress(CoordinationError):
                        if await gone(path):
                            value["gone"] = self.worker.now()
                            return Outcome("ok", None, value)
                    await asyncio.sleep(0.1)
                return Outcome("unknown", f"still there {GONE_BOUND:g} s after the kill", value)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

        async def step(_rng: random.Random) -> None:
            instance_id = f"{self.worker.name}-gone-{next(serial)}"
            await self.worker.op("discovery", "crash", lambda _op: crash(instance_id))

        await self.worker.forever(driver, step, 6.0)

    # --- the end ---------------------------------------------------------------------

    async def final(self) -> list[dict[str, Any]]:
        """The kept instances with the payload each last set for sure, and the cache's
        view, once the server lists every kept instance (each registrant is given time
        to register again after an outage) and the cache holds what the server lists."""
        alive: dict[str, dict[str, Any]] = {}
        for discovery, instance in zip(self.discoveries, self.kept, strict=True):
            alive[instance.id] = {
                "payload": _payload_text(instance.payload),
                "sure": self.sure.get(instance.id, True),
                "registered": instance in discovery.registered,
            }
        record: dict[str, Any] = {"type": "final", "what": "discovery-alive"}
        record |= {"worker": self.worker.name, "instances": alive}
        cache: dict[str, Any] = {"type": "final", "what": "discovery-cache"}
        cache["worker"] = self.worker.name
        try:
            assert self.cache is not None
            client = self.worker.clients[-1]
            async with asyncio.timeout(CACHE_SETTLE + 30):
                deadline = time.monotonic() + CACHE_SETTLE
                while True:
                    await client.sync(DISCOVERY)
                    server = sorted(i.id for i in await self.discoveries[-1].instances(SERVICE))
                    view = [i.id for i in self.cache.instances()]
                    kept = {i.id for i in self.kept} <= set(server)
                    if (kept and sorted(view) == server) or time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(0.1)
            cache |= {"server": server, "view": view}
        except Exception as error:
            cache["error"] = type(error).__name__
        return [record, cache]


# --- the controller's end reading ----------------------------------------------------------


async def read_discovery(client: aiocoord.Client, history: HistoryWriter) -> None:
    """The service's instances on the server (id -> payload), once the instances of
    killed registrants have had a session timeout or three to go."""
    instances: dict[str, str] = {}
    started = time.monotonic()
    try:
        async with asyncio.timeout(GONE_BOUND + 20):
            discovery = ServiceDiscovery(client, DISCOVERY)
            while True:
                await client.sync(DISCOVERY)
                listed = await discovery.instances(SERVICE)
                instances = {i.id: _payload_text(i.payload) for i in listed}
                doomed = [i for i in instances if "-gone-" in i]
                if not doomed or time.monotonic() - started > GONE_BOUND:
                    break
                await asyncio.sleep(0.25)
    except NoNodeError:
        pass
    except (TimeoutError, CoordinationError) as error:
        history.write({"type": "final", "what": "discovery", "error": repr(error)})
        return
    waited = round(time.monotonic() - started, 3)
    history.write({"type": "final", "what": "discovery", "instances": instances, "waited": waited})


# --- the checks --------------------------------------------------------------------------


def check_listed(history: History, verdict: Verdict) -> None:
    """A live registrant is listed: once the run is over (the kept registrants still
    running), the server lists exactly the kept instances, each with the payload it
    last set for sure; and every killed registrant was listed once it said it had
    registered, before it was killed."""
    alive: dict[str, dict[str, Any]] = {}
    for record in history.final("discovery-alive"):
        alive |= dict(record.get("instances") or {})
    records = history.final("discovery")
    if not records or records[0].get("instances") is None:
        error = records[0].get("error") if records else "not read"
        verdict.problem(f"the service was not read from the server at the end: {error}")
        return
    server: dict[str, str] = dict(records[0]["instances"])
    for instance_id in sorted(set(alive) - set(server)):
        verdict.problem(f"{instance_id}'s registrant is alive, but the server does not list it")
    for instance_id in sorted(set(server) - set(alive)):
        verdict.problem(f"{instance_id} is listed, but no running registrant has that id")
    unsure = 0
    for instance_id in sorted(set(alive) & set(server)):
        if not alive[instance_id].get("sure", True):
            unsure += 1
        elif alive[instance_id].get("payload") != server[instance_id]:
            verdict.problem(
                f"{instance_id} last set {alive[instance_id].get('payload')}, the server "
                f"holds {server[instance_id]}"
            )
    crashes = [o for o in history.of("discovery", "crash") if "registered" in o.value]
    for op in crashes:
        if op.get("visible") is False:
            verdict.problem(
                f"{op.id}: {op.get('id')} said it registered (t={op.get('registered'):.3f}), "
                "but the server did not list it"
            )
    verdict.checked = len(alive) + len(server) + len(crashes)
    verdict.counts = {
        "kept registrants": len(alive),
        "listed at the end": len(server),
        "registrants looked up once registered": len(crashes),
        "updates": sum(1 for o in history.of("discovery", "update") if o.status == "ok"),
        "payload not compared (last update unsure)": unsure,
    }


SESSION_HOLDING_FAULTS = frozenset(
    {"kill-leader", "kill-follower", "pause-member", "partition-leader", "pause-worker"}
)
"""Faults that may keep a dead session alive past its timeout (a new leader restarts
every session's clock; a paused member or an ensemble without quorum expires nothing)
or delay the observer (its own process paused)."""


def _faults_between(history: History, start: float, end: float, observer: str) -> list[str]:
    """The session-holding faults over [start, end], and the observer's own stalls
    (its loop ran nothing, or one of its clients was cut off: delayed, as by a pause)."""
    faults = [
        str(f.get("kind"))
        for f in history.faults
        if (
            f.get("kind") in SESSION_HOLDING_FAULTS
            # The observer's own client cut off: it hears of nothing meanwhile.
            or (f.get("kind") == "stall-client" and f.get("worker") == observer)
        )
        and float(f.get("t", 0.0)) <= end
        and float(f.get("end", f.get("t", 0.0))) >= start
    ]
    stalls = [
        f"stall of {s.get('worker')}"
        for s in history.stalls
        if s.get("worker") == observer and float(s["from"]) <= end and float(s["to"]) >= start
    ]
    return faults + stalls


def check_dead_gone(history: History, verdict: Verdict) -> None:
    """A dead registrant disappears within a session timeout: the instance of a
    registrant killed mid-run is gone within SESSION_TIMEOUT + GONE_SLACK of the kill
    (the worker watches for GONE_BOUND), unless a fault in between may have held its
    session; gone at all by the end reading in any case."""
    judged = excused = 0
    times: list[float] = []
    for op in history.of("discovery", "crash"):
        killed = op.get("killed")
        if killed is None:
            continue  # never registered: nothing to judge
        gone = op.get("gone")
        if gone is None:
            if op.complete is None:
                continue  # the worker died with it (its history ends here)
            # Several faults in a row (a cut-off leader, then a killed one, then a
            # paused one) each restart or stall the session clocks: the session may
            # outlive the worker's bound. It must still be gone at the end (below).
            if _faults_between(history, float(killed) - SESSION_TIMEOUT, op.complete, op.worker):
                excused += 1
                continue
            judged += 1
            verdict.problem(f"{op.id}: {op.get('id')} still listed {GONE_BOUND:g} s after its kill")
            continue
        took = float(gone) - float(killed)
        times.append(took)
        if took <= SESSION_TIMEOUT + GONE_SLACK:
            judged += 1
        elif _faults_between(history, float(killed) - SESSION_TIMEOUT, float(gone), op.worker):
            excused += 1
        else:
            judged += 1
            verdict.problem(
                f"{op.id}: {op.get('id')} gone {took:.2f} s after its registrant was killed "
                f"(session timeout {SESSION_TIMEOUT:g} s), with no fault in between"
            )
    for record in history.final("discovery"):
        for instance_id in sorted(record.get("instances") or {}):
            if "-gone-" in instance_id:
                verdict.problem(f"{instance_id}: its registrant was killed, it is still listed")
    verdict.checked = judged + excused
    verdict.counts = {
        "killed registrants": judged + excused,
        "excused (a fault in between)": excused,
    }
    if times:
        ordered = sorted(times)
        verdict.counts["median ms to disappear"] = round(1000 * ordered[len(ordered) // 2])
        verdict.counts["max ms to disappear"] = round(1000 * ordered[-1])


def check_unique(history: History, verdict: Verdict) -> None:
    """No duplicate ids: no listing of the service, on the server or in a cache's
    view, during the run or at its end, holds an id twice."""
    listings = 0
    for op in history.of("discovery", "list"):
        for where in ("server", "cache"):
            ids = op.get(where)
            if ids is None:
                continue
            listings += 1
            twice = sorted(i for i, n in Counter(ids).items() if n > 1)
            if twice:
                verdict.problem(
                    f"{op.id} (t={op.invoke:.3f}): the {where} listing holds {twice} twice"
                )
    for record in history.final("discovery-cache"):
        view = record.get("view") or []
        listings += 1
        twice = sorted(i for i, n in Counter(view).items() if n > 1)
        if twice:
            verdict.problem(f"{record.get('worker')}: the cache's final view holds {twice} twice")
    verdict.checked = listings
    verdict.counts = {"listings": listings}


def check_cache(history: History, verdict: Verdict) -> None:
    """Once the run is over, each worker's ServiceCache holds the server's instances."""
    records = history.final("discovery-cache")
    for record in records:
        if "error" in record:
            verdict.problem(f"{record.get('worker')}: not compared: {record['error']}")
        elif sorted(record.get("view") or []) != list(record.get("server") or []):
            verdict.problem(
                f"{record.get('worker')}: the cache holds {sorted(record.get('view') or [])}, "
                f"the server {record.get('server')}"
            )
    verdict.checked = len(records)
    verdict.counts = {"caches compared": len(records)}


# --- the registrant process ----------------------------------------------------------------


async def _registrant(connect: str, instance_id: str, worker: str) -> None:
    """Register one DYNAMIC instance, say so, and wait to be killed."""
    client = aiocoord.connect(connect, session_timeout=SESSION_TIMEOUT)
    await client.start(timeout=SPAWN_BOUND)
    discovery = ServiceDiscovery(client, DISCOVERY)
    await discovery.start()
    await discovery.register(_instance(instance_id, worker, os.getpid()))
    print("registered", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "registrant":
        print("usage: python -m chaos._discovery registrant CONNECT ID WORKER", file=sys.stderr)
        return 2
    asyncio.run(_registrant(argv[1], argv[2], argv[3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
