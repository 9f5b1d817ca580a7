"""pytest fixtures for testing services against a real ZooKeeper.

Loaded automatically when aiocoord is installed (entry point ``pytest11``);
nothing starts until a test asks for a fixture. Set ``AIOCOORD_ZK`` to a
connect string to use a running server or ensemble instead of launching one.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest

from ._server import ZooKeeperEnsemble, ZooKeeperServer

ENV_CONNECT_STRING = "AIOCOORD_ZK"
TEST_ROOT = "/aiocoord-tests"


@dataclass(frozen=True)
class ZooKeeperTarget:
    """Where a test should connect: the server, and a namespace of its own."""

    connect_string: str
    namespace: str
    server: ZooKeeperServer | None
    """The launched server (None when ``AIOCOORD_ZK`` points elsewhere)."""


@pytest.fixture(scope="session")
def _aiocoord_shared_server() -> Iterator[ZooKeeperServer | str]:
    external = os.environ.get(ENV_CONNECT_STRING)
    if external:
        yield external
        return
    server = ZooKeeperServer()
    anyio.run(server.start)
    try:
        yield server
    finally:
        anyio.run(server.close)


@pytest.fixture
def zookeeper(
    request: pytest.FixtureRequest, _aiocoord_shared_server: ZooKeeperServer | str
) -> ZooKeeperTarget:
    """The test session's shared server, with a fresh namespace for this test.

    Do not stop or pause this server; ask for ``private_zookeeper`` to inject
    faults.
    """
    shared = _aiocoord_shared_server
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:60]
    namespace = f"{TEST_ROOT}/{name}-{uuid.uuid4().hex[:8]}"
    if isinstance(shared, str):
        return ZooKeeperTarget(shared, namespace, None)
    return ZooKeeperTarget(shared.connect_string, namespace, shared)


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the async fixtures need pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def private_zookeeper() -> AsyncIterator[ZooKeeperServer]:
        """A standalone server for this test alone: stop, kill or pause it at will."""
        async with ZooKeeperServer() as server:
            yield server

    @pytest_asyncio.fixture
    async def zookeeper_ensemble() -> AsyncIterator[ZooKeeperEnsemble]:
        """A 3-member ensemble for this test alone."""
        async with ZooKeeperEnsemble(3) as ensemble:
            yield ensemble

    @pytest_asyncio.fixture
    async def coord(zookeeper: ZooKeeperTarget) -> AsyncIterator[object]:
        """A connected :class:`aiocoord.Client` in this test's namespace."""
        from .. import connect

        async with connect(zookeeper.connect_string, namespace=zookeeper.namespace) as client:
            yield client
        async with connect(zookeeper.connect_string) as cleaner:
            await cleaner.delete_recursive(zookeeper.namespace)
