"""Distributed queues on ZooKeeper: FIFO, at-least-once, priority, delay and by id.

Every item is one persistent sequential node under the queue path; a consumer
takes an item by deleting its node, so the delete decides who gets it. Layouts
are Curator's, node for node:

- :class:`Queue`: ``qn-<seq>`` holding the encoded item as is: ZooKeeper's own
  queue recipe and Curator's SimpleDistributedQueue. Taken in name order.
- :class:`PriorityQueue`, :class:`DelayQueue`, :class:`IdQueue`: Curator's
  DistributedPriorityQueue, DistributedDelayQueue and DistributedIdQueue:
  ``queue-`` names carrying the priority, due time or id, and data wrapped in
  Curator's item envelope (see :func:`wrap_item`).
- At-least-once takes (:meth:`Queue.take`) mark an item with an ephemeral node
  ``<lock path>/<item name>`` while its consumer works on it: the layout of
  Curator's DistributedQueue with a ``lockPath``.

One take loop serves every variant. A consumer lists the children once (with a
children watch), orders them by the variant's rule (:class:`Layout`), then
tries the names in that order until one is won. Losing a race costs no new
listing: the consumer goes on with the names it has, passing over a few at
random so that consumers that lost together do not keep colliding
(:func:`skip_after_loss`). It lists again (re-arming the watch) only once its
names run out; with nothing to take it waits on the watch (and, for a delay
queue, on a timer for the earliest due item). Never polling. The tasks using
one queue object share its listing, its watch and a read-ahead of the next
item, so they never race each other.

What is guaranteed, and what is not:

- A put is sent once. If the connection drops after it was written and before
  the reply came, it raises OutcomeUnknownError: the item may or may not be in
  the queue. Looking for it cannot tell (a protected name would not help): a
  consumer may already have taken it. Retrying is the caller's choice (at
  least once), never a silent double.
- A get takes an item at most once: if its delete's reply is lost and the item
  is gone when asked again, this consumer or another deleted it, and the item
  is not reported (a warning is logged). A cancelled get takes nothing: if its
  delete had already won, the item is put back at the tail.
- A take holds an item, by its marker, until the block ends; never two takers
  at once (the marker is created first, and the item read after it). Success
  deletes item and marker in one transaction; an error, a cancellation or the
  end of the session deletes only the marker (redelivery).

The queue is split by job: ``_rules`` (names, envelopes, order: pure),
``_config`` (settings, encoding, moving items aside), ``_put`` (producing),
``_consume`` and ``_cursor`` (the take loop), ``_markers`` (at-least-once
takes), ``_take`` (a take as a holder); this module is the public classes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Generic

from typing_extensions import TypeVar

from ... import _paths
from ..._checks import check_flag, check_seconds, check_timeout
from ..._exceptions import (
    ClientClosedError,
    ConnectionLossError,
    InvalidArgumentError,
    NoNodeError,
    QueueEmptyError,
    SessionExpiredError,
)
from ..._session import (
    Client,
    ErrorPolicy,
    call_with_retry,
    check_error_policy,
    retry_on_connection_loss,
)
from ..._types import ACL
from ._config import QueueConfig
from ._consume import Consumer
from ._cursor import lost_connection, now_ms
from ._put import Producer
from ._rules import (
    DELAY_LAYOUT,
    FIFO_LAYOUT,
    ID_LAYOUT,
    PRIORITY_LAYOUT,
    QUEUE_NAME,
    ItemCodec,
    Layout,
    delay_name,
    id_name,
    parse_id,
    priority_name,
)
from ._take import QueueTake

__all__ = ["DelayQueue", "IdQueue", "PriorityQueue", "Queue"]

T = TypeVar("T", default=bytes)
"""The item type: what the codec decodes to (bytes without a codec)."""


class _QueueBase(Generic[T]):
    """What every queue variant shares: the take loop, takes, inspection."""

    _layout: Layout = FIFO_LAYOUT
    _kind = "queue"

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        codec: ItemCodec[T] | None = None,
        max_items: int | None = None,
        lock_path: str | None = None,
        dead_letter: str | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        error_policy = check_error_policy(error_policy, path)
        config = QueueConfig(
            client,
            path,
            self._layout,
            self._kind,
            codec=codec,
            max_items=max_items,
            lock_path=lock_path,
            dead_letter=dead_letter,
            acl=acl,
        )
        self._config = config
        self.path = path
        self.codec: ItemCodec[T] = config.codec
        """Turns items into node data and back."""
        self.max_items = max_items
        self.lock_path = config.lock_path
        self.dead_letter = dead_letter
        self._producer = Producer(config)
        self._consumer = Consumer(config, error_policy or client.error_policy)

    def __repr__(self) -> str:
        bound = "" if self.max_items is None else f" max_items={self.max_items}"
        return f"<{type(self).__name__} {self.path!r} codec={self.codec!r}{bound}>"

    def take(self, *, timeout: float | None = None, cancel_on_loss: bool = True) -> QueueTake[T]:
        """``async with queue.take() as item:`` at-least-once: the item stays in
        ZooKeeper until the block returns.

        While the block runs, an ephemeral marker ``<lock_path>/<item name>``
        keeps other :meth:`take` consumers off the item. The block returning
        deletes item and marker in one transaction. If it raises or is
        cancelled, only the marker is deleted: the item goes back to the queue
        for another consumer, and the error propagates. If the consumer dies,
        its session (and with it the marker) ends, with the same effect.

        With ``cancel_on_loss`` the block is cancelled when the client enters a
        state its error policy calls a loss (by default already SUSPENDED:
        the session may expire and the item go to someone else); leaving the
        block then raises TakeLostError and the item goes back. QueueEmptyError
        if ``timeout`` passes before there is an item to take.

        :meth:`get` consumers and Curator's SimpleDistributedQueue do not look
        at markers: let a queue's consumers all take, or all get.
        """
        timeout = check_timeout(timeout, path=self.path)
        check_flag(cancel_on_loss, "cancel_on_loss", path=self.path)
        return QueueTake(self._consumer, timeout=timeout, cancel_on_loss=cancel_on_loss)

    # --- getting ------------------------------------------------------------------

    async def get(self, *, timeout: float | None = None) -> T:
        """Take the next item, waiting for one; at most once.

        QueueEmptyError if ``timeout`` seconds pass first (``0`` looks once,
        see :meth:`get_nowait`); an enclosing deadline cancels as usual.
        Waiting costs a children watch, never polling, and rides out dropped
        connections and lost sessions (without a timeout, outages of any length).

        The item's delete decides which consumer gets it: each item goes to one
        consumer. Guarantees: a cancelled get takes nothing (had its delete
        already won, the item is put back at the tail); if the delete's reply is
        lost and the item is gone when asked again, the item is not reported,
        since this consumer or another may have taken it (logged as a warning).
        Use :meth:`take` for work that must not be lost.

        An item the codec cannot decode raises CorruptValueError naming its
        node, and stays in place (unless a ``dead_letter`` path takes it): see
        :meth:`move_aside`.
        """
        got = await self._consumer.next(timeout, mark=False)
        return got.value

    async def get_nowait(self) -> T:
        """Take the next item if there is one now (one look); QueueEmptyError if not."""
        return await self.get(timeout=0)

    async def peek(self) -> T:
        """The item :meth:`get` would take next, left in the queue; QueueEmptyError if none."""
        config = self._config
        client = config.client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            names = []
        ready, _due = config.layout.ready(names, now_ms())
        for name in ready:
            path = _paths.join(self.path, name)
            try:
                data, _stat = await retry_on_connection_loss(
                    client, functools.partial(client.get, path)
                )
            except NoNodeError:
                continue  # taken meanwhile
            return config.read(path, data)
        raise QueueEmptyError(self.path, 0)

    async def size(self) -> int:
        """How many items are in the queue now (including those being worked on
        under :meth:`take`, and, for a delay queue, those not yet due)."""
        client = self._config.client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            return 0
        return sum(map(self._config.layout.is_item, names))

    def __aiter__(self) -> AsyncIterator[T]:
        """``async for item in queue:`` every item, as :meth:`get` takes them, until
        cancelled or the client closes."""
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        while True:
            try:
                item = await self.get()
            except ClientClosedError:
                return
            yield item

    async def move_aside(self, node: str, to_path: str) -> str:
        """Move item ``node`` (a path or a name under the queue) to ``to_path``:
        atomically, the same name and data under ``to_path`` (a sequence is
        appended if the name is taken there) and the item gone from the queue.

        For an item no consumer can decode: ``except CorruptValueError as e:
        await queue.move_aside(e.path, "/dead-letters")``. Returns the new path;
        NoNodeError if the item is gone.
        """
        return await self._config.move_aside(node, to_path)


class Queue(_QueueBase[T]):
    """A FIFO queue (ZooKeeper's queue recipe, Curator's SimpleDistributedQueue).

    Items are persistent sequential nodes ``<path>/qn-<seq>`` holding the
    encoded item, nothing else: Java and Python producers and consumers share
    one queue. ``codec`` (default bytes; ``Codec.UTF8``, ``Codec.JSON`` or any
    object with ``encode``/``decode``) turns items into node data.

    ``max_items`` makes :meth:`put` wait while the queue holds that many
    (counted before each put: a soft bound under concurrent producers, as
    Curator's). ``lock_path`` is where :meth:`take` keeps its markers (default
    ``<path>-taken``); ``dead_letter`` is where undecodable items are moved
    instead of raising; ``error_policy`` says which connection states cancel
    a take's block (default: the client's).
    """

    async def put(self, item: T, *, timeout: float | None = None) -> bool:
        """Add ``item`` at the tail. True once it is in; False if ``timeout`` passed
        while the queue was full (``max_items``), nothing put.

        Never sent twice: if the connection drops after the create was sent and
        before its reply came, OutcomeUnknownError (the item may or may not be
        in). An item over the server's size limit raises DataTooLargeError
        before anything is sent.
        """
        return await self._producer.put([(QUEUE_NAME, self._config.encode(item))], timeout)

    async def put_many(self, items: Iterable[T], *, timeout: float | None = None) -> bool:
        """Add ``items`` in order, all or none, in one transaction (as :meth:`put`)."""
        return await self._producer.put(self._config.encode_all(QUEUE_NAME, items), timeout)


class PriorityQueue(_QueueBase[T]):
    """Lower numbers first, FIFO within a priority (Curator's DistributedPriorityQueue).

    Priorities are 32-bit ints, in the item's name (``queue-<sign><hex><seq>``);
    data is in Curator's item envelope. Options as :class:`Queue`.
    """

    _layout = PRIORITY_LAYOUT
    _kind = "priority queue"

    async def put(self, item: T, priority: int = 0, *, timeout: float | None = None) -> bool:
        """Add ``item`` with ``priority`` (as :meth:`Queue.put`)."""
        return await self._producer.put(
            [(priority_name(priority), self._config.encode(item))], timeout
        )

    async def put_many(
        self, items: Iterable[T], priority: int = 0, *, timeout: float | None = None
    ) -> bool:
        """Add ``items``, all with ``priority``, in one transaction."""
        name = priority_name(priority)
        return await self._producer.put(self._config.encode_all(name, items), timeout)


class DelayQueue(_QueueBase[T]):
    """Items that may be taken only from their due time on (Curator's DistributedDelayQueue).

    The due time (wall clock, milliseconds since the epoch) is in the item's
    name (``queue-|<hex>|<seq>``), so consumers compare it with their own
    clock: keep clocks in sync. Waiting for the earliest item costs a timer
    and the children watch. Options as :class:`Queue`.
    """

    _layout = DELAY_LAYOUT
    _kind = "delay queue"

    @staticmethod
    def _due(delay: float, at: float | None) -> int:
        delay = check_seconds(delay, "delay")
        if at is not None:
            if delay:
                raise InvalidArgumentError("delay", "give a delay or a due time (at), not both")
            return round(check_seconds(at, "at") * 1000)
        return round((time.time() + delay) * 1000)

    async def put(
        self,
        item: T,
        *,
        delay: float = 0.0,
        at: float | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Add ``item``, due ``delay`` seconds from now, or at ``at`` (``time.time()``
        seconds). Otherwise as :meth:`Queue.put`."""
        return await self._producer.put(
            [(delay_name(self._due(delay, at)), self._config.encode(item))], timeout
        )

    async def put_many(
        self,
        items: Iterable[T],
        *,
        delay: float = 0.0,
        at: float | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Add ``items``, all due at the same time, in one transaction."""
        name = delay_name(self._due(delay, at))
        return await self._producer.put(self._config.encode_all(name, items), timeout)


class IdQueue(_QueueBase[T]):
    """A FIFO queue whose items carry an id, for :meth:`remove` (Curator's DistributedIdQueue).

    The id is in the item's name (``queue-|<id>|<seq>``, with ``/`` and ``|``
    turned into ``_``, as Curator does); data is in Curator's item envelope.
    Several items may share an id. Options as :class:`Queue`.
    """

    _layout = ID_LAYOUT
    _kind = "id queue"

    async def put(self, item: T, id: str, *, timeout: float | None = None) -> bool:
        """Add ``item`` under ``id`` (as :meth:`Queue.put`)."""
        return await self._producer.put([(id_name(id), self._config.encode(item))], timeout)

    async def put_many(
        self,
        items: Iterable[T],
        id: str,
        *,
        timeout: float | None = None,
    ) -> bool:
        """Add ``items``, all under ``id``, in one transaction."""
        name = id_name(id)
        return await self._producer.put(self._config.encode_all(name, items), timeout)

    async def remove(self, id: str) -> int:
        """Delete every item under ``id``; how many this call deleted.

        Items being worked on under :meth:`take` are deleted too (their
        consumer's commit then finds them gone). A delete whose reply a dropped
        connection lost is retried, and then not counted.
        """
        client = self._config.client
        paths = [_paths.join(self.path, name) for name in await self._named(id)]

        async def delete(path: str) -> bool:
            try:
                await client.delete(path)
                return True
            except NoNodeError:
                return False

        removed = 0
        if paths:
            # One round trip for all: a pipeline of deletes; lost ones again one by one.
            pipeline = client.pipeline()
            for path in paths:
                pipeline.delete(path)
            results = await pipeline.execute()
            for path, result in zip(paths, results, strict=True):
                if result is None:
                    removed += 1
                elif isinstance(result, ConnectionLossError | SessionExpiredError):
                    removed += await call_with_retry(
                        client.retry_policy,
                        functools.partial(delete, path),
                        retry_if=lambda e: lost_connection(e) or isinstance(e, SessionExpiredError),
                    )
                elif not isinstance(result, NoNodeError):
                    raise result
        return removed

    async def contains(self, id: str) -> bool:
        """Whether an item under ``id`` is in the queue now."""
        return bool(await self._named(id))

    async def _named(self, item_id: str) -> list[str]:
        """The names of the items under ``item_id``."""
        wanted = parse_id(id_name(item_id))
        assert wanted is not None
        client = self._config.client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            return []
        return [
            name
            for name in names
            if self._config.layout.is_item(name) and (parse_id(name) or ("",))[0] == wanted[0]
        ]
