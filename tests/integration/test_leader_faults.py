"""Every #29 operation under faults: observe(), proclaim(), resign(requeue=True
and False), hand_over(to=...) and a priority take-over, each through (a) a
session expiry and (b) a server restart.

What a Curator or etcd user expects, checked in every test:

- never two leaders at once, as the server sees it: every leader writes its
  fencing token to a store node in a transaction guarded by its fence, and
  the writes ZooKeeper applied carry tokens that never go down (a deposed
  leader's write is refused); a new leader's token is above every earlier
  leader's;
- an observer's stream converges to the true leader (or None) after the
  fault, and never shows what a leader proclaimed in a term other than the
  one it reports (proclaimed data names its term's token);
- a hand-over whose leader's session expires mid-way completes or leaves a
  well-defined leader, never a stuck election;
- a proclaim during a disconnection lands or raises a typed error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ConnectionState,
    CoordinationError,
    LeaderElection,
    LeaderLatch,
    LeaderObserver,
    LeadershipLostError,
    NotOwnerError,
    Participant,
    SessionErrorPolicy,
)
from aiocoord.testing import ZooKeeperServer, expire_session

pytestmark = pytest.mark.timeout(120)


Holder = LeaderLatch | LeaderElection


class Store:
    """A node every leader writes its fencing token to, guarded by its fence: the
    server's own account of who led, in the order it applied the writes."""

    def __init__(self, client: aiocoord.Client, path: str = "/store") -> None:
        self.client = client
        self.path = path
        self.applied: list[tuple[int, int, str]] = []
        """(mzxid, token, participant id) of every write the server applied."""
        self.refused = 0

    async def create(self) -> None:
        await self.client.create(self.path, b"0", make_parents=True)

    async def write(self, holder: Holder) -> bool:
        """Write ``holder``'s token under its fence: True if applied, False if the
        fence refused it (a typed loss: the term is over)."""
        try:
            token = holder.fencing_token
            transaction = holder.transaction().set(self.path, str(token).encode())
            (stat,) = await transaction.commit()
        except (LeadershipLostError, NotOwnerError):
            self.refused += 1
            return False
        assert isinstance(stat, aiocoord.Stat)
        self.applied.append((stat.mzxid, token, holder.participant_id))
        return True

    def check(self) -> None:
        """Writes applied in zxid order carry tokens that never go down, and each
        token is one participant's."""
        ordered = sorted(self.applied)
        tokens = [token for _zxid, token, _who in ordered]
        assert tokens == sorted(tokens), f"a deposed leader's write got through: {ordered}"
        owners: dict[int, set[str]] = {}
        for _zxid, token, who in ordered:
            owners.setdefault(token, set()).add(who)
        assert all(len(who) == 1 for who in owners.values()), owners


class Watch:
    """An observer's stream, read in the background: everything it yielded."""

    def __init__(self, client: aiocoord.Client, path: str) -> None:
        self.observer = LeaderObserver(client, path)
        self.seen: list[Participant | None] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watch:
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.check_terms()

    async def _read(self) -> None:
        async with self.observer.changes() as changes:
            async for leader in changes:
                self.seen.append(leader)
                self._changed.set()

    async def reaches(self, wanted: str | None, data: bytes | None = None) -> Participant | None:
        """Wait until the stream's latest value is ``wanted`` (an id; with ``data``)."""
        async with asyncio.timeout(EVENT_TIMEOUT):
            while True:
                if self.seen:
                    last = self.seen[-1]
                    got = None if last is None else last.id
                    if got == wanted and (data is None or (last and last.data == data)):
                        return last
                self._changed.clear()
                await self._changed.wait()

    async def converges(self) -> Participant | None:
        """Wait until the stream's latest value is the leader the server says leads
        now (read again after every value, so a leader that changes meanwhile counts)."""
        async with asyncio.timeout(EVENT_TIMEOUT):
            while True:
                truth = await self.observer.leader()
                if self.seen and self.seen[-1] == truth:
                    return truth
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):  # the truth may move without an event here
                        await self._changed.wait()

    def check_terms(self) -> None:
        """No value shows data proclaimed in another term than the one it reports."""
        for leader in self.seen:
            if leader is not None and b"@" in leader.data:
                assert leader.data == proclaimed(leader.id, leader.fencing_token), self.seen


