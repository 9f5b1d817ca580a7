"""Races in which two holders could coexist, each forced into its worst interleaving.

Every test here failed before the fix it guards. Where a race needs a precise
schedule (a session expiring between two steps of an acquire), the test wraps
the one client call at that step and injects the fault there.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from _exclusion import Exclusion

import aiocoord
from aiocoord import (
    ConnectionState,
    DetachedAcquireError,
    MultiLock,
    Mutex,
    NotOwnerError,
    ReadWriteLock,
    Semaphore,
    SemaphoreMutex,
)
from aiocoord._recipes._kit._contenders import WRITE_LOCK_NAME, mutex_rule
from aiocoord.testing import TcpProxy, expire_session

pytestmark = pytest.mark.timeout(120)

# Python 3.11's asyncio.wait_for runs its argument in a task of its own; since 3.12 it
# awaits it in the caller's task (under asyncio.timeout). A task-owned lock sees the two
# differently, so the tests of wait_for around an acquire are per version.
WAIT_FOR_WRAPS_IN_A_TASK = sys.version_info < (3, 12)
_WAIT_FOR_311_ONLY = "Python 3.11 only: there wait_for acquires in a task of its own"
_WAIT_FOR_312_ON = "Python 3.12+: there wait_for acquires in the caller's task"


class Section:
    """A critical section that records every entry made while someone else was inside."""

    def __init__(self) -> None:
        self.exclusion = Exclusion()
        self.entered: dict[str, asyncio.Event] = {}
        self.leave: dict[str, asyncio.Event] = {}

    def expect(self, name: str) -> None:
        self.entered[name] = asyncio.Event()
        self.leave[name] = asyncio.Event()

    async def run(self, lock: Any, name: str) -> None:
        async with lock:
            with self.exclusion.hold(name):
                self.entered[name].set()
                await self.leave[name].wait()


async def _waiter_and_third_never_overlap(
    holder_client: aiocoord.Client,
    waiter_client: aiocoord.Client,
    third_client: aiocoord.Client,
    fault: Callable[[], Awaitable[None]],
    children_reach: Any,
    state_log: Any,
) -> None:
    """A holder, a waiter whose session ``fault`` expires just before its first
    watch request, and a third client that queues after the expiry: when the
    holder releases, the waiter and the third must take turns."""
    waiter_states = state_log(waiter_client)
    holder = Mutex(holder_client, "/lock")
    assert await holder.acquire()

    real_watch_exists = waiter_client.watch_exists
    calls = 0

    async def fault_before_first_watch(path: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await fault()
        return await real_watch_exists(path)

    waiter_client.watch_exists = fault_before_first_watch  # type: ignore[method-assign]
    section = Section()
    section.expect("waiter")
    section.expect("third")
    waiter = asyncio.create_task(section.run(Mutex(waiter_client, "/lock"), "waiter"))
    await waiter_states.wait_for(ConnectionState.LOST)
    third = asyncio.create_task(section.run(Mutex(third_client, "/lock"), "third"))
    # The holder, the third client, and the waiter queued again in its new session.
    await children_reach(holder_client, "/lock", 3)
    await holder.release()

    await section.entered["third"].wait()
    section.leave["third"].set()
    await section.entered["waiter"].wait()
    section.leave["waiter"].set()
    await asyncio.gather(waiter, third)
    section.exclusion.assert_kept()


async def test_a_waiter_whose_session_expired_mid_wait_never_holds_alongside_another(
    started, children_reach, state_log
) -> None:
    """Item 1: the waiter's next request runs in a new session, after the old one
    (and the waiter's node) expired; its decision must not rest on that reply."""
    holder_client, waiter_client, third_client = await started(3)

    async def expire() -> None:
        await expire_session(waiter_client)

    await _waiter_and_third_never_overlap(
        holder_client, waiter_client, third_client, expire, children_reach, state_log
    )


async def test_a_waiters_request_in_flight_when_its_session_expires(
    zookeeper: Any, started, children_reach, state_log
) -> None:
    """Item 1 as it was seen: the waiter's exists request is on the wire (held by a
    proxy) when the session expires, fails with a connection loss, and is retried
    in the new session."""
    host, port = zookeeper.connect_string.rsplit(":", 1)
    server = (host, int(port))
    holder_client, third_client = await started(2)
    async with TcpProxy(*server) as proxy:
        waiter_client = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)
        async with waiter_client:

            async def stall_and_expire() -> None:
                proxy.hold()
                await expire_session(waiter_client, address=server, wait=False)
                # The request is written into the held proxy before this runs.
                asyncio.get_running_loop().call_soon(proxy.release)

            await _waiter_and_third_never_overlap(
                holder_client,
                waiter_client,
                third_client,
                stall_and_expire,
                children_reach,
                state_log,
            )


