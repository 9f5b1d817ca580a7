"""Bad input against a live server: nothing sent, nothing changed, nothing leaked.

The whole table of ``tests/unit/test_bad_input_table.py`` is replayed here on
started clients, and the namespace (every node's data and version) is the same
afterwards. The rest needs a server: paths ZooKeeper refuses (characters
outside the BMP) and its own ``/zookeeper`` subtree, a recipe meeting node
contents another client wrote (a counter of 3 bytes, a lease node of garbage,
queue items its codec cannot decode), an error policy that fails, and data
over the server's real limit. The fixtures fail a test that leaves a task, a
watch or an error log behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import aiocoord
from aiocoord import (
    AtomicInt,
    AtomicLong,
    BadArgumentsError,
    Codec,
    ConnectionState,
    CorruptValueError,
    DataTooLargeError,
    DelayQueue,
    ErrorPolicy,
    IdQueue,
    InvalidPathError,
    LeaderLatch,
    Lease,
    Mutex,
    PriorityQueue,
    Queue,
    Semaphore,
    SharedCount,
)
from aiocoord._paths import join
from aiocoord._session import _zk
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., aiocoord.Client]


def _load_table() -> Any:
    """The unit test module holding the table (a plain import: it is not a package)."""
    path = Path(__file__).resolve().parents[1] / "unit" / "test_bad_input_table.py"
    spec = importlib.util.spec_from_file_location("bad_input_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bad_input_table", module)
    spec.loader.exec_module(module)
    return module


TABLE = _load_table()

Snapshot = dict[str, tuple[bytes, int]]


async def snapshot(client: aiocoord.Client, path: str = "/") -> Snapshot:
    """Every node at and below ``path``, with its data and version. (Not ``cversion``:
    a recipe may make a node of its own and delete it again, as a take does with
    its marker before it reads an item.)"""
    try:
        data, stat = await client.get(path)
        names = await client.children(path)
    except aiocoord.NoNodeError:
        return {}
    found = {path: (data, stat.version)}
    for name in names:
        found |= await snapshot(client, join(path, name))
    return found


async def test_the_whole_table_changes_nothing_on_a_live_server(
    client_factory: ClientFactory, zookeeper: ZooKeeperTarget
) -> None:
    observer = client_factory()
    # The table's oversized rows count on its small limit: set it once connected
    # (the namespace itself is made at connect time, with the usual limit).
    client = client_factory()
    root = client_factory(namespace=None)
    await asyncio.gather(observer.start(), client.start(), root.start())
    client.max_data_size = root.max_data_size = TABLE.LIMIT
    await observer.create("/already", b"here")
    before = await snapshot(observer)
    zookeeper_tree = await snapshot(root, "/zookeeper")
    wrong = []
    for case in TABLE.CASES:
        async with asyncio.timeout(5):
            error = await TABLE.outcome(case, root if case.root else client)
        why = TABLE.verdict(case, error)
        if why is not None:
            wrong.append(f"{case.name}: {why}")
    assert wrong == []
    assert await snapshot(observer) == before
    assert await snapshot(root, "/zookeeper") == zookeeper_tree
    assert client.state is ConnectionState.CONNECTED and client.session_id


# --- paths the server refuses --------------------------------------------------------


async def test_paths_outside_the_bmp_are_refused_before_the_server_sees_them(
    client_factory: ClientFactory, children_of: Any
) -> None:
    client = client_factory()
    await client.start()
    emoji = "/lock-\U0001f512"
    # What the server does with one: it refuses the create (it sees a surrogate
    # pair), and echoes the path of a sync in a form that is not UTF-8.
    unchecked = _zk.create_op(
        emoji,
        client._requests.server_path(emoji),
        b"",
        aiocoord.OPEN_ACL_UNSAFE,
        ephemeral=False,
        sequential=False,
        container=False,
        ttl_ms=None,
    )
    with pytest.raises(BadArgumentsError):
        await client._engine.call(unchecked)
    # So the client refuses it first, with an error that names it, everywhere.
    attempts: list[Callable[[], Awaitable[object] | object]] = [
        lambda: client.create(emoji),
        lambda: client.sync(emoji),
        lambda: client.exists(emoji),
        lambda: Mutex(client, emoji),
        lambda: Semaphore(client, emoji, 2),
        lambda: Queue(client, "/q").move_aside("qn-0000000000", emoji),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidPathError, match="outside the BMP") as info:
            result = attempt()
            if asyncio.iscoroutine(result):
                await result
        assert info.value.path == emoji
    with pytest.raises(InvalidPathError):
        aiocoord.connect("127.0.0.1:1", namespace="/app-\U0001f600")
    # A BMP character that is not ASCII is fine, end to end.
    assert await client.create("/caf\u00e9-\u6771\u4eac") == "/caf\u00e9-\u6771\u4eac"
    assert await children_of(client, "/") == ["caf\u00e9-\u6771\u4eac"]


async def test_the_zookeeper_subtree_is_readable_but_no_place_for_a_recipe(
    client_factory: ClientFactory,
) -> None:
    root = client_factory(namespace=None)
    await root.start()
    assert "config" in await root.children("/zookeeper")  # plain reads are fine
    for make in (
        lambda: Mutex(root, "/zookeeper/locks/a"),
        lambda: Queue(root, "/zookeeper"),
        lambda: Queue(root, "/jobs", lock_path="/zookeeper/taken"),
        lambda: LeaderLatch(root, "/zookeeper/leader"),
    ):
        with pytest.raises(InvalidPathError, match="/zookeeper"):
            make()
    with pytest.raises(InvalidPathError, match="not a namespace"):
        aiocoord.connect("127.0.0.1:1", namespace="/zookeeper/app")
    # Inside a namespace, /zookeeper is an ordinary name.
    namespaced = client_factory()
    await namespaced.start()
    async with Mutex(namespaced, "/zookeeper/lock"):
        assert await namespaced.exists("/zookeeper/lock")


# --- an error policy that fails -------------------------------------------------------


class _BrokenPolicy(ErrorPolicy):
    """A user's policy with a bug in it."""

    def is_error_state(self, state: ConnectionState) -> bool:
        raise RuntimeError("the policy is broken")


