"""LeaderLatch and LeaderElection against a real server: one leader at a time,
hand-over, re-queueing, connection faults, fencing, and Curator on the same path."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from _curator import kill, read_line, send_line, start_curator
from _exclusion import Exclusion

import aiocoord
from aiocoord import (
    ClientClosedError,
    ConnectionState,
    InvalidPathError,
    LeaderElection,
    LeaderLatch,
    LeadershipLostError,
    NoAuthError,
    NodeExistsError,
    NotOwnerError,
    OperationTimeoutError,
    SessionErrorPolicy,
    StandardErrorPolicy,
)
from aiocoord.testing import drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)


class FencedStore:
    """A resource outside ZooKeeper that refuses writes carrying a token lower
    than the highest it has accepted."""

    def __init__(self) -> None:
        self.highest = 0
        self.accepted: list[tuple[int, str]] = []
        self.rejected: list[tuple[int, str]] = []

    def write(self, token: int, value: str) -> bool:
        if token < self.highest:
            self.rejected.append((token, value))
            return False
        self.highest = token
        self.accepted.append((token, value))
        return True


async def forever() -> None:
    await asyncio.Event().wait()


async def stop(*tasks: asyncio.Task[object]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- LeaderElection ---------------------------------------------------------------------


async def test_one_leader_at_a_time_across_four_clients_in_increasing_token_order(
    started, children_reach, children_of
) -> None:
    clients = await started(4)
    await clients[0].create("/record", b"0")
    store = FencedStore()
    exclusion = Exclusion()  # who runs a leader's body right now, in this process
    terms: list[tuple[str, int]] = []
    all_queued = asyncio.Event()
    enough = asyncio.Event()

    async def participant(client: aiocoord.Client, name: str) -> None:
        election = LeaderElection(client, "/election", participant_id=name)

        async def lead() -> None:
            with exclusion.hold(name):
                token = election.fencing_token
                terms.append((name, token))
                assert store.write(token, name)
                await all_queued.wait()  # the first term lasts until everyone queued
                await election.transaction().set("/record", b"%d" % token).commit()
                if len(terms) >= 12:
                    enough.set()

        await election.run(lead)

    tasks = [asyncio.create_task(participant(c, f"p{i}")) for i, c in enumerate(clients)]
    await children_reach(clients[0], "/election", 4)
    all_queued.set()
    await enough.wait()
    await stop(*tasks)

    exclusion.assert_kept()
    assert store.rejected == []
    tokens = [token for _name, token in terms]
    assert tokens == sorted(set(tokens)), "terms in strictly increasing token order"
    names = [name for name, _token in terms]
    assert len(set(names[:4])) == 4 and names[4:8] == names[:4], "each one in turn"
    assert (await clients[0].get("/record"))[0] == b"%d" % store.accepted[-1][0]
    assert await children_of(clients[0], "/election") == []


@pytest.mark.parametrize("how", ["cancel run", "close client", "expire session"])
async def test_the_old_leaders_body_is_cancelled_before_the_new_one_starts(
    client_factory, children_reach, how: str
) -> None:
    a, b = client_factory(), client_factory()
    await asyncio.gather(a.start(), b.start())
    events: list[str] = []
    leading = {"a": asyncio.Event(), "b": asyncio.Event()}

    def body(name: str) -> Callable[[], Awaitable[None]]:
        async def lead() -> None:
            events.append(f"{name} leads")
            leading[name].set()
            try:
                await forever()
            except asyncio.CancelledError:
                events.append(f"{name} cancelled")
                raise

        return lead

    run_a = asyncio.create_task(LeaderElection(a, "/election", participant_id="a").run(body("a")))
    await leading["a"].wait()
    run_b = asyncio.create_task(LeaderElection(b, "/election", participant_id="b").run(body("b")))
    await children_reach(b, "/election", 2)
    if how == "cancel run":
        run_a.cancel()
    elif how == "close client":
        await a.aclose()
    else:
        await expire_session(a)
    await leading["b"].wait()
    if how == "expire session":
        # The server tells a and b independently: b may start first, before a
        # has heard that its session is gone (the documented limit; fencing
        # covers it). a's body is cancelled all the same.
        await stop(run_a)
        assert events[0] == "a leads" and sorted(events[1:3]) == ["a cancelled", "b leads"]
    else:
        assert events[:3] == ["a leads", "a cancelled", "b leads"]
    if how == "close client":
        with pytest.raises(ClientClosedError):
            await run_a  # it could not queue again
    await stop(run_a, run_b)


async def test_a_participant_leads_again_after_the_others_had_their_turn(
    started, children_reach
) -> None:
    clients = await started(3)
    order: list[str] = []
    enough = asyncio.Event()

    async def participant(client: aiocoord.Client, name: str) -> None:
        async def lead() -> None:
            order.append(name)
            # The queue is whole again: the previous leader queued once more.
            await children_reach(client, "/election", 3)
            if len(order) >= 7:
                enough.set()
                await forever()

        await LeaderElection(client, "/election", participant_id=name).run(lead)

    tasks = [asyncio.create_task(participant(c, f"p{i}")) for i, c in enumerate(clients)]
    await enough.wait()
    await stop(*tasks)
    assert len(set(order[:3])) == 3
    assert order[3:7] == [*order[:3], order[0]]


async def test_without_requeue_run_leads_for_one_term(started, children_of) -> None:
    (client,) = await started(1)
    election = LeaderElection(client, "/election", participant_id="once")
    terms = 0

    async def lead() -> None:
        nonlocal terms
        terms += 1
        assert election.has_leadership

    await election.run(lead, requeue=False)
    assert terms == 1 and not election.has_leadership
    assert await children_of(client, "/election") == []


async def test_an_exception_from_the_leaders_function_ends_run(started, children_of) -> None:
    (client,) = await started(1)

    async def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await LeaderElection(client, "/election", participant_id="x").run(fail)
    assert await children_of(client, "/election") == []


async def test_a_lost_term_is_requeued_by_run_and_raised_without_requeue(started) -> None:
    a, b = await started(2)
    terms: list[int] = []
    second_term = asyncio.Event()

    async def lead(election: LeaderElection) -> None:
        terms.append(election.fencing_token)
        if len(terms) == 1:
            await b.delete(election.fence().node)  # someone takes our node away
        else:
            second_term.set()
        await forever()

    election = LeaderElection(a, "/election", participant_id="a")
    running = asyncio.create_task(election.run(lambda: lead(election)))
    await second_term.wait()  # after the loss, in a new node
    await stop(running)
    assert len(terms) == 2 and terms[1] > terms[0]

    once = LeaderElection(a, "/once", participant_id="a")

    async def lose_it() -> None:
        await b.delete(once.fence().node)
        await forever()

    with pytest.raises(LeadershipLostError, match="deleted"):
        await once.run(lose_it, requeue=False)


async def test_the_body_is_cancelled_when_the_connection_is_suspended(
    client_factory, state_log, children_of
) -> None:
    client = client_factory()
    await client.start()
    log = state_log(client)
    election = LeaderElection(client, "/election", participant_id="a")
    seen: list[str] = []
    with pytest.raises(LeadershipLostError, match="suspended") as lost:
        async with election.hold():
            assert election.has_leadership
            drop_connection(client)
            try:
                await forever()
            except asyncio.CancelledError:
                seen.append("cancelled")
                assert not election.has_leadership
                with pytest.raises(LeadershipLostError):
                    election.fence()  # a write guarded by it would be refused
                raise
    assert seen == ["cancelled"]
    assert lost.value.path == "/election"
    assert not election.has_leadership
    with pytest.raises(NotOwnerError):
        election.fencing_token  # noqa: B018
    assert ConnectionState.SUSPENDED in log.states
    assert await children_of(client, "/election") == []  # deleted once reconnected


async def test_a_brief_disconnect_does_not_cancel_the_body_under_the_session_policy(
    started, state_log, children_of
) -> None:
    (client,) = await started(1)
    log = state_log(client)
    election = LeaderElection(
        client, "/election", participant_id="a", error_policy=SessionErrorPolicy()
    )
    async with election.hold():
        node = election.fence().node
        drop_connection(client)
        await log.wait_for(ConnectionState.RECONNECTED)
        assert election.has_leadership and election.fence().node == node
        await election.transaction().create("/written").commit()  # still fenced in
    assert await client.exists("/written") is not None
    assert await children_of(client, "/election") == []


async def test_our_node_deleted_by_someone_else_cancels_the_body(started) -> None:
    a, b = await started(2)
    election = LeaderElection(a, "/election", participant_id="a")
    cancelled = False
    with pytest.raises(LeadershipLostError, match="deleted by someone else"):
        async with election.hold():
            lost = asyncio.create_task(election.wait_lost())
            try:
                await b.delete(election.fence().node)
                await forever()
            except asyncio.CancelledError:
                cancelled = True
                raise
    assert cancelled
    await lost  # the term's loss was reported to waiters too


async def test_run_rides_out_zookeeper_out_of_reach_while_queueing(started) -> None:
    (client,) = await started(1)
    election = LeaderElection(client, "/election", participant_id="a")
    make_contender = election._new_contender
    made = 0

    def contender_once_unreachable():  # the first try finds no server for a whole timeout
        nonlocal made
        made += 1
        contender = make_contender()
        if made == 1:

            async def unreachable(timeout: float | None = None) -> bool:
                raise aiocoord.NoConnectionError(0.1)

            contender.acquire = unreachable  # type: ignore[method-assign]
        return contender

    election._new_contender = contender_once_unreachable  # type: ignore[method-assign]
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await forever()

    running = asyncio.create_task(election.run(lead))
    await leading.wait()
    await stop(running)
    assert made == 2


async def test_a_fenced_transaction_is_refused_once_leadership_is_gone(started) -> None:
    a, b = await started(2)
    await a.create("/resource", b"0")
    election = LeaderElection(a, "/election", participant_id="a")
    async with election.hold():
        await election.transaction().set("/resource", b"1").commit()
        late = election.transaction().set("/resource", b"late")
        foreign = b.transaction().guard(election.fence()).set("/resource", b"late")
    # The term is over and its node gone: a write prepared in it applies nothing.
    with pytest.raises(LeadershipLostError, match="/election"):
        await late.commit()
    with pytest.raises(LeadershipLostError, match="/election"):
        await foreign.commit()  # the fence says what its loss is, in any transaction
    assert (await a.get("/resource"))[0] == b"1"
    with pytest.raises(NotOwnerError):
        election.transaction()


async def test_fencing_tokens_grow_across_terms_of_different_participants(started) -> None:
    a, b = await started(2)
    tokens = []
    for _ in range(2):
        for client, name in ((a, "a"), (b, "b")):
            election = LeaderElection(client, "/election", participant_id=name)
            async with election.hold() as leader:
                assert leader is election
                tokens.append(election.fencing_token)
    assert tokens == sorted(set(tokens))


async def test_leadership_times_out_leaving_no_node(started) -> None:
    a, b = await started(2)
    holder = LeaderElection(a, "/election", participant_id="holder")
    async with holder.hold():
        other = LeaderElection(b, "/election", participant_id="other")
        with pytest.raises(OperationTimeoutError, match="/election"):
            async with other.hold(timeout=0.2):
                pytest.fail("led while another led")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2), other.hold():
                pytest.fail("led while another led")
        assert [c.id for c in await other.participants()] == ["holder"]
        assert not other.has_leadership


async def test_one_election_object_takes_part_once_at_a_time(started) -> None:
    (client,) = await started(1)
    election = LeaderElection(client, "/election", participant_id="a")

    async def nothing() -> None:
        pass

    async with election.hold():
        with pytest.raises(RuntimeError, match="one participant"):
            async with election.hold():
                pass
        with pytest.raises(RuntimeError, match="one participant"):
            await asyncio.create_task(election.run(nothing))
        assert election.has_leadership  # the refusal took nothing away
    await election.run(nothing, requeue=False)  # free again
    term = election.hold()
    async with term:
        pass
    async with term:  # a finished context may be entered again: a new term
        assert election.has_leadership
    assert not election.has_leadership


async def test_election_participants_in_queue_order_with_their_ids(started, children_reach) -> None:
    a, b = await started(2)
    first = LeaderElection(a, "/election", participant_id="first")
    second = LeaderElection(b, "/election", participant_id="sécond")
    assert await first.participants() == [] and await first.leader() is None
    async with first.hold():
        waiting = asyncio.create_task(second.run(forever))
        await children_reach(a, "/election", 2)
        people = await second.participants()
        assert [(c.id, c.holds) for c in people] == [("first", True), ("sécond", False)]
        assert people[0].node == first.fence().node
        assert await second.leader() == people[0]
        assert isinstance(people[0], aiocoord.Participant)
        assert people[0].data == b"first"
    await stop(waiting)
    anonymous = LeaderElection(a, "/anonymous")
    async with anonymous.hold():
        leader = await anonymous.leader()
        assert leader is not None and leader.id == anonymous.participant_id
        _host, pid, suffix = leader.id.split(":")
        assert pid == str(__import__("os").getpid()) and len(suffix) == 16


@pytest.mark.parametrize("recipe", [LeaderLatch, LeaderElection])
def test_constructors_refuse_bad_input_before_any_io(
    recipe: type, idle_client: aiocoord.Client
) -> None:
    client = idle_client
    for path in ("", "election", "/election/", "/a//b", "/a/./b"):
        with pytest.raises(InvalidPathError):
            recipe(client, path)
    with pytest.raises(ValueError, match="root"):
        recipe(client, "/")
    with pytest.raises(TypeError, match="path"):
        recipe(client, 42)
    with pytest.raises(TypeError, match="participant_id"):
        recipe(client, "/election", participant_id=7)
    with pytest.raises(TypeError, match="participant_id"):
        recipe(client, "/election", participant_id=b"bytes")
    with pytest.raises(ValueError, match="UTF-8"):
        recipe(client, "/election", participant_id="\ud800")
    with pytest.raises(TypeError, match="error_policy"):
        recipe(client, "/election", participant_id="x", error_policy="standard")
    with pytest.raises(TypeError, match="Client"):
        recipe("127.0.0.1:2181", "/election")
    ok = recipe(client, "/election", participant_id="x", error_policy=StandardErrorPolicy())
    assert "'/election'" in repr(ok) and "'x'" in repr(ok)


# --- LeaderLatch ------------------------------------------------------------------------


async def test_the_first_latch_leads_and_hands_over_when_it_closes(started, children_of) -> None:
    a, b = await started(2)
    first = LeaderLatch(a, "/latch", participant_id="a")
    second = LeaderLatch(b, "/latch", participant_id="b")
    await first.start()
    assert await first.wait_leader()
    await second.start()
    assert [(c.id, c.holds) for c in await second.participants()] == [
        ("a", True),
        ("b", False),
    ]
    assert first.has_leadership and not second.has_leadership
    assert first.fencing_token == (await a.exists(first.node)).czxid
    assert (await second.leader()) == aiocoord.Participant(
        "a", first.node, b"a", True, first.fencing_token
    )
    with pytest.raises(NotOwnerError):
        second.fence()
    await first.aclose()
    assert await second.wait_leader()
    assert not first.has_leadership and first.node is None
    assert second.fencing_token > 0
    await second.aclose()
    await second.aclose()  # idempotent
    assert await children_of(a, "/latch") == []
    assert await first.leader() is None


async def test_a_latch_drops_leadership_when_suspended_and_takes_it_back_on_reconnection(
    started, state_log
) -> None:
    (client,) = await started(1)
    latch = LeaderLatch(client, "/latch", participant_id="a")
    async with latch:
        await latch.wait_leader()
        node = latch.node
        changes = latch.changes()
        assert await anext(changes) is True
        drop_connection(client)
        assert await anext(changes) is False  # SUSPENDED: it may have lost the session
        assert await anext(changes) is True  # RECONNECTED: our node still heads the queue
        assert latch.node == node
    assert [leading async for leading in changes] == [False]  # closing ends the stream


async def test_a_latch_keeps_leadership_through_a_blip_under_the_session_policy(
    started, state_log
) -> None:
    (client,) = await started(1)
    log = state_log(client)
    latch = LeaderLatch(client, "/latch", participant_id="a", error_policy=SessionErrorPolicy())
    async with latch:
        await latch.wait_leader()
        changes = latch.changes()
        assert await anext(changes) is True
        drop_connection(client)
        await log.wait_for(ConnectionState.RECONNECTED)
        assert latch.has_leadership
        await latch.transaction().create("/written").commit()
    assert [leading async for leading in changes] == [False]  # only the close's


async def test_after_session_expiry_a_latch_rejoins_at_the_back(started, children_reach) -> None:
    a, b = await started(2)
    first = LeaderLatch(a, "/latch", participant_id="a")
    second = LeaderLatch(b, "/latch", participant_id="b")
    async with first, second:
        await first.wait_leader()
        old = first.node
        changes = first.changes()
        assert await anext(changes) is True
        await expire_session(a)
        assert await anext(changes) is False
        assert await second.wait_leader()
        await children_reach(b, "/latch", 2)  # the first one queued again
        people = await second.participants()
        assert [c.id for c in people] == ["b", "a"] and people[1].node != old
        assert not first.has_leadership
        await changes.aclose()


async def test_a_waiting_latch_whose_session_expires_queues_again(started, children_reach) -> None:
    a, b = await started(2)
    async with (
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        await first.wait_leader()
        old = second.node
        await expire_session(b)
        await children_reach(a, "/latch", 2)  # its old node went with the session
        people = await first.participants()
        assert [c.id for c in people] == ["a", "b"] and people[1].node != old
        await first.aclose()
        assert await second.wait_leader()


async def test_a_latch_whose_node_is_deleted_loses_leadership_and_rejoins(
    started, children_reach
) -> None:
    a, b = await started(2)
    first = LeaderLatch(a, "/latch", participant_id="a")
    second = LeaderLatch(b, "/latch", participant_id="b")
    async with first, second:
        await first.wait_leader()
        old = first.node
        lost = asyncio.create_task(first.wait_lost())
        await b.delete(old)
        await lost
        assert await second.wait_leader()
        await children_reach(b, "/latch", 2)
        people = await first.participants()
        assert [c.id for c in people] == ["b", "a"] and people[1].node != old


async def test_wait_leader_returns_false_on_timeout(started) -> None:
    a, b = await started(2)
    async with (
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        assert await first.wait_leader(timeout=10)
        assert await second.wait_leader(timeout=0.2) is False
        assert await second.wait_leader(timeout=0) is False
        with pytest.raises(NotOwnerError):
            await second.wait_lost()


async def test_closing_a_latch_wakes_its_waiters(started, children_of) -> None:
    a, b = await started(2)
    latch = LeaderLatch(a, "/latch", participant_id="a")
    with pytest.raises(RuntimeError, match="not started"):
        await latch.wait_leader()
    async with LeaderLatch(b, "/latch", participant_id="holder"):
        await latch.start()
        with pytest.raises(RuntimeError, match="starts once"):
            await latch.start()
        waiter = asyncio.create_task(latch.wait_leader())
        follower = asyncio.create_task(_collect(latch.changes()))
        await asyncio.sleep(0)
        await latch.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await waiter
        assert await follower == [False]
        with pytest.raises(RuntimeError, match="closed"):
            await latch.wait_leader()
        assert [leading async for leading in latch.changes()] == [False]
        assert [c.id for c in await latch.participants()] == ["holder"]
    assert await children_of(a, "/latch") == []


async def _collect(changes: AsyncIterator[bool]) -> list[bool]:
    return [leading async for leading in changes]


async def test_a_latch_ends_when_its_client_closes(client_factory, started) -> None:
    (other,) = await started(1)
    client = client_factory()
    await client.start()
    async with LeaderLatch(other, "/latch", participant_id="holder"):
        latch = LeaderLatch(client, "/latch", participant_id="a")
        await latch.start()
        waiter = asyncio.create_task(latch.wait_leader())
        await asyncio.sleep(0)
        await client.aclose()
        with pytest.raises(ClientClosedError):
            await waiter
        with pytest.raises(ClientClosedError):
            await _collect(latch.changes())
        await latch.aclose()


async def test_a_latch_background_failure_is_logged_and_raised_to_its_users(
    started, children_of, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await started(2)
    first = LeaderLatch(a, "/latch", participant_id="a")
    second = LeaderLatch(b, "/latch", participant_id="b")
    await first.start()
    await second.start()

    async def refused(path: str) -> list[str]:
        raise NoAuthError(path)

    b.children = refused  # type: ignore[method-assign]
    waiter = asyncio.create_task(second.wait_leader())
    await first.aclose()  # the second one reads the queue again: refused
    with pytest.raises(NoAuthError):
        await waiter
    with pytest.raises(NoAuthError):
        await _collect(second.changes())
    assert "failed" in repr(second)
    del b.children
    assert await children_of(a, "/latch") == []  # it left the queue
    await second.aclose()
    assert "aiocoord-leader-latch" in caplog.text
    caplog.clear()  # the error was logged, as it must be


# --- Curator on the same path -------------------------------------------------------------


class JavaPeer:
    """One CuratorLeader process: commands in, lines out (other lines kept for later)."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self.seen: list[str] = []

    async def expect(self, prefix: str) -> str:
        for line in self.seen:
            if line.startswith(prefix):
                self.seen.remove(line)
                return line
        while True:
            line = await read_line(self.proc)
            assert not line.startswith("VIOLATION"), line
            if line.startswith(prefix):
                return line
            self.seen.append(line)

    async def participants(self) -> list[str]:
        await send_line(self.proc, "participants")
        return (await self.expect("PARTICIPANTS")).split()[1:]