async def test_a_lease_granted_while_the_session_expires_is_reported_lost(
    started,
) -> None:
    """Item 2: LOST then CONNECTED between the room check and the lease's
    registration must not go unseen."""
    a, b = await started(2)
    sem = Semaphore(a, "/sem", 1)
    real_release = sem._mutex.release

    async def expire_then_release() -> None:
        await expire_session(a)  # returns once a new session is CONNECTED
        await real_release()

    sem._mutex.release = expire_then_release  # type: ignore[method-assign]
    leases = await sem.acquire()
    assert leases is not None
    assert leases[0].lost, "the lease's node went with the session"
    other = await Semaphore(b, "/sem", 1).acquire(timeout=10)
    assert other is not None
    await other[0].release()
    await leases[0].release()


async def test_tasks_sharing_a_semaphore_each_release_their_own_lease(
    coord: aiocoord.Client,
) -> None:
    """Item 3: leaving ``async with sem`` releases the leaving task's lease only."""
    sem = Semaphore(coord, "/shared", 2)
    a_in, b_in, a_out, b_out = (asyncio.Event() for _ in range(4))
    nodes: dict[str, str] = {}

    async def holder(name: str, entered: asyncio.Event, leave: asyncio.Event) -> None:
        async with sem as lease:
            nodes[name] = lease.node
            entered.set()
            await leave.wait()
            # Still ours while we are inside, whatever other tasks did.
            assert await coord.exists(lease.node) is not None

    task_a = asyncio.create_task(holder("a", a_in, a_out))
    await a_in.wait()
    task_b = asyncio.create_task(holder("b", b_in, b_out))
    await b_in.wait()
    a_out.set()
    await task_a
    assert await coord.exists(nodes["a"]) is None
    assert await coord.exists(nodes["b"]) is not None
    b_out.set()
    await task_b
    assert await sem.participants() == []


async def test_a_downgraded_read_lock_keeps_a_queued_writer_out(started, children_reach) -> None:
    """Item 4 (Curator's CURATOR-621): write, read, release write; a writer queued
    meanwhile must wait for the read lock too."""
    a, b = await started(2)
    lock_a = ReadWriteLock(a, "/rw")
    lock_b = ReadWriteLock(b, "/rw")
    assert await lock_a.write_lock.acquire()
    reading = True
    writer_saw_reading: list[bool] = []

    async def second_writer() -> None:
        assert await lock_b.write_lock.acquire()
        writer_saw_reading.append(reading)
        await lock_b.write_lock.release()

    task = asyncio.create_task(second_writer())
    await children_reach(a, "/rw", 2)  # the second writer is queued
    assert await lock_a.read_lock.acquire()
    await lock_a.write_lock.release()

    names = await a.children("/rw")
    second = next(n for n in names if WRITE_LOCK_NAME in n)
    rule = mutex_rule(1, (WRITE_LOCK_NAME, "__READ__"))
    assert not rule(names, second).holds, names

    reading = False
    await lock_a.read_lock.release()
    await task
    assert writer_saw_reading == [False]


async def test_nested_multi_lock_acquisitions_release_every_hold(
    started,
) -> None:
    """Item 5: three acquires and three releases leave nothing held."""
    a, b = await started(2)
    first, second = Mutex(a, "/m1"), Mutex(a, "/m2")
    multi = MultiLock([first, second])
    for _ in range(3):
        assert await multi.acquire()
    assert first.hold_count == 3
    for _ in range(3):
        await multi.release()
    assert first.hold_count == 0 and second.hold_count == 0
    with pytest.raises(NotOwnerError):
        await multi.release()
    other = MultiLock([Mutex(b, "/m1"), Mutex(b, "/m2")])
    assert await other.try_acquire()
    await other.release()


