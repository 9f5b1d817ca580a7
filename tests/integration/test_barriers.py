"""Barrier and DoubleBarrier against a real ZooKeeper, with Curator's own barrier
bugs as the test list (curator#1290, CURATOR-233/536, PR #416, CURATOR-80), and
with Curator itself on the same znodes (tests/interop/CuratorBarriers.java)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _curator import finish, kill, read_line, send_line, start_curator, together
from _waiting import settle

import aiocoord
from aiocoord import (
    Barrier,
    BarrierBrokenError,
    ConnectionState,
    DoubleBarrier,
    OperationTimeoutError,
)
from aiocoord.testing import TcpProxy, drop_connection, expire_session

pytestmark = pytest.mark.timeout(60)

READY = "ready"


def name_of(barrier: DoubleBarrier) -> str:
    node = barrier.node
    assert node is not None
    return node.rsplit("/", 1)[1]


def by_node(*barriers: DoubleBarrier) -> list[DoubleBarrier]:
    """The participants in Curator's leave order: the lowest node first."""
    return sorted(barriers, key=name_of)


async def participants_of(client: aiocoord.Client, path: str, children_of: Any) -> list[str]:
    return [name for name in await children_of(client, path) if name != READY]


async def wait_gone(client: aiocoord.Client, path: str, name: str) -> None:
    """Return once ``path`` has no child ``name`` (on a watch)."""
    async with contextlib.aclosing(client.children_changes(path)) as changes:
        async for names in changes:
            if names is None or name not in names:
                return


@contextlib.asynccontextmanager
async def proxied(zookeeper: Any) -> AsyncIterator[tuple[TcpProxy, aiocoord.Client]]:
    """A client whose connection goes through a TcpProxy the test can cut."""
    host, port = zookeeper.connect_string.rsplit(":", 1)
    async with TcpProxy(host, int(port)) as proxy:
        client = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)
        async with client:
            yield proxy, client


# --- Barrier ----------------------------------------------------------------------------


async def test_waiters_pass_only_once_the_barrier_is_removed(started) -> None:
    a, b, c = await started(3)
    await Barrier(a, "/gate").set_barrier()
    waiters = [asyncio.create_task(Barrier(x, "/gate").wait_on_barrier()) for x in (b, c)]
    await settle(b, c)
    assert not any(w.done() for w in waiters)
    await Barrier(a, "/gate").remove_barrier()
    assert await asyncio.gather(*waiters) == [True, True]


async def test_a_barrier_that_is_not_set_holds_nobody(coord: aiocoord.Client) -> None:
    assert await Barrier(coord, "/open").wait_on_barrier()
    assert await Barrier(coord, "/open").wait_on_barrier(timeout=0)
    assert coord.pending_watches == 0


async def test_setting_and_removing_twice_is_fine(coord: aiocoord.Client) -> None:
    gate = Barrier(coord, "/deep/er/gate")
    await gate.set_barrier()
    await gate.set_barrier()
    stat = await coord.exists("/deep/er/gate")
    assert stat is not None and not stat.is_ephemeral
    await gate.remove_barrier()
    await gate.remove_barrier()
    assert await coord.exists("/deep/er/gate") is None


async def test_a_timed_wait_returns_false_in_time_and_leaves_no_watch(
    coord: aiocoord.Client,
) -> None:
    gate = Barrier(coord, "/closed")
    await gate.set_barrier()
    started_at = time.monotonic()
    assert not await gate.wait_on_barrier(timeout=0.2)
    assert 0.2 <= time.monotonic() - started_at < 2
    assert not await gate.wait_on_barrier(timeout=0)
    assert coord.pending_watches == 0


async def test_an_enclosing_deadline_cancels_the_wait(coord: aiocoord.Client) -> None:
    gate = Barrier(coord, "/closed")
    await gate.set_barrier()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await gate.wait_on_barrier()
    assert coord.pending_watches == 0


async def test_a_wait_rides_through_a_dropped_connection(started, state_log) -> None:
    a, b = await started(2)
    log = state_log(b)
    await Barrier(a, "/gate").set_barrier()
    waiting = asyncio.create_task(Barrier(b, "/gate").wait_on_barrier())
    await settle(b)
    drop_connection(b)
    await log.wait_for(ConnectionState.RECONNECTED)
    await settle(b)
    assert not waiting.done()
    await Barrier(a, "/gate").remove_barrier()
    assert await waiting


