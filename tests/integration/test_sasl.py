"""SASL (DIGEST-MD5) against real servers that require it, standalone and as an ensemble.

The kit's servers are secured as production runs them: ZooKeeper's SASL
authentication provider, DIGEST-MD5 users in a JAAS ``Server`` section,
``zookeeper.sessionRequireClientSASLAuth=true``, and (ensembles) quorum SASL.
A node whose ACL is ``sasl:alice`` only is writable only on a connection that
authenticated as alice: writing it after a reconnect proves a fresh exchange
ran on the new connection (the identity belongs to the connection, not the
session).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import aiocoord
from aiocoord import ACL, ConnectionState, Perm
from aiocoord._session._sasl import SaslExchange
from aiocoord.testing import TcpProxy, ZooKeeperEnsemble, ZooKeeperServer, expire_session

pytestmark = pytest.mark.timeout(120)

S, R = ConnectionState.SUSPENDED, ConnectionState.RECONNECTED
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ALICE_ONLY = [ACL(Perm.ALL, "sasl", "alice")]
FAST_FAIL = 5.0
"""Seconds a refused client may take to fail: well under its start timeout."""


@pytest_asyncio.fixture
async def sasl_zookeeper() -> AsyncIterator[ZooKeeperServer]:
    async with ZooKeeperServer(sasl_users=USERS, require_sasl=True) as server:
        yield server


class CountingSasl:
    """A mechanism that counts its exchanges (one per connection) and can run a
    hook between the server's challenge and the answer."""

    def __init__(self, inner: aiocoord.SaslDigest) -> None:
        self.inner = inner
        self.hosts: list[str] = []
        self.before_answer: list[object] = []

    def exchange(self, host: str) -> SaslExchange:
        self.hosts.append(host)
        return _HookedExchange(self, self.inner.exchange(host))


class _HookedExchange:
    def __init__(self, owner: CountingSasl, inner: SaslExchange) -> None:
        self._owner = owner
        self._inner = inner
        self.mechanism = inner.mechanism

    @property
    def complete(self) -> bool:
        return self._inner.complete

    async def first(self) -> bytes:
        return await self._inner.first()

    async def step(self, challenge: bytes) -> bytes | None:
        answer = await self._inner.step(challenge)
        if self._owner.before_answer:
            hook = self._owner.before_answer.pop(0)
            assert callable(hook)
            hook()
        return answer


async def test_digest_md5_connects_and_owns_a_sasl_acl(sasl_zookeeper: ZooKeeperServer) -> None:
    server = sasl_zookeeper
    async with (
        aiocoord.connect(server.connect_string, sasl=server.sasl_digest("alice")) as alice,
        aiocoord.connect(server.connect_string, sasl=server.sasl_digest("bob")) as bob,
    ):
        assert alice.state is ConnectionState.CONNECTED
        await alice.create("/alice", b"mine", acl=ALICE_ONLY)
        assert (await alice.get_acl("/alice"))[0] == ALICE_ONLY
        await alice.set("/alice", b"still mine")
        # Another authenticated user is kept out, and nothing changes.
        with pytest.raises(aiocoord.NoAuthError) as info:
            await bob.set("/alice", b"bob was here")
        assert info.value.path == "/alice"
        with pytest.raises(aiocoord.NoAuthError):
            await bob.get("/alice")
        with pytest.raises(aiocoord.NoAuthError):
            await bob.create("/alice/child")
        data, stat = await alice.get("/alice")
        assert (data, stat.version, stat.num_children) == (b"still mine", 1, 0)