async def test_a_semaphore_waiter_whose_session_expired_queues_again(
    started, children_reach
) -> None:
    """Item 6: the waiter is not failed with SessionExpiredError; it waits on."""
    a, b = await started(2)
    held = await Semaphore(b, "/sem", 1).acquire()
    assert held is not None
    waiting = asyncio.create_task(Semaphore(a, "/sem", 1).acquire())
    await children_reach(b, "/sem/leases", 2)
    await expire_session(a)
    await children_reach(b, "/sem/leases", 2)  # queued again in the new session
    await held[0].release()
    leases = await waiting
    assert leases is not None and not leases[0].lost
    assert await b.exists(leases[0].node) is not None
    await leases[0].release()


async def test_a_semaphore_waiter_whose_node_was_deleted_queues_again(
    started, children_reach
) -> None:
    a, b = await started(2)
    held = await Semaphore(b, "/sem", 1).acquire()
    assert held is not None
    waiting = asyncio.create_task(Semaphore(a, "/sem", 1).acquire())
    names = await children_reach(b, "/sem/leases", 2)
    theirs = next(n for n in names if n != held[0].node.rsplit("/", 1)[1])
    await b.delete(f"/sem/leases/{theirs}")
    changes = b.children_changes("/sem/leases")
    async for current in changes:  # wait for the replacement node
        if current and len(current) == 2 and theirs not in current:
            break
    await changes.aclose()
    await held[0].release()
    leases = await waiting
    assert leases is not None and not leases[0].lost
    await leases[0].release()


@pytest.mark.parametrize("kind", ["mutex", "write", "read", "semaphore_mutex", "multi"])
async def test_a_zero_timeout_tries_exactly_once(started, children_of, kind: str) -> None:
    """Item 7: ``acquire(timeout=0)`` and ``try_acquire()`` take a free lock, and
    return False on a held one, leaving no node behind."""
    a, b = await started(2)

    def make(client: aiocoord.Client) -> Any:
        if kind == "mutex":
            return Mutex(client, "/try")
        if kind == "write":
            return ReadWriteLock(client, "/try").write_lock
        if kind == "read":
            return ReadWriteLock(client, "/try").read_lock
        if kind == "semaphore_mutex":
            return SemaphoreMutex(client, "/try")
        return MultiLock([Mutex(client, "/try"), Mutex(client, "/try2")])

    first = make(a)
    assert await first.acquire(timeout=0)
    blocker = ReadWriteLock(b, "/try").write_lock if kind == "read" else make(b)
    assert not await blocker.try_acquire()
    assert not await blocker.acquire(timeout=0)
    await first.release()
    assert await first.try_acquire()
    await first.release()
    assert await children_of(a, "/try") == [] or kind == "semaphore_mutex"


async def test_semaphore_zero_timeout(started) -> None:
    a, b = await started(2)
    sem = Semaphore(a, "/sem", 2)
    leases = await sem.acquire(2, timeout=0)
    assert leases is not None and len(leases) == 2
    with pytest.raises(aiocoord.OperationTimeoutError):
        await Semaphore(b, "/sem", 2).acquire(timeout=0)
    assert len(await sem.participants()) == 2  # the look kept nothing
    await leases[0].release()
    more = await Semaphore(b, "/sem", 2).acquire(timeout=0)
    await more[0].release()
    await leases[1].release()
    assert await sem.participants() == []


