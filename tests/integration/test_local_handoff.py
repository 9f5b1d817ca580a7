"""Mutex(local_handoff=N): the tasks sharing one Mutex object pass the lock among
themselves, up to N grants per turn of their shared node, then let other processes
have it; every grant has a larger fencing token; faults behave as with a plain Mutex."""

from __future__ import annotations

import asyncio
import logging

import anyio
import pytest
from _exclusion import Exclusion
from _waiting import acquiring

import aiocoord
from aiocoord import ClientClosedError, LockLostError, Mutex
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


async def queued_here(lock: Mutex, tasks: int) -> None:
    """Let freshly made tasks run up to their wait: local waiters queue without I/O."""
    for _ in range(20):
        if lock._local is not None and lock._local.waiting >= tasks:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{tasks} tasks did not queue on {lock!r}")


async def test_tasks_pass_the_lock_locally_one_node_fifo_and_growing_tokens(
    coord: aiocoord.Client, children_of
) -> None:
    lock = Mutex(coord, "/lock", local_handoff=100)
    order: list[int] = []
    tokens: list[int] = []
    nodes: set[str] = set()
    exclusion = Exclusion()

    async def task(i: int) -> None:
        async with lock:
            with exclusion.hold(i):
                order.append(i)
                tokens.append(lock.fencing_token)
                nodes.add(lock.node)
                await asyncio.sleep(0)

    async with lock:
        first_token = lock.fencing_token
        tasks = [asyncio.create_task(task(i)) for i in range(20)]
        await queued_here(lock, 20)
        assert len(await children_of(coord, "/lock")) == 1  # one node serves them all
    await asyncio.gather(*tasks)
    exclusion.assert_kept(entries=20)
    assert order == list(range(20))  # in the order they asked
    assert len(nodes) == 1
    assert tokens == sorted(set(tokens)) and tokens[0] > first_token
    assert tokens == [first_token + 1 + i for i in range(20)]
    assert await children_of(coord, "/lock") == []  # given up once nobody waits


async def test_other_processes_are_served_within_the_bound(started) -> None:
    a, b = await started(2)
    lock = Mutex(a, "/lock", local_handoff=3)
    other = Mutex(b, "/lock")
    order: list[str] = []
    tokens: list[int] = []
    holding, let_go = asyncio.Event(), asyncio.Event()

    async def local(name: str, hold_until: asyncio.Event | None = None) -> None:
        async with lock:
            order.append(name)
            tokens.append(lock.fencing_token)
            if hold_until is not None:
                holding.set()
                await hold_until.wait()

    async def remote() -> None:
        async with other:
            order.append("B")
            tokens.append(other.fencing_token)

    first = asyncio.create_task(local("a0", let_go))
    await holding.wait()
    locals_ = [asyncio.create_task(local(f"a{i}")) for i in range(1, 7)]
    await queued_here(lock, 6)
    queued = asyncio.create_task(remote())
    changes = a.children_changes("/lock")
    async for names in changes:  # B's node is queued behind ours
        if names is not None and len(names) == 2:
            break
    await changes.aclose()
    let_go.set()
    await asyncio.gather(first, *locals_, queued)
    # Three grants on our node (the bound), then B, then ours again on a new node.
    assert order == ["a0", "a1", "a2", "B", "a3", "a4", "a5", "a6"]
    assert tokens == sorted(set(tokens))


async def test_a_timed_out_or_cancelled_local_waiter_leaves_the_others_in_line(
    coord: aiocoord.Client,
) -> None:
    lock = Mutex(coord, "/lock", local_handoff=10)
    got: list[str] = []

    async def wait(name: str, timeout: float | None = None) -> bool:
        if not await lock.acquire(timeout=timeout):
            return False
        got.append(name)
        await lock.release()
        return True

    assert await lock.acquire()
    timed = asyncio.create_task(wait("timed", 0.05))
    cancelled = asyncio.create_task(wait("cancelled"))
    patient = asyncio.create_task(wait("patient"))
    await queued_here(lock, 3)
    assert not await timed
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await lock.release()
    assert await patient
    assert got == ["patient"]


