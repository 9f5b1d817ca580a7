"""Waiting for a pipeline's replies under a deadline (a Python 3.11 gather pitfall)."""

from __future__ import annotations

import asyncio

import anyio

from aiocoord import ConnectionLossError
from aiocoord._session._connection import replies


async def test_each_reply_or_error_comes_back_in_order() -> None:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(3)]
    futures[0].set_result("a")
    futures[1].set_exception(ConnectionLossError("lost"))
    loop.call_soon(futures[2].set_result, "c")
    outcomes = await replies(futures)
    assert outcomes[0] == "a" and isinstance(outcomes[1], ConnectionLossError)
    assert outcomes[2] == "c"
    assert await replies([]) == []


async def test_a_deadline_that_fires_as_the_last_reply_fails_is_the_deadlines_own() -> None:
    """The last request fails and, in the same moment, a cancel scope fires while
    an earlier one is still pending. asyncio.gather would raise a CancelledError
    without anyio's message here, which the scope then lets escape."""
    loop = asyncio.get_running_loop()
    pending, failing = loop.create_future(), loop.create_future()
    with anyio.CancelScope() as scope:

        def fail_and_cancel() -> None:
            failing.set_exception(ConnectionLossError("lost"))
            scope.cancel()

        loop.call_soon(fail_and_cancel)
        await replies([pending, failing])
    assert scope.cancelled_caught
    assert pending.cancelled()  # the abandoned request is not waited for
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
