"""ShardedCounter: exact under contention, refuses only when every shard is empty,
keeps its quotas within the bound at every instant, honest under faults."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable

import pytest
from _waiting import written

import aiocoord
from aiocoord import (
    CREATOR_ALL_ACL,
    AtomicFailure,
    BoundExceededError,
    CorruptValueError,
    CounterShard,
    InvalidArgumentError,
    OutcomeUnknownError,
    RetryNTimes,
    ShardedCounter,
)
from aiocoord.testing import ZooKeeperServer, drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)

PATIENT = RetryNTimes(100_000, 0.001)
"""Enough retries that contention never gives a call up in these tests."""


def check_shards(shards: tuple[CounterShard, ...], lower: int, upper: int) -> int:
    """Every invariant of one consistent snapshot; the total."""
    assert all(0 <= s.count <= s.quota for s in shards), shards
    assert sum(s.quota for s in shards) == upper - lower, shards
    total = lower + sum(s.count for s in shards)
    assert lower <= total <= upper
    return total


@pytest.mark.parametrize("coalesce", [True, False])
async def test_exactly_the_bound_is_sold_under_contention(started, coalesce: bool) -> None:
    clients = await started(8)
    results: list[aiocoord.AtomicValue[int]] = []

    async def buyer(client: aiocoord.Client) -> None:
        counter = ShardedCounter(client, "/sale", upper=300, coalesce=coalesce, retry=PATIENT)
        while True:
            result = await counter.increment()
            results.append(result)
            if not result.succeeded:
                assert result.reason is AtomicFailure.BOUND
                assert result.pre_value == result.post_value == 300  # the exact total
                return

    await asyncio.gather(*(buyer(c) for c in clients for _ in range(6)))
    sold = [r for r in results if r.succeeded]
    assert len(sold) == 300
    assert all(r.post_value == r.pre_value + 1 for r in sold)
    assert len(results) == 300 + 8 * 6  # every buyer was told "sold out" exactly once
    counter = ShardedCounter(clients[0], "/sale", upper=300)
    assert (await counter.get()).post_value == 300
    shards = await counter.snapshot()
    assert check_shards(shards, 0, 300) == 300
    assert all(s.free == 0 for s in shards)
    if coalesce:
        assert max(r.stats.batch_size for r in results) > 1


async def test_the_layout_is_a_config_node_and_one_node_per_shard(coord: aiocoord.Client) -> None:
    counter = ShardedCounter(coord, "/tickets", shards=3, lower=-5, upper=5)
    assert repr(counter) == "<ShardedCounter '/tickets' shards=3 bounds=[-5, 5]>"
    assert await counter.initialize() is True
    assert await counter.initialize() is False
    assert sorted(await coord.children("/tickets")) == ["shard-0", "shard-1", "shard-2"]
    config, _stat = await coord.get("/tickets")
    assert config == struct.pack(">4sBIqqq", b"ESCR", 1, 3, -5, 5, 0)
    datas = [(await coord.get(f"/tickets/shard-{i}"))[0] for i in range(3)]
    # initial 0 is 5 above lower; the range of 10 is split 4, 3, 3.
    assert [struct.unpack(">QQ", d) for d in datas] == [(2, 4), (2, 3), (1, 3)]
    assert (await counter.get()).post_value == 0
    assert await counter.snapshot() == (
        CounterShard(0, 2, 4),
        CounterShard(1, 2, 3),
        CounterShard(2, 1, 3),
    )


async def _set_counts(client: aiocoord.Client, path: str, shards: list[tuple[int, int]]) -> None:
    """Write every shard's (count, quota) directly, as sales elsewhere would leave them."""
    transaction = client.transaction()
    for i, (count, quota) in enumerate(shards):
        transaction.set(f"{path}/shard-{i}", struct.pack(">QQ", count, quota))
    await transaction.commit()


@pytest.mark.parametrize("coalesce", [True, False])
async def test_a_buyer_gets_the_last_ticket_wherever_it_is(started, coalesce: bool) -> None:
    """With room left in one shard only, any buyer gets it (its own shard is empty),
    and only then is the counter sold out."""
    setup, buyer = await started(2)
    for k in range(4):
        path = f"/last-{k}"
        await ShardedCounter(setup, path, shards=4, upper=8).initialize()
        await _set_counts(setup, path, [(2, 2) if i != k else (1, 2) for i in range(4)])
        counter = ShardedCounter(buyer, path, shards=4, upper=8, coalesce=coalesce)
        got = await counter.increment()
        assert got.succeeded, (k, got)
        refused = await counter.increment()
        assert (refused.succeeded, refused.reason) == (False, AtomicFailure.BOUND)
        assert refused.pre_value == 8
        assert check_shards(await counter.snapshot(), 0, 8) == 8


