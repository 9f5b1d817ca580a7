"""A server that answers SESSIONEXPIRED on a connection it keeps open.

Seen after a leader failover: a follower went on serving a session the new
leader had expired, and every write came back SESSIONEXPIRED for as long as
the socket lasted. The client must not stay there trusting a dead session: it
drops the connection, learns on reconnecting that the session is gone
(LOST), and starts a new one.

The server here is a few lines of ZooKeeper's wire protocol on loopback,
because a real ensemble reaches that state only by chance.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator

import pytest

import aiocoord
from aiocoord import ConnectionLossError, ConnectionState, SessionExpiredError

SESSION_EXPIRED = -112
OP_CLOSE = -11
XID_PING = -2
CONNECT_REQUEST = struct.Struct("!iqiq")  # protocol version, last zxid, timeout, session id
STAT = struct.Struct("!qqqqiiiqiiq")


class _EndingServer:
    """Grants sessions and answers reads with empty data; a session named in
    ``ending`` gets SESSIONEXPIRED for its requests from then on, on a socket
    left open, and is refused when presented again."""

    def __init__(self) -> None:
        self.ending: set[int] = set()
        self.ended: set[int] = set()
        self.handshakes: list[int] = []  # the session id each handshake presented
        self._next_session = 0x100
        self._writers: set[asyncio.StreamWriter] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            request = await self._frame(reader)
            _version, _zxid, timeout, session = CONNECT_REQUEST.unpack_from(request)
            self.handshakes.append(session)
            if session in self.ended:
                writer.write(self._connect_reply(0, 0))  # "your session is gone"
                await writer.drain()
                return
            if session == 0:
                self._next_session += 1
                session = self._next_session
            writer.write(self._connect_reply(session, timeout))
            while True:
                xid, opcode = struct.unpack_from("!ii", await self._frame(reader))
                if xid == XID_PING:
                    writer.write(self._reply(XID_PING))
                elif opcode == OP_CLOSE:
                    writer.write(self._reply(xid))
                    await writer.drain()
                    return
                elif session in self.ending or session in self.ended:
                    self.ending.discard(session)
                    self.ended.add(session)
                    writer.write(self._reply(xid, err=SESSION_EXPIRED))
                else:  # a getData: empty data and a stat
                    writer.write(self._reply(xid, struct.pack("!i", 0) + STAT.pack(*[0] * 11)))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def close(self) -> None:
        for writer in list(self._writers):
            writer.close()

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes:
        (size,) = struct.unpack("!i", await reader.readexactly(4))
        return await reader.readexactly(size)

    @staticmethod
    def _framed(body: bytes) -> bytes:
        return struct.pack("!i", len(body)) + body

    def _connect_reply(self, session: int, timeout: int) -> bytes:
        password = bytes(16)
        body = struct.pack("!iiqi", 0, timeout, session, len(password)) + password
        return self._framed(body + b"\x00")

    def _reply(self, xid: int, body: bytes = b"", *, err: int = 0) -> bytes:
        return self._framed(struct.pack("!iqi", xid, 1, err) + body)


@pytest.fixture
async def server() -> AsyncIterator[tuple[_EndingServer, str]]:
    fake = _EndingServer()
    listener = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    host, port = listener.sockets[0].getsockname()[:2]
    try:
        yield fake, f"{host}:{port}"
    finally:
        fake.close()
        listener.close()
        await listener.wait_closed()


async def test_a_sessionexpired_reply_on_an_open_socket_ends_the_session(
    server: tuple[_EndingServer, str],
) -> None:
    fake, address = server
    async with aiocoord.connect(address, session_timeout=10) as client:
        old = client.session_id
        async with client.state_changes() as changes:
            assert await client.get("/") == (b"", aiocoord.Stat(*[0] * 11))
            fake.ending.add(old)
            with pytest.raises(SessionExpiredError):
                await client.get("/")
            seen = []
            async with asyncio.timeout(10):
                async for state in changes:
                    seen.append(state)
                    if state is ConnectionState.CONNECTED:
                        break
        assert seen == [ConnectionState.SUSPENDED, ConnectionState.LOST, ConnectionState.CONNECTED]
        assert client.session_id not in (0, old)
        # The client presented the old session once more and was told it is gone.
        assert fake.handshakes == [0, old, 0]
        assert await client.get("/") == (b"", aiocoord.Stat(*[0] * 11))


async def test_several_refused_replies_drop_the_connection_once(
    server: tuple[_EndingServer, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, address = server
    async with aiocoord.connect(address, session_timeout=10) as client:
        old = client.session_id
        fake.ending.add(old)
        async with client.state_changes() as changes:
            with caplog.at_level(logging.WARNING, logger="aiocoord"):
                # Sent in one write; the replies usually come back in one read.
                outcomes = await asyncio.gather(
                    client.get("/"), client.get("/"), client.get("/"), return_exceptions=True
                )
            async with asyncio.timeout(10):
                async for state in changes:
                    if state is ConnectionState.CONNECTED:
                        break
        assert isinstance(outcomes[0], SessionExpiredError)
        # A later reply is read before the drop takes effect (SESSIONEXPIRED
        # too), or not at all (the connection's loss).
        assert all(isinstance(o, SessionExpiredError | ConnectionLossError) for o in outcomes)
        warned = [r for r in caplog.records if "refused a request" in r.getMessage()]
        assert len(warned) == 1
        assert fake.handshakes == [0, old, 0]
