"""One contract, every holder (docs/api.md, "Conventions"): the same tests run over
Mutex, both read-write sides, SemaphoreMutex, a MultiLock (also one nested in
another), a SemaphoreLease, Lease, LeaderLatch, a LeaderElection term and a queue
take, as Curator's TestInterProcessMutexBase runs over its locks.

Each holder kind says how to take a hold and how to lose it behind its holder's
back; the tests then check what every holder promises: ``is_held`` and
``wait_lost()`` tell of the loss, a transaction fenced while held is refused
once the hold is gone (a stale holder cannot write), and ``fencing_token``
grows from one grant to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from _kit import EVENT_TIMEOUT, Started

import aiocoord
from aiocoord import HoldLostError
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(120)


class Kind:
    """How to take and lose one kind of hold. ``take`` enters whatever must stay
    entered into ``stack``; the test's own task holds."""

    lost_error: type[HoldLostError] = aiocoord.LockLostError

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        raise NotImplementedError

    async def lose(self, holder: Any, client: aiocoord.Client, other: aiocoord.Client) -> None:
        """Take the hold away from ``client``'s holder: by default its session expires."""
        await expire_session(client)


class MutexKind(Kind):
    def __init__(self, make: Callable[[aiocoord.Client], Any]) -> None:
        self._make = make

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        lock = self._make(client)
        await stack.enter_async_context(lock.hold(cancel_on_loss=False))
        return lock


class SemaphoreLeaseKind(Kind):
    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        semaphore = aiocoord.Semaphore(client, "/held", 2)
        leases = await semaphore.acquire(1)
        assert leases is not None
        await stack.enter_async_context(leases[0].hold(cancel_on_loss=False))
        return leases[0]


class LeaseKind(Kind):
    """A Lease is lost by lapsing (its TTL node outlives the session), then taken over."""

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        lease = aiocoord.Lease(client, "/held", 0.5, participant_id="mine")
        assert await lease.try_acquire()
        stack.push_async_callback(lease.release)
        return lease

    async def lose(self, holder: Any, client: aiocoord.Client, other: aiocoord.Client) -> None:
        rival = aiocoord.Lease(other, "/held", 30, participant_id="rival")
        # A lapse is time passing: wait for it by the server's clock, which the
        # rival's tries read (each try deletes the lapsed node once it may).
        for _attempt in range(int(EVENT_TIMEOUT / 0.05)):
            if await rival.try_acquire():
                return
            await anyio.sleep(0.05)
        raise AssertionError("the lease never lapsed")


class LatchKind(Kind):
    lost_error = aiocoord.LeadershipLostError

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        latch = await stack.enter_async_context(
            aiocoord.LeaderLatch(client, "/held", participant_id="me")
        )
        assert await latch.wait_leader(timeout=EVENT_TIMEOUT)
        return latch


class ElectionKind(Kind):
    lost_error = aiocoord.LeadershipLostError

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        election = aiocoord.LeaderElection(client, "/held", participant_id="me")
        await stack.enter_async_context(election.hold(cancel_on_loss=False))
        return election


class TakeKind(Kind):
    """A take is lost with its session; then another consumer takes the same item,
    so a marker of the same name exists again (CURATOR-605's case)."""

    lost_error = aiocoord.TakeLostError

    async def take(self, stack: contextlib.AsyncExitStack, client: aiocoord.Client) -> Any:
        queue: aiocoord.Queue[bytes] = aiocoord.Queue(client, "/held")
        await queue.put(b"job")
        take = queue.take(cancel_on_loss=False)
        await stack.enter_async_context(take)
        return take

    async def lose(self, holder: Any, client: aiocoord.Client, other: aiocoord.Client) -> None:
        await expire_session(client)
        await holder.wait_lost()
        rival = aiocoord.Queue(other, "/held").take()
        assert await rival.__aenter__() == b"job"
        self.rival = rival  # holds the item (and a marker named as ours) until the test ends