async def test_decrements_give_room_back_and_stop_at_the_lower_bound(
    coord: aiocoord.Client,
) -> None:
    counter = ShardedCounter(coord, "/seats", shards=2, lower=-2, upper=3, initial=3)
    assert (await counter.increment()).reason is AtomicFailure.BOUND
    taken = await counter.decrement()
    assert taken.succeeded and taken.post_value == taken.pre_value - 1
    assert (await counter.increment()).succeeded  # the room came back
    assert (await counter.subtract(5)).succeeded
    assert (await counter.get()).post_value == -2
    below = await counter.decrement()
    assert (below.succeeded, below.reason, below.pre_value) == (False, AtomicFailure.BOUND, -2)
    with pytest.raises(BoundExceededError, match="/seats"):
        await counter.add(-1, raise_on_bound=True)
    assert (await counter.add(5)).succeeded
    assert (await counter.add(1)).reason is AtomicFailure.BOUND
    assert check_shards(await counter.snapshot(), -2, 3) == 3


async def test_a_refused_change_leaves_room_for_a_smaller_one(coord: aiocoord.Client) -> None:
    counter = ShardedCounter(coord, "/mixed", shards=4, upper=10)
    big, small = await asyncio.gather(counter.add(11), counter.add(10))
    assert (big.succeeded, big.reason, big.pre_value) == (False, AtomicFailure.BOUND, 0)
    assert small.succeeded
    assert (await counter.get()).post_value == 10


@pytest.mark.parametrize("coalesce", [True, False])
async def test_room_moves_between_shards_under_contention_within_the_bound(
    started, coalesce: bool
) -> None:
    """Many small shards, buyers and returners at once: room keeps moving, and every
    consistent snapshot taken meanwhile holds every invariant."""
    clients = await started(6)
    upper, done = 40, asyncio.Event()
    net = 0

    async def trader(client: aiocoord.Client, seed: int) -> None:
        nonlocal net
        rng = random.Random(seed)
        counter = ShardedCounter(
            client, "/pool", shards=16, upper=upper, coalesce=coalesce, retry=PATIENT
        )
        for _ in range(40):
            delta = 1 if rng.random() < 0.6 else -1
            result = await counter.add(delta)
            if result.succeeded:
                net += delta
            else:
                assert result.reason is AtomicFailure.BOUND

    async def watcher() -> int:
        counter = ShardedCounter(clients[0], "/pool", shards=16, upper=upper)
        seen = 0
        while not done.is_set():
            check_shards(await counter.snapshot(), 0, upper)
            seen += 1
        return seen

    watching = asyncio.create_task(watcher())
    await asyncio.gather(*(trader(c, i * 10 + j) for i, c in enumerate(clients) for j in range(3)))
    done.set()
    assert await watching > 0
    counter = ShardedCounter(clients[0], "/pool", shards=16, upper=upper)
    shards = await counter.snapshot()
    assert check_shards(shards, 0, upper) == net
    assert sorted(s.quota for s in shards) != [2] * 8 + [3] * 8  # room did move


async def test_cut_connections_give_unknown_or_exact_success_never_a_double(started) -> None:
    a, b = await started(2)
    upper = 150
    applied = unknown = 0
    progress = asyncio.Condition()

    async def buyer(client: aiocoord.Client) -> None:
        nonlocal applied, unknown
        counter = ShardedCounter(client, "/cut", shards=4, upper=upper, retry=PATIENT)
        while True:
            try:
                result = await counter.increment()
            except OutcomeUnknownError:
                unknown += 1
                continue
            except aiocoord.ConnectionLossError:
                continue  # never sent: nothing applied
            if not result.succeeded:
                return
            applied += 1
            async with progress:
                progress.notify_all()

    async def cut_when(count: int) -> None:
        async with progress:
            await progress.wait_for(lambda: applied >= count)
        # b's buyers move the count too, so a may still be reconnecting
        # from the previous cut: only a live connection can be cut.
        assert await a.wait_connected(timeout=30)
        drop_connection(a)

    buyers = [asyncio.create_task(buyer(c)) for c in (a, b) for _ in range(4)]
    try:
        for count in (20, 50, 80, 110):
            await cut_when(count)
        await asyncio.gather(*buyers)
    finally:
        for task in buyers:
            task.cancel()
        await asyncio.gather(*buyers, return_exceptions=True)
    counter = ShardedCounter(b, "/cut", shards=4, upper=upper)
    total = check_shards(await counter.snapshot(), 0, upper)
    assert total == upper  # sold out in the end, whatever was cut
    assert applied <= total <= applied + unknown, (applied, unknown, total)