async def test_a_wait_looks_again_after_its_session_is_lost(started) -> None:
    a, b = await started(2)
    await Barrier(a, "/gate").set_barrier()
    waiting = asyncio.create_task(Barrier(b, "/gate").wait_on_barrier())
    await settle(b)
    # The session and its watch go; the barrier still stands: still waiting.
    await expire_session(b)
    await settle(b)
    assert not waiting.done()
    # Removed while the session is gone (no watch can report it): seen anyway.
    await expire_session(b, wait=False)
    await Barrier(a, "/gate").remove_barrier()
    assert await asyncio.wait_for(waiting, 30)


# --- DoubleBarrier: the guarantee -------------------------------------------------------


async def test_participants_pass_enter_and_leave_only_all_together(
    started, children_reach, children_of
) -> None:
    """Nobody passes enter before the last one entered; nobody returns from leave
    before the last one left (whichever participant comes last, lowest or not)."""
    n = 4
    clients = await started(n)
    barriers = [DoubleBarrier(c, "/race", n) for c in clients]
    events: list[Any] = []

    async def enter(i: int) -> None:
        assert await barriers[i].enter()
        events.append(("entered", i))

    async def leave(i: int) -> None:
        assert await barriers[i].leave()
        # Once leave returned, no participant node may be left.
        left = await participants_of(clients[i], "/race", children_of)
        events.append(("left", i, left))

    for round_ in range(2):
        events.clear()
        early = [asyncio.create_task(enter(i)) for i in range(n - 1)]
        await children_reach(clients[0], "/race", n - 1)
        await settle(*clients)
        assert not any(t.done() for t in early)
        events.append("the last one enters")
        await asyncio.gather(*early, enter(n - 1))
        assert events[0] == "the last one enters" and len(events) == n + 1

        # Round 0 holds back the lowest participant, round 1 the highest.
        order = by_node(*barriers)
        last = barriers.index(order[0] if round_ == 0 else order[-1])
        # The lowest waits with its node, the others delete theirs and wait.
        staying = {name_of(order[0]), name_of(barriers[last])}
        events.clear()
        leaving = [asyncio.create_task(leave(i)) for i in range(n) if i != last]
        await settle(*clients)
        assert not any(t.done() for t in leaving)
        assert set(await participants_of(clients[0], "/race", children_of)) == staying
        events.append("the last one leaves")
        await asyncio.gather(*leaving, leave(last))
        assert events[0] == "the last one leaves"
        assert sorted(e[1] for e in events[1:]) == list(range(n))
        assert all(e[2] == [] for e in events[1:]), events
        assert await children_of(clients[0], "/race") == []  # ready went too
        assert not any(b.is_entered for b in barriers)


async def test_async_with_runs_the_block_together_and_leaves_together(started) -> None:
    clients = await started(3)
    events: list[str] = []

    async def participant(client: aiocoord.Client) -> None:
        async with DoubleBarrier(client, "/ctx", 3).entered() as barrier:
            assert barrier.is_entered
            events.append("in")
            await asyncio.sleep(0)
            events.append("done")
        assert not barrier.is_entered
        events.append("out")

    await asyncio.gather(*(participant(c) for c in clients))
    # Nobody was out before every block had run to its end.
    assert sorted(events[:6]) == ["done"] * 3 + ["in"] * 3
    assert events[6:] == ["out"] * 3


async def test_one_member_passes_alone(coord: aiocoord.Client, children_of) -> None:
    barrier = DoubleBarrier(coord, "/solo", 1)
    assert await barrier.enter(timeout=5)
    assert await barrier.leave(timeout=5)
    assert await children_of(coord, "/solo") == []


