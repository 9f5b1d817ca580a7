"""Leadership beyond election (#29): observe, proclaim, resign, hand-over and
priority take-over, on LeaderLatch and LeaderElection, also through session
expiry and a server restart."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ConnectionState,
    InvalidArgumentError,
    LeaderElection,
    LeaderLatch,
    LeaderObserver,
    LeadershipLostError,
    NotOwnerError,
    Participant,
)
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(120)


async def leader_reaches(
    changes: AsyncIterator[Participant | None], wanted_id: str | None, data: bytes | None = None
) -> list[Participant | None]:
    """Read ``changes`` until the leader is ``wanted_id`` (with ``data``, if given);
    everything read, in order."""
    seen: list[Participant | None] = []
    async with asyncio.timeout(EVENT_TIMEOUT):
        async for leader in changes:
            seen.append(leader)
            got = None if leader is None else leader.id
            if got == wanted_id and (data is None or (leader and leader.data == data)):
                return seen
    raise AssertionError(f"the stream ended before {wanted_id!r} led: {seen}")


class Term:
    """One LeaderElection participant running terms in a task: who leads, and why
    each term ended."""

    def __init__(self, client: aiocoord.Client, name: str, **kwargs: object) -> None:
        self.election = LeaderElection(client, "/election", participant_id=name, **kwargs)  # type: ignore[arg-type]
        self.name = name
        self.leading = asyncio.Event()
        self.ended: list[str] = []
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                async with self.election.hold():
                    self.leading.set()
                    await asyncio.Event().wait()
            except LeadershipLostError as error:
                self.leading.clear()
                self.ended.append(error.reason)
                self.changed.set()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def wait_until(event: asyncio.Event, predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``predicate()`` holds, checking each time ``event`` is set."""
    async with asyncio.timeout(EVENT_TIMEOUT):
        while not predicate():
            event.clear()
            await event.wait()
    assert predicate(), what


# --- observe and proclaim --------------------------------------------------------------------


async def test_an_observer_follows_leaders_proclaims_and_no_leader_without_a_node(
    started, children_of
) -> None:
    a, b, watcher = await started(3)
    observer = LeaderObserver(watcher, "/latch")
    async with observer.changes() as changes:
        assert await changes.__anext__() is None  # nobody takes part yet
        first = LeaderLatch(a, "/latch", participant_id="a")
        second = LeaderLatch(b, "/latch", participant_id="b")
        async with first:
            await first.wait_leader()
            seen = await leader_reaches(changes, "a")
            token = seen[-1].fencing_token  # type: ignore[union-attr]
            assert token == first.fencing_token
            assert seen[-1] == Participant("a", first.node, b"a", True, token)  # type: ignore[arg-type]
            await second.start()
            await first.proclaim(b"10.0.0.1:80")
            await leader_reaches(changes, "a", b"10.0.0.1:80")
            # Curator reads the id from the node: it stays the id.
            assert (await a.get(first.node))[0] == b"a"  # type: ignore[arg-type]
            with pytest.raises(NotOwnerError):
                await second.proclaim(b"not me")
        seen = await leader_reaches(changes, "b")
        assert seen[-1].data == b"b"  # type: ignore[union-attr]  # a's proclaim was a's term's
        assert seen[-1].fencing_token > token  # type: ignore[union-attr, operator]
        await second.aclose()
        await leader_reaches(changes, None)
    assert await observer.leader() is None
    assert await children_of(watcher, "/latch") == []
    assert watcher.pending_watches == 0


async def test_observe_listeners_and_an_election_proclaim(started) -> None:
    a, watcher = await started(2)
    observer = LeaderObserver(watcher, "/election")
    seen: list[Participant | None] = []
    changed = asyncio.Event()

    def listener(leader: Participant | None) -> None:
        seen.append(leader)
        changed.set()

    observer.add_listener(listener)
    election = LeaderElection(a, "/election", participant_id="a")
    async with election.hold():
        await election.proclaim(b"v1")
        async with asyncio.timeout(EVENT_TIMEOUT):
            while not seen or seen[-1] is None or seen[-1].data != b"v1":
                changed.clear()
                await changed.wait()
        assert seen[-1].id == "a" and seen[-1].fencing_token == election.fencing_token
        assert (await election.leader()) is not None
    observer.remove_listener(listener)
    with pytest.raises(NotOwnerError):
        await election.proclaim(b"v2")
    async with election.leader_changes() as changes:
        assert await changes.__anext__() is None


# --- resign -----------------------------------------------------------------------------------


