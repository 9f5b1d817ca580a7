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

The rules are pure functions, tested without a server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
import string
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, cast

import anyio
from typing_extensions import TypeVar

from ... import _paths
from ..._checks import check_flag, check_int, check_recipe_acl, check_seconds, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    CoordinationError,
    CorruptValueError,
    DataTooLargeError,
    HoldLostError,
    InvalidArgumentError,
    InvalidPathError,
    NoConnectionError,
    NodeExistsError,
    NoNodeError,
    NotOwnerError,
    OutcomeUnknownError,
    QueueEmptyError,
    SessionExpiredError,
    TakeLostError,
)
from ..._session import (
    Client,
    ErrorPolicy,
    Fence,
    Transaction,
    Watch,
    call_with_retry,
    check_error_policy,
    delete_quietly,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL, Codec, Stat
from .._kit._args import default_node_data, recipe_path
from .._kit._holding import Hold, HoldContext, LossMonitor
from .._kit._waits import Deadline

__all__ = [
    "CURATOR_QUEUE_NAME",
    "DELAY_LAYOUT",
    "FIFO_LAYOUT",
    "ID_LAYOUT",
    "PRIORITY_LAYOUT",
    "QUEUE_NAME",
    "DelayQueue",
    "IdQueue",
    "ItemCodec",
    "Layout",
    "PriorityQueue",
    "Queue",
    "QueueTake",
    "delay_name",
    "due_of",
    "fix_id",
    "id_name",
    "parse_id",
    "priority_name",
    "skip_after_loss",
    "unwrap_item",
    "without_sequence",
    "wrap_item",
]

T = TypeVar("T", default=bytes)
"""The item type: what the codec decodes to (bytes without a codec)."""

log = logging.getLogger("aiocoord")

QUEUE_NAME = "qn-"
"""Item name prefix of ZooKeeper's queue recipe and Curator's SimpleDistributedQueue."""
CURATOR_QUEUE_NAME = "queue-"
"""Item name prefix of Curator's DistributedQueue family."""
_SEPARATOR = "|"
_SEQUENCE_DIGITS = 10
_LOCK_PATH_SUFFIX = "-taken"
"""The default lock path is the queue path plus this (``/jobs`` -> ``/jobs-taken``)."""

_ENVELOPE_VERSION = 65537
_ITEM_OPCODE = 1
_EOF_OPCODE = 2
_ENVELOPE_HEAD = struct.Struct(">iBi")
_ENVELOPE_OVERHEAD = _ENVELOPE_HEAD.size + 1


# --- pure rules: names, envelopes, order ------------------------------------------


def priority_name(priority: int) -> str:
    """The item name (before the sequence) for ``priority`` in Curator's
    DistributedPriorityQueue: ``queue-`` then ``1`` (>= 0) or ``0`` (< 0) and the
    32-bit value in 8 hex digits, so names sort by priority, lowest first."""
    check_int(priority, "priority")
    if not -(2**31) <= priority < 2**31:
        raise InvalidArgumentError(
            "priority", f"{priority} does not fit in 32 bits (Curator's int)"
        )
    sign = "1" if priority >= 0 else "0"
    return f"{CURATOR_QUEUE_NAME}{sign}{priority & 0xFFFFFFFF:08X}"


def delay_name(due_ms: int) -> str:
    """The item name (before the sequence) for an item due at ``due_ms``
    (milliseconds since the epoch) in Curator's DistributedDelayQueue."""
    check_int(due_ms, "due time", maximum=2**63 - 1)  # Curator reads a Java long
    if due_ms < 0:
        raise InvalidArgumentError("due time", "cannot be before the epoch")
    return f"{CURATOR_QUEUE_NAME}{_SEPARATOR}{due_ms:08X}{_SEPARATOR}"


def due_of(name: str) -> int:
    """When a delay queue item is due (epoch milliseconds): the hex number between
    the name's last two ``|``, as Curator reads it; 0 (due now) if there is none."""
    end = name.rfind(_SEPARATOR)
    start = name.rfind(_SEPARATOR, 0, end) if end > 0 else -1
    if start > 0 and end > start + 1:
        digits = name[start + 1 : end]
        if all(c in string.hexdigits for c in digits):
            return int(digits, 16)
    return 0


def fix_id(item_id: str) -> str:
    """An id as Curator's DistributedIdQueue puts it in a name: ``/`` and ``|`` become ``_``."""
    return item_id.replace("/", "_").replace(_SEPARATOR, "_")


def id_name(item_id: str) -> str:
    """The item name (before the sequence) for ``item_id`` in Curator's DistributedIdQueue."""
    if not isinstance(item_id, str):
        raise ArgumentTypeError("item id", "a str", item_id)
    if not item_id:
        raise InvalidArgumentError("item id", "an item id cannot be empty")
    name = f"{CURATOR_QUEUE_NAME}{_SEPARATOR}{fix_id(item_id)}{_SEPARATOR}"
    _paths.validate_path("/" + name, sequential=True)  # the code points ZooKeeper refuses
    return name


def parse_id(name: str) -> tuple[str, str] | None:
    """``(id, name without the id)`` of an id queue item, None if the name holds no id.

    Ids sit between the first two ``|``; without them the item sorts by its whole name.
    """
    first = name.find(_SEPARATOR)
    second = name.find(_SEPARATOR, first + 1) if first >= 0 else -1
    if second < 0:
        return None
    return name[first + 1 : second], name[:first] + name[second + 1 :]


def without_sequence(name: str) -> str:
    """The name an item was created with: ``name`` less its 10-digit sequence suffix."""
    tail = name[-_SEQUENCE_DIGITS:]
    if len(name) > _SEQUENCE_DIGITS and tail.isdigit():
        return name[:-_SEQUENCE_DIGITS]
    return name


def wrap_item(data: bytes) -> bytes:
    """One item in Curator's DistributedQueue envelope: version 65537 (4 bytes),
    opcode 1, length (4 bytes), the bytes, opcode 2 (end); big-endian."""
    return _ENVELOPE_HEAD.pack(_ENVELOPE_VERSION, _ITEM_OPCODE, len(data)) + data + b"\x02"


def unwrap_item(data: bytes, path: str) -> bytes:
    """The item inside a Curator envelope; CorruptValueError naming ``path`` if the
    bytes are not one, or hold more than one item (Curator's ``putMulti``)."""
    expected = "a Curator queue item envelope holding one item"
    if len(data) < _ENVELOPE_OVERHEAD:
        raise CorruptValueError(path, data, expected)
    version, opcode, size = _ENVELOPE_HEAD.unpack_from(data)
    end = _ENVELOPE_HEAD.size + size
    if version != _ENVELOPE_VERSION or opcode != _ITEM_OPCODE or size < 0 or end >= len(data):
        raise CorruptValueError(path, data, expected)
    if data[end] != _EOF_OPCODE:
        raise CorruptValueError(path, data, expected)
    # Like Curator, ignore whatever follows the end opcode.
    return data[_ENVELOPE_HEAD.size : end]


def _id_key(name: str) -> str:
    parsed = parse_id(name)
    return name if parsed is None else parsed[1]


def _due_key(name: str) -> tuple[int, str]:
    return due_of(name), name[-_SEQUENCE_DIGITS:]


@dataclass(frozen=True)
class Layout:
    """How a queue variant names and orders its items (a pure rule).

    ``prefix`` tells items from foreign children (ignored, as Curator does);
    ``key`` orders items, first taken first; ``envelope`` says whether the
    data is wrapped in Curator's item envelope; ``delayed`` whether an item
    waits for the due time in its name.
    """

    name: str
    prefix: str
    key: Callable[[str], Any]
    envelope: bool = False
    delayed: bool = False
    fresh: bool = False
    """Whether a new item may sort ahead of older ones (priority, delay): then
    every take starts from a new listing, so it is never taken late."""

    def is_item(self, name: str) -> bool:
        return name.startswith(self.prefix)

    def order(self, names: Iterable[str]) -> list[str]:
        """The items among ``names``, in the order they are to be taken."""
        return sorted((n for n in names if n.startswith(self.prefix)), key=self.key)

    def ready(self, names: Iterable[str], now_ms: int) -> tuple[list[str], int | None]:
        """The items that may be taken at ``now_ms`` (in order), and when the
        next one that may not yet becomes due (None if there is none)."""
        return self.split(self.order(names), now_ms)

    def split(self, ordered: list[str], now_ms: int) -> tuple[list[str], int | None]:
        """:meth:`ready` for items already in order."""
        if not self.delayed:
            return ordered, None
        for i, name in enumerate(ordered):
            due = due_of(name)
            if due > now_ms:
                return ordered[:i], due
        return ordered, None


FIFO_LAYOUT = Layout("fifo", QUEUE_NAME, str)
"""SimpleDistributedQueue: ``qn-<seq>``, raw data, sorted by name (Curator's sort)."""
PRIORITY_LAYOUT = Layout("priority", CURATOR_QUEUE_NAME, str, envelope=True, fresh=True)
"""DistributedPriorityQueue: the priority is in the name, so name order is priority order."""
DELAY_LAYOUT = Layout(
    "delay", CURATOR_QUEUE_NAME, _due_key, envelope=True, delayed=True, fresh=True
)
"""DistributedDelayQueue: by due time, then by sequence."""
ID_LAYOUT = Layout("id", CURATOR_QUEUE_NAME, _id_key, envelope=True)
"""DistributedIdQueue: by sequence, the id left out (Curator's sort)."""


def skip_after_loss(losses: int, remaining: int, rng: random.Random) -> int:
    """How many of its next names a consumer passes over after losing a race.

    ``losses`` counts the races it lost lately (each won race takes one off).
    Consumers that lost the same race would otherwise all go for the same next
    name: each skips a random number of names in a window that doubles with
    every loss (4, 8, ... up to 256), so they spread out over the listing and
    soon stop colliding. Skipped names stay in the queue for the next listing.
    One consumer alone never loses a race and so takes items in strict order.
    """
    if losses <= 0 or remaining <= 0:
        return 0
    window = min(remaining + 1, 2 * 2 ** min(losses, 7))
    return rng.randrange(window)


# --- codecs -----------------------------------------------------------------------


class ItemCodec(Protocol[T]):
    """What a queue needs of a codec: :class:`~aiocoord.Codec` or any object alike."""

    def encode(self, value: T) -> bytes: ...

    def decode(self, data: bytes, path: str) -> T: ...


def _decode(codec: ItemCodec[T], data: bytes, path: str) -> T:
    try:
        return codec.decode(data, path)
    except CorruptValueError:
        raise
    except Exception as error:
        raise CorruptValueError(path, data, f"a value {codec!r} can decode") from error


# --- the take loop's local state ------------------------------------------------


class _Cursor:
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
class _Got(Generic[T]):
    """An item a consumer got: taken (get), or marked as taken (take)."""

    path: str
    data: bytes
    value: T
    marker: str | None = None
    owner: int = 0
    """The session owning the marker."""
    czxid: int = 0
    """The marker's creation zxid: the take's fencing token."""


class _MarkerGone(Exception):
    """The session owning a take's marker ended: the marker went with it."""


class _Diverted(Exception):
    """An undecodable item was moved to the dead-letter path: go on with the next."""


def _unsent(error: BaseException) -> bool:
    """A request that certainly never reached the server (safe to send again)."""
    if isinstance(error, SessionExpiredError):
        return True
    return (
        isinstance(error, ConnectionLossError)
        and not error.sent
        and not isinstance(error, NoConnectionError)
    )


def _lost_connection(error: BaseException) -> bool:
    """Connection loss worth retrying (not a request that found no connection at all)."""
    return isinstance(error, ConnectionLossError) and not isinstance(error, NoConnectionError)


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- the queues -------------------------------------------------------------------


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
        recipe_path(client, path, self._kind)
        chosen: object = Codec.BYTES if codec is None else codec
        if not (
            callable(getattr(chosen, "encode", None)) and callable(getattr(chosen, "decode", None))
        ):
            raise ArgumentTypeError(
                "codec", "an object with encode(value) and decode(data, path)", chosen, path
            )
        if max_items is not None:
            check_int(max_items, "max_items", path=path, minimum=1)
        lock_path = path + _LOCK_PATH_SUFFIX if lock_path is None else lock_path
        recipe_path(client, lock_path, "queue's lock path")
        if dead_letter is not None:
            recipe_path(client, dead_letter, "dead-letter path")
        for other, what in ((lock_path, "lock_path"), (dead_letter, "dead_letter")):
            if other is not None and (other == path or other.startswith(path + "/")):
                raise InvalidArgumentError(
                    what, f"{other!r} cannot be the queue path or below it", path
                )
        self._acl = check_recipe_acl(acl, path)
        self._client = client
        self.path = path
        self.codec: ItemCodec[T] = cast("ItemCodec[T]", chosen)
        """Turns items into node data and back."""
        self.max_items = max_items
        self.lock_path = lock_path
        self.dead_letter = dead_letter
        self._cursor = _Cursor()
        self._refilling: dict[bool, asyncio.Event] = {}
        """A listing under way, by mode (take or get): this object's other
        consumers wait for it instead of listing (and watching) too."""
        self._monitor = LossMonitor(
            client, error_policy or client.error_policy, f"take from queue {path!r}"
        )
        self._marker_data = default_node_data()

    def __repr__(self) -> str:
        bound = "" if self.max_items is None else f" max_items={self.max_items}"
        return f"<{type(self).__name__} {self.path!r} codec={self.codec!r}{bound}>"

    async def _make_path(self, path: str) -> None:
        """Create the queue path or the lock path as Curator does.

        Curator's DistributedQueue family (and any lock path) makes its own
        node once, when a queue starts, as a persistent node under container
        parents; were it a container, the server would sweep it away when
        empty, and a running Curator producer or consumer would fail or go
        deaf. SimpleDistributedQueue's path is a container.
        """
        client = self._client
        if not self._layout.envelope and path == self.path:
            await client.ensure_path(path, container=True, acl=self._acl)
            return
        await client.ensure_path(_paths.parent(path), container=True, acl=self._acl)
        with contextlib.suppress(NodeExistsError):
            await client.create(path, b"", acl=self._acl)

    # --- putting ----------------------------------------------------------------

    def _encode_all(self, name: str, items: Iterable[T]) -> list[tuple[str, bytes]]:
        """``(name, data)`` for each of ``items`` (put_many's), all encoded before any is sent."""
        if isinstance(items, str | bytes | bytearray | memoryview) or not isinstance(
            items, Iterable
        ):
            raise ArgumentTypeError("items", "an iterable of items", items, self.path)
        return [(name, self._encode(item)) for item in items]

    def _encode(self, item: T) -> bytes:
        try:
            data = self.codec.encode(item)
        except ArgumentTypeError as error:  # from a ready-made codec: say which queue
            raise ArgumentTypeError("item", error.expected, item, self.path) from None
        except InvalidArgumentError as error:
            raise InvalidArgumentError("item", error.reason, self.path) from None
        except OverflowError as error:  # an int too wide for Codec.LONG or Codec.INT
            if isinstance(error, CoordinationError):
                raise
            raise InvalidArgumentError("item", str(error), self.path) from None
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ArgumentTypeError(f"what {self.codec!r} encoded", "bytes", data, self.path)
        data = bytes(data)
        if self._layout.envelope:
            data = wrap_item(data)
        limit = self._client.max_data_size
        if len(data) > limit:
            raise DataTooLargeError(self.path, len(data), limit)
        return data

    async def _put(self, entries: list[tuple[str, bytes]], timeout: float | None) -> bool:
        """Create ``(name, data)`` items, all or none; False if ``timeout`` passed
        while the queue was full (nothing was put)."""
        timeout = check_timeout(timeout, path=self.path)
        if not entries:
            return True
        if self.max_items is not None:
            if len(entries) > self.max_items:
                raise InvalidArgumentError(
                    "items",
                    f"{len(entries)} items can never fit (max_items={self.max_items})",
                    self.path,
                )
            if not await self._wait_for_room(len(entries), Deadline(timeout)):
                return False
        await self._create(entries)
        return True

    async def _create(self, entries: list[tuple[str, bytes]]) -> None:
        client = self._client
        paths = [(_paths.join(self.path, name), data) for name, data in entries]

        async def send() -> None:
            if len(paths) == 1:
                path, data = paths[0]
                await client.create(path, data, sequential=True, acl=self._acl)
                return
            transaction = client.transaction()
            for path, data in paths:
                transaction.create(path, data, sequential=True, acl=self._acl)
            await transaction.commit()

        async def once() -> None:
            try:
                await send()
            except NoNodeError:
                # The queue node is missing (a container the server swept away).
                await retry_on_connection_loss(client, lambda: self._make_path(self.path))
                await send()

        try:
            await call_with_retry(client.retry_policy, once, retry_if=_unsent)
        except NoConnectionError:
            raise
        except ConnectionLossError as error:
            if error.sent:
                # The create reached the server or not: nobody can tell, since a
                # consumer may already have taken the item. Never sent twice.
                raise OutcomeUnknownError(self.path) from error
            raise

    async def _wait_for_room(self, count: int, deadline: Deadline) -> bool:
        """Wait (on a children watch) until ``count`` more items fit under
        ``max_items``; False if ``deadline`` passed first."""
        client = self._client
        assert self.max_items is not None
        first = True
        while True:
            # The first look is always had.
            budget = deadline.first_look(client) if first else deadline.remaining()
            first = False
            watch: Watch | None = None
            with anyio.move_on_after(budget) as scope:
                try:
                    names, _stat, watch = await retry_on_connection_loss(
                        client, functools.partial(client.watch_children, self.path)
                    )
                except NoNodeError:
                    return True  # no queue node yet: empty
                except SessionExpiredError:
                    continue
            if scope.cancelled_caught:
                return False
            assert watch is not None
            try:
                if sum(map(self._layout.is_item, names)) + count <= self.max_items:
                    return True
                with anyio.move_on_after(deadline.remaining()) as scope:
                    with contextlib.suppress(SessionExpiredError):
                        await watch
                if scope.cancelled_caught:
                    return False
            finally:
                watch.cancel()

    # --- the take loop ----------------------------------------------------------------

    async def _next(self, timeout: float | None, *, mark: bool) -> _Got[T]:
        """The next item: taken (deleted), or with ``mark`` held by our marker.

        QueueEmptyError if ``timeout`` passed first (``0``: one look). Without a
        timeout, requests wait through outages of any length.
        """
        timeout = check_timeout(timeout, path=self.path)
        deadline = Deadline(timeout)
        cursor = self._cursor
        if self._layout.fresh:
            cursor.load(())  # a newer item may come first: start from a new listing
        overrides = (
            self._client.request_timeout(None) if deadline.at is None else contextlib.nullcontext()
        )
        with overrides:
            listed = False
            while True:
                name = cursor.next()
                if name is None:
                    if not await self._refill(deadline, first=not listed, mark=mark):
                        raise QueueEmptyError(self.path, timeout)
                    listed = True
                    continue
                try:
                    got = await (self._mark(name) if mark else self._take(name))
                except _Diverted:
                    continue
                if got is not None:
                    return got

    async def _refill(self, deadline: Deadline, *, first: bool, mark: bool) -> bool:
        """List the queue (with a watch) into the cursor, waiting while there is
        nothing to take; False once ``deadline`` passed with nothing.

        The consumers (tasks) of one queue object share this: one lists and
        waits, the others wait for it, so a new item wakes one listing per
        object, not one per task.
        """
        while True:
            leader = self._refilling.get(mark)
            if leader is None:
                break
            budget = deadline.first_look(self._client) if first else deadline.remaining()
            with anyio.move_on_after(budget) as scope:
                await leader.wait()
            if scope.cancelled_caught:
                return False
            if self._cursor.names:
                return True
            first = False  # the other one gave up (its own deadline): go on alone
        done = self._refilling[mark] = asyncio.Event()
        try:
            return await self._list_and_wait(deadline, first=first, mark=mark)
        finally:
            del self._refilling[mark]
            done.set()

    async def _list_and_wait(self, deadline: Deadline, *, first: bool, mark: bool) -> bool:
        """:meth:`_refill` for the consumer that lists.

        The first look always gets at least one session timeout (so ``timeout=0``
        looks once even when ZooKeeper is slow); later ones only what is left.
        """
        client = self._client
        while True:
            budget = deadline.first_look(client) if first else deadline.remaining()
            first = False
            watches: list[Watch] = []
            try:
                ordered: list[str] = []
                with anyio.move_on_after(budget) as scope:
                    try:
                        ordered = await self._list(watches, mark=mark)
                    except SessionExpiredError:
                        continue  # the watches went with the session: list again
                if scope.cancelled_caught:
                    return False
                timer_rang = False
                while True:
                    ready, next_due = self._layout.split(ordered, _now_ms())
                    # Names our own tasks are trying are not for this one.
                    fresh = [name for name in ready if name not in self._cursor.inflight]
                    if fresh:
                        self._cursor.load(fresh)
                        return True
                    wait = deadline.remaining()
                    if wait is not None and wait <= 0:
                        return False
                    if timer_rang:
                        break  # the wait used up the watches: list (and watch) again
                    if next_due is not None:
                        # A millisecond past the due time: a timer may fire a bit early.
                        until_due = max(0.0, next_due / 1000 - time.time()) + 0.001
                        wait = until_due if wait is None else min(wait, until_due)
                    with anyio.move_on_after(wait) as scope:
                        await _first_of(watches)
                    if not scope.cancelled_caught:
                        break  # a change: list again (a wake is a hint, the listing the verdict)
                    # The due time (or the deadline) came and nothing changed: the
                    # listing still holds, so no need to ask again.
                    timer_rang = True
            finally:
                for watch in watches:
                    watch.cancel()

    async def _list(self, watches: list[Watch], *, mark: bool) -> list[str]:
        """The items, in order (with ``mark``, those no marker holds). The
        watches it sets go into ``watches``, for the caller to wait on and cancel."""
        client = self._client
        while True:
            try:
                names, _stat, watch = await retry_on_connection_loss(
                    client, functools.partial(client.watch_children, self.path)
                )
                break
            except NoNodeError:
                # A consumer waits on the queue node, so make it (as Curator does).
                await retry_on_connection_loss(client, lambda: self._make_path(self.path))
        watches.append(watch)
        ordered = self._layout.order(names)
        if mark and ordered:
            # Items other consumers are working on: pass them over, and wake when
            # one is given back (its marker goes while the item stays).
            try:
                held, _stat, lock_watch = await retry_on_connection_loss(
                    client, functools.partial(client.watch_children, self.lock_path)
                )
            except NoNodeError:
                held = []
            else:
                watches.append(lock_watch)
            if held:
                taken = set(held)
                ordered = [name for name in ordered if name not in taken]
        return ordered

    async def _take(self, name: str) -> _Got[T] | None:
        """Try to take ``name``: read it (unless it was read ahead), then delete
        it. The item, or None if another consumer got it first."""
        client = self._client
        cursor = self._cursor
        path = _paths.join(self.path, name)
        try:
            ahead = cursor.ahead.pop(name, None)
            if ahead is None:
                try:
                    data, stat = await retry_on_connection_loss(
                        client, functools.partial(client.get, path)
                    )
                except NoNodeError:
                    cursor.lost(name)
                    return None
                version = stat.version
            else:
                data, version = ahead
            try:
                value = self._decode(path, data)
            except _Diverted:
                await self._divert(path)
                cursor.drop(name)
                raise
            won = await self._delete_decisively(name, path, version, data)
        except SessionExpiredError:
            cursor.retry(name)  # nothing was taken: try it again in the new session
            return None
        except BaseException:
            cursor.drop(name)
            raise
        if not won:
            cursor.lost(name)
            return None
        cursor.won(name)
        return _Got(path, data, value)

    async def _delete_decisively(self, name: str, path: str, version: int, data: bytes) -> bool:
        """Delete the item read at ``version``: True if this consumer took it.

        The delete runs in a task of its own, so its answer is known even if
        the caller is cancelled meanwhile; an item taken by a get that is being
        cancelled is put back at the tail of the queue (a cancelled get takes
        nothing). With the delete goes a read of the next name in line, so the
        next get needs one round trip, not two.
        """
        attempt = asyncio.ensure_future(self._delete(path, version, self._cursor.upcoming()))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(_consume)

            async def give_back() -> None:
                try:
                    if await asyncio.shield(attempt):
                        await self._put_back(name, data)
                except CoordinationError as error:
                    log.warning(
                        "queue %r: a cancelled get could not put back %r (%r): item lost",
                        self.path,
                        path,
                        error,
                    )

            await run_cleanup(self._client, give_back)
            raise

    async def _delete(self, path: str, version: int, ahead: str | None) -> bool:
        client = self._client
        cursor = self._cursor
        unsure = False

        async def send() -> None:
            nonlocal ahead
            if ahead is None:
                await client.delete(path, version=version)
                return
            name, ahead = ahead, None  # read ahead on the first try only
            deleted, read = await (
                client.pipeline()
                .delete(path, version=version)
                .get(_paths.join(self.path, name))
                .execute()
            )
            if isinstance(read, NoNodeError):
                cursor.gone(name)
            elif not isinstance(read, Exception):
                cursor.ahead[name] = (read[0], read[1].version)
            if isinstance(deleted, Exception):
                raise deleted

        async def once() -> bool:
            nonlocal unsure
            try:
                await send()
                return True
            except (NoNodeError, BadVersionError):
                if unsure:
                    # Our earlier delete may have been the one that went through:
                    # at most once, so the item is not reported.
                    log.warning(
                        "queue %r: the reply to deleting %r was lost and the item is gone; "
                        "it may have been taken by this consumer, but is not reported "
                        "(get() delivers at most once)",
                        self.path,
                        path,
                    )
                return False
            except ConnectionLossError as error:
                unsure = unsure or error.sent
                raise

        try:
            return await call_with_retry(
                client.retry_policy,
                once,
                retry_if=lambda e: _lost_connection(e) or isinstance(e, SessionExpiredError),
            )
        except NoConnectionError:
            if unsure:
                raise OutcomeUnknownError(path) from None
            raise
        except ConnectionLossError as error:
            if unsure:
                raise OutcomeUnknownError(path) from error
            raise

    async def _put_back(self, name: str, data: bytes) -> None:
        """Give back an item a cancelled get had already taken: at the queue's
        tail, under the name it had (sequence aside). A lost reply is retried:
        an item put back twice is better than one lost."""
        client = self._client
        target = _paths.join(self.path, without_sequence(name))

        async def once() -> None:
            try:
                await client.create(target, data, sequential=True, acl=self._acl)
            except NoNodeError:
                await self._make_path(self.path)
                await client.create(target, data, sequential=True, acl=self._acl)

        await call_with_retry(
            client.retry_policy,
            once,
            retry_if=lambda e: _lost_connection(e) or isinstance(e, SessionExpiredError),
        )
        log.info("queue %r: a cancelled get put its item back as %s...", self.path, target)

    def _decode(self, path: str, data: bytes) -> T:
        """The item in ``data``; CorruptValueError naming ``path`` (the item left
        in place), or _Diverted if the queue has a dead-letter path for it."""
        try:
            raw = unwrap_item(data, path) if self._layout.envelope else data
            return _decode(self.codec, raw, path)
        except CorruptValueError:
            if self.dead_letter is None:
                raise
        raise _Diverted(path)

    async def _divert(self, path: str, marker: str | None = None) -> None:
        """Move an undecodable item to the dead-letter path (with our marker, if any)."""
        assert self.dead_letter is not None
        try:
            moved = await self._move_aside(path, self.dead_letter, marker)
        except NoNodeError:
            return  # someone else moved (or took) it first
        log.warning("queue %r: item %r could not be decoded; moved to %r", self.path, path, moved)

    # --- at-least-once ----------------------------------------------------------------

    async def _mark(self, name: str) -> _Got[T] | None:
        """Try to hold ``name``: create its marker, then read the item (one round
        trip). The item, or None if another consumer holds or took it."""
        client = self._client
        cursor = self._cursor
        path = _paths.join(self.path, name)
        marker = _paths.join(self.lock_path, name)
        token = b"%s %s" % (self._marker_data, uuid.uuid4().hex.encode())
        owner = 0
        try:
            marked, read = await self._create_marker(marker, token, path)
            if marked is None:
                cursor.lost(name)
                return None
            owner = marked.ephemeral_owner
            if read is None:
                try:
                    read = await retry_on_connection_loss(
                        client, functools.partial(client.get, path)
                    )
                except NoNodeError:
                    read = NoNodeError(path)
            if isinstance(read, NoNodeError):
                # Taken by a get() consumer, or finished by a taker that held it
                # until just before our marker was made.
                await self._release_marker(marker, owner)
                cursor.lost(name)
                return None
            data, _stat = read
            if client.session_id != owner:
                cursor.retry(name)  # the marker went with the session
                return None
            try:
                value = self._decode(path, data)
            except _Diverted:
                await self._divert(path, marker)
                cursor.drop(name)
                raise
            except CorruptValueError:
                await self._release_marker(marker, owner)
                cursor.drop(name)
                raise
        except SessionExpiredError:
            cursor.retry(name)  # the marker, if any, went with the session
            return None
        except (_Diverted, CorruptValueError):
            raise
        except BaseException:
            cursor.drop(name)
            await run_cleanup(client, lambda: self._release_marker(marker, owner or None, token))
            raise
        # Checked above, with no await since: the marker is ours, in this session.
        cursor.won(name)
        return _Got(path, data, value, marker, owner, marked.czxid)

    async def _create_marker(
        self, marker: str, token: bytes, path: str
    ) -> tuple[Stat | None, tuple[bytes, Stat] | NoNodeError | None]:
        """Create our marker and read the item, in one round trip.

        Returns the marker's Stat (None if another consumer holds the item) and
        the item as read right after (None if that read was lost).
        """
        client = self._client
        for _attempt in range(3):
            created, read = await (
                client.pipeline()
                .create(marker, token, ephemeral=True, acl=self._acl)
                .get(path)
                .execute()
            )
            if isinstance(created, NodeExistsError):
                return None, None
            if isinstance(created, NoNodeError):
                await retry_on_connection_loss(client, lambda: self._make_path(self.lock_path))
                continue
            if isinstance(created, ConnectionLossError) and not isinstance(
                created, NoConnectionError
            ):
                # Ours if it holds our token (every consumer of the item uses the
                # same marker name, so only the data tells).
                found = await self._find_marker(marker, token)
                if found is not None:
                    return found, None
                if created.sent:
                    return None, None  # someone else's marker, or none: move on
                continue
            if isinstance(created, Exception):
                raise created
            _created_path, stat = created
            if isinstance(read, NoNodeError) or not isinstance(read, Exception):
                return stat, read
            return stat, None
        raise NoNodeError(self.lock_path)

    async def _find_marker(self, marker: str, token: bytes) -> Stat | None:
        """Our marker's Stat, if it exists, holds our token and our session owns it."""
        client = self._client
        try:
            data, stat = await retry_on_connection_loss(client, lambda: client.get(marker))
        except NoNodeError:
            return None
        if data == token and stat.ephemeral_owner == client.session_id:
            return stat
        return None

    async def _release_marker(
        self, marker: str, owner: int | None, token: bytes | None = None
    ) -> None:
        """Delete our marker (the item goes back to the queue), if our session still owns it."""
        client = self._client
        if owner is None:
            if token is None:
                return
            found = await self._find_marker(marker, token)
            if found is None:
                return
            owner = found.ephemeral_owner
        # Only in the session that owns it: markers of one item share a name, and
        # a delete that waited into a new session would remove the next taker's.
        with (
            contextlib.suppress(SessionExpiredError, ClientClosedError, NoConnectionError),
            client.only_in_session(owner),
        ):
            await delete_quietly(client, marker)

    async def _commit(self, got: _Got[T]) -> None:
        """Delete the item and its marker in one transaction: the work is done.

        TakeLostError if the item certainly went back (our marker is gone and
        the commit never applied); OutcomeUnknownError if a commit was sent, its
        reply lost, and the session ended before a retry could tell.
        """
        client = self._client
        marker = got.marker
        assert marker is not None
        sent = False

        async def once() -> None:
            nonlocal sent
            # Checked before every try, not once: after a lost reply the retry may
            # run in a new session, where our marker no longer keeps other takers
            # off the item, so "the item is gone" would prove nothing.
            if client.session_id != got.owner:
                raise _MarkerGone
            try:
                with client.only_in_session(got.owner):
                    await client.transaction().delete(got.path).delete(marker).commit()
            except NoNodeError as error:
                if error.op_index != 0:
                    raise TakeLostError(got.path, "its taken-marker was deleted") from error
                # The item is gone while our marker still kept takers off it: our
                # own commit whose reply was lost, or someone removed it (remove(),
                # move_aside(), a get() consumer).
                with client.only_in_session(got.owner):
                    await delete_quietly(client, marker)
            except SessionExpiredError as error:
                raise _MarkerGone from error
            except ConnectionLossError as error:
                sent = sent or error.sent
                raise

        try:
            await call_with_retry(client.retry_policy, once, retry_if=_lost_connection)
        except _MarkerGone:
            if sent and not await self._still_there(got.path):
                # Our commit may have applied, or another taker's after our marker
                # went: nobody can tell which.
                raise OutcomeUnknownError(got.path) from None
            raise TakeLostError(got.path, "the session that took it ended; it went back") from None
        except ConnectionLossError as error:
            if sent:
                raise OutcomeUnknownError(got.path) from error
            raise

    async def _still_there(self, path: str) -> bool | None:
        """Whether the item exists (None if that cannot be learnt now)."""
        client = self._client
        try:
            return await retry_on_connection_loss(client, lambda: client.exists(path)) is not None
        except (ConnectionLossError, SessionExpiredError, ClientClosedError):
            return None

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
        return QueueTake(self, timeout=timeout, cancel_on_loss=cancel_on_loss)

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
        got = await self._next(timeout, mark=False)
        return got.value

    async def get_nowait(self) -> T:
        """Take the next item if there is one now (one look); QueueEmptyError if not."""
        return await self.get(timeout=0)

    async def peek(self) -> T:
        """The item :meth:`get` would take next, left in the queue; QueueEmptyError if none."""
        client = self._client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            names = []
        ready, _due = self._layout.ready(names, _now_ms())
        for name in ready:
            path = _paths.join(self.path, name)
            try:
                data, _stat = await retry_on_connection_loss(
                    client, functools.partial(client.get, path)
                )
            except NoNodeError:
                continue  # taken meanwhile
            raw = unwrap_item(data, path) if self._layout.envelope else data
            return _decode(self.codec, raw, path)
        raise QueueEmptyError(self.path, 0)

    async def size(self) -> int:
        """How many items are in the queue now (including those being worked on
        under :meth:`take`, and, for a delay queue, those not yet due)."""
        client = self._client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            return 0
        return sum(map(self._layout.is_item, names))

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
        return await self._move_aside(node, to_path)

    async def _move_aside(self, node: str, to_path: str, marker: str | None = None) -> str:
        """:meth:`move_aside`, deleting our take marker in the same transaction."""
        client = self._client
        if not isinstance(node, str):
            raise ArgumentTypeError("node", "a str (an item's path or name)", node, self.path)
        name = node.rsplit("/", 1)[-1]
        path = node if node.startswith("/") else _paths.join(self.path, node)
        if _paths.parent(path) != self.path or not self._layout.is_item(name):
            raise InvalidPathError(node, f"not an item of the queue {self.path!r}")
        _paths.validate_path(path)
        recipe_path(client, to_path, "destination")
        target = _paths.join(to_path, name)

        async def once() -> str:
            data, stat = await client.get(path)
            for sequential in (False, True):
                transaction = client.transaction()
                transaction.create(
                    target + ("-" if sequential else ""),
                    data,
                    sequential=sequential,
                    acl=self._acl,
                )
                transaction.delete(path, version=stat.version)
                if marker is not None:
                    transaction.delete(marker)
                try:
                    results = await transaction.commit()
                except NodeExistsError:
                    continue
                except NoNodeError as error:
                    if error.op_index != 0:
                        raise
                    await client.ensure_path(to_path, container=True, acl=self._acl)
                    results = await transaction.commit()
                created = results[0]
                assert isinstance(created, str)
                return created
            raise NodeExistsError(target)

        result: str = await call_with_retry(client.retry_policy, once, retry_if=_unsent)
        return result


async def _first_of(watches: Sequence[Watch]) -> None:
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


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _Taking(Generic[T]):
    """A queue take's side of :class:`HoldContext`: mark an item, then commit or
    give it back."""

    def __init__(self, queue: _QueueBase[T], timeout: float | None) -> None:
        self.queue = queue
        self._timeout = timeout
        self.path = queue.path
        self.got: _Got[T] | None = None
        self.hold: Hold | None = None
        self._item = queue.path
        """The item's path, for the error (the last one taken)."""

    async def take_hold(self) -> tuple[T, Hold]:
        queue = self.queue
        got = await queue._next(self._timeout, mark=True)
        # No await from the decision to here: the monitor judges every transition.
        hold = Hold()
        queue._monitor.add(hold, got.owner)
        self.got, self.hold, self._item = got, hold, got.path
        return got.value, hold

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        got = self.got
        assert got is not None and got.marker is not None
        queue = self.queue
        marker = got.marker

        async def release() -> None:
            await queue._release_marker(marker, got.owner)

        try:
            queue._monitor.discard(hold)
            if completed:
                try:
                    await queue._commit(got)
                except BaseException:
                    await run_cleanup(queue._client, release)
                    raise
            else:
                await run_cleanup(queue._client, release)
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
        self, queue: _QueueBase[T], *, timeout: float | None, cancel_on_loss: bool
    ) -> None:
        self._taking = _Taking(queue, timeout)
        super().__init__(self._taking, cancel_on_loss=cancel_on_loss)

    def __repr__(self) -> str:
        got = self._taking.got
        state = "waiting" if got is None else f"holding {got.path!r}"
        if self.lost:
            state = f"lost {got.path!r}" if got is not None else "lost"
        return f"<QueueTake {self._taking.queue.path!r} {state}>"

    @property
    def node(self) -> str | None:
        """The item's path while it is held (None before and after)."""
        got = self._taking.got
        return None if got is None else got.path

    @property
    def is_held(self) -> bool:
        """Whether the block holds its item and has not lost it."""
        return self._taking.got is not None and not self.lost

    def _held(self) -> _Got[T]:
        got = self._taking.got
        if got is None:
            raise NotOwnerError(f"this take from {self._taking.queue.path!r} holds no item")
        hold = self._taking.hold
        if hold is not None and hold.lost:
            raise TakeLostError(got.path, hold.reason)
        return got

    async def wait_lost(self) -> None:
        """Wait until the take loses its item (at once if it already has;
        NotOwnerError outside the block)."""
        hold = self._taking.hold
        if self._taking.got is None or hold is None:
            raise NotOwnerError(f"this take from {self._taking.queue.path!r} holds no item")
        await hold.wait_lost()

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
        client = self._taking.queue._client
        return client.transaction().guard(self.fence()).delete(got.path)


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
        return await self._put([(QUEUE_NAME, self._encode(item))], timeout)

    async def put_many(self, items: Iterable[T], *, timeout: float | None = None) -> bool:
        """Add ``items`` in order, all or none, in one transaction (as :meth:`put`)."""
        return await self._put(self._encode_all(QUEUE_NAME, items), timeout)


