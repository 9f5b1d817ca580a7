"""What every holder recipe shares: learning that a hold was lost.

A hold (a lock, a semaphore lease, leadership) is lost when the client enters
a state its error policy calls an error: LOST always, SUSPENDED under the
standard policy (nobody can tell, while disconnected, whether the session
still stands). Holders can poll ``lost``, await :meth:`Hold.wait_lost`, or run
their work in a cancel scope that is cancelled on loss.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio

from .._session import Client, ConnectionState, ErrorPolicy

__all__ = ["Hold", "LossMonitor", "exit_loss_scope", "native_cancel_pending"]

log = logging.getLogger("aiocoord")


def native_cancel_pending() -> bool:
    """Whether the running task has a cancellation that nothing has delivered.

    A hold's cancel scope, cancelled by a loss at the moment a native
    ``task.cancel()`` arrives (a close, a TaskGroup), can take the one
    CancelledError for its own and end quietly: the task would go on as if
    never cancelled, and a loop in it would never stop. The task's count of
    requested cancellations still tells; the caller then raises CancelledError.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def exit_loss_scope(scope: anyio.CancelScope, exc_type: Any, exc: Any, tb: Any) -> bool:
    """Exit the cancel scope a hold's block runs in; True if it swallowed the
    cancellation a loss caused (the caller then reports the loss).

    False when it took a native cancellation for the loss's (see
    :func:`native_cancel_pending`): the block's CancelledError then propagates
    from the caller's ``__aexit__``, which returns None.
    """
    return bool(scope.__exit__(exc_type, exc, tb)) and not native_cancel_pending()


class Hold:
    """Local record of one thing held, and whether it has been lost."""

    def __init__(self) -> None:
        self.lost = False
        self.reason = ""
        self.subject = ""
        """What is held, for the log (``lock '/a'``); set by :meth:`LossMonitor.add`."""
        self.session_id = 0
        """The session that granted it; set by :meth:`LossMonitor.add`."""
        self._lost_event = asyncio.Event()
        self._scopes: list[anyio.CancelScope] = []

    def mark_lost(self, reason: str) -> None:
        """Record the loss (the first ``reason`` stays), wake waiters, cancel scopes."""
        if self.lost:
            return
        self.lost = True
        self.reason = reason
        # An operator's first clue that two holders may overlap: always WARNING.
        log.warning("%s lost (session 0x%x): %s", self.subject or "a hold", self.session_id, reason)
        self._lost_event.set()
        for scope in self._scopes:
            scope.cancel()

    async def wait_lost(self) -> None:
        """Wait until the hold is lost (at once if it already is; a release is no loss).

        ``reason`` then says why it was lost.
        """
        await self._lost_event.wait()

    def add_scope(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` when the hold is lost (at once if it already is)."""
        self._scopes.append(scope)
        if self.lost:
            scope.cancel()

    def remove_scope(self, scope: anyio.CancelScope) -> None:
        """Stop cancelling ``scope`` on loss (its block is over)."""
        if scope in self._scopes:
            self._scopes.remove(scope)


class LossMonitor:
    """Marks a recipe's holds lost when the client enters an error state.

    Listens to the client only while it has holds, so idle recipes cost nothing.
    """

    def __init__(self, client: Client, policy: ErrorPolicy, what: str = "") -> None:
        self._client = client
        self._policy = policy
        self._what = what
        """What the holds are, for the log when one is lost (``lock '/a'``)."""
        self._holds: set[Hold] = set()

    def add(self, hold: Hold, session_id: int) -> None:
        """Watch ``hold``, granted in session ``session_id``.

        Call it with no await between the decision that granted the hold and
        this call: transitions before it are judged here, from the current
        state and session, and every later one by the listener.
        """
        hold.subject, hold.session_id = self._what, session_id
        if not self._holds:
            self._client.add_listener(self._on_state)
        self._holds.add(hold)
        if self._client.session_id != session_id:
            hold.mark_lost("the session that granted it has ended")
            return
        # The connection may have dropped after the grant's reply arrived.
        state = self._client.state
        if state is not None and self._policy.is_error_state(state):
            hold.mark_lost(f"the connection was {state.value}")

    def still_holds(self, session_id: int) -> bool:
        """Whether something granted in ``session_id`` would still count as held now."""
        if self._client.session_id != session_id:
            return False
        state = self._client.state
        return state is None or not self._policy.is_error_state(state)

    def discard(self, hold: Hold) -> None:
        self._holds.discard(hold)
        if not self._holds:
            self._client.remove_listener(self._on_state)

    def _on_state(self, state: ConnectionState) -> None:
        if self._policy.is_error_state(state):
            for hold in list(self._holds):
                hold.mark_lost(f"the connection was {state.value}")
