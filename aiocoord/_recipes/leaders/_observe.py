"""Following who leads an election without taking part: LeaderObserver, and the
stream behind every ``leader_changes()``.

An observer creates no node. It keeps one persistent recursive watch on the
election node, which reports participants joining and leaving, a leader's
proclaimed data (the election record, in the election node's data) and the
election node itself going; after each burst of events it reads the queue and
the record (one round trip) and the leader's node (one more), and yields the
leader when it differs from the last one yielded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio

from ... import _telemetry
from ..._exceptions import (
    ClientClosedError,
    NoNodeError,
    OperationTimeoutError,
)
from ..._session import (
    Broadcast,
    ChangeStream,
    Client,
    retry_on_connection_loss,
)
from .._kit import Participant, follow_subtree, recipe_path
from ._common import leader_from, read_queue

__all__ = ["LeaderObserver", "observe", "read_leader", "wait_next_leader"]


async def read_leader(client: Client, path: str) -> Participant | None:
    """The leader of the election at ``path`` now: its id, its node, what it
    advertises (what it proclaimed in this term, else its node's data: its id)
    and its fencing token; None if nobody leads (no participant, or leadership
    is being handed over). Connection loss is retried under the client's policy."""
    while True:
        ordered, record = await read_queue(client, path)
        head = leader_from(ordered, record)
        if head is None:
            return None
        node = f"{path}/{head}"
        try:
            data, stat = await retry_on_connection_loss(client, functools.partial(client.get, node))
        except NoNodeError:
            continue  # it left between the two reads: read again
        advertised = data
        if record is not None and record.leader == head and record.data is not None:
            advertised = record.data
        return Participant(
            data.decode("utf-8", errors="replace"), node, advertised, True, stat.czxid
        )


def observe(
    client: Client, path: str, tags: _telemetry.Tags | None = None
) -> ChangeStream[Participant | None]:
    """The stream behind every ``leader_changes()``: see :meth:`LeaderObserver.changes`.

    With ``tags`` (a user's stream, not a hand-over's own wait) each change
    after the first value counts in ``aiocoord.leader.changes``.
    """
    source: AsyncGenerator[Participant | None, None] = follow_subtree(
        client, path, functools.partial(read_leader, client, path)
    )
    if tags is not None and _telemetry.AVAILABLE:
        source = _counted(source, tags)
    return ChangeStream(source=source, name=f"leader of {path!r}")


async def _counted(
    source: AsyncGenerator[Participant | None, None], tags: _telemetry.Tags
) -> AsyncGenerator[Participant | None, None]:
    """``source``'s values, each after the first counted as a change (no span:
    one per change would be noise)."""
    first = True
    async with contextlib.aclosing(source):
        async for leader in source:
            if not first:
                outcome = "none" if leader is None else "leader"
                _telemetry.add("aiocoord.leader.changes", 1, tags.metric_with_outcome(outcome))
            first = False
            yield leader


class LeaderObserver:
    """Follow who leads the election at ``path`` without taking part.

    Works for :class:`~aiocoord.LeaderLatch` and :class:`~aiocoord.LeaderElection`
    paths, and for Curator's LeaderLatch and LeaderSelector (whose node data is
    the participant id). Creates no node: a :meth:`changes` stream costs one
    persistent watch, and :meth:`leader` two reads. Constructing it does no I/O;
    there is nothing to start or close.
    """

    def __init__(self, client: Client, path: str) -> None:
        recipe_path(client, path, "leader observer")
        self._client = client
        self.path = path
        self._tags = _telemetry.recipe_tags(
            client.telemetry, "leader_observer", path, client.namespace
        )
        self._listeners: Broadcast[Participant | None] = Broadcast(f"leader of {path!r}")
        self._follower: asyncio.Task[Any] | None = None

    def __repr__(self) -> str:
        return f"<LeaderObserver {self.path!r}>"

    async def leader(self) -> Participant | None:
        """The leader now (one look): id, node, advertised data and fencing token;
        None if nobody leads, or leadership is being handed over."""
        return await read_leader(self._client, self.path)

    def changes(self) -> ChangeStream[Participant | None]:
        """The leader now, then again each time it changes (``async for leader in
        observer.changes()``).

        Yields on a new leader, on "no leader" (None: nobody takes part, or a
        hand-over is under way), and when the leader proclaims new data (a
        :class:`~aiocoord.Participant` whose ``data`` is what it advertises and
        whose ``fencing_token`` is its term's). A burst of changes is read
        once: intermediate leaders may be skipped, never the latest one; a
        value equal to the last one yielded is skipped. The election is read
        again after every reconnection and new session; outages are ridden out.
        Ends when the client closes; ``aclose()`` (or ``async with``) removes
        its watch.
        """
        return observe(self._client, self.path, self._tags)

    def add_listener(self, callback: Callable[[Participant | None], object]) -> None:
        """Call ``callback(leader)`` as :meth:`changes` yields, from a task of the
        client (a callback must not block; its errors are logged), until removed."""
        self._listeners.add_listener(callback, self.path)
        if self._follower is None or self._follower.done():
            self._follower = self._client.start_background(
                self._follow(), name=f"aiocoord-leader-observer {self.path}"
            )

    def remove_listener(self, callback: Callable[[Participant | None], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._listeners.remove_listener(callback)
        if not self._listeners.has_listeners and self._follower is not None:
            self._follower.cancel()  # its stream removes its watch as it ends
            self._follower = None

    async def _follow(self) -> None:
        async with self.changes() as changes:
            async for leader in changes:
                self._listeners.publish(leader)


async def wait_next_leader(client: Client, path: str, timeout: float | None) -> Participant:
    """After a hand-over: wait until somebody leads (the target, unless it left
    meanwhile or a Curator participant ahead of it took over); OperationTimeoutError
    after ``timeout``."""
    with anyio.move_on_after(timeout):
        async with observe(client, path) as stream:
            async for leader in stream:
                if leader is not None:
                    return leader
            raise ClientClosedError(f"{path!r}: the client was closed")
    raise OperationTimeoutError(f"nobody took over the leadership of {path!r} within {timeout} s")
