"""GroupMember: Curator's group membership, its view of the group, and its faults."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from _curator import finish, read_line, send_line, start_curator
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    ConnectionState,
    DataTooLargeError,
    EventType,
    GroupMember,
    InvalidPathError,
    MemberIdInUseError,
)
from aiocoord._session import _zk
from aiocoord._session._connection import open_connection
from aiocoord.testing import TcpProxy, ZooKeeperTarget, drop_connection, expire_session

pytestmark = pytest.mark.timeout(60)


Members = dict[str, bytes]


def by_id(participants: list[aiocoord.Participant]) -> Members:
    """A group's participants as ``{id: data}``, checking they all hold their membership."""
    assert all(p.holds and p.node.endswith(f"/{p.id}") for p in participants), participants
    return {p.id: p.data for p in participants if p.id is not None}


async def reaches(
    changes: AsyncIterator[list[aiocoord.Participant]], wanted: Members
) -> list[Members]:
    """Read ``changes`` until it yields ``wanted``; every snapshot read, in order."""
    seen: list[Members] = []
    async with asyncio.timeout(EVENT_TIMEOUT):
        async for participants in changes:
            members = by_id(participants)
            seen.append(members)
            if members == wanted:
                return seen
    raise AssertionError(f"changes() ended before {wanted}; saw {seen}")


@pytest_asyncio.fixture
async def server_address(zookeeper: ZooKeeperTarget) -> tuple[str, int]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    return host, int(port)


@pytest_asyncio.fixture
async def proxy(server_address: tuple[str, int]) -> AsyncIterator[TcpProxy]:
    async with TcpProxy(*server_address) as proxy:
        yield proxy


@pytest.fixture
def through(proxy: TcpProxy, zookeeper: ZooKeeperTarget) -> Callable[[], aiocoord.Client]:
    """A client (not started: use ``async with``) whose network goes through ``proxy``."""
    return lambda: aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)


# --- the group seen by its members ---------------------------------------------------------


async def test_members_in_separate_clients_see_each_other_with_their_data(started) -> None:
    a, b, c = await started(3)
    async with (
        GroupMember(a, "/group", participant_id="a", data=b"alpha") as ma,
        GroupMember(b, "/group", participant_id="b", data=b"beta") as mb,
        GroupMember(c, "/group", participant_id="c") as mc,
    ):
        everyone = {"a": b"alpha", "b": b"beta", "c": b""}
        for member in (ma, mb, mc):
            assert member.is_member
            assert by_id(await member.participants()) == everyone
        assert list(by_id(await ma.participants())) == ["a", "b", "c"]  # sorted by id
        assert (await a.get("/group/a"))[1].ephemeral_owner == a.session_id


async def test_members_always_include_the_member_itself_with_its_data(started) -> None:
    """As Curator's getCurrentMembers: our own id is there before start() too (and
    while our node is away), with the data we publish; once closed, we left."""
    a, b = await started(2)
    me = GroupMember(a, "/group", participant_id="me", data=b"mine")
    assert by_id(await me.participants()) == {"me": b"mine"}  # no group yet
    async with GroupMember(b, "/group", participant_id="other", data=b"theirs"):
        assert by_id(await me.participants()) == {"me": b"mine", "other": b"theirs"}
        await me.update(b"new")  # before start(): what start() will publish
        assert by_id(await me.participants()) == {"me": b"new", "other": b"theirs"}
        late = GroupMember(a, "/group", participant_id="zz")
        assert list(by_id(await late.participants())) == ["other", "zz"]  # sorted by id, ours too
        async with me:
            assert by_id(await me.participants()) == {"me": b"new", "other": b"theirs"}
        assert by_id(await me.participants()) == {"other": b"theirs"}


