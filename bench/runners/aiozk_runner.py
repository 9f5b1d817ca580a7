"""aiozk as a peer: its Lock and Counter recipes, pipelined and single round trips.

aiozk is also aiocoord's wire codec, so this is the same protocol code driven
by a different session layer and different recipes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiozk  # noqa: TID251 - a peer under measurement, not aiocoord's codec
import aiozk.exc  # noqa: TID251

from . import _aio
from ._common import Offer, Result, RunArgs, main

LIBRARY = "aiozk"


@contextlib.asynccontextmanager
async def _clients(connect: str, count: int) -> AsyncIterator[list[Any]]:
    """``count`` started aiozk clients (separate sessions), closed on exit."""
    clients = [aiozk.ZKClient(connect, session_timeout=10) for _ in range(count)]
    try:
        await asyncio.gather(*(client.start() for client in clients))
        yield clients
    finally:
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


def _count_cas_failures(client: Any) -> Callable[[], int]:
    """Wrap ``client.set`` to count BadVersion answers (failed compare-and-sets);
    return a function reading the count. aiozk's Counter reports none itself."""
    plain_set = client.set
    failures = 0

    async def counted_set(path: str, data: Any, version: int) -> Any:
        nonlocal failures
        try:
            return await plain_set(path, data, version)
        except aiozk.exc.BadVersion:
            failures += 1
            raise

    client.set = counted_set
    return lambda: failures


class _Counter:
    """aiozk's Counter recipe (optimistic: retries a failed CAS at once, forever)."""

    def __init__(self, client: Any, path: str) -> None:
        self._recipe = client.recipes.Counter(path, default=0)
        self._cas_failures = _count_cas_failures(client)

    async def start(self) -> None:
        await self._recipe.start()

    async def increment(self) -> tuple[bool, int]:
        before = self._cas_failures()
        await self._recipe.incr()
        return True, self._cas_failures() - before


async def _mutex(args: RunArgs) -> Result:
    async with _clients(args.connect, args.contenders) as clients:
        locks = [client.recipes.Lock(f"{args.path}/lock") for client in clients]
        return await _aio.mutex(args, LIBRARY, locks)


async def _counter(args: RunArgs) -> Result:
    path = f"{args.path}/counter"
    async with _clients(args.connect, args.contenders) as clients:
        counters = [_Counter(client, path) for client in clients]
        for shared in counters:  # one at a time: concurrent first creates collide
            await shared.start()

        async def final_value() -> int:
            data, _stat = await clients[0].get(path)
            return int(data)

        return await _aio.counter(args, LIBRARY, counters, final_value)


def _node_ops(
    client: Any, node: str
) -> tuple[Callable[[bytes], Awaitable[int]], Callable[[], Awaitable[bytes]]]:
    async def set_data(data: bytes) -> int:
        stat = await client.set(node, data, -1)
        return int(stat.version)

    async def get_data() -> bytes:
        data, _stat = await client.get(node)
        return bytes(data)

    return set_data, get_data


async def _pipelined(args: RunArgs) -> Result:
    node = f"{args.path}/node"
    async with _clients(args.connect, 1) as (client,):
        await client.ensure_path(node)
        set_data, _get = _node_ops(client, node)

        async def final_version() -> int:
            _data, stat = await client.get(node)
            return int(stat.version)

        return await _aio.pipelined(args, LIBRARY, set_data, final_version)


async def _latency(args: RunArgs) -> Result:
    node = f"{args.path}/node"
    async with _clients(args.connect, 1) as (client,):
        await client.ensure_path(node)
        set_data, get_data = _node_ops(client, node)
        return await _aio.latency(args, LIBRARY, set_data, get_data)


OFFERS = [
    Offer("mutex", _mutex),
    Offer("counter", _counter),
    Offer("pipelined", _pipelined, contenders=(1,)),
    Offer("latency", _latency, contenders=(1,)),
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
