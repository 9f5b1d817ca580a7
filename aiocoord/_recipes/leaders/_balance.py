"""LeaderElectionGroup: one process's part in many elections, with leaders
spread across the processes that take part.

Left alone, the oldest process leads every election it joined first (each
queue's head). A group hands some of its terms over when it leads more than
its fair share, ``ceil(elections / live processes)``, where a process is a
participant id seen in the group's elections (every process's group uses one
id in all of them). It hands each excess term to a process that leads fewer
than the fair share and is queued in that election, so no term ever moves to
a process at or above it.

Why it settles: call a process's excess its leaderships above the fair share,
and add them up. Each hand-over takes one from a process above the share and
gives one to a process below it. Two groups deciding at once may give to the
same process, which may then end above the share, but by less than the
givers lost together (it started below the share), so the sum falls with
every round of hand-overs. When it reaches 0 nobody hands anything over:
every process leads at most the fair share, and there is no flapping. New
processes, or processes leaving, start another round.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import anyio

from ... import _telemetry
from ..._checks import check_seconds
from ..._exceptions import (
    ArgumentTypeError,
    ClientClosedError,
    CoordinationError,
    InvalidArgumentError,
    NoNodeError,
    SessionError,
)
from ..._session import Client, ErrorPolicy
from ..._types import ACL
from .._kit import generated_participant_id
from ._common import Record, contenders, designated, leader_from
from ._leaders import GROUP_KIND, GroupElection
from ._participant import leader_tags

__all__ = ["LeaderElectionGroup"]

log = logging.getLogger("aiocoord")


class LeaderElectionGroup:
    """Take part in many elections as one process, with leadership spread out.

    ``await LeaderElectionGroup(client, paths, participant_id="proc-7").run(fn)``
    joins every election in ``paths`` (one :class:`LeaderElection` each, all
    with the same id: the process's) and calls ``await fn(path)`` for each term
    it wins, queueing again after each, until cancelled. With ``balance`` (the
    default) it hands terms over to other processes while it leads more than
    ``ceil(len(paths) / processes)``, where the processes are the participant
    ids queued in these elections: every process should run a group over the
    same paths. A term handed over ends through the usual loss path (``fn`` is
    cancelled; the reason says "handed over to ...").

    ``settle`` is how long the group lets a burst of changes settle before
    it counts leaders again (seconds); it counts when one of its terms starts
    or ends, and every ``recount`` seconds (jittered) to see processes join
    and leave. A count reads every election's queue in one round trip and the
    queued participants' ids in one more.
    """

    def __init__(
        self,
        client: Client,
        paths: Sequence[str],
        *,
        participant_id: str | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
        balance: bool = True,
        settle: float = 0.1,
        recount: float = 1.0,
    ) -> None:
        if isinstance(paths, str) or not isinstance(paths, Sequence):
            raise ArgumentTypeError("paths", "a sequence of paths", paths)
        if len(set(paths)) != len(paths) or not paths:
            raise InvalidArgumentError("paths", "give each election once, and at least one")
        if participant_id is None:
            participant_id = generated_participant_id()
        self.participant_id = participant_id
        self._client = client
        self.elections = {
            path: GroupElection(
                client, path, participant_id=participant_id, error_policy=error_policy, acl=acl
            )
            for path in paths
        }
        """One election per path, in the order given."""
        self._tags = {path: leader_tags(client, GROUP_KIND, path, participant_id) for path in paths}
        self._balance = balance
        self._settle = check_seconds(settle, "settle")
        self._recount = check_seconds(recount, "recount")
        self._dirty = asyncio.Event()
        self.handed_over = 0
        """How many terms this group has handed over to balance leadership."""

    def __repr__(self) -> str:
        return (
            f"<LeaderElectionGroup id={self.participant_id!r} "
            f"elections={len(self.elections)} leading={len(self.leading())}>"
        )

    def leading(self) -> list[str]:
        """The paths whose election this process leads now (local state)."""
        return [path for path, e in self.elections.items() if e.has_leadership]

    async def run(self, fn: Callable[[str], Awaitable[object]]) -> None:
        """Run ``await fn(path)`` for every term won, in every election, until
        cancelled (or an ``fn`` raises: that ends the group with its error)."""
        if not callable(fn):
            raise ArgumentTypeError("fn", "an async callable", fn)
        async with anyio.create_task_group() as group:
            for path, election in self.elections.items():
                group.start_soon(election.run, self._term(path, fn))
            if self._balance:
                group.start_soon(self._balancer)

    def _term(
        self, path: str, fn: Callable[[str], Awaitable[object]]
    ) -> Callable[[], Awaitable[None]]:
        async def term() -> None:
            self._dirty.set()
            try:
                await fn(path)
            finally:
                self._dirty.set()

        return term

    # --- balancing --------------------------------------------------------------------------

    async def _balancer(self) -> None:
        # Counted again when one of our terms starts or ends, and every
        # ``recount`` seconds (other processes joining or leaving). Not on
        # watches: a persistent watch on an election path, in the client whose
        # contenders wait on that path's children, was seen to leave some of
        # their exists-watches unfired at 20 processes x 200 elections.
        while True:
            with anyio.move_on_after(self._recount * (1 + random.random())):
                await self._dirty.wait()
            # Let a burst settle (jittered, so groups that saw the same change
            # rarely decide at the same moment), then count.
            await anyio.sleep(self._settle * (1 + random.random()))
            self._dirty.clear()
            try:
                await self._rebalance()
            except ClientClosedError:
                raise
            except (SessionError, NoNodeError) as error:
                log.info("leader group %r: balancing waits: %s", self.participant_id, error)
                await self._client.wait_connected()
                self._dirty.set()

    async def _leaders(self) -> tuple[dict[str, str | None], set[str], dict[str, list[str]]]:
        """Each election's leader id (None: nobody), every process seen, and who
        is queued in each election, in queue order."""
        client = self._client
        paths = list(self.elections)
        pipeline = client.pipeline()
        for path in paths:
            pipeline.children(path)
            pipeline.get(path)
        results = await pipeline.execute()
        heads: dict[str, str] = {}
        for i, path in enumerate(paths):
            listing, node = results[2 * i], results[2 * i + 1]
            if isinstance(listing, Exception) or isinstance(node, Exception):
                continue
            ordered = contenders(listing[0])
            record = Record.decode(node[0])
            # During a hand-over nobody leads, but the target is about to: count
            # it there, or others would see it below its share and pile on it.
            head = leader_from(ordered, record) or designated(ordered, record)
            if ordered:
                heads[path] = head or ""
                for name in ordered:
                    heads[f"{path}\0{name}"] = name
        # Every queued node's id, in one more round trip.
        names = [key for key in heads if "\0" in key]
        pipeline = client.pipeline()
        for key in names:
            path, name = key.split("\0")
            pipeline.get(f"{path}/{name}")
        ids: dict[str, str] = {}
        for key, result in zip(names, await pipeline.execute(), strict=True):
            if not isinstance(result, Exception):
                ids[key] = result[0].decode("utf-8", errors="replace")
        leaders: dict[str, str | None] = {}
        queued: dict[str, list[str]] = {path: [] for path in paths}
        processes: set[str] = set()
        for key, pid in ids.items():  # in queue order: listed so above
            path, _name = key.split("\0")
            queued[path].append(pid)
            processes.add(pid)
        for path in paths:
            head = heads.get(path)
            leaders[path] = ids.get(f"{path}\0{head}") if head else None
        return leaders, processes, queued

    async def _rebalance(self) -> None:
        leaders, processes, queued = await self._leaders()
        if not processes:
            return
        fair = math.ceil(len(self.elections) / len(processes))
        counts = Counter(pid for pid in leaders.values() if pid is not None)
        mine = [p for p in self.leading() if leaders.get(p) == self.participant_id]
        excess = len(mine) - fair
        if excess <= 0:
            return
        random.shuffle(mine)
        handing: list[Awaitable[None]] = []
        for path in mine:
            if excess <= 0:
                break
            below = [
                pid for pid in queued[path] if pid != self.participant_id and counts[pid] < fair
            ]
            if not below:
                continue
            # The earliest in the queue: every aiocoord participant ahead of the
            # target gives way in turn, so a short way is a quick hand-over.
            to = below[0]
            counts[to] += 1
            excess -= 1
            handing.append(self._hand(path, to))
        if handing:
            log.info(
                "leader group %r leads %d of %d (fair share %d, %d processes): handing %d over",
                self.participant_id,
                len(mine),
                len(self.elections),
                fair,
                len(processes),
                len(handing),
            )
            await asyncio.gather(*handing)

    async def _hand(self, path: str, to: str) -> None:
        try:
            await self.elections[path].hand_over(to=to, wait=False)
        except CoordinationError as error:  # no longer leading, target gone, ...
            log.info("leader group %r: no hand-over of %r: %s", self.participant_id, path, error)
            return
        self.handed_over += 1
        metric = self._tags[path].metric_attributes
        _telemetry.add("aiocoord.leader.balance.handovers", 1, metric)
