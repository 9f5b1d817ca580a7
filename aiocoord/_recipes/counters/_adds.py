"""What a change to a counter returns, and the queue that coalesces adds.

Shared by the counters that coalesce concurrent adds from one process into
one write: :class:`~aiocoord.AtomicLong` (``_counter``) and the sharded
counter (``_escrow``). Each subclasses :class:`AddQueue` with its own
:meth:`AddQueue.apply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..._exceptions import ClientClosedError
from ..._session import Client

__all__ = [
    "MAX_BATCH",
    "AddQueue",
    "AddRequest",
    "AtomicFailure",
    "AtomicStats",
    "AtomicValue",
]

T = TypeVar("T")

MAX_BATCH = 1000
"""The most adds one write carries."""


class AtomicFailure(enum.StrEnum):
    """Why an atomic operation applied nothing (:attr:`AtomicValue.reason`).

    Each member equals its lower-case name as a string: ``reason == "bound"`` holds.
    """

    CONTENTION = "contention"
    """The retries ran out: other writers kept changing the value first."""
    BOUND = "bound"
    """A bounded change would have left its range."""
    MISMATCH = "mismatch"
    """Compare-and-set found another value, or no node."""


@dataclass
class AtomicStats:
    """How a call got its result."""

    optimistic_tries: int = 0
    promoted_tries: int = 0
    optimistic_time: float = 0.0
    """Seconds spent in compare-and-set attempts without the lock."""
    promoted_time: float = 0.0
    """Seconds spent with the promotion lock (waiting for it included)."""
    batch_size: int = 1
    """How many calls the write that served this one carried (coalescing and combining)."""
    queued_time: float = 0.0
    """Seconds spent in the counter's cross-process combining queue."""


@dataclass(frozen=True)
class AtomicValue(Generic[T]):
    """The result of an atomic operation.

    When ``succeeded`` is False nothing was applied, ``reason`` says why
    (contention, a bound or a mismatch: see :class:`AtomicFailure`), and
    ``pre_value`` is the value the decision was based on.
    """

    succeeded: bool
    pre_value: T
    post_value: T
    stats: AtomicStats = field(default_factory=AtomicStats)
    reason: AtomicFailure | None = None


@dataclass
class AddRequest:
    delta: int
    lower: int | None
    upper: int | None
    future: asyncio.Future[AtomicValue[int]]


class AddQueue:
    """Queues concurrent adds on one counter and hands them to :meth:`apply` a
    batch (at most MAX_BATCH) at a time, in arrival order.

    An add that finds nothing queued and nothing being applied is applied in
    its caller's task: handing it to a drainer task and its result back would
    cost two passes of the event loop per add, half of what a lone add's write
    costs the client. Adds that arrive meanwhile queue behind it, and one
    background drainer applies them after it. So a cancel must leave
    ``apply`` consistent: a cancelled caller stops its own write where it is
    (applied or not, as any cancelled write), while a drained batch goes
    ahead for every call it carries.

    ``apply`` settles every request's future; if it raises, the requests it
    left unsettled get the error.
    """

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self._name = name
        self._queue: list[AddRequest] = []
        self._drainer: asyncio.Task[None] | None = None
        self._in_caller = False
        """Whether a caller is applying its own add (the others queue behind it)."""

    async def apply(self, batch: list[AddRequest]) -> None:
        raise NotImplementedError

    async def add(self, delta: int, lower: int | None, upper: int | None) -> AtomicValue[int]:
        future: asyncio.Future[AtomicValue[int]] = asyncio.get_running_loop().create_future()
        request = AddRequest(delta, lower, upper, future)
        if self._drainer is not None or self._in_caller:
            self._queue.append(request)  # the drainer, or the caller's end, takes it
            try:
                return await future
            except asyncio.CancelledError:
                # Not yet taken into a write: withdraw it. Already in one: the write
                # goes ahead for the others, and this caller simply stops waiting.
                with contextlib.suppress(ValueError):
                    self._queue.remove(request)
                raise
        # Nobody is writing: this caller applies its own add. Inline, not in a
        # method of its own: every coroutine level between the caller and the
        # requests is resumed on each of a queued add's wake-ups.
        self._in_caller = True
        try:
            await self.apply([request])
        except Exception:
            if not future.done():
                raise
        except BaseException:
            if future.done():
                future.exception()  # nobody will read it: not an unretrieved error
            raise
        finally:
            self._in_caller = False
            if self._queue:
                self._start_drainer()
        return future.result()

    def _start_drainer(self) -> None:
        try:
            self._drainer = self.client.start_background(self._drain(), name=self._name)
        except RuntimeError:  # the client is closed: nothing will write what is queued
            queued, self._queue[:] = self._queue[:], []
            _fail(queued, ClientClosedError("the client closed"))

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = self._queue[:MAX_BATCH]
                del self._queue[:MAX_BATCH]
                batch = [r for r in batch if not r.future.done()]
                if not batch:
                    continue
                try:
                    await self.apply(batch)
                except BaseException as error:
                    # Only the client's close cancels a drainer (a background
                    # task nobody else holds): its callers did not cancel.
                    closed = isinstance(error, asyncio.CancelledError)
                    _fail(batch, ClientClosedError("the client closed") if closed else error)
                    if not isinstance(error, Exception):
                        raise
        finally:
            self._drainer = None
            if self._queue:
                self._start_drainer()  # on a closed client, this fails them


def _fail(requests: list[AddRequest], error: BaseException) -> None:
    """Settle every request not yet settled with ``error``, marked as read: a
    caller that stopped waiting never reads it."""
    for request in requests:
        if not request.future.done():
            request.future.set_exception(error)
            request.future.exception()
