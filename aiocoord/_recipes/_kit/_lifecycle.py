"""One lifecycle for every recipe that is started and closed (a latch, a group
member, a cache, a shared count).

The contract, the same for all of them:

- ``start()`` runs the recipe's opening (create its node, add its watch, read
  its first state). It starts once: a second call, while starting or started,
  raises RuntimeError; a call after ``aclose()`` raises RecipeClosedError.
  If the opening fails, or the caller cancels it, what it made is undone and
  the object may be started again.
- ``aclose()`` may come at any time, from any task, any number of times. A
  ``start()`` under way is cancelled at once and raises RecipeClosedError
  (CancelledError is kept for a caller's own cancellation, as anyio does for a
  stream closed under a waiting reader). ``aclose()`` returns once the
  opening has undone itself and the recipe's closing has run: after that,
  nothing of the object is made on the server later (a create still stuck in
  the network is found by its marker and deleted before ``aclose()``
  returns). A concurrent or repeated ``aclose()`` waits for the first.
- ``async with obj:`` is ``start()`` then ``aclose()``.

The opening runs as a task of its own. That is what lets ``aclose()`` release
the waiting ``start()`` at once while the opening's cleanup (which may need a
round trip, bounded by the client's session timeout) finishes in the
background of ``aclose()``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from typing import Any, Self

import anyio

from ..._exceptions import RecipeClosedError

__all__ = ["Lifecycle", "Phase", "Resource"]


class Phase(enum.Enum):
    """Where a started-and-closed recipe is in its life."""

    NEW = "new"
    STARTING = "starting"
    STARTED = "started"
    CLOSED = "closed"


async def _finish(task: asyncio.Future[Any]) -> bool:
    """Wait until ``task`` is done, whatever cancels the caller meanwhile; True if
    the caller was cancelled (it raises CancelledError once its own work is done).

    The shield keeps anyio's level-triggered cancellation from being delivered
    on every pass; the loop absorbs native ``Task.cancel()`` calls.
    """
    cancelled = False
    with anyio.CancelScope(shield=True):
        while not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                cancelled = True
    return cancelled


def _succeeded(task: asyncio.Future[Any] | None) -> bool:
    """Whether ``task`` ended with a result (its error, if any, counts as seen)."""
    if task is None or not task.done() or task.cancelled():
        return False
    return task.exception() is None


class Lifecycle:
    """The state machine behind a recipe's ``start()`` and ``aclose()`` (see the module).

    ``opening()`` makes what the recipe keeps; on an error or cancellation it
    undoes what it made before it raises. ``closing(started)`` runs once, in
    the first ``aclose()``, after any opening has ended: ``started`` says
    whether an opening completed (then undo it); either way it ends the
    recipe's streams and waiters. ``what`` names the object in errors
    (``"leader latch '/a'"``). Unless ``restartable``, a start that fails or
    is cancelled closes the object (for recipes whose state a failed start
    leaves spent, such as a cache's view).
    """

    def __init__(
        self,
        what: str,
        opening: Callable[[], Awaitable[None]],
        closing: Callable[[bool], Awaitable[None]],
        *,
        restartable: bool = True,
    ) -> None:
        self._what = what
        self._restartable = restartable
        self._opening_fn = opening
        self._closing_fn = closing
        self.phase = Phase.NEW
        self._opening: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        """Done once ``aclose()`` was called: wakes a waiting ``start()``."""

    def __repr__(self) -> str:
        return f"<Lifecycle {self._what} {self.phase.value}>"

    @property
    def closed(self) -> bool:
        """Whether ``aclose()`` was called (its work may still be under way)."""
        return self.phase is Phase.CLOSED

    def check_open(self) -> None:
        """RecipeClosedError once ``aclose()`` was called."""
        if self.phase is Phase.CLOSED:
            raise RecipeClosedError(f"{self._what} is closed")

    async def start(self) -> None:
        """Run the opening; see the module for every way this ends."""
        if self.phase is Phase.CLOSED:
            raise RecipeClosedError(f"{self._what} is closed: it cannot start again")
        if self.phase is not Phase.NEW:
            raise RuntimeError(f"{self._what} is already {self.phase.value}: it starts once")
        self.phase = Phase.STARTING
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        closed = self._closed
        opening = self._opening = asyncio.ensure_future(self._opening_fn())
        try:
            await asyncio.wait([opening, closed], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller's own cancellation: undo the opening, then raise it.
            if self.phase is Phase.STARTING:
                opening.cancel()
                await _finish(opening)
            if self.phase is Phase.STARTING:  # not closed meanwhile
                self._opening = None
                if _succeeded(opening):
                    # It ended before the cancellation reached it: close the
                    # object, so that nothing of it lives on unseen.
                    self.phase = Phase.STARTED
                    await _finish(self._begin_close())
                else:
                    await self._failed()
            raise
        if closed.done():
            # aclose() owns the opening now, and waits for its cleanup.
            raise RecipeClosedError(f"{self._what} was closed while starting")
        self._opening = None
        if opening.cancelled():
            await self._failed()
            raise asyncio.CancelledError
        error = opening.exception()
        if error is not None:
            await self._failed()
            raise error
        self.phase = Phase.STARTED

    async def _failed(self) -> None:
        """A start that failed (its opening undid itself): ready to start again, or
        closed if not ``restartable``."""
        if self._restartable:
            self.phase = Phase.NEW
        elif await _finish(self._begin_close()):
            raise asyncio.CancelledError

    async def aclose(self) -> None:
        """Cancel a ``start()`` under way, then close; idempotent (see the module)."""
        closing = self._closing or self._begin_close()
        if await _finish(closing):
            raise asyncio.CancelledError
        closing.result()

    def _begin_close(self) -> asyncio.Task[None]:
        """Mark the object closed now (a ``start()`` waking later sees it), and
        run the rest of the close as a task every ``aclose()`` waits for."""
        previous = self.phase
        self.phase = Phase.CLOSED
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        opening, self._opening = self._opening, None
        self._closing = asyncio.ensure_future(self._close(previous is Phase.STARTED, opening))
        return self._closing

    async def _close(self, started: bool, opening: asyncio.Task[None] | None) -> None:
        if opening is not None:
            if not opening.done():
                opening.cancel()
            await _finish(opening)
            # An opening that ended before the cancellation reached it is undone here.
            started = started or _succeeded(opening)
        await self._closing_fn(started)


class Resource:
    """The base of every started-and-closed recipe: ``start()``, ``aclose()`` and
    ``async with`` over its :class:`Lifecycle` (as anyio's ``AsyncResource``
    gives ``async with`` over ``aclose()``).

    A subclass makes its :class:`Lifecycle` (with its own opening and closing)
    in its constructor and hands it to ``Resource.__init__``; its docstring says
    what they make and undo.
    """

    def __init__(self, life: Lifecycle) -> None:
        self.__life = life

    async def start(self) -> None:
        """Start: make what the object keeps (see the class) and return once it
        stands.

        A start that fails, or that its caller cancels, undoes what it made and
        raises (a cancellation stays CancelledError); whether it may be tried
        again is the class's to say. RuntimeError if started before,
        RecipeClosedError once closed (also when :meth:`aclose` comes while
        this waits).
        """
        await self.__life.start()

    async def aclose(self) -> None:
        """Close: cancel a :meth:`start` under way, undo what it made (see the class
        for what stays), and end the object's iterators and waiters.

        May come at any time, from any task, any number of times, also before
        :meth:`start`; once it returns, nothing of the object is made on the
        server later.
        """
        await self.__life.aclose()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
