"""The history of a chaos run: what every process did, as JSON lines.

Each process (the controller and every worker) appends records to a file of its
own, one JSON object per line, flushed as it goes, so a process that is killed
leaves everything it did up to then. Times are seconds since the run started, on
``time.monotonic()`` (the same clock in every process on Linux).

Record types (the ``type`` field):

- ``invoke``: an operation starts (``id``, ``worker``, ``recipe``, ``kind``, ``args``).
- ``complete``: it ends (``id``, ``status`` ok/fail/unknown, ``error``, ``value``).
  An operation without one (its process was killed) counts as ``unknown``.
- ``fault``: the nemesis injected a fault (``kind``, ``target``, ``t`` to ``end``).
- ``store``: the fenced store answered a write (``resource``, ``token``, ``op``,
  ``action``, ``accepted``, ``reason``).
- ``note``: something a recipe reported on the side (a logged warning).
- ``final``: what was read once the workers stopped (counter values, queue
  contents, cache comparisons, orphaned nodes, processes left).
- ``run``: the run's parameters.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

__all__ = [
    "STATUSES",
    "History",
    "HistoryWriter",
    "Op",
    "Status",
    "load_history",
    "merge_files",
]

Status = Literal["ok", "fail", "unknown"]
STATUSES: tuple[Status, ...] = ("ok", "fail", "unknown")
Record = dict[str, Any]


class HistoryWriter:
    """Appends one process's records to its file, each flushed at once."""

    def __init__(self, path: Path, *, worker: str, t0: float) -> None:
        self.path = path
        self.worker = worker
        self._t0 = t0
        self._ids = itertools.count(1)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = path.open("a", encoding="utf-8")

    def now(self) -> float:
        """Seconds since the run started."""
        return round(time.monotonic() - self._t0, 6)

    def write(self, record: Record) -> None:
        """Append ``record`` (with ``t`` set to now unless given)."""
        if self._file is None:
            return
        record.setdefault("t", self.now())
        self._file.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._file.flush()

    def invoke(self, recipe: str, kind: str, **args: Any) -> str:
        """Record the start of an operation; its id, for :meth:`complete`."""
        op_id = f"{self.worker}:{next(self._ids)}"
        self.write(
            {
                "type": "invoke",
                "id": op_id,
                "worker": self.worker,
                "recipe": recipe,
                "kind": kind,
                "args": args,
            }
        )
        return op_id

    def complete(
        self,
        op_id: str,
        status: Status,
        *,
        error: str | None = None,
        value: dict[str, Any] | None = None,
    ) -> None:
        """Record how operation ``op_id`` ended."""
        self.write(
            {"type": "complete", "id": op_id, "status": status, "error": error, "value": value}
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(slots=True)
class Op:
    """One operation: from its invocation to its completion (if it had one)."""

    id: str
    worker: str
    recipe: str
    kind: str
    invoke: float
    args: dict[str, Any] = field(default_factory=dict)
    complete: float | None = None
    status: Status = "unknown"
    error: str | None = None
    value: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the result value (``None`` if absent)."""
        return self.value.get(key, default)


@dataclass(slots=True)
class History:
    """Every record of a run, operations paired up."""

    ops: list[Op] = field(default_factory=list)
    faults: list[Record] = field(default_factory=list)
    store: list[Record] = field(default_factory=list)
    notes: list[Record] = field(default_factory=list)
    finals: list[Record] = field(default_factory=list)
    stalls: list[Record] = field(default_factory=list)
    """Stretches in which a worker's event loop ran nothing (its stall watch)."""
    meta: Record = field(default_factory=dict)

    def of(self, recipe: str, kind: str | None = None) -> list[Op]:
        """The operations of ``recipe`` (of ``kind``, if given), in invocation order."""
        return [o for o in self.ops if o.recipe == recipe and (kind is None or o.kind == kind)]

    def final(self, what: str) -> list[Record]:
        """The ``final`` records of one kind (``counter``, ``queue``, ``cache``...)."""
        return [f for f in self.finals if f.get("what") == what]

    def store_events(self, resource: str) -> list[Record]:
        """The store's answers for ``resource``, in the order it gave them."""
        return [s for s in self.store if s.get("resource") == resource]


def read_records(paths: Iterable[Path]) -> Iterator[Record]:
    """Every record of the files (a torn last line, from a killed process, is skipped)."""
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    yield record


def build_history(records: Iterable[Record]) -> History:
    """Pair invocations with completions and sort every kind of record by time."""
    history = History()
    ops: dict[str, Op] = {}
    completions: dict[str, Record] = {}
    for record in records:
        kind = record.get("type")
        if kind == "invoke":
            ops[record["id"]] = Op(
                id=record["id"],
                worker=record["worker"],
                recipe=record["recipe"],
                kind=record["kind"],
                invoke=float(record.get("t", 0.0)),
                args=dict(record.get("args") or {}),
            )
        elif kind == "complete":
            completions[record["id"]] = record
        elif kind == "fault":
            history.faults.append(record)
        elif kind == "store":
            history.store.append(record)
        elif kind == "note":
            history.notes.append(record)
        elif kind == "final":
            history.finals.append(record)
        elif kind == "stall":
            history.stalls.append(record)
        elif kind == "run":
            history.meta.update(record)
    for op_id, done in completions.items():
        op = ops.get(op_id)
        if op is None:
            continue
        op.complete = float(done.get("t", 0.0))
        op.status = done["status"]
        op.error = done.get("error")
        op.value = dict(done.get("value") or {})
    history.ops = sorted(ops.values(), key=lambda o: o.invoke)
    history.faults.sort(key=lambda f: float(f.get("t", 0.0)))
    # The store's own order is the order it answered in: its records carry a serial.
    history.store.sort(key=lambda s: int(s.get("serial", 0)))
    history.notes.sort(key=lambda n: float(n.get("t", 0.0)))
    history.stalls.sort(key=lambda n: float(n.get("from", 0.0)))
    return history


def load_history(paths: Iterable[Path]) -> History:
    """The history of a run from its processes' files."""
    return build_history(read_records(paths))


def merge_files(paths: Iterable[Path], target: Path) -> int:
    """Write every record of ``paths`` into ``target``, sorted by time; how many."""
    records = sorted(read_records(paths), key=lambda r: float(r.get("t", 0.0)))
    with target.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
    return len(records)