async def test_the_layout_is_curators(started) -> None:
    a, b = await started(2)
    x, y = DoubleBarrier(a, "/layout", 2, data=b"x"), DoubleBarrier(b, "/layout", 2)
    await asyncio.gather(x.enter(), y.enter())
    names = sorted(await a.children("/layout"))
    assert READY in names
    participants = [n for n in names if n != READY]
    assert sorted(participants) == sorted([name_of(x), name_of(y)])
    for name in participants:
        assert len(name) == 36 and name.count("-") == 4  # a UUID, nothing else
        stat = await a.exists(f"/layout/{name}")
        assert stat is not None and stat.is_ephemeral
    assert (await a.get(f"/layout/{name_of(x)}"))[0] == b"x"
    ready = await a.exists("/layout/ready")
    assert ready is not None and not ready.is_ephemeral
    await asyncio.gather(x.leave(), y.leave())


# --- entering twice, concurrently, and the block's way out ---------------------------------


async def test_entering_twice_without_leaving_is_an_error(coord: aiocoord.Client) -> None:
    barrier = DoubleBarrier(coord, "/twice", 1)
    assert await barrier.enter()
    with pytest.raises(RuntimeError, match="already entered"):
        await barrier.enter()
    assert await barrier.leave()
    assert await barrier.enter()  # entering again after leaving is fine
    assert await barrier.leave()
    with pytest.raises(RuntimeError, match="not entered"):
        await barrier.leave()


async def test_one_participant_cannot_enter_from_two_tasks_at_once(coord: aiocoord.Client) -> None:
    barrier = DoubleBarrier(coord, "/both", 2)
    first = asyncio.create_task(barrier.enter())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already entering"):
        await barrier.enter()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_async_with_raises_operation_timeout_when_too_few_come(
    coord: aiocoord.Client, children_of
) -> None:
    with pytest.raises(OperationTimeoutError):
        async with DoubleBarrier(coord, "/few", 2).entered(timeout=0.2):
            pytest.fail("entered with one participant of two")
    assert await children_of(coord, "/few") == []


async def test_a_block_that_raises_leaves_at_once_and_holds_nobody_up(started, children_of) -> None:
    a, b = await started(2)
    other = DoubleBarrier(b, "/raise", 2)
    other_in = asyncio.create_task(other.enter())
    mine = DoubleBarrier(a, "/raise", 2)
    with pytest.raises(ZeroDivisionError):
        async with mine.entered():
            assert await other_in
            1 / 0  # noqa: B018
    assert mine.node is None and not mine.is_entered
    assert await participants_of(b, "/raise", children_of) == [name_of(other)]
    assert await other.leave(timeout=5)  # we count as gone


async def test_a_cancelled_block_does_not_hang_on_leave(started, children_of) -> None:
    a, b = await started(2)
    other = DoubleBarrier(b, "/cancel-body", 2)
    other_in = asyncio.create_task(other.enter())
    inside = asyncio.Event()

    async def body() -> None:
        async with DoubleBarrier(a, "/cancel-body", 2).entered():
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await inside.wait()
    assert await other_in
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert await participants_of(b, "/cancel-body", children_of) == [name_of(other)]
    assert await other.leave(timeout=5)


# --- curator#1290: every wake is re-checked ----------------------------------------------


async def test_a_reconnection_or_another_change_never_lets_enter_pass_early(
    started, children_reach, state_log
) -> None:
    a, b, c = await started(3)
    log = state_log(a)
    first = DoubleBarrier(a, "/early", 3)
    entering = asyncio.create_task(first.enter())
    await children_reach(b, "/early", 1)
    # A dropped connection and its reconnection: Curator's watcher woke up on it.
    drop_connection(a)
    await log.wait_for(ConnectionState.RECONNECTED)
    await settle(a)
    assert not entering.done()
    # Another participant: a wake, with still too few.
    second = DoubleBarrier(b, "/early", 3)
    second_entering = asyncio.create_task(second.enter())
    await children_reach(c, "/early", 2)
    await settle(a, b)
    assert not entering.done() and not second_entering.done()
    third = DoubleBarrier(c, "/early", 3)
    assert await third.enter(timeout=10)
    assert await entering and await second_entering
    assert all(await asyncio.gather(first.leave(), second.leave(), third.leave()))


# --- CURATOR-233 / CURATOR-536: a timed leave returns in time -----------------------------