async def test_a_session_lost_between_and_during_calls_loses_nothing(started) -> None:
    a, b = await started(2)
    counter_a = ShardedCounter(a, "/expiry", shards=4, upper=100_000, retry=PATIENT)
    await asyncio.gather(*(counter_a.increment() for _ in range(30)))
    await expire_session(a)  # between calls: nothing to lose, nothing owned
    assert (await counter_a.get()).post_value == 30

    applied = unknown = 0
    stop = asyncio.Event()
    progress = asyncio.Condition()
    counter_b = ShardedCounter(b, "/expiry", shards=4, upper=100_000, retry=PATIENT)

    async def buyer() -> None:
        nonlocal applied, unknown
        while not stop.is_set():
            try:
                result = await counter_b.increment()
            except OutcomeUnknownError:
                unknown += 1
                continue
            except aiocoord.SessionError:
                continue  # nothing applied: the write never left
            assert result.succeeded
            applied += 1
            async with progress:
                progress.notify_all()

    buyers = [asyncio.create_task(buyer()) for _ in range(4)]
    async with progress:
        await progress.wait_for(lambda: applied >= 20)
    await expire_session(b)  # during calls
    after = applied
    async with progress:
        await progress.wait_for(lambda: applied >= after + 20)  # and it goes on
    stop.set()
    await asyncio.gather(*buyers)
    total = (await counter_a.get()).post_value - 30
    assert applied <= total <= applied + unknown, (applied, unknown, total)


async def test_bad_input_is_refused_before_anything_is_sent(idle_client: aiocoord.Client) -> None:
    client = idle_client
    bad: list[tuple[type[Exception], Callable[[], object]]] = [
        (ValueError, lambda: ShardedCounter(client, "/c", upper=10, shards=0)),
        (ValueError, lambda: ShardedCounter(client, "/c", upper=10, shards=100_000)),
        (TypeError, lambda: ShardedCounter(client, "/c", upper=10, shards=2.0)),  # type: ignore[arg-type]
        (TypeError, lambda: ShardedCounter(client, "/c", upper=10, shards=True)),
        (ValueError, lambda: ShardedCounter(client, "/c", lower=5, upper=4)),
        (TypeError, lambda: ShardedCounter(client, "/c", upper="10")),  # type: ignore[arg-type]
        (ValueError, lambda: ShardedCounter(client, "/c", upper=2**63)),
        (ValueError, lambda: ShardedCounter(client, "/c", upper=10, initial=11)),
        (ValueError, lambda: ShardedCounter(client, "/c", lower=1, upper=10, initial=0)),
        (TypeError, lambda: ShardedCounter(client, "/c", upper=10, retry=3)),  # type: ignore[arg-type]
        (TypeError, lambda: ShardedCounter(client, "/c", upper=10, coalesce="no")),  # type: ignore[arg-type]
        (ValueError, lambda: ShardedCounter(client, "c", upper=10)),
        (ValueError, lambda: ShardedCounter(client, "/", upper=10)),
        (TypeError, lambda: ShardedCounter(None, "/c", upper=10)),  # type: ignore[arg-type]
    ]
    for error, make in bad:
        with pytest.raises(error):
            make()
    counter = ShardedCounter(client, "/c", lower=3, upper=10)
    assert (counter.shards, counter.lower, counter.upper) == (8, 3, 10)
    with pytest.raises(TypeError, match="delta"):
        await counter.add(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="raise_on_bound"):
        await counter.add(1, raise_on_bound=1)  # type: ignore[arg-type]
    await client.aclose()


async def test_a_corrupt_node_is_reported_by_name(coord: aiocoord.Client) -> None:
    counter = ShardedCounter(coord, "/bad", shards=3, upper=30)
    await counter.initialize()
    await coord.set("/bad/shard-1", b"not a shard")
    with pytest.raises(CorruptValueError, match="/bad/shard-1"):
        await counter.get()
    await coord.set("/bad/shard-1", struct.pack(">QQ", 11, 10))  # count over its quota
    with pytest.raises(CorruptValueError, match="/bad/shard-1"):
        await ShardedCounter(coord, "/bad", shards=3, upper=30, coalesce=False).get()
    # Something else at the path (an AtomicLong's 8 bytes):
    await aiocoord.AtomicLong(coord, "/long").initialize(5)
    with pytest.raises(CorruptValueError, match="/long"):
        await ShardedCounter(coord, "/long", upper=10).increment()
    assert (await aiocoord.AtomicLong(coord, "/long").get()).post_value == 5  # left alone


