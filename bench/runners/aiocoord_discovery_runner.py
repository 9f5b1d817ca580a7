"""aiocoord's service discovery under the benchmark, beside Curator's
(bench/java/BenchDiscovery.java, same numbers and the same checks):

- ``discovery_events``: N watchers, each a ``ServiceDiscovery.cache()`` in a session of
  its own, follow one service while a registrant (its own session) unregisters its
  oldest instance and registers a new one, alternately, CHURN_RATE times a second: the
  time from the registrant's call starting to a watcher's cache showing the change.
  Each watcher's listener compares the ids its cache holds with those it held, as the
  Curator side must (its listener says only "changed"). Afterwards every watcher must
  hold exactly the registrant's instances.
- ``discovery_pick``: a provider (the variant names its strategy) over PICK_INSTANCES
  instances asked for an instance in a loop, timed per batch of PICK_BATCH picks (on
  the clock, and in CPU time).
  Checked after the loop: never none, every instance picked, round robin even.

A runner of its own (library ``aiocoord``: its rows sit beside aiocoord_runner's),
so that the discovery scenarios are one module.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiocoord
from aiocoord import ProviderStrategy, ServiceDiscovery, ServiceInstance

from ._common import Offer, Result, RunArgs, Stats, Window, main, result

LIBRARY = "aiocoord"
SERVICE = "api"
CHURN_RATE = 100
"""Registry changes per second (an unregister and a register, alternately)."""
POOL = 20
"""Instances the registrant keeps live while it churns."""
WATCHERS = (1, 8, 32)
PICK_INSTANCES = 10
PICK_BATCH = 1000
CONVERGE_S = 30.0
STRATEGIES = tuple(strategy.value for strategy in ProviderStrategy)


def _instance(instance_id: str, port: int) -> ServiceInstance:
    return ServiceInstance(
        name=SERVICE,
        id=instance_id,
        address=f"10.0.0.{port % 250}",
        port=port,
        payload={"zone": f"z{port % 3}"},
    )


@contextlib.asynccontextmanager
async def _clients(connect: str, count: int) -> AsyncIterator[list[aiocoord.Client]]:
    clients = [aiocoord.connect(connect) for _ in range(count)]
    try:
        await asyncio.gather(*(client.start() for client in clients))
        yield clients
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


class _Watcher:
    """One watcher: its cache, the ids it held at its last change, its tally."""

    def __init__(self, cache: Any, window: Window, sent_at: dict[str, int]) -> None:
        self.cache = cache
        self.stats = Stats(window)
        self.sent_at = sent_at
        self.held: set[str] = set()
        self.unmatched = 0

    def start(self) -> None:
        self.held = {i.id for i in self.cache.instances()}
        self.cache.add_listener(self.changed)

    def changed(self, _event: object) -> None:
        arrived = time.perf_counter_ns()
        now = {i.id for i in self.cache.instances()}
        for kind, sign, ids in (
            ("register", "+", now - self.held),
            ("unregister", "-", self.held - now),
        ):
            for instance_id in ids:
                sent = self.sent_at.get(sign + instance_id)
                if sent is None:
                    self.unmatched += 1
                    continue
                started, finished = sent / 1e9, arrived / 1e9
                self.stats.record("event", started, finished)
                if self.stats.window.counts(finished):
                    self.stats.samples.setdefault(kind, []).append(finished - started)
        self.held = now


async def _events(args: RunArgs) -> Result:
    base = f"{args.path}/services"
    async with contextlib.AsyncExitStack() as stack:
        clients = await stack.enter_async_context(_clients(args.connect, args.contenders + 1))
        registrant = await stack.enter_async_context(ServiceDiscovery(clients[0], base))
        live: collections.deque[ServiceInstance] = collections.deque()
        for serial in range(POOL):
            instance = _instance(f"i-{serial}", 1000 + serial)
            await registrant.register(instance)
            live.append(instance)
        serial = POOL
        window = Window(args.seconds, args.warmup)
        sent_at: dict[str, int] = {}
        watchers = []
        for client in clients[1:]:
            discovery = await stack.enter_async_context(ServiceDiscovery(client, base))
            cache = await stack.enter_async_context(discovery.cache(SERVICE))
            watcher = _Watcher(cache, window, sent_at)
            watcher.start()
            watchers.append(watcher)
        operations = 0
        period = 1 / CHURN_RATE
        due = time.perf_counter()
        while not window.over():
            now = time.perf_counter()
            if due > now:
                await asyncio.sleep(due - now)
                continue
            if operations % 2 == 0:
                oldest = live.popleft()
                sent_at["-" + oldest.id] = time.perf_counter_ns()
                await registrant.unregister(oldest)
            else:
                fresh = _instance(f"i-{serial}", 1000 + serial)
                serial += 1
                sent_at["+" + fresh.id] = time.perf_counter_ns()
                await registrant.register(fresh)
                live.append(fresh)
            operations += 1
            due += period
        expected = {i.id for i in live}
        deadline = time.monotonic() + CONVERGE_S
        stale = 0
        for watcher in watchers:
            while {i.id for i in watcher.cache.instances()} != expected:
                if time.monotonic() > deadline:
                    stale += 1
                    break
                await asyncio.sleep(0.01)
    violation = None
    if stale:
        violation = (
            f"{stale} of {len(watchers)} watchers did not hold the registrant's "
            f"instances {CONVERGE_S:g} s after the last change"
        )
    extra = {
        "watchers": len(watchers),
        "churn_per_s": CHURN_RATE,
        "operations": operations,
        "pool": POOL,
        "unmatched_changes": sum(w.unmatched for w in watchers),
    }
    stats = [w.stats for w in watchers]
    return result(args, LIBRARY, window, stats, violation=violation, extra=extra)


async def _pick(args: RunArgs) -> Result:
    base = f"{args.path}/services"
    async with contextlib.AsyncExitStack() as stack:
        one, two = await stack.enter_async_context(_clients(args.connect, 2))
        registrant = await stack.enter_async_context(ServiceDiscovery(one, base))
        for index in range(PICK_INSTANCES):
            await registrant.register(_instance(f"i-{index}", 2000 + index))
        picker = await stack.enter_async_context(ServiceDiscovery(two, base))
        strategy = ProviderStrategy(args.variant)
        provider = await stack.enter_async_context(picker.provider(SERVICE, strategy=strategy))
        for _ in range(3000):  # until its cache holds every instance (30 s at most)
            if len(provider.instances()) >= PICK_INSTANCES:
                break
            await asyncio.sleep(0.01)
        else:
            raise TimeoutError("the provider never saw every instance")
        pick = provider.instance  # a pick alone: using() also counts a request in flight
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        nones = 0
        batch = range(PICK_BATCH)
        # The timed loop only picks (and counts misses): fairness is checked after it.
        # Each batch yields to the event loop once, as a server would between requests.
        # Each batch is timed on the clock and in this thread's CPU time: the latter
        # leaves out the time the process was preempted (a busy machine).
        while not window.over():
            cpu = time.thread_time()
            started = time.perf_counter()
            for _ in batch:
                if pick() is None:
                    nones += 1
            finished = time.perf_counter()
            cpu_used = time.thread_time() - cpu
            if window.counts(started) and window.counts(finished):
                stats.record("batch", started, finished)
                stats.samples.setdefault("cpu", []).append(cpu_used)
                stats.ops += PICK_BATCH - 1
            await asyncio.sleep(0)
        counts: collections.Counter[str] = collections.Counter()
        for _ in range(PICK_INSTANCES * 100):
            picked = pick()
            if picked is None:
                nones += 1
            else:
                counts[picked.id] += 1
    most = max(counts.values(), default=0)
    least = min(counts.values(), default=0)
    violation = None
    if nones:
        violation = f"{nones} picks found no instance"
    elif len(counts) != PICK_INSTANCES and args.variant != "sticky":
        violation = f"picked {len(counts)} of {PICK_INSTANCES} instances"
    elif args.variant == "round_robin" and most - least > 1:
        violation = f"round robin picked one instance {most} times, another {least}"
    extra = {
        "instances": PICK_INSTANCES,
        "batch": PICK_BATCH,
        "ns_per_pick": window.seconds * 1e9 / max(1, stats.ops),
        "most_picked": most,
        "least_picked": least,
    }
    return result(args, LIBRARY, window, [stats], violation=violation, extra=extra)


OFFERS = [
    Offer("discovery_events", _events, contenders=WATCHERS),
    *(Offer("discovery_pick", _pick, variant=s, contenders=(1,)) for s in STRATEGIES),
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
