"""``aiocoord inspect`` and ``aiocoord top`` on a Partitioner's layout (member-,
claim- and token- nodes) and on discovery services: ``--json`` for the
details, the table, and the live view on a pseudo-terminal read through pyte
(test_top.py's Terminal)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable

import pytest
from _kit import EVENT_TIMEOUT
from test_top import _connection, _once, terminal

from aiocoord import Assignment, Partitioner, ServiceDiscovery, ServiceInstance
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(90)

ITEMS = ["a", "b", "c"]


async def _inspect(zookeeper: ZooKeeperTarget, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aiocoord",
        "inspect",
        *args,
        *_connection(zookeeper),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _until(part: Partitioner, predicate: Callable[[Assignment], bool]) -> None:
    async with asyncio.timeout(EVENT_TIMEOUT), part.changes() as changes:
        async for assignment in changes:
            if predicate(assignment):
                return


async def _settled(parts: list[Partitioner], shares: list[int]) -> None:
    """Until each member is stable owning its share of the items."""
    for part, share in zip(parts, shares, strict=True):
        await _until(part, lambda a, share=share: a.stable and len(a.owned) == share)


async def test_inspect_shows_a_partitioners_members_their_items_and_generations(
    started, zookeeper: ZooKeeperTarget
) -> None:
    one_client, two_client = await started(2)
    one = Partitioner(one_client, "/work", ITEMS, participant_id="one", settle=0.1)
    two = Partitioner(two_client, "/work", ITEMS, participant_id="two", settle=0.1, weight=2)
    async with one, two:
        await _settled([one, two], [1, 2])
        code, out, err = await _inspect(zookeeper, "/work", "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["kind"] == "partitioner"
        members = {m["id"]: m for m in report["members"]}
        assert set(members) == {"one", "two"}
        assert set(members["one"]["items"]) == one.owned
        assert set(members["two"]["items"]) == two.owned
        assert (members["one"]["weight"], members["two"]["weight"]) == (1.0, 2.0)
        assert "session" in members["one"]
        items = {i["item"]: i for i in report["items"]}
        assert set(items) == set(ITEMS)
        for item, entry in items.items():
            owner = one if item in one.owned else two
            assert entry["owner"] == owner.participant_id
            assert entry["fencing_token"] == owner.fencing_tokens[item]
            assert entry["generation"] >= 1  # claimed at least once
        assert report["generation"] == sum(i["generation"] for i in items.values())

        code, out, err = await _inspect(zookeeper, "/work")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("/work: partitioner  [Partitioner (member-, claim-, token-")
        assert "2 members, 3 of 3 items claimed" in lines[0]
        assert lines[1].split()[:4] == ["member", "one", "weight", "1"]
        assert lines[3].split()[:2] == ["item", "a"]
    # Everyone left: the tokens stay, the items unclaimed.
    code, out, err = await _inspect(zookeeper, "/work", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "partitioner" and report["members"] == []
    assert all(i["owner"] is None for i in report["items"])


async def test_top_once_json_has_a_partitioner_row_and_a_service_row(
    started, zookeeper: ZooKeeperTarget
) -> None:
    (client,) = await started(1)
    part = Partitioner(client, "/app/work", ITEMS, participant_id="solo", settle=0.1)
    async with part, ServiceDiscovery(client, "/app/services") as discovery:
        await discovery.register(ServiceInstance(name="api", id="i-1", address="h", port=1))
        await discovery.register(ServiceInstance(name="api", id="i-2", address="h", enabled=False))
        await _until(part, lambda a: a.stable and len(a.owned) == 3)
        code, out, err = await _once(zookeeper, "/app", "--once", "--json")
        assert code == 0, err
        rows = {r["path"]: r for r in json.loads(out)["recipes"]}
        work = rows["/app/work"]
        assert work["kind"] == "partition"
        assert work["holders"] == ["solo (a b c)"]
        assert (work["waiters"], work["depth"], work["value"]) == (0, 1, 3)
        api = rows["/app/services/api"]
        assert api["kind"] == "service"
        assert api["holders"] == ["i-1", "i-2 (disabled)"]
        assert (api["depth"], api["value"]) == (2, 1)


async def test_the_live_view_shows_partitioners_and_services_and_counts_item_moves(
    started, zookeeper: ZooKeeperTarget
) -> None:
    one_client, two_client = await started(2)
    one = Partitioner(one_client, "/app/work", ITEMS, participant_id="one", settle=0.1)
    two = Partitioner(two_client, "/app/work", ITEMS, participant_id="two", settle=0.1)
    async with one, ServiceDiscovery(one_client, "/app/services") as discovery:
        await discovery.register(ServiceInstance(name="api", id="i-1", address="h", port=1))
        await _until(one, lambda a: a.stable and len(a.owned) == 3)
        async with terminal(zookeeper, "/app", "--interval", "0.2") as term:
            await term.wait_for(lambda t: "one (a b c)" in t, "the partitioner's row")
            assert term.row("/app/work")[:6] == ["partition", "/app/work", "0", "1", "3", "0"]
            service = ["service", "/app/services/api", "0", "1", "1"]
            assert term.row("/app/services/api")[:5] == service
            async with two:
                await _settled([one, two], [2, 1])
                # An item moved to the newcomer: one hand-off in the last minute.
                await term.wait_for(
                    lambda t: " two (" in t and term.row("/app/work")[3] == "2",
                    "the newcomer and its items",
                )
                await term.wait_for(lambda t: term.row("/app/work")[5] == "1", "the hand-off")
            term.press("q")
            async with asyncio.timeout(15):
                assert await term.proc.wait() == 0


def test_the_cli_layouts_are_the_partitioners() -> None:
    from aiocoord._cli import _layouts
    from aiocoord._recipes.partitions import _partitioner

    assert _layouts.PARTITION_MEMBER == _partitioner._MEMBER
    assert _layouts.PARTITION_CLAIM == _partitioner._CLAIM
    assert _layouts.PARTITION_TOKEN == _partitioner._TOKEN
