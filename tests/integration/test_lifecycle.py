"""One lifecycle for every recipe that is started and closed, checked on each of them.

The contract (``aiocoord/_recipes/_kit/_lifecycle.py``): ``aclose()`` cancels a
pending ``start()`` at once (the start raises RecipeClosedError); once
``aclose()`` returns, nothing of the object is made on the server later, even
by a create that was stuck in the network; ``aclose()`` is idempotent and fine
before ``start()``; a second start is a RuntimeError and one after the close
a RecipeClosedError; ``async with`` is start then aclose.

Curator's ``testProperCloseWithoutConnectionEstablished`` is the first test:
the server is unreachable (a proxy that resets every connection), the start
waits for it, and a close must end that start and leave nothing behind when
the server comes back.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ChildrenCache,
    ConnectionState,
    GroupMember,
    LeaderLatch,
    NodeCache,
    Partitioner,
    RecipeClosedError,
    ServiceDiscovery,
    ServiceInstance,
    SharedCount,
    TreeCache,
)
from aiocoord._recipes._kit._lifecycle import Resource
from aiocoord.testing import TcpProxy, ZooKeeperTarget

pytestmark = pytest.mark.timeout(60)


BASE = "/life"
"""Every object's nodes go right under this node, made (persistent) by the test."""


@dataclass(frozen=True)
class Kind:
    """One recipe that is started and closed, and what it leaves under BASE."""

    name: str
    make: Callable[[aiocoord.Client], Any]
    while_started: int
    """How many nodes it has under BASE once started."""
    after_close: int
    """How many of them stay after a close (a shared count's node is the count's)."""
    restartable: bool = True
    """Whether a failed or cancelled start may be tried again (a cache closes)."""


KINDS = [
    Kind("LeaderLatch", lambda c: LeaderLatch(c, BASE, participant_id="me"), 1, 0),
    Kind("GroupMember", lambda c: GroupMember(c, BASE, participant_id="me", data=b"here"), 1, 0),
    # No items: a partitioner's node under BASE is its member node alone.
    Kind("Partitioner", lambda c: Partitioner(c, BASE, [], participant_id="me"), 1, 0),
    Kind("SharedCount", lambda c: SharedCount(c, f"{BASE}/count", 7), 1, 1),
    Kind("NodeCache", lambda c: NodeCache(c, BASE), 0, 0, restartable=False),
    Kind("ChildrenCache", lambda c: ChildrenCache(c, BASE), 0, 0, restartable=False),
    Kind("TreeCache", lambda c: TreeCache(c, BASE), 0, 0, restartable=False),
    # Base "/" makes the service's node BASE itself: the instance is right under it.
    Kind(
        "ServiceDiscovery",
        lambda c: ServiceDiscovery(
            c, "/", instance=ServiceInstance(name=BASE[1:], id="me", address="h")
        ),
        1,
        0,
    ),
    Kind(
        "ServiceCache",
        lambda c: ServiceDiscovery(c, "/").cache(BASE[1:]),
        0,
        0,
        restartable=False,
    ),
    Kind(
        "ServiceProvider",
        lambda c: ServiceDiscovery(c, "/").provider(BASE[1:]),
        0,
        0,
        restartable=False,
    ),
]


NOT_RECIPES = {"Client"}
"""Started and closed too, but not recipes: the client's start connects and its
close ends the session (its own contract, in tests/integration/test_session.py)."""


def test_every_public_class_that_is_started_and_closed_is_checked_here() -> None:
    """A new recipe with ``start()`` and ``aclose()`` must join KINDS (and the kit's
    Lifecycle); this walk of the public surface fails until it does."""
    found = {
        name
        for name in aiocoord.__all__
        if inspect.isclass(cls := getattr(aiocoord, name))
        and inspect.iscoroutinefunction(getattr(cls, "start", None))
        and inspect.iscoroutinefunction(getattr(cls, "aclose", None))
    }
    assert found - NOT_RECIPES == {kind.name for kind in KINDS}
    # One start/close for all of them, written once: the kit's base.
    assert all(issubclass(getattr(aiocoord, kind.name), Resource) for kind in KINDS)


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest_asyncio.fixture
async def proxy(zookeeper: ZooKeeperTarget) -> AsyncIterator[TcpProxy]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    async with TcpProxy(host, int(port)) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def observer(started: Callable[..., Awaitable[list[aiocoord.Client]]]) -> aiocoord.Client:
    """A second client, with a direct connection: it makes BASE and looks under it."""
    (client,) = await started(1)
    await client.create(BASE)
    return client


@pytest_asyncio.fixture
async def through(
    zookeeper: ZooKeeperTarget, proxy: TcpProxy, state_log: Any
) -> AsyncIterator[tuple[aiocoord.Client, Any]]:
    """A started client whose network goes through ``proxy``, and its state log.

    A long session timeout keeps pings away while the proxy holds the network,
    so that a test's wait ends on the request under test and nothing else."""
    client = aiocoord.connect(
        proxy.connect_string, namespace=zookeeper.namespace, session_timeout=30.0
    )
    log = state_log(client)
    async with client:
        yield client, log


async def nodes_under_base(observer: aiocoord.Client, client: aiocoord.Client) -> list[str]:
    """BASE's children once anything ``client`` sent before is applied.

    ``client``'s round trip comes after every request the closed object could
    have sent in the same session (a session's requests are applied in order);
    the observer's sync then makes its own read see all of that.
    """
    await client.sync(BASE)
    await observer.sync(BASE)
    return sorted(await observer.children(BASE))


