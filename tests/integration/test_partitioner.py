"""Partitioner: each guarantee of issue #27 against a real server.

Every wait here is on the members' assignment streams (``add_listener``) or on the
server's answers, bounded by EVENT_TIMEOUT; nothing sleeps and hopes. ``settle`` is short
(SETTLE) so the tests run quickly; the behaviour does not depend on its size.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
import pytest_asyncio
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    Assignment,
    ConnectionState,
    CorruptValueError,
    MemberIdInUseError,
    NotOwnerError,
    Partitioner,
    PartitionItems,
    PartitionLostError,
)
from aiocoord.testing import TcpProxy, ZooKeeperTarget, drop_connection, expire_session

pytestmark = pytest.mark.timeout(90)


SETTLE = 0.2
PATH = "/work"


class Watcher:
    """Follows the assignments of several members, and checks at every change that
    no two of them believe they own the same item."""

    def __init__(self) -> None:
        self.owned: dict[str, frozenset[str]] = {}
        self.overlaps: list[tuple[str, str, frozenset[str]]] = []
        self._changed = asyncio.Event()

    def follow(self, part: Partitioner) -> None:
        name = part.participant_id
        self.owned[name] = part.owned

        def on_change(assignment: Assignment) -> None:
            self.owned[name] = assignment.owned
            for other, items in self.owned.items():
                if other != name and items & assignment.owned:
                    self.overlaps.append((name, other, items & assignment.owned))
            self._changed.set()

        part.add_listener(on_change)

    def forget(self, part: Partitioner) -> None:
        self.owned.pop(part.participant_id, None)

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(EVENT_TIMEOUT):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()


async def claims_on_server(client: aiocoord.Client, path: str = PATH) -> dict[str, str]:
    """``{item: owner id}`` of the live claims, read from the server."""
    await client.sync(path)
    try:
        names = await client.children(path)
    except aiocoord.NoNodeError:
        return {}
    claims = {}
    for name in names:
        if name.startswith("claim-"):
            with contextlib.suppress(aiocoord.NoNodeError):
                data, _stat = await client.get(f"{path}/{name}")
                claims[name[len("claim-") :]] = data.decode()
    return claims


async def settled(
    watcher: Watcher, parts: Sequence[Partitioner], items: Sequence[str]
) -> dict[str, frozenset[str]]:
    """Wait until these members are stable and own every item between them, once each."""

    def done() -> bool:
        owned = [p.owned for p in parts]
        union = frozenset().union(*owned)
        return (
            all(p.assignment.stable for p in parts)
            and union == frozenset(items)
            and sum(len(o) for o in owned) == len(items)
        )

    await watcher.until(done)
    return {p.participant_id: p.owned for p in parts}


def owner_of(assignment: dict[str, frozenset[str]]) -> dict[str, str]:
    return {item: member for member, items in assignment.items() for item in items}


ITEMS = [f"i{n:02}" for n in range(10)]


@pytest_asyncio.fixture
async def group(started: Any) -> AsyncIterator[Callable[..., Any]]:
    """``await group(n, items, **kw)``: n members, each on a client of its own,
    started and followed by a Watcher; all closed at teardown."""
    made: list[Partitioner] = []

    async def make(
        n: int, items: Any = ITEMS, watcher: Watcher | None = None, **kwargs: Any
    ) -> tuple[list[Partitioner], Watcher, list[aiocoord.Client]]:
        clients = await started(n)
        watcher = watcher or Watcher()
        parts = []
        for i, client in enumerate(clients):
            kwargs.setdefault("settle", SETTLE)
            part = Partitioner(client, PATH, items, participant_id=f"m{len(made) + i}", **kwargs)
            watcher.follow(part)
            parts.append(part)
        await asyncio.gather(*(p.start() for p in parts))
        made.extend(parts)
        return parts, watcher, clients

    yield make
    for part in made:
        await part.aclose()


# --- balance ----------------------------------------------------------------------------------


async def test_every_item_is_owned_once_balanced_within_one(group, started) -> None:
    parts, watcher, _ = await group(3)
    assignment = await settled(watcher, parts, ITEMS)
    assert sorted(len(items) for items in assignment.values()) == [3, 3, 4]
    (observer,) = await started(1)
    assert await claims_on_server(observer) == owner_of(assignment)
    assert all(await asyncio.gather(*(p.wait_stable(timeout=0) for p in parts)))
    assert watcher.overlaps == []


async def test_items_are_split_by_weight(started) -> None:
    a, b = await started(2)
    watcher = Watcher()
    items = [f"w{n}" for n in range(8)]
    async with (
        Partitioner(a, PATH, items, participant_id="light", weight=1, settle=SETTLE) as light,
        Partitioner(b, PATH, items, participant_id="heavy", weight=3, settle=SETTLE) as heavy,
    ):
        watcher.follow(light)
        watcher.follow(heavy)
        await settled(watcher, [light, heavy], items)
        assert (len(light.owned), len(heavy.owned)) == (2, 6)
        participants = await light.participants()
        assert [(p.id, p.holds) for p in participants] == [("heavy", True), ("light", True)]
        assert json.loads(participants[0].data) == {"id": "heavy", "weight": 3.0}


# --- minimal movement -------------------------------------------------------------------------


async def test_a_leave_moves_only_the_leavers_items(group) -> None:
    parts, watcher, _ = await group(3)
    before = owner_of(await settled(watcher, parts, ITEMS))
    leaver, *rest = parts
    leavers_items = leaver.owned
    await leaver.aclose()
    watcher.forget(leaver)
    after = owner_of(await settled(watcher, rest, ITEMS))
    moved = {item for item in ITEMS if before[item] != after[item]}
    assert moved == leavers_items
    assert sorted(len(p.owned) for p in rest) == [5, 5]
    assert watcher.overlaps == []


async def test_a_join_moves_only_what_the_joiner_takes(group) -> None:
    parts, watcher, _ = await group(2)
    before = owner_of(await settled(watcher, parts, ITEMS))
    (joiner,), _, _ = await group(1, watcher=watcher)
    after = owner_of(await settled(watcher, [*parts, joiner], ITEMS))
    moved = {item for item in ITEMS if before[item] != after[item]}
    assert moved == joiner.owned
    assert len(moved) == 3  # 10 items over 3 members: 4, 3, 3
    assert sorted(len(p.owned) for p in [*parts, joiner]) == [3, 3, 4]
    assert watcher.overlaps == []


# --- exclusivity --------------------------------------------------------------------------------


async def test_no_item_has_two_owners_under_churn(group, started) -> None:
    """Members join and leave in a burst; at every change no two members believe
    they own one item, and the server never shows a claim whose owner is not a member."""
    parts, watcher, _ = await group(2)
    await settled(watcher, parts, ITEMS)
    (observer,) = await started(1)
    live = list(parts)
    for _round in range(3):
        joined, _, _ = await group(2, watcher=watcher)
        live.extend(joined)
        leaver = live.pop(0)
        await leaver.aclose()
        watcher.forget(leaver)
    assignment = await settled(watcher, live, ITEMS)
    assert await claims_on_server(observer) == owner_of(assignment)
    assert watcher.overlaps == []


async def test_a_second_member_with_the_same_id_is_refused(started) -> None:
    a, b = await started(2)
    async with Partitioner(a, PATH, ITEMS, participant_id="same", settle=SETTLE):
        with pytest.raises(MemberIdInUseError):
            await Partitioner(b, PATH, ITEMS, participant_id="same").start()
        with pytest.raises(MemberIdInUseError):
            await Partitioner(a, PATH, ITEMS, participant_id="same").start()


# --- fencing ----------------------------------------------------------------------------------


async def test_fencing_tokens_grow_with_every_grant_and_fences_refuse_a_former_owner(
    started,
) -> None:
    a, b = await started(2)
    await a.create("/store", b"")
    watcher = Watcher()
    first = Partitioner(a, PATH, ["x"], participant_id="first", settle=SETTLE)
    watcher.follow(first)
    async with first:
        await watcher.until(lambda: first.owned == {"x"})
        token = first.fencing_tokens["x"]
        await first.transaction("x").set("/store", b"first").commit()
        stale = first.transaction("x").set("/store", b"stale")
    # Given back on leaving: the fence fails even before anyone else claims the item.
    with pytest.raises(PartitionLostError):
        await stale.commit()
    with pytest.raises(NotOwnerError):
        first.fence("x")
    second = Partitioner(b, PATH, ["x"], participant_id="second", settle=SETTLE)
    watcher.follow(second)
    async with second:
        await watcher.until(lambda: second.owned == {"x"})
        assert second.fencing_tokens["x"] > token
        await second.transaction("x").set("/store", b"second").commit()
    assert (await a.get("/store"))[0] == b"second"


async def test_leaving_deletes_the_members_claims_before_it_returns(group, started) -> None:
    parts, watcher, _ = await group(2)
    await settled(watcher, parts, ITEMS)
    (observer,) = await started(1)
    leaver = parts[0]
    assert leaver.owned
    await leaver.aclose()
    assert leaver.owned == frozenset()
    claims = await claims_on_server(observer)
    assert leaver.participant_id not in claims.values()
    assert [p.id for p in await parts[1].participants()] == [parts[1].participant_id]


# --- faults --------------------------------------------------------------------------------------


async def test_an_expired_member_drops_its_items_at_once_and_rejoins(group, started) -> None:
    parts, watcher, clients = await group(3)
    await settled(watcher, parts, ITEMS)
    victim, victim_client = parts[0], clients[0]
    tokens = dict(victim.fencing_tokens)
    held = sorted(victim.owned)[0]
    stale = victim.transaction(held).create("/stale-write")
    losses: list[frozenset[str]] = []
    victim_client.add_listener(
        lambda state: losses.append(victim.owned) if state is ConnectionState.LOST else None
    )
    await expire_session(victim_client)
    await watcher.until(lambda: bool(losses))
    assert losses[0] == frozenset()  # empty by the time LOST is reported
    with pytest.raises(PartitionLostError):
        await stale.commit()
    assignment = await settled(watcher, parts, ITEMS)
    (observer,) = await started(1)
    assert await claims_on_server(observer) == owner_of(assignment)
    for item in victim.owned & tokens.keys():
        assert victim.fencing_tokens[item] > tokens[item]
    assert watcher.overlaps == []


async def test_a_dropped_connection_suspends_then_restores_the_same_claims(group) -> None:
    parts, watcher, clients = await group(2)
    await settled(watcher, parts, ITEMS)
    member, client = parts[0], clients[0]
    owned = member.owned
    tokens = {item: member.fencing_tokens[item] for item in owned}
    seen: list[Assignment] = []
    member.add_listener(seen.append)
    drop_connection(client)
    await watcher.until(lambda: any(not a.owned for a in seen))
    await watcher.until(lambda: member.owned == owned and member.assignment.stable)
    assert {item: member.fencing_tokens[item] for item in owned} == tokens


async def test_under_the_session_error_policy_a_dropped_connection_keeps_the_items(
    group, state_log
) -> None:
    """error_policy= decides which states end what a member owns, as for a lock."""
    parts, watcher, clients = await group(2, error_policy=aiocoord.SessionErrorPolicy())
    await settled(watcher, parts, ITEMS)
    member, client = parts[0], clients[0]
    owned = member.owned
    seen: list[Assignment] = []
    member.add_listener(seen.append)
    log = state_log(client)
    drop_connection(client)
    async with asyncio.timeout(EVENT_TIMEOUT):
        await log.wait_for(ConnectionState.RECONNECTED)
    await client.sync(PATH)  # a round trip after the reconnection: its re-read is done
    assert all(a.owned == owned for a in seen)  # never emptied: only LOST is an error
    assert member.owned == owned


async def test_members_recover_after_a_server_restart(private_zookeeper, state_log) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as a,
        aiocoord.connect(private_zookeeper.connect_string) as b,
    ):
        log = state_log(a)
        watcher = Watcher()
        parts = [
            Partitioner(a, PATH, ITEMS, participant_id="a", settle=SETTLE),
            Partitioner(b, PATH, ITEMS, participant_id="b", settle=SETTLE),
        ]
        for part in parts:
            watcher.follow(part)
        async with parts[0], parts[1]:
            before = await settled(watcher, parts, ITEMS)
            await private_zookeeper.stop()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.SUSPENDED)
            assert parts[0].owned == frozenset()
            await private_zookeeper.start()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.RECONNECTED)
            assert await settled(watcher, parts, ITEMS) == before
        assert watcher.overlaps == []


@pytest_asyncio.fixture
async def proxy(zookeeper: ZooKeeperTarget) -> AsyncIterator[TcpProxy]:
    host, port = zookeeper.connect_string.split(",")[0].rsplit(":", 1)
    async with TcpProxy(host, int(port)) as proxy:
        yield proxy


async def test_a_paused_member_loses_its_items_and_its_fenced_writes_are_refused(
    zookeeper: ZooKeeperTarget, proxy: TcpProxy, started, state_log
) -> None:
    """The member's traffic stops (a stopped VM, a long pause): it drops its items
    at SUSPENDED; its session expires on the server, the other member takes the
    items, and the write it prepared is refused when its traffic flows again."""
    (healthy,) = await started(1)
    await healthy.create("/store", b"")
    paused = aiocoord.connect(
        proxy.connect_string, namespace=zookeeper.namespace, session_timeout=4
    )
    log = state_log(paused)
    watcher = Watcher()
    async with paused:
        p = Partitioner(paused, PATH, ITEMS, participant_id="paused", settle=SETTLE)
        q = Partitioner(healthy, PATH, ITEMS, participant_id="healthy", settle=SETTLE)
        watcher.follow(p)
        watcher.follow(q)
        async with p, q:
            await settled(watcher, [p, q], ITEMS)
            item = sorted(p.owned)[0]
            old_token = p.fencing_tokens[item]
            stale = p.transaction(item).set("/store", b"stale")
            proxy.hold()
            async with asyncio.timeout(EVENT_TIMEOUT):
                await log.wait_for(ConnectionState.SUSPENDED)
            assert p.owned == frozenset()
            await watcher.until(lambda: q.owned == frozenset(ITEMS) and q.assignment.stable)
            assert q.fencing_tokens[item] > old_token
            await q.transaction(item).set("/store", b"fresh").commit()
            proxy.release()
            with pytest.raises(PartitionLostError):
                await stale.commit()
            assert (await healthy.get("/store"))[0] == b"fresh"
            await settled(watcher, [p, q], ITEMS)
        assert watcher.overlaps == []


# --- the item set ---------------------------------------------------------------------------------


async def test_the_item_set_is_read_from_a_node_and_a_change_rebalances(group, started) -> None:
    (admin,) = await started(1)
    await admin.create("/cfg/items", json.dumps(["a", "b"]).encode(), make_parents=True)
    items = PartitionItems.from_node("/cfg/items")
    parts, watcher, _ = await group(2, items)
    await settled(watcher, parts, ["a", "b"])
    await admin.set("/cfg/items", json.dumps(["a", "b", "c", "d", "e"]).encode())
    await settled(watcher, parts, ["a", "b", "c", "d", "e"])
    assert sorted(len(p.owned) for p in parts) == [2, 3]
    await admin.set("/cfg/items", b"not json")  # a bad edit is logged and ignored
    await admin.set("/cfg/items", json.dumps(["e"]).encode())
    await settled(watcher, parts, ["e"])
    assert await claims_on_server(admin) == owner_of({p.participant_id: p.owned for p in parts})
    await admin.delete("/cfg/items")
    await settled(watcher, parts, [])


async def test_a_bad_item_node_fails_the_start(started) -> None:
    (client,) = await started(1)
    await client.create("/cfg/items", b'{"a": 1}', make_parents=True)
    part = Partitioner(client, PATH, PartitionItems.from_node("/cfg/items"))
    with pytest.raises(CorruptValueError):
        await part.start()
    await client.set("/cfg/items", b'["ok"]')
    async with part:  # nothing was left behind; it may start again
        assert await part.wait_stable(timeout=EVENT_TIMEOUT)
        assert part.owned == {"ok"}


# --- sharing and waiting --------------------------------------------------------------------------


async def test_several_tasks_share_one_partitioner(started) -> None:
    (client,) = await started(1)
    part = Partitioner(client, PATH, ITEMS, participant_id="shared", settle=SETTLE)

    async def follow() -> frozenset[str]:
        async with part.changes() as changes:
            async for assignment in changes:
                if assignment.stable:
                    return assignment.owned
        raise AssertionError("ended")

    async with part:
        followers = [asyncio.create_task(follow()) for _ in range(3)]
        waits = await asyncio.gather(*(part.wait_stable(timeout=EVENT_TIMEOUT) for _ in range(3)))
        assert waits == [True, True, True]
        assert await asyncio.gather(*followers) == [frozenset(ITEMS)] * 3
        assert part.owned == frozenset(ITEMS)


async def test_wait_stable_answers_false_on_timeout(started) -> None:
    (client,) = await started(1)
    async with Partitioner(client, PATH, ITEMS, settle=30) as part:
        assert await part.wait_stable(timeout=0.05) is False
        assert part.owned == frozenset()


async def test_members_sharing_one_client_keep_apart(started) -> None:
    """Two members on one client share its session: each claims, keeps and gives
    back only its own claims."""
    (client,) = await started(1)
    watcher = Watcher()
    first = Partitioner(client, PATH, ITEMS, participant_id="first", settle=SETTLE)
    second = Partitioner(client, PATH, ITEMS, participant_id="second", settle=SETTLE)
    watcher.follow(first)
    watcher.follow(second)
    async with first:
        async with second:
            assignment = await settled(watcher, [first, second], ITEMS)
            assert sorted(len(items) for items in assignment.values()) == [5, 5]
            assert await claims_on_server(client) == owner_of(assignment)
        watcher.forget(second)
        await settled(watcher, [first], ITEMS)
        assert await claims_on_server(client) == dict.fromkeys(ITEMS, "first")
    assert watcher.overlaps == []


async def test_a_member_node_of_its_own_earlier_session_is_waited_out(started) -> None:
    """A client that gave its session up (out of reach past the session timeout)
    may find its member node still there in the new session, until the server
    expires the old one: the member waits for it instead of stopping. The old
    session is played by another client (white-box: named as one of ours)."""
    old, new = await started(2)
    node = f"{PATH}/member-me"
    await old.create(node, b'{"id": "me", "weight": 1.0}', ephemeral=True, make_parents=True)
    part = Partitioner(new, PATH, ITEMS, participant_id="me", settle=SETTLE)
    part._sessions.add(old.session_id)
    starting = asyncio.create_task(part.start())
    done, _ = await asyncio.wait({starting}, timeout=0.3)
    assert not done  # waiting for the old node to go
    await old.aclose()  # the old session ends: its node goes
    async with asyncio.timeout(EVENT_TIMEOUT):
        await starting
    try:
        assert await part.wait_stable(timeout=EVENT_TIMEOUT)
        assert part.owned == frozenset(ITEMS)
    finally:
        await part.aclose()
