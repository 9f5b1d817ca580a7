"""Znode path rules, checked before anything is sent.

The rules are ZooKeeper's own (``PathUtils.validatePath``): absolute, no empty
segment, no trailing slash, no ``.`` or ``..`` segment, and none of the code
points the server refuses.

ZooKeeper checks a path as a Java string, one UTF-16 unit at a time, and
refuses the surrogate range: so every character outside the Basic
Multilingual Plane (an emoji, U+10000 and up), which Java holds as a
surrogate pair, is refused too. Python sees one code point there, so the
rule is spelled out here; otherwise the server answers BADARGUMENTS, or
worse, echoes the path back in Java's modified UTF-8, which is not UTF-8.

The ``/zookeeper`` subtree is the server's own (quotas, the ensemble's
config). The client may read it and an operator may write quotas there, so
plain operations are not stopped; but recipes refuse a path in it
(:func:`check_unreserved`), and so does a client's namespace.
"""

from __future__ import annotations

import re

from ._exceptions import ArgumentTypeError, InvalidPathError

__all__ = [
    "RESERVED",
    "basename",
    "check_namespace",
    "check_unreserved",
    "is_reserved",
    "join",
    "parent",
    "validate_path",
]


# Code points ZooKeeper refuses in a path (PathUtils.validatePath), and those
# outside the BMP, which Java holds as surrogates (see above).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")

RESERVED = "/zookeeper"
"""The server's own subtree."""


# Paths already found valid: recipes use the same few paths over and over.
_known_valid: set[str] = set()
_KNOWN_LIMIT = 4096


def validate_path(path: object, *, sequential: bool = False) -> str:
    """Return ``path`` if ZooKeeper would accept it, else raise.

    A sequential create may end in ``/``: the server appends the counter, so
    ``/queue/`` becomes ``/queue/0000000007``.
    """
    if not isinstance(path, str):
        raise ArgumentTypeError("znode path", "a str", path)
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
        code = ord(bad.group())
        why = " (outside the BMP: ZooKeeper refuses UTF-16 surrogates)" if code > 0xFFFF else ""
        raise InvalidPathError(path, f"forbidden character U+{code:04X}{why}")


def is_reserved(server_path: str) -> bool:
    """Whether ``server_path`` (as the server knows it) is in the ``/zookeeper`` subtree."""
    return server_path == RESERVED or server_path.startswith(RESERVED + "/")


def check_unreserved(path: str, server_path: str, what: str) -> str:
    """``path`` unless it lands (as ``server_path``) in the server's ``/zookeeper``
    subtree, where a recipe's nodes have no place."""
    if is_reserved(server_path):
        raise InvalidPathError(
            path, f"{server_path!r} is in the server's own /zookeeper subtree: not for a {what}"
        )
    return path


def check_namespace(namespace: object) -> str:
    """A client's namespace as the prefix it puts before paths: ``""`` for none
    (None, ``""`` or ``"/"``), else ``"/app"`` (a leading ``/`` is added)."""
    if namespace is None:
        return ""
    if not isinstance(namespace, str):
        raise ArgumentTypeError("namespace", "a str or None", namespace)
    if not namespace:
        return ""
    prefix = namespace if namespace.startswith("/") else "/" + namespace
    try:
        validate_path(prefix)
    except InvalidPathError as error:
        raise InvalidPathError(namespace, f"not a namespace: {error.reason}") from None
    if prefix == "/":
        return ""
    if is_reserved(prefix):
        raise InvalidPathError(namespace, "not a namespace: in the server's /zookeeper subtree")
    return prefix


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
