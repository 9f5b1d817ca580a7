"""Following a subtree: read it, yield what changed, read again on every event.

The loop behind every "who is there now" stream (a group's members, an
election's leader): one persistent recursive watch on the subtree, set before
the first read so that a change after a read is always seen; a burst of events
is read once; everything is read again after a reconnection or a new session,
because the server does not replay what a watch missed meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, MutableSet
from typing import TypeVar

import anyio

from ..._exceptions import ClientClosedError, SessionError, SessionExpiredError
from ..._session import Client, PersistentWatch, retry_on_connection_loss
from ..._types import WatchEvent
from ._waits import Reconnects

__all__ = ["Rereads", "follow_subtree"]

T = TypeVar("T")


class Rereads:
    """Tells one follower to read again: after each reconnection, or when woken
    (by its recipe, when something only the recipe knows of changed)."""

    __slots__ = ("reconnects", "reread", "scope")

    def __init__(self, client: Client) -> None:
        self.reread = False
        self.scope: anyio.CancelScope | None = None
        self.reconnects = Reconnects(client, self.wake)

    def wake(self) -> None:
        self.reread = True
        if self.scope is not None:
            self.scope.cancel()

    async def next_event(
        self, watch: PersistentWatch, relevant: Callable[[WatchEvent], bool]
    ) -> bool:
        """Wait for a relevant event or a wake-up; False once the watch ended with
        the client. A burst already queued is consumed too: the read that
        follows covers it."""
        if not self.reread:
            with anyio.CancelScope() as scope:
                self.scope = scope
                try:
                    while not relevant(await watch.__anext__()):
                        pass
                except StopAsyncIteration:
                    return False
                finally:
                    self.scope = None
        while watch.pending:
            await watch.__anext__()
        return True


def _every(_event: WatchEvent) -> bool:
    return True


async def follow_subtree(
    client: Client,
    path: str,
    read: Callable[[], Awaitable[T]],
    *,
    relevant: Callable[[WatchEvent], bool] = _every,
    still_wanted: Callable[[], bool] | None = None,
    followers: MutableSet[Rereads] | None = None,
) -> AsyncGenerator[T, None]:
    """Yield ``await read()`` now, then each time it returns something new.

    ``relevant`` filters the watch's events (a recursive watch also sees nodes
    deeper than a recipe cares about); ``still_wanted``, asked before each
    read, ends the stream when False (and may raise to end it with an error);
    ``followers``, if given, holds this follower's :class:`Rereads` while it
    runs, so the recipe can wake every follower. Outages are ridden out; the
    stream ends when the client closes.
    """
    rereads = Rereads(client)
    if followers is not None:
        followers.add(rereads)
    rereads.reconnects.listen()
    watch: PersistentWatch | None = None
    first = True
    last: T | None = None
    try:
        while True:
            if still_wanted is not None and not still_wanted():
                return
            try:
                if watch is None:
                    # Watch first, read second: a change after the read is seen.
                    watch = await retry_on_connection_loss(
                        client, lambda: client.add_watch(path, recursive=True)
                    )
                rereads.reread = False
                value = await read()
                if first or value != last:
                    first, last = False, value
                    yield value
                if not await rereads.next_event(watch, relevant):
                    return  # the client closed
            except ClientClosedError:
                return
            except SessionExpiredError:
                # The session took the watch with it (and maybe some events):
                # add a new one, then read again.
                if watch is not None:
                    await watch.aclose()
                watch = None
            except SessionError:
                # Out of reach for a whole request timeout: wait on, however long.
                try:
                    await client.wait_connected()
                except ClientClosedError:
                    return
    finally:
        if followers is not None:
            followers.discard(rereads)
        rereads.reconnects.stop()
        if watch is not None:
            await watch.aclose()