async def test_a_resigning_latch_requeues_behind_and_the_next_leads(
    started, children_reach
) -> None:
    a, b = await started(2)
    async with (
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        lost: list[str] = []

        async def body() -> None:
            try:
                async with first.hold():
                    await first.resign()
            except LeadershipLostError as error:
                lost.append(error.reason)

        await body()
        assert lost == ["resigned"]
        assert await second.wait_leader(timeout=EVENT_TIMEOUT)
        await children_reach(b, "/latch", 2)  # a queues again, in its latch's task
        assert [p.id for p in await second.participants()] == ["b", "a"]
        await second.resign(requeue=False)  # leaves: the latch closes
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        assert [p.id for p in await first.participants()] == ["a"]
        with pytest.raises(aiocoord.RecipeClosedError):
            await second.wait_leader()


async def test_a_resigning_election_term_ends_and_run_returns_without_requeue(started) -> None:
    a, b = await started(2)
    x = LeaderElection(a, "/election", participant_id="x")
    y = Term(b, "y")
    terms = 0
    led = asyncio.Event()

    async def lead() -> None:
        nonlocal terms
        terms += 1
        led.set()
        if terms == 1:
            await x.resign()  # queues again: run goes on
        else:
            await x.resign(requeue=False)

    y_started = False
    run = asyncio.create_task(x.run(lead))
    try:
        await wait_until(led, lambda: terms == 1, "x leads once")
        y.start()
        y_started = True
        async with asyncio.timeout(EVENT_TIMEOUT):
            await y.leading.wait()
        with pytest.raises(NotOwnerError):
            await x.resign()
        await y.election.resign()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await run  # x's second term resigned for good
        assert terms == 2
        await wait_until(y.changed, lambda: y.ended == ["resigned"], "y's term: resigned")
    finally:
        run.cancel()
        if y_started:
            await y.stop()


# --- hand-over --------------------------------------------------------------------------------


async def test_an_election_hands_over_past_the_next_in_line(started, children_reach) -> None:
    a, b, c, watcher = await started(4)
    terms = [Term(a, "a"), Term(b, "b"), Term(c, "c")]
    try:
        terms[0].start()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await terms[0].leading.wait()
        token = terms[0].election.fencing_token
        for i in (1, 2):
            terms[i].start()
            await children_reach(watcher, "/election", i + 1)
        with pytest.raises(InvalidArgumentError):
            await terms[0].election.hand_over(to="nobody")
        observer = LeaderObserver(watcher, "/election")
        async with observer.changes() as changes:
            await leader_reaches(changes, "a")
            await terms[0].election.hand_over(to="c", timeout=EVENT_TIMEOUT)
            seen = await leader_reaches(changes, "c")
        assert all(p is None or p.id in ("a", "c") for p in seen), seen  # b never led
        async with asyncio.timeout(EVENT_TIMEOUT):
            await terms[2].leading.wait()
        assert terms[0].ended == ["handed over to 'c'"]
        assert not terms[1].leading.is_set() and terms[1].ended == []
        assert terms[2].election.fencing_token > token
        # Behind c now: b (gave way once), then a.
        ids = [p.id for p in await watcher_participants(watcher)]
        assert ids[0] == "c" and sorted(ids[1:]) == ["a", "b"]
        leader = await observer.leader()
        assert leader is not None and leader.id == "c"
    finally:
        for term in terms:
            await term.stop()


async def watcher_participants(client: aiocoord.Client) -> list[Participant]:
    return await LeaderElection(client, "/election").participants()


async def test_a_latch_hands_over_and_the_record_is_cleared(started, children_reach) -> None:
    a, b, c = await started(3)
    async with (
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
        LeaderLatch(c, "/latch", participant_id="c") as third,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        await children_reach(a, "/latch", 3)
        await first.hand_over(to="c", timeout=EVENT_TIMEOUT)
        assert await third.wait_leader(timeout=EVENT_TIMEOUT)
        assert not second.has_leadership and not first.has_leadership
        ids = [p.id for p in await third.participants()]
        assert ids[0] == "c" and sorted(ids[1:]) == ["a", "b"]
        assert (await a.get("/latch"))[0].startswith(b"{")  # the record, cleared by c
        # The target cleared the hand-over: the next resign goes to the head.
        await third.resign()
        latches = {"a": first, "b": second}
        assert await latches[ids[1]].wait_leader(timeout=EVENT_TIMEOUT)


async def test_a_hand_over_to_a_participant_whose_session_expires_does_not_wedge(
    started, children_reach
) -> None:
    a, b, c = await started(3)
    async with (
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        third = LeaderLatch(c, "/latch", participant_id="c")
        await third.start()
        await children_reach(a, "/latch", 3)
        # The target's node goes before it reaches the head: the record names a
        # node that no longer exists, and is ignored.
        await third.aclose()
        await children_reach(a, "/latch", 2)
        with pytest.raises(InvalidArgumentError):
            await first.hand_over(to="c")
        third = LeaderLatch(c, "/latch", participant_id="c")
        await third.start()
        await children_reach(a, "/latch", 3)
        first_leader_node = first.node
        # Hand over, then the target's session expires before it leads.
        ending = asyncio.create_task(first.hand_over(to="c", timeout=EVENT_TIMEOUT))
        async with asyncio.timeout(EVENT_TIMEOUT), a.data_changes("/latch") as records:
            async for value in records:
                if value is not None and b'"to":"' in value[0]:
                    break  # the record names c's node
        await expire_session(c)
        await ending
        # Nothing waits on c's gone node: whoever heads the queue now leads.
        waits = [
            asyncio.create_task(latch.wait_leader(timeout=EVENT_TIMEOUT))
            for latch in (first, second)
        ]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        assert any(task.result() for task in done)
        assert first.node != first_leader_node
        await third.aclose()


# --- priority ---------------------------------------------------------------------------------


async def test_a_higher_priority_participant_takes_over_through_the_loss_path(
    started, children_reach
) -> None:
    a, b, c = await started(3)
    low = Term(a, "low", priority=1)
    plain = Term(b, "plain")
    high = Term(c, "high", priority=5)
    try:
        low.start()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await low.leading.wait()
        token = low.election.fencing_token
        plain.start()  # no priority: below low; nothing happens
        await children_reach(a, "/election", 2)
        high.start()
        async with asyncio.timeout(EVENT_TIMEOUT):
            await high.leading.wait()
        assert low.ended == ["priority take-over by 'high'"]
        assert not plain.leading.is_set() and plain.ended == []
        assert high.election.fencing_token > token
        # An equal priority does not take over.
        same = Term(a, "same", priority=5)
        same.start()
        await children_reach(a, "/election", 4)
        assert high.election.has_leadership and high.ended == []
        await same.stop()
    finally:
        for term in (low, plain, high):
            await term.stop()


async def test_a_priority_latch_takes_over_and_the_old_leader_stays_queued(started) -> None:
    a, b = await started(2)
    async with LeaderLatch(a, "/latch", participant_id="a") as first:
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        async with LeaderLatch(b, "/latch", participant_id="b", priority=1) as second:
            assert await second.wait_leader(timeout=EVENT_TIMEOUT)
            assert [p.id for p in await first.participants()] == ["b", "a"]
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)


# --- faults -----------------------------------------------------------------------------------


async def test_observe_follows_through_session_expiry(started) -> None:
    a, b, watcher = await started(3)
    async with LeaderObserver(watcher, "/latch").changes() as changes:
        assert await changes.__anext__() is None
        async with LeaderLatch(a, "/latch", participant_id="a") as first:
            await leader_reaches(changes, "a")
            await expire_session(watcher)  # the observer's own session
            async with LeaderLatch(b, "/latch", participant_id="b"):
                await first.proclaim(b"after")
                await leader_reaches(changes, "a", b"after")
                await expire_session(a)  # the leader's: b takes over
                await leader_reaches(changes, "b")


async def test_observe_proclaim_and_hand_over_through_a_server_restart(
    private_zookeeper, state_log
) -> None:
    connect = private_zookeeper.connect_string
    async with (
        aiocoord.connect(connect, error_policy=aiocoord.SessionErrorPolicy()) as a,
        aiocoord.connect(connect, error_policy=aiocoord.SessionErrorPolicy()) as b,
        aiocoord.connect(connect) as watcher,
    ):
        log = state_log(a)
        async with (
            LeaderLatch(a, "/latch", participant_id="a") as first,
            LeaderLatch(b, "/latch", participant_id="b") as second,
            LeaderObserver(watcher, "/latch").changes() as changes,
        ):
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            await leader_reaches(changes, "a")
            await private_zookeeper.stop()
            await log.wait_for(ConnectionState.SUSPENDED)
            await private_zookeeper.start()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.RECONNECTED)
            assert first.has_leadership  # the session lived on (SessionErrorPolicy)
            await first.proclaim(b"restarted")
            await leader_reaches(changes, "a", b"restarted")
            await first.hand_over(to="b", timeout=EVENT_TIMEOUT)
            await leader_reaches(changes, "b")
            assert await second.wait_leader(timeout=EVENT_TIMEOUT)
