"""A pulse: wake every task waiting now, once.

Recipes that keep a local state (a member's membership, a cache's view, a
provider's candidates) let callers wait for it to change: each waiter checks
the state, and if it is not what it wants, waits for the next pulse and checks
again. An ``asyncio.Event`` left set would wake later waiters too; one that is
set and cleared would miss a waiter that was woken but has not yet run. So
each pulse sets the event waiters hold and gives later ones a fresh one.
"""

from __future__ import annotations

import asyncio

__all__ = ["Pulse"]


class Pulse:
    """Wakes every task in :meth:`wait` at the next :meth:`fire`, and only those."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def __repr__(self) -> str:
        return "<Pulse>"

    def fire(self) -> None:
        """Wake every task waiting now; a wait that starts later waits for the next one."""
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self) -> None:
        """Wait for the next :meth:`fire`."""
        await self._event.wait()
