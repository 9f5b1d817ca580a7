# ruff: noqa: F811  (the tests take test_telemetry's fixtures, imported by name)
"""OpenTelemetry spans and metrics of the leader recipes (LeaderLatch,
LeaderElection, LeaderObserver, LeaderElectionGroup), MultiLock, and a
ServiceDiscovery's close (docs/observability.md).

Read through the same in-memory exporter and reader as test_telemetry.py (the
global providers are set once per process): metrics through clients with
``Telemetry(paths=True)``, each test looking only at its own namespace's paths.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _kit import EVENT_TIMEOUT
from test_telemetry import Otel, _ns, otel, traced  # noqa: F401  (otel, traced are fixtures)

from aiocoord import (
    LeaderElection,
    LeaderElectionGroup,
    LeaderLatch,
    LeaderObserver,
    LeadershipLostError,
    MultiLock,
    Mutex,
    Participant,
    ServiceDiscovery,
    ServiceInstance,
)
from aiocoord.testing import ZooKeeperTarget, expire_session

pytestmark = pytest.mark.timeout(120)


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def total(otel: Otel, metric: str, **match: object) -> float:
    """The sum of ``metric``'s points whose attributes include ``match``."""
    return sum(point.value for _, point in otel.points(metric, **match))


def of(spans: list[Any], participant: str) -> list[Any]:
    """The spans of one participant, in the order they ended."""
    return [s for s in spans if attributes(s).get("aiocoord.participant_id") == participant]


def parent_is(span: Any, parent: Any) -> bool:
    return span.parent is not None and span.parent.span_id == parent.get_span_context().span_id


async def leader_reaches(changes: AsyncIterator[Participant | None], wanted_id: str | None) -> None:
    async with asyncio.timeout(EVENT_TIMEOUT):
        async for leader in changes:
            if (None if leader is None else leader.id) == wanted_id:
                return
    raise AssertionError(f"the stream ended before {wanted_id!r} led")


async def hold_until_lost(election: LeaderElection, leading: asyncio.Event) -> str:
    """Lead in one term until it is lost; the loss's reason."""
    with pytest.raises(LeadershipLostError) as lost:
        async with election.hold():
            leading.set()
            await asyncio.Event().wait()
    return lost.value.reason


# --- LeaderElection -----------------------------------------------------------------------------


