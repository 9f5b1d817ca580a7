"""Contended counter adds combine across processes: batches, not retries.

A request left first in line by a client that never combines (the
"blocker") holds every later request in the queue, so each test decides
exactly which requests share one transaction, without timing.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from _waiting import written

import aiocoord
from aiocoord import (
    AtomicFailure,
    AtomicLong,
    CorruptValueError,
    InvalidArgumentError,
    OutcomeUnknownError,
)
from aiocoord._recipes.counters._combining import QUEUE_NAME
from aiocoord._session import protected_marker
from aiocoord.testing import ZooKeeperServer, drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)

QUEUE = f"/c/{QUEUE_NAME}"


async def block_queue(client: aiocoord.Client) -> str:
    """Put a request (adding 0) first in line that nobody will apply."""
    return await client.create(
        f"{QUEUE}/{protected_marker()}r0_n_n-",
        ephemeral=True,
        sequential=True,
        make_parents=True,
    )


async def until_pending(client: aiocoord.Client, count: int, *, exactly: bool = False) -> None:
    """Wait until ``count`` nodes (at least, or ``exactly``) wait in the queue."""
    while True:
        names, _stat, watch = await client.watch_children(QUEUE)
        try:
            if len(names) == count or (len(names) > count and not exactly):
                return
            await watch
        finally:
            watch.cancel()


async def queued_counters(clients: list[aiocoord.Client], **kwargs: object) -> list[AtomicLong]:
    """One counter per client, each already in queueing mode: its first add
    went through while requests were waiting, so its next one queues."""
    counters = [AtomicLong(client, "/c", **kwargs) for client in clients]  # type: ignore[arg-type]
    for counter in counters:
        assert (await counter.add(0)).succeeded
    return counters


async def test_an_uncontended_counter_never_makes_a_queue(coord: aiocoord.Client) -> None:
    counter = AtomicLong(coord, "/c")
    for expected in range(1, 21):
        result = await counter.increment()
        assert (result.pre_value, result.post_value) == (expected - 1, expected)
        assert result.stats.queued_time == 0
    assert await coord.exists(QUEUE) is None


async def test_a_lost_compare_and_set_queues_instead_of_retrying(started) -> None:
    a, b = await started(2)
    first, second = AtomicLong(a, "/c"), AtomicLong(b, "/c")
    await first.increment()  # a remembers the version it wrote...
    await second.increment()  # ...which b's write makes stale
    result = await first.increment()
    assert (result.pre_value, result.post_value, result.succeeded) == (2, 3, True)
    assert result.stats.optimistic_tries == 1  # one try, then the queue
    assert result.stats.queued_time > 0 and result.stats.batch_size == 1
    assert (await second.get()).post_value == 3
    assert await a.children(QUEUE) == []  # applied requests are deleted with their write


async def test_queued_adds_from_many_clients_apply_in_one_transaction(started) -> None:
    blocker, *clients = await started(7)
    await block_queue(blocker)
    counters = await queued_counters(clients)
    calls = [asyncio.create_task(counter.increment()) for counter in counters]
    await until_pending(blocker, 1 + len(counters))
    assert not any(call.done() for call in calls)
    await blocker.aclose()  # the blocker's session ends: its request goes
    results = await asyncio.gather(*calls)
    assert all(r.succeeded for r in results)
    assert sorted(r.post_value for r in results) == list(range(1, 7))  # distinct, no gaps
    assert all(r.post_value == r.pre_value + 1 for r in results)
    assert {r.stats.batch_size for r in results} == {6}  # one transaction for all six
    assert (await counters[0].get()).post_value == 6
    assert await clients[0].children(QUEUE) == []


async def test_combined_bounded_adds_never_pass_the_bound(started) -> None:
    blocker, *clients = await started(9)
    await block_queue(blocker)
    counters = await queued_counters(clients)
    calls = [asyncio.create_task(counter.increment(upper=5)) for counter in counters]
    await until_pending(blocker, 1 + len(counters))
    await blocker.aclose()
    results = await asyncio.gather(*calls)
    granted = [r for r in results if r.succeeded]
    refused = [r for r in results if not r.succeeded]
    assert sorted(r.post_value for r in granted) == [1, 2, 3, 4, 5]
    assert len(refused) == 3
    assert all(r.reason is AtomicFailure.BOUND and r.pre_value == 5 for r in refused)
    assert (await counters[0].get()).post_value == 5


async def test_tasks_sharing_a_client_queue_as_one_request(started) -> None:
    blocker, a, b = await started(3)
    await block_queue(blocker)
    first, second = await queued_counters([a, b])
    # An add that finds none under way goes alone, from its caller's task;
    # the ones made meanwhile wait for it, then share the next request.
    calls = [asyncio.create_task(first.add(1))]
    await until_pending(blocker, 2)
    calls += [asyncio.create_task(first.add(2)) for _ in range(4)]
    calls.append(asyncio.create_task(second.add(-1, lower=-1)))
    await until_pending(blocker, 3)
    await blocker.aclose()
    results = await asyncio.gather(*calls)
    assert all(r.succeeded for r in results)
    # a's first add and b's in one transaction, then a's four in one request.
    assert [(r.post_value, r.stats.batch_size) for r in (results[0], results[5])] == [
        (1, 2),
        (0, 2),
    ]
    assert sorted((r.post_value, r.stats.batch_size) for r in results[1:5]) == [
        (2, 4),
        (4, 4),
        (6, 4),
        (8, 4),
    ]
    assert (await first.get()).post_value == 8


async def test_a_direct_write_between_combined_writes_is_kept(started) -> None:
    # A combined write goes at the version the queue's state recorded; a write
    # made directly since (Curator's, or a plain set) must make it read again.
    first_blocker, second_blocker, a, other = await started(4)
    await block_queue(first_blocker)
    (counter,) = await queued_counters([a])

    async def combined_alone(blocker: aiocoord.Client) -> aiocoord.AtomicValue[int]:
        call = asyncio.create_task(counter.increment())
        await until_pending(other, 2)
        await blocker.aclose()  # a is now first in line, alone: it combines
        result = await call
        assert result.succeeded and result.stats.queued_time > 0
        return result

    result = await combined_alone(first_blocker)
    assert (result.pre_value, result.post_value) == (0, 1)
    await AtomicLong(other, "/c", combine=False).force_set(100)
    await block_queue(second_blocker)
    result = await combined_alone(second_blocker)
    assert (result.pre_value, result.post_value) == (100, 101)
    assert (await AtomicLong(other, "/c").get()).post_value == 101


async def test_a_request_left_by_a_dead_session_does_not_hold_the_queue(started) -> None:
    blocker, a = await started(2)
    await block_queue(blocker)
    (counter,) = await queued_counters([a])
    call = asyncio.create_task(counter.increment())
    await until_pending(a, 2)
    await expire_session(blocker)  # the blocker's process died: its session ends
    result = await call
    assert (result.pre_value, result.post_value) == (0, 1)


async def test_garbage_in_the_queue_is_dropped_not_applied_nor_waited_for(started) -> None:
    a, b = await started(2)
    await b.create(
        f"{QUEUE}/{protected_marker()}r-", b"{not a request", sequential=True, make_parents=True
    )
    await b.create(f"{QUEUE}/stray", b"whatever")  # a name no requester makes
    await block_queue(b)
    (counter,) = await queued_counters([a])
    call = asyncio.create_task(counter.increment())
    await until_pending(a, 4)
    await b.aclose()
    result = await call
    assert (result.pre_value, result.post_value) == (0, 1)
    assert await a.children(QUEUE) == ["stray"]  # the garbled request went with the write


async def test_a_session_lost_while_queued_is_an_unknown_outcome_never_a_double(started) -> None:
    blocker, a, b = await started(3)
    await block_queue(blocker)
    lost, kept = await queued_counters([a, b])
    lost_call = asyncio.create_task(lost.increment())
    kept_call = asyncio.create_task(kept.increment())
    await until_pending(blocker, 3)
    await expire_session(a)
    with pytest.raises(OutcomeUnknownError):
        await lost_call
    await blocker.aclose()
    assert (await kept_call).post_value == 1  # a's request went with its session
    assert (await kept.get()).post_value == 1


async def test_a_corrupt_counter_fails_a_queued_add_which_leaves_the_queue(started) -> None:
    blocker, a = await started(2)
    await block_queue(blocker)
    (counter,) = await queued_counters([a])
    call = asyncio.create_task(counter.increment())
    await until_pending(a, 2)
    await blocker.set("/c", b"abc")  # another client writes garbage into the counter
    await blocker.aclose()
    with pytest.raises(CorruptValueError, match="'/c'"):
        await call
    assert await a.children(QUEUE) == []  # withdrawn: nobody applies it later
    assert (await a.get("/c"))[0] == b"abc"  # and nothing overwrote the garbage


async def test_a_queued_add_whose_caller_is_cancelled_leaves_the_queue(started) -> None:
    # The add runs in its caller's task: a cancel (a timeout around the call)
    # must not leave a request that holds every later one behind it.
    blocker, a, b = await started(3)
    await block_queue(blocker)
    cancelled, kept = await queued_counters([a, b])
    cancelled_call = asyncio.create_task(cancelled.increment())
    await until_pending(blocker, 2)
    kept_call = asyncio.create_task(kept.increment())
    await until_pending(blocker, 3)
    cancelled_call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled_call
    await until_pending(blocker, 2, exactly=True)  # the cancelled request is gone, unapplied
    await blocker.aclose()
    result = await kept_call
    assert (result.pre_value, result.post_value) == (0, 1)
    assert (await kept.get()).post_value == 1
    result = await cancelled.increment()  # the cancelled counter queues again
    assert (result.pre_value, result.post_value) == (1, 2)


async def test_a_cancel_while_the_request_is_created_leaves_nothing_queued(
    private_zookeeper: ZooKeeperServer,
) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as blocker,
        aiocoord.connect(private_zookeeper.connect_string) as client,
    ):
        await block_queue(blocker)
        (counter,) = await queued_counters([client])
        private_zookeeper.pause()
        try:
            call = asyncio.create_task(counter.increment())
            await written(client, 2)  # the request's create and the listing
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        finally:
            private_zookeeper.resume()
        # Found by its marker and deleted once the create's reply is in.
        await until_pending(blocker, 1, exactly=True)
        await blocker.aclose()
        assert (await counter.get()).post_value == 0
        assert (await counter.increment()).post_value == 1


async def test_a_lone_add_cancelled_in_flight_is_applied_once_or_not(
    private_zookeeper: ZooKeeperServer,
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        counter = AtomicLong(client, "/c")
        await counter.increment()
        private_zookeeper.pause()
        try:
            lone = asyncio.create_task(counter.increment())
            await written(client, 1)  # its own write, sent from its own task
            behind = asyncio.create_task(counter.add(10))  # queues behind it
            await asyncio.sleep(0)
            lone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await lone
        finally:
            private_zookeeper.resume()
        result = await behind  # drained after the cancelled write, not lost with it
        assert result.succeeded and result.post_value == result.pre_value + 10
        assert result.pre_value in (1, 2)  # the cancelled add: applied once or not at all
        assert (await counter.get()).post_value == result.post_value


async def test_adds_cut_short_by_timeouts_never_double_nor_hold_the_queue(started) -> None:
    # Callers on three clients put short timeouts around some of their adds:
    # cancels land at every step (the create, the wait, the combined write).
    # Each cancelled add counts once or not at all, and none is left queued.
    clients = await started(3)
    rng = random.Random(36)
    succeeded = cancelled = queued = 0

    async def caller(client: aiocoord.Client, limits: list[float | None]) -> None:
        nonlocal succeeded, cancelled, queued
        counter = AtomicLong(client, "/c")
        for limit in limits:
            try:
                async with asyncio.timeout(limit):
                    result = await counter.increment()
            except TimeoutError:
                cancelled += 1
                continue
            assert result.succeeded
            succeeded += 1
            queued += result.stats.queued_time > 0

    plans = [
        [rng.choice([None, None, 0.0005, 0.002, 0.005]) for _ in range(40)] for _ in range(3 * 4)
    ]
    await asyncio.gather(*(caller(clients[i % 3], plan) for i, plan in enumerate(plans)))
    assert succeeded > 0 and cancelled > 0 and queued > 0
    await until_pending(clients[0], 0, exactly=True)  # cancelled requests were taken back
    final = (await AtomicLong(clients[0], "/c").get()).post_value
    assert succeeded <= final <= succeeded + cancelled
    result = await AtomicLong(clients[1], "/c").increment()
    assert (result.pre_value, result.post_value) == (final, final + 1)


async def test_combining_is_off_with_a_promotion_lock_and_refused_with_one(coord) -> None:
    lock = aiocoord.PromotedToLock("/c-lock")
    promoted = AtomicLong(coord, "/c", promoted_to_lock=lock)
    await promoted.increment()
    assert await coord.exists(QUEUE) is None
    with pytest.raises(InvalidArgumentError, match="combine"):
        AtomicLong(coord, "/c", promoted_to_lock=lock, combine=True)
    with pytest.raises(InvalidArgumentError, match="combine"):
        AtomicLong(coord, "/c", coalesce=False, combine=True)
    with pytest.raises(aiocoord.ArgumentTypeError, match="combine"):
        AtomicLong(coord, "/c", combine="yes")  # type: ignore[arg-type]


class _SentCounter:
    """Counts the requests one client writes to its server, by opcode."""

    def __init__(self, client: aiocoord.Client) -> None:
        connection = client._engine._conn
        assert connection is not None
        self.opcodes: list[int] = []
        submit, submit_all = connection.submit, connection.submit_all

        def counted_submit(op, hook=None):  # type: ignore[no-untyped-def]
            self.opcodes.append(op.opcode)
            return submit(op, hook)

        def counted_submit_all(ops):  # type: ignore[no-untyped-def]
            self.opcodes.extend(op.opcode for op in ops)
            return submit_all(ops)

        connection.submit = counted_submit  # type: ignore[method-assign]
        connection.submit_all = counted_submit_all  # type: ignore[method-assign]


_SET_DATA = 5


async def test_an_uncontended_add_is_one_request(coord: aiocoord.Client) -> None:
    # With no queue under the counter (its stat shows no child), a write need
    # not look for one: one setData per add, as plain compare-and-set.
    counter = AtomicLong(coord, "/c")
    await counter.increment()  # creates the node
    sent = _SentCounter(coord)
    for _ in range(12):
        assert (await counter.increment()).succeeded
    assert sent.opcodes == [_SET_DATA] * 12
    assert (await counter.get()).post_value == 13


async def test_a_counter_with_a_queue_looks_at_it_every_few_writes(coord: aiocoord.Client) -> None:
    counter = AtomicLong(coord, "/c")
    await counter.increment()
    await coord.create(QUEUE)  # another process queued here once
    await counter.get()  # the counter's stat now shows a child
    sent = _SentCounter(coord)
    for _ in range(8):
        assert (await counter.increment()).succeeded
    probes = [op for op in sent.opcodes if op != _SET_DATA]
    assert len(probes) == 2 and sent.opcodes.count(_SET_DATA) == 8


@pytest.mark.parametrize("queue", [False, True], ids=["plain-set", "set-with-probe"])
async def test_a_lost_reply_of_the_direct_write_is_an_unknown_outcome(
    private_zookeeper: ZooKeeperServer, queue: bool
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        counter = AtomicLong(client, "/c")
        await counter.increment()
        if queue:
            await client.create(QUEUE)
        await counter.get()  # the next write goes at the version read here
        private_zookeeper.pause()
        try:
            call = asyncio.create_task(counter.increment())
            await written(client, 2 if queue else 1)
            drop_connection(client)
        finally:
            private_zookeeper.resume()
        with pytest.raises(OutcomeUnknownError):
            await call
        after = (await counter.get()).post_value
        assert after in (1, 2)  # applied once or not at all, never twice
        result = await counter.increment()
        assert result.succeeded and (result.pre_value, result.post_value) == (after, after + 1)
