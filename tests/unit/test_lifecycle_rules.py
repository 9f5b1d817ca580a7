"""The kit's Lifecycle on its own, no server: an opening and a closing that are
plain coroutines, stopped at events the test controls.

tests/integration/test_lifecycle.py checks the same contract on every recipe
against a real server; here each ordering of start, aclose and cancellation is
pinned down one at a time.
"""

from __future__ import annotations

import asyncio

import pytest

from aiocoord import RecipeClosedError
from aiocoord._recipes._kit._lifecycle import Lifecycle, Phase


class Recipe:
    """A stand-in recipe: its opening waits for ``release`` (or fails with
    ``failure``), and undoing it waits for ``undo_done``."""

    def __init__(self, *, restartable: bool = True) -> None:
        self.life = Lifecycle("stand-in '/x'", self.opening, self.closing, restartable=restartable)
        self.release = asyncio.Event()
        self.undo_done = asyncio.Event()
        self.undo_done.set()
        self.failure: Exception | None = None
        self.in_opening = asyncio.Event()
        self.opened = asyncio.Event()
        """Set as the opening returns (in the same step: it is done when a waiter runs)."""
        self.made = 0
        """What the opening made and nobody undid yet."""
        self.closings: list[bool] = []

    async def opening(self) -> None:
        self.made += 1
        self.in_opening.set()
        try:
            await self.release.wait()
            if self.failure is not None:
                raise self.failure
            self.opened.set()
        except BaseException:
            await asyncio.shield(self.undo_done.wait())  # a cleanup nothing cuts short
            self.made -= 1
            raise

    async def closing(self, started: bool) -> None:
        self.closings.append(started)
        if started:
            self.made -= 1


async def test_start_then_aclose() -> None:
    recipe = Recipe()
    recipe.release.set()
    await recipe.life.start()
    assert recipe.life.phase is Phase.STARTED and recipe.made == 1
    await recipe.life.aclose()
    assert recipe.life.phase is Phase.CLOSED and recipe.made == 0
    assert recipe.closings == [True]


async def test_aclose_releases_a_waiting_start_at_once_and_returns_after_the_undo() -> None:
    recipe = Recipe()
    recipe.undo_done.clear()
    starting = asyncio.create_task(recipe.life.start())
    await recipe.in_opening.wait()
    closing = asyncio.create_task(recipe.life.aclose())
    with pytest.raises(RecipeClosedError, match="closed while starting"):
        await starting  # while the opening's cleanup still waits
    assert not closing.done() and recipe.made == 1
    recipe.undo_done.set()
    await closing
    assert recipe.made == 0 and recipe.closings == [False]


async def test_a_callers_cancellation_stays_cancelled_error_and_it_may_start_again() -> None:
    recipe = Recipe()
    starting = asyncio.create_task(recipe.life.start())
    await recipe.in_opening.wait()
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert recipe.life.phase is Phase.NEW and recipe.made == 0
    recipe.release.set()
    await recipe.life.start()
    assert recipe.life.phase is Phase.STARTED
    await recipe.life.aclose()
    assert recipe.made == 0


async def test_a_failed_start_raises_its_error_and_may_start_again() -> None:
    recipe = Recipe()
    recipe.failure = ValueError("refused")
    recipe.release.set()
    with pytest.raises(ValueError, match="refused"):
        await recipe.life.start()
    assert recipe.life.phase is Phase.NEW and recipe.made == 0
    recipe.failure = None
    await recipe.life.start()
    await recipe.life.aclose()


async def test_a_failed_start_closes_what_cannot_start_again() -> None:
    recipe = Recipe(restartable=False)
    recipe.failure = ValueError("refused")
    recipe.release.set()
    with pytest.raises(ValueError, match="refused"):
        await recipe.life.start()
    assert recipe.life.phase is Phase.CLOSED and recipe.closings == [False]
    with pytest.raises(RecipeClosedError, match="cannot start again"):
        await recipe.life.start()


async def test_aclose_before_start_is_idempotent_and_start_after_is_refused() -> None:
    recipe = Recipe()
    await recipe.life.aclose()
    await recipe.life.aclose()
    assert recipe.closings == [False]
    with pytest.raises(RecipeClosedError, match="cannot start again"):
        await recipe.life.start()
    assert recipe.made == 0


async def test_a_second_start_is_a_runtime_error_not_a_closed_one() -> None:
    recipe = Recipe()
    starting = asyncio.create_task(recipe.life.start())
    await recipe.in_opening.wait()
    with pytest.raises(RuntimeError, match="already starting") as info:
        await recipe.life.start()
    assert not isinstance(info.value, RecipeClosedError)
    recipe.release.set()
    await starting
    with pytest.raises(RuntimeError, match="already started"):
        await recipe.life.start()
    await recipe.life.aclose()


async def test_concurrent_acloses_all_wait_for_the_one_close() -> None:
    recipe = Recipe()
    recipe.undo_done.clear()
    starting = asyncio.create_task(recipe.life.start())
    await recipe.in_opening.wait()
    first = asyncio.create_task(recipe.life.aclose())
    second = asyncio.create_task(recipe.life.aclose())
    with pytest.raises(RecipeClosedError):
        await starting
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    recipe.undo_done.set()
    await asyncio.gather(first, second)
    assert recipe.closings == [False]  # the closing ran once


async def test_a_cancelled_aclose_still_finishes_the_close() -> None:
    recipe = Recipe()
    recipe.undo_done.clear()
    starting = asyncio.create_task(recipe.life.start())
    await recipe.in_opening.wait()
    closing = asyncio.create_task(recipe.life.aclose())
    with pytest.raises(RecipeClosedError):
        await starting
    closing.cancel()
    await asyncio.sleep(0)
    assert not closing.done()  # it waits for the close, then raises the cancellation
    recipe.undo_done.set()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert recipe.made == 0 and recipe.closings == [False]


async def test_an_opening_done_before_its_callers_cancellation_lands_is_closed() -> None:
    """The opening finished, but the caller's cancellation reached start() before
    it saw that: nothing of the object may live on unseen, so it is closed."""
    recipe = Recipe()
    starting = asyncio.create_task(recipe.life.start())
    recipe.release.set()
    await recipe.opened.wait()  # the opening is done; start() has not run since
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert recipe.made == 0 and recipe.closings == [True]
    assert recipe.life.phase is Phase.CLOSED
