"""Long queues on one Mutex: the contenders of one client share what they learn of
the queue (QueueView), so queueing many of them and handing the lock down between
them do not cost a listing of the whole queue each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from _exclusion import Exclusion
from _waiting import settle, waiting

import aiocoord
from aiocoord import Mutex
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


class ListingCount:
    """Counts the listings of ``path`` a client asks for (alone or in a pipeline)."""

    def __init__(self, client: aiocoord.Client, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        children = client.children
        pipeline = client.pipeline

        async def counted_children(p: str) -> list[str]:
            if p == path:
                self.count += 1
            return await children(p)

        def counted_pipeline() -> Any:
            batch = pipeline()
            add = batch.children

            def counted(p: str) -> Any:
                if p == path:
                    self.count += 1
                return add(p)

            batch.children = counted  # type: ignore[method-assign]
            return batch

        monkeypatch.setattr(client, "children", counted_children)
        monkeypatch.setattr(client, "pipeline", counted_pipeline)


def sequence(node: str) -> int:
    return int(node.rsplit("-", 1)[1])


async def test_tasks_queueing_together_share_listings_and_the_hand_off_lists_nothing(
    coord: aiocoord.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 200
    lock = Mutex(coord, "/lock")
    order: list[int] = []
    exclusion = Exclusion()

    async def waiter() -> None:
        async with lock:
            with exclusion.hold():
                order.append(sequence(lock.node))
                await asyncio.sleep(0)

    listings = ListingCount(coord, "/lock", monkeypatch)
    async with lock:
        tasks = [asyncio.create_task(waiter()) for _ in range(n)]
        await waiting(coord, n)  # every waiter watches the one ahead of it
        queueing = listings.count
        assert queueing <= n // 4, f"{queueing} listings to queue {n} contenders"
    await asyncio.gather(*tasks)
    exclusion.assert_kept(entries=n)
    assert order == sorted(order) and len(order) == n  # in queue order, each once
    # Every hand-off went to a task of this client that saw its predecessor,
    # a holder, deleted: nobody had to read the queue.
    assert listings.count == queueing


async def test_a_waiter_that_gives_up_in_the_middle_lets_nobody_pass_early(
    coord: aiocoord.Client,
) -> None:
    lock = Mutex(coord, "/lock")
    got: list[str] = []

    async def wait(name: str) -> None:
        async with lock:
            got.append(name)

    async with lock:
        middle = asyncio.create_task(wait("middle"))
        await waiting(coord, 1)
        last = asyncio.create_task(wait("last"))
        await waiting(coord, 2)
        middle.cancel()  # its node goes, but it never held: `last` must look again
        with pytest.raises(asyncio.CancelledError):
            await middle
        await settle(coord)
        assert not last.done() and got == []
        assert lock.is_owned_by_current_task()
    with anyio.fail_after(10):
        await last
    assert got == ["last"]


async def test_a_holder_of_another_client_ahead_is_waited_for(started) -> None:
    """Only this client's own released holders are trusted without a listing."""
    a, b = await started(2)
    first, other, mine = Mutex(a, "/lock"), Mutex(b, "/lock"), Mutex(a, "/lock")
    events: list[str] = []
    b_holds, release_other = asyncio.Event(), asyncio.Event()

    async def hold(lock: Mutex, name: str, until: asyncio.Event | None = None) -> None:
        async with lock:
            events.append(name)
            if until is not None:
                b_holds.set()
                await until.wait()

    assert await first.acquire()
    b_task = asyncio.create_task(hold(other, "b", release_other))
    await waiting(b, 1)
    a_task = asyncio.create_task(hold(mine, "a2"))
    await waiting(a, 1)
    await first.release()  # a released holder of client a: its successor is b's
    with anyio.fail_after(10):
        await b_holds.wait()
    await settle(a, b)
    assert events == ["b"] and not a_task.done()
    release_other.set()
    with anyio.fail_after(10):
        await asyncio.gather(b_task, a_task)
    assert events == ["b", "a2"]


async def test_a_lost_session_under_a_long_local_queue_requeues_everyone(
    coord: aiocoord.Client, children_of: Callable[..., Any]
) -> None:
    lock = Mutex(coord, "/lock")
    done: list[int] = []

    async def waiter(i: int) -> None:
        async with lock:
            done.append(i)

    assert await lock.acquire()
    tasks = [asyncio.create_task(waiter(i)) for i in range(20)]
    await waiting(coord, 20)
    await expire_session(coord)
    await lock.wait_lost()
    with pytest.raises(aiocoord.LockLostError):
        await lock.acquire()
    await lock.release()
    with anyio.fail_after(20):
        await asyncio.gather(*tasks)
    assert sorted(done) == list(range(20))
    assert await children_of(coord, "/lock") == []