async def test_a_lock_granted_under_a_failing_error_policy_is_given_back(
    client_factory: ClientFactory, children_of: Any
) -> None:
    """acquire() reporting failure must not leave the lock held: the node goes."""
    client = client_factory()
    await client.start()
    lock = Mutex(client, "/locked", error_policy=_BrokenPolicy())
    with pytest.raises(RuntimeError, match="broken"):
        await lock.acquire()
    assert not lock.is_held
    assert await children_of(client, "/locked") == []
    async with Mutex(client, "/locked"):  # free for anyone else
        pass
    semaphore = Semaphore(client, "/sem", 1, error_policy=_BrokenPolicy())
    with pytest.raises(RuntimeError, match="broken"):
        await semaphore.acquire()
    assert await semaphore.participants() == []
    with pytest.raises(aiocoord.ArgumentTypeError, match="error_policy"):
        aiocoord.connect("127.0.0.1:1", error_policy="x")


# --- node contents another client wrote -----------------------------------------------

Setup = Callable[[aiocoord.Client], Awaitable[None]]


def _node(path: str, data: bytes) -> Setup:
    async def setup(other: aiocoord.Client) -> None:
        await other.create(path, data, make_parents=True)

    return setup


def _item(queue: str, name: str, data: bytes) -> Setup:
    async def setup(other: aiocoord.Client) -> None:
        await other.create(f"{queue}/{name}", data, make_parents=True)
        await other.create(f"{queue}-taken")  # what a take would make: so it changes nothing

    return setup


async def _taking(queue: Queue[Any]) -> None:
    async with queue.take(timeout=0):
        raise AssertionError("a corrupt item was taken")


