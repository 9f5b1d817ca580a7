"""Znode path rules, checked before anything is sent.

The rules are ZooKeeper's own (``PathUtils.validatePath``): absolute, no empty
segment, no trailing slash, no ``.`` or ``..`` segment, and none of the code
points the server refuses.
"""

from __future__ import annotations

import re

from ._exceptions import InvalidPathError

__all__ = ["basename", "join", "parent", "validate_path"]


# Code points ZooKeeper refuses in a path (PathUtils.validatePath).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


# Paths already found valid: recipes use the same few paths over and over.
_known_valid: set[str] = set()
_KNOWN_LIMIT = 4096


def validate_path(path: object, *, sequential: bool = False) -> str:
    """Return ``path`` if ZooKeeper would accept it, else raise.

    A sequential create may end in ``/``: the server appends the counter, so
    ``/queue/`` becomes ``/queue/0000000007``.
    """
    if not isinstance(path, str):
        raise TypeError(f"znode path must be str, not {type(path).__name__}")
    checked = path + "1" if sequential else path
    if checked in _known_valid:
        return path
    _check(path, checked)
    if len(_known_valid) < _KNOWN_LIMIT:
        _known_valid.add(checked)
    return path


def _check(path: str, checked: str) -> None:
    if not checked:
        raise InvalidPathError(path, "empty")
    if checked[0] != "/":
        raise InvalidPathError(path, "must start with '/'")
    if len(checked) == 1:
        return
    if checked[-1] == "/":
        raise InvalidPathError(path, "must not end with '/'")
    for segment in checked[1:].split("/"):
        if not segment:
            raise InvalidPathError(path, "empty segment ('//')")
        if segment in (".", ".."):
            raise InvalidPathError(path, f"relative segment {segment!r}")
    bad = _FORBIDDEN.search(checked)
    if bad is not None:
        raise InvalidPathError(path, f"forbidden character U+{ord(bad.group()):04X}")


def join(base: str, *parts: str) -> str:
    """Join path segments with single slashes (``join("/a", "b")`` is ``/a/b``)."""
    out = base.rstrip("/")
    for part in parts:
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out or "/"


def parent(path: str) -> str:
    """The parent of an absolute path (``/`` for a top-level node)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    """The last segment of a path."""
    return path.rsplit("/", 1)[1]
