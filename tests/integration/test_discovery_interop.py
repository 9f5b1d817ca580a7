"""Service discovery with Apache Curator's curator-x-discovery on the same base path,
both ways (tests/interop/CuratorDiscovery.java): Curator registers and we list, cache
and pick; we register and Curator's queryForNames, queryForInstances, queryForInstance,
ServiceProvider and ServiceCache see ours, payload, uriSpec and enabled flag included.

Curator's payloads here are ``java.util.Map`` through ``JsonInstanceSerializer<Map>``,
so their JSON carries Jackson's ``"@class"`` marker. Curator's default serializer
(``compatible``, what ``ServiceDiscoveryBuilder.builder(Map.class)`` uses) writes its
older layout without ``enabled``: an instance Java registers with ``enabled(false)``
reads as enabled everywhere, Curator included. The ``full`` serializer writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _curator import finish, read_line, send_line, start_curator
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ProviderStrategy,
    ServiceCacheEvent,
    ServiceCacheEventType,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
)
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(90)

BASE = "/services"
MAP_CLASS = "java.util.LinkedHashMap"


class Curator:
    """One running CuratorDiscovery program: JSON commands in, ``KIND <json>`` lines out.

    Lines are handed out by kind, so a cache's ``CACHE`` lines may interleave with the
    answers to commands."""

    def __init__(self, proc: asyncio.subprocess.Process, base: str) -> None:
        self.proc = proc
        self.base = base
        self._unread: list[tuple[str, Any]] = []

    async def line(self, kind: str, timeout: float = EVENT_TIMEOUT) -> Any:
        """The value of its next ``kind`` line."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    for i, (seen, value) in enumerate(self._unread):
                        if seen == kind:
                            del self._unread[i]
                            return value
                    text = await read_line(self.proc)
                    seen, _, rest = text.partition(" ")
                    assert seen != "ERROR", rest
                    self._unread.append((seen, json.loads(rest) if rest else None))
        except TimeoutError:
            raise AssertionError(f"no {kind} line in {timeout} s; others: {self._unread}") from None

    async def ask(self, op: str, answer: str, **fields: Any) -> Any:
        await send_line(self.proc, json.dumps({"op": op, **fields}))
        return await self.line(answer)

    async def register(self, **instance: Any) -> None:
        assert await self.ask("register", "REGISTERED", **instance) == instance["id"]

    async def update(self, **instance: Any) -> None:
        assert await self.ask("update", "UPDATED", **instance) == instance["id"]

    async def unregister(self, name: str, instance_id: str) -> None:
        assert (
            await self.ask("unregister", "UNREGISTERED", name=name, id=instance_id) == instance_id
        )

    async def names(self) -> list[str]:
        return list(await self.ask("names", "NAMES"))

    async def instances(self, name: str) -> list[dict[str, Any]]:
        return list(await self.ask("instances", "INSTANCES", name=name))

    async def instance(self, name: str, instance_id: str) -> dict[str, Any] | None:
        seen: dict[str, Any] | None = await self.ask(
            "instance", "INSTANCE", name=name, id=instance_id
        )
        return seen

    async def cache_until(self, want: Any, timeout: float = EVENT_TIMEOUT) -> list[dict[str, Any]]:
        """Wait for the Curator cache's view (``CACHE`` lines) to satisfy ``want``."""
        view: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(timeout):
                while not want(view):
                    view = list(await self.line("CACHE", timeout=timeout))
        except TimeoutError:
            raise AssertionError(f"Curator's cache never got there; last view {view}") from None
        return view

    async def finish(self) -> list[str]:
        """Close its stdin and wait for it to end: whatever it printed that no one read."""
        rest = (await finish(self.proc, timeout=30)).split("\n")
        return [f"{k} {v}" for k, v in self._unread] + [line for line in rest if line]