CORRUPT: list[tuple[str, Setup, Callable[[aiocoord.Client], Awaitable[object]], str]] = [
    (
        "counter of 3 bytes: get",
        _node("/c", b"\x01\x02\x03"),
        lambda c: AtomicLong(c, "/c").get(),
        "/c",
    ),
    (
        "counter of 3 bytes: increment",
        _node("/c", b"\x01\x02\x03"),
        lambda c: AtomicLong(c, "/c").increment(),
        "/c",
    ),
    (
        "counter of 3 bytes: uncoalesced add",
        _node("/c", b"\x01\x02\x03"),
        lambda c: AtomicLong(c, "/c", coalesce=False).add(2),
        "/c",
    ),
    (
        "counter of 3 bytes: compare_and_set",
        _node("/c", b"\x01\x02\x03"),
        lambda c: AtomicLong(c, "/c").compare_and_set(0, 1),
        "/c",
    ),
    (
        "counter of 3 bytes: try_set",
        _node("/c", b"\x01\x02\x03"),
        lambda c: AtomicLong(c, "/c").set(1),
        "/c",
    ),
    (
        "int counter of 8 bytes",
        _node("/i", b"\x00" * 8),
        lambda c: AtomicInt(c, "/i").increment(),
        "/i",
    ),
    (
        "shared count of 3 bytes",
        _node("/s", b"\x01\x02\x03"),
        lambda c: SharedCount(c, "/s", 0).start(),
        "/s",
    ),
    (
        "lease node of garbage",
        _node("/lease/x-lease-0000000000", b"\xff\xfegarbage"),
        lambda c: Lease(c, "/lease", 5, participant_id="me").try_acquire(),
        "/lease/x-lease-0000000000",
    ),
    (
        "lease node without a TTL",
        _node("/lease/x-lease-0000000000", b"holder"),
        lambda c: Lease(c, "/lease", 5, participant_id="me").try_acquire(),
        "/lease/x-lease-0000000000",
    ),
    (
        "JSON queue item that is not JSON: get",
        _item("/jq", "qn-0000000000", b"{not json"),
        lambda c: Queue(c, "/jq", codec=Codec.JSON).get(timeout=0),
        "/jq/qn-0000000000",
    ),
    (
        "JSON queue item that is not JSON: peek",
        _item("/jq", "qn-0000000000", b"{not json"),
        lambda c: Queue(c, "/jq", codec=Codec.JSON).peek(),
        "/jq/qn-0000000000",
    ),
    (
        "JSON queue item that is not JSON: take",
        _item("/jq", "qn-0000000000", b"{not json"),
        lambda c: _taking(Queue(c, "/jq", codec=Codec.JSON)),
        "/jq/qn-0000000000",
    ),
    (
        "text queue item that is not UTF-8",
        _item("/tq", "qn-0000000000", b"\xff\xfe"),
        lambda c: Queue(c, "/tq", codec=Codec.UTF8).get(timeout=0),
        "/tq/qn-0000000000",
    ),
    (
        "priority item without Curator's envelope",
        _item("/pq", "queue-1000000010000000000", b"raw"),
        lambda c: PriorityQueue(c, "/pq").get(timeout=0),
        "/pq/queue-1000000010000000000",
    ),
    (
        "delay item with a cut envelope",
        _item("/dq", "queue-|00|0000000000", b"\x00\x01\x00\x01\x01\x00\x00\x00\x09ab"),
        lambda c: DelayQueue(c, "/dq").get(timeout=0),
        "/dq/queue-|00|0000000000",
    ),
    (
        "id item with a wrong envelope version",
        _item("/iq", "queue-|a|0000000000", b"\x00\x00\x00\x01\x01\x00\x00\x00\x01x\x02"),
        lambda c: _taking(IdQueue(c, "/iq")),
        "/iq/queue-|a|0000000000",
    ),
]


@pytest.mark.parametrize(
    ("setup", "call", "names"),
    [row[1:] for row in CORRUPT],
    ids=[row[0] for row in CORRUPT],
)
async def test_contents_another_client_wrote_give_corrupt_value_error_and_stay(
    client_factory: ClientFactory, setup: Setup, call: Callable[..., Awaitable[object]], names: str
) -> None:
    other, client = client_factory(), client_factory()
    await asyncio.gather(other.start(), client.start())
    await setup(other)
    before = await snapshot(other)
    async with asyncio.timeout(10):
        with pytest.raises(CorruptValueError) as info:
            await call(client)
    assert info.value.path == names and repr(names) in str(info.value)
    await client.sync()
    assert await snapshot(other) == before  # left as it was, ours (if any) cleaned up
    assert client.state is ConnectionState.CONNECTED


async def test_an_undecodable_participant_id_is_shown_not_fatal(
    client_factory: ClientFactory,
) -> None:
    other, client = client_factory(), client_factory()
    await asyncio.gather(other.start(), client.start())
    await other.create("/leader/_c_x-latch-0000000000", b"\xff\xfe", make_parents=True)
    participants = await LeaderLatch(client, "/leader").participants()
    assert [(p.id, p.holds) for p in participants] == [("\ufffd\ufffd", True)]


# --- the server's real limit ---------------------------------------------------------


async def test_data_over_the_servers_limit_is_refused_and_sends_nothing(
    client_factory: ClientFactory,
) -> None:
    client = client_factory()
    await client.start()
    too_big = b"x" * (client.max_data_size + 1)
    before = await snapshot(client)
    for attempt in (
        lambda: client.create("/big", too_big),
        lambda: client.create("/big", too_big, make_parents=True, protected=True),
        lambda: Queue(client, "/q").put(too_big),
        lambda: aiocoord.AtomicBytes(client, "/ab").force_set(too_big),
        lambda: aiocoord.GroupMember(client, "/g", participant_id="m", data=too_big),
    ):
        with pytest.raises(DataTooLargeError):
            result = attempt()
            if asyncio.iscoroutine(result):
                await result
    assert await snapshot(client) == before
    with contextlib.suppress(aiocoord.NoNodeError):
        assert await client.children("/") == []
