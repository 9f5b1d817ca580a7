"""``aiocoord top``: a live view of the recipes under a path, refreshed every second.

Each refresh reads the tree with ``inspect``'s walk (:func:`._inspect.inspect_path`,
which recognises the recipes' layouts) and flattens it into one row per recipe:
locks, read-write locks, semaphores, elections, leases, queues, counters,
barriers, groups, partitioners and discovery services, with their holders,
waiters, depth or value. A partitioner's row lists each member with the items
it claims (WAIT: items nobody claims; DEPTH: members; VALUE: its generation,
the claims and releases so far); a service's lists its instances (DEPTH:
instances; VALUE: the enabled ones); a latch's or an election's names its
leader and the candidates queued behind it (WAIT: candidates; VALUE: the
term's fencing token). Between
refreshes it remembers who held what, so a row also tells the hand-offs of the
last minute. ``--once`` prints one table (``--json``: one document) and exits.

The live view draws on the terminal's alternate screen and reads single keys:
``q`` quits; ``p``, ``k``, ``w``, ``d`` and ``h`` sort by path, kind, waiters,
depth and hand-offs; ``r`` reverses the order.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import aiocoord

from ._exit import CliError, ExitCode
from ._inspect import Report, inspect_path
from ._leaders import LEADER_KINDS
from ._output import write_line
from ._session import Interrupts, bad_input, connected, make_client

__all__ = ["Row", "Tracker", "render", "rows_of", "top_command"]

HANDOFF_WINDOW = 60.0
"""Seconds of hand-offs a row counts."""

SORT_KEYS = {"p": "path", "k": "kind", "w": "waiters", "d": "depth", "h": "handoffs"}
"""Keys of the live view, and the column each sorts by."""


@dataclass
class Row:
    """One recipe as ``top`` shows it (and as ``--json`` prints it)."""

    path: str
    kind: str
    holders: list[str] = field(default_factory=list)
    """Who holds it: each holder's data (its participant id) or else its session."""
    waiters: int = 0
    depth: int | None = None
    """Items in a queue; adds queued on a counter; members in a barrier, group or
    partitioner; instances of a service."""
    value: int | None = None
    """A counter's value; a partitioner's generation (claims and releases so far);
    a service's enabled instances."""
    handoffs: int = 0
    """Changes of holder seen in the last minute (0 with ``--once``)."""
    last_handoff: float | None = None
    """When the last one was seen (Unix time)."""
    queue: list[str] = field(default_factory=list)
    """An election's or latch's other candidates, in queue order (as holders are named)."""
    holder_nodes: tuple[str, ...] = ()
    """The holders' nodes, to notice a hand-off (not printed)."""

    def as_json(self) -> dict[str, Any]:
        report = asdict(self)
        del report["holder_nodes"]
        return report


def _who(entry: Report) -> str:
    """A holder as a person would name it: its participant id, else its session."""
    data = entry.get("data")
    if isinstance(data, str) and data and len(data) <= 40 and data.isprintable():
        return data
    return str(entry.get("session", entry.get("node", "?")))


def _row(report: Report) -> Row | None:
    """The row of one recognised recipe (None for a plain node)."""
    kind, path = report["kind"], report["path"]
    if kind == "lock":
        holder = report["holder"]
        return Row(
            path, "lock", [_who(holder)], len(report["waiters"]), holder_nodes=(holder["node"],)
        )
    if kind == "read-write lock":
        holders = report["holders"]
        return Row(
            path,
            "rw-lock",
            [f"{_who(h)} ({h['mode']})" for h in holders],
            len(report["waiters"]),
            holder_nodes=tuple(h["node"] for h in holders),
        )
    if kind == "semaphore":
        leases = report["leases"]
        return Row(
            path,
            "semaphore",
            [_who(lease) for lease in leases],
            len(report["waiters"]),
            holder_nodes=tuple(lease["node"] for lease in leases),
        )
    if kind in LEADER_KINDS:
        return _leader_row(report)
    if kind == "lease":
        holder = report["holder"]
        return Row(
            path,
            "lease",
            [_who(holder)] if holder else [],
            len(report["others"]),
            holder_nodes=(holder["node"],) if holder else (),
        )
    if kind == "queue":
        return Row(path, "queue", depth=report["depth"])
    if kind == "queue take markers":
        return Row(path, "queue-takes", [_who(t) for t in report["taken"]])
    if kind in ("counter", "int"):
        return Row(path, "counter", depth=report.get("queued"), value=report["value"])
    if kind == "double barrier":
        return Row(path, "barrier", depth=report["entered"])
    if kind == "group":
        return Row(path, "group", depth=len(report["members"]))
    if kind == "partitioner":
        items = report["items"]
        return Row(
            path,
            "partition",
            [f"{m['id']} ({' '.join(m['items']) or '-'})" for m in report["members"]],
            sum(1 for item in items if item["owner"] is None),  # items waiting for an owner
            depth=len(report["members"]),
            value=report["generation"],
            # A hand-off: an item with a new owner.
            holder_nodes=tuple(f"{i['item']}={i['owner']}" for i in items if i["owner"]),
        )
    if kind == "service":
        instances = report["instances"]
        return Row(
            path,
            "service",
            [f"{i['id']}{'' if i['enabled'] else ' (disabled)'}" for i in instances],
            depth=len(instances),
            value=sum(1 for i in instances if i["enabled"]),
            holder_nodes=tuple(i["id"] for i in instances),
        )
    return None


