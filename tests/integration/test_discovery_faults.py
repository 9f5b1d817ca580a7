"""ServiceDiscovery under faults: lost replies, dropped connections, expiries, cancellation.

The invariant throughout: one node per registered instance, ours, holding the
latest data; nothing left behind by a register that did not complete.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from _kit import EVENT_TIMEOUT, Started

import aiocoord
from aiocoord import ConnectionState, ServiceDiscovery, ServiceInstance, ServiceType
from aiocoord.testing import TcpProxy, ZooKeeperTarget, drop_connection, expire_session

pytestmark = pytest.mark.timeout(60)


BASE = "/services"
NODE = f"{BASE}/api/i-1"


def api(instance_id: str = "i-1", **changes: object) -> ServiceInstance:
    fields: dict[str, object] = {"name": "api", "id": instance_id, "address": "10.0.0.7"}
    fields.update(port=8080, registration_time=1)
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def proxy(zookeeper: ZooKeeperTarget) -> AsyncIterator[TcpProxy]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    async with TcpProxy(host, int(port)) as proxy:
        yield proxy


@pytest.fixture
def through(proxy: TcpProxy, zookeeper: ZooKeeperTarget) -> Callable[[], aiocoord.Client]:
    """A client (not started: use ``async with``) whose network goes through ``proxy``."""
    return lambda: aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)


async def test_a_node_our_session_already_made_is_kept_not_made_twice(started: Started) -> None:
    """As after a create whose reply was lost: the node is ours, so it is adopted
    (same node, our latest data), not deleted and made again."""
    a, b = await started(2)
    await a.create(NODE, b"stale", ephemeral=True, make_parents=True)
    _data, before = await b.get(NODE)
    async with ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        data, after = await b.get(NODE)
        assert after.czxid == before.czxid and after.ephemeral_owner == a.session_id
        assert data == api().to_json()
        assert await b.children(f"{BASE}/api") == ["i-1"]


async def test_a_dropped_connection_keeps_the_node_and_an_update_made_meanwhile_lands(
    started: Started, state_log: Any
) -> None:
    a, b = await started(2)
    log = state_log(a)
    async with ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        await discovery.register(api("static", service_type=ServiceType.STATIC))
        _data, before = await b.get(NODE)
        drop_connection(a)
        await discovery.update(api(port=9090))  # sent once the connection is back
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.RECONNECTED)
        await discovery.update(api(port=9091))
        data, after = await b.get(NODE)
        assert after.czxid == before.czxid  # the same node all along
        assert ServiceInstance.from_json(data).port == 9091
        assert sorted(await b.children(f"{BASE}/api")) == ["i-1", "static"]


async def test_an_expiry_remakes_dynamic_nodes_and_leaves_static_ones_alone(
    started: Started,
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        await discovery.register(api("static", service_type=ServiceType.STATIC))
        _data, static_before = await b.get(f"{BASE}/api/static")
        async with b.data_changes(NODE) as changes:
            assert await anext(changes) is not None
            old_session = a.session_id
            await expire_session(a)  # returns once a new session is connected
            async with asyncio.timeout(EVENT_TIMEOUT):
                while (seen := await anext(changes)) is None or (
                    seen[1].ephemeral_owner == old_session
                ):
                    pass
        assert seen[1].ephemeral_owner == a.session_id  # made in the first new session
        _data, static_after = await b.get(f"{BASE}/api/static")
        assert static_after.czxid == static_before.czxid and static_after.version == 0
        assert sorted(await b.children(f"{BASE}/api")) == ["i-1", "static"]


async def test_a_register_cancelled_with_its_create_in_flight_leaves_no_node(
    started: Started,
    through: Callable[[], aiocoord.Client],
    proxy: TcpProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (b,) = await started(1)
    a = through()
    async with a, ServiceDiscovery(a, BASE) as discovery:
        await a.ensure_path(f"{BASE}/api")
        sent = asyncio.Event()
        original = a.create_with_stat

        async def create_with_stat(*args: Any, **kwargs: Any) -> Any:
            proxy.hold()  # the create is written, and stays in the proxy
            sent.set()
            return await original(*args, **kwargs)

        monkeypatch.setattr(a, "create_with_stat", create_with_stat)
        registering = asyncio.create_task(discovery.register(api()))
        await sent.wait()
        registering.cancel()
        proxy.release()  # the create applies; the cleanup, sent after it, deletes it
        with pytest.raises(asyncio.CancelledError):
            await registering
        await b.sync("/")
        assert await b.children(f"{BASE}/api") == []
        assert discovery.registered == []


async def test_a_re_register_that_is_cancelled_keeps_the_earlier_registration(
    started: Started,
    through: Callable[[], aiocoord.Client],
    proxy: TcpProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Registering an instance again and cancelling that leaves it registered (in
    its earlier or its new form): a cancelled update is no unregister."""
    (b,) = await started(1)
    a = through()
    async with a, ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        sent = asyncio.Event()
        original = a.set

        async def set_data(*args: Any, **kwargs: Any) -> Any:
            proxy.hold()  # the rewrite of the node is written, and stays in the proxy
            sent.set()
            return await original(*args, **kwargs)

        monkeypatch.setattr(a, "set", set_data)
        again = asyncio.create_task(discovery.register(api(port=1)))
        await sent.wait()
        again.cancel()
        proxy.release()
        with pytest.raises(asyncio.CancelledError):
            await again
        assert [i.id for i in discovery.registered] == ["i-1"]
        await a.sync("/")
        await b.sync("/")
        assert await b.exists(NODE) is not None


