"""Helpers shared by the integration tests (fixtures come from aiocoord.testing)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
from _curator import compile_harnesses
from _kit import Started

import aiocoord
from aiocoord import ConnectionState
from aiocoord.testing import ZooKeeperTarget


class StateLog:
    """Records a client's state transitions and lets a test await one."""

    def __init__(self, client: aiocoord.Client) -> None:
        self.states: list[ConnectionState] = []
        self._changed = asyncio.Event()
        client.add_listener(self._on_state)

    def _on_state(self, state: ConnectionState) -> None:
        self.states.append(state)
        self._changed.set()

    async def wait_for(self, state: ConnectionState, *, count: int = 1) -> None:
        while self.states.count(state) < count:
            self._changed.clear()
            await self._changed.wait()


@pytest.fixture
def idle_client() -> aiocoord.Client:
    """A client that is never started: bad input must be refused before anything
    is sent (a request would raise instead)."""
    return aiocoord.connect("127.0.0.1:1")


@pytest.fixture
def state_log() -> Callable[[aiocoord.Client], StateLog]:
    return StateLog


@pytest_asyncio.fixture
async def client_factory(
    zookeeper: ZooKeeperTarget,
) -> AsyncIterator[Callable[..., aiocoord.Client]]:
    """Make more clients on the shared server, in the test's namespace; closed at teardown."""
    made: list[aiocoord.Client] = []

    def make(**kwargs: object) -> aiocoord.Client:
        kwargs.setdefault("namespace", zookeeper.namespace)
        client = aiocoord.connect(zookeeper.connect_string, **kwargs)  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    leftovers = {
        repr(client): (client.pending_watches, client.background_tasks)
        for client in made
        if not client.closed and (client.pending_watches or client.background_tasks)
    }
    for client in made:
        await client.aclose()
    # A recipe that was closed or released must not leave a watch waiting or a
    # task running on its client.
    assert leftovers == {}, "(watches, background tasks) left on open clients"


@pytest.fixture
def started(
    client_factory: Callable[..., aiocoord.Client],
) -> Started:
    """``await started(n, **client_kwargs)``: ``n`` new clients, each made by
    ``client_factory(**client_kwargs)``, all started at once (closed at teardown)."""

    async def start(n: int, **kwargs: object) -> list[aiocoord.Client]:
        clients = [client_factory(**kwargs) for _ in range(n)]
        await asyncio.gather(*(c.start() for c in clients))
        return clients

    return start


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks(caplog: pytest.LogCaptureFixture) -> AsyncIterator[None]:
    """Every test must end with no task of its own left running and no error logged."""
    before = set(asyncio.all_tasks())
    yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    errors += [r for r in caplog.get_records("setup") if r.levelno >= logging.ERROR]
    errors += [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]
    assert not leaked, f"tasks left running: {leaked}"


async def _children_reach(client: aiocoord.Client, path: str, count: int) -> list[str]:
    """Wait (on watches, not by polling) until ``path`` has at least ``count`` children."""
    changes = client.children_changes(path)
    try:
        async for names in changes:
            if names is not None and len(names) >= count:
                return names
    finally:
        await changes.aclose()
    raise AssertionError("client closed while waiting")


@pytest.fixture
def children_reach() -> Callable[[aiocoord.Client, str, int], Awaitable[list[str]]]:
    return _children_reach


async def _children_of(client: aiocoord.Client, path: str) -> list[str]:
    """The children of ``path``, or [] if it is gone: recipe paths are containers, which
    the server sweeps away (every second on test servers) once they are empty."""
    try:
        return sorted(await client.children(path))
    except aiocoord.NoNodeError:
        return []


@pytest.fixture
def children_of() -> Callable[[aiocoord.Client, str], Awaitable[list[str]]]:
    return _children_of


@pytest.fixture(scope="session")
def curator_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Curator harnesses (tests/interop), compiled once; see _curator.py."""
    return compile_harnesses(tmp_path_factory.mktemp("curator-harness"))