async def test_changes_follow_joins_updates_and_leaves_in_order(started) -> None:
    a, b, watcher_client = await started(3)
    watcher = GroupMember(
        watcher_client, "/group", participant_id="watcher"
    )  # never joins: only looks
    me = {"watcher": b""}  # a member is always among its own members
    async with contextlib.aclosing(watcher.changes()) as changes:
        assert await reaches(changes, me) == [me]  # the group does not exist yet
        ma = GroupMember(a, "/group", participant_id="a", data=b"1")
        await ma.start()
        assert await reaches(changes, {"a": b"1", **me}) == [{"a": b"1", **me}]
        async with GroupMember(b, "/group", participant_id="b", data=b"2"):
            wanted = {"a": b"1", "b": b"2", **me}
            assert await reaches(changes, wanted) == [wanted]
            await ma.update(b"1+")
            assert ma.data == b"1+"
            wanted = {"a": b"1+", "b": b"2", **me}
            assert await reaches(changes, wanted) == [wanted]
        assert await reaches(changes, {"a": b"1+", **me}) == [{"a": b"1+", **me}]
        await ma.aclose()
        assert await reaches(changes, me) == [me]
    assert watcher_client.pending_watches == 0


async def test_leaving_deletes_our_node_and_only_ours(started, children_of) -> None:
    a, b = await started(2)
    ma = GroupMember(a, "/group", participant_id="a")
    mb = GroupMember(b, "/group", participant_id="b")
    await ma.start()
    await mb.start()
    assert await children_of(b, "/group") == ["a", "b"]
    await ma.aclose()
    assert not ma.is_member
    assert await children_of(b, "/group") == ["b"]
    await ma.aclose()  # a second close does nothing
    with pytest.raises(RuntimeError, match="closed"):
        await ma.start()
    await mb.aclose()
    assert await children_of(b, "/group") == []
    assert a.background_tasks == b.background_tasks == 0


async def test_the_node_is_ephemeral_and_its_parents_are_containers(started) -> None:
    (client,) = await started(1)
    async with GroupMember(
        client, "/services/api", participant_id="host-1", data=b"10.0.0.1:80"
    ) as member:
        assert member.path == "/services/api/host-1"
        assert member.group_path == "/services/api"
        data, stat = await client.get("/services/api/host-1")
        assert data == b"10.0.0.1:80"
        assert stat.ephemeral_owner == client.session_id
        parent, watch = await client.watch_exists("/services/api")
        assert parent is not None
    try:
        # Containers, as Curator's creatingParentContainersIfNeeded makes them: the
        # server sweeps the group away once its last member has left.
        async with asyncio.timeout(EVENT_TIMEOUT):
            while (await watch).type is not EventType.DELETED:
                _stat, watch = await client.watch_exists("/services/api")
    finally:
        watch.cancel()


async def test_update_before_start_is_what_start_publishes(started) -> None:
    (client,) = await started(1)
    member = GroupMember(client, "/group", participant_id="a", data=b"first")
    await member.update(b"second")
    async with member:
        assert by_id(await member.participants()) == {"a": b"second"}


async def test_start_adopts_a_node_our_own_session_already_holds(started, children_of) -> None:
    """As after a create whose reply was lost: the node is ours, so it is taken over."""
    (client,) = await started(1)
    await client.create("/group/a", b"stale", ephemeral=True, make_parents=True)
    async with GroupMember(client, "/group", participant_id="a", data=b"fresh") as member:
        assert member.is_member
        assert (await client.get("/group/a"))[0] == b"fresh"
    assert await children_of(client, "/group") == []


async def test_an_id_held_by_another_session_is_refused_leaving_nothing_behind(
    started, children_of
) -> None:
    a, b = await started(2)
    async with GroupMember(a, "/group", participant_id="same", data=b"a's") as holder:
        intruder = GroupMember(b, "/group", participant_id="same", data=b"b's")
        with pytest.raises(MemberIdInUseError, match="/group/same"):
            await intruder.start()
        assert not intruder.is_member
        assert b.pending_watches == 0 and b.background_tasks == 0
        data, stat = await a.get("/group/same")
        assert (data, stat.ephemeral_owner) == (b"a's", a.session_id)
        assert await children_of(a, "/group") == ["same"]
        assert holder.is_member
    # Once the id is free, the refused member may start after all.
    async with intruder:
        assert by_id(await intruder.participants()) == {"same": b"b's"}


async def test_two_members_with_one_id_on_one_client_are_refused_too(started) -> None:
    """Our session owns the first one's node, so it would pass for ours: refused here."""
    (client,) = await started(1)
    async with GroupMember(client, "/group", participant_id="a", data=b"first") as first:
        second = GroupMember(client, "/group", participant_id="a", data=b"second")
        with pytest.raises(MemberIdInUseError):
            await second.start()
        await second.aclose()  # never started: deletes nothing
        assert first.is_member
        assert (await client.get("/group/a"))[0] == b"first"
    async with GroupMember(
        client, "/group", participant_id="a", data=b"third"
    ) as third:  # free again
        assert by_id(await third.participants()) == {"a": b"third"}