@pytest.mark.parametrize("role", ["lowest", "highest"])
async def test_a_timed_leave_returns_false_in_time_when_another_never_leaves(
    started, children_of, role: str
) -> None:
    a, b = await started(2)
    x, y = DoubleBarrier(a, "/stuck", 2), DoubleBarrier(b, "/stuck", 2)
    await asyncio.gather(x.enter(), y.enter())
    low, high = by_node(x, y)
    me, other = (low, high) if role == "lowest" else (high, low)
    other_name = name_of(other)
    started_at = time.monotonic()
    assert not await me.leave(timeout=0.3)
    assert 0.3 <= time.monotonic() - started_at < 2.5
    # We are out (node deleted), the other is still in.
    assert not me.is_entered and me.node is None
    assert await participants_of(a, "/stuck", children_of) == [other_name]
    assert await other.leave(timeout=5)


async def enter_pair(x: DoubleBarrier, y: DoubleBarrier, *, x_lowest: bool) -> None:
    """Enter both, again and again until ``x`` has the place in the order asked for
    (node names are random UUIDs)."""
    while True:
        await asyncio.gather(x.enter(), y.enter())
        if (name_of(x) < name_of(y)) == x_lowest:
            return
        await asyncio.gather(x.leave(), y.leave())


@pytest.mark.parametrize("role", ["lowest", "highest"])
@pytest.mark.parametrize("fault", ["dropped", "down"])
async def test_a_timed_leave_returns_false_in_time_while_the_connection_is_lost(
    zookeeper, started, state_log, fault: str, role: str
) -> None:
    """The lowest waits with its node (deleted once the connection is back, in the
    background if it is down); any other deleted its node before waiting."""
    (b,) = await started(1)
    async with proxied(zookeeper) as (proxy, a):
        log = state_log(a)
        x, y = DoubleBarrier(a, "/lost", 2), DoubleBarrier(b, "/lost", 2)
        await enter_pair(x, y, x_lowest=role == "lowest")
        my_name = name_of(x)
        started_at = time.monotonic()
        leaving = asyncio.create_task(x.leave(timeout=1.0))
        await settle(a)
        if fault == "dropped":
            drop_connection(a)
        else:
            proxy.refuse()
            proxy.cut()
        await log.wait_for(ConnectionState.SUSPENDED)
        assert not await leaving
        assert 1.0 <= time.monotonic() - started_at < 3.0
        assert not x.is_entered
        if fault == "down":
            proxy.refuse(False)
        # Our node goes (now, or once the connection is back).
        await wait_gone(b, "/lost", my_name)
        await a.sync()  # the cleanup's reply came first: it is over
        assert await y.leave(timeout=5)


# --- PR #416: enter's and leave's watches are separate -----------------------------------


async def test_child_changes_during_leave_let_nobody_out_early(started, children_of) -> None:
    """Enter's watches are its own (Curator's shared one woke leave, PR #416): changes
    under the barrier while a participant leaves wake it at most to look again."""
    a, b, d = await started(3)
    x, y = DoubleBarrier(a, "/w", 2), DoubleBarrier(b, "/w", 2)
    assert await asyncio.gather(x.enter(), y.enter()) == [True, True]
    leaving = asyncio.create_task(x.leave())
    await settle(a)
    await d.delete("/w/ready")
    await d.create("/w/ready")
    await d.create("/w/stranger", ephemeral=True)
    await d.delete("/w/stranger")
    await settle(a)
    assert not leaving.done()
    assert await y.leave()
    assert await leaving
    assert await children_of(d, "/w") == []


# --- CURATOR-80: a participant that gave up is not counted --------------------------------


async def test_a_timed_out_enter_returns_false_and_leaves_no_node(started, children_of) -> None:
    a, b = await started(2)
    started_at = time.monotonic()
    lone = DoubleBarrier(a, "/late", 2)
    assert not await lone.enter(timeout=0.2)
    assert 0.2 <= time.monotonic() - started_at < 2
    assert lone.node is None and not lone.is_entered
    assert await children_of(a, "/late") == []
    # Had the first one's node stayed, this one would count two and pass.
    assert not await DoubleBarrier(b, "/late", 2).enter(timeout=0.2)
    assert await children_of(a, "/late") == []


