"""TcpProxy: a client's network stalled, cut or refused while its server keeps running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import aiocoord
from aiocoord import ConnectionLossError, ConnectionState
from aiocoord.testing import TcpProxy, ZooKeeperTarget, expire_session

C, S, R, L = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.RECONNECTED,
    ConnectionState.LOST,
)

pytestmark = pytest.mark.timeout(60)


def _server_address(zookeeper: ZooKeeperTarget) -> tuple[str, int]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    return host, int(port)


@pytest_asyncio.fixture
async def proxy(zookeeper: ZooKeeperTarget) -> AsyncIterator[TcpProxy]:
    async with TcpProxy(*_server_address(zookeeper)) as proxy:
        yield proxy


def _through(proxy: TcpProxy, zookeeper: ZooKeeperTarget) -> aiocoord.Client:
    return aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)


async def _still_pending(waiter: asyncio.Future[object], seconds: float = 0.3) -> bool:
    """A negative check: ``waiter`` has not finished within ``seconds``."""
    done, _ = await asyncio.wait({waiter}, timeout=seconds)
    return not done


async def test_a_client_works_through_the_proxy(proxy: TcpProxy, zookeeper) -> None:
    async with _through(proxy, zookeeper) as client:
        await client.create("/n", b"v")
        data, _stat = await client.get("/n")
        assert data == b"v"
        assert client.connected_to == proxy.address
        assert (proxy.accepted, proxy.connections) == (1, 1)


async def test_hold_keeps_bytes_and_a_close_until_release() -> None:
    received: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    accepted = asyncio.Event()

    async def read_to_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        try:
            received.set_result(await reader.read())
        finally:
            writer.close()
            await writer.wait_closed()

    async with (
        await asyncio.start_server(read_to_eof, "127.0.0.1", 0) as server,
        TcpProxy("127.0.0.1", server.sockets[0].getsockname()[1]) as proxy,
    ):
        _reader, writer = await asyncio.open_connection(*proxy.address)
        async with asyncio.timeout(5):
            await accepted.wait()
        proxy.hold()
        writer.write(b"ping")
        writer.close()
        await writer.wait_closed()
        assert await _still_pending(received)
        assert proxy.connections == 1
        proxy.release()
        async with asyncio.timeout(5):
            assert await received == b"ping"
        assert proxy.connections == 0


async def test_a_request_waits_while_held_and_completes_on_release(
    proxy: TcpProxy, zookeeper, state_log
) -> None:
    async with _through(proxy, zookeeper) as client:
        log = state_log(client)
        await client.create("/n", b"v")
        proxy.hold()
        get = asyncio.create_task(client.get("/n"))
        assert await _still_pending(get)
        proxy.release()
        async with asyncio.timeout(5):
            data, _stat = await get
        assert data == b"v"
        assert log.states == []


async def test_cut_suspends_then_resumes_the_same_session(
    proxy: TcpProxy, zookeeper, state_log
) -> None:
    async with _through(proxy, zookeeper) as client:
        log = state_log(client)
        session = client.session_id
        proxy.cut()
        async with asyncio.timeout(10):
            await log.wait_for(R)
        assert log.states == [S, R]
        assert client.session_id == session
        assert proxy.accepted == 2
        assert await client.exists("/") is not None


async def test_refused_reconnects_keep_the_client_suspended(
    proxy: TcpProxy, zookeeper, state_log
) -> None:
    async with _through(proxy, zookeeper) as client:
        log = state_log(client)
        session = client.session_id
        proxy.refuse(True)
        proxy.cut()
        async with asyncio.timeout(5):
            await log.wait_for(S)
        reconnected = asyncio.create_task(log.wait_for(R))
        try:
            assert await _still_pending(reconnected, 0.5)
            assert proxy.refused >= 1  # it did try, and was turned away
            assert log.states == [S]
            proxy.refuse(False)
            async with asyncio.timeout(10):
                await reconnected
        finally:
            reconnected.cancel()
        assert log.states == [S, R]
        assert client.session_id == session


async def test_session_expired_while_held_fails_the_request_in_flight(
    proxy: TcpProxy, zookeeper, state_log
) -> None:
    async with _through(proxy, zookeeper) as client:
        log = state_log(client)
        old = client.session_id
        await client.create("/n", b"v")
        proxy.hold()
        get = asyncio.create_task(client.get("/n"))
        assert await _still_pending(get)
        # Straight to the server: through the held proxy the killer would stall too.
        await expire_session(client, address=_server_address(zookeeper), wait=False)
        assert not get.done() and log.states == []
        proxy.release()
        async with asyncio.timeout(5):
            with pytest.raises(ConnectionLossError):
                await get
        async with asyncio.timeout(10):
            await log.wait_for(C)
        assert log.states == [S, L, C]
        assert client.session_id not in (0, old)
        assert await client.exists("/n") is not None
