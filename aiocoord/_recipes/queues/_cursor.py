"""The take loop's local state and small shared pieces: the names still to try
from the last listing (:class:`Cursor`), what a consumer got (:class:`Got`),
and which errors are safe to send again."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from ..._exceptions import ConnectionLossError, NoConnectionError, SessionExpiredError
from ..._session import Watch
from ._rules import skip_after_loss

__all__ = [
    "Cursor",
    "Diverted",
    "Got",
    "MarkerGone",
    "consume",
    "first_of",
    "lost_connection",
    "now_ms",
    "unsent",
]

T = TypeVar("T", default=bytes)


class Cursor:
    """One queue object's names still to try from its last listing, shared by
    its consumers (local tasks never race each other for a name), and items
    already read ahead of their turn."""

    __slots__ = ("ahead", "inflight", "losses", "names", "rng")

    def __init__(self) -> None:
        self.names: collections.deque[str] = collections.deque()
        self.inflight: set[str] = set()
        self.ahead: dict[str, tuple[bytes, int]] = {}
        """Items read ahead: name -> (data, version)."""
        self.losses = 0
        self.rng = random.Random()

    def next(self) -> str | None:
        while self.names:
            name = self.names.popleft()
            if name not in self.inflight:
                self.inflight.add(name)
                return name
        return None

    def upcoming(self) -> str | None:
        """The name :meth:`next` would give, if it is worth reading ahead: only
        while no race was lost lately (else a skip may pass it over) and no
        other local consumer is at work (it would take the name before the read
        comes back)."""
        if self.losses or len(self.inflight) > 1:
            return None
        for name in self.names:
            if name not in self.inflight:
                return None if name in self.ahead else name
        return None

    def load(self, names: Iterable[str]) -> None:
        self.names = collections.deque(n for n in names if n not in self.inflight)
        if self.ahead:
            listed = set(self.names)
            self.ahead = {n: read for n, read in self.ahead.items() if n in listed}

    def gone(self, name: str) -> None:
        """``name`` was found taken by someone else before its turn: pass it over."""
        with contextlib.suppress(ValueError):
            self.names.remove(name)

    def won(self, name: str) -> None:
        self.inflight.discard(name)
        self.losses = max(0, self.losses - 1)

    def lost(self, name: str) -> None:
        self.inflight.discard(name)
        self.losses = min(self.losses + 1, 64)
        for _ in range(skip_after_loss(self.losses, len(self.names), self.rng)):
            self.ahead.pop(self.names.popleft(), None)

    def retry(self, name: str) -> None:
        """Try ``name`` again next (something other than a race got in the way)."""
        self.inflight.discard(name)
        self.names.appendleft(name)

    def drop(self, name: str) -> None:
        self.inflight.discard(name)


@dataclass
class Got(Generic[T]):
    """An item a consumer got: taken (get), or marked as taken (take)."""

    path: str
    data: bytes
    value: T
    marker: str | None = None
    owner: int = 0
    """The session owning the marker."""
    czxid: int = 0
    """The marker's creation zxid: the take's fencing token."""


class MarkerGone(Exception):
    """The session owning a take's marker ended: the marker went with it."""


class Diverted(Exception):
    """An undecodable item was moved to the dead-letter path: go on with the next."""


def unsent(error: BaseException) -> bool:
    """A request that certainly never reached the server (safe to send again)."""
    if isinstance(error, SessionExpiredError):
        return True
    return (
        isinstance(error, ConnectionLossError)
        and not error.sent
        and not isinstance(error, NoConnectionError)
    )


def lost_connection(error: BaseException) -> bool:
    """Connection loss worth retrying (not a request that found no connection at all)."""
    return isinstance(error, ConnectionLossError) and not isinstance(error, NoConnectionError)


def now_ms() -> int:
    """The wall clock in milliseconds: what a delay queue's due times are in."""
    return int(time.time() * 1000)


async def first_of(watches: Sequence[Watch]) -> None:
    """Wait until any of ``watches`` fires (or fails: a lost session)."""
    if len(watches) == 1:
        with contextlib.suppress(SessionExpiredError):
            await watches[0]
        return
    # One future woken by the watches' callbacks, not a task per watch: helper
    # tasks must be cancelled and awaited when we are cancelled, and anyio
    # re-delivers its cancellation into that await, where the CancelledError
    # of a helper task then escapes anyio's scope (found by make chaos).
    first = asyncio.get_running_loop().create_future()

    def wake(_watch: Watch) -> None:
        if not first.done():
            first.set_result(None)

    for watch in watches:
        watch.add_done_callback(wake)
    await first
    for watch in watches:
        error = watch.failure()
        if error is not None and not isinstance(error, SessionExpiredError):
            raise error


def consume(future: asyncio.Future[Any]) -> None:
    """Mark a future's outcome as seen (nobody awaits it any more)."""
    if not future.cancelled():
        future.exception()