@contextlib.asynccontextmanager
async def curator(
    classpath: str, zookeeper: ZooKeeperTarget, mode: str = "compatible"
) -> AsyncIterator[Curator]:
    base = zookeeper.namespace + BASE
    proc = await start_curator(classpath, "CuratorDiscovery", zookeeper.connect_string, base, mode)
    try:
        yield Curator(proc, base)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def java_instance(instance_id: str, **changes: Any) -> dict[str, Any]:
    """An instance as the Java program registers it."""
    fields: dict[str, Any] = {
        "name": "api",
        "id": instance_id,
        "address": "10.0.0.7",
        "port": 8080,
        "sslPort": None,
        "payload": {"zone": "eu-1", "weight": 3, "tags": ["a", "b"], "limits": {"rps": 2.5}},
        "uriSpec": "{scheme}://{address}:{port}/v1/{name}",
        "serviceType": "DYNAMIC",
        "enabled": True,
        "registrationTimeUTC": 1795626267753,
    }
    fields.update(changes)
    return fields


def ours(instance_id: str, **changes: Any) -> ServiceInstance:
    fields: dict[str, Any] = {
        "name": "api",
        "id": instance_id,
        "address": "10.0.0.8",
        "port": 9090,
        "payload": {"zone": "us-2", "weight": 5, "tags": ["py"], "nested": {"ok": True}},
        "uri_spec": "{scheme}://{address}:{port}/api/{id}",
        "registration_time": 1795626267999,
    }
    fields.update(changes)
    return ServiceInstance(**fields)


def as_curator_reads(instance: ServiceInstance) -> dict[str, Any]:
    """What Curator's reader should make of one of our instances (as the Java program
    prints it)."""
    return {
        "name": instance.name,
        "id": instance.id,
        "address": instance.address,
        "port": instance.port,
        "sslPort": instance.ssl_port,
        "payload": instance.payload,
        "payloadClass": None if instance.payload is None else MAP_CLASS,
        "registrationTimeUTC": instance.registration_time,
        "serviceType": instance.service_type.value,
        "enabled": instance.enabled,
        "uriSpec": instance.uri_spec,
        "uri": instance.build_uri() if instance.uri_spec is not None else None,
    }


def matches_java(instance: ServiceInstance, seen: dict[str, Any]) -> None:
    """Our reading of an instance equals Curator's (as the Java program prints it)."""
    assert instance.name == seen["name"]
    assert instance.id == seen["id"]
    assert instance.address == seen["address"]
    assert instance.port == seen["port"]
    assert instance.ssl_port == seen["sslPort"]
    assert instance.payload == seen["payload"]
    assert instance.payload_type is None  # java.util.LinkedHashMap: the default
    assert instance.registration_time == seen["registrationTimeUTC"]
    assert instance.service_type.value == seen["serviceType"]
    assert instance.enabled == seen["enabled"]
    assert instance.uri_spec == seen["uriSpec"]
    if seen["uri"] is not None:
        assert instance.build_uri() == seen["uri"]


# --- Curator registers, we read ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["compatible", "full"])
async def test_curators_instances_are_listed_and_looked_up_with_payload_and_uri_spec(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client, mode: str
) -> None:
    async with curator(curator_classpath, zookeeper, mode) as java:
        await java.register(**java_instance("i-1", sslPort=8443))
        await java.register(
            **java_instance(
                "i-2", payload=None, uriSpec=None, serviceType="STATIC", address="10.0.0.9"
            )
        )
        await java.register(**java_instance("i-3", enabled=False, port=8082))
        await java.register(**java_instance("w-1", name="worker", uriSpec="{[}{name}{]}"))
        seen = {i["id"]: i for i in await java.instances("api")}
        # Curator's default serializer does not write `enabled`: its reader, like
        # ours, then takes the instance as enabled.
        assert seen["i-3"]["enabled"] is (mode == "compatible")

        discovery = ServiceDiscovery(coord, BASE)
        assert await discovery.names() == ["api", "worker"]
        listed = await discovery.instances("api")
        assert [i.id for i in listed] == ["i-1", "i-2", "i-3"]
        for instance in listed:
            matches_java(instance, seen[instance.id])
        assert listed[0].build_uri() == "https://10.0.0.7:8080/v1/api"  # an ssl port: https
        assert listed[1].payload is None and listed[1].service_type is ServiceType.STATIC
        assert listed[1].uri_spec is None
        assert listed[0].extra == {}
        (worker,) = await discovery.instances("worker")
        assert worker.build_uri() == "{worker}" == (await java.instance("worker", "w-1"))["uri"]
        looked_up = await discovery.instance("api", "i-1")
        assert looked_up == listed[0]
        assert await discovery.instance("api", "nope") is None
        assert await java.finish() == ["DONE"]