async def test_a_cancelled_enter_leaves_no_node_at_every_await_point(
    started, children_reach, children_of
) -> None:
    a, b, c = await started(3)
    present = DoubleBarrier(a, "/cancel", 3)
    waiting = asyncio.create_task(present.enter())
    await children_reach(b, "/cancel", 1)
    # Cancel after 0, 1, 2, ... loop iterations: before the create is sent,
    # while it is in flight, while listing, while waiting.
    for steps in range(14):
        barrier = DoubleBarrier(b, "/cancel", 3)
        entering = asyncio.create_task(barrier.enter())
        for _ in range(steps):
            await asyncio.sleep(0)
        entering.cancel()
        with pytest.raises(asyncio.CancelledError):
            await entering
        assert barrier.node is None
        assert await children_of(b, "/cancel") == [name_of(present)], steps
    # The count was never inflated: two of three is still too few.
    assert not await DoubleBarrier(c, "/cancel", 3).enter(timeout=0.2)
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await children_of(b, "/cancel") == []


async def test_a_cancelled_enter_deletes_its_node_even_if_the_create_lands_later(
    zookeeper, client_factory, children_of
) -> None:
    observer = client_factory()
    await observer.start()
    await observer.create("/held")
    _names, _stat, created = await observer.watch_children("/held")
    async with proxied(zookeeper) as (proxy, a):
        proxy.hold()
        barrier = DoubleBarrier(a, "/held", 2)
        entering = asyncio.create_task(barrier.enter())
        await asyncio.sleep(0)  # the create is written into the held proxy
        entering.cancel()
        asyncio.get_running_loop().call_soon(proxy.release)
        with pytest.raises(asyncio.CancelledError):
            await entering
        # The create reached the server after the cancellation (a child appeared)...
        await asyncio.wait_for(created, 5)
        # ... and is gone again, while its session is still open.
        assert await children_of(observer, "/held") == []
        assert a.session_id != 0 and not a.closed


async def test_an_enclosing_deadline_on_enter_leaves_no_node(started, children_of) -> None:
    a, b = await started(2)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await DoubleBarrier(a, "/deadline", 2).enter()
    assert await children_of(b, "/deadline") == []
    assert a.pending_watches == 0


# --- sessions lost, participants killed -----------------------------------------------------


async def test_session_expiry_while_entering_raises_barrier_broken(
    started, children_reach, children_of
) -> None:
    a, b = await started(2)
    barrier = DoubleBarrier(a, "/exp", 2)
    entering = asyncio.create_task(barrier.enter())
    await children_reach(b, "/exp", 1)
    await expire_session(a)
    with pytest.raises(BarrierBrokenError):
        await entering
    assert barrier.node is None and not barrier.is_entered
    await a.sync()  # a cleanup sent after the loss has been answered
    # Its node went with the session: the next one is alone.
    assert not await DoubleBarrier(b, "/exp", 2).enter(timeout=0.2)
    assert await children_of(b, "/exp") == []


async def test_session_expiry_of_the_lowest_while_leaving_raises_barrier_broken(
    started,
) -> None:
    a, b = await started(2)
    x, y = DoubleBarrier(a, "/lx", 2), DoubleBarrier(b, "/lx", 2)
    await asyncio.gather(x.enter(), y.enter())
    low, high = by_node(x, y)
    low_client = a if low is x else b
    leaving = asyncio.create_task(low.leave())
    await settle(low_client)
    assert not leaving.done()  # the lowest waits for the highest, its node still there
    await expire_session(low_client)
    with pytest.raises(BarrierBrokenError):
        await leaving
    await low_client.sync()
    assert await high.leave(timeout=5)  # its node went: it counts as gone


async def test_a_participant_that_deleted_its_node_rides_out_its_session_expiry(
    started,
) -> None:
    a, b = await started(2)
    x, y = DoubleBarrier(a, "/ride", 2), DoubleBarrier(b, "/ride", 2)
    await asyncio.gather(x.enter(), y.enter())
    low, high = by_node(x, y)
    high_client = a if high is x else b
    leaving = asyncio.create_task(high.leave())  # deletes itself, waits for the lowest
    await settle(a, b)
    await expire_session(high_client)
    await settle(high_client)
    assert not leaving.done()
    assert await low.leave(timeout=5)
    assert await asyncio.wait_for(leaving, 10)