async def let_start_run_into_the_network(task: asyncio.Task[None]) -> None:
    """Let a fresh ``start()`` task run until it waits on the network.

    Its steps up to its first request await nothing else (no timer, no I/O), so a
    few passes of the loop take it there; then it must still be waiting.
    """
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done(), task


async def server_away(proxy: TcpProxy, log: Any) -> None:
    """Make the server unreachable for the proxied client (as if it were down)."""
    proxy.refuse(True)
    proxy.cut()
    async with asyncio.timeout(EVENT_TIMEOUT):
        await log.wait_for(ConnectionState.SUSPENDED)


async def server_back(proxy: TcpProxy, log: Any) -> None:
    proxy.refuse(False)
    async with asyncio.timeout(EVENT_TIMEOUT):
        await log.wait_for(ConnectionState.RECONNECTED)


# --- aclose() during start() ------------------------------------------------------------


async def test_aclose_cancels_a_start_waiting_for_the_server_and_nothing_appears_later(
    kind: Kind, through: tuple[aiocoord.Client, Any], proxy: TcpProxy, observer: aiocoord.Client
) -> None:
    client, log = through
    obj = kind.make(client)
    await server_away(proxy, log)
    starting = asyncio.create_task(obj.start())
    await let_start_run_into_the_network(starting)
    async with asyncio.timeout(EVENT_TIMEOUT):  # prompt: nothing was sent, nothing to undo
        await obj.aclose()
        with pytest.raises(RecipeClosedError, match="closed while starting"):
            await starting
    await server_back(proxy, log)
    assert await nodes_under_base(observer, client) == []
    assert client.background_tasks == 0 and client.pending_watches == 0


async def test_aclose_ends_a_start_stuck_in_a_create_and_deletes_what_it_made(
    kind: Kind, through: tuple[aiocoord.Client, Any], proxy: TcpProxy, observer: aiocoord.Client
) -> None:
    """The create left the client but is held in the network: the start ends at
    once; aclose() returns only once what that create made is gone again."""
    client, _log = through
    obj = kind.make(client)
    proxy.hold()
    starting = asyncio.create_task(obj.start())
    await let_start_run_into_the_network(starting)
    closing = asyncio.create_task(obj.aclose())
    async with asyncio.timeout(EVENT_TIMEOUT):
        with pytest.raises(RecipeClosedError, match="closed while starting"):
            await starting
    proxy.release()  # the create reaches the server and is applied
    async with asyncio.timeout(EVENT_TIMEOUT):
        await closing
    assert await nodes_under_base(observer, client) == []
    assert client.background_tasks == 0 and client.pending_watches == 0


async def test_a_start_cancelled_by_its_caller_raises_cancelled_error(
    kind: Kind, through: tuple[aiocoord.Client, Any], proxy: TcpProxy, observer: aiocoord.Client
) -> None:
    """The caller's own cancellation stays a CancelledError (a timeout around the
    start: TimeoutError); nothing is left, and the object may start again (a
    cache is closed by a failed start)."""
    client, log = through
    await server_away(proxy, log)
    timed_out = kind.make(client)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):
            await timed_out.start()
    obj = kind.make(client)
    starting = asyncio.create_task(obj.start())
    await let_start_run_into_the_network(starting)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await server_back(proxy, log)
    assert await nodes_under_base(observer, client) == []
    for again in (timed_out, obj):
        if kind.restartable:
            async with again:
                assert len(await nodes_under_base(observer, client)) == kind.while_started
        else:
            with pytest.raises(RecipeClosedError):
                await again.start()
            await again.aclose()
    assert len(await nodes_under_base(observer, client)) == kind.after_close


# --- the rest of the contract -------------------------------------------------------------


async def test_async_with_is_start_then_aclose(
    kind: Kind, started: Callable[..., Awaitable[list[aiocoord.Client]]], observer: aiocoord.Client
) -> None:
    (client,) = await started(1)
    async with kind.make(client):
        assert len(await nodes_under_base(observer, client)) == kind.while_started
    assert len(await nodes_under_base(observer, client)) == kind.after_close
    assert client.background_tasks == 0 and client.pending_watches == 0


async def test_aclose_is_idempotent_and_fine_before_start(
    kind: Kind, started: Callable[..., Awaitable[list[aiocoord.Client]]], observer: aiocoord.Client
) -> None:
    (client,) = await started(1)
    never = kind.make(client)
    await never.aclose()
    await never.aclose()
    assert await nodes_under_base(observer, client) == []

    obj = kind.make(client)
    await obj.start()
    await asyncio.gather(obj.aclose(), obj.aclose())  # the second waits for the first
    assert len(await nodes_under_base(observer, client)) == kind.after_close
    await obj.aclose()
    assert client.background_tasks == 0 and client.pending_watches == 0


async def test_starting_twice_or_after_aclose_is_an_error(
    kind: Kind, started: Callable[..., Awaitable[list[aiocoord.Client]]], observer: aiocoord.Client
) -> None:
    (client,) = await started(1)
    obj = kind.make(client)
    async with obj:
        with pytest.raises(RuntimeError, match="starts once") as info:
            await obj.start()
        assert not isinstance(info.value, RecipeClosedError)
    with pytest.raises(RecipeClosedError, match="cannot start again"):
        await obj.start()
    never = kind.make(client)
    await never.aclose()
    with pytest.raises(RecipeClosedError):
        await never.start()
    assert len(await nodes_under_base(observer, client)) == kind.after_close