async def test_every_recipe_family_works_on_a_sasl_required_server(
    sasl_zookeeper: ZooKeeperServer,
) -> None:
    server = sasl_zookeeper
    async with (
        aiocoord.connect(server.connect_string, sasl=server.sasl_digest("alice")) as a,
        aiocoord.connect(server.connect_string, sasl=server.sasl_digest("bob")) as b,
        asyncio.timeout(60),
    ):
        async with aiocoord.Mutex(a, "/r/mutex") as mutex:
            assert mutex.is_held
        async with aiocoord.Semaphore(b, "/r/semaphore", max_leases=2) as lease:
            assert lease.is_held
        counter = aiocoord.AtomicLong(a, "/r/counter")
        assert (await counter.increment()).post_value == 1
        async with aiocoord.LeaderLatch(b, "/r/latch", participant_id="b") as latch:
            assert await latch.wait_leader(timeout=10)
        gate = aiocoord.Barrier(a, "/r/barrier")
        await gate.set_barrier()
        await gate.remove_barrier()
        assert await aiocoord.Barrier(b, "/r/barrier").wait_on_barrier(timeout=5)
        queue: aiocoord.Queue[bytes] = aiocoord.Queue(a, "/r/queue")
        await queue.put(b"job")
        assert await aiocoord.Queue(b, "/r/queue").get(timeout=5) == b"job"
        await a.create("/r/cached", b"v1")
        async with aiocoord.NodeCache(b, "/r/cached") as cache:
            entry = cache.get()
            assert entry is not None and entry[0] == b"v1"
        async with aiocoord.GroupMember(a, "/r/group", participant_id="a", data=b"x") as member:
            assert {p.id for p in await member.participants()} == {"a"}


async def test_a_client_without_sasl_gets_sasl_required_fast(
    sasl_zookeeper: ZooKeeperServer, state_log
) -> None:
    server = sasl_zookeeper
    started_at = time.monotonic()
    async with aiocoord.connect(server.connect_string, start_timeout=30) as client:
        log = state_log(client)
        with pytest.raises(aiocoord.SaslRequiredError, match="requires SASL") as info:
            await client.get("/")
        assert info.value.code == -124
        assert log.states == [S]  # the connection is gone, and no reconnect follows
        # The client stopped: every later request says so at once, nothing is retried.
        with pytest.raises(aiocoord.SaslRequiredError):
            await client.exists("/")
        with pytest.raises(aiocoord.SaslRequiredError):
            await client.retry(client.exists, "/")
    assert time.monotonic() - started_at < FAST_FAIL


@pytest.mark.parametrize(
    ("username", "password"),
    [("alice", "wrong-password"), ("mallory", "alice-secret")],
    ids=["wrong password", "unknown user"],
)
@pytest.mark.parametrize("required", [True, False], ids=["required", "optional"])
async def test_refused_credentials_fail_start_fast_and_are_not_retried(
    username: str, password: str, required: bool
) -> None:
    async with (
        ZooKeeperServer(sasl_users=USERS, require_sasl=required) as server,
        TcpProxy(server.host, server.port) as proxy,
    ):
        client = aiocoord.connect(
            proxy.connect_string,
            sasl=aiocoord.SaslDigest(username, password),
            start_timeout=30,
        )
        started_at = time.monotonic()
        with pytest.raises(aiocoord.AuthFailedError) as info:
            await client.start()
        assert time.monotonic() - started_at < FAST_FAIL
        assert client.closed
        assert proxy.accepted == 1  # one attempt, no retry
        error = info.value
        assert error.mechanism == "DIGEST-MD5"
        assert "does not say whether the user is unknown or the password wrong" in str(error)
        assert password not in str(error) and password not in repr(error)
        # 3.8 answers -124 where SASL is required, -115 (AUTHFAILED) where it is not.
        assert f"error {-124 if required else -115}" in str(error)


async def test_the_session_survives_a_restart_with_a_fresh_exchange(
    sasl_zookeeper: ZooKeeperServer, state_log
) -> None:
    server = sasl_zookeeper
    sasl = CountingSasl(server.sasl_digest("alice"))
    async with aiocoord.connect(server.connect_string, sasl=sasl) as client:
        log = state_log(client)
        session = client.session_id
        await client.create("/restart", b"0", acl=ALICE_ONLY)
        await client.create("/restart-eph", ephemeral=True)
        assert len(sasl.hosts) == 1
        await server.stop()
        async with asyncio.timeout(10):
            await log.wait_for(S)
        await server.start()
        async with asyncio.timeout(20):
            await log.wait_for(R)
        assert client.session_id == session
        assert len(sasl.hosts) >= 2  # a new exchange on the new connection
        await client.set("/restart", b"1")  # writable: the connection is alice's again
        assert (await client.exists("/restart-eph")) is not None


