"""``aiocoord top`` and ``aiocoord inspect`` on leader elections: a LeaderLatch's and
a LeaderElection's leader (by the recipes' own rule), the candidates queued behind
it, the term's fencing token, and a change of leader counted as a hand-off, with
real participants against the test kit's ZooKeeper (``--once --json``, and the
live view on a pseudo-terminal read through pyte: test_top.py's Terminal)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from _kit import EVENT_TIMEOUT
from test_top import _once, terminal
from test_top_recipes import _inspect

from aiocoord import Client, LeaderElection, LeaderLatch
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(90)


@contextlib.asynccontextmanager
async def latches(
    clients: list[Client], path: str, children_reach
) -> AsyncIterator[list[LeaderLatch]]:
    """One started latch per client (ids a, b, c, ...), the first leading, all queued."""
    started = [
        LeaderLatch(client, path, participant_id=chr(ord("a") + i))
        for i, client in enumerate(clients)
    ]
    try:
        await started[0].start()
        assert await started[0].wait_leader(timeout=EVENT_TIMEOUT)
        for latch in started[1:]:
            await latch.start()
        await children_reach(clients[0], path, len(clients))
        yield started
    finally:
        for latch in started:
            await latch.aclose()


@contextlib.asynccontextmanager
async def campaigning(election: LeaderElection) -> AsyncIterator[None]:
    """``election`` queued (its hold() waiting in a task) for the block."""

    async def campaign() -> None:
        async with election.hold():
            await asyncio.Event().wait()

    task = asyncio.create_task(campaign())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_once_json_shows_each_elections_leader_queue_and_token(
    started, children_reach, zookeeper: ZooKeeperTarget
) -> None:
    a, b, c = await started(3)
    async with latches([a, b, c], "/app/latch", children_reach) as (first, _, _):
        leader = LeaderElection(a, "/app/election", participant_id="e1")
        waiting = LeaderElection(b, "/app/election", participant_id="e2")
        async with leader.hold(), campaigning(waiting):
            await children_reach(a, "/app/election", 2)
            code, out, err = await _once(zookeeper, "/app", "--once", "--json")
            assert code == 0, err
            rows = {r["path"]: r for r in json.loads(out)["recipes"]}
            latch = rows["/app/latch"]
            assert latch["kind"] == "latch"
            assert (latch["holders"], latch["queue"], latch["waiters"]) == (
                ["a"],
                ["b", "c"],
                2,
            )
            assert latch["value"] == first.fencing_token
            election = rows["/app/election"]
            # Told from a Mutex by its nodes' tag, though the layout is a lock's.
            assert election["kind"] == "election"
            assert (election["holders"], election["queue"]) == (["e1"], ["e2"])
            assert election["value"] == leader.fencing_token

            code, out, err = await _inspect(zookeeper, "/app/election", "--json")
            assert code == 0, err
            report = json.loads(out)
            assert report["kind"] == "leader election"
            assert report["leader"]["data"] == "e1"
            assert [p["data"] for p in report["participants"]] == ["e2"]
            assert report["fencing_token"] == leader.fencing_token

            code, out, err = await _inspect(zookeeper, "/app/election")
            assert code == 0, err
            lines = out.splitlines()
            assert lines[0].startswith("/app/election: leader election  [LeaderElection")
            assert lines[0].endswith(f"fencing token {leader.fencing_token}")
            assert lines[1].split()[0] == "leader" and '"e1"' in lines[1]
            assert lines[2].split()[0] == "candidate" and '"e2"' in lines[2]


async def test_after_a_priority_take_over_the_row_names_the_new_leader_and_its_token(
    started, children_reach, zookeeper: ZooKeeperTarget
) -> None:
    """A higher priority queues behind the leader and takes over; the old leader
    queues again, behind it."""
    a, b = await started(2)
    low = LeaderElection(a, "/app/election", participant_id="low", priority=1)
    high = LeaderElection(b, "/app/election", participant_id="high", priority=5)
    low_leads = asyncio.Event()

    async def lead() -> None:
        low_leads.set()
        await asyncio.Event().wait()

    running = asyncio.create_task(low.run(lead))  # queues again after the take-over
    try:
        await asyncio.wait_for(low_leads.wait(), EVENT_TIMEOUT)
        async with high.hold():  # low's node is gone once high leads
            await children_reach(a, "/app/election", 2)  # low queued again
            code, out, err = await _once(zookeeper, "/app", "--once", "--json")
            assert code == 0, err
            [row] = json.loads(out)["recipes"]
            assert (row["kind"], row["holders"], row["queue"]) == ("election", ["high"], ["low"])
            assert row["value"] == high.fencing_token
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_the_live_view_shows_a_latchs_leader_and_counts_a_change_of_leader(
    started, children_reach, zookeeper: ZooKeeperTarget
) -> None:
    a, b = await started(2)
    async with latches([a, b], "/app/latch", children_reach) as (first, second):
        token = first.fencing_token
        async with terminal(zookeeper, "/app", "--interval", "0.2") as term:
            await term.wait_for(lambda t: " /app/latch " in t, "the latch's row")
            # KIND PATH WAIT DEPTH VALUE HANDOFFS HOLDER
            assert term.row("/app/latch") == [
                "latch",
                "/app/latch",
                "1",
                "-",
                str(token),
                "0",
                "a;",
                "next:",
                "b",
            ]
            await first.resign()  # queues again, behind b
            assert await second.wait_leader(timeout=EVENT_TIMEOUT)
            new_token = second.fencing_token
            await term.wait_for(
                lambda t: term.row("/app/latch")[-3:] == ["b;", "next:", "a"], "the new leader"
            )
            assert term.row("/app/latch")[4:6] == [str(new_token), "1"]  # one hand-off
            term.press("q")
            async with asyncio.timeout(15):
                assert await term.proc.wait() == 0


def test_the_cli_tells_the_leaders_nodes_by_their_tag() -> None:
    from aiocoord._cli import _layouts
    from aiocoord._recipes.leaders import _common

    for lock_name in _common.LOCK_NAMES:
        for priority in (None, 5, -2):
            name = (
                f"_c_{'0' * 8}-0000-0000-0000-{'0' * 12}-{_common.node_name(lock_name, priority)}"
            )
            assert _layouts.LEADER_TAGGED.search(name + "0000000007"), name
            assert _common.is_ours(name + "0000000007")
    assert not _layouts.LEADER_TAGGED.search("_c_x-lock-0000000007")  # a Mutex's
