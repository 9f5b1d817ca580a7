"""Every client operation against a real server, and the errors each can raise."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator

import pytest

import aiocoord
from aiocoord import (
    AtomicLong,
    BadVersionError,
    EventType,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Perm,
    RetryNTimes,
)


async def test_create_get_set_delete_round_trip(coord: aiocoord.Client) -> None:
    assert await coord.create("/node", b"one") == "/node"
    data, stat = await coord.get("/node")
    assert (data, stat.version, stat.data_length) == (b"one", 0, 3)
    stat2 = await coord.set("/node", b"two", version=0)
    assert stat2.version == 1 and stat2.mzxid > stat.mzxid and stat2.czxid == stat.czxid
    assert (await coord.get("/node"))[0] == b"two"
    await coord.delete("/node", version=1)
    assert await coord.exists("/node") is None


async def test_conditional_set_and_delete_refuse_a_stale_version(coord: aiocoord.Client) -> None:
    await coord.create("/v", b"a")
    await coord.set("/v", b"b")
    with pytest.raises(BadVersionError) as info:
        await coord.set("/v", b"c", version=0)
    assert info.value.path == "/v"
    with pytest.raises(BadVersionError):
        await coord.delete("/v", version=0)
    assert (await coord.get("/v"))[0] == b"b"


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """What became unreachable only through reference cycles inside the block
    (what the cyclic collector, not reference counting, would have to free)."""
    gc.collect()
    found: list[object] = []
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found += gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_a_refused_request_leaves_no_reference_cycle(coord: aiocoord.Client) -> None:
    """A request the server refuses (a compare-and-set that lost) is freed at
    once: its error's traceback must not hold the future that holds the error.
    Contended counters make thousands of these a second."""
    await coord.create("/n", b"0")
    # Retries before queueing, so that every add here goes by compare-and-set.
    counter = AtomicLong(coord, "/c", retry=RetryNTimes(3, 0))
    await counter.increment()
    await coord.create("/c/combining")  # a combining queue: every 4th write probes it
    await counter.get()
    with cyclic_garbage() as garbage:
        for value in range(2, 42, 2):
            with pytest.raises(BadVersionError):
                await coord.set("/n", b"1", version=7)
            # Written behind the counter's back: the version it remembers is stale.
            await coord.set("/c", value.to_bytes(8, "big"))
            result = await counter.increment()
            assert result.stats.optimistic_tries == 2 and result.post_value == value + 1
            assert result.stats.queued_time == 0
    assert [type(o).__name__ for o in garbage] == []


async def test_reply_errors_are_typed_and_name_the_path(coord: aiocoord.Client) -> None:
    with pytest.raises(NoNodeError) as info:
        await coord.get("/missing")
    assert "/missing" in str(info.value) and info.value.path == "/missing"
    await coord.create("/dup")
    with pytest.raises(NodeExistsError):
        await coord.create("/dup")
    await coord.create("/dup/child")
    with pytest.raises(NotEmptyError):
        await coord.delete("/dup")
    with pytest.raises(NoNodeError):
        await coord.create("/no/parent")
    eph = await coord.create("/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        await coord.create(eph + "/child")


async def test_ephemeral_node_belongs_to_the_session_and_goes_with_it(
    coord: aiocoord.Client, client_factory
) -> None:
    other = client_factory()
    await other.start()
    await other.create("/e", ephemeral=True)
    stat = await coord.exists("/e")
    assert stat is not None and stat.ephemeral_owner == other.session_id
    _stat, watch = await coord.watch_exists("/e")
    await other.aclose()  # closing the session deletes its ephemerals at once
    assert (await watch).type is EventType.DELETED
    assert await coord.exists("/e") is None


async def test_sequential_nodes_get_increasing_ten_digit_suffixes(coord: aiocoord.Client) -> None:
    await coord.create("/q")
    made = [await coord.create("/q/item-", sequential=True) for _ in range(3)]
    suffixes = [int(p.rsplit("-", 1)[1]) for p in made]
    assert suffixes == sorted(suffixes) and len(set(suffixes)) == 3
    assert all(len(p.rsplit("-", 1)[1]) == 10 for p in made)
    # A trailing slash is valid for a sequential create: the name is only the counter.
    bare = await coord.create("/q/", sequential=True)
    assert bare.startswith("/q/") and bare[3:].isdigit()


async def test_protected_create_marks_the_name_with_a_unique_prefix(coord: aiocoord.Client) -> None:
    await coord.create("/p")
    a = await coord.create("/p/lock-", ephemeral=True, sequential=True, protected=True)
    b = await coord.create("/p/lock-", ephemeral=True, sequential=True, protected=True)
    name_a, name_b = a.rsplit("/", 1)[1], b.rsplit("/", 1)[1]
    assert name_a.startswith("_c_") and name_b.startswith("_c_")
    assert name_a.split("-lock-")[0] != name_b.split("-lock-")[0]
    assert sorted(await coord.children("/p")) == sorted([name_a, name_b])


async def test_container_node_is_removed_after_its_last_child(coord: aiocoord.Client) -> None:
    await coord.create("/box", container=True)
    await coord.create("/box/item")
    _stat, watch = await coord.watch_exists("/box")
    await coord.delete("/box/item")
    # The launched server sweeps containers every second.
    async with asyncio.timeout(30):
        assert (await watch).type is EventType.DELETED


async def test_ttl_node_is_removed_after_its_ttl(coord: aiocoord.Client) -> None:
    path, stat = await coord.create_with_stat("/ttl", b"x", ttl=0.5)
    assert path == "/ttl" and stat.version == 0
    _stat, watch = await coord.watch_exists("/ttl")
    async with asyncio.timeout(30):
        assert (await watch).type is EventType.DELETED


async def test_children_and_children_with_stat(coord: aiocoord.Client) -> None:
    await coord.create("/kids")
    for name in ("a", "b", "c"):
        await coord.create(f"/kids/{name}")
    names, stat = await coord.children_with_stat("/kids")
    assert sorted(names) == ["a", "b", "c"]
    assert stat.num_children == 3 and stat.cversion == 3
    assert sorted(await coord.children("/kids")) == ["a", "b", "c"]


async def test_ensure_path_and_create_with_parents(coord: aiocoord.Client) -> None:
    await coord.ensure_path("/a/b/c")
    await coord.ensure_path("/a/b/c")  # idempotent
    assert await coord.exists("/a/b/c") is not None
    assert await coord.create("/x/y/z", b"deep", make_parents=True) == "/x/y/z"
    assert (await coord.get("/x/y/z"))[0] == b"deep"


async def test_delete_recursive_removes_a_subtree(coord: aiocoord.Client) -> None:
    await coord.ensure_path("/t/a/b")
    await coord.create("/t/a/c")
    await coord.create("/t/d")
    await coord.delete("/t", recursive=True)
    assert await coord.exists("/t") is None
    await coord.delete_recursive("/t")  # a missing node is fine


async def test_sync_then_read(coord: aiocoord.Client) -> None:
    await coord.create("/s", b"v")
    await coord.sync("/s")
    assert (await coord.get("/s"))[0] == b"v"


async def test_transaction_applies_all_operations(coord: aiocoord.Client) -> None:
    await coord.create("/tx", b"0")
    results = await (
        coord.transaction()
        .create("/tx/new", b"n")
        .set("/tx", b"1", version=0)
        .check("/tx", 1)
        .delete("/tx/new")
        .commit()
    )
    assert results[0] == "/tx/new"
    assert isinstance(results[1], aiocoord.Stat) and results[1].version == 1
    assert results[2:] == [None, None]


async def test_failed_transaction_applies_nothing_and_names_the_culprit(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/tx", b"0")
    txn = coord.transaction().create("/tx/a").set("/tx", b"1").check("/tx", 0)
    with pytest.raises(BadVersionError) as info:
        await txn.commit()
    assert info.value.op_index == 2
    assert await coord.exists("/tx/a") is None
    assert (await coord.get("/tx"))[0] == b"0"


async def test_digest_acl_keeps_out_other_identities(
    coord: aiocoord.Client, client_factory
) -> None:
    owner = client_factory(auth=[("digest", "alice:secret")])
    stranger = client_factory(auth=[("digest", "mallory:guess")])
    await owner.start()
    await stranger.start()
    acl = [aiocoord.ACL.digest("alice", "secret")]
    await owner.create("/private", b"s3cret", acl=acl)
    assert (await owner.get("/private"))[0] == b"s3cret"
    with pytest.raises(NoAuthError):
        await stranger.get("/private")
    with pytest.raises(NoAuthError):
        await coord.set("/private", b"x")
    got, _stat = await owner.get_acl("/private")
    assert got == acl
    await owner.set_acl("/private", aiocoord.OPEN_ACL_UNSAFE)
    assert (await stranger.get("/private"))[0] == b"s3cret"


async def test_creator_all_acl_uses_the_authenticated_identity(client_factory) -> None:
    owner = client_factory(auth=[("digest", "bob:pw")])
    await owner.start()
    await owner.create("/mine", acl=aiocoord.CREATOR_ALL_ACL)
    acl, _stat = await owner.get_acl("/mine")
    assert acl == [aiocoord.ACL(Perm.ALL, "digest", aiocoord.digest_id("bob", "pw"))]


async def test_namespaces_isolate_clients(client_factory, zookeeper) -> None:
    left = client_factory(namespace=zookeeper.namespace + "/left")
    right = client_factory(namespace=zookeeper.namespace + "/right")
    root = client_factory(namespace=None)
    for c in (left, right, root):
        await c.start()
    await left.create("/shared-name", b"L")
    await right.create("/shared-name", b"R")
    assert (await left.get("/shared-name"))[0] == b"L"
    assert (await right.get("/shared-name"))[0] == b"R"
    assert (await root.get(zookeeper.namespace + "/left/shared-name"))[0] == b"L"
    # Paths that come back from the server are relative to the namespace.
    made = await left.create("/seq-", sequential=True)
    assert made.startswith("/seq-")
    _stat, watch = await left.watch_exists("/shared-name")
    await right.delete("/shared-name")
    await left.delete("/shared-name")
    assert (await watch).path == "/shared-name"


async def test_retry_runs_an_operation_and_does_not_retry_answers(coord: aiocoord.Client) -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise aiocoord.ConnectionLossError(sent=False)
        return await coord.create("/retried")

    assert await coord.retry(flaky) == "/retried"
    assert calls == 3
    with pytest.raises(NodeExistsError):
        await coord.retry(coord.create, "/retried")


async def test_pipeline_sends_requests_back_to_back_and_keeps_their_order(
    coord: aiocoord.Client,
) -> None:
    await coord.create("/pipe")
    results = await (
        coord.pipeline()
        .create("/pipe/n-", b"x", ephemeral=True, sequential=True)
        .children("/pipe")
        .exists("/pipe/missing")
        .get("/pipe/missing")
        .set("/pipe", b"v")
        .execute()
    )
    (made, stat), (names, parent), missing, error, new_stat = results
    assert made.startswith("/pipe/n-") and stat.ephemeral_owner == coord.session_id
    assert names == [made.rsplit("/", 1)[1]] and parent.num_children == 1
    assert missing is None
    assert isinstance(error, NoNodeError)  # one failure does not stop the rest
    assert new_stat.version == 1


async def test_create_with_container_parents(coord: aiocoord.Client) -> None:
    await coord.create("/c1/c2/leaf", ephemeral=True, container_parents=True)
    _stat, watch = await coord.watch_exists("/c1/c2")
    await coord.delete("/c1/c2/leaf")
    async with asyncio.timeout(30):
        assert (await watch).type is EventType.DELETED  # swept: it was a container
