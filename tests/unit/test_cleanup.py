"""run_cleanup: a recipe's cleanup runs to its end whatever cancels its caller."""

from __future__ import annotations

import asyncio
import types

import anyio
import pytest

from aiocoord._exceptions import SessionExpiredError
from aiocoord._session import run_cleanup

CLIENT = types.SimpleNamespace(session_timeout=1.0)


async def test_two_native_cancellations_neither_stop_the_cleanup_nor_get_lost() -> None:
    proceed = asyncio.Event()
    finished: list[str] = []

    async def cleanup() -> None:
        await proceed.wait()
        finished.append("deleted")

    task = asyncio.create_task(run_cleanup(CLIENT, cleanup))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    assert not task.done()
    proceed.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == ["deleted"]


async def test_an_enclosing_timeout_still_reads_as_a_timeout() -> None:
    proceed = asyncio.Event()

    async def cleanup() -> None:
        await proceed.wait()

    async def caller() -> None:
        async with asyncio.timeout(0.01):
            try:
                await asyncio.Event().wait()
            finally:
                asyncio.get_running_loop().call_later(0.05, proceed.set)
                await run_cleanup(CLIENT, cleanup)  # type: ignore[arg-type]

    with pytest.raises(TimeoutError):
        await caller()
    assert proceed.is_set()


async def test_an_anyio_cancel_scope_waits_for_the_cleanup_without_spinning() -> None:
    proceed = asyncio.Event()
    finished: list[str] = []

    async def cleanup() -> None:
        await proceed.wait()
        finished.append("deleted")

    with anyio.CancelScope() as scope:
        scope.cancel()
        asyncio.get_running_loop().call_later(0.05, proceed.set)
        await run_cleanup(CLIENT, cleanup)  # type: ignore[arg-type]
    assert finished == ["deleted"]


async def test_a_lost_session_counts_as_done_and_other_errors_propagate() -> None:
    async def gone() -> None:
        raise SessionExpiredError("expired")

    async def broken() -> None:
        raise ValueError("bug")

    await run_cleanup(CLIENT, gone)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bug"):
        await run_cleanup(CLIENT, broken)  # type: ignore[arg-type]


async def test_a_cleanup_past_its_bound_is_abandoned_or_raises_if_it_must_finish() -> None:
    quick = types.SimpleNamespace(session_timeout=-2.45)  # a bound of 0.1 s

    async def forever() -> None:
        await asyncio.Event().wait()

    await run_cleanup(quick, forever)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await run_cleanup(quick, forever, must_finish=True)  # type: ignore[arg-type]