async def test_a_persistent_node_at_our_id_is_not_taken_over(started, children_of) -> None:
    (client,) = await started(1)
    await client.create("/group/a", b"config", make_parents=True)
    with pytest.raises(MemberIdInUseError):
        await GroupMember(client, "/group", participant_id="a").start()
    assert (await client.get("/group/a"))[0] == b"config"


# --- faults ------------------------------------------------------------------------------------


async def test_our_node_deleted_by_another_client_is_created_again_with_our_data(
    started,
) -> None:
    a, b = await started(2)
    async with GroupMember(a, "/group", participant_id="a", data=b"v1") as member:
        await member.update(b"v2")
        _data, before = await b.get("/group/a")
        recreated = b.data_changes("/group/a")
        try:
            await b.delete("/group/a")
            async with asyncio.timeout(EVENT_TIMEOUT):
                async for current in recreated:
                    if current is not None and current[1].czxid != before.czxid:
                        break
        finally:
            await recreated.aclose()
        data, stat = current
        assert data == b"v2"  # the data given last, not the data given first
        assert stat.ephemeral_owner == a.session_id
        assert await member.wait_member(timeout=EVENT_TIMEOUT) is True
        assert member.is_member


async def test_membership_rides_out_a_dropped_connection(started, state_log) -> None:
    a, b = await started(2)
    log = state_log(a)
    async with GroupMember(a, "/group", participant_id="a", data=b"x") as member:
        before = await b.exists("/group/a")
        drop_connection(a)
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.RECONNECTED)
        assert member.is_member
        assert await b.exists("/group/a") == before  # the same node: the session lived on
        assert by_id(await member.participants()) == {"a": b"x"}


async def test_under_the_standard_error_policy_membership_is_out_while_suspended(
    started, state_log
) -> None:
    (a,) = await started(1)
    log = state_log(a)
    policy = aiocoord.StandardErrorPolicy()
    async with GroupMember(a, "/group", participant_id="a", error_policy=policy) as member:
        seen: list[bool] = []
        a.add_listener(lambda _state: seen.append(member.is_member))
        before = await a.exists("/group/a")
        drop_connection(a)
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.RECONNECTED)
        assert seen == [False, True]  # out while suspended; back with the same session
        assert member.is_member
        await member.wait_member()
        assert await a.exists("/group/a") == before  # the same node all along


async def test_an_observer_cut_off_while_the_group_changed_reads_it_again_on_reconnecting(
    started, through, proxy: TcpProxy, state_log
) -> None:
    """The server does not replay what a persistent watch missed while the client
    was away: the observer must read again after RECONNECTED."""
    (b,) = await started(1)
    observer_client = through()
    async with observer_client, GroupMember(b, "/group", participant_id="b", data=b"1") as mb:
        log = state_log(observer_client)
        observer = GroupMember(observer_client, "/group", participant_id="observer")
        async with contextlib.aclosing(observer.changes()) as changes:
            await reaches(changes, {"b": b"1", "observer": b""})
            proxy.refuse(True)
            proxy.cut()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.SUSPENDED)
            await mb.update(b"2")  # while the observer cannot hear of it
            async with GroupMember(b, "/group", participant_id="c", data=b"3"):
                proxy.refuse(False)
                async with asyncio.timeout(EVENT_TIMEOUT):
                    await log.wait_for(ConnectionState.RECONNECTED)
                await reaches(changes, {"b": b"2", "c": b"3", "observer": b""})
        assert observer_client.pending_watches == 0