async def test_our_cache_follows_curators_registrations(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client
) -> None:
    async with curator(curator_classpath, zookeeper, "full") as java:
        await java.register(**java_instance("i-1"))
        async with ServiceDiscovery(coord, BASE) as discovery, discovery.cache("api") as cache:
            events = cache.events()
            try:

                async def next_change() -> ServiceCacheEvent:
                    async with asyncio.timeout(EVENT_TIMEOUT):
                        async for event in events:
                            if event.type is not ServiceCacheEventType.INITIALIZED:
                                return event
                    raise AssertionError("the cache's events ended")

                (first,) = cache.instances()
                matches_java(first, (await java.instances("api"))[0])
                await java.register(**java_instance("i-2", enabled=False, sslPort=8443))
                added = await next_change()
                assert added.type is ServiceCacheEventType.ADDED
                assert added.instance is not None
                matches_java(added.instance, (await java.instances("api"))[1])
                assert not added.instance.enabled
                await java.update(**java_instance("i-1", payload={"zone": "moved"}, port=1234))
                updated = await next_change()
                assert updated.type is ServiceCacheEventType.UPDATED
                assert updated.instance is not None
                assert (updated.instance.port, updated.instance.payload) == (
                    1234,
                    {"zone": "moved"},
                )
                await java.unregister("api", "i-2")
                removed = await next_change()
                assert removed.type is ServiceCacheEventType.REMOVED
                assert removed.instance is not None and removed.instance.id == "i-2"
                assert [i.id for i in cache.instances()] == ["i-1"]
            finally:
                await events.aclose()
        assert await java.finish() == ["DONE"]


@pytest.mark.parametrize("strategy", list(ProviderStrategy))
async def test_our_provider_picks_curators_enabled_instances(
    curator_classpath: str,
    zookeeper: ZooKeeperTarget,
    coord: aiocoord.Client,
    strategy: ProviderStrategy,
) -> None:
    async with curator(curator_classpath, zookeeper, "full") as java:
        for instance_id in ("i-1", "i-2", "i-3"):
            await java.register(**java_instance(instance_id, enabled=instance_id != "i-2"))
        async with (
            ServiceDiscovery(coord, BASE) as discovery,
            discovery.provider("api", strategy=strategy) as provider,
        ):
            assert [i.id for i in provider.instances()] == ["i-1", "i-3"]
            picks = []
            for _ in range(40):
                async with provider.using() as picked:
                    picks.append(picked.id)
            assert set(picks) <= {"i-1", "i-3"}  # never the disabled i-2
            if strategy is ProviderStrategy.ROUND_ROBIN:
                assert picks.count("i-1") == picks.count("i-3") == 20
            # Two errors take an instance out of rotation (Curator's DownInstancePolicy).
            (three,) = [i for i in provider.instances() if i.id == "i-3"]
            provider.note_error(three)
            provider.note_error(three)
            assert {provider.pick().id for _ in range(10)} == {"i-1"}  # type: ignore[union-attr]
        assert await java.finish() == ["DONE"]


# --- we register, Curator reads -----------------------------------------------------------


async def test_our_instances_are_seen_by_curators_queries(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client
) -> None:
    mine = [
        ours("p-1", ssl_port=9443),
        ours("p-2", enabled=False, payload={"draining": True}),
        ours("p-3", service_type=ServiceType.STATIC, payload=None, uri_spec=None),
        ours("p-4", service_type=ServiceType.PERMANENT, uri_spec="{[}{address}{]}:{ssl-port}"),
        ours("q-1", name="queue", address=None, port=None, payload={}),
    ]
    async with ServiceDiscovery(coord, BASE) as discovery:
        for instance in mine:
            await discovery.register(instance)
        async with curator(curator_classpath, zookeeper) as java:
            assert await java.names() == ["api", "queue"]
            expected = [as_curator_reads(i) for i in mine if i.name == "api"]
            assert await java.instances("api") == expected
            assert await java.instances("queue") == [as_curator_reads(mine[4])]
            assert await java.instance("api", "p-2") == as_curator_reads(mine[1])
            assert await java.instance("api", "nope") is None
            # Curator builds the same URIs from our uriSpec.
            assert (await java.instance("api", "p-1"))["uri"] == "https://10.0.0.8:9090/api/p-1"
            assert (await java.instance("api", "p-4"))["uri"] == "{10.0.0.8}:"
            # What we change and take away, Curator sees.
            changed = dataclasses.replace(mine[0], payload={"zone": "moved"}, enabled=False)
            await discovery.update(changed)
            await discovery.unregister(mine[2])
            expected = [as_curator_reads(i) for i in (changed, mine[1], mine[3])]
            assert await java.instances("api") == expected
            assert await java.finish() == ["DONE"]
        await discovery.unregister(mine[3])  # PERMANENT: it would outlive aclose()