async def test_an_election_campaign_term_and_proclaim_nest_under_the_callers_span(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/election")
    held = "aiocoord.leader.terms.held"
    async with traced() as client:
        election = LeaderElection(client, "/election", participant_id="a")
        with otel.tracer.start_as_current_span("request") as request:
            async with election.hold():
                token = election.fencing_token
                assert total(otel, held, aiocoord_path=path) == 1
                await election.proclaim(b"10.0.0.1:80")
        assert total(otel, held, aiocoord_path=path) == 0
    expected = {
        "aiocoord.recipe": "leader_election",
        "aiocoord.path": path,
        "aiocoord.participant_id": "a",
    }
    campaign = otel.span("aiocoord.leader.campaign")
    term = otel.span("aiocoord.leader.term")
    proclaim = otel.span("aiocoord.leader.proclaim")
    # The term outlives the campaign: a sibling of it, under the caller's span.
    for span in (campaign, term, proclaim):
        assert parent_is(span, request), span.name
    assert attributes(campaign) == {
        **expected,
        "aiocoord.outcome": "elected",
        "aiocoord.queue_position": 0,
        "aiocoord.gave_way": 0,
        "aiocoord.fencing_token": token,
        "aiocoord.wait_ms": attributes(campaign)["aiocoord.wait_ms"],
    }
    assert attributes(campaign)["aiocoord.wait_ms"] >= 0
    assert attributes(term) == {
        **expected,
        "aiocoord.fencing_token": token,
        "aiocoord.outcome": "released",
    }
    assert list(term.events) == []
    assert attributes(proclaim) == {**expected, "aiocoord.outcome": "proclaimed"}

    [(labels, wait)] = otel.points("aiocoord.lock.wait.duration", aiocoord_path=path)
    assert labels == {
        "aiocoord.recipe": "leader_election",
        "aiocoord.path": path,
        "aiocoord.outcome": "elected",
    }
    assert wait.count == 1
    [(labels, hold)] = otel.points("aiocoord.lock.hold.duration", aiocoord_path=path)
    assert labels["aiocoord.outcome"] == "released"
    assert hold.count == 1
    [(_, queued)] = otel.points("aiocoord.contenders.queued", aiocoord_path=path)
    assert queued.value == 0
    assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == 0


async def test_a_term_lost_to_a_priority_take_over_ends_with_the_reason(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/election")
    async with traced() as a, traced() as b:
        low = LeaderElection(a, "/election", participant_id="low", priority=1)
        high = LeaderElection(b, "/election", participant_id="high", priority=5)
        leading = asyncio.Event()
        async with asyncio.timeout(EVENT_TIMEOUT), asyncio.TaskGroup() as tasks:
            lost = tasks.create_task(hold_until_lost(low, leading))
            await leading.wait()
            low_token = low.fencing_token
            # High leads once low's term is over (its node is deleted after its block).
            async with high.hold():
                high_token = high.fencing_token
        assert lost.result() == "priority take-over by 'high'"
    terms = otel.spans("aiocoord.leader.term")
    [low_term], [high_term] = of(terms, "low"), of(terms, "high")
    assert attributes(low_term)["aiocoord.outcome"] == "taken_over"
    assert attributes(low_term)["aiocoord.fencing_token"] == low_token
    assert [(e.name, dict(e.attributes or {})) for e in low_term.events] == [
        ("aiocoord.hold.lost", {"aiocoord.reason": "priority take-over by 'high'"})
    ]
    assert attributes(high_term)["aiocoord.outcome"] == "released"
    assert list(high_term.events) == []
    [high_campaign] = of(otel.spans("aiocoord.leader.campaign"), "high")
    assert attributes(high_campaign)["aiocoord.outcome"] == "elected"
    assert attributes(high_campaign)["aiocoord.queue_position"] == 1  # low was ahead
    assert attributes(high_campaign)["aiocoord.fencing_token"] == high_token
    # Not given up by the leader: a lost hold, counted.
    assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == 1
    held = otel.points("aiocoord.lock.hold.duration", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: p.count for labels, p in held} == {
        "taken_over": 1,
        "released": 1,
    }


async def test_a_term_lost_with_its_session_ends_with_the_reason(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/election")
    async with traced() as client:
        election = LeaderElection(client, "/election", participant_id="a")
        leading = asyncio.Event()
        async with asyncio.timeout(EVENT_TIMEOUT), asyncio.TaskGroup() as tasks:
            lost = tasks.create_task(hold_until_lost(election, leading))
            await leading.wait()
            await expire_session(client)
        reason = lost.result()
    term = otel.span("aiocoord.leader.term")
    assert attributes(term)["aiocoord.outcome"] == "lost"
    assert [(e.name, dict(e.attributes or {})) for e in term.events] == [
        ("aiocoord.hold.lost", {"aiocoord.reason": reason})
    ]
    assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == 1
    assert total(otel, "aiocoord.leader.terms.held", aiocoord_path=path) == 0


async def test_an_election_term_given_up_says_how_without_counting_a_loss(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget, children_reach: Any
) -> None:
    path = _ns(zookeeper, "/election")
    async with traced() as a, traced() as b:
        first = LeaderElection(a, "/election", participant_id="a")
        second = LeaderElection(b, "/election", participant_id="b")

        async def second_leads_then_resigns() -> str:
            with pytest.raises(LeadershipLostError) as lost:
                async with second.hold():  # resign() cancels the block
                    await second.resign()
            return lost.value.reason

        async with asyncio.timeout(EVENT_TIMEOUT), asyncio.TaskGroup() as tasks:
            with pytest.raises(LeadershipLostError) as handed:
                async with first.hold():  # the hand-over cancels the block
                    resigned = tasks.create_task(second_leads_then_resigns())
                    await children_reach(a, "/election", 2)
                    await first.hand_over(to="b", wait=False)
        # The block sees the short reason; the span's event says more.
        assert handed.value.reason == "handed over to 'b'"
        assert resigned.result() == "resigned"
    terms = otel.spans("aiocoord.leader.term")
    [a_term], [b_term] = of(terms, "a"), of(terms, "b")
    assert attributes(a_term)["aiocoord.outcome"] == "handed_over"
    assert [(e.name, dict(e.attributes or {})) for e in a_term.events] == [
        (
            "aiocoord.hold.given_up",
            {"aiocoord.reason": "handed over to 'b'", "aiocoord.target": "b"},
        )
    ]
    assert attributes(b_term)["aiocoord.outcome"] == "resigned"
    assert [(e.name, dict(e.attributes or {})) for e in b_term.events] == [
        (
            "aiocoord.hold.given_up",
            {"aiocoord.reason": "resigned; queued again", "aiocoord.requeue": True},
        )
    ]
    # Given up, not lost: the lost-holds counter does not move.
    assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == 0
    held = otel.points("aiocoord.lock.hold.duration", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: p.count for labels, p in held} == {
        "handed_over": 1,
        "resigned": 1,
    }


# --- LeaderLatch ----------------------------------------------------------------------------------


async def test_latch_hand_over_and_resign_end_terms_without_a_loss(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget, children_reach: Any
) -> None:
    path = _ns(zookeeper, "/latch")
    async with traced() as a, traced() as b, traced() as c:
        first = LeaderLatch(a, "/latch", participant_id="a")
        second = LeaderLatch(b, "/latch", participant_id="b")
        third = LeaderLatch(c, "/latch", participant_id="c")
        try:
            with otel.tracer.start_as_current_span("startup"):
                await first.start()
                assert await first.wait_leader(timeout=EVENT_TIMEOUT)
            first_token = first.fencing_token
            await second.start()
            await third.start()
            await children_reach(a, "/latch", 3)
            with otel.tracer.start_as_current_span("request") as handing:
                await first.hand_over(to="c", timeout=EVENT_TIMEOUT)
            assert await third.wait_leader(timeout=EVENT_TIMEOUT)
            third_token = third.fencing_token
            with otel.tracer.start_as_current_span("request") as resigning:
                await third.resign(requeue=False)
            # b gave way to c once; it leads once a, requeued ahead of it or not, is gone.
            await first.aclose()
            assert await second.wait_leader(timeout=EVENT_TIMEOUT)
        finally:
            for latch in (first, second, third):
                await latch.aclose()
    expected = {"aiocoord.recipe": "leader_latch", "aiocoord.path": path}
    hand_over = otel.span("aiocoord.leader.hand_over")
    assert parent_is(hand_over, handing)
    assert attributes(hand_over) == {
        **expected,
        "aiocoord.participant_id": "a",
        "aiocoord.target": "c",
        "aiocoord.next_leader": "c",
        "aiocoord.fencing_token": first_token,
        "aiocoord.outcome": "handed_over",
    }
    resign = otel.span("aiocoord.leader.resign")
    assert parent_is(resign, resigning)
    assert attributes(resign) == {
        **expected,
        "aiocoord.participant_id": "c",
        "aiocoord.fencing_token": third_token,
        "aiocoord.outcome": "resigned",
    }
    terms = otel.spans("aiocoord.leader.term")
    outcomes = {
        (attributes(s)["aiocoord.participant_id"], attributes(s)["aiocoord.outcome"]) for s in terms
    }
    assert {("a", "handed_over"), ("c", "resigned"), ("b", "released")} <= outcomes
    # Given up, never lost: an event says how, and no loss is counted (below).
    events = {
        (attributes(s)["aiocoord.participant_id"], attributes(s)["aiocoord.outcome"]): [
            (e.name, dict(e.attributes or {})) for e in s.events
        ]
        for s in terms
    }
    assert events[("a", "handed_over")] == [
        (
            "aiocoord.hold.given_up",
            {"aiocoord.reason": "handed over to 'c'", "aiocoord.target": "c"},
        )
    ]
    assert events[("c", "resigned")] == [
        (
            "aiocoord.hold.given_up",
            {"aiocoord.reason": "resigned; left the election", "aiocoord.requeue": False},
        )
    ]
    assert events[("b", "released")] == []
    # The latch's task follows the queue for no caller: root spans, even when
    # started under one.
    campaigns = otel.spans("aiocoord.leader.campaign")
    for span in [*terms, *campaigns]:
        assert span.parent is None, span.name
        assert attributes(span)["aiocoord.recipe"] == "leader_latch"
    [b_campaign] = [s for s in of(campaigns, "b") if attributes(s)["aiocoord.outcome"] == "elected"]
    assert attributes(b_campaign)["aiocoord.gave_way"] == 1  # to c, named by the hand-over
    assert attributes(b_campaign)["aiocoord.queue_position"] == 1
    assert total(otel, "aiocoord.holds.lost", aiocoord_path=path) == 0
    assert total(otel, "aiocoord.leader.terms.held", aiocoord_path=path) == 0
    # The hand-over's own wait for the next leader is no user's stream: not counted.
    assert not otel.points("aiocoord.leader.changes", aiocoord_path=path)


# --- LeaderObserver -----------------------------------------------------------------------------


async def test_an_observer_counts_leader_changes_and_makes_no_span_per_change(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    path = _ns(zookeeper, "/latch")
    async with traced() as a, traced() as watcher:
        observer = LeaderObserver(watcher, "/latch")
        async with observer.changes() as changes:
            assert await anext(changes) is None  # the first value: no change
            async with LeaderLatch(a, "/latch", participant_id="a") as latch:
                assert await latch.wait_leader(timeout=EVENT_TIMEOUT)
                await leader_reaches(changes, "a")
            await leader_reaches(changes, None)
    points = otel.points("aiocoord.leader.changes", aiocoord_path=path)
    assert {labels["aiocoord.outcome"]: point.value for labels, point in points} == {
        "leader": 1,
        "none": 1,
    }
    assert {labels["aiocoord.recipe"] for labels, _ in points} == {"leader_observer"}
    names = {s.name for s in otel.spans()}
    assert names & {"aiocoord.leader.observe", "aiocoord.leader.change"} == set()
    assert not [n for n in names if "observe" in n or "change" in n]


# --- LeaderElectionGroup --------------------------------------------------------------------------


async def test_a_group_counts_its_balance_hand_overs_and_reports_as_the_group(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    paths = ["/jobs/one", "/jobs/two"]
    leading: dict[str, str] = {}
    changed = asyncio.Event()

    def body(name: str) -> Any:
        async def fn(path: str) -> None:
            leading[path] = name
            changed.set()
            try:
                await asyncio.Event().wait()
            finally:
                if leading.get(path) == name:
                    del leading[path]
                changed.set()

        return fn

    async def until(predicate: Any) -> None:
        async with asyncio.timeout(EVENT_TIMEOUT):
            while not predicate():
                changed.clear()
                await changed.wait()

    async with traced() as a, traced() as b, asyncio.TaskGroup() as tasks:
        first = LeaderElectionGroup(a, paths, participant_id="p1", settle=0.05)
        second = LeaderElectionGroup(b, paths, participant_id="p2", settle=0.05)
        running = [tasks.create_task(first.run(body("p1")))]
        await until(lambda: sorted(leading.values()) == ["p1", "p1"])
        running.append(tasks.create_task(second.run(body("p2"))))
        await until(lambda: sorted(leading.values()) == ["p1", "p2"])
        moved = first.handed_over + second.handed_over
        for task in running:
            task.cancel()
    assert moved >= 1
    counted = [
        (labels, point)
        for path in paths
        for labels, point in otel.points(
            "aiocoord.leader.balance.handovers", aiocoord_path=_ns(zookeeper, path)
        )
    ]
    assert sum(point.value for _, point in counted) == moved
    assert {labels["aiocoord.recipe"] for labels, _ in counted} == {"leader_election_group"}
    terms = otel.spans("aiocoord.leader.term")
    assert {attributes(s)["aiocoord.recipe"] for s in terms} == {"leader_election_group"}
    assert "handed_over" in {attributes(s)["aiocoord.outcome"] for s in of(terms, "p1")}
    campaigns = otel.spans("aiocoord.leader.campaign")
    assert {attributes(s)["aiocoord.recipe"] for s in campaigns} == {"leader_election_group"}
    for path in paths:
        assert total(otel, "aiocoord.leader.terms.held", aiocoord_path=_ns(zookeeper, path)) == 0


# --- MultiLock, and a ServiceDiscovery's close -------------------------------------------------


async def test_multilock_acquire_and_hold_spans_with_the_member_locks_inside(
    otel: Otel, traced: Any
) -> None:
    async with traced() as client, traced() as other:
        multi = MultiLock([Mutex(client, "/locks/one"), Mutex(client, "/locks/two")])
        with otel.tracer.start_as_current_span("request") as request:
            async with multi:
                pass
        async with Mutex(other, "/locks/two"):
            assert not await multi.acquire(timeout=0.1)
    acquires = otel.spans("aiocoord.multilock.acquire")
    assert [attributes(s)["aiocoord.outcome"] for s in acquires] == ["acquired", "timeout"]
    for span in acquires:
        assert attributes(span)["aiocoord.recipe"] == "multi_lock"
        assert tuple(attributes(span)["aiocoord.paths"]) == ("/locks/one", "/locks/two")
    assert parent_is(acquires[0], request)
    hold = otel.span("aiocoord.multilock.hold")
    assert parent_is(hold, request)
    assert attributes(hold)["aiocoord.outcome"] == "released"
    # Each member's acquire nests under the MultiLock's.
    members = [
        attributes(s)["aiocoord.path"].rsplit("/", 1)[1]
        for s in otel.spans("aiocoord.lock.acquire")
        if s.parent is not None and s.parent.span_id == acquires[0].context.span_id
    ]
    assert members == ["one", "two"]


async def test_closing_a_discovery_unregisters_each_instance_in_a_span(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    def api(instance_id: str) -> ServiceInstance:
        return ServiceInstance(
            name="api", id=instance_id, address="10.0.0.7", port=8080, registration_time=1
        )

    async with traced() as client, traced() as other:
        discovery = ServiceDiscovery(client, "/services")
        await discovery.start()
        try:
            await discovery.register(api("i-1"))
            await discovery.register(api("i-2"))
            await other.delete("/services/api/i-2")  # gone before the close
        finally:
            with otel.tracer.start_as_current_span("shutdown") as shutdown:
                await discovery.aclose()
        assert await other.exists("/services/api/i-1") is None
    spans = otel.spans("aiocoord.discovery.unregister")
    assert [
        (attributes(s)["aiocoord.instance_id"], attributes(s)["aiocoord.outcome"]) for s in spans
    ] == [("i-1", "unregistered"), ("i-2", "absent")]
    for span, instance_id in zip(spans, ("i-1", "i-2"), strict=True):
        assert parent_is(span, shutdown)
        assert attributes(span) == {
            "aiocoord.recipe": "service_discovery",
            "aiocoord.path": _ns(zookeeper, f"/services/api/{instance_id}"),
            "aiocoord.service": "api",
            "aiocoord.instance_id": instance_id,
            "aiocoord.outcome": attributes(span)["aiocoord.outcome"],
        }


# --- nothing for what was not used; nothing breaks without an SDK -----------------------------


async def test_nothing_of_leaders_or_multilock_is_emitted_when_they_are_not_used(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client:
        # Made, never used: nothing to report.
        LeaderLatch(client, "/latch")
        LeaderElection(client, "/election")
        LeaderObserver(client, "/election")
        LeaderElectionGroup(client, ["/g/one", "/g/two"])
        one = Mutex(client, "/lock")
        MultiLock([one])
        async with one:
            await client.create("/plain", b"x")
    prefixes = ("aiocoord.leader.", "aiocoord.multilock.")
    assert not [s.name for s in otel.spans() if s.name.startswith(prefixes)]
    mine = zookeeper.namespace
    for metric in (
        "aiocoord.leader.terms.held",
        "aiocoord.leader.changes",
        "aiocoord.leader.balance.handovers",
        "aiocoord.lock.wait.duration",
        "aiocoord.lock.hold.duration",
    ):
        recipes = {
            labels["aiocoord.recipe"]
            for labels, _ in otel.points(metric)
            if str(labels.get("aiocoord.path", "")).startswith(mine)
        }
        assert recipes <= {"mutex"}, metric
    assert {attributes(s).get("aiocoord.recipe") for s in otel.spans()} == {None, "mutex"}


_LEADERS_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys

    if sys.argv[3] == "blocked":
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError(f"{name} is blocked")
                return None

        sys.meta_path.insert(0, Block())
    import aiocoord
    from aiocoord import _telemetry

    assert _telemetry.AVAILABLE is (sys.argv[3] == "api")

    async def main():
        hosts, namespace = sys.argv[1], sys.argv[2]
        telemetry = aiocoord.Telemetry(names={"/x": "x"})
        async with aiocoord.connect(hosts, namespace=namespace, telemetry=telemetry) as c:
            observer = aiocoord.LeaderObserver(c, "/x/latch")
            async with observer.changes() as changes:
                assert await anext(changes) is None
                async with aiocoord.LeaderLatch(c, "/x/latch", participant_id="a") as latch:
                    assert await latch.wait_leader(timeout=20)
                    await latch.proclaim(b"here")
                    while (await anext(changes)) is None:
                        pass
            election = aiocoord.LeaderElection(c, "/x/election", participant_id="e")
            try:
                async with election.hold():  # resign() cancels the block
                    await election.proclaim(b"here")
                    await election.resign()
            except aiocoord.LeadershipLostError as error:
                assert error.reason == "resigned"
            multi = aiocoord.MultiLock([aiocoord.Mutex(c, "/x/a"), aiocoord.Mutex(c, "/x/b")])
            async with multi:
                pass
            instance = aiocoord.ServiceInstance(name="api", id="i-1", address="10.0.0.7")
            async with aiocoord.ServiceDiscovery(c, "/x/services") as discovery:
                await discovery.register(instance)
            assert await c.exists("/x/services/api/i-1") is None
        print("ok")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("otel_api", ["blocked", "api"])
def test_leaders_multilock_and_discovery_run_without_an_sdk(
    zookeeper: ZooKeeperTarget, otel_api: str
) -> None:
    """Without opentelemetry, and with its API but no SDK configured (a fresh process)."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _LEADERS_SCRIPT,
            zookeeper.connect_string,
            f"{zookeeper.namespace}-{otel_api}",
            otel_api,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
