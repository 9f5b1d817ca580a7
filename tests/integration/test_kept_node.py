"""KeptNode, the kit's kept node (Curator's PersistentNode): made, kept through
expiry, deletes and restarts with its latest data, and deleted only if ours."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import ConnectionState, MemberIdInUseError, NodeExistsError, RecipeClosedError
from aiocoord._recipes._kit._kept import Foreign, KeptNode, KeptState
from aiocoord._session import hold_reconnects
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)

NODE = "/kept/node"


async def reaches(kept: KeptNode, wanted: Callable[[KeptState], bool]) -> KeptState:
    """Read ``kept.changes()`` until a state satisfies ``wanted``; that state."""
    async with asyncio.timeout(EVENT_TIMEOUT), kept.changes() as changes:
        async for state in changes:
            if wanted(state):
                return state
    raise AssertionError("changes() ended first")


async def remade(client: aiocoord.Client, path: str, czxid: int) -> tuple[bytes, aiocoord.Stat]:
    """Wait until ``path`` exists as a node other than the one made at ``czxid``."""
    changes = client.data_changes(path)
    async with asyncio.timeout(EVENT_TIMEOUT), changes:
        async for current in changes:
            if current is not None and current[1].czxid != czxid:
                return current
    raise AssertionError("data_changes() ended first")


class _Said(logging.Handler):
    """Sets ``event`` once a log record holding ``text`` is emitted."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_made_with_its_data_and_deleted_by_the_close(started) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE, b"v1") as kept:
        assert kept.created and kept.path == NODE
        data, stat = await b.get(NODE)
        assert (data, stat.ephemeral_owner) == (b"v1", a.session_id)
        assert kept.state == KeptState(NODE, True, a.session_id, stat.czxid)
    assert not kept.created
    assert await b.exists(NODE) is None
    with pytest.raises(RecipeClosedError):
        await kept.start()
    assert a.pending_watches == 0 and a.background_tasks == 0


async def test_made_again_after_its_session_expires_with_the_latest_data(started) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE, b"v1") as kept:
        _data, before = await b.get(NODE)
        await expire_session(a, wait=False)
        await kept.set_data(b"v2")  # while the node may be away: goes with the re-creation
        data, stat = await remade(b, NODE, before.czxid)
        assert await kept.wait_created(timeout=EVENT_TIMEOUT)
        data, stat = await b.get(NODE)
        assert data == b"v2"
        assert stat.ephemeral_owner == a.session_id != before.ephemeral_owner
        assert kept.state.czxid == stat.czxid


async def test_deleted_by_someone_else_it_is_made_again(started) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE, b"v1") as kept:
        await kept.set_data(b"v2")
        _data, before = await b.get(NODE)
        await b.delete(NODE)
        data, stat = await remade(b, NODE, before.czxid)
        assert (data, stat.ephemeral_owner) == (b"v2", a.session_id)
        state = await reaches(kept, lambda s: s.created and s.czxid == stat.czxid)
        assert state.session == a.session_id


async def test_a_node_of_our_own_earlier_session_is_waited_out_not_deleted(started) -> None:
    """The earlier session is played by another client, named as one of ours
    (white-box: a client that gave its session up finds that session's node until
    the server expires it)."""
    old, new, observer = await started(3)
    await old.create(NODE, b"old", ephemeral=True, make_parents=True)
    kept = KeptNode(new, NODE, b"new")
    kept.sessions.add(old.session_id)
    said = _Said("still held by our earlier session")
    logger = logging.getLogger("aiocoord")
    logger.addHandler(said)
    try:
        starting = asyncio.create_task(kept.start())
        async with asyncio.timeout(EVENT_TIMEOUT):
            await said.event.wait()
        data, stat = await observer.get(NODE)
        assert (data, stat.ephemeral_owner) == (b"old", old.session_id)  # left alone
        assert not starting.done() and not kept.created
        await old.aclose()  # the old session ends: its node goes
        async with asyncio.timeout(EVENT_TIMEOUT):
            await starting
        data, stat = await observer.get(NODE)
        assert (data, stat.ephemeral_owner) == (b"new", new.session_id)
    finally:
        logger.removeHandler(said)
        await kept.aclose()


