"""pytest fixtures for testing services against a real ZooKeeper.

Loaded automatically when aiocoord is installed (entry point ``pytest11``);
nothing starts until a test asks for a fixture. The async fixtures run on the
event loop of whichever plugin runs the test: pytest-asyncio (``pip install
aiocoord[pytest]``), in any of its modes, or anyio's own pytest plugin (tests
marked ``@pytest.mark.anyio`` that pytest-asyncio leaves alone, on anyio's asyncio
backend), which FastAPI's documentation tells its users to test with.

Where the server is: ``--aiocoord-zk`` on the command line, else the
``AIOCOORD_ZK`` environment variable, else the ``aiocoord_zk`` ini setting,
each a connect string of a running server or ensemble; with none of them, a
server is launched for the test session (needs ZooKeeper's jars and Java).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
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
    "aiocoord's async fixtures run on pytest-asyncio or on anyio's pytest plugin: "
    "`pip install aiocoord[pytest]` (or pytest-asyncio) and run async tests under it "
    "(asyncio_mode = auto, or @pytest.mark.asyncio), or mark them @pytest.mark.anyio"
)
_TWO_LOOPS = (
    "pytest-asyncio's auto mode runs this test, marked for anyio, on its own event loop, "
    "while anyio's plugin runs every async fixture on another: set asyncio_mode = strict "
    "(anyio's plugin then runs the test, and aiocoord's fixtures follow it), or mark the "
    "test @pytest.mark.asyncio instead"
)
_ASYNCIO_ONLY = (
    "aiocoord runs on asyncio (anyio's asyncio backend included), not on anyio's "
    "{backend!r} backend: give this test the anyio_backend 'asyncio'"
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


def _runs_on_anyio(request: pytest.FixtureRequest) -> bool:
    """Whether anyio's plugin runs this test (and so its event loop), not pytest-asyncio.

    pytest-asyncio marks the tests it runs ``asyncio`` (in auto mode every async test,
    those marked for anyio too); anyio's plugin runs those that ask for ``anyio_backend``
    (its ``anyio`` mark does) and that pytest-asyncio left alone.
    """
    anyio = "anyio_backend" in request.fixturenames
    if request.node.get_closest_marker("asyncio") is not None:
        if anyio:  # anyio's plugin would take the async fixture to its own loop
            pytest.fail(_TWO_LOOPS, pytrace=False)
        return False
    return anyio


def _async_fixture(
    request: pytest.FixtureRequest,
    asyncio_fixture: str,
    body: Callable[..., AsyncGenerator[Any, None]],
    **kwargs: Any,
) -> Iterator[Any]:
    """Run the async generator ``body(**kwargs)`` as a fixture on the test's event loop:
    anyio's test runner's, or pytest-asyncio's (through its fixture ``asyncio_fixture``,
    the same body). Fails with a clear message (not "fixture not found" or a loop
    mismatch) when neither can run it."""
    if _runs_on_anyio(request):
        from anyio.pytest_plugin import extract_backend_and_options, get_runner

        backend, options = extract_backend_and_options(request.getfixturevalue("anyio_backend"))
        if backend != "asyncio":
            pytest.fail(_ASYNCIO_ONLY.format(backend=backend), pytrace=False)
        with get_runner(backend, options) as runner:
            yield from runner.run_asyncgen_fixture(body, kwargs)
        return
    if _pytest_asyncio is None or not request.config.pluginmanager.hasplugin("asyncio"):
        pytest.fail(_NEEDS_PYTEST_ASYNCIO, pytrace=False)
    yield request.getfixturevalue(asyncio_fixture)


async def _coord(zookeeper: ZooKeeperTarget) -> AsyncGenerator[Client, None]:
    from .. import connect

    async with connect(zookeeper.connect_string, namespace=zookeeper.namespace) as client:
        yield client
    async with connect(zookeeper.connect_string) as cleaner:
        await cleaner.delete_recursive(zookeeper.namespace)


async def _coord_factory(
    zookeeper: ZooKeeperTarget,
) -> AsyncGenerator[Callable[..., Awaitable[Client]], None]:
    from .. import connect

    made: list[Client] = []

    async def make(**options: Any) -> Client:
        options.setdefault("namespace", zookeeper.namespace)
        client = connect(zookeeper.connect_string, **options)
        made.append(client)
        await client.start()
        return client

    try:
        yield make
    finally:
        for client in made:
            await client.aclose()


async def _private_zookeeper() -> AsyncGenerator[ZooKeeperServer, None]:
    async with ZooKeeperServer() as server:
        yield server


async def _zookeeper_ensemble() -> AsyncGenerator[ZooKeeperEnsemble, None]:
    async with ZooKeeperEnsemble(3) as ensemble:
        yield ensemble


@pytest.fixture
def coord(request: pytest.FixtureRequest, zookeeper: ZooKeeperTarget) -> Iterator[Client]:
    """A started :class:`aiocoord.Client` in this test's namespace (emptied afterwards)."""
    yield from _async_fixture(request, "_aiocoord_coord", _coord, zookeeper=zookeeper)


@pytest.fixture
def coord_factory(
    request: pytest.FixtureRequest, zookeeper: ZooKeeperTarget
) -> Iterator[Callable[..., Awaitable[Client]]]:
    """``await coord_factory(**options)``: one more started client (one per simulated
    process) in this test's namespace, as ``coord`` is; all closed at teardown.
    ``options`` as for :func:`aiocoord.connect`."""
    yield from _async_fixture(
        request, "_aiocoord_coord_factory", _coord_factory, zookeeper=zookeeper
    )


@pytest.fixture
def private_zookeeper(request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer]:
    """A standalone server for this test alone: stop, kill, pause or wipe it at will."""
    yield from _async_fixture(request, "_aiocoord_private_zookeeper", _private_zookeeper)


@pytest.fixture
def zookeeper_ensemble(request: pytest.FixtureRequest) -> Iterator[ZooKeeperEnsemble]:
    """A 3-member ensemble for this test alone."""
    yield from _async_fixture(request, "_aiocoord_zookeeper_ensemble", _zookeeper_ensemble)


try:
    import pytest_asyncio as _pytest_asyncio
except ImportError:  # the fixtures above then fail with an install hint
    _pytest_asyncio = None  # type: ignore[assignment]
else:
    # The same bodies, for pytest-asyncio to run on its loop.

    @_pytest_asyncio.fixture
    async def _aiocoord_private_zookeeper() -> AsyncIterator[ZooKeeperServer]:
        async for server in _private_zookeeper():
            yield server

    @_pytest_asyncio.fixture
    async def _aiocoord_zookeeper_ensemble() -> AsyncIterator[ZooKeeperEnsemble]:
        async for ensemble in _zookeeper_ensemble():
            yield ensemble

    @_pytest_asyncio.fixture
    async def _aiocoord_coord_factory(
        zookeeper: ZooKeeperTarget,
    ) -> AsyncIterator[Callable[..., Awaitable[Client]]]:
        async for factory in _coord_factory(zookeeper):
            yield factory

    @_pytest_asyncio.fixture
    async def _aiocoord_coord(zookeeper: ZooKeeperTarget) -> AsyncIterator[Client]:
        async for client in _coord(zookeeper):
            yield client
