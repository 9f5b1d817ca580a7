"""Hand-over, priority and observe in an election shared with Curator (#29):
Curator's LeaderSelector and LeaderLatch are observed by their ids, ignore
hand-overs and priorities, and never lead at the same time as an aiocoord
participant (both sides check an ephemeral "inside" node on entering a term)."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import pytest
from _curator import kill, read_line, send_line, start_curator
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord import (
    LeaderElection,
    LeaderLatch,
    LeaderObserver,
    LeadershipLostError,
    NodeExistsError,
)

pytestmark = pytest.mark.timeout(180)


class Java:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.seen: list[str] = []

    async def expect(self, prefix: str) -> str:
        for line in self.seen:
            if line.startswith(prefix):
                self.seen.remove(line)
                return line
        while True:
            line = await read_line(self.proc)
            assert not line.startswith("VIOLATION"), line
            if line.startswith(prefix):
                return line
            self.seen.append(line)

    async def participants(self) -> list[str]:
        await send_line(self.proc, "participants")
        return (await self.expect("PARTICIPANTS")).split()[1:]


class Py:
    """An aiocoord LeaderElection running terms that hold the "inside" node."""

    def __init__(self, client: aiocoord.Client, name: str, **kwargs: object) -> None:
        self.client = client
        self.election = LeaderElection(client, "/leader", participant_id=name, **kwargs)  # type: ignore[arg-type]
        self.leading = asyncio.Event()
        self.ended: list[str] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                async with self.election.hold():
                    try:
                        await self.client.create("/inside", ephemeral=True)
                    except NodeExistsError:
                        pytest.fail(f"{self.election.participant_id} leads beside another leader")
                    self.leading.set()
                    try:
                        await asyncio.Event().wait()
                    finally:
                        self.leading.clear()
                        with anyio.CancelScope(shield=True):
                            await self.client.delete("/inside")
            except LeadershipLostError as error:
                self.ended.append(error.reason)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def leader_is(changes, wanted: str) -> aiocoord.Participant:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(EVENT_TIMEOUT):
        async for leader in changes:
            if leader is not None and leader.id == wanted:
                return leader
    raise AssertionError("the stream ended")


async def test_a_mixed_selector_election_with_hand_over_and_priority(
    curator_classpath: str, zookeeper, client_factory, children_reach
) -> None:
    ns = zookeeper.namespace
    clients = [client_factory() for _ in range(4)]
    await asyncio.gather(*(c.start() for c in clients))
    watcher = clients[3]
    peers: list[Py] = []
    java: Java | None = None
    try:
        async with LeaderObserver(watcher, "/leader").changes() as changes:
            peers.append(Py(clients[0], "a"))
            await leader_is(changes, "a")
            proc = await start_curator(
                curator_classpath,
                "CuratorLeader",
                "selector",
                zookeeper.connect_string,
                f"{ns}/leader",
                f"{ns}/inside",
                "j0",
            )
            java = Java(proc)
            await children_reach(watcher, "/leader", 2)
            peers.append(Py(clients[1], "b"))
            await children_reach(watcher, "/leader", 3)
            # Curator's view: the election record is not a participant.
            assert await java.participants() == ["a", "j0", "b"]
            # a hands over to b, but j0 (Curator) is next in line and ignores it.
            await peers[0].election.hand_over(to="b", wait=False)
            assert await java.expect("LEADER ") == "LEADER j0"
            leader = await leader_is(changes, "j0")  # a Curator leader, observed by its id
            assert leader.data == b"j0" and leader.fencing_token is not None
            # Priority: Curator takes no part; c waits until j0 is done.
            peers.append(Py(clients[2], "c", priority=5))
            await children_reach(watcher, "/leader", 4)
            assert not peers[2].leading.is_set()
            await send_line(java.proc, "quit")
            assert await java.expect("RELEASED ") == "RELEASED j0"
            assert await java.expect("DONE") == "DONE"
            assert await java.proc.wait() == 0
            # b is named by the hand-over, then c of a higher priority takes over.
            await leader_is(changes, "c")
            async with asyncio.timeout(EVENT_TIMEOUT):
                await peers[2].leading.wait()
            assert "priority take-over by 'c'" in peers[1].ended or not peers[1].ended
            assert peers[0].ended == ["handed over to 'b'"]
    finally:
        if java is not None:
            await kill(java.proc)
        for peer in peers:
            await peer.stop()


async def test_a_curator_latch_is_observed_and_a_priority_latch_waits_for_it(
    curator_classpath: str, zookeeper, client_factory, children_reach
) -> None:
    ns = zookeeper.namespace
    a, watcher = client_factory(), client_factory()
    await asyncio.gather(a.start(), watcher.start())
    proc = await start_curator(
        curator_classpath,
        "CuratorLeader",
        "latch",
        zookeeper.connect_string,
        f"{ns}/leader",
        f"{ns}/inside",
        "j0",
    )
    java = Java(proc)
    try:
        assert await java.expect("LEADER ") == "LEADER j0"
        async with LeaderObserver(watcher, "/leader").changes() as changes:
            leader = await leader_is(changes, "j0")
            assert leader.data == b"j0"
            async with LeaderLatch(a, "/leader", participant_id="p", priority=9) as latch:
                await children_reach(watcher, "/leader", 2)
                assert await java.participants() == ["j0", "p"]
                assert not latch.has_leadership  # Curator ignores priorities
                await send_line(java.proc, "quit")
                assert await java.expect("DONE") == "DONE"
                assert await latch.wait_leader(timeout=EVENT_TIMEOUT)
                await latch.proclaim(b"p's address")
                leader = await leader_is(changes, "p")
                while leader.data != b"p's address":
                    leader = await leader_is(changes, "p")
    finally:
        await kill(proc)