async def test_after_a_session_expiry_our_node_comes_back_and_observers_miss_nothing(
    started, state_log
) -> None:
    a, b = await started(2)
    log = state_log(a)
    async with (
        GroupMember(a, "/group", participant_id="a", data=b"x") as ma,
        GroupMember(b, "/group", participant_id="b", data=b"y"),
    ):
        old_session = a.session_id
        observer = GroupMember(b, "/group", participant_id="observer")
        async with contextlib.aclosing(observer.changes()) as changes:
            await reaches(changes, {"a": b"x", "b": b"y", "observer": b""})
            await expire_session(a)
            assert a.session_id != old_session
            assert ConnectionState.LOST in log.states
            await ma.update(b"x2")  # published with the node, whether it is back yet or not
            async with asyncio.timeout(EVENT_TIMEOUT):
                await ma.wait_member()
            # Whatever was skipped in between, the view ends with both members.
            await reaches(changes, {"a": b"x2", "b": b"y", "observer": b""})
        stat = await b.exists("/group/a")
        assert stat is not None and stat.ephemeral_owner == a.session_id
        assert ma.is_member


async def test_an_observer_whose_session_expired_misses_no_change(
    started, through, proxy: TcpProxy, server_address: tuple[str, int]
) -> None:
    """The expired session took the persistent watch with it: the observer adds a
    new one and reads again, so a change made meanwhile is seen, and its own
    membership comes back."""
    (b,) = await started(1)
    a = through()
    async with a, GroupMember(b, "/group", participant_id="b", data=b"1") as mb:
        ma = GroupMember(a, "/group", participant_id="a", data=b"mine")
        await ma.start()
        async with contextlib.aclosing(ma.changes()) as changes:
            await reaches(changes, {"a": b"mine", "b": b"1"})
            proxy.hold()
            await expire_session(a, address=server_address, wait=False)
            await mb.update(b"2")  # the observer's session is gone: no event can reach it
            proxy.release()
            await reaches(changes, {"a": b"mine", "b": b"2"})
        async with asyncio.timeout(EVENT_TIMEOUT):
            await ma.wait_member()
        await ma.aclose()
        assert a.pending_watches == 0 and a.background_tasks == 0


async def test_an_id_taken_while_we_were_away_is_reported_and_never_stolen_back(
    started, through, proxy: TcpProxy, server_address: tuple[str, int], state_log
) -> None:
    (b,) = await started(1)
    a = through()
    async with a:
        log = state_log(a)
        ma = GroupMember(a, "/group", participant_id="same", data=b"a's")
        await ma.start()
        changes = ma.changes()
        assert by_id(await anext(changes)) == {"same": b"a's"}
        proxy.hold()
        await expire_session(a, address=server_address, wait=False)  # its node goes now
        async with GroupMember(b, "/group", participant_id="same", data=b"b's") as mb:
            proxy.release()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.LOST)
                assert not ma.is_member  # known gone with the session
                with pytest.raises(MemberIdInUseError, match="/group/same"):
                    await ma.wait_member()
            assert not ma.is_member
            with pytest.raises(MemberIdInUseError):
                async with asyncio.timeout(EVENT_TIMEOUT):
                    async for _members in changes:
                        pass
            with pytest.raises(MemberIdInUseError):
                await ma.update(b"again")
            assert "failed" in repr(ma)
            await ma.aclose()  # leaves the other session's node alone
            data, stat = await b.get("/group/same")
            assert (data, stat.ephemeral_owner) == (b"b's", b.session_id)
            assert mb.is_member
        assert a.pending_watches == 0 and a.background_tasks == 0


async def test_a_start_cancelled_with_its_create_in_flight_leaves_no_node(
    started, through, proxy: TcpProxy, children_of, monkeypatch: pytest.MonkeyPatch
) -> None:
    (b,) = await started(1)
    a = through()
    async with a:
        await a.ensure_path("/group")
        sent = asyncio.Event()
        original = a.create_with_stat

        async def create_with_stat(*args: Any, **kwargs: Any) -> Any:
            proxy.hold()  # the create is written, and stays in the proxy
            sent.set()
            return await original(*args, **kwargs)

        monkeypatch.setattr(a, "create_with_stat", create_with_stat)
        member = GroupMember(a, "/group", participant_id="a")
        starting = asyncio.create_task(member.start())
        await sent.wait()  # the create went out (into the held proxy) right after
        starting.cancel()
        proxy.release()  # the create applies; the cleanup, sent after it, deletes it
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert not member.is_member
        assert await children_of(b, "/group") == []
        assert a.pending_watches == 0 and a.background_tasks == 0


