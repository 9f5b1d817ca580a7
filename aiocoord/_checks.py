"""Argument checks shared by every layer: counts, seconds, timeouts, bytes, ACLs.

One place per kind of argument (paths have theirs, in :mod:`._paths`). Each
check returns the value as the caller uses it, or raises before anything is
sent: :class:`ArgumentTypeError` (a TypeError) for the wrong type,
:class:`InvalidArgumentError` (a ValueError) for a refused value, both naming
the argument and the znode path it was for.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from ._exceptions import ArgumentTypeError, InvalidArgumentError
from ._types import ACL, Perm

__all__ = [
    "MAX_TTL_MS",
    "check_acl",
    "check_bytes",
    "check_flag",
    "check_int",
    "check_recipe_acl",
    "check_seconds",
    "check_text",
    "check_timeout",
    "check_ttl_ms",
]

MAX_TTL_MS = 2**40 - 1
"""The longest TTL ZooKeeper accepts, in milliseconds (about 34.8 years)."""


def check_int(
    value: object,
    name: str,
    *,
    path: object = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """``value`` if it is an int (not a bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(name, "an int", value, path)
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(name, f"must be >= {minimum}, not {value}", path)
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(name, f"must be <= {maximum}, not {value}", path)
    return value


def check_flag(value: object, name: str, *, path: object = None) -> bool:
    """``value`` if it is a bool (a truthy string is more likely a mistake than a yes)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(name, "a bool", value, path)
    return value


def check_seconds(
    value: object,
    name: str,
    *,
    path: object = None,
    positive: bool = False,
    allow_inf: bool = False,
    maximum: float | None = None,
) -> float:
    """``value`` as a number of seconds, >= 0 (> 0 if ``positive``); finite
    unless ``allow_inf``, and at most ``maximum`` if given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(name, "a number of seconds", value, path)
    try:
        seconds = float(value)
    except OverflowError:  # an int (or fraction) too large for a float: refused below
        seconds = math.inf
    if math.isnan(seconds):
        raise InvalidArgumentError(name, "NaN is not a number of seconds", path)
    if seconds < 0 or (positive and seconds == 0):
        least = "> 0" if positive else ">= 0"
        raise InvalidArgumentError(name, f"must be {least} seconds, not {value}", path)
    if math.isinf(seconds) and not allow_inf:
        raise InvalidArgumentError(name, f"must be a finite number of seconds, not {value}", path)
    if maximum is not None and seconds > maximum:
        raise InvalidArgumentError(name, f"must be at most {maximum:g} seconds, not {value}", path)
    return seconds


def check_timeout(value: object, name: str = "timeout", *, path: object = None) -> float | None:
    """A ``timeout=`` argument: None (or infinity) waits without bound; otherwise
    seconds >= 0, where 0 means "look once, never wait". NaN and negative
    numbers are refused (a negative deadline is a bug, not a request)."""
    if value is None:
        return None
    seconds = check_seconds(value, name, path=path, allow_inf=True)
    return None if seconds == math.inf else seconds


def check_ttl_ms(value: object, name: str = "ttl", *, path: object = None) -> int:
    """A TTL in seconds as the whole milliseconds ZooKeeper takes.

    ZooKeeper counts TTLs in milliseconds: a TTL below one (``1e-9``) has no
    meaning there, and is refused rather than made 1 ms behind the caller's back.
    """
    seconds = check_seconds(value, name, path=path, positive=True)
    if seconds < 0.001:
        raise InvalidArgumentError(
            name, f"{value} s is below ZooKeeper's TTL resolution (1 ms = 0.001 s)", path
        )
    ttl_ms = max(1, round(seconds * 1000))
    if ttl_ms > MAX_TTL_MS:
        raise InvalidArgumentError(
            name, f"{value} s is longer than ZooKeeper's longest TTL ({MAX_TTL_MS} ms)", path
        )
    return ttl_ms


def check_bytes(value: object, name: str, *, path: object = None) -> bytes:
    """``value`` as bytes if it is bytes-like (bytes, bytearray, memoryview).

    Never ``bytes(value)`` on anything else: ``bytes(5)`` is five zero bytes.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise ArgumentTypeError(name, "bytes", value, path)


def check_text(value: object, name: str, *, path: object = None) -> bytes:
    """``value`` (a str) as UTF-8, as Java and Curator read it; a lone surrogate
    has no UTF-8 form and is refused."""
    if not isinstance(value, str):
        raise ArgumentTypeError(name, "a str", value, path)
    try:
        return value.encode()
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(
            name, f"{value!r} has no UTF-8 form ({error.reason})", path
        ) from None


def check_acl(value: object, name: str = "acl", *, path: object = None) -> tuple[ACL, ...]:
    """``value`` as a tuple of :class:`~aiocoord.ACL` entries, at least one."""
    if isinstance(value, str | bytes | ACL) or not isinstance(value, Sequence):
        raise ArgumentTypeError(name, "a sequence of aiocoord.ACL entries", value, path)
    entries = tuple(value)
    if not entries:
        raise InvalidArgumentError(
            name, "an ACL needs at least one entry (the server refuses an empty one)", path
        )
    for index, entry in enumerate(entries):
        if not isinstance(entry, ACL):
            raise ArgumentTypeError(f"{name}[{index}]", "an aiocoord.ACL", entry, path)
        perms = entry.perms
        if isinstance(perms, bool) or not isinstance(perms, int):
            raise ArgumentTypeError(f"{name}[{index}].perms", "an aiocoord.Perm", perms, path)
        if not 0 <= perms <= Perm.ALL:
            raise InvalidArgumentError(
                f"{name}[{index}].perms", f"{perms} is not a set of Perm flags", path
            )
        for part in ("scheme", "id"):
            text = getattr(entry, part)
            if not isinstance(text, str):
                raise ArgumentTypeError(f"{name}[{index}].{part}", "a str", text, path)
    return entries


def check_recipe_acl(value: object, path: object) -> tuple[ACL, ...] | None:
    """A recipe's ``acl=``: None (the client's ``default_acl``) or :func:`check_acl`'s."""
    return None if value is None else check_acl(value, path=path)
