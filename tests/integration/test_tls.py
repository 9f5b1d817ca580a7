"""The client over TLS: a real ZooKeeper ``secureClientPort`` with a self-signed cert."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import aiocoord
from aiocoord import ConnectionState, EventType
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer

S, R = ConnectionState.SUSPENDED, ConnectionState.RECONNECTED

pytestmark = pytest.mark.timeout(60)


@pytest_asyncio.fixture
async def tls_zookeeper() -> AsyncIterator[ZooKeeperServer]:
    async with ZooKeeperServer(tls=True) as server:
        yield server


async def test_round_trip_and_watch_over_tls(tls_zookeeper: ZooKeeperServer) -> None:
    server = tls_zookeeper
    context = server.client_ssl_context()
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
    async with (
        aiocoord.connect(server.secure_connect_string, ssl_context=context) as client,
        aiocoord.connect(server.connect_string) as plain,  # the plain port still serves
    ):
        assert client.state is ConnectionState.CONNECTED
        assert client.connected_to == ("127.0.0.1", server.secure_port)
        assert await client.create("/tls", b"one") == "/tls"
        data, stat = await client.get("/tls")
        assert (data, stat.version) == (b"one", 0)
        stat = await client.set("/tls", b"two", version=0)
        assert stat.version == 1
        _data, _stat, watch = await client.watch_data("/tls")
        await plain.set("/tls", b"three")  # a change made by a plain client...
        async with asyncio.timeout(5):  # ...reaches the TLS client's watch
            assert (await watch).type is EventType.CHANGED
        assert (await client.get("/tls"))[0] == b"three"
        _names, _stat, child_watch = await plain.watch_children("/tls")
        await client.create("/tls/kid", ephemeral=True)
        async with asyncio.timeout(5):
            assert (await child_watch).type is EventType.CHILD


async def handshake_error(host: str, port: int, context: ssl.SSLContext) -> str:
    """Why a bare TLS handshake with these settings fails (the client sees the same)."""
    with pytest.raises(ssl.SSLCertVerificationError) as info:
        await asyncio.open_connection(host, port, ssl=context)
    return info.value.verify_message


async def test_certificate_and_name_are_checked(tls_zookeeper: ZooKeeperServer) -> None:
    server = tls_zookeeper
    # The system's CAs do not vouch for a self-signed certificate: the handshake
    # fails on every attempt and the client never gets a session.
    untrusting = ssl.create_default_context()
    reason = await handshake_error("127.0.0.1", server.secure_port, untrusting)
    assert "self-signed" in reason or "self signed" in reason
    client = aiocoord.connect(server.secure_connect_string, ssl_context=untrusting)
    with pytest.raises(aiocoord.TLSCertificateError):
        await client.start(timeout=1.0)
    assert client.closed
    # Trusted certificate, wrong name: it is issued to IP:127.0.0.1 only.
    trusting = server.client_ssl_context()
    assert "mismatch" in await handshake_error("localhost", server.secure_port, trusting)
    misnamed = aiocoord.connect(f"localhost:{server.secure_port}", ssl_context=trusting)
    with pytest.raises(aiocoord.TLSCertificateError, match="mismatch"):
        await misnamed.start(timeout=1.0)
    # No TLS at all: the secure port speaks nothing else.
    plaintext = aiocoord.connect(server.secure_connect_string)
    with pytest.raises(aiocoord.OperationTimeoutError):
        await plaintext.start(timeout=1.0)


async def test_an_untrusted_certificate_fails_start_at_once_with_a_clear_error(
    tls_zookeeper: ZooKeeperServer,
) -> None:
    """Not a retry loop until the start timeout: once every host refused its
    certificate, start() raises TLSCertificateError saying so, and the client is
    closed (no other attempt could succeed with this ssl_context)."""
    server = tls_zookeeper
    untrusting = ssl.create_default_context()  # the system's CAs: not the test CA
    client = aiocoord.connect(
        f"{server.secure_connect_string},{server.secure_connect_string}", ssl_context=untrusting
    )
    started = asyncio.get_running_loop().time()
    with pytest.raises(aiocoord.TLSCertificateError) as info:
        await client.start(timeout=30)
    assert asyncio.get_running_loop().time() - started < 5
    message = str(info.value)
    assert "not trusted" in message and f"127.0.0.1:{server.secure_port}" in message
    assert "self-signed" in message or "self signed" in message
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
    assert client.closed
    with pytest.raises(aiocoord.ClientClosedError):
        await client.exists("/")


async def test_server_restart_over_tls_resumes_the_same_session(
    tls_zookeeper: ZooKeeperServer, state_log
) -> None:
    server = tls_zookeeper
    async with aiocoord.connect(
        server.secure_connect_string, ssl_context=server.client_ssl_context()
    ) as client:
        log = state_log(client)
        session = client.session_id
        await client.create("/mine", ephemeral=True)
        await server.stop()
        async with asyncio.timeout(2):
            await log.wait_for(S)
        await server.start()  # same ports, same certificate
        # The bound that matters: back within the session timeout, the session
        # stands (a fixed 5 s was too short for a TLS reconnect on a loaded machine).
        async with asyncio.timeout(client.session_timeout):
            await log.wait_for(R)
        assert log.states == [S, R]
        assert client.session_id == session
        stat = await client.exists("/mine")
        assert stat is not None and stat.ephemeral_owner == session


@pytest.mark.ensemble
async def test_failover_between_tls_members(state_log) -> None:
    async with (
        ZooKeeperEnsemble(3, tls=True) as ensemble,
        aiocoord.connect(
            ensemble.secure_connect_string, ssl_context=ensemble.client_ssl_context()
        ) as client,
    ):
        log = state_log(client)
        session = client.session_id
        await client.create("/e", ephemeral=True)
        host = client.connected_to
        assert host is not None
        member = next(m for m in ensemble.members if m.secure_port == host[1])
        await member.kill()
        async with asyncio.timeout(20):
            await log.wait_for(R)
        assert client.session_id == session
        assert client.connected_to not in (None, host)
        assert await client.exists("/e") is not None


def test_tls_attributes_need_tls() -> None:
    server = ZooKeeperServer()
    for attribute in ("secure_port", "secure_connect_string", "tls_ca_file"):
        with pytest.raises(RuntimeError, match="tls=True"):
            getattr(server, attribute)
    with pytest.raises(RuntimeError, match="tls=True"):
        server.client_ssl_context()


async def test_certificate_exists_only_after_the_first_start() -> None:
    server = ZooKeeperServer(tls=True)
    try:
        assert server.secure_port != server.port
        with pytest.raises(RuntimeError, match="first start"):
            server.client_ssl_context()
    finally:
        await server.aclose()