async def test_curators_provider_picks_our_enabled_instances_only(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client
) -> None:
    async with ServiceDiscovery(coord, BASE) as discovery:
        for instance in (ours("p-1"), ours("p-2", enabled=False), ours("p-3"), ours("p-4")):
            await discovery.register(instance)
        async with curator(curator_classpath, zookeeper) as java:
            assert await java.ask("provider", "PROVIDER", name="api", strategy="round-robin")
            picks = await java.ask("pick", "PICKS", name="api", count=30)
            assert sorted(set(picks)) == ["p-1", "p-3", "p-4"]  # never the draining p-2
            assert {picks.count(i) for i in ("p-1", "p-3", "p-4")} == {10}
            # Our update takes p-3 out of rotation for Curator too, once its cache hears.
            await discovery.update(ours("p-3", enabled=False))
            assert await java.ask("provider", "PROVIDER", name="api", strategy="random")
            picks = await java.ask("pick", "PICKS", name="api", count=40)
            assert set(picks) == {"p-1", "p-4"}
            assert await java.finish() == ["DONE"]


async def test_curators_service_cache_follows_our_registrations(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client
) -> None:
    async with ServiceDiscovery(coord, BASE) as discovery:
        first = ours("p-1")
        await discovery.register(first)
        async with curator(curator_classpath, zookeeper) as java:
            assert await java.ask("cache", "CACHING", name="api") == [as_curator_reads(first)]
            second = ours("p-2", payload={"zone": "x"}, enabled=False)
            await discovery.register(second)
            want = [as_curator_reads(first), as_curator_reads(second)]
            await java.cache_until(lambda view: view == want)
            moved = dataclasses.replace(first, port=9999, payload={"zone": "y"})
            await discovery.update(moved)
            want = [as_curator_reads(moved), as_curator_reads(second)]
            await java.cache_until(lambda view: view == want)
            await discovery.unregister(moved)
            await java.cache_until(lambda view: view == [as_curator_reads(second)])
            assert (await java.finish())[-1] == "DONE"


# --- what a newer Curator adds --------------------------------------------------------------


async def test_a_field_a_newer_curator_adds_survives_our_update(
    curator_classpath: str, zookeeper: ZooKeeperTarget, coord: aiocoord.Client
) -> None:
    """An instance a newer Curator wrote, with fields this version does not know: we read
    it, take it over and update it, and its unknown fields are still there, for Curator
    too (its reader ignores what it does not know)."""
    newer = {"weight": 7, "zones": ["eu-1", "eu-2"], "health": {"path": "/ready"}}
    async with curator(curator_classpath, zookeeper, "full") as java:
        path = f"{java.base}/api/n-1"
        assert await java.ask(
            "raw", "RAW", path=path, extra=newer, **java_instance("n-1", serviceType="STATIC")
        )
        discovery = ServiceDiscovery(coord, BASE)
        read = await discovery.instance("api", "n-1")
        assert read is not None
        assert dict(read.extra) == newer
        matches_java(read, (await java.instances("api"))[0])
        async with discovery:
            await discovery.register(dataclasses.replace(read, port=9001))
            drained = dataclasses.replace(read, port=9001, enabled=False, payload={"zone": "z"})
            await discovery.update(drained)
            data, _stat = await coord.get(f"{BASE}/api/n-1")
            written = json.loads(data)
            assert {key: written[key] for key in newer} == newer
            assert written["payload"] == {"@class": MAP_CLASS, "zone": "z"}
            assert written["enabled"] is False
            assert await discovery.instance("api", "n-1") == drained
            seen = await java.instance("api", "n-1")
            assert seen is not None
            assert (seen["port"], seen["enabled"], seen["payload"]) == (9001, False, {"zone": "z"})
            await discovery.unregister(drained)
        assert await java.finish() == ["DONE"]