class PythonPeer:
    """An aiocoord participant driven like a Java one."""

    def __init__(self, client: aiocoord.Client, name: str, kind: str) -> None:
        self.name = name
        self.client = client
        self.kind = kind
        self.leading = asyncio.Event()
        self.quit = asyncio.Event()
        self.released = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _inside(self) -> None:
        try:
            await self.client.create("/inside", ephemeral=True)
        except NodeExistsError:
            pytest.fail(f"{self.name} leads while another leader is inside")
        self.leading.set()
        await self.quit.wait()
        await self.client.delete("/inside")
        self.released.set()

    async def run(self) -> None:
        if self.kind == "selector":
            election = LeaderElection(self.client, "/leader", participant_id=self.name)
            self.recipe: LeaderElection | LeaderLatch = election
            await election.run(self._inside, requeue=False)
            return
        latch = LeaderLatch(self.client, "/leader", participant_id=self.name)
        self.recipe = latch
        async with latch, contextlib.aclosing(latch.changes()) as changes:
            async for leading in changes:
                if leading:
                    await self._inside()
                    return

    async def participants(self) -> list[str]:
        return [c.id for c in await self.recipe.participants()]


async def _curator_group(
    kind: str, curator_classpath: str, zookeeper, client_factory, children_reach
) -> None:
    ns = zookeeper.namespace
    clients = [client_factory() for _ in range(3)]
    await asyncio.gather(*(c.start() for c in clients))
    watcher = clients[2]
    javas: list[JavaPeer] = []
    pythons = [PythonPeer(clients[i], f"py{i}", kind) for i in range(2)]
    try:
        # Join alternately, Java first: j0, py0, j1, py1.
        for i in range(2):
            proc = await start_curator(
                curator_classpath,
                "CuratorLeader",
                kind,
                zookeeper.connect_string,
                f"{ns}/leader",
                f"{ns}/inside",
                f"j{i}",
            )
            javas.append(JavaPeer(proc, f"j{i}"))
            await children_reach(watcher, "/leader", 2 * i + 1)
            python = pythons[i]
            python.task = asyncio.create_task(python.run())
            await children_reach(watcher, "/leader", 2 * i + 2)
        expected = ["j0", "py0", "j1", "py1"]
        for peer in (*javas, *pythons):
            assert await peer.participants() == expected, peer.name
        # Each leader in turn ends its leadership; the next in the queue takes over.
        peers = {p.name: p for p in (*javas, *pythons)}
        for name in expected:
            peer = peers[name]
            if isinstance(peer, JavaPeer):
                assert await peer.expect("LEADER ") == f"LEADER {name}"
                await send_line(peer.proc, "quit")
                assert await peer.expect("RELEASED ") == f"RELEASED {name}"
                assert await peer.expect("DONE") == "DONE"
                assert await peer.proc.wait() == 0
            else:
                await peer.leading.wait()
                peer.quit.set()
                assert peer.task is not None
                await peer.task
            # Nobody else led meanwhile: the others' lines and events come later.
            for other in peers.values():
                if other is not peer and isinstance(other, JavaPeer):
                    assert all(not line.startswith("LEADER") for line in other.seen)
        assert await watcher.exists("/inside") is None
    finally:
        for java in javas:
            await kill(java.proc)
        await stop(*(p.task for p in pythons if p.task is not None))