async def test_a_killed_participant_is_not_counted_and_timed_enters_return_false(
    started, client_factory, children_reach
) -> None:
    a, b = await started(2)
    killed = client_factory()
    await killed.start()
    first = asyncio.create_task(DoubleBarrier(a, "/kill", 3).enter(timeout=1.0))
    doomed = asyncio.create_task(DoubleBarrier(killed, "/kill", 3).enter())
    await children_reach(b, "/kill", 2)
    await killed.aclose()
    with pytest.raises(aiocoord.ClientClosedError):
        await doomed
    # Two of three left alive: nobody passes.
    assert not await DoubleBarrier(b, "/kill", 3).enter(timeout=0.3)
    assert not await first


async def test_a_participant_whose_client_closed_counts_as_left(started, client_factory) -> None:
    (a,) = await started(1)
    killed = client_factory()
    await killed.start()
    x, dead = DoubleBarrier(a, "/gone", 2), DoubleBarrier(killed, "/gone", 2)
    await asyncio.gather(x.enter(), dead.enter())
    await killed.aclose()
    assert await x.leave(timeout=5)


# --- with Curator -------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_curator_and_aiocoord_participants_pass_one_double_barrier_together(
    curator_classpath: str, zookeeper, started, children_reach, children_of
) -> None:
    ns = zookeeper.namespace
    a, b = await started(2)
    javas = [
        await start_curator(
            curator_classpath,
            "CuratorBarriers",
            "double",
            zookeeper.connect_string,
            f"{ns}/mixed",
            "4",
        )
        for _ in range(2)
    ]
    try:
        await children_reach(a, "/mixed", 2)  # both Curator participants are in
        first = DoubleBarrier(a, "/mixed", 4)
        entering = asyncio.create_task(first.enter())
        await children_reach(a, "/mixed", 3)
        # Three of four: nobody passes, Java or Python.
        for java in javas:
            with pytest.raises(TimeoutError):
                await read_line(java, timeout=0.5)
        await settle(a)
        assert not entering.done()
        last = DoubleBarrier(b, "/mixed", 4)
        assert await last.enter(timeout=20)
        assert await asyncio.wait_for(entering, 20)
        for java in javas:
            assert await read_line(java, timeout=20) == "ENTERED"
        # Leaving: the Python ones wait for the Java ones, and the other way round.
        leaving = [asyncio.create_task(p.leave(timeout=20)) for p in (first, last)]
        await settle(a, b)
        assert not any(t.done() for t in leaving)
        for java in javas:
            await send_line(java, "leave")

        async def left(task: asyncio.Task[bool]) -> bool:
            return await task

        outputs = await together(*(finish(j, timeout=30) for j in javas), *map(left, leaving))
    finally:
        for java in javas:
            await kill(java)
    assert all(o.split() == ["LEFT", "DONE"] for o in outputs[:2]), outputs
    assert outputs[2:] == [True, True]
    assert await children_of(a, "/mixed") == []


@pytest.mark.timeout(120)
async def test_curator_waits_on_an_aiocoord_barrier_and_the_other_way_round(
    curator_classpath: str, zookeeper, coord: aiocoord.Client
) -> None:
    ns = zookeeper.namespace
    gate = Barrier(coord, "/gate")
    await gate.set_barrier()
    java = await start_curator(
        curator_classpath, "CuratorBarriers", "wait", zookeeper.connect_string, f"{ns}/gate"
    )
    try:
        with pytest.raises(TimeoutError):
            await read_line(java, timeout=0.5)
        await gate.remove_barrier()
        assert (await finish(java, timeout=30)).split() == ["PASSED", "DONE"]
    finally:
        await kill(java)

    java = await start_curator(
        curator_classpath, "CuratorBarriers", "set", zookeeper.connect_string, f"{ns}/gate2"
    )
    try:
        assert await read_line(java, timeout=20) == "SET"
        waiting = asyncio.create_task(Barrier(coord, "/gate2").wait_on_barrier())
        await settle(coord)
        assert not waiting.done()
        await send_line(java, "remove")
        assert await asyncio.wait_for(waiting, 20)
        assert (await finish(java, timeout=30)).split() == ["REMOVED", "DONE"]
    finally:
        await kill(java)


