"""Lease: the self-expiring try-lock on TTL nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import aiocoord
from aiocoord import (
    Lease,
    LeaseHeldError,
    LockLostError,
    Mutex,
    NotOwnerError,
    TTLNodesDisabledError,
)
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., aiocoord.Client]


async def test_only_one_holder_at_a_time(client_factory: ClientFactory, children_of) -> None:
    clients = [client_factory() for _ in range(3)]
    await asyncio.gather(*(c.start() for c in clients))
    leases = [
        Lease(c, "/lease", ttl=30, participant_id=f"worker-{i}") for i, c in enumerate(clients)
    ]
    wins = await asyncio.gather(*(lease.try_acquire() for lease in leases))
    assert sum(wins) == 1
    winner = leases[wins.index(True)]
    assert winner.is_held and 29 < winner.remaining <= 30
    assert [lease.is_held for lease in leases].count(True) == 1
    # Losers leave nothing behind.
    assert len(await children_of(clients[0], "/lease")) == 1
    assert await winner.try_acquire()  # already ours: renews
    await winner.release()
    assert not winner.is_held
    assert await children_of(clients[0], "/lease") == []
    loser = leases[wins.index(False)]
    assert await loser.try_acquire()
    await loser.release()


async def test_a_vanished_holder_lapses_after_its_ttl(client_factory: ClientFactory) -> None:
    a, b = client_factory(), client_factory()
    await a.start()
    await b.start()
    first = Lease(a, "/lapse", ttl=0.5, participant_id="first")
    assert await first.try_acquire()
    second = Lease(b, "/lapse", ttl=0.5, participant_id="second")
    assert not await second.try_acquire()
    # The holder stops renewing (as if hung). Once its TTL has passed by the
    # server's clock the next contender takes over, without waiting for the
    # server's periodic sweep of expired nodes. Expiry is about time passing,
    # so here the test does wait.
    await asyncio.sleep(0.6)
    assert not first.is_held  # its own clock says so too
    assert await second.try_acquire()
    with pytest.raises(LockLostError):
        await first.renew()
    await second.release()


async def test_renew_keeps_the_lease_past_its_ttl(client_factory: ClientFactory) -> None:
    a, b = client_factory(), client_factory()
    await a.start()
    await b.start()
    holder = Lease(a, "/renewed", ttl=0.4, participant_id="h")
    assert await holder.try_acquire()
    for _ in range(4):
        await asyncio.sleep(0.2)
        await holder.renew()
        assert not await Lease(b, "/renewed", ttl=0.4, participant_id="other").try_acquire()
    assert holder.is_held
    await holder.release()


async def test_the_same_holder_takes_its_lease_back(
    client_factory: ClientFactory, children_of
) -> None:
    a, b = client_factory(), client_factory()
    await a.start()
    await b.start()
    before = Lease(a, "/again", ttl=30, participant_id="svc-1")
    assert await before.try_acquire()
    # A restarted process with the same holder id resumes the lease.
    after = Lease(b, "/again", ttl=30, participant_id="svc-1")
    assert await after.try_acquire()
    assert after.node == before.node
    assert len(await children_of(b, "/again")) == 1
    await after.release()


async def test_clear_error_when_the_server_has_ttl_nodes_disabled() -> None:
    async with (
        ZooKeeperServer(jvm_args=["-Dzookeeper.extendedTypesEnabled=false"]) as server,
        aiocoord.connect(server.connect_string) as client,
    ):
        with pytest.raises(TTLNodesDisabledError, match="extendedTypesEnabled"):
            await Lease(client, "/nope", ttl=1, participant_id="x").try_acquire()


def test_bad_arguments(idle_client: aiocoord.Client) -> None:
    client = idle_client
    with pytest.raises(ValueError):
        Lease(client, "/x", ttl=0, participant_id="h")
    with pytest.raises(aiocoord.InvalidPathError):
        Lease(client, "x", ttl=1, participant_id="h")


async def test_entering_a_lease_held_by_another_raises_lease_held(
    client_factory: ClientFactory,
) -> None:
    a, b = client_factory(), client_factory()
    await asyncio.gather(a.start(), b.start())
    async with Lease(a, "/held", ttl=30, participant_id="a"):
        with pytest.raises(LeaseHeldError) as caught:
            async with Lease(b, "/held", ttl=30, participant_id="b"):
                pass
        assert caught.value.path == "/held"
        assert not isinstance(caught.value, NotOwnerError)


async def test_one_transaction_fenced_by_a_lock_and_a_lease(
    client_factory: ClientFactory,
) -> None:
    client = client_factory()
    await client.start()
    await client.create("/data", b"0")
    lease = Lease(client, "/both-lease", ttl=30, participant_id="h")
    mutex = Mutex(client, "/both-lock")
    async with mutex:
        assert await lease.try_acquire()
        fences = (mutex.fence(), lease.fence())
        await client.transaction().guard(*fences).set("/data", b"1").commit()
        await lease.release()
        with pytest.raises(LockLostError) as caught:
            await client.transaction().guard(*fences).set("/data", b"2").commit()
        assert caught.value.path == "/both-lease"
    assert (await client.get("/data"))[0] == b"1"
    with pytest.raises(NotOwnerError):
        lease.fence()


async def test_wait_lost_returns_on_release_and_on_lapse(client_factory: ClientFactory) -> None:
    client = client_factory()
    await client.start()
    lease = Lease(client, "/waiting", ttl=30, participant_id="h")
    with pytest.raises(NotOwnerError):
        await lease.wait_lost()
    assert await lease.try_acquire()
    waiter = asyncio.create_task(lease.wait_lost())
    await asyncio.sleep(0)
    assert not waiter.done()
    await lease.release()
    await waiter
    short = Lease(client, "/lapsing", ttl=0.3, participant_id="h")
    assert await short.try_acquire()
    await short.wait_lost()  # nobody renews: it lapses by the local clock
    assert not short.is_held


async def test_hold_keeps_the_lease_alive_while_the_block_runs(
    client_factory: ClientFactory,
) -> None:
    a, b = client_factory(), client_factory()
    await asyncio.gather(a.start(), b.start())
    lease = Lease(a, "/kept", ttl=0.3, participant_id="a")
    async with lease.hold():
        # Several TTLs pass (time passing is the point here); renewals keep it.
        for _ in range(4):
            await asyncio.sleep(0.2)
            assert lease.is_held
            assert not await Lease(b, "/kept", ttl=0.3, participant_id="b").try_acquire()
    assert not lease.is_held
    assert await Lease(b, "/kept", ttl=0.3, participant_id="b").try_acquire()


async def test_hold_without_keep_alive_cancels_the_block_when_the_lease_lapses(
    client_factory: ClientFactory,
) -> None:
    client = client_factory()
    await client.start()
    lease = Lease(client, "/lapsing-hold", ttl=0.3, participant_id="h")
    reached_end = False
    with pytest.raises(LockLostError):
        async with lease.hold(keep_alive=False):
            await asyncio.Event().wait()  # only the lapse ends this
            reached_end = True
    assert not reached_end and not lease.is_held
    assert client.background_tasks == 0


async def test_hold_refuses_a_lease_held_by_another(client_factory: ClientFactory) -> None:
    a, b = client_factory(), client_factory()
    await asyncio.gather(a.start(), b.start())
    async with Lease(a, "/taken", ttl=30, participant_id="a").hold():
        with pytest.raises(LeaseHeldError):
            async with Lease(b, "/taken", ttl=30, participant_id="b").hold():
                pass