async def test_expire_session_works_on_a_sasl_required_server(
    sasl_zookeeper: ZooKeeperServer, state_log
) -> None:
    server = sasl_zookeeper
    sasl = CountingSasl(server.sasl_digest("alice"))
    async with aiocoord.connect(server.connect_string, sasl=sasl) as client:
        log = state_log(client)
        old = client.session_id
        await client.create("/doomed", ephemeral=True)
        async with asyncio.timeout(30):
            await expire_session(client)
        assert ConnectionState.LOST in log.states
        assert client.session_id not in (0, old)
        assert await client.exists("/doomed") is None
        await client.create("/reborn", acl=ALICE_ONLY)  # the new session is alice's too
        await client.set("/reborn", b"x")
        # The kit's own connection authenticated with the client's mechanism.
        assert len(sasl.hosts) >= 3


async def test_a_connection_cut_during_the_exchange_is_a_connection_loss(
    sasl_zookeeper: ZooKeeperServer,
) -> None:
    server = sasl_zookeeper
    async with TcpProxy(server.host, server.port) as proxy:
        sasl = CountingSasl(server.sasl_digest("alice"))
        cut = asyncio.Event()

        def cut_now() -> None:
            proxy.cut()
            cut.set()

        sasl.before_answer.append(cut_now)  # the first exchange only
        async with aiocoord.connect(proxy.connect_string, sasl=sasl, start_timeout=30) as client:
            assert cut.is_set()
            assert proxy.accepted == 2  # retried as a loss, not refused as bad credentials
            assert len(sasl.hosts) == 2
            await client.create("/after-cut", acl=ALICE_ONLY)
            await client.set("/after-cut", b"x")


@pytest.mark.ensemble
async def test_an_ensemble_with_quorum_sasl_fails_over_with_a_fresh_exchange(state_log) -> None:
    async with ZooKeeperEnsemble(3, sasl_users=USERS, require_sasl=True) as ensemble:
        config = (ensemble.members[0].data_dir / "zoo.cfg").read_text()
        assert "quorum.auth.serverRequireSasl=true" in config
        assert "quorum.auth.learnerRequireSasl=true" in config
        sasl = CountingSasl(ensemble.sasl_digest("alice"))
        async with (
            aiocoord.connect(ensemble.connect_string, sasl=sasl) as client,
            aiocoord.connect(ensemble.connect_string, sasl=ensemble.sasl_digest("bob")) as bob,
        ):
            log = state_log(client)
            session = client.session_id
            await client.create("/e", b"0", acl=ALICE_ONLY)
            await client.create("/e-eph", ephemeral=True)
            host = client.connected_to
            assert host is not None
            member = next(m for m in ensemble.members if m.port == host[1])
            await member.kill()
            async with asyncio.timeout(30):
                await log.wait_for(R)
            assert client.session_id == session
            assert client.connected_to != host
            assert len(sasl.hosts) >= 2
            await client.retry(client.set, "/e", b"1")
            assert (await client.exists("/e-eph")) is not None
            with pytest.raises(aiocoord.NoAuthError):
                await bob.retry(bob.set, "/e", b"bob")
            async with aiocoord.Mutex(client, "/e-lock") as mutex:
                assert mutex.is_held
            assert (await aiocoord.AtomicLong(bob, "/e-count").increment()).post_value == 1
        async with aiocoord.connect(ensemble.connect_string) as anonymous:
            with pytest.raises(aiocoord.SaslRequiredError):
                await anonymous.get("/")
