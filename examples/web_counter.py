"""A web service whose handlers ``await counter.increment()``.

A plain ASGI application (no framework): ``POST /hit`` counts a hit and
returns its number, ``GET /count`` reads the total. The ZooKeeper client is
opened in the ASGI lifespan and shared by every request; concurrent increments
from the many requests in flight are coalesced into few writes.

Serve it with any ASGI server:
    AIOCOORD_ZK=127.0.0.1:2181 uvicorn examples.web_counter:app --port 8000
Or run this file: it starts an embedded ZooKeeper (unless AIOCOORD_ZK is set)
and uvicorn, sends 500 concurrent requests with httpx, and checks every hit got
a distinct number.

Expected output of running this file (``...`` stands for the port, which varies):

    serving on http://127.0.0.1:...
    500 concurrent POST /hit: statuses [200], numbers 1..500, all distinct: True; GET /count = 500
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import aiocoord

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

COUNTER_PATH = "/web/hits"
REQUEST_TIMEOUT = 2.0
"""How long a handler waits for ZooKeeper before answering 503 (default: the
session timeout, 10 s, longer than most HTTP clients wait)."""


class CounterApp:
    """The ASGI application: one client per process, opened for the app's lifetime."""

    def __init__(
        self,
        hosts: str | None = None,
        namespace: str = "/aiocoord-web",
        request_timeout: float = REQUEST_TIMEOUT,
        telemetry: aiocoord.Telemetry | None = None,
    ) -> None:
        self._hosts = hosts
        self._telemetry = telemetry
        self._namespace = namespace
        self._request_timeout = request_timeout
        self._client: aiocoord.Client | None = None
        self._counter: aiocoord.AtomicLong | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                hosts = self._hosts or os.environ.get("AIOCOORD_ZK", "127.0.0.1:2181")
                self._client = aiocoord.connect(
                    hosts,
                    namespace=self._namespace,
                    request_timeout=self._request_timeout,
                    telemetry=self._telemetry,
                )
                await self._client.start()
                self._counter = aiocoord.AtomicLong(
                    self._client, COUNTER_PATH, retry=aiocoord.RetryForever(0.001)
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, send: Send) -> None:
        counter = self._counter
        assert counter is not None, "lifespan startup has not run"
        method, path = scope["method"], scope["path"]
        status: int
        body: dict[str, Any]
        try:
            if method == "POST" and path == "/hit":
                result = await counter.increment()
                status, body = (
                    (200, {"hit": result.post_value})
                    if result.succeeded
                    else (503, {"error": "too much contention, try again"})
                )
            elif method == "GET" and path == "/count":
                status, body = 200, {"count": (await counter.get()).post_value}
            else:
                status, body = 404, {"error": "not found"}
        except aiocoord.OutcomeUnknownError:
            # The write was sent and the connection dropped before its reply.
            status, body = 503, {"error": "the hit may or may not have counted: connection lost"}
        except aiocoord.SessionError as error:
            # ZooKeeper out of reach for the whole request timeout (NoConnectionError),
            # or the session went while the request waited.
            status, body = 503, {"error": f"ZooKeeper unavailable: {error}"}
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


app = CounterApp()


@contextlib.asynccontextmanager
async def serving(
    hosts: str, namespace: str, *, telemetry: aiocoord.Telemetry | None = None
) -> AsyncIterator[str]:
    """Run the app under uvicorn on a free loopback port; yield its base URL."""
    import uvicorn

    app = CounterApp(hosts, namespace, telemetry=telemetry)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    with socket.socket() as sock:
        # Bound here and handed to uvicorn: the port is ours from the start.
        sock.bind(("127.0.0.1", 0))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            await task


async def main() -> None:
    import httpx

    from aiocoord.testing import ZooKeeperServer

    async with contextlib.AsyncExitStack() as stack:
        hosts = os.environ.get("AIOCOORD_ZK")
        if not hosts:
            hosts = (await stack.enter_async_context(ZooKeeperServer())).connect_string
        namespace = f"/aiocoord-web-{os.getpid()}"
        url = await stack.enter_async_context(serving(hosts, namespace))
        print(f"serving on {url}")
        http = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
        responses = await asyncio.gather(*(http.post("/hit") for _ in range(500)))
        hits = sorted(r.json()["hit"] for r in responses)
        count = (await http.get("/count")).json()["count"]
        statuses = sorted({r.status_code for r in responses})
        print(
            f"500 concurrent POST /hit: statuses {statuses}, "
            f"numbers {hits[0]}..{hits[-1]}, all distinct: {len(set(hits)) == 500}; "
            f"GET /count = {count}"
        )
        assert hits == list(range(1, 501)) and count == 500
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