async def test_aclose_ends_a_start_that_waits_out_an_earlier_session(started) -> None:
    old, new, observer = await started(3)
    await old.create(NODE, b"old", ephemeral=True, make_parents=True)
    kept = KeptNode(new, NODE, b"new")
    kept.sessions.add(old.session_id)
    said = _Said("still held by our earlier session")
    logger = logging.getLogger("aiocoord")
    logger.addHandler(said)
    try:
        starting = asyncio.create_task(kept.start())
        async with asyncio.timeout(EVENT_TIMEOUT):
            await said.event.wait()
        await kept.aclose()
        with pytest.raises(RecipeClosedError):
            await starting
    finally:
        logger.removeHandler(said)
    await old.aclose()  # the old node goes; nothing of ours takes its place
    await observer.sync(NODE)
    assert await observer.exists(NODE) is None
    assert new.pending_watches == 0 and new.background_tasks == 0


async def test_a_foreign_node_is_refused_and_left_alone(started) -> None:
    a, b = await started(2)
    await b.create(NODE, b"theirs", ephemeral=True, make_parents=True)
    kept = KeptNode(a, NODE, b"ours")
    with pytest.raises(NodeExistsError, match=NODE):
        await kept.start()
    assert not kept.created
    assert a.pending_watches == 0 and a.background_tasks == 0
    refused = KeptNode(a, NODE, b"ours", in_use=MemberIdInUseError)  # the owner's own error
    with pytest.raises(MemberIdInUseError):
        await refused.start()
    await kept.aclose()  # never started: deletes nothing
    await refused.aclose()
    data, stat = await a.get(NODE)
    assert (data, stat.ephemeral_owner) == (b"theirs", b.session_id)


async def test_a_foreign_node_is_replaced_under_the_replace_policy(started) -> None:
    a, b = await started(2)
    await b.create(NODE, b"theirs", ephemeral=True, make_parents=True)
    async with KeptNode(a, NODE, b"ours", foreign=Foreign.REPLACE):
        data, stat = await b.get(NODE)
        assert (data, stat.ephemeral_owner) == (b"ours", a.session_id)


async def test_a_path_taken_while_we_were_away_stops_the_keeping(started, state_log) -> None:
    a, b = await started(2)
    log = state_log(a)
    kept = KeptNode(a, NODE, b"ours", in_use=MemberIdInUseError)
    await kept.start()
    try:
        with hold_reconnects(a):  # a learns of its expiry only once b holds the node
            await expire_session(a, wait=False)
            await b.create(NODE, b"theirs", ephemeral=True)
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.LOST)
        await reaches(kept, lambda s: s.failed and not s.created)
        with pytest.raises(MemberIdInUseError):
            await kept.wait_created()
        with pytest.raises(MemberIdInUseError):
            await kept.set_data(b"again")
        assert "failed" in repr(kept)
    finally:
        await kept.aclose()  # leaves the other session's node alone
    data, stat = await b.get(NODE)
    assert (data, stat.ephemeral_owner) == (b"theirs", b.session_id)


async def test_several_tasks_share_one_kept_node(started) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE) as kept:
        waiters = [asyncio.create_task(kept.wait_created()) for _ in range(5)]
        writes = [kept.set_data(f"v{n}".encode()) for n in range(20)]
        await asyncio.gather(*writes)
        assert all(await asyncio.gather(*waiters))
        data, _stat = await b.get(NODE)
        assert data == kept.data == b"v19"  # the writes are serialised: the last one wins
        await b.delete(NODE)
        await reaches(kept, lambda s: s.created and s.czxid != _stat.czxid)
        assert (await b.get(NODE))[0] == b"v19"


async def test_the_close_deletes_only_our_node(started) -> None:
    a, b = await started(2)
    mine = KeptNode(a, NODE, b"a's", foreign=Foreign.REPLACE, watch=False)
    await mine.start()
    async with KeptNode(b, NODE, b"b's", foreign=Foreign.REPLACE, watch=False):
        await mine.aclose()  # the node is b's now: left alone
        data, stat = await a.get(NODE)
        assert (data, stat.ephemeral_owner) == (b"b's", b.session_id)
    assert await a.exists(NODE) is None
    # A persistent node is ours while it holds our data.
    persistent = KeptNode(a, NODE, b"mine", ephemeral=False)
    await persistent.start()
    await b.set(NODE, b"changed by someone else")
    await persistent.aclose()
    assert (await a.get(NODE))[0] == b"changed by someone else"
    async with KeptNode(a, NODE, b"changed by someone else", ephemeral=False):
        pass  # adopted: a persistent node names no owner
    assert await a.exists(NODE) is None


