"""Waiting, without sleeping, until clients have handled what the server sent them."""

from __future__ import annotations

import asyncio
from typing import Any

import aiocoord


async def settle(*clients: aiocoord.Client) -> None:
    """Let every event already sent to these clients be handled, and the requests it
    prompted be answered (a round trip on each, a few times over)."""
    for _ in range(3):
        for client in clients:
            await client.sync()
        for _ in range(5):
            await asyncio.sleep(0)


async def waiting(client: aiocoord.Client, watches: int = 1) -> None:
    """Return once ``client`` has ``watches`` watches pending: its consumers wait."""
    for _ in range(100):
        if client.pending_watches >= watches:
            return
        await settle(client)
    raise AssertionError(f"no consumer of {client!r} is waiting on a watch")


async def written(client: aiocoord.Client, count: int = 1) -> None:
    """Return once ``count`` requests of ``client`` are written and unanswered (its
    server paused, or a proxy holding them): a request that has left."""
    for _ in range(10_000):
        connection = client._engine._conn
        if connection is not None and connection.in_flight >= count:
            return
        await asyncio.sleep(0)  # the request goes out from another task's next step
    raise AssertionError(f"{client!r} never had {count} requests in flight")


def acquiring(lock: Any) -> asyncio.Task[bool]:
    """A task that waits for ``lock``, for tests that watch, cancel or time a waiter.

    The acquire runs inside a coroutine of this module's: a Mutex's acquire that is a
    task of its own is refused (DetachedAcquireError), since that task would end as
    soon as it held the lock. This task ends holding too, and the lock is then
    released, which is all these tests need.
    """

    async def acquire() -> bool:
        result: bool = await lock.acquire()
        return result

    return asyncio.create_task(acquire())
