"""Read-only mode: a member that lost its quorum serves reads to clients that ask for it.

Members run with ``-Dreadonlymode.enabled=true``. Since ZooKeeper 3.6 a read-only
server also needs local sessions (``localSessionsEnabled=true``): it refuses to
create a global session, answering the connect request with a bare NOTREADONLY
error header instead of a ConnectResponse (see apache/zookeeper#1922).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import aiocoord
from aiocoord import ConnectionState, NotReadOnlyError
from aiocoord.testing import READ_ONLY_MODE, ZooKeeperEnsemble, ZooKeeperServer

pytestmark = [pytest.mark.ensemble, pytest.mark.timeout(60)]

READ_ONLY_MODE_ENABLED = ["-Dreadonlymode.enabled=true"]
LOCAL_SESSIONS = {"localSessionsEnabled": "true", "localSessionsUpgradingEnabled": "true"}


@pytest_asyncio.fixture
async def ensemble() -> AsyncIterator[ZooKeeperEnsemble]:
    async with ZooKeeperEnsemble(
        3, jvm_args=READ_ONLY_MODE_ENABLED, extra_config=LOCAL_SESSIONS
    ) as ensemble:
        yield ensemble


async def lose_quorum(ensemble: ZooKeeperEnsemble) -> ZooKeeperServer:
    """Stop all members but a follower; return it once it serves read-only."""
    survivor = (await ensemble.followers())[0]
    async with asyncio.TaskGroup() as tg:
        for member in ensemble.members:
            if member is not survivor:
                tg.create_task(member.stop())
    await survivor.wait_in_mode(READ_ONLY_MODE, timeout=20)
    return survivor


async def test_read_only_client_reads_and_is_refused_writes(ensemble: ZooKeeperEnsemble) -> None:
    survivor = (await ensemble.followers())[0]
    # Written through the survivor: its reply means the survivor has applied it.
    async with aiocoord.connect(survivor.connect_string, read_only=True) as writer:
        assert writer.state is ConnectionState.CONNECTED  # a quorum: not read-only
        await writer.create("/kept", b"before")
        await writer.create("/kept/child")
    assert await lose_quorum(ensemble) is survivor

    async with aiocoord.connect(survivor.connect_string, read_only=True) as client:
        assert client.state is ConnectionState.READ_ONLY
        assert client.state.is_connected
        data, stat = await client.get("/kept")
        assert (data, stat.num_children) == (b"before", 1)
        assert await client.children("/kept") == ["child"]
        assert await client.exists("/nothing") is None
        _data, _stat, watch = await client.watch_data("/kept")  # reads may set watches
        watch.cancel()
        with pytest.raises(NotReadOnlyError):
            await client.create("/new")
        with pytest.raises(NotReadOnlyError):
            await client.set("/kept", b"after")
        with pytest.raises(NotReadOnlyError):
            await client.delete("/kept/child")
        assert await client.get("/kept") == (data, stat)  # a refused write is no loss


async def test_read_write_client_gets_no_session_from_a_read_only_server(
    ensemble: ZooKeeperEnsemble,
) -> None:
    survivor = await lose_quorum(ensemble)
    client = aiocoord.connect(survivor.connect_string)  # read_only=False
    with pytest.raises(aiocoord.OperationTimeoutError):
        await client.start(timeout=2)
    assert client.closed
    assert await survivor.mode() == READ_ONLY_MODE


async def test_read_only_session_ends_when_the_quorum_returns(
    ensemble: ZooKeeperEnsemble, state_log
) -> None:
    survivor = await lose_quorum(ensemble)
    async with aiocoord.connect(survivor.connect_string, read_only=True) as client:
        log = state_log(client)
        ro_session = client.session_id
        assert client.state is ConnectionState.READ_ONLY
        async with asyncio.TaskGroup() as tg:
            for member in ensemble.members:
                if member is not survivor:
                    tg.create_task(member.start())
        # The survivor drops its read-only clients to rejoin the quorum, and the
        # session it gave out was local to its read-only self: the quorum has never
        # heard of it. So it is lost, and a new read-write session follows.
        async with asyncio.timeout(15):
            await log.wait_for(ConnectionState.CONNECTED)
        assert log.states == [
            ConnectionState.SUSPENDED,
            ConnectionState.LOST,
            ConnectionState.CONNECTED,
        ]
        assert client.session_id not in (0, ro_session)
        await client.create("/written-again", b"rw")
        assert (await client.get("/written-again"))[0] == b"rw"
