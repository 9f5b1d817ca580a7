"""Atomic counters: exact under contention, honest under faults, bounded when asked."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aiocoord
from aiocoord import (
    AtomicBytes,
    AtomicFailure,
    AtomicInt,
    AtomicLong,
    BoundExceededError,
    CorruptValueError,
    CounterOverflowError,
    OutcomeUnknownError,
    PromotedToLock,
    RetryNTimes,
)
from aiocoord.testing import ZooKeeperServer, drop_connection, expire_session

pytestmark = pytest.mark.timeout(180)

MAX = 2**63 - 1


@pytest.mark.parametrize("coalesce", [True, False])
async def test_increments_are_exact_across_clients_and_tasks(started, coalesce: bool) -> None:
    clients = await started(4)
    results: list[aiocoord.AtomicValue[int]] = []

    async def worker(client: aiocoord.Client) -> None:
        counter = AtomicLong(client, "/hits", coalesce=coalesce, retry=RetryNTimes(1000, 0.001))
        for _ in range(10):
            results.append(await counter.increment())

    await asyncio.gather(*(worker(c) for c in clients for _ in range(5)))
    succeeded = [r for r in results if r.succeeded]
    assert len(succeeded) == 200
    final = await AtomicLong(clients[0], "/hits").get()
    assert final.pre_value == final.post_value == 200
    # Serializable: every success saw a distinct value before and after.
    assert sorted(r.pre_value for r in succeeded) == list(range(200))
    assert all(r.post_value == r.pre_value + 1 for r in succeeded)
    if coalesce:
        assert max(r.stats.batch_size for r in results) > 1


async def test_every_operation_returns_what_it_did(coord: aiocoord.Client) -> None:
    counter = AtomicLong(coord, "/c")
    got = await counter.get()
    assert (got.succeeded, got.pre_value, got.post_value) == (True, 0, 0)  # missing is 0
    r = await counter.increment()
    assert (r.succeeded, r.pre_value, r.post_value) == (True, 0, 1)
    assert r.stats.optimistic_tries >= 1 and r.stats.promoted_tries == 0
    r = await counter.add(10)
    assert (r.pre_value, r.post_value) == (1, 11)
    r = await counter.subtract(4)
    assert (r.pre_value, r.post_value) == (11, 7)
    r = await counter.decrement()
    assert (r.pre_value, r.post_value) == (7, 6)
    r = await counter.compare_and_set(6, 100)
    assert (r.succeeded, r.pre_value, r.post_value) == (True, 6, 100)
    r = await counter.compare_and_set(6, 200)
    assert not r.succeeded and r.reason is AtomicFailure.MISMATCH
    assert (r.pre_value, r.post_value) == (100, 100)
    r = await counter.set(-5)
    assert (r.succeeded, r.pre_value, r.post_value) == (True, 100, -5)
    await counter.force_set(42)
    assert (await counter.get()).post_value == 42
    assert not await counter.initialize(1)
    assert (await counter.get()).post_value == 42
    fresh = AtomicLong(coord, "/fresh/deep")
    assert await fresh.initialize(7)
    assert (await fresh.get()).post_value == 7
    data, _stat = await coord.get("/c")
    assert data == struct.pack(">q", 42)  # Curator's encoding


async def test_compare_and_set_fails_on_a_missing_node(coord: aiocoord.Client) -> None:
    """Curator's compareAndSet fails when the node does not exist, even for an expected
    value equal to what get() reads there (zero); it creates nothing."""
    for counter, zero, new in (
        (AtomicLong(coord, "/absent-long"), 0, 1),
        (AtomicInt(coord, "/absent-int"), 0, 1),
        (AtomicBytes(coord, "/absent-bytes"), b"", b"x"),
    ):
        r = await counter.compare_and_set(zero, new)
        assert not r.succeeded and r.reason is AtomicFailure.MISMATCH
        assert r.pre_value == r.post_value == zero
        assert await coord.exists(counter.path) is None
        assert (await counter.get()).post_value == zero
    long = AtomicLong(coord, "/absent-long")
    assert await long.initialize(0)
    r = await long.compare_and_set(0, 1)
    assert (r.succeeded, r.pre_value, r.post_value) == (True, 0, 1)


async def test_retry_exhaustion_reports_failure_and_applies_nothing(
    started,
) -> None:
    a, b = await started(2)
    counter = AtomicLong(a, "/busy", retry=RetryNTimes(0), coalesce=False)
    await counter.increment()  # the counter now remembers version 0
    await b.set("/busy", struct.pack(">q", 50))  # another process writes meanwhile
    r = await counter.increment()
    assert not r.succeeded and r.reason is AtomicFailure.CONTENTION
    assert r.pre_value == r.post_value
    assert (await b.get("/busy"))[0] == struct.pack(">q", 50)
    r = await counter.increment()  # a fresh read: now it goes through
    assert (r.succeeded, r.pre_value, r.post_value) == (True, 50, 51)


async def test_promotion_to_a_lock_after_optimistic_failure(started, children_of) -> None:
    a, b = await started(2)
    counter = AtomicLong(
        a,
        "/promo",
        retry=RetryNTimes(0),
        coalesce=False,
        promoted_to_lock=PromotedToLock("/promo-lock", max_lock_time=5),
    )
    await counter.increment()
    await b.set("/promo", struct.pack(">q", 10))
    r = await counter.increment()
    assert r.succeeded and (r.pre_value, r.post_value) == (10, 11)
    assert r.stats.optimistic_tries == 1 and r.stats.promoted_tries == 1
    assert r.stats.promoted_time > 0
    assert await children_of(b, "/promo-lock") == []


async def test_bounded_counter_never_oversells(started) -> None:
    clients = await started(4)
    sold = refused = 0

    async def buyer(client: aiocoord.Client) -> None:
        nonlocal sold, refused
        tickets = AtomicLong(client, "/tickets", retry=RetryNTimes(10_000, 0.0005))
        while True:
            r = await tickets.increment(upper=100)
            if r.succeeded:
                sold += 1
            else:
                assert r.reason is AtomicFailure.BOUND and r.pre_value == 100
                refused += 1
                return

    await asyncio.gather(*(buyer(c) for c in clients for _ in range(20)))
    assert sold == 100 and refused == 80
    assert (await AtomicLong(clients[0], "/tickets").get()).post_value == 100


async def test_an_add_refused_within_a_batch_reports_the_value_it_met(
    coord: aiocoord.Client,
) -> None:
    # Calls made together share a write, which takes the second to the bound.
    counter = AtomicLong(coord, "/seats")
    await counter.force_set(8)
    calls = [asyncio.create_task(counter.increment(upper=10)) for _ in range(4)]
    results = await asyncio.gather(*calls)
    assert [(r.succeeded, r.pre_value, r.post_value) for r in results] == [
        (True, 8, 9),
        (True, 9, 10),
        (False, 10, 10),
        (False, 10, 10),
    ]
    assert all(r.reason is AtomicFailure.BOUND and r.stats.batch_size > 1 for r in results[2:])


async def test_counters_of_a_closed_client_refuse_with_client_closed(client_factory) -> None:
    client = client_factory()
    await client.start()
    counters = [
        AtomicLong(client, "/closed"),
        aiocoord.ShardedCounter(client, "/closed-shards", upper=10),
    ]
    for counter in counters:
        await counter.increment()
    await client.aclose()
    for counter in counters:
        with pytest.raises(aiocoord.ClientClosedError):
            await counter.increment()


@pytest.mark.parametrize("when", ["first-call-in-flight", "shared-write-in-flight"])
@pytest.mark.parametrize("kind", ["atomic", "sharded"])
async def test_calls_under_way_when_the_client_closes_end_none_waits_forever(
    client_factory, kind: str, when: str
) -> None:
    client = client_factory()
    await client.start()
    counter = (
        AtomicLong(client, "/closing")
        if kind == "atomic"
        else aiocoord.ShardedCounter(client, "/closing", upper=100)
    )
    await counter.increment()
    calls = [asyncio.create_task(counter.increment()) for _ in range(6)]
    await asyncio.sleep(0)  # the first writes; the others queue behind it
    if when == "shared-write-in-flight":
        await calls[0]  # its end sent the write that carries the others
    await client.aclose()
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 30)
    for outcome in outcomes:
        # Applied, or ended by the close: never a cancel nobody asked for.
        assert isinstance(
            outcome,
            aiocoord.AtomicValue | aiocoord.ClientClosedError | aiocoord.OutcomeUnknownError,
        ), repr(outcome)


async def test_bound_refusal_can_raise(coord: aiocoord.Client) -> None:
    stock = AtomicLong(coord, "/stock")
    await stock.force_set(2)
    assert (await stock.decrement(lower=0)).succeeded
    assert (await stock.decrement(lower=0)).succeeded
    with pytest.raises(BoundExceededError) as info:
        await stock.decrement(lower=0, raise_on_bound=True)
    assert info.value.value == 0
    assert (await stock.get()).post_value == 0
    with pytest.raises(ValueError):
        await stock.add(1, lower=5, upper=1)


async def test_coalesced_bounded_batch_grants_in_arrival_order(coord: aiocoord.Client) -> None:
    counter = AtomicLong(coord, "/batch")
    results = await asyncio.gather(*(counter.add(1, upper=30) for _ in range(50)))
    granted = [r for r in results if r.succeeded]
    assert len(granted) == 30
    assert sorted(r.pre_value for r in granted) == list(range(30))
    assert all(r.reason is AtomicFailure.BOUND for r in results if not r.succeeded)
    assert (await counter.get()).post_value == 30


async def test_corrupt_bytes_are_reported_and_never_overwritten(coord: aiocoord.Client) -> None:
    await coord.create("/bad", b"abc")
    counter = AtomicLong(coord, "/bad")
    with pytest.raises(CorruptValueError, match="/bad"):
        await counter.get()
    with pytest.raises(CorruptValueError):
        await counter.increment()
    with pytest.raises(CorruptValueError):
        await AtomicLong(coord, "/bad", coalesce=False).increment()
    assert (await coord.get("/bad"))[0] == b"abc"


async def test_overflow_is_an_error_not_a_wrap(coord: aiocoord.Client) -> None:
    counter = AtomicLong(coord, "/big")
    await counter.force_set(MAX)
    with pytest.raises(CounterOverflowError):
        await counter.increment()
    with pytest.raises(CounterOverflowError):
        await AtomicLong(coord, "/big", coalesce=False).increment()
    assert (await counter.get()).post_value == MAX
    with pytest.raises(CounterOverflowError):
        await counter.add(2**64)
    small = AtomicInt(coord, "/small")
    await small.force_set(2**31 - 1)
    with pytest.raises(CounterOverflowError):
        await small.increment()
    assert (await coord.get("/small"))[0] == struct.pack(">i", 2**31 - 1)


async def test_atomic_int_and_bytes(coord: aiocoord.Client) -> None:
    small = AtomicInt(coord, "/int")
    r = await small.add(5)
    assert (r.pre_value, r.post_value) == (0, 5)
    assert (await coord.get("/int"))[0] == struct.pack(">i", 5)
    blob = AtomicBytes(coord, "/blob")
    assert await blob.initialize(b"a")
    r2 = await blob.update(lambda b: b + b"b")
    assert (r2.pre_value, r2.post_value) == (b"a", b"ab")
    assert (await blob.compare_and_set(b"ab", b"x")).succeeded
    assert not (await blob.compare_and_set(b"ab", b"y")).succeeded
    assert (await blob.get()).post_value == b"x"


async def test_bad_input_is_refused_before_sending(idle_client: aiocoord.Client) -> None:
    client = idle_client
    with pytest.raises(aiocoord.InvalidPathError):
        AtomicLong(client, "no-slash")
    counter = AtomicLong(client, "/x")
    with pytest.raises(TypeError):
        await counter.add(1.5)  # type: ignore[arg-type]
    with pytest.raises(CounterOverflowError):
        await counter.add(2**63)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.integers(-5, 5),
                st.none() | st.integers(-10, 0),
                st.none() | st.integers(0, 10),
            ),
            st.tuples(st.just("cas"), st.integers(-3, 3), st.integers(-10, 10)),
            st.tuples(st.just("set"), st.integers(-10, 10)),
        ),
        max_size=12,
    ),
    concurrent=st.booleans(),
)
def test_operations_match_a_model(zookeeper, ops: list[tuple], concurrent: bool) -> None:
    """Random operation sequences give exactly what a local integer would."""

    async def run() -> None:
        async with aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace) as c:
            counter = AtomicLong(c, "/model")
            await counter.force_set(0)
            model = 0
            for op in ops:
                if op[0] == "add":
                    _, delta, lower, upper = op
                    r = await counter.add(delta, lower=lower, upper=upper)
                    ok = (lower is None or model + delta >= lower) and (
                        upper is None or model + delta <= upper
                    )
                    assert r.succeeded == ok and r.pre_value == model
                    model += delta if ok else 0
                elif op[0] == "cas":
                    _, expected, new = op
                    r = await counter.compare_and_set(expected, new)
                    assert r.succeeded == (expected == model)
                    model = new if r.succeeded else model
                else:
                    r = await counter.set(op[1])
                    assert r.succeeded
                    model = op[1]
                assert r.post_value == model
            if concurrent:
                # A burst of bounded adds from many tasks at once (coalesced).
                burst = await asyncio.gather(*(counter.add(1, upper=model + 3) for _ in range(6)))
                assert sum(r.succeeded for r in burst) == 3
                model += 3
            assert (await counter.get()).post_value == model

    asyncio.run(run())


async def test_totals_hold_through_restarts_and_expiry(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    """succeeded <= final <= succeeded + unknown, with unknown only from cut writes."""
    succeeded = unknown = 0
    stop = asyncio.Event()
    progressed = asyncio.Event()

    async def made_progress(count: int = 3) -> None:
        """Return once ``count`` more increments have succeeded."""
        goal = succeeded + count
        while succeeded < goal:
            progressed.clear()
            await progressed.wait()

    async def worker(client: aiocoord.Client) -> None:
        nonlocal succeeded, unknown
        counter = AtomicLong(client, "/faults", retry=RetryNTimes(10_000, 0.001))
        while not stop.is_set():
            try:
                r = await counter.increment()
            except OutcomeUnknownError:
                unknown += 1
                continue
            except aiocoord.SessionError:
                continue  # nothing applied: the write never left
            assert r.succeeded
            succeeded += 1
            progressed.set()

    async with (
        aiocoord.connect(private_zookeeper.connect_string, session_timeout=4) as a,
        aiocoord.connect(private_zookeeper.connect_string, session_timeout=4) as b,
    ):
        log = state_log(a)
        workers = [asyncio.create_task(worker(c)) for c in (a, b) for _ in range(4)]
        for _ in range(2):
            await made_progress()
            drop_connection(a)
            await made_progress()
            await private_zookeeper.stop()
            await log.wait_for(aiocoord.ConnectionState.SUSPENDED, count=len(log.states) and 1)
            await private_zookeeper.start()
            await a.wait_connected(timeout=10)
            await b.wait_connected(timeout=10)
            await expire_session(b)
        await made_progress()
        stop.set()
        await asyncio.gather(*workers)
        final = (await AtomicLong(a, "/faults").get()).post_value
    assert succeeded > 0
    assert succeeded <= final <= succeeded + unknown, (succeeded, unknown, final)


@pytest.mark.parametrize("operation", ["compare_and_set", "set", "increment"])
async def test_a_write_whose_reply_is_lost_is_an_unknown_outcome_never_a_retry(
    coord: aiocoord.Client, operation: str
) -> None:
    """The write reached the server and only its reply was lost: the caller cannot
    be told it failed (it applied), nor may the call try again (an add would apply
    twice, a set would report the wrong value replaced)."""
    counter = AtomicLong(coord, "/lost-reply")
    await counter.initialize(5)
    real_set = coord.set

    async def lossy_set(path: str, data: bytes, *, version: int = -1) -> aiocoord.Stat:
        coord.set = real_set  # type: ignore[method-assign]
        await real_set(path, data, version=version)  # applied on the server ...
        raise aiocoord.ConnectionLossError("reply lost", sent=True)  # ... reply lost

    calls = {
        "compare_and_set": lambda: counter.compare_and_set(5, 9),
        "set": lambda: counter.set(9),
        "increment": counter.increment,
    }
    coord.set = lossy_set  # type: ignore[method-assign]
    with pytest.raises(OutcomeUnknownError, match="/lost-reply"):
        await calls[operation]()
    assert coord.set == real_set  # the write went through the patched call
    assert (await counter.get()).post_value == (6 if operation == "increment" else 9)


async def test_compare_and_set_through_faults_is_applied_once_or_reported_unknown(
    started,
) -> None:
    """Contending compare-and-sets, each to a value never written before, while
    connections drop and sessions expire: no two succeed from the same value (a
    write applied twice, or over one another), none succeeds from a value nobody
    wrote, none reported failed was applied, and the final value is one a success
    or an unknown outcome wrote. Unique values rule out ABA, so the history alone
    tells which write each success replaced."""
    a, b = await started(2, session_timeout=4)
    await AtomicLong(a, "/cas-faults").initialize(0)
    outcomes: list[tuple[int, int, str]] = []  # (expected, new, ok / failed / unknown)
    values = iter(range(1, 10**9))
    stop = asyncio.Event()
    progressed = asyncio.Event()

    async def made_progress(count: int = 5) -> None:
        goal = sum(1 for _e, _n, how in outcomes if how == "ok") + count
        while sum(1 for _e, _n, how in outcomes if how == "ok") < goal:
            progressed.clear()
            await progressed.wait()

    async def worker(client: aiocoord.Client) -> None:
        counter = AtomicLong(client, "/cas-faults")
        while not stop.is_set():
            try:
                expected = (await counter.get()).post_value
            except aiocoord.SessionError:
                continue
            new = next(values)
            try:
                result = await counter.compare_and_set(expected, new)
            except OutcomeUnknownError:
                outcomes.append((expected, new, "unknown"))
                continue
            except aiocoord.SessionError:
                continue  # refused before it was sent: nothing to judge
            outcomes.append((expected, new, "ok" if result.succeeded else "failed"))
            if result.succeeded:
                progressed.set()

    workers = [asyncio.create_task(worker(c)) for c in (a, b) for _ in range(2)]
    for round_ in range(12):
        client = (a, b)[round_ % 2]
        await made_progress()
        # A drop with a write in flight leaves its outcome unknown to the client:
        # the write may or may not have reached the server.
        drop_connection(client)
        if round_ % 4 == 3:
            await made_progress()
            await expire_session(client)
    await made_progress()
    stop.set()
    await asyncio.gather(*workers)
    final = (await AtomicLong(a, "/cas-faults").get()).post_value

    succeeded = [(expected, new) for expected, new, how in outcomes if how == "ok"]
    written = {new for _e, new, how in outcomes if how in ("ok", "unknown")}
    refused = {new for _e, new, how in outcomes if how == "failed"}
    replaced = [expected for expected, _new in succeeded]
    assert len(replaced) == len(set(replaced)), "two compare-and-sets succeeded from one value"
    assert set(replaced) <= written | {0}, "a success replaced a value nobody wrote"
    assert not set(replaced) & refused, "a compare-and-set reported failed was applied"
    assert final in written, final
    assert final not in refused


async def test_totals_are_exact_when_no_call_was_cut(started) -> None:
    a, b = await started(2)
    counter_a = AtomicLong(a, "/calm")
    await asyncio.gather(*(counter_a.increment() for _ in range(50)))
    await expire_session(b)  # a session lost between calls loses nothing
    counter_b = AtomicLong(b, "/calm")
    await asyncio.gather(*(counter_b.increment() for _ in range(50)))
    assert (await counter_a.get()).post_value == 100