async def test_closing_with_the_server_away_still_unregisters_once_it_is_back(
    started: Started, proxy: TcpProxy, state_log: Any
) -> None:
    (b,) = await started(1)
    a = aiocoord.connect(proxy.connect_string, namespace=b.namespace, session_timeout=30.0)
    log = state_log(a)
    async with a:
        discovery = ServiceDiscovery(a, BASE)
        await discovery.start()
        await discovery.register(api("static", service_type=ServiceType.STATIC))
        proxy.refuse(True)
        proxy.cut()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.SUSPENDED)
        closing = asyncio.create_task(discovery.aclose())
        proxy.refuse(False)
        async with asyncio.timeout(EVENT_TIMEOUT):
            await closing
        await b.sync("/")
        assert await b.exists(f"{BASE}/api/static") is None


async def test_an_update_changes_a_dynamic_instance_into_a_static_one(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as discovery:
        await discovery.register(api())
        await discovery.update(dataclasses.replace(api(), service_type=ServiceType.STATIC))
        _data, stat = await b.get(NODE)
        assert stat.ephemeral_owner == 0
    assert await b.exists(NODE) is None  # a STATIC instance goes with aclose() too


async def test_a_register_waiting_behind_a_cancelled_one_still_registers(
    started: Started,
    through: Callable[[], aiocoord.Client],
    proxy: TcpProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (b,) = await started(1)
    a = through()
    async with a, ServiceDiscovery(a, BASE) as discovery:
        sent = asyncio.Event()
        original = a.create_with_stat

        async def create_with_stat(*args: Any, **kwargs: Any) -> Any:
            if not sent.is_set():
                proxy.hold()  # the first create is written, and stays in the proxy
                sent.set()
            return await original(*args, **kwargs)

        monkeypatch.setattr(a, "create_with_stat", create_with_stat)
        first = asyncio.create_task(discovery.register(api(port=1)))
        await sent.wait()
        second = asyncio.create_task(discovery.register(api(port=2)))  # waits for the first
        first.cancel()
        proxy.release()
        with pytest.raises(asyncio.CancelledError):
            await first
        async with asyncio.timeout(EVENT_TIMEOUT):
            await second
        assert discovery.registered == [api(port=2)]
        await b.sync("/")
        data, stat = await b.get(NODE)
        assert ServiceInstance.from_json(data).port == 2 and stat.ephemeral_owner == a.session_id
