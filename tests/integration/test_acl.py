"""Security: every recipe's nodes carry its ACL, and strangers are kept out.

With digest authentication and ``CREATOR_ALL_ACL``, a client without the
owner's credentials (none, or a wrong password: ZooKeeper's digest scheme has
no password to check, so a wrong one is simply another identity) cannot
delete, overwrite, join or drain a lock, semaphore, lease, counter, barrier,
election, queue or group: it gets NoAuthError at once (each attempt is bounded,
so a hang fails the test), and the owner's recipe works on as before.

Also here: credentials the server refuses fail ``connect`` with
AuthFailedError (ZooKeeper's KeyAuthenticationProvider checks a key, so it
can refuse one), and an unknown scheme does too.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

import aiocoord
from aiocoord import (
    ACL,
    CREATOR_ALL_ACL,
    AtomicBytes,
    AtomicInt,
    AtomicLong,
    AuthFailedError,
    Barrier,
    DelayQueue,
    DoubleBarrier,
    GroupMember,
    IdQueue,
    LeaderElection,
    LeaderLatch,
    Lease,
    Mutex,
    NoAuthError,
    Perm,
    PriorityQueue,
    Queue,
    ReadWriteLock,
    Semaphore,
    SharedCount,
)
from aiocoord.testing import (
    ZooKeeperEnsemble,
    ZooKeeperServer,
    ZooKeeperTarget,
    drop_connection,
    four_letter_word,
)

pytestmark = pytest.mark.timeout(60)

OWNER = ("alice", "secret")
AT_ONCE = 2.0
"""A refusal takes one round trip (plus a cleanup look): well under this."""
NEVER_HANG = 10.0

ClientFactory = Callable[..., aiocoord.Client]


def owner_acl() -> list[ACL]:
    """What CREATOR_ALL_ACL becomes on the server for the owner's nodes."""
    return [aiocoord.ACL.digest(*OWNER)]


@pytest_asyncio.fixture
async def owner(client_factory: ClientFactory) -> AsyncIterator[aiocoord.Client]:
    """The owner, authenticated; at teardown it deletes what it protected (nobody
    else could)."""
    client = client_factory(auth=[("digest", ":".join(OWNER))])
    await client.start()
    yield client
    if not client.closed:
        for top in ("/secure", "/deep"):
            await client.delete_recursive(top)


@pytest_asyncio.fixture
async def strangers(client_factory: ClientFactory) -> list[aiocoord.Client]:
    """Clients without the owner's credentials: none at all, and a wrong password."""
    clients = [client_factory(), client_factory(auth=[("digest", "alice:guess")])]
    await asyncio.gather(*(c.start() for c in clients))
    return clients


async def refused(attempt: Awaitable[object]) -> NoAuthError:
    """``attempt`` fails with NoAuthError, at once; never a hang."""
    started = time.monotonic()
    async with asyncio.timeout(NEVER_HANG):
        with pytest.raises(NoAuthError) as info:
            await attempt
    elapsed = time.monotonic() - started
    assert elapsed < AT_ONCE, f"NoAuthError after {elapsed:.1f} s"
    return info.value


async def cannot_touch(stranger: aiocoord.Client, *nodes: str) -> None:
    """``stranger`` can neither overwrite nor delete any of ``nodes`` (nor read them)."""
    for node in nodes:
        await refused(stranger.set(node, b"overwritten"))
        await refused(stranger.delete(node))
        await refused(stranger.delete(node, recursive=True))
        await refused(stranger.get(node))
        await refused(stranger.set_acl(node, aiocoord.OPEN_ACL_UNSAFE))


async def tree(client: aiocoord.Client, path: str) -> dict[str, list[ACL]]:
    """Every node at and below ``path`` with its ACL."""
    found = {path: (await client.get_acl(path))[0]}
    for name in await client.children(path):
        found |= await tree(client, f"{path}/{name}")
    return found


# --- the ACL goes on every node, parents included ------------------------------------------