class PriorityQueue(_QueueBase[T]):
    """Lower numbers first, FIFO within a priority (Curator's DistributedPriorityQueue).

    Priorities are 32-bit ints, in the item's name (``queue-<sign><hex><seq>``);
    data is in Curator's item envelope. Options as :class:`Queue`.
    """

    _layout = PRIORITY_LAYOUT
    _kind = "priority queue"

    async def put(self, item: T, priority: int = 0, *, timeout: float | None = None) -> bool:
        """Add ``item`` with ``priority`` (as :meth:`Queue.put`)."""
        return await self._put([(priority_name(priority), self._encode(item))], timeout)

    async def put_many(
        self, items: Iterable[T], priority: int = 0, *, timeout: float | None = None
    ) -> bool:
        """Add ``items``, all with ``priority``, in one transaction."""
        name = priority_name(priority)
        return await self._put(self._encode_all(name, items), timeout)


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
        return await self._put([(delay_name(self._due(delay, at)), self._encode(item))], timeout)

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
        return await self._put(self._encode_all(name, items), timeout)


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
        return await self._put([(id_name(id), self._encode(item))], timeout)

    async def put_many(
        self,
        items: Iterable[T],
        id: str,
        *,
        timeout: float | None = None,
    ) -> bool:
        """Add ``items``, all under ``id``, in one transaction."""
        name = id_name(id)
        return await self._put(self._encode_all(name, items), timeout)

    async def remove(self, id: str) -> int:
        """Delete every item under ``id``; how many this call deleted.

        Items being worked on under :meth:`take` are deleted too (their
        consumer's commit then finds them gone). A delete whose reply a dropped
        connection lost is retried, and then not counted.
        """
        client = self._client
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
                        retry_if=lambda e: (
                            _lost_connection(e) or isinstance(e, SessionExpiredError)
                        ),
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
        client = self._client
        try:
            names = await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            return []
        return [
            name
            for name in names
            if self._layout.is_item(name) and (parse_id(name) or ("",))[0] == wanted[0]
        ]
