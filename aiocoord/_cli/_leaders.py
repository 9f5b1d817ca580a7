"""Who leads each LeaderLatch and LeaderElection that an ``inspect`` walk found.

The walk tells an election from its queue's node names, and can only guess
that the head of the queue leads, which is Curator's rule. aiocoord's
participants add priorities and hand-overs: an aiocoord head that is to give
way (a hand-over names another node, or a higher priority queues behind it)
does not lead, and nobody does until it has queued again. The public
:class:`aiocoord.LeaderObserver` applies the recipes' own rule (two reads per
election), and gives the term's fencing token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiocoord

__all__ = ["LEADER_KINDS", "read_leaders"]

LEADER_KINDS = ("leader latch", "leader election")
"""The report kinds whose leader :func:`read_leaders` fills in."""

Report = dict[str, Any]


def _elections(report: Report) -> Iterator[Report]:
    if report["kind"] in LEADER_KINDS:
        yield report
    for child in report.get("children", []):
        yield from _elections(child)


async def read_leaders(client: aiocoord.Client, report: Report) -> None:
    """Set each election's ``leader`` (None while nobody leads), its
    ``participants`` (the other candidates, in queue order) and the term's
    ``fencing_token`` (the leader node's creation zxid; None without a leader)."""
    for found in _elections(report):
        queue: list[Report] = [found["leader"], *found["participants"]]
        leader = await aiocoord.LeaderObserver(client, found["path"]).leader()
        if leader is None:
            found |= {"leader": None, "participants": queue, "fencing_token": None}
            continue
        name = leader.node.rsplit("/", 1)[1]
        entry = next((e for e in queue if e["node"] == name), None)
        if entry is None:  # it joined after the walk listed the queue
            entry = {"node": name, "data": leader.id}
        others = [e for e in queue if e is not entry]
        found |= {"leader": entry, "participants": others, "fencing_token": leader.fencing_token}
