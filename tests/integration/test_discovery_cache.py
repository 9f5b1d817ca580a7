"""ServiceCache: one service's instances kept current, and its faults.

Every wait here is on the cache's own events (a final marker instance says
the cache has caught up with everything written before it), never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections.abc import AsyncIterator

import pytest
from _kit import EVENT_TIMEOUT, Started

import aiocoord
from aiocoord import (
    ConnectionState,
    RecipeClosedError,
    ServiceCache,
    ServiceCacheEvent,
    ServiceCacheEventType,
    ServiceDiscovery,
    ServiceInstance,
)
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


BASE = "/services"

ADDED = ServiceCacheEventType.ADDED
UPDATED = ServiceCacheEventType.UPDATED
REMOVED = ServiceCacheEventType.REMOVED
INITIALIZED = ServiceCacheEventType.INITIALIZED
RESYNCED = ServiceCacheEventType.RESYNCED


def api(instance_id: str, **changes: object) -> ServiceInstance:
    fields: dict[str, object] = {"name": "api", "id": instance_id, "address": "10.0.0.7"}
    fields.update(port=8080, registration_time=1795626267753)
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


class Recorder:
    """Every event of a cache, in order, and a way to await one."""

    def __init__(self) -> None:
        self.events: list[ServiceCacheEvent] = []
        self._changed = asyncio.Event()

    def __call__(self, event: ServiceCacheEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def kinds(self) -> list[tuple[ServiceCacheEventType, str | None]]:
        return [(e.type, e.instance.id if e.instance else None) for e in self.events]

    async def saw(
        self, kind: ServiceCacheEventType, instance_id: str | None = None
    ) -> ServiceCacheEvent:
        async with asyncio.timeout(EVENT_TIMEOUT):
            seen = 0
            while True:
                for event in self.events[seen:]:
                    if event.type is kind and (
                        instance_id is None
                        or (event.instance is not None and event.instance.id == instance_id)
                    ):
                        return event
                seen = len(self.events)
                self._changed.clear()
                await self._changed.wait()


@contextlib.asynccontextmanager
async def recorded(cache: ServiceCache) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    cache.add_listener(recorder)
    async with cache:
        yield recorder


async def caught_up(writer: ServiceDiscovery, recorder: Recorder, marker: str) -> None:
    """Register a marker instance after everything else and wait for the cache to
    add it: it has then seen every write before it (one session applies in order)."""
    await writer.register(api(marker))
    await recorder.saw(ADDED, marker)


async def server_view(reader: ServiceDiscovery, name: str = "api") -> list[ServiceInstance]:
    await reader.client.sync(BASE)
    return await reader.instances(name)


async def test_the_cache_builds_then_follows_adds_updates_and_removes(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        await writer.register(api("i-1"))
        await writer.register(api("i-2"))
        cache = reader.cache("api")
        early = cache.events()
        async with recorded(cache) as rec, early:
            assert cache.initialized
            assert await cache.wait_initialized(timeout=0) is True
            assert cache.instances() == [api("i-1"), api("i-2")]
            assert [(e.type, e.instance) for e in [await anext(early), await anext(early)]] == [
                (ADDED, api("i-1")),
                (ADDED, api("i-2")),
            ]
            initialized = await anext(early)
            assert initialized.type is INITIALIZED
            assert initialized.instances == (api("i-1"), api("i-2"))
            late = cache.events()
            assert (await anext(late)).type is INITIALIZED

            await writer.register(api("i-3"))
            await writer.update(api("i-1", enabled=False))
            await writer.unregister(api("i-2"))
            await rec.saw(REMOVED, "i-2")
            assert rec.kinds()[-3:] == [(ADDED, "i-3"), (UPDATED, "i-1"), (REMOVED, "i-2")]
            assert cache.instances() == [api("i-1", enabled=False), api("i-3")]
            assert cache.instance("i-1") == api("i-1", enabled=False)
            assert cache.instance("i-2") is None
            assert dict(cache.snapshot()) == {"i-1": api("i-1", enabled=False), "i-3": api("i-3")}
            removed = next(e for e in rec.events if e.type is REMOVED)
            assert removed.instance == api("i-2")  # its last known form
        assert (await anext(late)).type is ADDED
        with pytest.raises(StopAsyncIteration):
            while True:
                await anext(late)
    assert a.pending_watches == 0 and b.pending_watches == 0


async def test_a_service_that_appears_later_fills_the_cache(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, recorded(writer.cache("api")) as rec:
        assert rec.kinds() == [(INITIALIZED, None)]
        await writer.register(api("i-1"))
        await rec.saw(ADDED, "i-1")
    assert b.pending_watches == 0


async def test_a_node_that_is_not_an_instance_is_left_out_until_it_is_one(
    started: Started, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await started(2)
    await a.create(f"{BASE}/api/junk", b"not json", make_parents=True)
    async with ServiceDiscovery(b, BASE) as reader, recorded(reader.cache("api")) as rec:
        await a.set(f"{BASE}/api/junk", api("junk").to_json())
        await rec.saw(ADDED, "junk")
        await a.set(f"{BASE}/api/junk", b"{}")
        await rec.saw(REMOVED, "junk")
    assert "leaving out" in caplog.text


async def test_a_session_expiry_of_the_cache_resyncs_it_with_changes_made_meanwhile(
    started: Started,
) -> None:
    a, b = await started(2)
    async with (
        ServiceDiscovery(a, BASE) as writer,
        ServiceDiscovery(b, BASE) as reader,
    ):
        await writer.register(api("stays"))
        await writer.register(api("goes"))
        cache = reader.cache("api")
        async with recorded(cache) as rec:
            await expire_session(b, wait=False)
            await writer.unregister(api("goes"))
            await writer.register(api("new"))
            await rec.saw(RESYNCED)
            await caught_up(writer, rec, "zz-end")
            assert cache.instances() == await server_view(writer)
            assert [i.id for i in cache.instances()] == ["new", "stays", "zz-end"]


@pytest.mark.timeout(120)
async def test_a_server_restart_leaves_every_cache_equal_to_the_server(
    private_zookeeper, state_log
) -> None:
    connect = private_zookeeper.connect_string
    async with (
        aiocoord.connect(connect, namespace="/restart", session_timeout=30.0) as a,
        aiocoord.connect(connect, namespace="/restart", session_timeout=30.0) as b,
        ServiceDiscovery(a, BASE) as writer,
        ServiceDiscovery(b, BASE) as reader,
    ):
        log = state_log(b)
        for n in range(5):
            await writer.register(api(f"i-{n}"))
        caches = [reader.cache("api"), writer.cache("api")]
        async with recorded(caches[0]) as rec_b, recorded(caches[1]) as rec_a:
            await private_zookeeper.stop()
            await log.wait_for(ConnectionState.SUSPENDED)
            await private_zookeeper.start()
            await log.wait_for(ConnectionState.RECONNECTED)
            await rec_b.saw(RESYNCED)
            await rec_a.saw(RESYNCED)
            await writer.update(api("i-0", port=1))
            await writer.unregister(api("i-1"))
            for rec in (rec_a, rec_b):
                await caught_up(writer, rec, f"zz-{id(rec)}")
            expected = await server_view(reader)
            for cache in caches:
                assert cache.instances() == expected
            # The registrant's ephemeral nodes lived through the restart: its session did.
            assert len(expected) == 6


async def test_churn_of_five_registrants_leaves_the_cache_equal_to_the_server(
    started: Started,
) -> None:
    clients = await started(6)
    observer, registrants = clients[0], clients[1:]
    rng = random.Random(26)
    async with ServiceDiscovery(observer, BASE) as watcher:
        cache = watcher.cache("api")
        async with recorded(cache) as rec, contextlib.AsyncExitStack() as stack:
            discoveries = [
                await stack.enter_async_context(ServiceDiscovery(c, BASE)) for c in registrants
            ]

            async def churn(k: int, discovery: ServiceDiscovery) -> None:
                mine = [api(f"r{k}-{n}") for n in range(4)]
                for step in range(40):
                    instance = rng.choice(mine)
                    action = rng.random()
                    if action < 0.5:
                        await discovery.register(dataclasses.replace(instance, port=step))
                    elif action < 0.8 and instance in discovery.registered:
                        await discovery.update(dataclasses.replace(instance, port=1000 + step))
                    else:
                        await discovery.unregister(instance)

            await asyncio.gather(*(churn(k, d) for k, d in enumerate(discoveries)))
            for k, discovery in enumerate(discoveries):
                await caught_up(discovery, rec, f"zz-{k}")
            assert cache.instances() == await server_view(watcher)
            ids = [i.id for i in cache.instances()]
            assert len(ids) == len(set(ids))
            # A registrant that goes takes its DYNAMIC instances with it.
            await discoveries[0].aclose()
            await rec.saw(REMOVED, "zz-0")
            await caught_up(discoveries[1], rec, "zz-last")
            assert cache.instances() == await server_view(watcher)
            assert not [i for i in cache.instances() if i.id.startswith(("r0-", "zz-0"))]


async def test_tasks_sharing_one_cache_each_see_every_event(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        cache = reader.cache("api")
        async with cache:

            async def follow(events: aiocoord.ChangeStream[ServiceCacheEvent]) -> list[str]:
                seen: list[str] = []
                async with events:
                    async for event in events:
                        if event.type is ADDED:
                            assert event.instance is not None
                            seen.append(event.instance.id)
                            if event.instance.id == "i-9":
                                return seen
                return seen

            followers = [asyncio.create_task(follow(cache.events())) for _ in range(4)]
            for n in range(10):
                await writer.register(api(f"i-{n}"))
            async with asyncio.timeout(EVENT_TIMEOUT):
                results = await asyncio.gather(*followers)
            assert results == [[f"i-{n}" for n in range(10)]] * 4


async def test_closing_the_discovery_closes_its_caches(started: Started) -> None:
    (a,) = await started(1)
    discovery = ServiceDiscovery(a, BASE)
    async with discovery:
        cache = discovery.cache("api")
        await cache.start()
        events = cache.events()
    assert repr(cache).startswith("<ServiceCache '/services/api' closed")
    assert (await anext(events)).type is INITIALIZED
    with pytest.raises(StopAsyncIteration):
        await anext(events)
    with pytest.raises(RecipeClosedError):
        discovery.cache("api")
    assert a.pending_watches == 0 and a.background_tasks == 0
