"""A Mutex waiter with two or more contenders of other clients ahead watches the
one two places ahead, and reads the queue again when that one goes: by the time
the one just ahead lets go, it knows nothing else is ahead, and holds on the
deletion alone (#30). These tests queue one contender per client (as separate
processes would) and check order, exclusion and the giving-up cases."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from _kit import Started
from _waiting import settle, waiting
from test_lock_queue import ListingCount

import aiocoord
from aiocoord import Mutex
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


class Contender:
    """One client's turn at the lock: holds it until told to let go."""

    def __init__(self, lock: Mutex, log: list[str], name: str) -> None:
        self.lock = lock
        self.held = asyncio.Event()
        self.go = asyncio.Event()
        self.task = asyncio.create_task(self._run(log, name))

    async def _run(self, log: list[str], name: str) -> None:
        async with self.lock:
            log.append(name)
            self.held.set()
            await self.go.wait()

    async def holds(self) -> None:
        with anyio.fail_after(10):
            await self.held.wait()

    async def let_go(self) -> None:
        self.go.set()
        with anyio.fail_after(10):
            await self.task


async def queue_up(clients: list[aiocoord.Client], log: list[str]) -> list[Contender]:
    """Queue a contender for ``/lock`` on each client, in order, each waiting on a
    watch before the next."""
    queued = []
    for i, client in enumerate(clients):
        queued.append(Contender(Mutex(client, "/lock"), log, str(i)))
        await waiting(client, 1)
    return queued


async def test_waiters_two_behind_hold_in_queue_order_and_one_at_a_time(started: Started) -> None:
    clients = await started(5)
    log: list[str] = []
    holder = Mutex(clients[0], "/lock")
    assert await holder.acquire()
    waiters = await queue_up(clients[1:], log)
    await settle(*clients)
    assert log == []
    await holder.release()
    for i, waiter in enumerate(waiters):
        await waiter.holds()
        await settle(*clients)
        assert log == [str(j) for j in range(i + 1)]  # in order; nobody passed early
        await waiter.let_go()


async def test_the_hand_off_after_the_look_ahead_reads_nothing(
    started: Started, monkeypatch: pytest.MonkeyPatch
) -> None:
    """c watches a (two ahead); a's release makes c read the queue once, while b
    holds; b's release then hands c the lock with no listing at all."""
    a, b, c = await started(3)
    log: list[str] = []
    first = Mutex(a, "/lock")
    assert await first.acquire()
    second, third = await queue_up([b, c], log)
    listings = ListingCount(c, "/lock", monkeypatch)
    await first.release()
    await second.holds()
    await settle(a, b, c)
    assert listings.count == 1  # c looked again when a went: b is first now
    assert log == ["0"]
    await second.let_go()
    await third.holds()
    assert listings.count == 1  # held on b's deletion alone
    await third.let_go()
    assert log == ["0", "1"]


@pytest.mark.parametrize("gives_up", ["just ahead", "two ahead"])
async def test_a_waiter_ahead_that_gives_up_lets_nobody_pass_early(
    started: Started, gives_up: str
) -> None:
    """Queue: holder, b, c, d. d watches b (two ahead). Whether c (the one just
    ahead of d) or b (the one d watches) gives up, d holds only after the holder and
    every waiter still ahead of it."""
    clients = await started(4)
    log: list[str] = []
    holder = Mutex(clients[0], "/lock")
    assert await holder.acquire()
    waiters = await queue_up(clients[1:], log)
    quitter = waiters.pop(1 if gives_up == "just ahead" else 0)
    quitter.task.cancel()  # its node goes, but it never held
    with pytest.raises(asyncio.CancelledError):
        await quitter.task
    await settle(*clients)
    assert log == []
    await holder.release()
    for waiter in waiters:
        await waiter.holds()
        await settle(*clients)
        assert len(log) == waiters.index(waiter) + 1  # nobody behind passed early
        await waiter.let_go()
    assert log == sorted(log) and len(log) == 2


async def test_a_waiter_two_ahead_whose_session_expires_is_passed_over_in_order(
    started: Started,
) -> None:
    """Queue: holder, b, c, d; d watches b. b's session expires (its node goes with
    it, it queues again at the back): c, then d, then b hold, never two at once."""
    clients = await started(4)
    holder, b, c, d = (Mutex(client, "/lock") for client in clients)
    order: list[str] = []
    inside = 0

    async def contender(lock: Mutex, name: str) -> None:
        nonlocal inside
        async with lock:
            inside += 1
            assert inside == 1
            order.append(name)
            await asyncio.sleep(0)
            inside -= 1

    assert await holder.acquire()
    tasks = []
    for client, lock, name in zip(clients[1:], (b, c, d), "bcd", strict=True):
        tasks.append(asyncio.create_task(contender(lock, name)))
        await waiting(client, 1)
    await expire_session(clients[1])
    await waiting(clients[1], 1)  # b queued again, at the back
    await settle(*clients)
    assert order == []
    await holder.release()
    with anyio.fail_after(20):
        await asyncio.gather(*tasks)
    assert order == ["c", "d", "b"]


async def test_the_one_just_ahead_giving_up_as_it_comes_first_hands_on_to_the_next(
    started: Started,
) -> None:
    """Queue: holder, c, d (d watches the holder, two ahead). The holder lets go and
    c gives up at once, while d reads the queue again: whatever d's listing shows of
    c, d holds once c's node is gone, and c never does."""
    clients = await started(3)
    log: list[str] = []
    holder = Mutex(clients[0], "/lock")
    assert await holder.acquire()
    c, d = await queue_up(clients[1:], log)
    await holder.release()
    c.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await c.task
    await d.holds()
    assert log in (["1"], ["0", "1"])  # c may have held for a moment before its cancel
    await d.let_go()
