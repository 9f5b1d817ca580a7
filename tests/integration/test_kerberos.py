"""Kerberos against a real MIT KDC: the test kit's KerberosKDC, and SaslKerberos' GSSAPI
exchange against an in-process gssapi acceptor holding the server's keytab (RFC 4752,
with its security-layer step), with no ZooKeeper in between."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import gssapi
import pytest
import pytest_asyncio

import aiocoord
from aiocoord import ACL, AuthFailedError, ConnectionState, MissingExtraError, Perm, SaslKerberos
from aiocoord._session._kerberos import KerberosExchange, kerberos_cause
from aiocoord.testing import KerberosKDC, ZooKeeperEnsemble, ZooKeeperServer
from aiocoord.testing._server import find_java, find_zookeeper_classpath

SERVICE = "zookeeper/localhost"
PASSWORD = "alice-secret-1"


@pytest_asyncio.fixture
async def kdc() -> AsyncIterator[KerberosKDC]:
    # A small skew: an expired ticket is refused about a second after its end.
    async with KerberosKDC(clock_skew=1) as kdc:
        await kdc.add_principal(SERVICE)
        await kdc.add_principal("alice", password=PASSWORD)
        yield kdc


UseEnv = Callable[[dict[str, str]], None]


@pytest.fixture
def use_env(monkeypatch: pytest.MonkeyPatch) -> UseEnv:
    """Point this process' Kerberos at a KDC's realm (MIT reads the variables per call)."""

    def apply(env: dict[str, str]) -> None:
        for name in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME", "KRB5_KTNAME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    return apply


async def converse(exchange: KerberosExchange) -> gssapi.SecurityContext:
    """Run *exchange* against a gssapi acceptor (credentials from KRB5_KTNAME) the way a
    ZooKeeper server's SASL GSSAPI does; return the acceptor's context."""
    acceptor = gssapi.SecurityContext(creds=gssapi.Credentials(usage="accept"), usage="accept")
    token: bytes | None = await exchange.first()
    while not acceptor.complete:
        assert token is not None
        reply = acceptor.step(token)
        token = await exchange.step(reply or b"")
    assert not exchange.complete
    # RFC 4752: the offer is "no security layer" or integrity, max message 64 KiB.
    offer = acceptor.wrap(bytes([0x01 | 0x02, 0x01, 0x00, 0x00]), encrypt=False).message
    answer = await exchange.step(offer)
    assert answer is not None
    chosen = acceptor.unwrap(answer).message
    assert chosen[:4] == b"\x01\x00\x00\x00"  # no security layer, max size 0 (RFC 4752 3.1)
    assert chosen[4:].decode() == str(acceptor.initiator_name)  # the authorization id
    assert exchange.complete
    assert await exchange.step(b"") is None
    return acceptor


async def test_kdc_starts_issues_a_ticket_and_stops(kdc: KerberosKDC) -> None:
    pid = kdc.pid
    assert pid is not None and kdc.is_running
    cache = await kdc.kinit("alice", password=PASSWORD)
    result = await anyio.run_process(
        ["klist", "-c", f"FILE:{cache}"], env={**os.environ, **kdc.environment(ccache=cache)}
    )
    listed = result.stdout.decode()
    assert f"krbtgt/{kdc.realm}@{kdc.realm}" in listed
    assert f"alice@{kdc.realm}" in listed
    directory = kdc.directory
    await kdc.aclose()
    assert not kdc.is_running
    assert not await anyio.Path(f"/proc/{pid}").exists()
    assert not await anyio.Path(directory).exists()


async def test_kdc_can_restart_on_the_same_realm(kdc: KerberosKDC) -> None:
    port = kdc.port
    await kdc.stop()
    assert not kdc.is_running
    await kdc.start()
    assert kdc.port == port
    await kdc.kinit("alice", password=PASSWORD)


async def test_kdc_refuses_a_wrong_password(kdc: KerberosKDC) -> None:
    with pytest.raises(RuntimeError, match="kinit"):
        await kdc.kinit("alice", password="not-the-password")


async def test_exchange_completes_with_a_ticket_cache(kdc: KerberosKDC, use_env: UseEnv) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD)
    use_env(kdc.environment(ccache=cache, keytab=await kdc.keytab(SERVICE)))
    exchange = SaslKerberos().exchange("127.0.0.1")
    acceptor = await converse(exchange)
    assert str(acceptor.initiator_name) == f"alice@{kdc.realm}"
    # 127.0.0.1 is canonicalised as the Java client does: reverse DNS gives localhost.
    assert exchange.service_principal == SERVICE
    assert str(acceptor.target_name) == f"{SERVICE}@{kdc.realm}"


async def test_exchange_takes_a_client_keytab_for_the_chosen_principal(
    kdc: KerberosKDC,
    use_env: UseEnv,
) -> None:
    await kdc.add_principal("svc-batch")
    client_keytab = await kdc.keytab("svc-batch")
    fresh_cache = kdc.directory / "batch.ccache"
    env = kdc.environment(
        ccache=fresh_cache, client_keytab=client_keytab, keytab=await kdc.keytab(SERVICE)
    )
    use_env(env)
    mechanism = SaslKerberos(principal=f"svc-batch@{kdc.realm}")
    acceptor = await converse(mechanism.exchange("localhost"))
    assert str(acceptor.initiator_name) == f"svc-batch@{kdc.realm}"


async def test_hostname_pins_the_server_principal(kdc: KerberosKDC, use_env: UseEnv) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD)
    use_env(kdc.environment(ccache=cache, keytab=await kdc.keytab(SERVICE)))
    exchange = SaslKerberos(hostname="localhost").exchange("10.255.255.1")
    await converse(exchange)
    assert exchange.service_principal == SERVICE


async def test_no_ticket_is_auth_failed_naming_it(kdc: KerberosKDC, use_env: UseEnv) -> None:
    use_env(kdc.environment(keytab=await kdc.keytab(SERVICE)))  # an empty cache
    exchange = SaslKerberos().exchange("127.0.0.1")
    with pytest.raises(AuthFailedError) as caught:
        await exchange.first()
    assert caught.value.reason is not None
    assert "no ticket" in caught.value.reason
    assert "no ticket" in str(caught.value)
    assert not exchange.complete


async def test_expired_ticket_is_auth_failed_naming_it(kdc: KerberosKDC, use_env: UseEnv) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD, lifetime=2)
    use_env(kdc.environment(ccache=cache, keytab=await kdc.keytab(SERVICE)))
    await kdc.wait_expired(cache)
    with pytest.raises(AuthFailedError, match="expired ticket") as caught:
        await SaslKerberos().exchange("127.0.0.1").first()
    assert caught.value.reason is not None and "expired ticket" in caught.value.reason


async def test_clock_skew_is_auth_failed_naming_it(kdc: KerberosKDC, use_env: UseEnv) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD)
    kdc.skew_clock(cache, 3600)  # an hour fast, past the realm's one second
    use_env(kdc.environment(ccache=cache))
    with pytest.raises(AuthFailedError, match="clock skew") as caught:
        await SaslKerberos().exchange("127.0.0.1").first()
    assert caught.value.reason is not None and "clock skew" in caught.value.reason
    kdc.skew_clock(cache, 0)  # the same cache with the clock right again is taken
    use_env(kdc.environment(ccache=cache, keytab=await kdc.keytab(SERVICE)))
    await converse(SaslKerberos().exchange("127.0.0.1"))


async def test_unknown_server_principal_is_auth_failed_naming_it(
    kdc: KerberosKDC,
    use_env: UseEnv,
) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD)
    use_env(kdc.environment(ccache=cache))
    with pytest.raises(AuthFailedError, match="unknown server principal") as caught:
        await SaslKerberos(hostname="no-such-host").exchange("127.0.0.1").first()
    assert "zookeeper/no-such-host" in str(caught.value)


async def test_unknown_client_principal_is_auth_failed(kdc: KerberosKDC, use_env: UseEnv) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD)
    use_env(kdc.environment(ccache=cache))
    with pytest.raises(AuthFailedError, match="no ticket"):
        await SaslKerberos(principal=f"bob@{kdc.realm}").exchange("localhost").first()


def test_clock_skew_and_other_causes_are_named_from_the_codes() -> None:
    """The KDC's and acceptor's refusals come back as GSS-API minor codes (MIT's)."""
    base = -1765328384  # MIT's krb5 error table
    failure = 13 << 16  # GSS_S_FAILURE
    cases = {
        base + 37: "clock skew",
        base + 32: "expired ticket",
        base + 7: "unknown server principal",
        base + 6: "unknown client principal",
        base + 24: "wrong password or key",
    }
    for minor, words in cases.items():
        error = gssapi.exceptions.GSSError(failure, minor & 0xFFFFFFFF)
        assert words in kerberos_cause(error)
    assert "expired ticket" in kerberos_cause(gssapi.exceptions.GSSError(11 << 16, 0))
    assert "no ticket" in kerberos_cause(gssapi.exceptions.GSSError(7 << 16, 0))


def test_reprs_and_equality_hold_no_secrets() -> None:
    mechanism = SaslKerberos(principal="alice@EXAMPLE.COM", hostname="zk1.example.com")
    assert repr(mechanism) == (
        "SaslKerberos(principal='alice@EXAMPLE.COM', service='zookeeper', "
        "hostname='zk1.example.com', canonicalize=True)"
    )
    assert mechanism == SaslKerberos(principal="alice@EXAMPLE.COM", hostname="zk1.example.com")
    assert mechanism.mechanism == "GSSAPI"
    exchange = mechanism.exchange("10.0.0.1")
    assert exchange.mechanism == "GSSAPI"
    assert repr(exchange) == "<KerberosExchange to zookeeper/zk1.example.com context>"
    with pytest.raises(AttributeError):
        mechanism.principal = "mallory"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"principal": ""}, aiocoord.InvalidArgumentError),
        ({"principal": 7}, aiocoord.ArgumentTypeError),
        ({"service": ""}, aiocoord.InvalidArgumentError),
        ({"service": "zoo/keeper"}, aiocoord.InvalidArgumentError),
        ({"hostname": " "}, aiocoord.InvalidArgumentError),
        ({"canonicalize": "yes"}, aiocoord.ArgumentTypeError),
    ],
)
def test_bad_arguments_are_refused_when_made(kwargs: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        SaslKerberos(**kwargs)


def test_without_gssapi_making_one_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry makes `import gssapi` raise ImportError, as when it is not installed.
    for name in [n for n in sys.modules if n == "gssapi" or n.startswith("gssapi.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "gssapi", None)
    with pytest.raises(MissingExtraError, match=r"aiocoord\[kerberos\]") as caught:
        SaslKerberos()
    assert isinstance(caught.value, ImportError)
    assert caught.value.extra == "kerberos"
    assert caught.value.package == "gssapi"


# ----------------------------------------------------------------- end to end, ZooKeeper


class CountingKerberos:
    """SaslKerberos that counts its exchanges (one per connection) and their hosts."""

    def __init__(self, inner: SaslKerberos) -> None:
        self.inner = inner
        self.hosts: list[str] = []

    def exchange(self, host: str) -> KerberosExchange:
        self.hosts.append(host)
        return self.inner.exchange(host)


@pytest_asyncio.fixture
async def realm(kdc: KerberosKDC, use_env: UseEnv) -> KerberosKDC:
    """alice and bob in a client keytab; their tickets go to a cache collection, so
    clients of both principals run in this one process."""
    await kdc.add_principal("bob")
    keytab = kdc.directory / "clients.keytab"
    await kdc.keytab("alice", keytab)
    await kdc.keytab("bob", keytab)
    collection = kdc.directory / "ccaches"
    await anyio.Path(collection).mkdir()
    env = kdc.environment(client_keytab=keytab)
    env["KRB5CCNAME"] = f"DIR:{collection}"
    use_env(env)
    return kdc


def as_user(kdc: KerberosKDC, name: str) -> SaslKerberos:
    return SaslKerberos(principal=kdc.principal(name))


def only(principal: str) -> list[ACL]:
    return [ACL(Perm.ALL, "sasl", principal)]


async def test_a_kerberos_server_takes_principals_and_sasl_acls_keep_others_out(
    realm: KerberosKDC,
) -> None:
    alice_id = realm.principal("alice")
    async with (
        ZooKeeperServer(kerberos=realm, require_sasl=True) as server,
        aiocoord.connect(server.connect_string, sasl=as_user(realm, "alice")) as alice,
        aiocoord.connect(server.connect_string, sasl=as_user(realm, "bob")) as bob,
        asyncio.timeout(60),
    ):
        await alice.create("/alice", b"mine", acl=only(alice_id))
        await alice.set("/alice", b"still mine")
        with pytest.raises(aiocoord.NoAuthError):
            await bob.set("/alice", b"bob was here")
        with pytest.raises(aiocoord.NoAuthError):
            await bob.get("/alice")
        data, stat = await alice.get("/alice")
        assert (data, stat.version) == (b"still mine", 1)
        async with aiocoord.Mutex(alice, "/r/mutex") as mutex:
            assert mutex.is_held
            contender = aiocoord.Mutex(bob, "/r/mutex")
            assert not await contender.acquire(timeout=0.2)
        counter = aiocoord.AtomicLong(alice, "/r/counter")
        assert (await counter.increment()).post_value == 1
        assert (await aiocoord.AtomicLong(bob, "/r/counter").increment()).post_value == 2
        async with aiocoord.connect(server.connect_string) as anonymous:
            with pytest.raises(aiocoord.SaslRequiredError):
                await anonymous.get("/")


async def test_the_session_survives_a_restart_with_a_fresh_exchange(
    realm: KerberosKDC, state_log
) -> None:
    # The identity without the realm, as operators often configure it.
    async with ZooKeeperServer(
        kerberos=realm, require_sasl=True, kerberos_remove_realm_from_principal=True
    ) as server:
        sasl = CountingKerberos(as_user(realm, "alice"))
        async with aiocoord.connect(server.connect_string, sasl=sasl) as client:
            log = state_log(client)
            session = client.session_id
            await client.create("/restart", b"0", acl=only("alice"))
            await client.create("/restart-eph", ephemeral=True)
            assert sasl.hosts == ["127.0.0.1"]
            await server.stop()
            async with asyncio.timeout(10):
                await log.wait_for(ConnectionState.SUSPENDED)
            await server.start()
            async with asyncio.timeout(30):
                await log.wait_for(ConnectionState.RECONNECTED)
            assert client.session_id == session
            assert len(sasl.hosts) >= 2  # a new exchange on the new connection
            await client.set("/restart", b"1")  # the connection is alice's again
            assert await client.exists("/restart-eph") is not None


async def test_an_expired_ticket_fails_the_next_start_fast(
    kdc: KerberosKDC, use_env: UseEnv
) -> None:
    cache = await kdc.kinit("alice", password=PASSWORD, lifetime=2)
    use_env(kdc.environment(ccache=cache))
    async with ZooKeeperServer(kerberos=kdc, require_sasl=True) as server:
        await kdc.wait_expired(cache)
        client = aiocoord.connect(server.connect_string, sasl=SaslKerberos(), start_timeout=30)
        started_at = anyio.current_time()
        with pytest.raises(AuthFailedError, match="expired ticket") as caught:
            await client.start()
        assert anyio.current_time() - started_at < 5
        assert client.closed
        assert caught.value.mechanism == "GSSAPI"


@pytest.mark.ensemble
async def test_an_ensemble_with_kerberos_quorum_sasl_fails_over_with_a_fresh_exchange(
    realm: KerberosKDC, state_log
) -> None:
    alice_id = realm.principal("alice")
    async with ZooKeeperEnsemble(3, kerberos=realm, require_sasl=True) as ensemble:
        config = (ensemble.members[0].data_dir / "zoo.cfg").read_text()
        assert "quorum.auth.serverRequireSasl=true" in config
        assert "quorum.auth.learnerRequireSasl=true" in config
        jaas = (ensemble.members[0].data_dir / "jaas.conf").read_text()
        assert "QuorumLearner {\n    com.sun.security.auth.module.Krb5LoginModule" in jaas
        sasl = CountingKerberos(as_user(realm, "alice"))
        async with (
            aiocoord.connect(ensemble.connect_string, sasl=sasl) as client,
            aiocoord.connect(ensemble.connect_string, sasl=as_user(realm, "bob")) as bob,
        ):
            log = state_log(client)
            session = client.session_id
            await client.create("/e", b"0", acl=only(alice_id))
            host = client.connected_to
            assert host is not None
            member = next(m for m in ensemble.members if m.port == host[1])
            await member.kill()
            async with asyncio.timeout(30):
                await log.wait_for(ConnectionState.RECONNECTED)
            assert client.session_id == session
            assert client.connected_to != host
            assert len(sasl.hosts) >= 2
            await client.retry(client.set, "/e", b"1")
            with pytest.raises(aiocoord.NoAuthError):
                await bob.retry(bob.set, "/e", b"bob")
            async with aiocoord.Mutex(client, "/e-lock") as mutex:
                assert mutex.is_held
            assert (await aiocoord.AtomicLong(bob, "/e-count").increment()).post_value == 1


async def java_client(kdc: KerberosKDC, user: str, connect: str, *command: str) -> str:
    """Run one ZooKeeperMain command as *user*, a Java client with a JAAS Client section
    (Krb5LoginModule, its keytab), as a Java service on a Kerberos ensemble does."""
    keytab = await kdc.keytab(user, kdc.directory / f"java-{user}.keytab")
    jaas = anyio.Path(kdc.directory / f"java-{user}.jaas")
    await jaas.write_text(
        "Client {\n  com.sun.security.auth.module.Krb5LoginModule required\n"
        f'  useKeyTab=true keyTab="{keytab}" storeKey=true useTicketCache=false\n'
        f'  principal="{kdc.principal(user)}";\n}};\n'
    )
    result = await anyio.run_process(
        [
            find_java(),
            f"-Djava.security.auth.login.config={jaas}",
            f"-Djava.security.krb5.conf={kdc.krb5_conf}",
            "-cp",
            find_zookeeper_classpath(),
            "org.apache.zookeeper.ZooKeeperMain",
            "-server",
            connect,
            *command,
        ],
        check=False,
    )
    return (result.stdout + result.stderr).decode(errors="replace")


async def test_a_java_client_and_aiocoord_share_a_principal_s_node(realm: KerberosKDC) -> None:
    alice_id = realm.principal("alice")
    async with (
        ZooKeeperServer(kerberos=realm, require_sasl=True) as server,
        aiocoord.connect(server.connect_string, sasl=as_user(realm, "alice")) as alice,
    ):
        await alice.create("/shared", b"from-aiocoord", acl=only(alice_id))
        seen = await java_client(realm, "alice", server.connect_string, "get", "/shared")
        assert "from-aiocoord" in seen, seen
        refused = await java_client(realm, "bob", server.connect_string, "get", "/shared")
        assert "from-aiocoord" not in refused
        assert "Insufficient permission" in refused, refused