def ident(leader: Participant | None) -> str | None:
    return None if leader is None else leader.id


def proclaimed(participant_id: str, token: int | None) -> bytes:
    """What a leader proclaims in a term: its id and its term's token."""
    return f"{participant_id}@{token}".encode()


async def proclaim(holder: Holder) -> bytes:
    data = proclaimed(holder.participant_id, holder.fencing_token)
    await holder.proclaim(data)
    return data


async def leads(*latches: LeaderLatch) -> LeaderLatch:
    """Wait until one of ``latches`` leads; that one."""
    waits = {
        asyncio.create_task(latch.wait_leader(timeout=EVENT_TIMEOUT)): latch for latch in latches
    }
    try:
        done, _pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
    for task in done:
        if not task.cancelled() and task.exception() is None and task.result():
            return waits[task]
    raise AssertionError("nobody led in time")


async def children_reach(client: aiocoord.Client, path: str, count: int) -> None:
    async with asyncio.timeout(EVENT_TIMEOUT), client.children_changes(path) as changes:
        async for names in changes:
            if names is not None and len(names) == count:
                return


class Terms:
    """A LeaderElection participant running terms in ``run()`` in a task: it
    writes its token to the store at the start of every term."""

    def __init__(
        self,
        client: aiocoord.Client,
        name: str,
        store: Store,
        *,
        requeue: bool = True,
        **kw: object,
    ) -> None:
        self.election = LeaderElection(client, "/election", participant_id=name, **kw)  # type: ignore[arg-type]
        self.name = name
        self.store = store
        self.requeue = requeue
        self.leading = asyncio.Event()
        self.tokens: list[int] = []
        """Each term's fencing token, in order."""
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.election.run(self._term, requeue=self.requeue))

    async def _term(self) -> None:
        self.tokens.append(self.election.fencing_token)
        try:
            await self.store.write(self.election)
            self.leading.set()
            self.changed.set()
            await asyncio.Event().wait()
        finally:
            self.leading.clear()
            self.changed.set()

    async def wait(self, predicate: Callable[[], bool], what: str) -> None:
        async with asyncio.timeout(EVENT_TIMEOUT):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        assert predicate(), what

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


@contextlib.asynccontextmanager
async def running(*terms: Terms) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for term in terms:
            await term.stop()


def grows(tokens: list[int]) -> None:
    """Terms of different leaders, in the order they led, have growing tokens."""
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens


# --- (a) session expiry -------------------------------------------------------------------


