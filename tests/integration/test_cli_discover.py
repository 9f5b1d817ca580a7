# ruff: noqa: F811  (the tests take test_cli's `cli` fixture, imported by name)
"""``aiocoord discover``: register, list and watch, run as a subprocess against a real server.

Each wait is on a line the CLI prints or on the server (a cache's events),
never on time.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

import pytest
from _kit import EVENT_TIMEOUT
from test_cli import WAITER, cli, one_line, run  # noqa: F401  (cli is a fixture)

import aiocoord
from aiocoord import ServiceCacheEventType, ServiceDiscovery, ServiceInstance, ServiceType

pytestmark = pytest.mark.timeout(60)


async def wait_for(
    discovery: ServiceDiscovery, kind: ServiceCacheEventType, instance_id: str | None = None
) -> aiocoord.ServiceInstance | None:
    """Follow service ``api`` until an event of ``kind`` (for ``instance_id``) comes;
    for ADDED, an instance already there counts."""
    cache = discovery.cache("api")
    async with asyncio.timeout(EVENT_TIMEOUT), cache.events() as events, cache:
        async for event in events:
            if event.type is ServiceCacheEventType.INITIALIZED and kind is (
                ServiceCacheEventType.ADDED
            ):
                for instance in event.instances or ():
                    if instance_id is None or instance.id == instance_id:
                        return instance
            if event.type is kind and (
                instance_id is None
                or (event.instance is not None and event.instance.id == instance_id)
            ):
                return event.instance
    raise AssertionError("the cache ended")


async def test_register_until_interrupted_then_gone(cli, coord) -> None:
    discovery = ServiceDiscovery(coord, "/services")
    registrant = await cli(
        "discover",
        "register",
        "api",
        "--address",
        "10.0.0.7",
        "--port",
        "8080",
        "--id",
        "i-1",
        "--payload",
        '{"zone": "eu-1"}',
        "--uri-spec",
        "{scheme}://{address}:{port}",
    )
    assert await registrant.line() == "/services/api/i-1"
    found = await discovery.instance("api", "i-1")
    assert found is not None
    assert (found.address, found.port, found.payload) == ("10.0.0.7", 8080, {"zone": "eu-1"})
    assert found.build_uri() == "http://10.0.0.7:8080"
    _data, stat = await coord.get("/services/api/i-1")
    assert stat.ephemeral_owner != 0

    code, out, _err = await run(cli, "discover", "list", "api", "--json")
    assert code == 0
    listed = json.loads(out)["services"]["api"]
    assert listed[0]["payload"] == {"@class": "java.util.LinkedHashMap", "zone": "eu-1"}

    registrant.signal(signal.SIGINT)
    await registrant.finish()
    assert registrant.returncode == 0
    assert await discovery.instances("api") == []


async def test_register_while_a_command_runs_and_pass_its_status(cli, coord) -> None:
    discovery = ServiceDiscovery(coord, "/services")
    registrant = await cli(
        "discover",
        "register",
        "api",
        "--address",
        "h",
        "--type",
        "static",
        "--",
        sys.executable,
        "-c",
        WAITER + "; sys.exit(3)",
        "svc",
    )
    node = await registrant.line()
    assert node.startswith("/services/api/")
    assert (await registrant.line()).startswith("start svc")
    [instance] = await discovery.instances("api")
    assert discovery.path_of("api", instance.id) == node
    assert instance.service_type is aiocoord.ServiceType.STATIC
    await registrant.send()
    assert await registrant.line() == "end svc"
    await registrant.finish()
    assert registrant.returncode == 3
    assert await discovery.instances("api") == []


async def test_list_shows_every_service_as_a_table(cli, coord) -> None:
    code, out, _err = await run(cli, "discover", "list")
    assert code == 0 and out.splitlines()[-1] == "(no services under /services)"
    async with ServiceDiscovery(coord, "/services") as discovery:
        await discovery.register(ServiceInstance(name="api", id="a", address="h", port=1))
        await discovery.register(
            ServiceInstance(name="db", id="d", address="x", ssl_port=5, enabled=False, payload=[1])
        )
        code, out, _err = await run(cli, "discover", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "NAME",
        "ID",
        "ADDRESS",
        "PORT",
        "SSL",
        "TYPE",
        "ENABLED",
        "PAYLOAD",
    ]
    assert lines[1].split() == ["api", "a", "h", "1", "-", "dynamic", "yes", "-"]
    assert lines[2].split() == ["db", "d", "x", "-", "5", "dynamic", "no", "[1]"]


async def test_watch_prints_added_updated_removed(cli, coord) -> None:
    async with ServiceDiscovery(coord, "/services") as discovery:
        await discovery.register(ServiceInstance(name="api", id="a", address="h", port=1))
        watcher = await cli("discover", "watch", "api", "--json")
        first = json.loads(await watcher.line())
        assert (first["event"], first["instance"]["id"]) == ("added", "a")
        assert json.loads(await watcher.line()) == {"event": "initialized", "instances": 1}
        await discovery.update(ServiceInstance(name="api", id="a", address="h", port=2))
        updated = json.loads(await watcher.line())
        assert (updated["event"], updated["instance"]["port"]) == ("updated", 2)
        await discovery.unregister(ServiceInstance(name="api", id="a", address="h"))
        assert json.loads(await watcher.line())["event"] == "removed"
        watcher.signal(signal.SIGINT)
        await watcher.finish()
        assert watcher.returncode == 0
        plain = await cli("discover", "watch", "api")
        assert await plain.line() == "initialized (0 instances)"
        await discovery.register(ServiceInstance(name="api", id="b", address="h", enabled=False))
        assert await plain.line() == "added api/b h (disabled)"
        plain.signal(signal.SIGTERM)
        await plain.finish()
        assert plain.returncode == 0


async def test_inspect_recognises_a_service(cli, coord) -> None:
    async with ServiceDiscovery(coord, "/services") as discovery:
        await discovery.register(ServiceInstance(name="api", id="a", address="h", port=1))
        await discovery.register(
            ServiceInstance(
                name="api", id="b", address="h", enabled=False, service_type=ServiceType.STATIC
            )
        )
        code, out, _err = await run(cli, "inspect", "/services", "--json")
        assert code == 0
        [service] = json.loads(out)["children"]
        assert service["kind"] == "service"
        assert [(i["id"], i["type"], i["enabled"]) for i in service["instances"]] == [
            ("a", "dynamic", True),
            ("b", "static", False),
        ]
        assert "session" in service["instances"][0] and "session" not in service["instances"][1]
        code, out, _err = await run(cli, "inspect", "/services/api")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].startswith("/services/api: service  [ServiceDiscovery")
        assert lines[0].endswith("2 instances")
        assert lines[1].split()[:4] == ["instance", "a", "h:1", "dynamic"]
        assert lines[2].split() == ["instance", "b", "h", "static", "disabled"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["discover", "register", "api", "--address", "h", "--port", "70000"], "--port"),
        (["discover", "register", "a/b", "--address", "h"], "invalid znode path"),
        (["discover", "register", "api", "--address", "h", "--payload", "{no"], "not JSON"),
        (["discover", "register", "api", "--address", "h", "--id", "x/y"], "invalid znode"),
        (["discover", "register", "api"], "needs NAME and --address"),
        (["discover", "watch"], "needs NAME"),
        (["discover", "list", "--port", "1"], "--port goes with discover register"),
        (["discover", "list", "--", "true"], "only discover register runs a command"),
        (["discover", "list", "--base", "services"], "invalid znode path"),
    ],
)
async def test_bad_input_exits_2_and_sends_nothing(cli, args, says) -> None:
    started = time.monotonic()
    code, out, err = await run(cli, *args, zk="127.0.0.1:1")
    assert code == 2 and out == ""
    assert says in one_line(err)
    assert time.monotonic() - started < 10
