"""What the CLI writes: log lines on stderr (``-v``/``-q``), and values rendered for people
or for JSON."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "configure_logging",
    "data_fields",
    "data_text",
    "log",
    "quiet_unless_verbose",
    "restore_logging",
    "session_hex",
    "time_text",
    "write_line",
]

log = logging.getLogger("aiocoord.cli")
"""The CLI's own messages: INFO with ``-v``."""

_LIBRARY = logging.getLogger("aiocoord")
_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"aiocoord: {record.levelname.lower()}: {text}"


class _State:
    handler: logging.Handler | None = None
    verbosity = 0
    saved: tuple[int, bool] = (logging.NOTSET, True)


def configure_logging(verbosity: int) -> None:
    """Send the library's and the CLI's log to stderr: WARNING and up by default,
    INFO with ``-v``, DEBUG with ``-vv``, errors only with ``-q``."""
    restore_logging()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(message)s"))
    _State.saved = (_LIBRARY.level, _LIBRARY.propagate)
    _LIBRARY.setLevel(_LEVELS.get(verbosity, logging.DEBUG))
    _LIBRARY.addHandler(handler)
    _LIBRARY.propagate = False
    _State.handler = handler
    _State.verbosity = verbosity


def restore_logging() -> None:
    """Undo :func:`configure_logging` (``main()`` may run more than once in a process)."""
    handler, _State.handler = _State.handler, None
    if handler is not None:
        _LIBRARY.removeHandler(handler)
        _LIBRARY.setLevel(_State.saved[0])
        _LIBRARY.propagate = _State.saved[1]


@contextlib.contextmanager
def quiet_unless_verbose() -> Iterator[None]:
    """Hold back the library's warnings (unless ``-v``): while connecting, its
    "cannot connect, retrying" would only repeat the one-line error that follows."""
    handler = _State.handler
    if handler is None or _State.verbosity > 0:
        yield
        return
    level = handler.level
    handler.setLevel(logging.ERROR)
    try:
        yield
    finally:
        handler.setLevel(level)


def write_line(text: str) -> None:
    """One line on stdout, flushed (a pipe reader sees it at once)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def session_hex(session_id: int) -> str:
    """A session id as ZooKeeper's own tools print it."""
    return f"0x{session_id:x}"


def time_text(ms: int) -> str:
    """A server timestamp (ms since the epoch) in local time, to the millisecond."""
    moment = datetime.datetime.fromtimestamp(ms / 1000).astimezone()
    return moment.isoformat(sep=" ", timespec="milliseconds")


def data_text(data: bytes | None, limit: int = 80) -> str:
    """Node data for a person: quoted text if it is printable UTF-8, else hex."""
    if data is None:
        return "(not kept)"
    if not data:
        return '""'
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        shown = json.dumps(text[:limit], ensure_ascii=False)
        return shown + ("..." if len(text) > limit else "")
    shown = data[: limit // 2].hex()
    return f"0x{shown}" + ("..." if len(data) > limit // 2 else "") + f" ({len(data)} bytes)"


def data_fields(data: bytes | None) -> dict[str, Any]:
    """Node data for JSON: ``data`` as text when it is UTF-8, else ``data_base64``."""
    if data is None:
        return {"data": None}
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_base64": base64.b64encode(data).decode("ascii")}