async def _queue_take(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    queue: Queue[bytes] = Queue(client, "/deep/q/queue", acl=acl, dead_letter="/deep/q/dead")
    await queue.put(b"job")
    await queue.put(b"next")
    async with queue.take():
        await queue.move_aside("qn-0000000001", "/deep/q/dead")
        yield


async def _semaphore(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    semaphore = Semaphore(client, "/deep/s/semaphore", 2, acl=acl)
    async with semaphore, semaphore._mutex:  # the lock node too (it goes on release)
        yield


async def _rw_lock(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    lock = ReadWriteLock(client, "/deep/rw/lock", acl=acl)
    async with lock.write_lock, lock.read_lock:
        yield


async def _lease(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    lease = Lease(client, "/deep/l/lease", 30, participant_id="owner", acl=acl)
    assert await lease.try_acquire()
    try:
        yield
    finally:
        await lease.release()


async def _counters(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    await AtomicLong(client, "/deep/c/long", acl=acl).increment()
    await AtomicInt(client, "/deep/c/int", acl=acl).initialize(5)
    await AtomicBytes(client, "/deep/c/bytes", acl=acl).update(lambda old: old + b"x")
    async with SharedCount(client, "/deep/c/shared", 3, acl=acl):
        yield


async def _barriers(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    await Barrier(client, "/deep/b/gate", acl=acl).set_barrier()
    async with DoubleBarrier(client, "/deep/b/double", 1, acl=acl).entered():
        yield


async def _elections(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    election = LeaderElection(client, "/deep/e/election", participant_id="owner", acl=acl)
    async with (
        LeaderLatch(client, "/deep/e/latch", participant_id="owner", acl=acl),
        election.hold(),
    ):
        yield


async def _group(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    async with GroupMember(client, "/deep/g/group", participant_id="owner", data=b"addr", acl=acl):
        yield


async def _queues(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    await PriorityQueue(client, "/deep/qs/priority", acl=acl).put(b"x", 1)
    await DelayQueue(client, "/deep/qs/delay", acl=acl).put(b"x", delay=60)
    await IdQueue(client, "/deep/qs/id", acl=acl).put(b"x", "job-1")
    yield


async def _mutex(client: aiocoord.Client, acl: Any) -> AsyncIterator[None]:
    async with Mutex(client, "/deep/m/lock", acl=acl):
        yield


RECIPE_NODES = {
    "mutex": _mutex,
    "read-write lock": _rw_lock,
    "semaphore": _semaphore,
    "lease": _lease,
    "counters": _counters,
    "barriers": _barriers,
    "elections": _elections,
    "group": _group,
    "queue take and dead letters": _queue_take,
    "queue variants": _queues,
}


@pytest.mark.parametrize("recipe", RECIPE_NODES)
async def test_every_node_a_recipe_makes_parents_included_carries_its_acl(
    owner: aiocoord.Client, recipe: str
) -> None:
    made = contextlib.asynccontextmanager(RECIPE_NODES[recipe])
    async with made(owner, CREATOR_ALL_ACL):
        nodes = await tree(owner, "/deep")
    # Missing parents were made with the recipe's ACL, and so was every node.
    assert len(nodes) > 3
    assert {path: acl for path, acl in nodes.items() if acl != owner_acl()} == {}


async def test_a_recipe_without_acl_uses_the_clients_default_acl(
    client_factory: ClientFactory,
) -> None:
    # The namespace first, made open by an ordinary client: a client creates its
    # namespace with its default ACL, and the tests' common root must stay open.
    await client_factory().start()
    owner = client_factory(auth=[("digest", ":".join(OWNER))], default_acl=CREATOR_ALL_ACL)
    await owner.start()
    try:
        async with Mutex(owner, "/deep/default/lock"), Semaphore(owner, "/deep/default/s", 1):
            nodes = await tree(owner, "/deep")
        assert {path: acl for path, acl in nodes.items() if acl != owner_acl()} == {}
        # An explicit acl= wins over the default.
        readable = [ACL(Perm.READ, "world", "anyone"), ACL(Perm.ALL, "auth", "")]
        counter = AtomicLong(owner, "/deep/explicit/count", acl=readable)
        await counter.increment()
        acl, _stat = await owner.get_acl("/deep/explicit/count")
        assert acl == [ACL(Perm.READ, "world", "anyone"), *owner_acl()]
    finally:
        await owner.delete_recursive("/deep")


# --- strangers are kept out -------------------------------------------------------------


async def test_strangers_cannot_join_or_break_a_lock(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    lock = Mutex(owner, "/secure/lock", acl=CREATOR_ALL_ACL)
    await lock.acquire()
    node = lock.node
    for stranger in strangers:
        theirs = Mutex(stranger, "/secure/lock")
        await refused(theirs.acquire(timeout=1))
        await refused(theirs.try_acquire())
        await refused(theirs.participants())
        await refused(ReadWriteLock(stranger, "/secure/lock").write_lock.acquire(timeout=1))
        await cannot_touch(stranger, node, "/secure/lock")
        assert not theirs.is_held
    # The owner's lock stands, alone, and works on.
    assert lock.is_owned_by_current_task()
    assert [p.node for p in await lock.participants()] == [node]
    await lock.release()
    async with lock:
        assert len(await lock.participants()) == 1


async def test_a_contender_a_stranger_may_not_read_fails_its_listing_not_vanishes(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    # The lock path is open (anyone may list it); only the owner's node is guarded.
    await strangers[0].ensure_path("/secure/listed")
    lock = Mutex(owner, "/secure/listed", acl=CREATOR_ALL_ACL)
    await lock.acquire()
    for stranger in strangers:
        # Leaving the holder out would tell the stranger that nobody holds the lock.
        await refused(Mutex(stranger, "/secure/listed").participants())
    assert [p.node for p in await lock.participants()] == [lock.node]
    await lock.release()


async def test_strangers_cannot_take_or_drop_semaphore_leases_or_a_lease(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    semaphore = Semaphore(owner, "/secure/semaphore", 1, acl=CREATOR_ALL_ACL)
    lease = Lease(owner, "/secure/lease", 30, participant_id="owner", acl=CREATOR_ALL_ACL)
    async with semaphore as held:
        assert await lease.try_acquire()
        assert lease.node is not None
        for stranger in strangers:
            await refused(Semaphore(stranger, "/secure/semaphore", 5).acquire(timeout=1))
            await refused(
                Lease(stranger, "/secure/lease", 30, participant_id="intruder").try_acquire()
            )
            await cannot_touch(stranger, held.node, lease.node, "/secure/semaphore")
        assert not held.lost and lease.is_held
        await lease.renew()
        await lease.release()
    assert await semaphore.participants() == []
    leases = await semaphore.acquire(1, timeout=5)
    assert leases is not None
    await leases[0].release()


async def test_strangers_cannot_read_or_change_a_counter(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    counter = AtomicLong(owner, "/secure/counter", acl=CREATOR_ALL_ACL)
    count = SharedCount(owner, "/secure/shared", 7, acl=CREATOR_ALL_ACL)
    assert (await counter.add(41)).succeeded
    async with count:
        for stranger in strangers:
            theirs = AtomicLong(stranger, "/secure/counter")
            await refused(theirs.increment())
            await refused(theirs.get())
            await refused(theirs.force_set(0))
            await refused(theirs.set(0))
            await refused(theirs.initialize(0))
            await refused(SharedCount(stranger, "/secure/shared", 0).start())
            await cannot_touch(stranger, "/secure/counter", "/secure/shared")
        assert (await counter.increment()).post_value == 42
        assert await count.try_set_count(count.versioned_value, 8)
        assert count.count == 8


async def exists_checks_read(zookeeper: ZooKeeperTarget) -> bool:
    """Whether the server refuses ``exists`` on a node the caller may not READ: since
    ZooKeeper 3.8.4 and 3.9.2 (ZOOKEEPER-2590) it does; 3.8.0 answers anyone."""
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    srvr = await four_letter_word(host, int(port), "srvr")
    version = re.search(r"version: (\d+)\.(\d+)\.(\d+)", srvr)
    assert version, srvr
    found = tuple(int(part) for part in version.groups())
    return found >= (3, 9, 2) or (3, 8, 4) <= found < (3, 9)


async def test_strangers_cannot_open_a_barrier_or_join_a_double_barrier(
    owner: aiocoord.Client, strangers: list[aiocoord.Client], zookeeper: ZooKeeperTarget
) -> None:
    gate = Barrier(owner, "/secure/gate", acl=CREATOR_ALL_ACL)
    await gate.set_barrier()
    first = DoubleBarrier(owner, "/secure/double", 2, acl=CREATOR_ALL_ACL)
    entering = asyncio.ensure_future(first.enter(timeout=20))
    try:
        async with (
            asyncio.timeout(NEVER_HANG),
            contextlib.aclosing(owner.children_changes("/secure/double")) as changes,
        ):
            async for names in changes:  # until the first participant's node is there
                if names:
                    break
        for stranger in strangers:
            await refused(Barrier(stranger, "/secure/gate").remove_barrier())
            await refused(Barrier(stranger, "/secure/gate").set_barrier())
            if await exists_checks_read(zookeeper):  # it may not even see the barrier
                await refused(Barrier(stranger, "/secure/gate").wait_on_barrier(timeout=0))
            else:
                assert not await Barrier(stranger, "/secure/gate").wait_on_barrier(timeout=0)
            await refused(DoubleBarrier(stranger, "/secure/double", 2).enter(timeout=1))
            await cannot_touch(stranger, "/secure/gate", "/secure/double")
        assert not entering.done()
        second = DoubleBarrier(owner, "/secure/double", 2, acl=CREATOR_ALL_ACL)
        assert await second.enter(timeout=10)
        assert await entering
        await asyncio.gather(first.leave(timeout=10), second.leave(timeout=10))
    finally:
        if not entering.done():
            entering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entering
    await gate.remove_barrier()
    assert await gate.wait_on_barrier(timeout=0)


async def test_strangers_cannot_enter_or_end_an_election(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    election = LeaderElection(
        owner, "/secure/election", participant_id="owner", acl=CREATOR_ALL_ACL
    )
    latch = LeaderLatch(owner, "/secure/latch", participant_id="owner", acl=CREATOR_ALL_ACL)
    async with latch, election.hold():
        assert await latch.wait_leader(timeout=10)
        latch_node = latch.node
        assert latch_node is not None
        term_node = (await election.participants())[0].node
        for stranger in strangers:
            other = LeaderElection(stranger, "/secure/election", participant_id="intruder")

            async def lead(other: LeaderElection = other) -> None:
                async with other.hold(timeout=1):
                    raise AssertionError("a stranger led")

            await refused(lead())
            await refused(LeaderLatch(stranger, "/secure/latch", participant_id="intruder").start())
            await refused(other.participants())
            await cannot_touch(stranger, term_node, latch_node, "/secure/election")
        assert election.has_leadership and latch.has_leadership
        assert [c.id for c in await election.participants()] == ["owner"]
    async with election.hold(timeout=10):
        assert election.has_leadership


async def test_strangers_cannot_put_drain_or_remove_queue_items(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    queue: Queue[bytes] = Queue(owner, "/secure/queue", acl=CREATOR_ALL_ACL)
    ids: IdQueue[bytes] = IdQueue(owner, "/secure/ids", acl=CREATOR_ALL_ACL)
    await queue.put_many([b"one", b"two"])
    await ids.put(b"job", "j1")
    item = "/secure/queue/qn-0000000000"
    for stranger in strangers:
        theirs: Queue[bytes] = Queue(stranger, "/secure/queue")
        await refused(theirs.get(timeout=1))
        await refused(theirs.get_nowait())
        await refused(theirs.peek())
        await refused(theirs.size())
        await refused(theirs.put(b"spam"))

        async def take(theirs: Queue[bytes] = theirs) -> None:
            async with theirs.take(timeout=1):
                raise AssertionError("a stranger took an item")

        await refused(take())
        await refused(IdQueue(stranger, "/secure/ids").remove("j1"))
        await cannot_touch(stranger, item, "/secure/queue")
    assert await queue.size() == 2
    assert await ids.contains("j1")
    assert await queue.get(timeout=5) == b"one"
    async with queue.take(timeout=5) as taken:
        assert taken == b"two"
    assert await queue.size() == 0


async def test_strangers_cannot_join_read_or_evict_a_group(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    member = GroupMember(
        owner, "/secure/group", participant_id="owner", data=b"10.0.0.1", acl=CREATOR_ALL_ACL
    )
    async with member:
        for stranger in strangers:
            intruder = GroupMember(
                stranger, "/secure/group", participant_id="intruder", data=b"evil"
            )
            await refused(intruder.start())
            assert not intruder.is_member
            await refused(intruder.participants())
            await cannot_touch(stranger, member.path, "/secure/group")
        assert member.is_member
        await member.update(b"10.0.0.2")
        assert [(p.id, p.data) for p in await member.participants()] == [("owner", b"10.0.0.2")]


# --- credentials the server refuses -------------------------------------------------------


@pytest_asyncio.fixture
async def key_checking_zookeeper() -> AsyncIterator[ZooKeeperServer]:
    """A server whose ``key`` scheme (ZooKeeper's KeyAuthenticationProvider) refuses
    any key that is not a multiple of the number in its ``/key`` node."""
    provider = "org.apache.zookeeper.server.auth.KeyAuthenticationProvider"
    async with ZooKeeperServer(jvm_args=[f"-Dzookeeper.authProvider.key={provider}"]) as server:
        async with aiocoord.connect(server.connect_string) as admin:
            await admin.create("/key", b"7")
        yield server


async def test_refused_credentials_fail_connect_with_a_clear_auth_failed_error(
    key_checking_zookeeper: ZooKeeperServer,
) -> None:
    server = key_checking_zookeeper
    client = aiocoord.connect(server.connect_string, auth=[("key", "13")])
    started = time.monotonic()
    with pytest.raises(AuthFailedError) as info:
        await client.start(timeout=30)
    assert time.monotonic() - started < AT_ONCE  # no retrying until the start timeout
    assert info.value.scheme == "key"
    assert "refused the 'key' credentials" in str(info.value)
    assert client.closed
    # The right key is taken, on the same server.
    async with aiocoord.connect(server.connect_string, auth=[("key", "14")]) as client:
        await client.create("/in", acl=CREATOR_ALL_ACL)
        acl, _stat = await client.get_acl("/in")
        assert [(a.scheme, a.perms) for a in acl] == [("key", Perm.ALL)]


async def test_an_unknown_auth_scheme_fails_connect(zookeeper: ZooKeeperTarget) -> None:
    client = aiocoord.connect(zookeeper.connect_string, auth=[("kerberos-please", "me")])
    with pytest.raises(AuthFailedError, match="'kerberos-please'"):
        await client.start(timeout=30)
    assert client.closed


async def test_a_wrong_digest_password_is_another_identity_not_a_failure(
    owner: aiocoord.Client, client_factory: ClientFactory
) -> None:
    """ZooKeeper's digest scheme keeps no passwords: it cannot refuse a wrong one,
    only derive another identity from it, which the ACLs then keep out."""
    await owner.create("/secure", b"mine", acl=CREATOR_ALL_ACL)
    wrong = client_factory(auth=[("digest", "alice:guess")])
    await wrong.start()
    assert wrong.state is aiocoord.ConnectionState.CONNECTED
    await refused(wrong.get("/secure"))


async def test_delete_rights_come_from_the_parent(
    owner: aiocoord.Client, strangers: list[aiocoord.Client]
) -> None:
    """ZooKeeper checks a delete against the parent's ACL, not the node's own: a
    protected recipe root under an open parent can be deleted by anyone once it
    is empty (and then made again, with their ACL). A parent that is protected
    too closes that: what the README's section on ACLs advises."""
    stranger = strangers[0]
    await owner.create("/exposed", acl=CREATOR_ALL_ACL)  # its parent (the namespace) is open
    await refused(stranger.set("/exposed", b"x"))
    await stranger.delete("/exposed")  # allowed: the open parent grants DELETE
    await stranger.create("/exposed", acl=aiocoord.OPEN_ACL_UNSAFE)  # and squatted
    await stranger.delete("/exposed")
    # Under a protected parent the same node can be neither deleted nor replaced.
    await owner.ensure_path("/secure/root", acl=CREATOR_ALL_ACL)
    await refused(stranger.delete("/secure/root"))
    await refused(stranger.create("/secure/other"))
    assert await owner.exists("/secure/root") is not None


# --- add_auth() at runtime -----------------------------------------------------------------


async def reconnected(client: aiocoord.Client) -> None:
    """Cut ``client``'s connection and return once it has the same session on a new one."""
    session = client.session_id
    async with asyncio.timeout(NEVER_HANG), contextlib.aclosing(client.state_changes()) as states:
        drop_connection(client)
        async for state in states:
            if state is aiocoord.ConnectionState.RECONNECTED:
                break
    assert client.session_id == session


async def test_add_auth_opens_a_digest_node_now_and_after_a_reconnect(
    owner: aiocoord.Client, client_factory: ClientFactory
) -> None:
    await owner.create("/secure", b"mine", acl=[ACL.digest(*OWNER)])
    late = client_factory()
    await late.start()
    await refused(late.set("/secure", b"not yet"))
    await late.add_auth("digest", ":".join(OWNER))
    assert (await late.set("/secure", b"one")).version == 1
    # The credentials go out again, before anything else, on every new connection.
    await reconnected(late)
    assert (await late.set("/secure", b"two")).version == 2
    await reconnected(late)
    await late.create("/secure/made-after", acl=CREATOR_ALL_ACL)
    acl, _stat = await late.get_acl("/secure/made-after")
    assert acl == owner_acl()
    assert (await owner.get("/secure"))[0] == b"two"


async def test_a_refused_add_auth_raises_and_is_not_kept(
    key_checking_zookeeper: ZooKeeperServer,
) -> None:
    server = key_checking_zookeeper
    async with aiocoord.connect(server.connect_string) as client:
        started = time.monotonic()
        with pytest.raises(AuthFailedError, match="add_auth") as info:
            await client.add_auth("key", "13")
        assert time.monotonic() - started < AT_ONCE
        assert info.value.scheme == "key"
        assert "13" not in str(info.value)
        with pytest.raises(AuthFailedError, match="'kerberos-please'"):
            await client.add_auth("kerberos-please", "me")
        # The server dropped the connection after refusing; the client came back
        # without the refused key (sent again, it would close the client).
        assert not client.closed
        await client.create("/open")
        await reconnected(client)
        await client.create("/still-open")
        await client.add_auth("key", "14")
        await client.create("/keyed", acl=CREATOR_ALL_ACL)
        await reconnected(client)
        acl, _stat = await client.get_acl("/keyed")
        assert [(a.scheme, a.perms) for a in acl] == [("key", Perm.ALL)]
        await client.set("/keyed", b"still mine")


# --- a per-path ACL provider ------------------------------------------------------------------


async def test_an_acl_provider_sets_the_acl_of_every_node_recipes_make(
    client_factory: ClientFactory,
) -> None:
    await client_factory().start()  # the namespace, open (see the default_acl test)
    asked: list[str] = []
    readable = [ACL.digest(*OWNER), ACL.world(Perm.READ)]

    def provider(path: str) -> list[ACL] | None:
        asked.append(path)
        if path.startswith("/deep/readable"):
            return readable
        return owner_acl() if path.startswith("/deep") else None

    owner = client_factory(auth=[("digest", ":".join(OWNER))], acl_provider=provider)
    await owner.start()
    try:
        async with (
            Mutex(owner, "/deep/m/lock"),
            LeaderLatch(owner, "/deep/e/latch", participant_id="owner"),
            GroupMember(owner, "/deep/g/group", participant_id="owner", data=b"addr"),
        ):
            await AtomicLong(owner, "/deep/c/long").increment()
            await Queue(owner, "/deep/q/queue").put(b"job")
            await owner.create("/deep/readable/a/b", make_parents=True)
            nodes = await tree(owner, "/deep")
        expected = {p: readable if p.startswith("/deep/readable") else owner_acl() for p in nodes}
        assert nodes == expected
        assert len(nodes) > 12
        # Asked with the caller's paths (no namespace), parents included.
        assert {"/deep", "/deep/m", "/deep/readable", "/deep/readable/a"} <= set(asked)
        assert all(path.startswith("/deep") for path in asked)
        # acl= wins over the provider; None from it means default_acl.
        await owner.create("/deep/given", acl=aiocoord.OPEN_ACL_UNSAFE)
        assert (await owner.get_acl("/deep/given"))[0] == list(aiocoord.OPEN_ACL_UNSAFE)
        await owner.create("/elsewhere")
        assert (await owner.get_acl("/elsewhere"))[0] == list(aiocoord.OPEN_ACL_UNSAFE)
        # Strangers are kept out of the provider's nodes.
        stranger = client_factory()
        await stranger.start()
        await refused(stranger.set("/deep/c/long", b"0"))
        assert (await stranger.get("/deep/readable/a"))[0] == b""
        await refused(stranger.set("/deep/readable/a", b"x"))
    finally:
        await owner.delete_recursive("/deep")
        await owner.delete_recursive("/elsewhere")


async def test_a_provider_answer_that_is_no_acl_fails_the_create_naming_the_path(
    client_factory: ClientFactory,
) -> None:
    client = client_factory(acl_provider=lambda path: [] if "bad" in path else None)
    await client.start()
    with pytest.raises(aiocoord.InvalidArgumentError, match="acl_provider") as info:
        await Mutex(client, "/bad/lock").acquire(timeout=5)
    assert info.value.path is not None and info.value.path.startswith("/bad")
    assert await client.exists("/bad") is None  # nothing was sent


# --- identities: ip and x509 ---------------------------------------------------------------


async def test_an_ip_acl_admits_clients_from_that_address_only(
    client_factory: ClientFactory,
) -> None:
    client = client_factory()
    await client.start()
    await client.create("/here", b"1", acl=[ACL.ip("127.0.0.1"), ACL.world(Perm.READ)])
    await client.create("/there", b"1", acl=[ACL.ip("10.0.0.0/8"), ACL.world(Perm.READ)])
    try:
        assert (await client.set("/here", b"2")).version == 1
        await refused(client.set("/there", b"2"))
        await refused(client.delete("/there/nothing"))
        assert (await client.get("/there"))[0] == b"1"
        await client.set_acl("/here", [ACL.ip("127.0.0.0/24")])
        assert (await client.get_acl("/here"))[0] == [ACL.ip("127.0.0.0/24")]
        await client.set("/here", b"3")
    finally:
        await client.delete("/here")
        await client.delete("/there")  # the open parent grants DELETE


@pytest_asyncio.fixture
async def x509_zookeeper() -> AsyncIterator[ZooKeeperServer]:
    """TLS with client certificates required: a client is ``x509:<its subject>``.
    The SASL provider too, so that sasl ids can be set (and checked) there."""
    sasl = {"authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"}
    async with ZooKeeperServer(tls=True, tls_client_auth=True, extra_config=sasl) as server:
        yield server


async def test_a_client_certificate_owns_its_x509_node_and_another_is_kept_out(
    x509_zookeeper: ZooKeeperServer,
) -> None:
    server = x509_zookeeper
    alice = await server.make_client_certificate("alice")
    bob = await server.make_client_certificate("bob")
    assert alice.subject == "CN=alice,OU=clients,O=aiocoord-test"
    connect = server.secure_connect_string
    async with (
        aiocoord.connect(connect, ssl_context=server.client_ssl_context(alice)) as mine,
        aiocoord.connect(connect, ssl_context=server.client_ssl_context(bob)) as theirs,
    ):
        # Written loosely, the DN still matches the identity the server records.
        await mine.create(
            "/x509", b"alice's", acl=[ACL.x509("cn=alice, ou=clients, o=aiocoord-test")]
        )
        await mine.create("/x509/kid", acl=CREATOR_ALL_ACL)
        acl, _stat = await mine.get_acl("/x509/kid")
        assert acl == [ACL.x509(alice.subject)] == [ACL(Perm.ALL, "x509", alice.subject)]
        assert (await mine.set("/x509", b"still alice's")).version == 1
        for node in ("/x509", "/x509/kid"):
            await refused(theirs.set(node, b"bob's"))
            await refused(theirs.get(node))
            await refused(theirs.set_acl(node, aiocoord.OPEN_ACL_UNSAFE))
        await refused(theirs.delete("/x509/kid"))
        await refused(theirs.create("/x509/bobs"))
        data, stat = await mine.get("/x509")
        assert (data, stat.version, stat.num_children) == (b"still alice's", 1, 1)
        assert (await mine.get_acl("/x509"))[0] == [ACL.x509(alice.subject)]
        await mine.delete("/x509", recursive=True)
    # Without a certificate there is no connection at all.
    bare = aiocoord.connect(connect, ssl_context=server.client_ssl_context(), start_timeout=1)
    with pytest.raises(aiocoord.OperationTimeoutError):
        await bare.start()


async def test_the_server_takes_every_id_the_helpers_write_as_it_is(
    x509_zookeeper: ZooKeeperServer,
) -> None:
    server = x509_zookeeper
    me = await server.make_client_certificate("alice")
    entries = [
        ACL.x509(me.subject),
        ACL.x509("CN=a\\,b+UID=x, O=y\\=z, DC=example, DC=com", Perm.READ),
        ACL.digest("bob", "pw", Perm.READ | Perm.WRITE),
        ACL.ip("10.1.2.3/8", Perm.READ),
        ACL.ip("192.168.0.1", Perm.READ),
        ACL.sasl("carol", Perm.READ),
        ACL.kerberos("app/node1.example.com@EXAMPLE.COM", Perm.READ),
        ACL.kerberos("app/node1.example.com@EXAMPLE.COM", Perm.READ, remove_realm=True),
        ACL.world(Perm.READ),
    ]
    async with aiocoord.connect(
        server.secure_connect_string, ssl_context=server.client_ssl_context(me)
    ) as client:
        await client.create("/ids", acl=entries)
        acl, _stat = await client.get_acl("/ids")
        assert acl == entries
        await client.delete("/ids")


@pytest.mark.ensemble
async def test_identities_carry_over_a_failover() -> None:
    """On the member it fails over to, the client is its certificate's x509 identity
    again (from the handshake) and the digest identity add_auth() gave it (re-sent)."""
    async with ZooKeeperEnsemble(3, tls=True, tls_client_auth=True) as ensemble:
        alice = await ensemble.make_client_certificate("alice")
        bob = await ensemble.make_client_certificate("bob")
        connect = ensemble.secure_connect_string
        async with (
            aiocoord.connect(connect, ssl_context=ensemble.client_ssl_context(alice)) as mine,
            aiocoord.connect(connect, ssl_context=ensemble.client_ssl_context(bob)) as theirs,
        ):
            await mine.add_auth("digest", ":".join(OWNER))
            await mine.create("/by-cert", acl=[ACL.x509(alice.subject)])
            await mine.create("/by-digest", acl=[ACL.digest(*OWNER)])
            host = mine.connected_to
            assert host is not None
            session = mine.session_id
            member = next(m for m in ensemble.members if m.secure_port == host[1])
            async with (
                asyncio.timeout(30),
                contextlib.aclosing(mine.state_changes()) as states,
            ):
                await member.kill()
                async for state in states:
                    if state is aiocoord.ConnectionState.RECONNECTED:
                        break
            assert mine.session_id == session and mine.connected_to not in (None, host)
            assert (await mine.set("/by-cert", b"x")).version == 1
            assert (await mine.set("/by-digest", b"x")).version == 1
            for node in ("/by-cert", "/by-digest"):
                await refused(theirs.set(node, b"bob's"))