async def test_a_ready_node_left_by_a_round_that_crashed_does_not_open_the_next(
    client_factory, started
) -> None:
    """Found by make chaos: the next round must fill up again (Curator's would pass)."""
    (c, d) = await started(2)
    a, b = client_factory(), client_factory()
    await a.start()
    await b.start()
    entered = await asyncio.gather(
        DoubleBarrier(a, "/crashed", 2).enter(timeout=10),
        DoubleBarrier(b, "/crashed", 2).enter(timeout=10),
    )
    assert entered == [True, True]
    await a.aclose()  # both crash inside: their nodes go, `ready` stays
    await b.aclose()
    assert await c.children("/crashed") == ["ready"]
    assert not await DoubleBarrier(c, "/crashed", 2).enter(timeout=0.3)
    entered = await asyncio.gather(
        DoubleBarrier(c, "/crashed", 2).enter(timeout=10),
        DoubleBarrier(d, "/crashed", 2).enter(timeout=10),
    )
    assert entered == [True, True]


async def test_a_late_entrant_waits_for_the_next_round_and_holds_nobody_up(
    started, children_of
) -> None:
    """Found by make chaos: a participant arriving while a full round is inside must not
    pass on that round's ``ready`` (Curator's would, with fewer than ``members`` in its
    own round), and the round's leavers must not wait for it."""
    a, b, c, d = await started(4)
    first = [DoubleBarrier(a, "/rounds", 2), DoubleBarrier(b, "/rounds", 2)]
    assert await asyncio.gather(*(x.enter(timeout=10) for x in first)) == [True, True]

    late = DoubleBarrier(c, "/rounds", 2)
    assert not await late.enter(timeout=0)  # one look: the round inside is not its round
    assert late.node is None and not late.is_entered
    assert sorted(await children_of(a, "/rounds")) == sorted(
        [name_of(x) for x in first] + ["ready"]
    )

    entering = asyncio.create_task(late.enter(timeout=20))
    await settle(a, b, c)
    # Its own round has one participant so far: it may not pass, and it keeps no
    # node the leaving round would wait for.
    assert await asyncio.gather(*(x.leave(timeout=10) for x in first)) == [True, True]
    assert not entering.done()
    other = DoubleBarrier(d, "/rounds", 2)
    assert await asyncio.gather(entering, other.enter(timeout=10)) == [True, True]
    assert await asyncio.gather(late.leave(timeout=10), other.leave(timeout=10)) == [True, True]
    assert await children_of(a, "/rounds") == []


async def test_an_enter_whose_cleanup_is_cut_off_deletes_its_node_once_back(
    zookeeper, client_factory
) -> None:
    """The enter gives up while connected, so its node's delete is sent at once;
    the connection drops under it and stays away past the request timeout, but
    not long enough to lose the session. The node must still go once the client
    is back: a given-up participant left in a live session would be counted by
    the others for as long as that session lives (the chaos run's barrier.enter)."""
    observer = client_factory()
    await observer.start()
    await observer.create("/cutoff")
    _names, _stat, created = await observer.watch_children("/cutoff")
    host, port = zookeeper.connect_string.rsplit(":", 1)
    async with TcpProxy(host, int(port)) as proxy:
        a = aiocoord.connect(
            proxy.connect_string,
            namespace=zookeeper.namespace,
            session_timeout=20,
            request_timeout=0.5,
        )
        async with a:
            barrier = DoubleBarrier(a, "/cutoff", 2)
            entering = asyncio.create_task(barrier.enter())
            await asyncio.wait_for(created, 5)
            name = name_of(barrier)
            session = a.session_id
            proxy.hold()  # the delete goes no further than the proxy...
            entering.cancel()
            await asyncio.sleep(0)  # the cancelled enter runs first: its cleanup begins
            assert barrier.node is None and a.connected  # ... while connected
            proxy.refuse()
            proxy.cut()  # ... and is dropped with the connection
            with pytest.raises(asyncio.CancelledError):
                await entering
            assert (await observer.children("/cutoff")) == [name]
            proxy.refuse(False)
            proxy.release()
            await asyncio.wait_for(wait_gone(observer, "/cutoff", name), 10)
            assert a.session_id == session  # the session lived on: its delete did it
