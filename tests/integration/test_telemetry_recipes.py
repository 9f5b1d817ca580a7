# ruff: noqa: F811  (the tests take test_telemetry's fixtures, imported by name)
"""OpenTelemetry spans and metrics of the recipes that came after the first
telemetry round (docs/observability.md): service discovery, the partitioner,
GroupMember, SharedCount and ShardedCounter.

Read through the same in-memory exporter and reader as test_telemetry.py (the
global providers are set once per process): metrics through clients with
``Telemetry(paths=True)``, each test looking only at its own namespace's paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from _kit import EVENT_TIMEOUT
from test_telemetry import Otel, _ns, otel, traced  # noqa: F401  (otel, traced are fixtures)

import aiocoord
from aiocoord import (
    Assignment,
    GroupMember,
    Partitioner,
    ServiceCacheEventType,
    ServiceDiscovery,
    ServiceInstance,
    ShardedCounter,
    SharedCount,
)
from aiocoord.testing import ZooKeeperTarget, drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)


def api(instance_id: str = "i-1", **changes: object) -> ServiceInstance:
    fields: dict[str, object] = {"name": "api", "id": instance_id, "address": "10.0.0.7"}
    fields.update(port=8080, registration_time=1)
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def total(otel: Otel, metric: str, **match: object) -> float:
    """The sum of ``metric``'s points whose attributes include ``match``."""
    return sum(point.value for _, point in otel.points(metric, **match))


# --- service discovery ------------------------------------------------------------------------