async def test_observe_and_proclaim_through_the_leaders_session_expiry(started) -> None:
    a, b, watcher = await started(3)
    store = Store(watcher)
    await store.create()
    async with (
        Watch(watcher, "/latch") as watch,
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        token = first.fencing_token
        assert await store.write(first)
        await watch.reaches("a", await proclaim(first))
        await expire_session(watcher)  # the observer's own session first
        assert ident(await watch.converges()) == first.participant_id
        await expire_session(a)  # now the leader's: b takes over, a queues again
        assert await second.wait_leader(timeout=EVENT_TIMEOUT)
        assert second.fencing_token > token
        # a's term is over: its proclaim and its fenced write are refused, typed.
        with pytest.raises((LeadershipLostError, NotOwnerError)):
            await proclaim(first)
        await watch.reaches("b", b"b")  # not a's proclaimed data
        assert await store.write(second)
        await watch.reaches("b", await proclaim(second))
        await children_reach(watcher, "/latch", 2)
        assert not first.has_leadership
        assert await watch.converges() is not None
    store.check()


async def test_a_resign_racing_its_session_expiry_leaves_one_leader(started) -> None:
    a, b, watcher = await started(3)
    store = Store(watcher)
    await store.create()
    async with (
        Watch(watcher, "/latch") as watch,
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        token = first.fencing_token
        await store.write(first)
        expiry = asyncio.create_task(expire_session(a))
        with contextlib.suppress(NotOwnerError):  # the expiry may have ended the term first
            await first.resign()
        await expiry
        assert await second.wait_leader(timeout=EVENT_TIMEOUT)
        assert second.fencing_token > token
        assert not first.has_leadership
        assert not await store.write(first)
        assert await store.write(second)
        await children_reach(watcher, "/latch", 2)  # a queued again, behind b
        assert [p.id for p in await second.participants()] == ["b", "a"]
        await watch.reaches("b")
        assert ident(await watch.converges()) == second.participant_id
    store.check()


async def test_a_leaving_resign_after_its_session_expired_is_refused_and_the_next_leads(
    started,
) -> None:
    a, b, watcher = await started(3)
    store = Store(watcher)
    await store.create()
    x = Terms(a, "x", store, requeue=False)
    y = Terms(b, "y", store)
    async with Watch(watcher, "/election") as watch, running(x, y):
        x.start()
        await x.wait(x.leading.is_set, "x leads")
        y.start()
        await children_reach(watcher, "/election", 2)
        await expire_session(a)
        # x's term is over (its run() ends: no requeue): a resign now is refused, typed.
        with pytest.raises((LeadershipLostError, NotOwnerError)):
            await x.election.resign(requeue=False)
        assert x.task is not None
        with pytest.raises(LeadershipLostError):
            await x.task
        await y.wait(y.leading.is_set, "y leads")
        grows(x.tokens + y.tokens)
        # And a leaving resign from y, inside its term, with x's node long gone.
        await y.election.resign(requeue=False)
        await watch.reaches(None)
        assert await watch.converges() is None
    store.check()


async def test_a_hand_over_whose_leader_expires_mid_way_never_wedges(started) -> None:
    a, b, c, watcher = await started(4)
    store = Store(watcher)
    await store.create()
    async with (
        Watch(watcher, "/latch") as watch,
        LeaderLatch(a, "/latch", participant_id="a") as first,
        LeaderLatch(b, "/latch", participant_id="b") as second,
        LeaderLatch(c, "/latch", participant_id="c") as third,
    ):
        assert await first.wait_leader(timeout=EVENT_TIMEOUT)
        await children_reach(watcher, "/latch", 3)
        token = first.fencing_token
        await store.write(first)
        # The leader's session goes while it hands over: before or after the record.
        handing = asyncio.create_task(first.hand_over(to="c", timeout=EVENT_TIMEOUT))
        await expire_session(a)
        with contextlib.suppress(NotOwnerError, LeadershipLostError):
            await handing
        leader = await leads(second, third)  # well-defined: c, or b if the record never landed
        assert leader.fencing_token > token
        assert await store.write(leader)
        await watch.reaches(leader.participant_id)
        assert ident(await watch.converges()) == leader.participant_id
        # Not stuck: the election goes on from here.
        others = [latch for latch in (first, second, third) if latch is not leader]
        await children_reach(watcher, "/latch", 3)
        token = leader.fencing_token
        await leader.resign()
        nxt = await leads(*others)
        assert nxt.fencing_token > token
        assert await store.write(nxt)
        assert not await store.write(leader)
    store.check()


async def test_a_priority_participant_takes_over_again_after_its_session_expires(
    started,
) -> None:
    a, b, c, watcher = await started(4)
    store = Store(watcher)
    await store.create()
    low = Terms(a, "low", store, priority=1)
    plain = Terms(b, "plain", store)
    high = Terms(c, "high", store, priority=5)
    async with Watch(watcher, "/election") as watch, running(low, plain, high):
        low.start()
        await low.wait(low.leading.is_set, "low leads")
        plain.start()
        await children_reach(watcher, "/election", 2)
        # The take-over and the old leader's session expiry at once.
        high.start()
        await expire_session(a)
        await high.wait(high.leading.is_set, "high leads")
        await watch.reaches("high")
        # Now the new leader's session expires: it queues again at the back, and
        # takes over once more from whoever led meanwhile.
        first_term = high.tokens[-1]
        await expire_session(c)
        await high.wait(lambda: len(high.tokens) >= 2 and high.leading.is_set(), "high again")
        assert high.tokens[-1] > first_term
        await watch.reaches("high")
        assert ident(await watch.converges()) == high.name
        ordered = sorted(
            [(t, "low") for t in low.tokens]
            + [(t, "plain") for t in plain.tokens]
            + [(t, "high") for t in high.tokens]
        )
        grows([t for t, _ in ordered])
        assert not low.leading.is_set() and not plain.leading.is_set()
    store.check()


# --- (b) a server restart ---------------------------------------------------------------------


async def restart(server: ZooKeeperServer, log, during: Callable[[], object] | None = None) -> None:  # type: ignore[no-untyped-def]
    """Stop the server, wait for the client behind ``log`` to see it, run ``during``,
    start the server again and wait for a reconnection."""
    reconnects = log.states.count(ConnectionState.RECONNECTED)
    await server.stop()
    await log.wait_for(ConnectionState.SUSPENDED)
    if during is not None:
        during()
    await server.start()
    async with asyncio.timeout(EVENT_TIMEOUT):
        await log.wait_for(ConnectionState.RECONNECTED, count=reconnects + 1)


@contextlib.asynccontextmanager
async def clients(
    server: ZooKeeperServer, n: int, **kw: object
) -> AsyncIterator[list[aiocoord.Client]]:
    """``n`` clients that ride out the restart (SessionErrorPolicy, unless told)."""
    kw.setdefault("error_policy", SessionErrorPolicy())
    async with contextlib.AsyncExitStack() as stack:
        made = [
            await stack.enter_async_context(aiocoord.connect(server.connect_string, **kw))  # type: ignore[arg-type]
            for _ in range(n)
        ]
        yield made


async def test_a_proclaim_during_an_outage_lands_or_raises_typed_and_observers_follow(
    private_zookeeper, state_log
) -> None:
    async with clients(private_zookeeper, 3) as (a, b, watcher):
        log = state_log(a)
        store = Store(watcher)
        await store.create()
        async with (
            Watch(watcher, "/latch") as watch,
            LeaderLatch(a, "/latch", participant_id="a") as first,
            LeaderLatch(b, "/latch", participant_id="b"),
        ):
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            await store.write(first)
            await watch.reaches("a")
            pending: list[asyncio.Task[bytes]] = []
            await restart(
                private_zookeeper, log, lambda: pending.append(asyncio.create_task(proclaim(first)))
            )
            try:
                data: bytes | None = await pending[0]
            except CoordinationError:
                data = None  # typed (a connection loss, a timeout): nothing landed
            if data is None:
                data = await proclaim(first)  # the term lived on (SessionErrorPolicy)
            await watch.reaches("a", data)
            assert ident(await watch.converges()) == first.participant_id
            assert await store.write(first)
    store.check()


async def test_a_latch_that_leads_again_after_a_restart_does_not_advertise_its_old_proclaim(
    private_zookeeper, state_log
) -> None:
    # The standard policy: the outage (SUSPENDED) ends the term; the session and
    # the node survive the restart, so the latch leads again on the same node:
    # a new term, in which nothing was proclaimed yet.
    async with clients(private_zookeeper, 2, error_policy=aiocoord.StandardErrorPolicy()) as (
        a,
        watcher,
    ):
        log = state_log(a)
        async with (
            Watch(watcher, "/latch") as watch,
            LeaderLatch(a, "/latch", participant_id="a") as first,
        ):
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            node = first.node
            old = await proclaim(first)
            await watch.reaches("a", old)
            lost = asyncio.Event()
            first.add_listener(lambda leading: None if leading else lost.set())
            await restart(private_zookeeper, log)
            async with asyncio.timeout(EVENT_TIMEOUT):
                await lost.wait()
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            assert first.node == node  # the same node leads again
            await watch.reaches("a", b"a")
            assert ident(await watch.converges()) == first.participant_id
            assert (await first.leader()).data == b"a"  # type: ignore[union-attr]


async def test_resign_during_an_outage_ends_the_term_at_once_and_completes_after(
    private_zookeeper, state_log
) -> None:
    async with clients(private_zookeeper, 3) as (a, b, watcher):
        log = state_log(a)
        store = Store(watcher)
        await store.create()
        async with (
            Watch(watcher, "/latch") as watch,
            LeaderLatch(a, "/latch", participant_id="a") as first,
            LeaderLatch(b, "/latch", participant_id="b") as second,
        ):
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            token = first.fencing_token
            await store.write(first)
            resigning: list[asyncio.Task[None]] = []
            await restart(
                private_zookeeper,
                log,
                lambda: resigning.append(asyncio.create_task(first.resign())),
            )
            assert not first.has_leadership  # dropped at once, before the node went
            await resigning[0]
            assert await second.wait_leader(timeout=EVENT_TIMEOUT)
            assert second.fencing_token > token
            assert not await store.write(first)
            assert await store.write(second)
            await children_reach(watcher, "/latch", 2)  # a queued again
            await watch.reaches("b")
            assert ident(await watch.converges()) == second.participant_id
    store.check()


async def test_a_leaving_resign_during_an_outage_ends_run_and_the_next_leads(
    private_zookeeper, state_log
) -> None:
    async with clients(private_zookeeper, 3) as (a, b, watcher):
        log = state_log(a)
        store = Store(watcher)
        await store.create()
        x = Terms(a, "x", store)
        y = Terms(b, "y", store)
        async with Watch(watcher, "/election") as watch, running(x, y):
            x.start()
            await x.wait(x.leading.is_set, "x leads")
            y.start()
            await children_reach(watcher, "/election", 2)
            resigning: list[asyncio.Task[None]] = []
            await restart(
                private_zookeeper,
                log,
                lambda: resigning.append(asyncio.create_task(x.election.resign(requeue=False))),
            )
            await resigning[0]
            assert x.task is not None
            async with asyncio.timeout(EVENT_TIMEOUT):
                await x.task  # run() returned: x left
            await y.wait(y.leading.is_set, "y leads")
            grows(x.tokens + y.tokens)
            await children_reach(watcher, "/election", 1)
            await watch.reaches("y")
            assert ident(await watch.converges()) == y.name
    store.check()


async def test_a_hand_over_during_an_outage_completes_after_it(
    private_zookeeper, state_log
) -> None:
    async with clients(private_zookeeper, 4) as (a, b, c, watcher):
        log = state_log(a)
        store = Store(watcher)
        await store.create()
        async with (
            Watch(watcher, "/latch") as watch,
            LeaderLatch(a, "/latch", participant_id="a") as first,
            LeaderLatch(b, "/latch", participant_id="b") as second,
            LeaderLatch(c, "/latch", participant_id="c") as third,
        ):
            assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            await children_reach(watcher, "/latch", 3)
            token = first.fencing_token
            await store.write(first)
            handing: list[asyncio.Task[None]] = []
            await restart(
                private_zookeeper,
                log,
                lambda: handing.append(
                    asyncio.create_task(first.hand_over(to="c", timeout=EVENT_TIMEOUT))
                ),
            )
            await handing[0]
            assert await third.wait_leader(timeout=EVENT_TIMEOUT)
            assert not second.has_leadership and not first.has_leadership
            assert third.fencing_token > token
            assert not await store.write(first)
            assert await store.write(third)
            await watch.reaches("c")
            assert ident(await watch.converges()) == third.participant_id
    store.check()


async def test_a_priority_participant_that_joins_during_an_outage_takes_over_after_it(
    private_zookeeper, state_log
) -> None:
    async with clients(private_zookeeper, 4) as (a, b, c, watcher):
        log = state_log(c)
        store = Store(watcher)
        await store.create()
        low = Terms(a, "low", store, priority=1)
        plain = Terms(b, "plain", store)
        high = Terms(c, "high", store, priority=5)
        async with Watch(watcher, "/election") as watch, running(low, plain, high):
            low.start()
            await low.wait(low.leading.is_set, "low leads")
            plain.start()
            await children_reach(watcher, "/election", 2)
            await restart(private_zookeeper, log, high.start)  # joins once reconnected
            await high.wait(high.leading.is_set, "high leads")
            assert not low.leading.is_set()
            assert not plain.leading.is_set() and plain.tokens == []
            grows(low.tokens + high.tokens)
            await watch.reaches("high")
            assert ident(await watch.converges()) == high.name
    store.check()