KINDS: dict[str, Callable[[], Kind]] = {
    "mutex": lambda: MutexKind(lambda c: aiocoord.Mutex(c, "/held")),
    "mutex_local_handoff": lambda: MutexKind(lambda c: aiocoord.Mutex(c, "/held", local_handoff=4)),
    "read_lock": lambda: MutexKind(lambda c: aiocoord.ReadWriteLock(c, "/held").read_lock),
    "write_lock": lambda: MutexKind(lambda c: aiocoord.ReadWriteLock(c, "/held").write_lock),
    "semaphore_mutex": lambda: MutexKind(lambda c: aiocoord.SemaphoreMutex(c, "/held")),
    "multi_lock": lambda: MutexKind(
        lambda c: aiocoord.MultiLock([aiocoord.Mutex(c, "/held"), aiocoord.Mutex(c, "/held-2")])
    ),
    "nested_multi_lock": lambda: MutexKind(
        lambda c: aiocoord.MultiLock(
            [aiocoord.MultiLock([aiocoord.Mutex(c, "/held")]), aiocoord.SemaphoreMutex(c, "/s")]
        )
    ),
    "semaphore_lease": SemaphoreLeaseKind,
    "lease": LeaseKind,
    "leader_latch": LatchKind,
    "leader_election": ElectionKind,
    "queue_take": TakeKind,
}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]()


@contextlib.asynccontextmanager
async def holding(stack: contextlib.AsyncExitStack) -> AsyncIterator[None]:
    """Leave ``stack`` at the end, where leaving after a loss reports the loss."""
    try:
        yield
    finally:
        with contextlib.suppress(HoldLostError):
            await stack.aclose()


async def _drop_rival(kind: Kind) -> None:
    rival = getattr(kind, "rival", None)
    if rival is not None:
        await rival.__aexit__(None, None, None)


async def test_a_holder_learns_of_a_loss_behind_its_back(started: Started, kind: Kind) -> None:
    client, other = await started(2)
    stack = contextlib.AsyncExitStack()
    async with holding(stack):
        holder = await kind.take(stack, client)
        assert holder.is_held
        token = holder.fencing_token
        # Handed to a task of its own, as a holder watching for loss would.
        lost = asyncio.create_task(holder.wait_lost())
        await asyncio.sleep(0)
        assert not lost.done()
        await kind.lose(holder, client, other)
        with anyio.fail_after(EVENT_TIMEOUT):
            await lost
        # A LeaderLatch queues again in its new session, as Curator's does, and
        # alone it may already lead again: then it is a new term, with a new token.
        assert not holder.is_held or holder.fencing_token != token
    await _drop_rival(kind)


async def test_a_fence_refuses_a_stale_holder(started: Started, kind: Kind) -> None:
    client, other = await started(2)
    stack = contextlib.AsyncExitStack()
    async with holding(stack):
        holder = await kind.take(stack, client)
        # Built while held, committed after the loss: a holder paused for a while.
        guarded = holder.transaction().create("/effect-1")
        fence = holder.fence()
        assert isinstance(fence, aiocoord.Fence)
        await kind.lose(holder, client, other)
        with pytest.raises(kind.lost_error):
            await guarded.commit()
        with pytest.raises(kind.lost_error):
            await client.transaction().guard(fence).create("/effect-2").commit()
        assert await other.exists("/effect-1") is None
        assert await other.exists("/effect-2") is None
    await _drop_rival(kind)


async def test_a_fenced_transaction_applies_while_held(started: Started, kind: Kind) -> None:
    (client,) = await started(1)
    stack = contextlib.AsyncExitStack()
    async with stack:
        holder = await kind.take(stack, client)
        await holder.transaction().create("/effect").commit()
        assert await client.exists("/effect") is not None


async def test_the_fencing_token_grows_with_every_grant(started: Started, kind: Kind) -> None:
    first, second = await started(2)
    tokens = []
    for client in (first, second, first):
        if isinstance(kind, TakeKind):
            await aiocoord.Queue(client, "/held").put(b"another")
        async with contextlib.AsyncExitStack() as stack:
            holder = await kind.take(stack, client)
            tokens.append(holder.fencing_token)
            # A MultiLock's is its locks' tokens, in order: each grows.
            assert isinstance(tokens[-1], int | tuple)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3, tokens
    if isinstance(tokens[0], tuple):
        for resource in zip(*tokens, strict=True):
            assert list(resource) == sorted(resource) and len(set(resource)) == 3, tokens


async def test_a_holder_that_holds_nothing_has_no_contract(started: Started, kind: Kind) -> None:
    (client,) = await started(1)
    async with contextlib.AsyncExitStack() as stack:
        holder = await kind.take(stack, client)
    assert not holder.is_held
    with pytest.raises(aiocoord.OwnershipError):
        holder.fence()
    with pytest.raises(aiocoord.OwnershipError):
        holder.fencing_token  # noqa: B018
    with pytest.raises((aiocoord.OwnershipError, RuntimeError)):
        await holder.wait_lost()
