"""Semaphore, SemaphoreMutex and MultiLock against a real server."""

from __future__ import annotations

import asyncio

import pytest
from _exclusion import Exclusion
from _waiting import acquiring

import aiocoord
from aiocoord import MultiLock, Mutex, NotOwnerError, Semaphore, SemaphoreMutex
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(120)


async def test_never_more_than_max_leases(started) -> None:
    clients = await started(4)
    exclusion = Exclusion(limit=3)
    shared = asyncio.Event()

    async def worker(client: aiocoord.Client) -> None:
        sem = Semaphore(client, "/sem", 3)
        for i in range(4):
            async with sem:
                with exclusion.hold(client):
                    if i == 0:
                        await shared.wait()  # the first leases meet (3 fit: no deadlock)
                    await asyncio.sleep(0.003)  # time for a wrongly admitted fourth to come in

    workers = [asyncio.create_task(worker(c)) for c in clients for _ in range(2)]
    await exclusion.wait_inside(2)  # leases really are shared
    shared.set()
    await asyncio.gather(*workers)
    exclusion.assert_kept(entries=32)
    assert await Semaphore(clients[0], "/sem", 3).participants() == []


async def test_acquire_many_and_release_one_by_one(coord: aiocoord.Client) -> None:
    sem = Semaphore(coord, "/many", 3)
    leases = await sem.acquire(2)
    assert len(leases) == 2
    listed = await sem.participants()
    assert [p.node for p in listed] == [lease.node for lease in leases]
    assert all(p.holds and p.id is None for p in listed)
    with pytest.raises(aiocoord.OperationTimeoutError):
        await sem.acquire(2, timeout=0.2)  # only one left: all or nothing
    with pytest.raises(aiocoord.OperationTimeoutError):
        await sem.acquire(2, timeout=0)
    assert len(await sem.participants()) == 2
    one = await sem.acquire(1, timeout=1)
    for lease in [*leases, *one]:
        await lease.release()
        await lease.release()  # idempotent
    assert await sem.participants() == []
    with pytest.raises(ValueError):
        await sem.acquire(4)


async def test_a_crashed_holders_lease_comes_back(started, children_reach) -> None:
    a, b = await started(2)
    held = await Semaphore(a, "/crash", 1).acquire()
    assert held is not None
    waiting = asyncio.create_task(Semaphore(b, "/crash", 1).acquire())
    await children_reach(a, "/crash/leases", 2)
    assert not waiting.done()
    await a.aclose()  # the holder's process goes away: its ephemeral lease node too
    leases = await asyncio.wait_for(waiting, 10)
    assert leases is not None
    await leases[0].release()


async def test_lease_is_lost_with_the_session(coord: aiocoord.Client) -> None:
    sem = Semaphore(coord, "/lost", 2)
    leases = await sem.acquire()
    assert leases is not None
    lost = asyncio.create_task(leases[0].wait_lost())
    await expire_session(coord)
    await asyncio.wait_for(lost, 5)
    assert leases[0].lost
    await leases[0].release()  # the node went with the session: nothing to do


async def test_cancelled_waiter_leaves_no_lease_node(started, children_of) -> None:
    a, b = await started(2)
    sem_a = Semaphore(a, "/cancelled", 1)
    held = await sem_a.acquire()
    assert held is not None
    for steps in range(10):
        waiter = asyncio.create_task(Semaphore(b, "/cancelled", 1).acquire())
        for _ in range(steps):
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert [p.node for p in await sem_a.participants()] == [held[0].node], steps
        assert await children_of(a, "/cancelled/locks") == [], steps
    await held[0].release()


async def test_semaphore_mutex_is_not_reentrant(started) -> None:
    a, b = await started(2)
    lock = SemaphoreMutex(a, "/smutex")
    assert await lock.acquire()
    assert lock.is_held
    assert not await lock.acquire(timeout=0.2)  # waits for itself
    assert not await SemaphoreMutex(b, "/smutex").acquire(timeout=0.2)

    async def release_elsewhere() -> None:
        await lock.release()  # not task-bound, unlike Mutex

    await asyncio.create_task(release_elsewhere())
    assert not lock.is_held
    with pytest.raises(NotOwnerError):
        await lock.release()
    async with SemaphoreMutex(b, "/smutex"):
        pass


async def test_multi_lock_is_all_or_nothing(started, children_of) -> None:
    a, b = await started(2)
    blocker = Mutex(b, "/m2")
    await blocker.acquire()
    first, second = Mutex(a, "/m1"), Mutex(a, "/m2")
    multi = MultiLock([first, second])
    assert not await multi.acquire(timeout=0.3)
    assert not first.is_held and await children_of(a, "/m1") == []  # rolled back
    await blocker.release()
    async with multi:
        assert first.is_held and second.is_held
    assert not first.is_held and not second.is_held


async def test_multi_lock_rolls_back_on_cancellation(started, children_reach, children_of) -> None:
    a, b = await started(2)
    blocker = SemaphoreMutex(b, "/c2")
    await blocker.acquire()
    first = Mutex(a, "/c1")
    task = acquiring(MultiLock([first, SemaphoreMutex(a, "/c2")]))
    await children_reach(a, "/c2/leases", 2)  # first taken, waiting for the second
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await children_of(a, "/c1") == []
    await blocker.release()
