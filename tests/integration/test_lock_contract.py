"""One contract, every exclusive holder: the behaviours Curator's mutex test base and
kazoo's lock tests ask of a lock, run over each holder type aiocoord offers.

Mutex (also with local hand-off), the write side of a ReadWriteLock,
SemaphoreMutex, a one-lease Semaphore and a MultiLock all promise the same
things: one holder at a time (also when many tasks share one recipe object), a
timeout that leaves nothing behind, a zero timeout that tries once,
cancellation that leaves nothing behind, a holder that learns it lost the lock
when its session expires, and the lock passing on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from _exclusion import Exclusion
from _waiting import acquiring

import aiocoord
from aiocoord import (
    LockLostError,
    MultiLock,
    Mutex,
    ReadWriteLock,
    Semaphore,
    SemaphoreMutex,
)
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(120)


class _OneLease:
    """A one-lease Semaphore behind the lock interface (acquire/release/async with)."""

    def __init__(self, client: aiocoord.Client, path: str) -> None:
        self._semaphore = Semaphore(client, path, 1)
        self._leases: dict[asyncio.Task[Any] | None, aiocoord.SemaphoreLease] = {}

    async def acquire(self, *, timeout: float | None = None) -> bool:
        try:
            leases = await self._semaphore.acquire(1, timeout=timeout)
        except aiocoord.OperationTimeoutError:
            return False
        self._leases[asyncio.current_task()] = leases[0]
        return True

    async def try_acquire(self) -> bool:
        return await self.acquire(timeout=0)

    async def release(self) -> None:
        await self._leases.pop(asyncio.current_task()).release()

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        return await self._leases[asyncio.current_task()].wait_lost(timeout=timeout)

    def fence(self) -> aiocoord.Fence:
        lease = self._leases.get(asyncio.current_task())
        if lease is None:
            raise aiocoord.NotOwnerError("not held")
        return lease.fence()

    async def __aenter__(self) -> _OneLease:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


KINDS: dict[str, Callable[[aiocoord.Client, str], Any]] = {
    "mutex": Mutex,
    "mutex_local_handoff": lambda c, p: Mutex(c, p, local_handoff=4),
    "write_lock": lambda c, p: ReadWriteLock(c, p).write_lock,
    "semaphore_mutex": SemaphoreMutex,
    "one_lease_semaphore": _OneLease,
    "multi_lock": lambda c, p: MultiLock([Mutex(c, p + "-a"), Mutex(c, p)]),
}


@pytest.fixture(params=sorted(KINDS))
def make_lock(request: pytest.FixtureRequest) -> Callable[[aiocoord.Client, str], Any]:
    return KINDS[request.param]


async def nodes_under(client: aiocoord.Client, path: str) -> list[str]:
    """Every node below ``path`` (recursively), for leak checks."""
    try:
        children = await client.children(path)
    except aiocoord.NoNodeError:
        return []
    found: list[str] = []
    for child in children:
        found.append(f"{path}/{child}")
        found += await nodes_under(client, f"{path}/{child}")
    return found


async def contender_nodes(client: aiocoord.Client) -> list[str]:
    """Ephemeral nodes under the test's lock paths: what a contender leaves."""
    ephemeral = []
    for root in ("/lock", "/lock-a"):
        for node in await nodes_under(client, root):
            stat = await client.exists(node)
            if stat is not None and stat.is_ephemeral:
                ephemeral.append(node)
    return ephemeral


async def test_one_holder_at_a_time_across_clients_and_shared_objects(started, make_lock) -> None:
    clients = await started(3)
    exclusion = Exclusion()

    async def worker(lock: Any) -> None:
        for _ in range(4):
            async with lock:
                with exclusion.hold(lock):
                    await asyncio.sleep(0)  # let anyone who wrongly thinks they hold it in
                    await asyncio.sleep(0)

    # Three tasks share each client's one lock object, as handlers of a web app do.
    locks = [make_lock(c, "/lock") for c in clients]
    await asyncio.gather(*(worker(lock) for lock in locks for _ in range(3)))
    exclusion.assert_kept(entries=3 * 3 * 4)
    assert await contender_nodes(clients[0]) == []


async def test_timeout_returns_false_and_leaves_no_node(started, make_lock) -> None:
    a, b = await started(2)
    holder = make_lock(a, "/lock")
    assert await holder.acquire()
    before = await contender_nodes(a)
    assert not await make_lock(b, "/lock").acquire(timeout=0.2)
    assert not await make_lock(b, "/lock").try_acquire()
    assert await contender_nodes(a) == before
    await holder.release()
    assert await contender_nodes(a) == []


async def test_cancelled_waiter_leaves_no_node_and_the_lock_passes_on(started, make_lock) -> None:
    a, b, c = await started(3)
    holder = make_lock(a, "/lock")
    assert await holder.acquire()
    before = await contender_nodes(a)
    waiter = acquiring(make_lock(b, "/lock"))
    changes = a.children_changes("/lock")
    async for names in changes:  # the waiter is queued
        if names is not None and len(await contender_nodes(a)) > len(before):
            break
    await changes.aclose()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await contender_nodes(a) == before
    await holder.release()
    with anyio.fail_after(10):
        async with make_lock(c, "/lock"):
            pass


async def test_a_holder_whose_session_expires_learns_it_and_the_lock_passes_on(
    started, make_lock
) -> None:
    a, b = await started(2)
    holder = make_lock(a, "/lock")
    assert await holder.acquire()
    waiter = acquiring(make_lock(b, "/lock"))
    await expire_session(a)
    with anyio.fail_after(10):
        assert await holder.wait_lost()  # a MultiLock's: when any of its locks' is
        assert await waiter
    await holder.release()  # releasing a lost lock is allowed and deletes nothing


async def test_hold_cancels_the_body_when_the_lock_is_lost(coord: aiocoord.Client) -> None:
    multi = MultiLock([Mutex(coord, "/lock3"), SemaphoreMutex(coord, "/lock4")])
    for lock in (Mutex(coord, "/lock"), SemaphoreMutex(coord, "/lock2"), multi):
        reached_end = False
        with pytest.raises(LockLostError):
            async with lock.hold(cancel_on_loss=True):
                await expire_session(coord)
                await asyncio.Event().wait()  # cancelled by the loss
                reached_end = True
        assert not reached_end


def fences_of(lock: Any) -> list[aiocoord.Fence]:
    return [lock.fence()]  # a MultiLock's one fence guards all its locks


async def test_a_fenced_transaction_applies_only_while_held(started, make_lock) -> None:
    (client,) = await started(1)
    lock = make_lock(client, "/lock")
    await client.create("/guarded", b"0")
    async with lock:
        fences = fences_of(lock)
        results = await client.transaction().guard(*fences).set("/guarded", b"1").commit()
        assert len(results) == 1  # the guards have no entry
    with pytest.raises(LockLostError):
        await client.transaction().guard(*fences).set("/guarded", b"2").commit()
    assert (await client.get("/guarded"))[0] == b"1"


async def test_a_holder_that_holds_nothing_has_no_fence(started, make_lock) -> None:
    (client,) = await started(1)
    lock = make_lock(client, "/lock")
    with pytest.raises(aiocoord.NotOwnerError):
        fences_of(lock)
