"""An HTTP client that finds its servers through service discovery, on an embedded
ZooKeeper (or AIOCOORD_ZK).

Three instances of an "orders" service register themselves (one client each, as
three processes would), each with its address, port and a URI template; two
serve HTTP on 127.0.0.1, the third is down (nothing listens on its port). The
client is a plain ``httpx.AsyncClient`` whose transport is
:class:`aiocoord.DiscoveryTransport`: every request to ``http://orders/...`` goes
to an instance its provider picks (round robin here). A connection the down
instance refuses is retried on another instance at once (the request never
reached a server, so even a POST is safe to resend) and noted with
``provider.note_error()``: after repeated errors the provider takes the instance
out of rotation for a while, and the requests after that never try it.

Run: python examples/discovery_http.py (needs httpx: pip install 'aiocoord[httpx]')

Expected output (``...`` stands for how the answered requests split between the
two live instances):

    registered orders-1 (up), orders-2 (up), orders-3 (down)
    12 requests through http://orders/: 12 answered, all 200
    served by orders-1 and orders-2 (...)
    orders-3 refused 2 connections: each request was retried on another instance
    the next 12 requests never tried orders-3: it is out of rotation
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections import Counter
from collections.abc import AsyncIterator

import httpx

import aiocoord
from aiocoord import DiscoveryTransport, ProviderStrategy, ServiceDiscovery, ServiceInstance
from aiocoord.testing import ZooKeeperServer

BASE = "/services"
SERVICE = "orders"


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


async def serve(name: str) -> tuple[asyncio.Server, int]:
    """A tiny HTTP/1.1 server on 127.0.0.1 that answers every request with its name."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):  # one request (no body here)
                body = name.encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def unused_port() -> int:
    """A port nothing listens on: bound once, then closed (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def main() -> None:
    async with zookeeper() as hosts, contextlib.AsyncExitStack() as stack:
        namespace = f"/aiocoord-discovery-http-demo-{os.getpid()}"
        ports = {}
        for name in ("orders-1", "orders-2"):
            server, ports[name] = await serve(name)
            stack.push_async_callback(server.wait_closed)
            stack.callback(server.close)
        ports["orders-3"] = unused_port()  # registered, but down

        # Each instance registers itself, in a session of its own.
        registered = {}
        for name, port in ports.items():
            client = await stack.enter_async_context(aiocoord.connect(hosts, namespace=namespace))
            discovery = await stack.enter_async_context(ServiceDiscovery(client, BASE))
            instance = ServiceInstance(
                name=SERVICE,
                id=name,
                address="127.0.0.1",
                port=port,
                uri_spec="{scheme}://{address}:{port}",
            )
            await discovery.register(instance)
            registered[name] = instance
        print("registered orders-1 (up), orders-2 (up), orders-3 (down)")

        # The caller: a provider of "orders", and an httpx client that uses it.
        client = await stack.enter_async_context(aiocoord.connect(hosts, namespace=namespace))
        discovery = await stack.enter_async_context(ServiceDiscovery(client, BASE))
        provider = await stack.enter_async_context(
            discovery.provider(SERVICE, strategy=ProviderStrategy.ROUND_ROBIN)
        )
        transport = DiscoveryTransport(provider)
        http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))

        async def requests(count: int) -> list[httpx.Response]:
            return [await http.get(f"http://{SERVICE}/orders/{i}") for i in range(count)]

        first = await requests(12)
        served = Counter(response.text for response in first)
        statuses = sorted({response.status_code for response in first})
        print(
            f"12 requests through http://{SERVICE}/: {len(first)} answered, "
            f"all {statuses[0] if len(statuses) == 1 else statuses}"
        )
        print(f"served by {' and '.join(sorted(served))} ({dict(sorted(served.items()))})")
        down = registered["orders-3"]
        print(
            f"orders-3 refused {provider.errors(down)} connections: each request was "
            "retried on another instance"
        )
        second = await requests(12)
        assert all(response.status_code == 200 for response in second)
        if provider.errors(down) == 2 and down.id not in [i.id for i in provider.instances()]:
            print("the next 12 requests never tried orders-3: it is out of rotation")

        await stack.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
