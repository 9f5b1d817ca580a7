"""pytest fixtures for testing services against a real ZooKeeper.

Loaded automatically when aiocoord is installed (entry point ``pytest11``);
nothing starts until a test asks for a fixture. The async fixtures run on
pytest-asyncio (``pip install aiocoord[pytest]``), in any of its modes.

Where the server is: ``--aiocoord-zk`` on the command line, else the
``AIOCOORD_ZK`` environment variable, else the ``aiocoord_zk`` ini setting,
each a connect string of a running server or ensemble; with none of them, a
server is launched for the test session (needs ZooKeeper's jars and Java).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from ._server import ZooKeeperEnsemble, ZooKeeperServer

if TYPE_CHECKING:
    from .. import Client

__all__ = ["ENV_CONNECT_STRING", "TEST_ROOT", "ZooKeeperTarget"]

ENV_CONNECT_STRING = "AIOCOORD_ZK"
TEST_ROOT = "/aiocoord-tests"
_OPTION = "--aiocoord-zk"
_INI = "aiocoord_zk"
_NEEDS_PYTEST_ASYNCIO = (
    "aiocoord's async fixtures run on pytest-asyncio: `pip install aiocoord[pytest]` "
    "(or pytest-asyncio), and run async tests under it (asyncio_mode = auto, or "
    "@pytest.mark.asyncio)"
)
_NOT_UNDER_ANYIO = (
    "aiocoord's async fixtures run on pytest-asyncio's event loop, and a test marked "
    "for anyio's plugin runs on another: mark it @pytest.mark.asyncio instead "
    "(aiocoord itself works under anyio's asyncio backend; only the fixtures need "
    "pytest-asyncio)"
)


@dataclass(frozen=True)
class ZooKeeperTarget:
    """Where a test should connect: the server, and a namespace of its own."""

    connect_string: str
    namespace: str
    server: ZooKeeperServer | None
    """The launched server (None when the settings point at a running one)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiocoord")
    group.addoption(
        _OPTION,
        dest="aiocoord_zk",
        default=None,
        help=f"connect string of a running ZooKeeper to test against (else ${ENV_CONNECT_STRING},"
        f" else the {_INI} ini setting, else a server is launched)",
    )
    parser.addini(_INI, "connect string of a running ZooKeeper to test against", default="")


def _external(config: pytest.Config) -> str | None:
    value = config.getoption("aiocoord_zk") or os.environ.get(ENV_CONNECT_STRING)
    return value or str(config.getini(_INI) or "") or None


@pytest.fixture(scope="session")
def _aiocoord_shared_server(request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer | str]:
    external = _external(request.config)
    if external:
        yield external
        return
    server = ZooKeeperServer()
    anyio.run(server.start)
    try:
        yield server
    finally:
        anyio.run(server.aclose)


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


def _async_fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """The async fixture ``name``, run by pytest-asyncio, or a clear failure saying
    what is missing (instead of "fixture not found" or a loop mismatch)."""
    if "anyio_backend" in request.fixturenames:
        pytest.fail(_NOT_UNDER_ANYIO, pytrace=False)
    if _pytest_asyncio is None or not request.config.pluginmanager.hasplugin("asyncio"):
        pytest.fail(_NEEDS_PYTEST_ASYNCIO, pytrace=False)
    return request.getfixturevalue(name)


@pytest.fixture
def coord(request: pytest.FixtureRequest) -> Client:
    """A connected :class:`aiocoord.Client` in this test's namespace (emptied afterwards)."""
    client: Client = _async_fixture(request, "_aiocoord_coord")
    return client


@pytest.fixture
def coord_factory(request: pytest.FixtureRequest) -> Callable[..., Client]:
    """``coord_factory(**options)``: more clients (one per simulated process) in this
    test's namespace, not yet started (``async with`` or ``await start()``), all
    closed at teardown; ``options`` as for :func:`aiocoord.connect`."""
    factory: Callable[..., Client] = _async_fixture(request, "_aiocoord_coord_factory")
    return factory


@pytest.fixture
def private_zookeeper(request: pytest.FixtureRequest) -> ZooKeeperServer:
    """A standalone server for this test alone: stop, kill, pause or wipe it at will."""
    server: ZooKeeperServer = _async_fixture(request, "_aiocoord_private_zookeeper")
    return server


@pytest.fixture
def zookeeper_ensemble(request: pytest.FixtureRequest) -> ZooKeeperEnsemble:
    """A 3-member ensemble for this test alone."""
    ensemble: ZooKeeperEnsemble = _async_fixture(request, "_aiocoord_zookeeper_ensemble")
    return ensemble


try:
    import pytest_asyncio as _pytest_asyncio
except ImportError:  # the fixtures above then fail with an install hint
    _pytest_asyncio = None  # type: ignore[assignment]
else:

    @_pytest_asyncio.fixture
    async def _aiocoord_private_zookeeper() -> AsyncIterator[ZooKeeperServer]:
        async with ZooKeeperServer() as server:
            yield server

    @_pytest_asyncio.fixture
    async def _aiocoord_zookeeper_ensemble() -> AsyncIterator[ZooKeeperEnsemble]:
        async with ZooKeeperEnsemble(3) as ensemble:
            yield ensemble

    @_pytest_asyncio.fixture
    async def _aiocoord_coord_factory(
        zookeeper: ZooKeeperTarget,
    ) -> AsyncIterator[Callable[..., Client]]:
        from .. import connect

        made: list[Client] = []

        def make(**options: Any) -> Client:
            options.setdefault("namespace", zookeeper.namespace)
            client = connect(zookeeper.connect_string, **options)
            made.append(client)
            return client

        try:
            yield make
        finally:
            for client in made:
                await client.aclose()

    @_pytest_asyncio.fixture
    async def _aiocoord_coord(zookeeper: ZooKeeperTarget) -> AsyncIterator[Client]:
        from .. import connect

        async with connect(zookeeper.connect_string, namespace=zookeeper.namespace) as client:
            yield client
        async with connect(zookeeper.connect_string) as cleaner:
            await cleaner.delete_recursive(zookeeper.namespace)