async def test_another_configuration_at_the_path_is_refused(coord: aiocoord.Client) -> None:
    assert await ShardedCounter(coord, "/cfg", shards=4, upper=100).initialize()
    assert not await ShardedCounter(coord, "/cfg", shards=4, upper=100).initialize()
    with pytest.raises(InvalidArgumentError, match="upper") as raised:
        await ShardedCounter(coord, "/cfg", shards=4, upper=200).increment()
    assert raised.value.argument == "upper" and raised.value.path == "/cfg"
    with pytest.raises(InvalidArgumentError, match="shards=4"):
        await ShardedCounter(coord, "/cfg", shards=8, upper=100).get()
    with pytest.raises(InvalidArgumentError, match="initial"):
        await ShardedCounter(coord, "/cfg", shards=4, upper=100, initial=7).initialize()
    assert (await ShardedCounter(coord, "/cfg", shards=4, upper=100).get()).post_value == 0


async def test_a_deleted_counter_starts_again_but_a_lost_shard_is_an_error(
    coord: aiocoord.Client,
) -> None:
    counter = ShardedCounter(coord, "/gone", shards=2, upper=10, initial=4)
    assert (await counter.add(3)).succeeded
    await coord.delete_recursive("/gone")
    assert (await counter.increment()).succeeded  # made again, from ``initial``
    assert (await counter.get()).post_value == 5
    await coord.delete("/gone/shard-1")
    with pytest.raises(aiocoord.NoNodeError, match="/gone/shard-1"):
        await counter.get()


async def test_a_call_cancelled_while_queued_is_withdrawn(coord: aiocoord.Client) -> None:
    counter = ShardedCounter(coord, "/cancel", upper=10)
    await counter.initialize()
    first = asyncio.create_task(counter.increment())
    for _ in range(2):
        await asyncio.sleep(0)  # the first call queues, and its write goes out
    second = asyncio.create_task(counter.increment())
    third = asyncio.create_task(counter.increment())
    await asyncio.sleep(0)  # both queue behind the write in flight
    third.cancel()
    assert (await first).succeeded and (await second).succeeded
    with pytest.raises(asyncio.CancelledError):
        await third
    assert (await counter.get()).post_value == 2


async def test_a_call_cancelled_during_a_shared_write_still_counts(
    coord: aiocoord.Client,
) -> None:
    """As with AtomicLong: a write already under way goes ahead for the calls it
    carries, and a cancelled caller among them simply stops waiting."""
    counter = ShardedCounter(coord, "/inflight", upper=10)
    await counter.initialize()
    # The first call finds no write under way and makes its own; the two made
    # in the same loop pass queue behind it and share the next write.
    first, second, third = (asyncio.create_task(counter.increment()) for _ in range(3))
    assert (await first).stats.batch_size == 1
    # first's end started that shared write, which went out before this task
    # resumed: the cancel lands while it is in flight.
    second.cancel()
    result = await third
    assert result.succeeded and result.stats.batch_size == 2
    with pytest.raises(asyncio.CancelledError):
        await second
    assert (await counter.get()).post_value == 3


async def test_a_lone_call_cancelled_in_its_own_write_counts_once_or_not(
    private_zookeeper: ZooKeeperServer,
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        counter = ShardedCounter(client, "/lone", upper=10)
        await counter.initialize()
        assert (await counter.increment()).succeeded
        private_zookeeper.pause()
        try:
            lone = asyncio.create_task(counter.increment())
            await written(client, 1)  # its own write, from its own task
            lone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await lone
        finally:
            private_zookeeper.resume()
        after = (await counter.get()).post_value
        assert after in (1, 2)
        assert (await counter.increment()).succeeded
        assert (await counter.get()).post_value == after + 1


async def test_its_nodes_carry_its_acl_and_strangers_are_kept_out(client_factory) -> None:
    owner = client_factory(auth=[("digest", "owner:secret")])
    stranger = client_factory()
    await asyncio.gather(owner.start(), stranger.start())
    try:
        counter = ShardedCounter(owner, "/secure/seats", shards=2, upper=10, acl=CREATOR_ALL_ACL)
        assert (await counter.increment()).succeeded
        mine = [aiocoord.ACL.digest("owner", "secret")]
        for node in ("/secure", "/secure/seats", "/secure/seats/shard-0", "/secure/seats/shard-1"):
            assert (await owner.get_acl(node))[0] == mine, node
        theirs = ShardedCounter(stranger, "/secure/seats", shards=2, upper=10)
        for attempt in (theirs.increment(), theirs.get(), theirs.initialize()):
            with pytest.raises(aiocoord.NoAuthError):
                await attempt
        assert (await counter.increment()).succeeded
        assert (await counter.get()).post_value == 2
    finally:
        await owner.delete_recursive("/secure")
