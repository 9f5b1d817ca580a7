"""ServiceDiscovery: registering, listing and looking up instances on Curator's layout."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest
from _kit import Started

import aiocoord
from aiocoord import (
    ArgumentTypeError,
    CorruptValueError,
    DataTooLargeError,
    InvalidArgumentError,
    InvalidPathError,
    RecipeClosedError,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
)
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


BASE = "/services"


def api(instance_id: str = "i-1", **changes: object) -> ServiceInstance:
    fields: dict[str, object] = {"name": "api", "id": instance_id, "address": "10.0.0.7"}
    fields.update(port=8080, payload={"zone": "eu-1"}, registration_time=1795626267753)
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


async def test_register_list_look_up_update_and_unregister(started: Started) -> None:
    a, b = await started(2)
    reader = ServiceDiscovery(b, BASE)  # reads need no start
    assert await reader.names() == []
    assert await reader.instances("api") == []
    async with ServiceDiscovery(a, BASE) as discovery:
        one, two = api("i-1"), api("i-2", port=8081, service_type=ServiceType.STATIC)
        await discovery.register(one)
        await discovery.register(two)
        db = ServiceInstance(name="db", id="d", address="h")
        await discovery.register(db)
        assert await reader.names() == ["api", "db"]
        assert await reader.instances("api") == [one, two]
        assert await reader.instance("api", "i-2") == two
        assert await reader.instance("api", "nope") is None
        assert discovery.registered == [one, two, db]

        data, stat = await b.get(f"{BASE}/api/i-1")
        assert data == one.to_json()
        assert stat.ephemeral_owner == a.session_id  # DYNAMIC: ephemeral
        _data, stat = await b.get(f"{BASE}/api/i-2")
        assert stat.ephemeral_owner == 0  # STATIC: persistent

        moved = dataclasses.replace(one, port=9090, enabled=False)
        await discovery.update(moved)
        assert await reader.instance("api", "i-1") == moved

        await discovery.unregister(moved)
        assert await reader.instances("api") == [two]
        await discovery.unregister(moved)  # a missing node is no error
        with pytest.raises(InvalidArgumentError, match="not registered"):
            await discovery.update(moved)


async def test_aclose_unregisters_dynamic_and_static_instances_but_not_permanent(
    started: Started,
) -> None:
    a, b = await started(2)
    kinds = [ServiceType.DYNAMIC, ServiceType.STATIC, ServiceType.PERMANENT]
    async with ServiceDiscovery(a, BASE) as discovery:
        for kind in kinds:
            await discovery.register(api(kind.value.lower(), service_type=kind))
    assert [i.id for i in await ServiceDiscovery(b, BASE).instances("api")] == ["permanent"]
    reader = ServiceDiscovery(b, BASE)
    await reader.unregister(api("permanent"))  # any client may remove it
    assert await reader.instances("api") == []


async def test_the_instance_given_to_the_constructor_is_registered_by_start(
    started: Started,
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE, instance=api()):
        assert await ServiceDiscovery(b, BASE).instances("api") == [api()]
    assert await ServiceDiscovery(b, BASE).instances("api") == []


async def test_registering_an_id_again_replaces_its_node_even_another_sessions(
    started: Started,
) -> None:
    """As in Curator: the last registration of an id wins."""
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as first, ServiceDiscovery(b, BASE) as second:
        await first.register(api(port=1))
        await first.register(api(port=2))  # again, here: updated in place
        _data, stat = await b.get(f"{BASE}/api/i-1")
        assert stat.ephemeral_owner == a.session_id
        await second.register(api(port=3))
        data, stat = await a.get(f"{BASE}/api/i-1")
        assert stat.ephemeral_owner == b.session_id
        assert ServiceInstance.from_json(data).port == 3


async def test_a_dynamic_instance_comes_back_after_a_session_expiry_with_its_latest_data(
    started: Started,
) -> None:
    a, b = await started(2)
    reader = ServiceDiscovery(b, BASE)
    async with ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        await discovery.register(api("static", service_type=ServiceType.STATIC))
        changes = b.data_changes(f"{BASE}/api/i-1")
        async with changes:
            assert await anext(changes) is not None
            old_session = a.session_id
            await expire_session(a, wait=False)
            # The node goes with the session and comes back in the new one (an
            # observer may not see it gone: data_changes skips to the latest).
            await discovery.update(api(port=9999))  # while it may still be away
            async with asyncio.timeout(20):
                while True:
                    seen = await anext(changes)
                    if (
                        seen is not None
                        and seen[1].ephemeral_owner != old_session
                        and ServiceInstance.from_json(seen[0]).port == 9999
                    ):
                        break
            _data, stat = seen
            assert stat.ephemeral_owner == a.session_id
        assert sorted(await b.children(f"{BASE}/api")) == ["i-1", "static"]
        assert [i.port for i in await reader.instances("api")] == [9999, 8080]


async def test_instances_skips_a_node_that_is_not_an_instance(started: Started) -> None:
    (a,) = await started(1)
    await a.create(f"{BASE}/api/junk", b"not json", make_parents=True)
    await a.create(f"{BASE}/api/ok", api("ok").to_json())
    discovery = ServiceDiscovery(a, BASE)
    assert await discovery.instances("api") == [api("ok")]
    with pytest.raises(CorruptValueError, match="junk"):
        await discovery.instance("api", "junk")


async def test_reads_a_curator_instance_without_enabled(started: Started) -> None:
    (a,) = await started(1)
    written = (
        b'{"name":"api","id":"i-1","address":"10.0.0.7","port":8080,"sslPort":null,'
        b'"payload":{"@class":"java.util.LinkedHashMap","zone":"eu-1"},'
        b'"registrationTimeUTC":1795626267753,"serviceType":"DYNAMIC","uriSpec":null}'
    )
    await a.create(f"{BASE}/api/i-1", written, make_parents=True)
    found = await ServiceDiscovery(a, BASE).instance("api", "i-1")
    assert found == api()


# --- bad input: typed errors, nothing written ------------------------------------------------


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: api(port=70000), InvalidArgumentError),
        (lambda: api("a/b"), InvalidPathError),
        (lambda: api(payload={"x": {1, 2}}), ArgumentTypeError),
        (lambda: api(payload=float("nan")), InvalidArgumentError),
    ],
)
def test_a_bad_instance_is_refused_when_made(make: Callable[[], object], error: type) -> None:
    with pytest.raises(error):
        make()


async def test_bad_input_is_refused_before_anything_is_written(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as discovery:
        big = api(payload={"blob": "x" * (a.max_data_size + 1)})
        with pytest.raises(DataTooLargeError):
            await discovery.register(big)
        with pytest.raises(ArgumentTypeError):
            await discovery.register({"name": "api"})  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="DYNAMIC_SEQUENTIAL"):
            await discovery.register(api(service_type=ServiceType.DYNAMIC_SEQUENTIAL))
        # Just under the data limit, but the request (path and headers) is over it.
        near = a.max_data_size - len(api(payload={"blob": ""}).to_json())
        with pytest.raises(DataTooLargeError):
            await discovery.register(api(payload={"blob": "x" * near}))
        with pytest.raises(InvalidPathError):
            await discovery.instances("a/b")
        assert discovery.registered == []
    await b.sync("/")
    assert await b.exists(BASE) is None  # not even the parents


def test_constructor_checks(idle_client: aiocoord.Client) -> None:
    with pytest.raises(InvalidPathError):
        ServiceDiscovery(idle_client, "services")
    with pytest.raises(InvalidPathError):
        ServiceDiscovery(idle_client, "/zookeeper/x")
    with pytest.raises(ArgumentTypeError):
        ServiceDiscovery(idle_client, BASE, instance="api")  # type: ignore[arg-type]
    assert "ServiceDiscovery '/services' new" in repr(ServiceDiscovery(idle_client, BASE))


async def test_register_needs_a_started_discovery(started: Started) -> None:
    (a,) = await started(1)
    discovery = ServiceDiscovery(a, BASE)
    with pytest.raises(RuntimeError, match="not started"):
        await discovery.register(api())
    await discovery.aclose()
    with pytest.raises(RecipeClosedError):
        await discovery.register(api())


async def test_tasks_sharing_one_discovery_register_and_update_concurrently(
    started: Started,
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as discovery:

        async def one(n: int) -> None:
            await discovery.register(api(f"i-{n}", port=n))
            await discovery.update(api(f"i-{n}", port=n + 1000))

        await asyncio.gather(*(one(n) for n in range(20)))
        await asyncio.gather(*(discovery.register(api("same", port=n)) for n in range(10)))
        found = await ServiceDiscovery(b, BASE).instances("api")
        assert sorted(i.port or 0 for i in found if i.id != "same") == [n + 1000 for n in range(20)]
        assert len(found) == 21
