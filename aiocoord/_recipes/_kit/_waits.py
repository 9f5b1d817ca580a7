"""Waits every recipe shares: a ``timeout=`` deadline, and a node going away.

Every wait here is bounded with ``anyio.move_on_after``, so an enclosing
``anyio.fail_after`` or ``asyncio.timeout`` still cancels it as usual: a
``timeout=`` only ever shortens what the caller allows.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Awaitable, Callable

import anyio

from ..._exceptions import ConnectionLossError, SessionExpiredError
from ..._session import Client, ConnectionState, Watch, retry_on_connection_loss
from ..._types import EventType, Stat

__all__ = ["Deadline", "Gone", "Reconnects", "wait_change", "wait_gone", "wait_out_session"]


class Deadline:
    """When a ``timeout=`` runs out (never, for None).

    A recipe's first look (create, list, read) always gets at least one
    session timeout (:meth:`first_look`), so ``timeout=0`` looks exactly once
    and gives up only if ZooKeeper cannot be reached; later waits get what is
    left (:meth:`remaining`).
    """

    __slots__ = ("at",)

    def __init__(self, timeout: float | None) -> None:
        self.at = None if timeout is None else time.monotonic() + max(0.0, timeout)

    def __repr__(self) -> str:
        return f"<Deadline remaining={self.remaining()}>"

    def remaining(self, floor: float = 0.0) -> float | None:
        """Seconds left (at least ``floor``); None without a deadline."""
        if self.at is None:
            return None
        return max(self.at - time.monotonic(), floor)

    def first_look(self, client: Client) -> float | None:
        """How long the first look may take: what is left, but never less than
        one session timeout."""
        return self.remaining(client.session_timeout)

    @property
    def passed(self) -> bool:
        """Whether the deadline has come (never, without one)."""
        return self.at is not None and time.monotonic() >= self.at


class Gone(enum.Enum):
    """Why a watched node is gone (the value is the reason, for a log or an error)."""

    DELETED = "its node was deleted by someone else"
    SESSION_ENDED = "the session that owned its node ended"
    SESSION_EXPIRED = "the session expired"


def wait_change(
    client: Client,
    path: str,
    *,
    session: int | None = None,
    gone_if: Callable[[Stat], bool] | None = None,
) -> Awaitable[Gone | None]:
    """Watch ``path`` and wait for its next change: why it is gone (at once if it
    already is), or None if it changed and is still there.

    ``session``: the session the caller's decision depends on (its own node's);
    a watch set in another session answers ``Gone.SESSION_ENDED`` at once.
    ``gone_if``: a node that exists but this says is as good as gone (a node
    another session owns, a stray) answers ``Gone.DELETED`` at once.
    Connection loss is retried under the client's policy; other errors
    (session expiry included) propagate.
    """
    # The wait itself, not a coroutine around it: one level fewer to resume on
    # each reply and event (every waiting lock contender and queued add).
    return _look_and_wait(client, path, session, gone_if, None, expiry_is_change=False)


async def wait_gone(
    client: Client,
    path: str,
    *,
    session: int | None = None,
    gone_if: Callable[[Stat], bool] | None = None,
    deadline: Deadline | None = None,
    outlast_outages: bool = False,
) -> Gone | None:
    """Wait until ``path`` is gone and say why; None if ``deadline`` passed first.

    Changes that leave the node in place are waited through. With ``session``
    (the node is the caller's own, owned by that session), the end of that
    session ends the wait (``SESSION_EXPIRED``/``SESSION_ENDED``); without it,
    an expired session is ridden out and the node looked at again in the new
    one (SessionExpiredError if the caller pinned its requests to the one that
    ended, with ``only_in_session``). ``outlast_outages``: a connection out of
    reach for longer than the retry policy allows is waited for, however long,
    instead of raising.
    ``gone_if``: as for :func:`wait_change`. The first look gets
    :meth:`Deadline.first_look` (again after an expired session), each later
    wait what is left.
    """
    budget = None if deadline is None else deadline.first_look(client)
    while True:
        gone: Gone | None = None
        looked_in = client.session_id
        with anyio.move_on_after(budget) as scope:
            try:
                gone = await _look_and_wait(
                    client, path, session, gone_if, deadline, expiry_is_change=session is None
                )
            except SessionExpiredError:
                if session is not None:
                    return Gone.SESSION_EXPIRED
                if client.session_id == looked_in:
                    # Refused in a session that is still the current one: the caller
                    # pinned its requests to one that has ended (only_in_session).
                    # Every look again would be refused at once, without ever
                    # yielding to the event loop: a spin that freezes the process.
                    raise
                await client.wait_connected()
                continue  # look again, in the new session
            except ConnectionLossError:
                if not outlast_outages:
                    raise
                await client.wait_connected()
                continue
        if scope.cancelled_caught:
            return None
        if gone is not None:
            return gone
        if deadline is not None and deadline.passed:
            return None
        budget = None if deadline is None else deadline.remaining()


def _owned_by_other(owner: int, stat: Stat) -> bool:
    return stat.ephemeral_owner != owner


async def wait_out_session(client: Client, path: str, owner: int) -> None:
    """Wait until ``path`` is no longer a node of session ``owner``: deleted, or
    owned by another session.

    For a recipe's own ephemeral node left by one of its earlier sessions: a
    client that declared its session lost on its own (out of reach for a
    session timeout) may still find that session's nodes in its new one, until
    the server expires it (one session timeout after it last heard from it, or
    after a leader change restarted its clock). The wait is bounded by that
    expiry. An expiry of the current session is ridden out, unless the caller
    pinned its requests to that session (``only_in_session``): then
    SessionExpiredError, at once. Connection loss beyond the client's retry
    policy raises, as for :func:`wait_gone`.
    """
    await wait_gone(client, path, gone_if=functools.partial(_owned_by_other, owner))


async def _look_and_wait(
    client: Client,
    path: str,
    session: int | None,
    gone_if: Callable[[Stat], bool] | None,
    deadline: Deadline | None,
    *,
    expiry_is_change: bool,
) -> Gone | None:
    """:func:`wait_change`, with the wait for the event bounded by ``deadline``
    (None if it passed first); ``expiry_is_change``: a watch failed by an
    expired session answers None (look again) instead of raising."""
    stat, watch = await retry_on_connection_loss(
        client, functools.partial(client.watch_exists, path)
    )
    async with watch:
        if session is not None and client.session_id != session:
            return Gone.SESSION_ENDED
        if stat is None or (gone_if is not None and gone_if(stat)):
            return Gone.DELETED
        if deadline is None or deadline.at is None:
            # No deadline: no cancel scope either (this wait is on every hand-off).
            return await _watched(watch, expiry_is_change=expiry_is_change)
        with anyio.move_on_after(deadline.remaining()):
            return await _watched(watch, expiry_is_change=expiry_is_change)
        return None


async def _watched(watch: Watch, *, expiry_is_change: bool) -> Gone | None:
    try:
        event = await watch
    except SessionExpiredError:
        if not expiry_is_change:
            raise
        return None
    return Gone.DELETED if event.type is EventType.DELETED else None


class Reconnects:
    """Tells a watcher when to read again: on every reconnection that follows a
    disconnection (SUSPENDED, or LOST and a new session).

    The server does not replay what a watch missed while the client was away
    (nor what happened while a new session's watch was not yet set), so a
    recipe that mirrors the server's state reads it again then (CURATOR-311).
    ``on_reconnected()`` is called once per such reconnection; ``on_lost()``,
    if given, at once when the session is lost. Listens between
    :meth:`listen` and :meth:`stop`.
    """

    __slots__ = ("_client", "_on_lost", "_on_reconnected", "interrupted")

    def __init__(
        self,
        client: Client,
        on_reconnected: Callable[[], object],
        *,
        on_lost: Callable[[], object] | None = None,
    ) -> None:
        self._client = client
        self._on_reconnected = on_reconnected
        self._on_lost = on_lost
        self.interrupted = False
        """A disconnection was seen, and no connection since."""

    def listen(self) -> None:
        """Start listening to the client's connection states (from a clean slate)."""
        self.interrupted = False
        self._client.add_listener(self._on_state)

    def stop(self) -> None:
        """Stop listening (idempotent)."""
        self._client.remove_listener(self._on_state)

    def _on_state(self, state: ConnectionState) -> None:
        if state in (ConnectionState.SUSPENDED, ConnectionState.LOST):
            self.interrupted = True
            if state is ConnectionState.LOST and self._on_lost is not None:
                self._on_lost()
        elif state.is_connected and self.interrupted:
            self.interrupted = False
            self._on_reconnected()