@pytest.mark.timeout(180)
async def test_curator_and_aiocoord_leader_selectors_agree_on_one_leader_in_turn(
    curator_classpath: str, zookeeper, client_factory, children_reach
) -> None:
    await _curator_group("selector", curator_classpath, zookeeper, client_factory, children_reach)


@pytest.mark.timeout(180)
async def test_curator_and_aiocoord_leader_latches_agree_on_one_leader_in_turn(
    curator_classpath: str, zookeeper, client_factory, children_reach
) -> None:
    await _curator_group("latch", curator_classpath, zookeeper, client_factory, children_reach)


async def test_a_latch_closes_even_if_a_step_took_its_cancellation(
    started, children_of, monkeypatch
) -> None:
    """An anyio scope cancelled at the moment a close cancels the latch's task can
    take that cancellation for its own (found by the docs' failover example: 1
    close in 10 hung). Simulated here by a wait that swallows it and says "lead"."""
    from aiocoord._recipes._kit._contenders import Contender

    a, b = await started(2)
    real_wait_turn = Contender.wait_turn
    waiting = asyncio.Event()

    async def swallowing_wait_turn(self: Contender, *args: object, **kwargs: object) -> bool:
        if self._client is not b:
            return await real_wait_turn(self, *args, **kwargs)  # type: ignore[arg-type]
        waiting.set()
        # Swallowed, without uncancel(): the task still counts it.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return True

    monkeypatch.setattr(Contender, "wait_turn", swallowing_wait_turn)
    async with LeaderLatch(a, "/swallowed", participant_id="a") as leader:
        assert await leader.wait_leader(timeout=10)
        follower = LeaderLatch(b, "/swallowed", participant_id="b")
        await follower.start()
        await waiting.wait()
        async with asyncio.timeout(10):
            await follower.aclose()
        assert not follower.has_leadership
    assert await children_of(a, "/swallowed") == []


