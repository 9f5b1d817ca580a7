"""A fault-injecting TCP proxy on loopback, to put between a client and its server.

Stopping or pausing a server hits every client at once and cannot catch a request
between client and server. Pointing one client at a :class:`TcpProxy` lets a test
stall its network (:meth:`~TcpProxy.hold`), drop its connection
(:meth:`~TcpProxy.cut`) or turn its reconnects away (:meth:`~TcpProxy.refuse`),
while the server itself keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import cast

__all__ = ["TcpProxy"]


class _End(asyncio.Protocol):
    """One socket of a proxied connection, and what it sent that is not yet passed on."""

    def __init__(self, pipe: _Pipe) -> None:
        self._pipe = pipe
        self.transport: asyncio.Transport | None = None
        self.inbox = bytearray()
        self.gone = False
        """The socket closed (EOF, reset or error)."""
        self.reset = False
        """It closed with an error rather than an EOF."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always a subclass of asyncio.Transport:
        # uvloop's is not (an isinstance check refused every uvloop connection).
        self.transport = cast(asyncio.Transport, transport)
        self._pipe.connected(self)

    def data_received(self, data: bytes) -> None:
        self.inbox += data
        self._pipe.pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        self.reset = exc is not None
        self._pipe.pump()

    def send(self, data: bytearray) -> None:
        if data and self.transport is not None and not self.gone:
            self.transport.write(bytes(data))
        data.clear()


class _Pipe:
    """One proxied connection: the client's socket and the one to the upstream server."""

    def __init__(self, proxy: TcpProxy) -> None:
        self._proxy = proxy
        self.client = _End(self)
        self.upstream: _End | None = None
        """None until the upstream server is contacted."""
        self.done = False
        self._connecting: asyncio.Task[None] | None = None

    def connected(self, end: _End) -> None:
        if self.done:  # cut while the upstream connection was being made
            assert end.transport is not None
            end.transport.abort()
        elif end is self.client:
            self._proxy._accepted(self)
        else:
            self.pump()

    def contact_upstream(self) -> None:
        if self.upstream is not None or self.done or self.client.gone:
            return
        self.upstream = _End(self)
        self._connecting = asyncio.get_running_loop().create_task(
            self._connect(self.upstream, *self._proxy._upstream), name="aiocoord-proxy-connect"
        )
        self._proxy._tasks.add(self._connecting)
        self._connecting.add_done_callback(self._proxy._tasks.discard)

    async def _connect(self, end: _End, host: str, port: int) -> None:
        try:
            await asyncio.get_running_loop().create_connection(lambda: end, host, port)
        except OSError:
            end.gone = end.reset = True  # the client sees a reset, as if the server were down
            self.pump()

    def pump(self) -> None:
        """Pass on what each side sent, then any close; nothing while the proxy is held."""
        if self.done or self._proxy.held:
            return
        client, upstream = self.client, self.upstream
        if upstream is None or (upstream.transport is None and not upstream.gone):
            if client.gone:  # the client left before the upstream was reached
                self.finish(reset=True)
            return
        upstream.send(client.inbox)
        client.send(upstream.inbox)
        if client.gone or upstream.gone:
            self.finish(reset=client.reset or upstream.reset)

    def finish(self, *, reset: bool) -> None:
        """Close both sockets: gracefully (after what was written) or by a reset."""
        self.done = True
        self._proxy._pipes.discard(self)
        if self._connecting is not None:
            self._connecting.cancel()
        for end in (self.client, self.upstream):
            if end is None or end.transport is None:
                continue
            end.inbox.clear()
            if reset:
                end.transport.abort()
            else:
                end.transport.close()


class TcpProxy:
    """Forwards TCP connections from a loopback port to an upstream server, with faults.

    Each connection accepted is relayed to its own new connection to the upstream
    server. A close of either socket (EOF or reset) ends the proxied connection:
    the proxy passes on what it had received, then closes the other socket the
    same way (gracefully after an EOF, by a reset after an error). The methods
    that inject faults are synchronous and may be called at any time, even
    before :meth:`start`.
    """

    def __init__(
        self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listen = (host, port)
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._pipes: set[_Pipe] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._held = False
        self._refusing = False
        self._closed = False
        self._accepted_count = 0
        self._refused_count = 0

    async def __aenter__(self) -> TcpProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start listening."""
        if self._closed:
            raise RuntimeError("proxy closed")
        if self._server is not None:
            raise RuntimeError("proxy already started")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Pipe(self).client, *self._listen)
        host, port = self._server.sockets[0].getsockname()[:2]
        self._address = (str(host), int(port))

    async def aclose(self) -> None:
        """Stop listening and reset every proxied connection."""
        self._closed = True
        self.cut()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def address(self) -> tuple[str, int]:
        """Where the proxy listens."""
        if self._address is None:
            raise RuntimeError("proxy not started")
        return self._address

    @property
    def connect_string(self) -> str:
        """``host:port`` of the proxy, to give to :func:`aiocoord.connect`."""
        host, port = self.address
        return f"{host}:{port}"

    @property
    def connections(self) -> int:
        """Proxied connections open now."""
        return len(self._pipes)

    @property
    def accepted(self) -> int:
        """Connections accepted and proxied so far (refused ones not counted)."""
        return self._accepted_count

    @property
    def refused(self) -> int:
        """Connections closed on accept by :meth:`refuse` so far."""
        return self._refused_count

    @property
    def held(self) -> bool:
        """Whether the network is stalled by :meth:`hold` (until :meth:`release`)."""
        return self._held

    def hold(self) -> None:
        """Stall the network: forward nothing, and pass on no close, until :meth:`release`.

        Bytes are kept in the proxy and every socket stays open. New connections
        are accepted, but the upstream server is not contacted until release.
        """
        self._held = True

    def release(self) -> None:
        """End a :meth:`hold`: deliver what was kept, in order, then any close seen meanwhile."""
        self._held = False
        for pipe in list(self._pipes):
            pipe.contact_upstream()
            pipe.pump()

    def cut(self) -> None:
        """Reset every proxied connection at both ends now, dropping what was kept.

        The proxy goes on listening; new connections are proxied as usual.
        """
        for pipe in list(self._pipes):
            pipe.finish(reset=True)

    def refuse(self, refusing: bool = True) -> None:
        """While refusing, reset new connections at once, like a server that is down
        behind a listening port. Open connections are left alone."""
        self._refusing = refusing

    def set_upstream(self, host: str, port: int) -> None:
        """Send connections that have not contacted the upstream server yet to another one."""
        self._upstream = (host, port)

    def _accepted(self, pipe: _Pipe) -> None:
        transport = pipe.client.transport
        assert transport is not None
        if self._refusing or self._closed:
            if not self._closed:
                self._refused_count += 1
            pipe.done = True
            transport.abort()
            return
        self._accepted_count += 1
        self._pipes.add(pipe)
        if not self._held:
            pipe.contact_upstream()

    def __repr__(self) -> str:
        where = self.connect_string if self._address else "not started"
        upstream = "{}:{}".format(*self._upstream)
        return f"<TcpProxy {where} -> {upstream} connections={self.connections}>"