async def test_try_acquire_is_false_while_a_task_of_ours_holds(coord: aiocoord.Client) -> None:
    lock = Mutex(coord, "/lock", local_handoff=10)

    async def other_task() -> bool:
        return await lock.try_acquire()

    async with lock:
        assert await lock.acquire(timeout=0)  # reentrant for the holder itself
        await lock.release()
        assert not await asyncio.create_task(other_task())
    assert await asyncio.create_task(other_task()) is True


async def test_the_last_waiter_giving_up_deletes_the_node_queued_for_it(
    started, children_of
) -> None:
    a, b = await started(2)
    held_elsewhere = Mutex(b, "/lock")
    assert await held_elsewhere.acquire()
    lock = Mutex(a, "/lock", local_handoff=10)
    first = acquiring(lock)  # queues our node behind B
    second = acquiring(lock)
    await queued_here(lock, 1)
    changes = a.children_changes("/lock")
    async for names in changes:
        if names is not None and len(names) == 2:
            break
    first.cancel()  # the waiter behind it inherits the place: a node queued for it
    with pytest.raises(asyncio.CancelledError):
        await first
    async for names in changes:
        if names is not None and len(names) == 2:
            break
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    with anyio.fail_after(10):
        async for names in changes:  # the node queued for it goes
            if names is not None and len(names) == 1:
                break
    await changes.aclose()
    await held_elsewhere.release()
    with anyio.fail_after(10):
        async with lock:
            pass
    assert await children_of(a, "/lock") == []


async def test_a_lost_session_tells_the_holder_and_the_next_task_gets_a_new_node(
    coord: aiocoord.Client,
) -> None:
    lock = Mutex(coord, "/lock", local_handoff=10)
    assert await lock.acquire()
    old_node, old_token = lock.node, lock.fencing_token
    result: dict[str, object] = {}

    async def next_task() -> None:
        async with lock:
            result["node"], result["token"] = lock.node, lock.fencing_token
            result["held"] = lock.is_owned_by_current_task()

    waiting = asyncio.create_task(next_task())
    await queued_here(lock, 1)
    await expire_session(coord)
    with anyio.fail_after(10):
        await lock.wait_lost()
    with pytest.raises(LockLostError):
        await lock.acquire()  # a lost hold is reported, never silently renewed
    await lock.release()
    with anyio.fail_after(10):
        await waiting
    assert result["held"] is True
    assert result["node"] != old_node
    assert isinstance(result["token"], int) and result["token"] > old_token


async def test_a_holder_task_that_ends_without_releasing_hands_the_lock_on(
    coord: aiocoord.Client, caplog: pytest.LogCaptureFixture
) -> None:
    lock = Mutex(coord, "/lock", local_handoff=10)

    async def forgetful() -> None:
        await lock.acquire()

    holder = asyncio.create_task(forgetful())
    await holder
    with caplog.at_level(logging.WARNING, logger="aiocoord"), anyio.fail_after(10):
        async with lock:
            assert lock.is_owned_by_current_task()
    assert any("ended while holding" in r.getMessage() for r in caplog.records)


async def test_waiters_behind_another_process_get_client_closed_when_the_client_closes(
    started, client_factory
) -> None:
    (b,) = await started(1)
    a = client_factory()
    await a.start()
    held_elsewhere = Mutex(b, "/lock")
    assert await held_elsewhere.acquire()
    lock = Mutex(a, "/lock", local_handoff=10)
    first = acquiring(lock)
    second = acquiring(lock)
    await queued_here(lock, 1)
    await a.aclose()
    for task in (first, second):
        with anyio.fail_after(10), pytest.raises((ClientClosedError, asyncio.CancelledError)):
            await task
    await held_elsewhere.release()
