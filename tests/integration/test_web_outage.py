"""The web example under an outage: handlers answer 503 within the request timeout
and uvicorn shuts down promptly (they used to hang until ZooKeeper came back)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import anyio
import httpx
import pytest

import aiocoord
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.timeout(60)


def _load_example() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "web_counter.py"
    spec = importlib.util.spec_from_file_location("web_counter_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_handlers_answer_503_with_a_reason_while_zookeeper_is_down(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    example = _load_example()
    app = example.CounterApp(private_zookeeper.connect_string, "/web", request_timeout=1.0)
    transport = httpx.ASGITransport(app=app)
    # The lifespan (connect, close) is driven by hand: ASGITransport runs only requests.
    lifespan: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    sent: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    runner = asyncio.create_task(
        app({"type": "lifespan"}, lifespan.get, lambda message: sent.put(message))
    )
    await lifespan.put({"type": "lifespan.startup"})
    assert (await sent.get())["type"] == "lifespan.startup.complete"
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://web") as http:
            assert (await http.post("/hit")).json() == {"hit": 1}
            assert app._client is not None
            states = state_log(app._client)
            await private_zookeeper.kill()
            # Requests made before the client notices the dead socket go out on
            # it: their answer is "may or may not have counted" (the outcome is
            # unknown), not "unavailable". Ask once the drop is known.
            await states.wait_for(aiocoord.ConnectionState.SUSPENDED)
            with anyio.fail_after(10):  # a hang fails here; the bound is 1 s
                answers = await asyncio.gather(http.post("/hit"), http.get("/count"))
            for answer in answers:
                assert answer.status_code == 503
                assert "ZooKeeper unavailable" in answer.json()["error"]
    finally:
        with anyio.fail_after(10):  # shutting down does not wait for ZooKeeper either
            await lifespan.put({"type": "lifespan.shutdown"})
            await runner