async def test_a_lock_acquired_by_a_task_that_ends_is_released(
    started, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 11: a task that ends holding a lock (here one that only acquires) has it
    released, with a warning."""
    a, b = await started(2)
    lock = Mutex(a, "/orphan")

    async def take() -> bool:
        return await lock.acquire()

    assert await asyncio.create_task(take())  # the acquiring task ends holding it
    with pytest.raises(NotOwnerError, match="wait_for"):
        await lock.release()
    with anyio.fail_after(10):
        async with lock:  # no hang: the orphaned hold was released
            pass
        async with Mutex(b, "/orphan"):
            pass
    assert "ended while holding the lock" in caplog.text


def _task_owned_locks(client: aiocoord.Client) -> dict[str, Any]:
    """Every lock that belongs to the task that acquires it, on ``/detached``."""
    rw = ReadWriteLock(client, "/detached")
    return {
        "mutex": Mutex(client, "/detached"),
        "read": rw.read_lock,
        "write": rw.write_lock,
        "multi": MultiLock([Mutex(client, "/detached")]),
    }


def _refused(error: DetachedAcquireError) -> None:
    assert isinstance(error, aiocoord.CoordinationError)
    assert isinstance(error, RuntimeError)
    assert "acquire(timeout=...)" in str(error)
    assert "asyncio.timeout()" in str(error)


@pytest.mark.parametrize("kind", ["mutex", "read", "write", "multi"])
@pytest.mark.parametrize("spawn", ["create_task", "ensure_future", "task_group", "try_acquire"])
async def test_an_acquire_that_is_all_its_task_runs_is_refused_before_any_node(
    started, children_of, kind: str, spawn: str
) -> None:
    """The task would end as soon as it holds, and the lock with it: whoever awaited
    the task would think it held the lock. Refused before anything is written."""
    a, b = await started(2)
    lock = _task_owned_locks(a)[kind]
    with pytest.raises(DetachedAcquireError) as raised:
        if spawn == "create_task":
            await asyncio.create_task(lock.acquire())
        elif spawn == "ensure_future":
            await asyncio.ensure_future(lock.acquire(timeout=5))
        elif spawn == "try_acquire":
            await asyncio.create_task(lock.try_acquire())
        else:
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(lock.acquire())
            except* DetachedAcquireError as group_error:
                raise group_error.exceptions[0] from None
    _refused(raised.value)
    assert await children_of(a, "/detached") == []
    assert not lock.is_held
    async with Mutex(b, "/detached").hold(timeout=10):  # nobody holds it
        pass


@pytest.mark.skipif(not WAIT_FOR_WRAPS_IN_A_TASK, reason=_WAIT_FOR_311_ONLY)
async def test_wait_for_on_an_acquire_is_refused(started, children_of) -> None:
    """Python 3.11's wait_for runs the acquire in a task of its own: refused, loudly,
    instead of returning True for a lock released as that task ends."""
    (a,) = await started(1)
    lock = Mutex(a, "/orphan")
    with pytest.raises(DetachedAcquireError) as raised:
        await asyncio.wait_for(lock.acquire(), 5)
    _refused(raised.value)
    assert await children_of(a, "/orphan") == []
    async with asyncio.timeout(10), lock:  # the fixes the message names work
        assert lock.is_held
    assert await lock.acquire(timeout=5)
    await lock.release()


async def test_semaphore_locks_not_bound_to_a_task_may_be_acquired_in_one(started) -> None:
    """A Semaphore's leases and a SemaphoreMutex's hold do not belong to a task: taken
    in a task of its own, they are still held, and released from another task."""
    a, b = await started(2)
    leases = await asyncio.create_task(Semaphore(a, "/sem", 1).acquire())
    assert leases is not None and leases[0].is_held
    await leases[0].release()
    lock = SemaphoreMutex(a, "/semmutex")
    assert await asyncio.create_task(lock.acquire())
    assert lock.is_held
    assert not await SemaphoreMutex(b, "/semmutex").try_acquire()
    await lock.release()
    assert await SemaphoreMutex(b, "/semmutex").acquire(timeout=10)


@pytest.mark.skipif(WAIT_FOR_WRAPS_IN_A_TASK, reason=_WAIT_FOR_312_ON)
async def test_wait_for_on_an_acquire_holds_for_the_caller(started) -> None:
    """On 3.12+ ``wait_for`` awaits the acquire in the caller's task: the caller holds
    the lock until it releases it, as with a plain ``await lock.acquire()``."""
    a, b = await started(2)
    lock = Mutex(a, "/held")
    assert await asyncio.wait_for(lock.acquire(), 5)
    assert lock.is_held
    other = Mutex(b, "/held")
    assert not await other.acquire(timeout=0.5)
    await lock.release()
    with anyio.fail_after(10):
        assert await other.acquire()
    await other.release()
