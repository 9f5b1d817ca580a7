"""The session manager under faults: restarts, drops, silence, expiry, failover."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from types import SimpleNamespace
from typing import cast

import anyio
import pytest
from _waiting import written

import aiocoord
from aiocoord import ConnectionLossError, ConnectionState, EventType, SessionExpiredError
from aiocoord._session import hold_reconnects
from aiocoord.testing import (
    ZooKeeperEnsemble,
    ZooKeeperServer,
    drop_connection,
    expire_session,
)
from aiocoord.testing._expire import _close_session

C, S, R, L = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.RECONNECTED,
    ConnectionState.LOST,
)

pytestmark = pytest.mark.timeout(120)


async def test_connect_then_close_leaves_nothing_behind(zookeeper) -> None:
    client = aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace)
    changes = client.state_changes()
    async with client:
        assert client.state is C and client.connected
        assert client.client_id is not None and client.session_timeout == 10.0
    assert client.closed and not client.connected
    assert [s async for s in changes] == [C]
    with pytest.raises(aiocoord.ClientClosedError):
        await client.get("/")


async def test_start_gives_up_when_no_server_answers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        client = aiocoord.connect(f"127.0.0.1:{port}")
        with pytest.raises(aiocoord.OperationTimeoutError) as caught:
            await client.start(timeout=0.5)
    assert client.closed
    # The real cause, not only "timed out": what the last attempt ran into.
    assert "ConnectionRefusedError" in str(caught.value)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


async def test_server_restart_suspends_at_once_and_resumes_the_same_session(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        log = state_log(client)
        session = client.session_id
        await client.create("/mine", ephemeral=True)
        await private_zookeeper.stop()
        # Noticed from the closed socket, not from a heartbeat (which takes
        # two thirds of the 10 s session timeout); the bound leaves room for a
        # loaded machine. `make bench` measures the actual delays.
        async with asyncio.timeout(3.0):
            await log.wait_for(S)
        await private_zookeeper.start()
        async with asyncio.timeout(5.0):
            await log.wait_for(R)
        assert log.states == [S, R]
        assert client.session_id == session
        stat = await client.exists("/mine")
        assert stat is not None and stat.ephemeral_owner == session


async def test_a_rebuilt_server_on_the_same_address_is_rejoined_with_a_new_session(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    """The rebuilt server has never seen the client's last zxid and would refuse
    to resume its session; once that session is lost, the client starts a new
    one there, promptly (it used to keep offering the old zxid and stay LOST)."""
    async with aiocoord.connect(private_zookeeper.connect_string, session_timeout=2) as client:
        log = state_log(client)
        for i in range(20):
            await client.create(f"/before-{i}")
        old_session = client.session_id
        await private_zookeeper.stop()
        private_zookeeper.wipe()
        async with asyncio.timeout(20):
            await log.wait_for(ConnectionState.LOST)  # the rebuild outlasts the session
        await private_zookeeper.start()
        # The bound is the 2 s plus room for a loaded machine; the client
        # retries every 0.5 s at most.
        async with asyncio.timeout(5):
            await log.wait_for(ConnectionState.CONNECTED)
        assert client.session_id not in (0, old_session)
        assert await client.exists("/before-0") is None  # it really is a new server
        await client.create("/after")


async def test_start_timeout_bounds_async_with_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with anyio.fail_after(8), pytest.raises(aiocoord.OperationTimeoutError) as caught:
            async with aiocoord.connect(f"127.0.0.1:{port}", start_timeout=0.3):
                pass
    assert "within 0.3 s" in str(caught.value)


async def test_request_made_while_suspended_waits_for_the_session(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        log = state_log(client)
        await client.create("/n", b"v")
        await private_zookeeper.stop()
        await log.wait_for(S)
        pending = asyncio.create_task(client.get("/n"))
        await asyncio.sleep(0)
        assert not pending.done()
        await private_zookeeper.start()
        data, _stat = await asyncio.wait_for(pending, 30)
        assert data == b"v"


async def test_request_in_flight_when_the_connection_drops_is_not_resent(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        log = state_log(client)
        await client.create("/seq")
        private_zookeeper.pause()
        try:
            create = asyncio.create_task(client.create("/seq/n-", sequential=True))
            await written(client)  # the request left
            drop_connection(client)
            with pytest.raises(ConnectionLossError) as info:
                await create
            assert info.value.sent
        finally:
            private_zookeeper.resume()
        await log.wait_for(R)
        # Whatever the server did with it, the client never sent it twice.
        assert len(await client.children("/seq")) <= 1


async def test_protected_create_finds_its_node_after_a_lost_reply(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        log = state_log(client)
        await client.create("/p")
        for round_ in range(3):
            private_zookeeper.pause()
            try:
                create = asyncio.create_task(
                    client.create("/p/lock-", ephemeral=True, sequential=True, protected=True)
                )
                await written(client)
                drop_connection(client)
            finally:
                private_zookeeper.resume()
            made = await asyncio.wait_for(create, 10)
            await log.wait_for(R, count=round_ + 1)
            children = await client.children("/p")
            assert made.rsplit("/", 1)[1] in children
            await client.delete(made)
            assert await client.children("/p") == []


async def test_silent_server_is_detected_by_the_read_timeout(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string, session_timeout=3) as client:
        log = state_log(client)
        session = client.session_id
        private_zookeeper.pause()
        try:
            async with asyncio.timeout(4.5):  # read timeout: 2 s, checked twice a second
                await log.wait_for(S)
        finally:
            private_zookeeper.resume()
        async with asyncio.timeout(10):
            await log.wait_for(R)
        assert client.session_id == session


async def test_expired_session_reports_lost_then_a_new_session(
    coord: aiocoord.Client, state_log
) -> None:
    log = state_log(coord)
    old = coord.session_id
    await coord.create("/eph", ephemeral=True)
    _stat, watch = await coord.watch_exists("/eph")
    await expire_session(coord)
    # As a real expiry: the client is not let back in between (no R).
    assert log.states == [S, L, C]
    assert coord.session_id not in (0, old)
    # The node goes with the session. The server's watches belonged to the
    # connection the helper's handshake dropped, and the client was not back
    # when the session ended, so nobody is told of the deletion: the watch
    # ends with the session, and no watch is left pending.
    with pytest.raises(SessionExpiredError):
        await watch
    assert coord.pending_watches == 0
    assert await coord.exists("/eph") is None


async def test_expire_session_reaches_a_live_server_when_the_first_is_down(
    coord: aiocoord.Client, state_log
) -> None:
    # What a client between connections looks like to the helper (it reports
    # no server) while the first server it knows is down: the helper must go
    # on to the next instead of knocking at the dead one until it times out.
    log = state_log(coord)
    old = coord.session_id
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        between = SimpleNamespace(
            client_id=coord.client_id,
            connected_to=None,
            hosts=[dead.getsockname()[:2], *coord.hosts],
            state_changes=coord.state_changes,
            _engine=coord._engine,
        )
        await expire_session(cast(aiocoord.Client, between), timeout=15)
    assert L in log.states
    assert coord.session_id not in (0, old)


async def test_a_client_held_off_stays_off_until_released(
    coord: aiocoord.Client, state_log
) -> None:
    # What expire_session relies on: its handshake drops the client, and the
    # client must not reconnect (and take its session back) before the close.
    # Unheld, the client is back within a millisecond, long before the close
    # below, and reports RECONNECTED first.
    log = state_log(coord)
    session_id, password = coord.client_id or (0, b"")
    host, port = coord.connected_to or coord.hosts[0]
    with hold_reconnects(coord):
        drop_connection(coord)
        await log.wait_for(S)
        assert await _close_session(host, port, session_id, password)
    async with asyncio.timeout(15):
        await log.wait_for(C)
    assert log.states == [S, L, C]


async def test_session_expires_on_the_client_clock_while_the_server_is_down(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string, session_timeout=2) as client:
        log = state_log(client)
        old = client.session_id
        await private_zookeeper.stop()
        queued = asyncio.create_task(client.get("/"))
        async with asyncio.timeout(10):
            await log.wait_for(L)
        with pytest.raises(SessionExpiredError):
            await queued
        await private_zookeeper.start()
        async with asyncio.timeout(15):
            await log.wait_for(C, count=1)
        assert log.states == [S, L, C]
        assert client.session_id not in (0, old)


async def test_state_changes_iterator_sees_every_transition_in_order(
    private_zookeeper: ZooKeeperServer,
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        seen: list[ConnectionState] = []
        async with client.state_changes() as changes:
            for _ in range(2):
                drop_connection(client)
                async for state in changes:
                    seen.append(state)
                    if state is R:
                        break
            await expire_session(client)
            async for state in changes:
                seen.append(state)
                if state is C:
                    break
        assert seen[:4] == [S, R, S, R]
        assert seen[-2:] == [L, C]


async def test_watches_of_every_kind_survive_a_reconnect(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as watcher,
        aiocoord.connect(private_zookeeper.connect_string) as writer,
    ):
        log = state_log(watcher)
        await writer.create("/data", b"x")
        await writer.create("/gone", b"x")
        await writer.create("/parent")
        _d, _s, data_watch = await watcher.watch_data("/data")
        _d, _s, delete_watch = await watcher.watch_data("/gone")
        _stat, exist_watch = await watcher.watch_exists("/born")
        _names, _s, child_watch = await watcher.watch_children("/parent")
        drop_connection(watcher)
        await log.wait_for(R)
        await writer.set("/data", b"y")
        await writer.delete("/gone")
        await writer.create("/born")
        await writer.create("/parent/kid")
        async with asyncio.timeout(15):
            assert (await data_watch).type is EventType.CHANGED
            assert (await delete_watch).type is EventType.DELETED
            assert (await exist_watch).type is EventType.CREATED
            assert (await child_watch).type is EventType.CHILD


@pytest.mark.ensemble
async def test_failover_keeps_the_session_and_its_watches(state_log) -> None:
    async with (
        ZooKeeperEnsemble(3) as ensemble,
        aiocoord.connect(ensemble.connect_string) as client,
        aiocoord.connect(ensemble.connect_string) as writer,
    ):
        log = state_log(client)
        session = client.session_id
        await client.create("/e", ephemeral=True)
        await writer.create("/w", b"1")
        await client.sync("/w")  # its server may be a follower that has not seen /w yet
        _d, _s, watch = await client.watch_data("/w")
        host = client.connected_to
        assert host is not None
        member = next(m for m in ensemble.members if m.port == host[1])
        await member.kill()
        async with asyncio.timeout(20):
            await log.wait_for(R)
        assert client.session_id == session
        assert client.connected_to != host
        await writer.retry(writer.set, "/w", b"2")
        async with asyncio.timeout(10):
            assert (await watch).type is EventType.CHANGED
        assert await client.exists("/e") is not None


@pytest.mark.ensemble
async def test_changes_made_during_an_outage_fire_watches_on_reconnect(state_log) -> None:
    async with ZooKeeperEnsemble(3) as ensemble:
        lonely, *others = ensemble.members
        rest = ",".join(m.connect_string for m in others)
        async with (
            aiocoord.connect(lonely.connect_string) as client,
            aiocoord.connect(rest) as writer,
        ):
            log = state_log(client)
            await writer.create("/w", b"1")
            await writer.create("/x")
            await client.sync("/w")
            _d, _s, data_watch = await client.watch_data("/w")
            _d, _s, delete_watch = await client.watch_data("/x")
            await lonely.stop()
            await log.wait_for(S)
            await writer.set("/w", b"2")  # while the client cannot hear about it
            await writer.delete("/x")
            await lonely.start()
            async with asyncio.timeout(20):
                await log.wait_for(R)
                assert (await data_watch).type is EventType.CHANGED
                assert (await delete_watch).type is EventType.DELETED


async def test_repeated_server_kills_resume_the_same_session_every_time(
    private_zookeeper: ZooKeeperServer,
) -> None:
    """A restarting server can accept a connection and not answer its handshake;
    the client must give up on it and retry, not wait out the session."""
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        session = client.session_id
        for _ in range(8):
            async with client.state_changes() as changes:
                await private_zookeeper.kill()
                async for state in changes:
                    if state is S:
                        break
                await private_zookeeper.start()
                async with asyncio.timeout(8):  # session timeout: 10 s
                    async for state in changes:
                        assert state is R, state
                        break
        assert client.session_id == session


async def test_requests_fail_within_the_request_timeout_while_zookeeper_is_down(
    private_zookeeper: ZooKeeperServer, state_log
) -> None:
    """A web handler must get an error it can turn into a 503, not hang (the
    outer fail_after only catches a hang: the call itself must raise first)."""
    async with aiocoord.connect(
        private_zookeeper.connect_string, session_timeout=10, request_timeout=1
    ) as client:
        counter = aiocoord.AtomicLong(client, "/hits")
        await counter.increment()
        mutex = aiocoord.Mutex(client, "/lock")
        log = state_log(client)
        await private_zookeeper.kill()
        # Once the client knows: a request sent just before that would fail as
        # ConnectionLossError(sent=True), which is right but not this test's case.
        await log.wait_for(ConnectionState.SUSPENDED)
        calls = {
            "get": lambda: client.get("/hits"),
            "increment": counter.increment,
            "acquire": mutex.acquire,
        }
        for name, call in calls.items():
            with anyio.fail_after(8):
                with pytest.raises(aiocoord.NoConnectionError) as caught:
                    await call()
            error = caught.value
            assert isinstance(error, ConnectionLossError) and not error.sent, name
            assert error.waited == 1 and "within 1 s" in str(error), name
            # Why: the last attempt's failure, in the message and as the cause.
            assert isinstance(error.__cause__, OSError | ConnectionLossError), name
        with (
            client.request_timeout(0.2),
            anyio.fail_after(8),
            pytest.raises(aiocoord.NoConnectionError) as caught,
        ):
            await client.exists("/hits")
        assert caught.value.waited == 0.2
        await private_zookeeper.start()
        assert await client.wait_connected(timeout=20)
        assert (await counter.get()).post_value == 1


async def test_a_change_stream_rides_out_an_outage_longer_than_the_request_timeout(
    private_zookeeper: ZooKeeperServer,
) -> None:
    async with aiocoord.connect(
        private_zookeeper.connect_string, session_timeout=10, request_timeout=0.3
    ) as client:
        await client.create("/flag", b"1")
        await private_zookeeper.stop()
        changes = client.data_changes("/flag")
        # Its reads find no connection (three request timeouts pass here), yet
        # the stream keeps waiting instead of failing.
        with anyio.move_on_after(1.0) as scope:
            await anext(changes)
        assert scope.cancelled_caught
        await changes.aclose()
        await private_zookeeper.start()
        async with contextlib.aclosing(client.data_changes("/flag")) as again:
            with anyio.fail_after(20):
                snapshot = await anext(again)
        assert snapshot is not None and snapshot[0] == b"1"


async def test_requests_made_while_the_client_closes_fail_as_closed(zookeeper) -> None:
    """Not SESSIONEXPIRED: a recipe woken by the close must see the close as such."""
    client = aiocoord.connect(zookeeper.connect_string, namespace=zookeeper.namespace)
    await client.start()
    in_flight = [asyncio.create_task(client.exists(f"/n{i}")) for i in range(50)]
    await asyncio.sleep(0)  # every request is on the wire
    closing = asyncio.create_task(client.aclose())
    await asyncio.sleep(0)  # closeSession is on the wire behind them
    with pytest.raises(aiocoord.ClientClosedError):
        await client.exists("/late")
    await closing
    for outcome in await asyncio.gather(*in_flight, return_exceptions=True):
        assert outcome is None or isinstance(outcome, aiocoord.ClientClosedError)


async def test_requests_pinned_to_an_ended_session_are_never_sent(coord) -> None:
    """A queued delete of a node with a shared name must not go out in the next
    session, where another client may have made that name meanwhile."""
    old = coord.session_id
    await expire_session(coord)
    assert coord.session_id != old
    with coord.only_in_session(old):
        with pytest.raises(SessionExpiredError):
            await coord.create("/pinned")
        with pytest.raises(SessionExpiredError):
            await coord.transaction().create("/pinned").commit()
        with pytest.raises(SessionExpiredError):
            await coord.pipeline().create("/pinned").execute()
    assert await coord.exists("/pinned") is None
    with coord.only_in_session(coord.session_id):
        await coord.create("/pinned")
