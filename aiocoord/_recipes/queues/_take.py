"""A take as a holder: :class:`QueueTake` runs one block on one item, at least
once, under the kit's hold scope, with the fence a consumer needs to commit
"delete the item and record the effect" atomically (CURATOR-605)."""

from __future__ import annotations

from typing import Generic

from typing_extensions import TypeVar

from ..._exceptions import HoldLostError, NotOwnerError, TakeLostError
from ..._session import Fence, Transaction, run_cleanup
from .._kit import Hold, HoldContext, wait_lost_within
from ._consume import Consumer
from ._cursor import Got

__all__ = ["QueueTake", "Taking"]

T = TypeVar("T", default=bytes)


class Taking(Generic[T]):
    """A queue take's side of :class:`HoldContext`: mark an item, then commit or
    give it back."""

    def __init__(self, consumer: Consumer[T], timeout: float | None) -> None:
        self.consumer = consumer
        self._timeout = timeout
        self.path = consumer.config.path
        self.got: Got[T] | None = None
        self.hold: Hold | None = None
        self._item = self.path
        """The item's path, for the error (the last one taken)."""

    async def take_hold(self) -> tuple[T, Hold]:
        consumer = self.consumer
        got = await consumer.next(self._timeout, mark=True)
        # No await from the decision to here: the monitor judges every transition.
        hold = Hold()
        consumer.monitor.add(hold, got.owner, token=got.czxid)
        self.got, self.hold, self._item = got, hold, got.path
        return got.value, hold

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        got = self.got
        assert got is not None and got.marker is not None
        consumer = self.consumer
        client = consumer.config.client
        marker = got.marker

        async def release() -> None:
            await consumer.markers.release(marker, got.owner)

        try:
            consumer.monitor.discard(hold)
            if completed:
                try:
                    await consumer.markers.commit(got)
                except BaseException:
                    await run_cleanup(client, release)
                    raise
            else:
                await run_cleanup(client, release)
        finally:
            self.got = None

    def lost_error(self, reason: str) -> HoldLostError:
        return TakeLostError(self._item, reason)


class QueueTake(HoldContext[T]):
    """What :meth:`Queue.take` returns: ``async with`` it to work on one item at
    least once (see there).

    While the block runs, the take is a holder: ``node`` is the item's path,
    ``is_held`` and ``await wait_lost()`` tell of a loss, and :meth:`fence`,
    :attr:`fencing_token` and :meth:`transaction` fence what the consumer does
    with the item. ``take.transaction()`` already deletes the item: committing
    it records the item's effect and completes the take in one step, and a
    consumer that lost its take is refused (TakeLostError)::

        take = queue.take()
        async with take as item:
            await take.transaction().create("/done/" + key, result).commit()
    """

    def __init__(
        self, consumer: Consumer[T], *, timeout: float | None, cancel_on_loss: bool
    ) -> None:
        self._taking = Taking(consumer, timeout)
        super().__init__(self._taking, cancel_on_loss=cancel_on_loss)

    def __repr__(self) -> str:
        got = self._taking.got
        state = "waiting" if got is None else f"holding {got.path!r}"
        if self.lost:
            state = f"lost {got.path!r}" if got is not None else "lost"
        return f"<QueueTake {self._taking.path!r} {state}>"

    @property
    def node(self) -> str | None:
        """The item's path while it is held (None before and after)."""
        got = self._taking.got
        return None if got is None else got.path

    @property
    def is_held(self) -> bool:
        """Whether the block holds its item and has not lost it."""
        return self._taking.got is not None and not self.lost

    def _held(self) -> Got[T]:
        got = self._taking.got
        if got is None:
            raise NotOwnerError(f"this take from {self._taking.path!r} holds no item")
        hold = self._taking.hold
        if hold is not None and hold.lost:
            raise TakeLostError(got.path, hold.reason)
        return got

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the take loses its item (at once if it already has): True;
        False if ``timeout`` passed first. NotOwnerError outside the block."""
        hold = self._taking.hold
        if self._taking.got is None or hold is None:
            raise NotOwnerError(f"this take from {self._taking.path!r} holds no item")
        return await wait_lost_within(hold, timeout, self._taking.path)

    def fence(self) -> Fence:
        """Proof of holding the item, for any transaction to require: it applies only
        while our marker exists, sent in the session that made it (markers of one
        item share a name, so existence alone would not tell ours from the next
        taker's). A failed guard raises TakeLostError. NotOwnerError outside the
        block."""
        got = self._held()
        assert got.marker is not None
        return Fence(got.marker, got.path, lost_error=TakeLostError, session_id=got.owner)

    @property
    def fencing_token(self) -> int:
        """A number that grows with every take of every item of this queue: the
        marker's creation zxid (errors as :meth:`fence`)."""
        return self._held().czxid

    def transaction(self) -> Transaction:
        """A transaction guarded by :meth:`fence` that already deletes the item: add
        the item's effect and ``commit()`` to complete the take atomically (leaving
        the block then only removes the marker)."""
        got = self._held()
        client = self._taking.consumer.config.client
        return client.transaction().guard(self.fence()).delete(got.path)
