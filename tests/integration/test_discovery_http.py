"""DiscoveryTransport: an httpx client whose every request goes to an instance a
ServiceProvider picks, against real HTTP servers on 127.0.0.1 (and ports nothing
listens on, for instances that are down)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
from _kit import Started

from aiocoord import (
    ArgumentTypeError,
    DiscoveryTransport,
    InvalidArgumentError,
    ProviderStrategy,
    ServiceDiscovery,
    ServiceInstance,
    ServiceProvider,
)

pytestmark = pytest.mark.timeout(60)

BASE = "/services"


@dataclass
class Seen:
    """One request a server got: its request line's target, Host header and body."""

    target: str
    host: str
    body: bytes


@dataclass
class Server:
    """A tiny HTTP/1.1 server that answers every request with its name. With
    ``hold``, responses wait for ``release`` before their body ends."""

    name: str
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    hold: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(
                    (k.strip().lower(), v.strip())
                    for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
                )
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.seen.append(Seen(lines[0].split(" ")[1], headers.get("host", ""), body))
                reply = self.name.encode()
                if not self.hold:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply)
                    )
                else:  # a streamed body whose end waits for release
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    writer.write(b"%x\r\n%s\r\n" % (len(reply), reply))
                    await writer.drain()
                    await self.release.wait()
                    writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def servers(*names: str, hold: bool = False) -> AsyncIterator[list[Server]]:
    made = [Server(name, hold=hold) for name in names]
    running = []
    try:
        for server in made:
            listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
            running.append(listener)
            server.port = listener.sockets[0].getsockname()[1]
        yield made
    finally:
        for listener in running:
            listener.close()
            await listener.wait_closed()


def down_port() -> int:
    """A port nothing listens on: connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def instance(name: str, port: int, **fields: object) -> ServiceInstance:
    return ServiceInstance(name="orders", id=name, address="127.0.0.1", port=port, **fields)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def provider_of(
    started: Started, instances: list[ServiceInstance], **options: object
) -> AsyncIterator[ServiceProvider]:
    registrant, caller = await started(2)
    async with ServiceDiscovery(registrant, BASE) as registry:
        for each in instances:
            await registry.register(each)
        async with (
            ServiceDiscovery(caller, BASE) as discovery,
            discovery.provider("orders", **options) as provider,  # type: ignore[arg-type]
        ):
            yield provider


async def test_each_request_goes_to_a_picked_instance_and_a_refusal_is_retried_and_noted(
    started: Started,
) -> None:
    async with servers("a", "b") as (a, b):
        down = instance("c", down_port())
        listed = [instance("a", a.port), instance("b", b.port), down]
        async with (
            provider_of(started, listed) as provider,
            httpx.AsyncClient(transport=DiscoveryTransport(provider)) as http,
        ):
            answers = [await http.get(f"http://orders/items/{i}?q={i}") for i in range(12)]
            assert [r.status_code for r in answers] == [200] * 12
            assert {r.text for r in answers} == {"a", "b"}
            # The request the client sees names the instance that answered it.
            assert answers[0].request.url.host == "127.0.0.1"
            assert answers[0].request.url.port in (a.port, b.port)
            assert [s.target for s in a.seen + b.seen if s.target.endswith("q=0")] == [
                "/items/0?q=0"
            ]
            assert {s.host for s in a.seen} == {f"127.0.0.1:{a.port}"}
            # Round robin reached c twice: two errors, so it is out of rotation.
            assert provider.errors(down) == 2
            assert [i.id for i in provider.instances()] == ["a", "b"]
            more = [await http.get("http://orders/") for _ in range(6)]
            assert {r.text for r in more} == {"a", "b"} and provider.errors(down) == 2
            assert len(a.seen) + len(b.seen) == 18


async def test_a_post_refused_by_one_instance_is_sent_whole_to_another(started: Started) -> None:
    async with servers("a") as (a,):
        down = instance("b", down_port())
        async with (
            provider_of(started, [down, instance("a", a.port)]) as provider,
            httpx.AsyncClient(transport=DiscoveryTransport(provider)) as http,
        ):
            for n in range(4):
                response = await http.post("http://orders/orders", content=b"order %d" % n)
                assert response.text == "a"
            assert [s.body for s in a.seen] == [b"order %d" % n for n in range(4)]
            assert provider.errors(down) == 2


async def test_a_uri_spec_gives_the_base_the_request_path_goes_under(started: Started) -> None:
    async with servers("a") as (a,):
        spec = "{scheme}://{address}:{port}/api/v1/"
        async with (
            provider_of(started, [instance("a", a.port, uri_spec=spec)]) as provider,
            httpx.AsyncClient(transport=DiscoveryTransport(provider)) as http,
        ):
            assert (await http.get("http://orders/items/7?full=1")).text == "a"
        assert [s.target for s in a.seen] == ["/api/v1/items/7?full=1"]


async def test_a_request_is_in_flight_until_its_response_is_closed(started: Started) -> None:
    async with servers("a", "b", hold=True) as (a, b):
        listed = [instance("a", a.port), instance("b", b.port)]
        async with (
            provider_of(started, listed, strategy=ProviderStrategy.LEAST_OUTSTANDING) as provider,
            httpx.AsyncClient(transport=DiscoveryTransport(provider)) as http,
        ):
            async with http.stream("GET", "http://orders/") as first:
                # The headers are in, the body is not: the request still counts.
                serving = listed[0] if first.request.url.port == a.port else listed[1]
                assert provider.outstanding(serving) == 1
                # The least loaded instance is the other one.
                async with http.stream("GET", "http://orders/") as second:
                    assert second.request.url.port != first.request.url.port
                    a.release.set()
                    b.release.set()
                    await second.aread()
                await first.aread()
            assert [provider.outstanding(i) for i in listed] == [0, 0]


async def test_when_every_instance_refuses_the_last_connect_error_is_raised(
    started: Started,
) -> None:
    dead = [instance("a", down_port()), instance("b", down_port())]
    async with (
        provider_of(started, dead, error_threshold=5) as provider,
        httpx.AsyncClient(transport=DiscoveryTransport(provider, retries=1)) as http,
    ):
        with pytest.raises(httpx.ConnectError):
            await http.get("http://orders/")
        assert [provider.errors(i) for i in dead] == [1, 1]  # each tried once
        assert [provider.outstanding(i) for i in dead] == [0, 0]


async def test_with_no_instance_a_request_waits_its_connect_timeout_then_fails(
    started: Started,
) -> None:
    async with (
        provider_of(started, []) as provider,
        httpx.AsyncClient(
            transport=DiscoveryTransport(provider), timeout=httpx.Timeout(5.0, connect=0.2)
        ) as http,
    ):
        with pytest.raises(httpx.ConnectError, match="no instance of"):
            await http.get("http://orders/")


async def test_bad_arguments_are_refused(started: Started) -> None:
    with pytest.raises(ArgumentTypeError):
        DiscoveryTransport(object())  # type: ignore[arg-type]
    async with provider_of(started, []) as provider:
        with pytest.raises(InvalidArgumentError):
            DiscoveryTransport(provider, retries=-1)
        with pytest.raises(ArgumentTypeError):
            DiscoveryTransport(provider, transport=object())  # type: ignore[arg-type]
        transport = DiscoveryTransport(provider)
        assert repr(transport).startswith("<DiscoveryTransport <ServiceProvider")
        await transport.aclose()
