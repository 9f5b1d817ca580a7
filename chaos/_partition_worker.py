"""A worker's partitioner drivers (see ``_partitions.py`` for what they prove)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import aiocoord
from aiocoord import (
    CoordinationError,
    NodeExistsError,
    NotOwnerError,
    Partitioner,
    PartitionLostError,
    Stat,
)

from ._partitions import (
    PARTITION_DATA,
    PARTITION_ITEMS,
    PARTITION_SETTLE,
    PARTITIONS,
    server_view,
    store_resource,
)
from ._store import StoreClient
from ._worker import CACHE_SETTLE, Outcome, _name, _policy, _Section

if TYPE_CHECKING:
    from ._worker import Worker

__all__ = ["Partitions"]


class Partitions:
    """One worker's partitioners: one kept per client for the whole run, one that
    joins and leaves; each writes under its items' fences."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.kept: list[Partitioner] = []

    async def start(self, clients: list[aiocoord.Client]) -> None:
        for item in PARTITION_ITEMS:
            with contextlib.suppress(NodeExistsError):
                await clients[0].create(f"{PARTITION_DATA}/{item}", b"0", make_parents=True)
        for index, client in enumerate(clients):
            part = self.make(client, self.member_id(self.worker.name, index))
            await part.start()
            self.kept.append(part)

    @staticmethod
    def member_id(worker: str, index: int) -> str:
        """The id of the member ``worker`` keeps on its ``index``-th client."""
        return f"{worker}-keep-{index}"

    @staticmethod
    def make(client: aiocoord.Client, member_id: str) -> Partitioner:
        return Partitioner(
            client, PARTITIONS, PARTITION_ITEMS, participant_id=member_id, settle=PARTITION_SETTLE
        )

    def drivers(
        self, clients: list[aiocoord.Client]
    ) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        standard = clients[0]
        return [
            *(
                (f"partition-{i}", self.work_loop(f"partition-{i}", part, client))
                for i, (part, client) in enumerate(zip(self.kept, clients, strict=True))
            ),
            ("partition-churn", self.churn_loop("partition-churn", standard)),
        ]

    async def aclose(self) -> None:
        for part in self.kept:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await part.aclose()

    async def final(self) -> dict[str, Any]:
        """What each kept member owns once the whole group has settled (or the bound
        passed): every worker's kept members, and only they, are members on the server,
        and each of this worker's is stable and owns what the server says it claims.

        Waiting for one's own members to be stable is not enough: a worker paused past
        its session timeout rejoins only after the others stopped, and its members'
        return moves items again after another worker may have reported."""
        expected = {
            self.member_id(f"w{w}", index)
            for w in range(self.worker.config.members)
            for index in range(len(self.kept))
        }
        deadline = time.monotonic() + CACHE_SETTLE
        client = self.worker.clients[0]
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            settled = False
            with contextlib.suppress(CoordinationError, RuntimeError, TimeoutError):
                for part in self.kept:
                    await part.wait_stable(timeout=remaining)
                async with asyncio.timeout(remaining):
                    ids, claims = await server_view(client)
                settled = ids == expected and all(
                    part.assignment.stable
                    and part.owned
                    == {i for i, owner in claims.items() if owner == part.participant_id}
                    for part in self.kept
                )
            if settled or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.1)
        members: dict[str, dict[str, Any]] = {
            part.participant_id: {"owned": sorted(part.owned), "stable": part.assignment.stable}
            for part in self.kept
        }
        return {
            "type": "final",
            "what": "partition-owned",
            "worker": self.worker.name,
            "members": members,
        }

    # --- writing under an item's fence ---------------------------------------------------

    async def work_loop(self, driver: str, part: Partitioner, client: aiocoord.Client) -> None:
        store = self.worker.store(driver)

        async def step(rng: random.Random) -> None:
            await self.write_owned(driver, part, client, store, rng)

        try:
            await self.worker.forever(driver, step, 0.3)
        finally:
            store.close()

    async def write_owned(
        self,
        driver: str,
        part: Partitioner,
        client: aiocoord.Client,
        store: StoreClient,
        rng: random.Random,
    ) -> None:
        for item in sorted(part.owned):
            await self.worker.op(
                "partition",
                "write",
                functools.partial(self.write, part=part, item=item, store=store, rng=rng),
                driver=driver,
                policy=_policy(client),
                item=item,
                member=part.participant_id,
            )

    async def write(
        self, op_id: str, part: Partitioner, item: str, store: StoreClient, rng: random.Random
    ) -> Outcome:
        """The store's begin/end with the item's token, then a fenced ZooKeeper write."""
        section = _Section()
        try:
            section.token = token = part.fencing_tokens[item]
        except KeyError:  # moved on since the loop looked
            return Outcome("fail", NotOwnerError.__name__, section.value(lost=False))
        section.t_acq = self.worker.now()

        async def lost() -> None:
            async with part.changes() as changes:
                async for assignment in changes:
                    if item not in assignment.owned:
                        return

        await self.worker.fenced(
            store, op_id, section, [(store_resource(item), token)], "exclusive", lost, rng
        )
        section.t_rel = self.worker.now()
        if section.rejected:
            status = "fail" if section.told_after is not None else "ok"
            return Outcome(status, section.reason, section.value(lost=status == "fail"))
        try:
            results = (
                await part.transaction(item)
                .set(f"{PARTITION_DATA}/{item}", str(token).encode())
                .commit()
            )
        except PartitionLostError as error:
            return Outcome("fail", _name(error), section.value(lost=True, fenced="refused"))
        except NotOwnerError as error:
            return Outcome("fail", _name(error), section.value(lost=True, fenced="not sent"))
        except CoordinationError as error:
            return Outcome("unknown", _name(error), section.value(lost=False, fenced="unknown"))
        stat = results[0]
        assert isinstance(stat, Stat)
        return Outcome("ok", None, section.value(lost=False, fenced="applied", zxid=stat.mzxid))

    # --- members that come and go ------------------------------------------------------------

    async def churn_loop(self, driver: str, client: aiocoord.Client) -> None:
        serial = itertools.count(1)
        store = self.worker.store(driver)

        async def join(part: Partitioner) -> Outcome:
            try:
                await part.start()
            except CoordinationError as error:
                return Outcome("fail", _name(error))
            return Outcome("ok")

        async def leave(part: Partitioner) -> Outcome:
            await part.aclose()
            return Outcome("ok")

        async def step(rng: random.Random) -> None:
            member_id = f"{self.worker.name}-{driver}-{next(serial)}"
            part = self.make(client, member_id)
            joined = await self.worker.op("partition", "join", lambda _op: join(part), id=member_id)
            if joined.status != "ok":
                return
            try:
                await self.worker.nap(rng.uniform(0.5, 3.0))
                await self.write_owned(driver, part, client, store, rng)
            finally:
                await self.worker.op("partition", "leave", lambda _op: leave(part), id=member_id)

        try:
            await self.worker.forever(driver, step, 2.0)
        finally:
            store.close()