def _leader_row(report: Report) -> Row:
    """A LeaderLatch (``latch``) or LeaderElection (``election``): the leader (none
    while a hand-over is in transit), the candidates queued behind it, and the
    term's fencing token as VALUE; a new leader counts as a hand-off."""
    leader = report["leader"]
    return Row(
        report["path"],
        "latch" if report["kind"] == "leader latch" else "election",
        [_who(leader)] if leader is not None else [],
        len(report["participants"]),
        value=report.get("fencing_token"),
        queue=[_who(p) for p in report["participants"]],
        holder_nodes=(leader["node"],) if leader is not None else (),
    )


def rows_of(report: Report | None) -> list[Row]:
    """Every recipe in an ``inspect`` report, in tree order."""
    if report is None:
        return []
    row = _row(report)
    if row is not None:
        return [row]
    found: list[Row] = []
    for child in report.get("children", []):
        found += rows_of(child)
    return found


class Tracker:
    """Remembers each path's holders between refreshes, to count hand-offs."""

    def __init__(self) -> None:
        self._holders: dict[str, tuple[str, ...]] = {}
        self._handoffs: dict[str, collections.deque[float]] = {}

    def update(self, rows: list[Row], now: float) -> None:
        """Note the hand-offs since the last refresh, and fill in each row's counts."""
        for row in rows:
            before = self._holders.get(row.path)
            times = self._handoffs.setdefault(row.path, collections.deque())
            if before and row.holder_nodes != before:
                # Each holder that was not there before took over from someone.
                for _ in set(row.holder_nodes) - set(before):
                    times.append(now)
            if row.holder_nodes:  # a leader after nobody (a hand-over) still counts
                self._holders[row.path] = row.holder_nodes
            while times and times[0] < now - HANDOFF_WINDOW:
                times.popleft()
            row.handoffs = len(times)
            row.last_handoff = times[-1] if times else None


def _sorted(rows: list[Row], key: str, reverse: bool) -> list[Row]:
    def sort_key(row: Row) -> tuple[Any, ...]:
        value = getattr(row, key)
        if value is None:
            value = -1
        return (value, row.path)

    return sorted(rows, key=sort_key, reverse=reverse)


_COLUMNS = ("KIND", "PATH", "HOLDER", "WAIT", "DEPTH", "VALUE", "HANDOFFS/1m")