async def test_a_close_cancelled_with_its_delete_in_flight_still_deletes_our_node(
    started, through, proxy: TcpProxy, children_of, monkeypatch: pytest.MonkeyPatch
) -> None:
    (b,) = await started(1)
    a = through()
    async with a:
        member = GroupMember(a, "/group", participant_id="a")
        await member.start()
        await b.ensure_path("/group")  # the group outlives our node: nothing to sweep
        asked = asyncio.Event()
        original = a.exists

        async def exists(path: str) -> Any:
            if not asked.is_set():
                proxy.hold()  # the request is written, and stays in the proxy
                asked.set()
            return await original(path)

        monkeypatch.setattr(a, "exists", exists)
        closing = asyncio.create_task(member.aclose())
        await asked.wait()
        closing.cancel()
        proxy.release()
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert await children_of(b, "/group") == []
        assert not member.is_member
        assert a.pending_watches == 0 and a.background_tasks == 0


async def test_membership_comes_back_after_a_server_restart(private_zookeeper, state_log) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as a,
        aiocoord.connect(private_zookeeper.connect_string) as b,
    ):
        log = state_log(a)
        async with (
            GroupMember(a, "/group", participant_id="a", data=b"x") as ma,
            GroupMember(b, "/group", participant_id="b"),
        ):
            observer = GroupMember(b, "/group", participant_id="observer")
            async with contextlib.aclosing(observer.changes()) as changes:
                await reaches(changes, {"a": b"x", "b": b"", "observer": b""})
                await private_zookeeper.stop()
                await log.wait_for(ConnectionState.SUSPENDED)
                assert ma.is_member  # believed to exist: the session may live on
                await private_zookeeper.start()
                async with asyncio.timeout(EVENT_TIMEOUT):
                    await log.wait_for(ConnectionState.RECONNECTED)
                await ma.update(b"after")
                await reaches(changes, {"a": b"after", "b": b"", "observer": b""})
            assert ma.is_member
        assert a.pending_watches == b.pending_watches == 0


# --- changes() and its watch ------------------------------------------------------------------


async def test_changes_coalesces_a_burst_and_skips_unchanged_snapshots(started) -> None:
    a, b = await started(2)
    async with (
        GroupMember(a, "/group", participant_id="a", data=b"0") as member,
        contextlib.aclosing(member.changes()) as changes,
    ):
        assert by_id(await anext(changes)) == {"a": b"0"}
        # ZooKeeper delivers a watch event before the reply to the write that
        # caused it: once these return, their 20 events wait in the watch.
        for i in range(1, 21):
            await member.update(b"%d" % i)
        assert by_id(await anext(changes)) == {"a": b"20"}  # the burst ends in one view, not 20
        await b.set("/group/a", b"20")  # an event, but the same group: not yielded
        await b.create("/group/zz", b"")
        assert by_id(await anext(changes)) == {"a": b"20", "zz": b""}
        await b.delete("/group/zz")


async def test_closing_changes_removes_its_watch(started) -> None:
    (client,) = await started(1)
    async with GroupMember(client, "/group", participant_id="a") as member:
        changes = member.changes()
        assert by_id(await anext(changes)) == {"a": b""}
        # The keeper's watch on our node, set before (its reply came first), stays.
        watches = client.pending_watches - 1
        await changes.aclose()
        assert client.pending_watches == watches
        async for _members in member.changes():
            break  # the generator is closed once dropped
        for _ in range(3):
            await asyncio.sleep(0)
        assert client.pending_watches == watches


async def test_closing_the_member_ends_its_changes(started) -> None:
    (client,) = await started(1)
    member = GroupMember(client, "/group", participant_id="a")
    await member.start()
    seen: list[Members] = []
    first = asyncio.Event()

    async def follow() -> None:
        async for members in member.changes():
            seen.append(by_id(members))
            first.set()

    following = asyncio.create_task(follow())
    async with asyncio.timeout(EVENT_TIMEOUT):
        await first.wait()
        await member.aclose()
        await following
    assert seen[0] == {"a": b""}
    assert client.pending_watches == 0


async def test_wait_member_needs_a_running_member(started) -> None:
    (client,) = await started(1)
    member = GroupMember(client, "/group", participant_id="a")
    with pytest.raises(RuntimeError, match="new"):
        await member.wait_member()
    async with member:
        await member.wait_member()
    with pytest.raises(RuntimeError, match="closed"):
        await member.wait_member()
    with pytest.raises(RuntimeError, match="closed"):
        await member.update(b"x")