async def test_a_persistent_node_is_kept_and_its_latest_data_restored_after_expiry(
    started,
) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE, b"v1", ephemeral=False) as kept:
        _data, before = await b.get(NODE)
        assert before.ephemeral_owner == 0
        await expire_session(a)
        await kept.set_data(b"v2")
        await b.delete(NODE)
        data, stat = await remade(b, NODE, before.czxid)
        assert (data, stat.ephemeral_owner) == (b"v2", 0)
    assert await b.exists(NODE) is None


async def test_a_protected_sequential_node_is_made_again_under_a_new_name(started) -> None:
    a, b = await started(2)
    async with KeptNode(a, "/kept/n-", b"x", protected=True, sequential=True) as kept:
        first = kept.path
        assert first is not None and first.startswith("/kept/_c_") and first[-10:].isdigit()
        await b.delete(first)
        state = await reaches(kept, lambda s: s.created and s.path != first)
        assert state.path is not None and await b.exists(state.path) is not None
        assert sorted(await b.children("/kept")) == [state.path.rsplit("/", 1)[1]]
    assert await b.children("/kept") == []


async def test_a_ttl_node_is_persistent_and_made_again_once_the_server_removes_it(
    started,
) -> None:
    a, b = await started(2)
    async with KeptNode(a, NODE, b"x", ephemeral=False, ttl=0.5) as kept:
        _data, before = await b.get(NODE)
        assert before.ephemeral_owner == 0
        # The server's container check removes it once the TTL passed; we make it again.
        data, stat = await remade(b, NODE, before.czxid)
        assert data == b"x"
        await reaches(kept, lambda s: s.created and s.czxid == stat.czxid)


async def test_a_dropped_connection_keeps_the_node_and_the_error_policy_says_created(
    started, state_log
) -> None:
    (a,) = await started(1)
    log = state_log(a)
    standard = KeptNode(a, NODE, error_policy=aiocoord.StandardErrorPolicy())
    session_only = KeptNode(a, "/kept/other")
    async with standard, session_only:
        seen: list[bool] = []
        standard.add_listener(lambda state: seen.append(state.created))
        before = await a.exists(NODE)
        aiocoord.testing.drop_connection(a)
        async with asyncio.timeout(EVENT_TIMEOUT):
            await log.wait_for(ConnectionState.RECONNECTED)
        assert seen[:2] == [False, True]  # out while suspended, back with the session
        assert standard.created and session_only.created
        assert await a.exists(NODE) == before  # the same node: the session lived on


async def test_the_node_comes_back_after_a_server_restart(private_zookeeper, state_log) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as a,
        aiocoord.connect(private_zookeeper.connect_string) as b,
    ):
        log = state_log(a)
        async with KeptNode(a, NODE, b"before") as kept:
            await private_zookeeper.stop()
            await log.wait_for(ConnectionState.SUSPENDED)
            assert kept.created  # believed to exist: the session may live on
            await private_zookeeper.start()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.RECONNECTED)
            await kept.set_data(b"after")
            data, stat = await b.get(NODE)
            assert (data, stat.ephemeral_owner) == (b"after", a.session_id)
        assert await b.exists(NODE) is None
        assert a.pending_watches == 0


def test_bad_arguments_are_refused_before_anything_is_sent(idle_client: aiocoord.Client) -> None:
    with pytest.raises(aiocoord.InvalidArgumentError):
        KeptNode(idle_client, NODE, ttl=1.0)  # a TTL node is persistent
    with pytest.raises(aiocoord.InvalidArgumentError):
        KeptNode(idle_client, NODE, ephemeral=False, ttl=0)
    with pytest.raises(aiocoord.ArgumentTypeError):
        KeptNode(idle_client, NODE, "text")  # type: ignore[arg-type]
    with pytest.raises(aiocoord.ArgumentTypeError):
        KeptNode(idle_client, NODE, foreign="replace")  # type: ignore[arg-type]
    with pytest.raises(aiocoord.InvalidPathError):
        KeptNode(idle_client, "/")
    with pytest.raises(aiocoord.DataTooLargeError):
        KeptNode(idle_client, NODE, b"x" * (idle_client.max_data_size + 1))
