"""A queue's pure rules: item names, Curator's item envelope, the order items
are taken in (:class:`Layout`), backing off after a lost race, and codecs.

Layouts are Curator's, node for node (see ``_queue``). Pure functions,
tested without a server.
"""

from __future__ import annotations

import random
import string
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from typing_extensions import TypeVar

from ... import _paths
from ..._checks import check_int
from ..._exceptions import ArgumentTypeError, CorruptValueError, InvalidArgumentError

__all__ = [
    "CURATOR_QUEUE_NAME",
    "DELAY_LAYOUT",
    "FIFO_LAYOUT",
    "ID_LAYOUT",
    "LOCK_PATH_SUFFIX",
    "PRIORITY_LAYOUT",
    "QUEUE_NAME",
    "ItemCodec",
    "Layout",
    "decode_item",
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

QUEUE_NAME = "qn-"
"""Item name prefix of ZooKeeper's queue recipe and Curator's SimpleDistributedQueue."""
CURATOR_QUEUE_NAME = "queue-"
"""Item name prefix of Curator's DistributedQueue family."""
LOCK_PATH_SUFFIX = "-taken"
"""The default lock path is the queue path plus this (``/jobs`` -> ``/jobs-taken``)."""
_SEPARATOR = "|"
_SEQUENCE_DIGITS = 10

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

    def encode(self, value: T) -> bytes:
        """The bytes an item is stored as."""
        ...

    def decode(self, data: bytes, path: str) -> T:
        """The item stored as ``data`` in node ``path`` (raise to refuse it: the
        queue reports a CorruptValueError naming the node)."""
        ...


def decode_item(codec: ItemCodec[T], data: bytes, path: str) -> T:
    """``codec.decode``, any failure of it a CorruptValueError naming ``path``."""
    try:
        return codec.decode(data, path)
    except CorruptValueError:
        raise
    except Exception as error:
        raise CorruptValueError(path, data, f"a value {codec!r} can decode") from error
