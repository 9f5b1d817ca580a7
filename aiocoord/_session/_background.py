"""Background work a client owns: recipe watchers, batchers, cleanups.

Recipes start long-running or fire-and-forget work here instead of with a bare
``create_task``: the client keeps a strong reference (asyncio keeps only weak
ones), reports every failure through the ``aiocoord`` logger and to the
recipe's own error callback, and cancels and awaits whatever is left when it
closes, so no task outlives its client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, TypeVar

from .. import _telemetry

__all__ = ["Background"]

log = logging.getLogger("aiocoord")

T = TypeVar("T")


class Background:
    """The tasks and shared per-client state of one client's recipes."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._state: dict[Hashable, Any] = {}
        self._closed = False

    def start(
        self,
        coro: Coroutine[Any, Any, object],
        *,
        name: str,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> asyncio.Task[Any]:
        """Run ``coro`` until it ends or the client closes.

        An exception it raises is logged (ERROR, with the traceback) and, if
        given, passed to ``on_error``. Cancellation is not an error.
        """
        if self._closed:
            coro.close()
            raise RuntimeError("the client is closed: no background work can start")
        # Not under the caller's span: the task outlives the call that started it.
        task = asyncio.get_running_loop().create_task(
            coro, name=name, context=_telemetry.detached_context()
        )
        self._tasks.add(task)

        def done(task: asyncio.Task[Any]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                return
            error = task.exception()
            if error is None:
                return
            log.error("aiocoord background task %r failed", name, exc_info=error)
            if on_error is not None:
                on_error(error)

        task.add_done_callback(done)
        return task

    def state(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The value recipes on this client share under ``key``, made on first use."""
        try:
            value: T = self._state[key]
        except KeyError:
            value = self._state[key] = factory()
        return value

    def __len__(self) -> int:
        return len(self._tasks)

    async def aclose(self) -> None:
        """Cancel every task still running and wait for each to end."""
        self._closed = True
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
                # Awaiting a task that had already ended does not yield, so its
                # done callback (which discards it) may not have run yet.
                self._tasks.discard(task)
        self._state.clear()