async def test_register_update_unregister_spans_nest_under_the_callers_span(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client, ServiceDiscovery(client, "/services") as discovery:
        with otel.tracer.start_as_current_span("request") as request:
            await discovery.register(api())
            await discovery.update(api(port=9090))
            await discovery.unregister(api())
            await discovery.unregister(api())  # gone already
    parent = request.get_span_context().span_id
    spans = [
        s for s in otel.spans() if s.name.startswith("aiocoord.discovery.") and s.parent is not None
    ]
    assert [(s.name, attributes(s)["aiocoord.outcome"]) for s in spans] == [
        ("aiocoord.discovery.register", "registered"),
        ("aiocoord.discovery.update", "updated"),
        ("aiocoord.discovery.unregister", "unregistered"),
        ("aiocoord.discovery.unregister", "absent"),
    ]
    for span in spans:
        assert span.parent is not None and span.parent.span_id == parent
        assert attributes(span) == {
            "aiocoord.recipe": "service_discovery",
            "aiocoord.path": _ns(zookeeper, "/services/api/i-1"),
            "aiocoord.service": "api",
            "aiocoord.instance_id": "i-1",
            "aiocoord.outcome": attributes(span)["aiocoord.outcome"],
        }
    # No cache or provider was made: none reports.
    recipes = {attributes(s).get("aiocoord.recipe") for s in otel.spans()}
    assert recipes == {None, "service_discovery"}


async def test_an_instance_made_again_in_a_new_session_counts_a_reregistration(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    base = _ns(zookeeper, "/services")
    async with traced() as a, traced() as b, ServiceDiscovery(a, "/services") as discovery:
        await discovery.register(api())
        assert total(otel, "aiocoord.discovery.reregistrations", aiocoord_path=base) == 0
        async with b.data_changes("/services/api/i-1") as changes:
            assert await anext(changes) is not None
            old_session = a.session_id
            await expire_session(a)
            async with asyncio.timeout(EVENT_TIMEOUT):
                while (seen := await anext(changes)) is None or (
                    seen[1].ephemeral_owner == old_session
                ):
                    pass
        # A round trip of a's: the keeper's create reply came first, and it counts
        # as soon as it has that reply.
        await a.exists("/services/api/i-1")
        assert total(otel, "aiocoord.discovery.reregistrations", aiocoord_path=base) == 1
    [(labels, _)] = otel.points("aiocoord.discovery.reregistrations", aiocoord_path=base)
    assert labels == {"aiocoord.recipe": "service_discovery", "aiocoord.path": base}


async def test_a_service_cache_reports_its_build_resync_and_size_as_itself(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/services/api")
    async with traced() as client, ServiceDiscovery(client, "/services") as discovery:
        await discovery.register(api("i-1"))
        await discovery.register(api("i-2", enabled=False))
        with otel.tracer.start_as_current_span("request") as request:
            cache = discovery.cache("api")
            await cache.start()
        try:
            [(labels, size)] = otel.points("aiocoord.cache.size", aiocoord_path=path)
            assert labels == {"aiocoord.recipe": "service_cache", "aiocoord.path": path}
            assert size.value == 2  # instances, not nodes
            async with cache.events() as events:
                assert (await anext(events)).type is ServiceCacheEventType.INITIALIZED
                drop_connection(client)
                async with asyncio.timeout(EVENT_TIMEOUT):
                    while (await anext(events)).type is not ServiceCacheEventType.RESYNCED:
                        pass
        finally:
            await cache.aclose()
        assert not otel.points("aiocoord.cache.size", aiocoord_path=path)  # closed: not counted
    build = otel.span("aiocoord.cache.build")
    assert build.parent is not None
    assert build.parent.span_id == request.get_span_context().span_id
    assert attributes(build) == {
        "aiocoord.recipe": "service_cache",
        "aiocoord.path": path,
        "aiocoord.nodes": 2,
        "aiocoord.outcome": "built",
    }
    resync = otel.span("aiocoord.cache.resync")
    assert attributes(resync)["aiocoord.recipe"] == "service_cache"
    assert attributes(resync)["aiocoord.outcome"] == "resynced"
    # The children cache inside reports as the service cache, never as itself.
    assert "children_cache" not in {attributes(s).get("aiocoord.recipe") for s in otel.spans()}


async def test_a_provider_counts_picks_and_noted_errors_and_makes_no_span_per_pick(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/services/api")
    async with traced() as client, ServiceDiscovery(client, "/services") as discovery:
        await discovery.register(api("i-1"))
        await discovery.register(api("i-2"))
        async with discovery.provider("api") as provider:
            for _ in range(5):
                assert provider.pick() is not None
            async with provider.using() as instance:
                pass
            provider.note_error(instance)
            provider.note_error(instance)  # the second takes it down (threshold 2)
            for _ in range(3):
                assert provider.pick() is not None
    picks = otel.points("aiocoord.discovery.picks", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: point.value for labels, point in picks} == {"picked": 9}
    assert {labels["aiocoord.recipe"] for labels, _ in picks} == {"service_provider"}
    errors = otel.points("aiocoord.discovery.errors", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: point.value for labels, point in errors} == {
        "noted": 1,
        "down": 1,
    }
    names = [s.name for s in otel.spans()]
    assert not [n for n in names if "pick" in n]
    # The provider's own cache reports as the provider.
    assert attributes(otel.span("aiocoord.cache.build"))["aiocoord.recipe"] == "service_provider"


async def test_a_provider_with_nothing_to_pick_counts_none(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/services/none")
    async with (
        traced() as client,
        ServiceDiscovery(client, "/services") as discovery,
        discovery.provider("none") as provider,
    ):
        assert provider.pick() is None
        with pytest.raises(aiocoord.OperationTimeoutError):
            async with provider.using(timeout=0):
                pass
    picks = otel.points("aiocoord.discovery.picks", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: point.value for labels, point in picks} == {"none": 2}


# --- the partitioner --------------------------------------------------------------------------


async def _until(part: Partitioner, predicate: Callable[[Assignment], bool]) -> None:
    async with asyncio.timeout(EVENT_TIMEOUT), part.changes() as changes:
        async for assignment in changes:
            if predicate(assignment):
                return


async def test_partitioner_rebalances_holds_owned_items_and_lost_items(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/work")
    items = ["a", "b", "c", "d"]
    owned = "aiocoord.partition.items.owned"
    async with traced() as one_client, traced() as two_client:
        one = Partitioner(one_client, "/work", items, participant_id="one", settle=0.1)
        two = Partitioner(two_client, "/work", items, participant_id="two", settle=0.1)
        with otel.tracer.start_as_current_span("startup"):
            await one.start()
        try:
            await _until(one, lambda a: a.stable and len(a.owned) == 4)
            assert total(otel, owned, aiocoord_path=path) == 4
            tokens = {item: one.fencing_tokens[item] for item in items}
            await two.start()
            try:
                await _until(two, lambda a: a.stable and len(a.owned) == 2)
                await _until(one, lambda a: a.stable and len(a.owned) == 2)
                assert total(otel, owned, aiocoord_path=path) == 4
                lost = two.owned
                emptied = asyncio.Event()
                two.add_listener(lambda a: None if a.owned else emptied.set())
                await expire_session(two_client)
                async with asyncio.timeout(EVENT_TIMEOUT):
                    await emptied.wait()  # the expiry dropped its items (and their holds)
                assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == len(lost)
                await _until(two, lambda a: a.stable and len(a.owned) == 2)
            finally:
                await two.aclose()
            await _until(one, lambda a: a.stable and len(a.owned) == 4)
        finally:
            await one.aclose()
    assert total(otel, owned, aiocoord_path=path) == 0

    rebalances = otel.spans("aiocoord.partition.rebalance")
    assert rebalances
    for span in rebalances:
        # The member's loop runs for no caller: a root span, even when started in one.
        assert span.parent is None
        assert attributes(span)["aiocoord.recipe"] == "partitioner"
        assert attributes(span)["aiocoord.path"] == path
    first = attributes(rebalances[0])
    assert first["aiocoord.items_gained"] == 4
    assert first["aiocoord.items_released"] == 0
    assert first["aiocoord.items_owned"] == 4
    assert first["aiocoord.outcome"] == "rebalanced"
    assert first["aiocoord.generation"] >= 1
    assert any(attributes(s)["aiocoord.items_released"] == 2 for s in rebalances)

    holds = otel.spans("aiocoord.partition.hold")
    for span in holds:
        labels = attributes(span)
        assert labels["aiocoord.recipe"] == "partitioner"
        assert labels["aiocoord.path"] == path
        assert span.parent is None  # beside the rebalance that granted it, not in it
    granted = {
        (attributes(s)["aiocoord.item"], attributes(s)["aiocoord.fencing_token"]) for s in holds
    }
    assert set(tokens.items()) <= granted
    outcomes = [attributes(s)["aiocoord.outcome"] for s in holds]
    assert outcomes.count("lost") == len(lost)
    lost_holds = [s for s in holds if attributes(s)["aiocoord.outcome"] == "lost"]
    assert all([e.name for e in s.events] == ["aiocoord.hold.lost"] for s in lost_holds)
    assert set(outcomes) == {"released", "lost"}
    [(_, held)] = [
        (labels, point)
        for labels, point in otel.points("aiocoord.lock.hold.duration", aiocoord_path=path)
        if labels["aiocoord.outcome"] == "released"
    ]
    assert held.count == outcomes.count("released")


# --- GroupMember, SharedCount, ShardedCounter -----------------------------------------------


async def test_group_member_join_update_leave_spans_and_rejoins(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/group")
    async with traced() as client:
        member = GroupMember(client, "/group", participant_id="m1", data=b"x")
        with otel.tracer.start_as_current_span("request") as request:
            await member.start()
            await member.update(b"y")
        try:
            await expire_session(client)
            await member.wait_member()
            assert total(otel, "aiocoord.group.rejoins", aiocoord_path=path) == 1
        finally:
            with otel.tracer.start_as_current_span("shutdown") as shutdown:
                await member.aclose()
    expected = {"aiocoord.recipe": "group_member", "aiocoord.path": path}
    expected["aiocoord.participant_id"] = "m1"
    for name, outcome, parent in [
        ("aiocoord.group.join", "joined", request),
        ("aiocoord.group.update", "updated", request),
        ("aiocoord.group.leave", "left", shutdown),
    ]:
        span = otel.span(name)
        assert attributes(span) == {**expected, "aiocoord.outcome": outcome}
        assert span.parent is not None
        assert span.parent.span_id == parent.get_span_context().span_id


async def test_shared_count_sets_and_sharded_counter_adds(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client, traced() as other_client:
        async with (
            SharedCount(client, "/count", 0) as count,
            SharedCount(other_client, "/count", 0) as other,
        ):
            ticket = count.versioned_value
            assert await count.try_set_count(ticket, 1)
            assert not await count.try_set_count(ticket, 2)  # a stale ticket: nothing sent
            stale = other.versioned_value
            await count.set_count(3)
            # The other's view may or may not have caught up: force a server refusal.
            if other.versioned_value == stale:
                assert not await other.try_set_count(stale, 4)
        sharded = ShardedCounter(client, "/sharded", upper=2, shards=2)
        with otel.tracer.start_as_current_span("request") as request:
            assert (await sharded.add(2)).succeeded
            assert not (await sharded.add(1)).succeeded
    sets = otel.spans("aiocoord.counter.set")
    outcomes = [attributes(s)["aiocoord.outcome"] for s in sets]
    assert outcomes[:3] == ["set", "mismatch", "set"]
    for span in sets:
        assert attributes(span)["aiocoord.recipe"] == "shared_count"
        assert attributes(span)["aiocoord.path"] == _ns(zookeeper, "/count")
    adds = otel.spans("aiocoord.counter.add")
    assert [attributes(s)["aiocoord.outcome"] for s in adds] == ["added", "bound"]
    for span in adds:
        labels = attributes(span)
        assert labels["aiocoord.recipe"] == "sharded_counter"
        assert labels["aiocoord.attempts"] >= 1
        assert labels["aiocoord.batch_size"] == 1
        assert labels["aiocoord.combined"] is False
        assert span.parent is not None
        assert span.parent.span_id == request.get_span_context().span_id
    points = otel.points("aiocoord.counter.add.duration", aiocoord_path=_ns(zookeeper, "/sharded"))
    assert sum(point.count for _, point in points) == 2


# --- nothing for what was not used --------------------------------------------------------------


async def test_nothing_of_the_new_recipes_is_emitted_when_they_are_not_used(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client:
        async with aiocoord.Mutex(client, "/lock"):
            await client.create("/plain", b"x")
        counter = aiocoord.AtomicLong(client, "/n")
        await counter.increment()
    prefixes = ("aiocoord.discovery.", "aiocoord.partition.", "aiocoord.group.")
    assert not [s.name for s in otel.spans() if s.name.startswith(prefixes)]
    assert not otel.spans("aiocoord.counter.set")
    mine = zookeeper.namespace
    for metric in (
        "aiocoord.discovery.reregistrations",
        "aiocoord.discovery.picks",
        "aiocoord.discovery.errors",
        "aiocoord.partition.items.owned",
        "aiocoord.group.rejoins",
    ):
        assert not [
            labels
            for labels, _ in otel.points(metric)
            if str(labels.get("aiocoord.path", "")).startswith(mine)
        ]
    recipes = {attributes(s).get("aiocoord.recipe") for s in otel.spans()}
    assert recipes == {None, "mutex", "atomic_long"}
