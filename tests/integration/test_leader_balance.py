"""LeaderElectionGroup (#29): leaders spread across processes, and settle."""

from __future__ import annotations

import asyncio
import contextlib
import math

import pytest
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import LeaderElectionGroup

pytestmark = pytest.mark.timeout(120)


class Fleet:
    """Groups of the same elections, one per client (process), and who leads what."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.groups: list[LeaderElectionGroup] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.leading: dict[str, str] = {}  # path -> id, as the terms report it
        self.overlaps = 0
        self.changed = asyncio.Event()

    def join(self, client: aiocoord.Client, name: str) -> LeaderElectionGroup:
        group = LeaderElectionGroup(client, self.paths, participant_id=name, settle=0.05)
        self.groups.append(group)

        async def fn(path: str) -> None:
            if path in self.leading:
                self.overlaps += 1  # two terms of one election at once: never
            self.leading[path] = name
            self.changed.set()
            try:
                await asyncio.Event().wait()
            finally:
                if self.leading.get(path) == name:
                    del self.leading[path]
                self.changed.set()

        self.tasks.append(asyncio.create_task(group.run(fn)))
        return group

    def counts(self) -> dict[str, int]:
        found = {g.participant_id: 0 for g in self.groups}
        for name in self.leading.values():
            found[name] += 1
        return found

    async def settled(self) -> dict[str, int]:
        fair = math.ceil(len(self.paths) / len(self.groups))
        async with asyncio.timeout(EVENT_TIMEOUT):
            while True:
                counts = self.counts()
                if len(self.leading) == len(self.paths) and max(counts.values()) <= fair:
                    return counts
                self.changed.clear()
                await self.changed.wait()

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_four_processes_in_twelve_elections_settle_at_three_each(started) -> None:
    clients = await started(4)
    fleet = Fleet([f"/elections/e{i:02d}" for i in range(12)])
    try:
        fleet.join(clients[0], "p0")
        async with asyncio.timeout(EVENT_TIMEOUT):
            while len(fleet.leading) < 12:  # the only process leads all of them
                fleet.changed.clear()
                await fleet.changed.wait()
        for i in (1, 2, 3):
            fleet.join(clients[i], f"p{i}")
        counts = await fleet.settled()
        assert sorted(counts.values()) == [3, 3, 3, 3]
        assert fleet.overlaps == 0
        moved = sum(g.handed_over for g in fleet.groups)
        # At most every excess term moves once per change in the fleet (3 joins).
        assert 9 <= moved <= 9 + 6 + 4, moved
        # A process leaves: its terms go to the queues' next, and the rest settle
        # at ceil(12 / 3) = 4 each.
        leaving = fleet.tasks.pop()
        fleet.groups.pop()
        leaving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leaving
        counts = await fleet.settled()
        assert sorted(counts.values()) == [4, 4, 4]
        assert fleet.overlaps == 0
    finally:
        await fleet.stop()