def render(
    rows: list[Row],
    *,
    width: int,
    header: str,
    sort: str = "path",
    reverse: bool = False,
) -> list[str]:
    """The table as lines of at most ``width`` characters."""
    ordered = _sorted(rows, sort, reverse)
    path_width = max([len("PATH"), *(len(r.path) for r in ordered)])
    path_width = min(path_width, max(12, width // 3))
    lines = [header[:width], ""]
    head = (
        f"{_COLUMNS[0]:<12}{_COLUMNS[1]:<{path_width + 2}}{_COLUMNS[3]:>5}{_COLUMNS[4]:>7}"
        f"{_COLUMNS[5]:>12}{_COLUMNS[6]:>13}  {_COLUMNS[2]}"
    )
    lines.append(head[:width])
    for row in ordered:
        path = row.path if len(row.path) <= path_width else "…" + row.path[-(path_width - 1) :]
        holders = ", ".join(row.holders) if row.holders else "-"
        if row.queue:
            holders += f"; next: {', '.join(row.queue)}"
        line = (
            f"{row.kind:<12}{path:<{path_width + 2}}{row.waiters:>5}"
            f"{'-' if row.depth is None else row.depth:>7}"
            f"{'-' if row.value is None else row.value:>12}{row.handoffs:>13}  {holders}"
        )
        lines.append(line[:width])
    if not rows:
        lines.append("(no recipes under this path)")
    return lines


async def _snapshot(client: aiocoord.Client, path: str, depth: int) -> list[Row]:
    report = await inspect_path(client, path, depth)
    if report is None:
        raise CliError(ExitCode.FAILED, f"no node at {path!r}")
    return rows_of(report)


def _document(path: str, rows: list[Row], now: float) -> dict[str, Any]:
    return {"path": path, "time": now, "recipes": [r.as_json() for r in rows]}


async def top_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        aiocoord.NodeCache(client, args.path)  # checks the path, sends nothing
    live = not args.once and not args.json
    if live and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(ExitCode.USAGE, "the live view needs a terminal: use --once or --json")
    async with connected(client, args):
        if args.once:
            rows = await _snapshot(client, args.path, args.depth)
            if args.json:
                write_line(json.dumps(_document(args.path, rows, time.time()), indent=2))
            else:
                width = shutil.get_terminal_size().columns
                for line in render(rows, width=width, header=f"aiocoord top {args.path}"):
                    write_line(line)
            return ExitCode.OK
        if args.json:
            await _json_lines(client, args)
        else:
            await _LiveView(client, args).run()
    return ExitCode.OK


async def _json_lines(client: aiocoord.Client, args: argparse.Namespace) -> None:
    """One JSON document per line and refresh, until interrupted."""
    tracker = Tracker()
    while True:
        rows = await _snapshot(client, args.path, args.depth)
        now = time.time()
        tracker.update(rows, now)
        write_line(json.dumps(_document(args.path, rows, now)))
        await asyncio.sleep(args.interval)


_ALT_SCREEN_ON, _ALT_SCREEN_OFF = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"
_HOME, _CLEAR_LINE, _CLEAR_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"


class _LiveView:
    """The full-screen view: redraw every ``--interval`` seconds and on each key."""

    def __init__(self, client: aiocoord.Client, args: argparse.Namespace) -> None:
        self._client = client
        self._args = args
        self._tracker = Tracker()
        self._rows: list[Row] = []
        self._sort = "path"
        self._reverse = False
        self._quit = asyncio.Event()
        self._redraw = asyncio.Event()
        self._refreshed = ""

    async def run(self) -> None:
        with _cbreak(sys.stdin.fileno()), self._screen(), self._keys():
            refresher = asyncio.ensure_future(self._refresh_loop())
            try:
                while not self._quit.is_set():
                    self._draw()
                    self._redraw.clear()
                    waiters = [
                        asyncio.ensure_future(self._redraw.wait()),
                        asyncio.ensure_future(self._quit.wait()),
                    ]
                    try:
                        await asyncio.wait(
                            [*waiters, refresher], return_when=asyncio.FIRST_COMPLETED
                        )
                    finally:
                        for waiter in waiters:
                            waiter.cancel()
                    if refresher.done():
                        refresher.result()  # a failure ends the view with its error
            finally:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher

    async def _refresh_loop(self) -> None:
        while True:
            rows = await _snapshot(self._client, self._args.path, self._args.depth)
            now = time.time()
            self._tracker.update(rows, now)
            self._rows = rows
            self._refreshed = time.strftime("%H:%M:%S", time.localtime(now))
            self._redraw.set()
            await asyncio.sleep(self._args.interval)

    def _draw(self) -> None:
        size = shutil.get_terminal_size()
        order = "descending" if self._reverse else "ascending"
        header = (
            f"aiocoord top {self._args.path}  {self._refreshed}  "
            f"{len(self._rows)} recipes  sort: {self._sort} ({order})"
        )
        lines = render(
            self._rows, width=size.columns, header=header, sort=self._sort, reverse=self._reverse
        )
        lines = lines[: max(1, size.lines - 2)]
        lines.append("")
        keys = "q quit  p path  k kind  w waiters  d depth  h hand-offs  r reverse"
        lines.append(keys[: size.columns])
        frame = _HOME + "".join(line + _CLEAR_LINE + "\r\n" for line in lines) + _CLEAR_BELOW
        sys.stdout.write(frame)
        sys.stdout.flush()

    def _on_key(self) -> None:
        try:
            typed = os.read(sys.stdin.fileno(), 64).decode(errors="replace")
        except OSError:
            typed = "q"
        if not typed:  # end of input
            self._quit.set()
            return
        for key in typed:
            if key in ("q", "Q", "\x03"):
                self._quit.set()
            elif key in SORT_KEYS:
                self._sort = SORT_KEYS[key]
            elif key == "r":
                self._reverse = not self._reverse
        self._redraw.set()

    @contextlib.contextmanager
    def _keys(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        loop.add_reader(fd, self._on_key)
        try:
            yield
        finally:
            loop.remove_reader(fd)

    @contextlib.contextmanager
    def _screen(self) -> Iterator[None]:
        sys.stdout.write(_ALT_SCREEN_ON)
        sys.stdout.flush()
        try:
            yield
        finally:
            sys.stdout.write(_ALT_SCREEN_OFF)
            sys.stdout.flush()


@contextlib.contextmanager
def _cbreak(fd: int) -> Iterator[None]:
    """Keys arrive one at a time, unechoed; the terminal is restored after."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
