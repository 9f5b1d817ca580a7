"""aiocoord on uvloop, the event loop uvicorn and other ASGI servers run when it is installed.

uvloop's transports are not subclasses of ``asyncio.Transport``: until
2026-11-26 a check for that class refused every connection on uvloop, and no
test ran there. These run the session's paths that touch the loop's transports
(handshake, a reply larger than the read buffer, requests written together,
watch events, a cut connection resumed in the same session, TLS, the test
kit's proxy) and two recipes shared by several tasks and clients.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from _exclusion import Exclusion

import aiocoord
from aiocoord import AtomicLong, ConnectionState, EventType, Mutex
from aiocoord.testing import TcpProxy, ZooKeeperServer, ZooKeeperTarget

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not run on Windows"),
]

T = TypeVar("T")


def on_uvloop(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run ``scenario`` to its end on a fresh uvloop event loop."""
    import uvloop  # in the test extra on every platform uvloop supports

    async def checked() -> T:
        assert type(asyncio.get_running_loop()) is uvloop.Loop
        return await scenario()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(checked())


def test_requests_replies_and_watches(zookeeper: ZooKeeperTarget) -> None:
    async def scenario() -> None:
        async with (
            aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace) as client,
            aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace) as other,
        ):
            assert client.state is ConnectionState.CONNECTED
            # A reply ten times the read buffer's usual 64 KiB.
            big = bytes(range(256)) * 2600
            await client.create("/big", big)
            assert (await client.get("/big"))[0] == big
            # Many requests made in one loop pass leave together.
            await asyncio.gather(*(client.create(f"/big/n{i:03}") for i in range(200)))
            names = await client.children("/big")
            assert sorted(names) == [f"n{i:03}" for i in range(200)]
            _data, _stat, watch = await client.watch_data("/big/n007")
            await other.set("/big/n007", b"changed")
            async with asyncio.timeout(10):
                assert (await watch).type is EventType.CHANGED

    on_uvloop(scenario)


def test_a_cut_connection_resumes_the_same_session(zookeeper: ZooKeeperTarget, state_log) -> None:
    host, port = zookeeper.connect_string.rsplit(":", 1)

    async def scenario() -> None:
        async with TcpProxy(host, int(port)) as proxy:
            client = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)
            async with client:
                session = client.session_id
                await client.create("/mine", ephemeral=True)
                log = state_log(client)
                proxy.cut()
                async with asyncio.timeout(20):
                    await log.wait_for(ConnectionState.RECONNECTED)
                assert log.states[:2] == [ConnectionState.SUSPENDED, ConnectionState.RECONNECTED]
                assert client.session_id == session
                assert (await client.exists("/mine")) is not None

    on_uvloop(scenario)


def test_tls() -> None:
    async def scenario() -> None:
        async with ZooKeeperServer(tls=True) as server:
            context = server.client_ssl_context()
            async with aiocoord.connect(server.secure_connect_string, ssl_context=context) as c:
                assert c.connected_to == ("127.0.0.1", server.secure_port)
                await c.create("/tls", b"x" * 200_000)
                assert (await c.get("/tls"))[0] == b"x" * 200_000

    on_uvloop(scenario)


def test_a_mutex_and_a_counter_shared_by_tasks_and_clients(zookeeper: ZooKeeperTarget) -> None:
    async def scenario() -> None:
        clients = [
            aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace)
            for _ in range(3)
        ]
        for client in clients:
            await client.start()
        try:
            exclusion = Exclusion()
            # One object of each per client, shared by that client's tasks.
            locks = [Mutex(client, "/lock") for client in clients]
            counters = [AtomicLong(client, "/count") for client in clients]

            async def worker(index: int) -> None:
                which = index % len(clients)
                for _ in range(5):
                    async with locks[which]:
                        with exclusion.hold(index):
                            await asyncio.sleep(0)
                    # Adds from several tasks and clients at once: the combining path.
                    assert (await counters[which].increment()).succeeded

            await asyncio.gather(*(worker(i) for i in range(9)))
            exclusion.assert_kept(entries=9 * 5)
            assert (await counters[0].get()).post_value == 9 * 5
        finally:
            for client in clients:
                await client.aclose()

    on_uvloop(scenario)