async def test_a_latch_tells_its_listeners_and_streams_the_same_changes(started) -> None:
    a, b = await started(2)
    first = LeaderLatch(a, "/listened", participant_id="a")
    second = LeaderLatch(b, "/listened", participant_id="b")
    heard: list[bool] = []
    second.add_listener(heard.append)
    async with first, second:
        assert await first.wait_leader(timeout=10)
        async with second.changes() as changes:
            assert await anext(changes) is False  # now
            await first.aclose()
            assert await anext(changes) is True
        assert await second.wait_leader(timeout=0)
        second.remove_listener(heard.append)
    assert heard == [True]  # the close's False came after the listener was removed


async def test_an_election_tells_its_listeners_and_streams_whether_it_leads(started) -> None:
    """As a latch's: ``changes()`` and ``add_listener`` follow this participant's
    own leadership (a term starting and ending), not who leads."""
    (a,) = await started(1)
    election = LeaderElection(a, "/listened", participant_id="a")
    heard: list[bool] = []
    election.add_listener(heard.append)
    async with election.changes() as changes:
        assert await anext(changes) is False  # now
        async with election.hold():
            assert election.has_leadership
            assert await anext(changes) is True
            assert not await election.wait_lost(timeout=0)  # looks once: not lost
        assert await anext(changes) is False
    election.remove_listener(heard.append)
    assert heard == [True, False]
    with pytest.raises(aiocoord.NotOwnerError):
        await election.wait_lost(timeout=0)
