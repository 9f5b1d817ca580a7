"""A counter's arithmetic: what a sequence of bounded adds does to a value.

Pure and deterministic, below everything that changes a counter: the
coalescing batcher in ``_counter`` applies a batch with it, and the
combiner in ``_combining`` (and each requester reading its result) computes
the same grants for a combined transaction.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Literal

from ..._exceptions import CounterOverflowError
from ..._types import Codec

__all__ = ["LONG_MAX", "LONG_MIN", "Denied", "Entry", "Grant", "bounded", "grant_all"]

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
"""The range of a 64-bit counter (a Java long, as Curator's DistributedAtomicLong)."""

Entry = tuple[int, int | None, int | None]
"""One add: (delta, lower bound or None, upper bound or None)."""


class Denied(enum.Enum):
    """Why an add in a batch gets nothing from the batch's write."""

    BOUND = enum.auto()
    OVERFLOW = enum.auto()


Grant = tuple[int, int] | Denied
"""(pre, post) of an add that applies, or why it does not."""


def bounded(
    value: int, delta: int, lower: int | None, upper: int | None, codec: Codec[int] = Codec.LONG
) -> tuple[int, int] | Literal[Denied.BOUND]:
    """(pre, post) if ``value + delta`` stays in bounds, else ``Denied.BOUND``; raises
    CounterOverflowError if the result does not fit ``codec``'s width."""
    new = value + delta
    if (lower is not None and new < lower) or (upper is not None and new > upper):
        return Denied.BOUND
    try:
        codec.encode(new)
    except OverflowError as error:
        raise CounterOverflowError(str(error)) from None
    return value, new


def grant_all(value: int, entries: Sequence[Entry]) -> tuple[list[Grant], int]:
    """Each add's fate when ``entries`` apply in order from ``value``, and the end value.

    Pure and deterministic: the combiner that writes a batch and each
    requester reading its result compute the same grants.
    """
    grants: list[Grant] = []
    current = value
    for delta, lower, upper in entries:
        granted: Grant
        try:
            granted = bounded(current, delta, lower, upper)
        except CounterOverflowError:
            granted = Denied.OVERFLOW
        grants.append(granted)
        if isinstance(granted, tuple):
            current = granted[1]
    return grants, current