# --- input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "group", "/group/", "/", "/a//b", "/a/./b", "/a\x00"])
def test_a_bad_group_path_is_refused(idle_client: aiocoord.Client, path: str) -> None:
    with pytest.raises((InvalidPathError, ValueError)):
        GroupMember(idle_client, path, participant_id="a")


@pytest.mark.parametrize("member_id", ["", "a/b", "/a", "a/", ".", "..", "a\x00b", "\ud800"])
def test_a_bad_member_id_is_refused(idle_client: aiocoord.Client, member_id: str) -> None:
    with pytest.raises(InvalidPathError, match="/group/"):
        GroupMember(idle_client, "/group", participant_id=member_id)


@pytest.mark.parametrize("member_id", [7, b"a"])
def test_a_member_id_must_be_a_str(idle_client: aiocoord.Client, member_id: Any) -> None:
    with pytest.raises(TypeError, match="participant_id must be str"):
        GroupMember(idle_client, "/group", participant_id=member_id)


def test_without_an_id_or_data_a_member_gets_a_generated_id_and_no_data(
    idle_client: aiocoord.Client,
) -> None:
    first, second = GroupMember(idle_client, "/group"), GroupMember(idle_client, "/group")
    assert first.participant_id != second.participant_id
    assert first.path == f"/group/{first.participant_id}" and first.data == b""


def test_a_path_must_be_a_str(idle_client: aiocoord.Client) -> None:
    with pytest.raises(TypeError):
        GroupMember(idle_client, 5, participant_id="a")  # type: ignore[arg-type]


@pytest.mark.parametrize("data", ["text", 7])
async def test_member_data_must_be_bytes(idle_client: aiocoord.Client, data: Any) -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        GroupMember(idle_client, "/group", participant_id="a", data=data)
    member = GroupMember(idle_client, "/group", participant_id="a", data=bytearray(b"ok"))
    assert member.data == b"ok"
    with pytest.raises(TypeError, match="must be bytes"):
        await member.update(data)


async def test_oversized_member_data_is_refused_before_sending(
    idle_client: aiocoord.Client,
) -> None:
    too_big = b"x" * (idle_client.max_data_size + 1)
    with pytest.raises(DataTooLargeError, match="/group/a"):
        GroupMember(idle_client, "/group", participant_id="a", data=too_big)
    member = GroupMember(
        idle_client, "/group", participant_id="a", data=b"x" * idle_client.max_data_size
    )
    with pytest.raises(DataTooLargeError):
        await member.update(too_big)
    assert member.data == b"x" * idle_client.max_data_size  # unchanged
    assert "GroupMember" in repr(member) and "'/group/a'" in repr(member)
    assert member.participant_id == "a" and not member.is_member


# --- Curator ----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_curator_and_aiocoord_members_share_one_group(
    curator_classpath: str, zookeeper: ZooKeeperTarget, started
) -> None:
    a, b = await started(2)
    java = await start_curator(
        curator_classpath,
        "CuratorGroup",
        zookeeper.connect_string,
        f"{zookeeper.namespace}/group",
        "4",
        "java-1=j1:9000",
        "java-2=j2:9000",
    )
    try:
        everyone = {
            "java-1": b"j1:9000",
            "java-2": b"j2:9000",
            "py-1": b"p1:8000",
            "py-2": b"p2:8000",
        }
        async with (
            GroupMember(a, "/group", participant_id="py-1", data=b"p1:8000") as m1,
            GroupMember(b, "/group", participant_id="py-2", data=b"p2:8000") as m2,
        ):
            line = await read_line(java)
            assert line == "MEMBERS " + " ".join(f"{k}={v.decode()}" for k, v in everyone.items())
            async with contextlib.aclosing(m1.changes()) as changes:
                await reaches(changes, everyone)
            assert by_id(await m2.participants()) == everyone
            await send_line(java, "close")
            assert (await finish(java)).split() == ["DONE"]
            assert by_id(await m2.participants()) == {"py-1": b"p1:8000", "py-2": b"p2:8000"}
    finally:
        await finish_quietly(java)


async def finish_quietly(java: asyncio.subprocess.Process) -> None:
    if java.returncode is None:
        java.kill()
        await java.wait()


async def test_listeners_hear_the_group_as_changes_reads_it_until_removed(started) -> None:
    a, b = await started(2)
    heard: list[Members] = []
    changed = asyncio.Event()

    def listener(participants: list[aiocoord.Participant]) -> None:
        heard.append(by_id(participants))
        changed.set()

    async def next_heard() -> Members:
        async with asyncio.timeout(EVENT_TIMEOUT):
            await changed.wait()
        changed.clear()
        return heard[-1]

    async with GroupMember(a, "/listened", participant_id="a", data=b"1") as member:
        member.add_listener(listener)
        assert await next_heard() == {"a": b"1"}  # the group now
        async with GroupMember(b, "/listened", participant_id="b", data=b"2"):
            while await next_heard() != {"a": b"1", "b": b"2"}:
                pass
        while await next_heard() != {"a": b"1"}:
            pass
        member.remove_listener(listener)
        member.remove_listener(listener)  # not registered: ignored
        with pytest.raises(TypeError, match="callback"):
            member.add_listener(None)  # type: ignore[arg-type]


class _Said(logging.Handler):
    """Sets ``event`` when a log record's message contains ``words``."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.event.set()


@contextlib.asynccontextmanager
async def _holding_session(
    address: tuple[str, int], client: aiocoord.Client
) -> AsyncIterator[None]:
    """Keep ``client``'s current session alive on the server from a connection of our
    own (pinging it), as a server does when its clock for that session restarted
    (a leader change) while the client, out of reach, declares it lost; on exit
    close that session, so its ephemeral nodes go."""
    identity = client.client_id
    assert identity is not None
    conn = await open_connection(*address, lambda _f: None, lambda _c: None, None)

    async def ping() -> None:
        while True:
            await asyncio.sleep(0.2)
            conn.send_ping()

    pinger: asyncio.Task[None] | None = None
    try:
        reply = await conn.send_connect(0, 30_000, *identity, False)
        assert reply.timeout_ms > 0, "the session had already expired"
        pinger = asyncio.create_task(ping())
        yield
        pinger.cancel()
        await conn.submit(_zk.close_op())
    finally:
        if pinger is not None:
            pinger.cancel()
        conn.close()


async def test_our_node_held_by_our_own_earlier_session_is_waited_out_then_made_again(
    zookeeper: ZooKeeperTarget, proxy: TcpProxy, server_address: tuple[str, int], state_log
) -> None:
    """The client declares its session LOST on its own while the server keeps it
    (and our node) alive: in the new session the member finds its own earlier
    session's node, waits for it to go with that session, and joins again, instead
    of stopping with MemberIdInUseError (chaos seed 7)."""
    said = _Said("still held by our earlier session")
    logger = logging.getLogger("aiocoord")
    logger.addHandler(said)
    a = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace, session_timeout=4.0)
    try:
        async with a:
            log = state_log(a)
            member = GroupMember(a, "/group", participant_id="me", data=b"mine")
            await member.start()
            proxy.refuse(True)
            proxy.cut()  # the client is out of reach from now on
            async with _holding_session(server_address, a):
                async with asyncio.timeout(EVENT_TIMEOUT + a.session_timeout):
                    await log.wait_for(ConnectionState.LOST)  # given up by the client
                    proxy.refuse(False)  # a new session; the old one lives on
                    waiting = asyncio.create_task(said.event.wait())
                    failed = asyncio.create_task(member.wait_member())
                    done, _ = await asyncio.wait(
                        {waiting, failed}, return_when=asyncio.FIRST_COMPLETED
                    )
                    failed.cancel()
                    waiting.cancel()
                    for task in done:
                        task.result()  # MemberIdInUseError before the fix
                    assert waiting in done
                    assert not member.is_member
            # The old session is closed now, and our node with it.
            async with asyncio.timeout(EVENT_TIMEOUT):
                await member.wait_member()
            data, stat = await a.get("/group/me")
            assert (data, stat.ephemeral_owner) == (b"mine", a.session_id)
            await member.aclose()
            assert await a.exists("/group/me") is None
            assert a.pending_watches == 0 and a.background_tasks == 0
    finally:
        logger.removeHandler(said)
