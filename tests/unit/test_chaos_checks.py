"""The chaos run's checkers, each fed hand-made histories: one that breaks its
invariant (the checker must say FAIL) and one that keeps it (PASS).

Every check in ``chaos._checks.CHECKS`` must have a breaking history here, so a
check that cannot fail is caught. The fenced store's rules and the nemesis's
schedule are tested here too (no server needed).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

import chaos._worker
from aiocoord._recipes.queues._rules import wrap_item
from chaos._checks import CHECKS, STALE_READ, Verdict, run_checks
from chaos._controller import unwrap
from chaos._history import HistoryWriter, build_history, read_records
from chaos._layout import (
    AQUEUE,
    COUNTER_BOUND,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_LONG,
    DQUEUE,
    DRIVER_BUG,
    IDQUEUE,
    PQUEUE,
    QUEUE,
    SHARDED_UPPER,
    STRAY_CANCEL,
)
from chaos._nemesis import FAULT_KINDS, schedule
from chaos._store import FencedStore, StoreClient, StoreServer
from chaos._worker import Outcome, Worker, WorkerConfig, _StallWatch

Record = dict[str, Any]


def op(
    op_id: str,
    recipe: str,
    kind: str,
    start: float,
    end: float | None,
    status: str = "ok",
    *,
    error: str | None = None,
    args: dict[str, Any] | None = None,
    **value: Any,
) -> list[Record]:
    worker = op_id.split(":")[0]
    records: list[Record] = [
        {
            "type": "invoke",
            "id": op_id,
            "worker": worker,
            "recipe": recipe,
            "kind": kind,
            "args": args or {},
            "t": start,
        }
    ]
    if end is not None:
        records.append(
            {
                "type": "complete",
                "id": op_id,
                "status": status,
                "error": error,
                "value": value,
                "t": end,
            }
        )
    return records


def write(
    serial: int,
    resource: str,
    op_id: str,
    token: int,
    action: str,
    *,
    accepted: bool = True,
    mode: str | None = None,
    **extra: Any,
) -> Record:
    return {
        "type": "store",
        "serial": serial,
        "t": serial / 10,
        "resource": resource,
        "op": op_id,
        "token": token,
        "action": action,
        "accepted": accepted,
        "mode": mode,
        "reason": "" if accepted else "below the highest",
        **extra,
    }


def hold(
    op_id: str, recipe: str, start: float, end: float, status: str = "ok", **value: Any
) -> list[Record]:
    """A hold (lock, lease, term) inside [start, end]."""
    value = {"t_acq": start, "t_rel": end, "lost": status != "ok", **value}
    return op(op_id, recipe, value.pop("kind", "hold"), start - 0.01, end + 0.01, status, **value)


def final(what: str, **fields: Any) -> Record:
    return {"type": "final", "t": 100.0, "what": what, **fields}


def verdict(name: str, records: list[Record]) -> Verdict:
    check = next(c for c in CHECKS if c.name == name)
    history = build_history([{"type": "run", "t": 0.0, "members": 3}, *records])
    return run_checks(history, [check])[0]


def increments(path: str, ok: int, unknown: int, posts: list[int] | None = None) -> list[Record]:
    records: list[Record] = []
    posts = posts or list(range(1, ok + 1))
    for index in range(ok):
        records += op(
            f"w0:{index}", "counter", "increment", index, index + 0.5, args={"path": path},
            post=posts[index],
        )  # fmt: skip
    for index in range(unknown):
        records += op(
            f"w1:{index}", "counter", "increment", index, index + 0.5, "unknown",
            args={"path": path},
        )  # fmt: skip
    return records


def barrier_round(
    attempt: int, start: float, workers: list[str], passed_at: float | None = None
) -> list[Record]:
    """One round: each worker enters (in turn), all pass once the last is in, all leave."""
    records: list[Record] = []
    last_in = start + 0.1 * len(workers)
    passed = last_in + 0.05 if passed_at is None else passed_at
    for index, worker in enumerate(workers):
        invoked = start + 0.1 * index
        records += op(f"{worker}:e{attempt}", "barrier", "enter", invoked, passed,
                      args={"attempt": attempt})  # fmt: skip
        records += op(f"{worker}:l{attempt}", "barrier", "leave", passed + 0.1, passed + 0.2,
                      args={"attempt": attempt})  # fmt: skip
    return records


def puts(recipe: str, items: list[str], status: str = "ok") -> list[Record]:
    records: list[Record] = []
    for index, item in enumerate(items):
        records += op(f"p:{recipe}{item}", recipe, "put", index, index + 0.1, status,
                      args={"item": item}, item=item)  # fmt: skip
    return records


def gets(items: list[str], status: str = "ok", recipe: str = "queue") -> list[Record]:
    records: list[Record] = []
    for index, item in enumerate(items):
        records += op(f"g:{index}{item}{status}", recipe, "get", 10 + index, 10.1 + index,
                      status, item=item)  # fmt: skip
    return records


def takes(
    item: str, start: float, end: float, status: str = "ok", recipe: str = "aqueue", **value: Any
) -> list[Record]:
    return op(f"t:{item}{start}", recipe, "take", start - 0.1, end + 0.1, status,
              item=item, t_body=start, t_end=end, **value)  # fmt: skip


def term(
    op_id: str,
    start: float,
    end: float,
    status: str = "ok",
    policy: str = "standard",
    token: int | None = None,
) -> list[Record]:
    """A latch term: leading from ``start`` to leaving (ok) or to being told of the loss."""
    value: dict[str, Any] = {"t_acq": start, "lost": status != "ok"}
    if token is not None:
        value["token"] = token
    value |= {"t_rel": end} if status == "ok" else {"t_lost": end}
    return op(op_id, "latch", "term", start - 0.5, end + 0.1, status,
              args={"policy": policy}, **value)  # fmt: skip


def sets(*writes: tuple[str, str, int, int, int]) -> list[Record]:
    """SharedCount try_set operations: (id, status, previous version, its value, new value)."""
    records: list[Record] = []
    for index, (op_id, status, version, value, new) in enumerate(writes):
        args = {"prev_version": version, "prev_value": value, "new": new}
        records += op(op_id, "shared-count", "try_set", index, index + 0.5, status, args=args)
    return records


def gate(op_id: str, kind: str, start: float, end: float, status: str = "ok") -> list[Record]:
    """A set, remove or wait on the plain barrier of worker w0."""
    return op(op_id, "gate", kind, start, end, status, args={"path": "/chaos/gate/w0"})


def sharded(op_id: str, kind: str, status: str = "ok", **value: Any) -> list[Record]:
    delta = value.pop("delta", None)
    args = {} if delta is None else {"delta": delta}
    error = "bound" if status == "fail" else None
    return op(op_id, "sharded", kind, 1.0, 1.1, status, error=error, args=args, **value)


def processes(left: list[str]) -> Record:
    return final("processes", checked=5, left=left)


def workers_end(**problems: str) -> Record:
    return final("workers", count=2, problems=problems)


def leadership_handover(next_leader: str) -> list[Record]:
    """a (token 10) hands over to c, queued from 0.2 to the end; ``next_leader`` leads
    next (token 12)."""
    return [
        *op("w2:1", "leadership", "participate", 0.2, 9.0, args={"participant": "c"}, t_leave=9.0),
        *op(
            "w0:1",
            "leadership",
            "term",
            0.5,
            1.5,
            args={"participant": "a", "token": 10},
            reason="handed over to 'c'",
        ),
        *op(
            "w0:2", "leadership", "hand_over", 1.0, 1.5, args={"participant": "a"}, token=10, to="c"
        ),
        *op("w1:1", "leadership", "term", 2.0, 5.0, args={"participant": next_leader, "token": 12}),
    ]


# For each check: a history that breaks its invariant, and one that keeps it.
BROKEN: dict[str, list[Record]] = {
    # A's begin, then B's, then A's end again: B wrote inside A's section.
    "mutex.store": [
        write(1, "mutex", "a", 10, "begin"),
        write(2, "mutex", "b", 12, "begin"),
        write(3, "mutex", "a", 10, "end"),
    ],
    "mutex.told": [
        write(1, "mutex", "w0:1", 10, "begin"),
        write(2, "mutex", "w1:1", 12, "begin"),
        write(3, "mutex", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "mutex", 1.0, 3.0, rejected=True, token=10),
    ],
    "mutex.holds": [*hold("w0:1", "mutex", 1.0, 3.0), *hold("w1:1", "mutex", 2.0, 4.0)],
    # A writer writes while a reader is between its begin and end.
    "rwlock.store": [
        write(1, "rwlock", "r", 10, "begin", mode="read"),
        write(2, "rwlock", "w", 12, "begin", mode="write"),
        write(3, "rwlock", "r", 10, "end", mode="read"),
    ],
    "rwlock.told": [
        write(1, "rwlock", "w0:1", 10, "end", accepted=False, mode="read"),
        *hold("w0:1", "rwlock", 1.0, 3.0, kind="read", rejected=True),
    ],
    "rwlock.holds": [
        *hold("w0:1", "rwlock", 1.0, 3.0, kind="read"),
        *hold("w1:1", "rwlock", 2.0, 4.0, kind="write"),
    ],
    "semaphore.store": [
        write(1, "semaphore", "a", 10, "begin"),
        write(2, "semaphore", "b", 11, "begin"),
        write(3, "semaphore", "c", 12, "begin", over_limit=[10, 11], evicted=[]),
    ],
    "semaphore.told": [*hold("w0:1", "semaphore", 1.0, 3.0, rejected=True)],
    "semaphore.holds": [
        *hold("w0:1", "semaphore", 1.0, 5.0),
        *hold("w1:1", "semaphore", 2.0, 5.0),
        *hold("w2:1", "semaphore", 3.0, 5.0),
    ],
    "leader.store": [
        write(1, "leader", "a", 10, "begin"),
        write(2, "leader", "b", 12, "begin"),
        write(3, "leader", "a", 10, "end"),
    ],
    "leader.told": [
        write(1, "leader", "w0:1", 10, "begin", accepted=False),
        *hold("w0:1", "leader", 1.0, 3.0, kind="term"),
    ],
    "leader.terms": [
        *hold("w0:1", "leader", 1.0, 3.0, kind="term"),
        *hold("w1:1", "leader", 2.9, 4.0, kind="term"),
    ],
    # One more than succeeded + unknown: an increment reported failed was applied.
    "counter.long": [*increments(COUNTER_LONG, 3, 1), final("counter", path=COUNTER_LONG, value=5)],
    # Two successes saw the same post-value: a lost update.
    "counter.int": [
        *increments(COUNTER_INT, 3, 0, posts=[1, 2, 2]),
        final("counter", path=COUNTER_INT, value=3),
    ],
    "counter.bounded": [
        *op("w0:1", "bounded-counter", "add", 1, 2, args={"delta": 1}, post=COUNTER_BOUND + 1),
        final("counter", path=COUNTER_BOUNDED, value=1),
    ],
    # w2 enters after w0 and w1 have passed and begun to leave: it passes alone.
    "barrier.enter": [
        *barrier_round(1, 0.0, ["w0", "w1", "w2"]),
        *op("w0:e2", "barrier", "enter", 1.0, 1.5, args={"attempt": 2}),
        *op("w1:e2", "barrier", "enter", 1.1, 1.5, args={"attempt": 2}),
        *op("w0:l2", "barrier", "leave", 1.6, 1.7, args={"attempt": 2}),
        *op("w1:l2", "barrier", "leave", 1.6, 1.7, args={"attempt": 2}),
    ],
    "queue.once": [
        *puts("queue", ["a", "b"]),
        *gets(["a", "a", "b"]),
        final("queue", path=QUEUE, items=[]),
    ],
    "queue.vanish": [
        *puts("queue", ["a", "b"]),
        *gets(["a"]),
        final("queue", path=QUEUE, items=[]),
    ],
    # The only take of "a" ended lost ("it goes back"), yet "a" is gone.
    "aqueue.delivery": [
        *puts("aqueue", ["a"]),
        *takes("a", 1.0, 2.0, "fail", error="TakeLostError", lost=True),
        final("queue", path=AQUEUE, items=[]),
    ],
    "aqueue.taker": [
        *puts("aqueue", ["a"]),
        *takes("a", 1.0, 3.0),
        *takes("a", 2.0, 2.5),
        final("queue", path=AQUEUE, items=[]),
    ],
    # An acknowledged create is gone: ZooKeeper lost a write.
    "zookeeper.durable": [
        *op("w0:1", "witness", "create", 1.0, 1.1, node="n-0000000001"),
        *op("w0:2", "witness", "create", 2.0, 2.1, node="n-0000000002"),
        final("witness", nodes=["n-0000000001"]),
    ],
    "cache.converged": [
        final("cache", worker="w0", equal=True, nodes=3),
        final("cache", worker="w1", equal=False, missing=["/chaos/tree/a"], extra=[], stale=[]),
    ],
    "orphans.none": [final("orphans", paths={"/chaos/mutex": ["_c_x-lock-0000000001"]})],
    "workers.none-hung": [
        *op("w0:1", "mutex", "hold", 1.0, 46.0, "unknown", error="watchdog: still running"),
        workers_end(),
    ],
    "processes.none-left": [processes(["pid 4242"])],
    "semmutex.store": [
        write(1, "semmutex", "a", 10, "begin"),
        write(2, "semmutex", "b", 12, "begin"),
        write(3, "semmutex", "a", 10, "end"),
    ],
    "semmutex.told": [
        write(1, "semmutex", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "semmutex", 1.0, 3.0, rejected=True, token=10),
    ],
    "semmutex.holds": [*hold("w0:1", "semmutex", 1.0, 3.0), *hold("w1:1", "semmutex", 2.0, 4.0)],
    "mutex-local.store": [
        write(1, "mutex-local", "a", 10 << 16, "begin"),
        write(2, "mutex-local", "b", (10 << 16) + 1, "begin"),
        write(3, "mutex-local", "a", 10 << 16, "end"),
    ],
    "mutex-local.told": [
        write(1, "mutex-local", "w0:1", 10 << 16, "end", accepted=False),
        *hold("w0:1", "mutex-local", 1.0, 3.0, rejected=True, token=10 << 16),
    ],
    "mutex-local.holds": [
        *hold("w0:1", "mutex-local", 1.0, 3.0),
        *hold("w0:2", "mutex-local", 2.0, 4.0),
    ],
    # A lone holder of the second lock wrote inside a MultiLock holder's section.
    "multilock.store": [
        write(1, "multi-a", "a", 10, "begin"),
        write(2, "multi-b", "a", 20, "begin"),
        write(3, "multi-b", "c", 22, "begin"),
        write(4, "multi-b", "a", 20, "end"),
        write(5, "multi-a", "a", 10, "end"),
    ],
    "multilock.told": [
        write(1, "multi-a", "w0:1", 10, "begin", accepted=False),
        *hold("w0:1", "multilock", 1.0, 3.0, kind="both"),
    ],
    "multilock.holds": [
        *hold("w0:1", "multilock", 1.0, 3.0, kind="both"),
        *hold("w1:1", "multilock", 2.0, 4.0, kind="b-only"),
    ],
    "lease.store": [
        write(1, "lease", "a", 10, "begin"),
        write(2, "lease", "b", 12, "begin"),
        write(3, "lease", "a", 10, "end"),
    ],
    "lease.told": [
        write(1, "lease", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "lease", 1.0, 3.0, rejected=True, token=10),
    ],
    # A lease checks its own TTL on the clock: a session-policy holder is no excuse.
    "lease.holds": [
        *hold("w0:1", "lease", 1.0, 3.0, args={"policy": "session"}),
        *hold("w1:1", "lease", 2.0, 4.0, args={"policy": "session"}),
    ],
    "latch.store": [
        write(1, "latch", "a", 10, "begin"),
        write(2, "latch", "b", 12, "begin"),
        write(3, "latch", "a", 10, "end"),
    ],
    "latch.told": [
        write(1, "latch", "w0:1", 10, "begin", accepted=False),
        *term("w0:1", 1.0, 3.0),
    ],
    "latch.terms": [*term("w0:1", 1.0, 3.0), *term("w1:1", 2.9, 4.0)],
    # w0 was told it lost leadership at t=3, after w1 had written as leader at t=2.
    "latch.handover": [
        *term("w0:1", 1.0, 3.0, "fail"),
        *term("w1:1", 1.8, 2.5),
        write(1, "latch", "w1:1", 12, "begin", t=2.0),
        write(2, "latch", "w1:1", 12, "end", t=2.2),
    ],
    # Two sets won on version 1: one of them was not a versioned write.
    "sharedcount.cas": [
        *sets(("w0:1", "ok", 0, 0, 11), ("w0:2", "ok", 1, 11, 12), ("w1:1", "ok", 1, 11, 21)),
        final("shared-count", value=21, version=2),
    ],
    # The final value is the one a refused set tried to write.
    "sharedcount.final": [
        *sets(("w0:1", "ok", 0, 0, 11), ("w1:1", "fail", 0, 0, 21)),
        final("shared-count", value=21, version=1),
    ],
    "sharded.bounds": [
        *sharded("w0:1", "get", total=SHARDED_UPPER + 1),
        final("sharded", total=2, shards=[[1, 2], [1, 2]]),
    ],
    # One more than every success and unknown together: a refused change was applied.
    "sharded.total": [
        *sharded("w0:1", "add", delta=1),
        *sharded("w0:2", "add", "fail", delta=1, pre=SHARDED_UPPER),
        final("sharded", total=2, shards=[[1, 2], [1, 2]]),
    ],
    # Released at t=2 from a barrier set at t=1.1 and removed from t=3 on.
    "gate.released": [
        *gate("w0:1", "set", 1.0, 1.1),
        *gate("w1:1", "wait", 1.5, 2.0),
        *gate("w0:2", "remove", 3.0, 3.1),
    ],
    "pqueue.once": [
        *puts("pqueue", ["a", "b"]),
        *gets(["a", "a", "b"], recipe="pqueue"),
        final("queue", path=PQUEUE, items=[]),
    ],
    "pqueue.vanish": [
        *puts("pqueue", ["a", "b"]),
        *gets(["a"], recipe="pqueue"),
        final("queue", path=PQUEUE, items=[]),
    ],
    "dqueue.delivery": [
        *puts("dqueue", ["a"]),
        *takes("a", 1.0, 2.0, "fail", "dqueue", error="TakeLostError", lost=True),
        final("queue", path=DQUEUE, items=[]),
    ],
    "dqueue.taker": [
        *puts("dqueue", ["a"]),
        *takes("a", 1.0, 3.0, recipe="dqueue"),
        *takes("a", 2.0, 2.5, recipe="dqueue"),
        final("queue", path=DQUEUE, items=[]),
    ],
    "dqueue.due": [
        *op("p:a", "dqueue", "put", 0.0, 0.1, args={"item": "a", "delay": 1.0, "due_ms": 5000}),
        *takes("a", 1.0, 2.0, recipe="dqueue", wall_ms=4000),
        final("queue", path=DQUEUE, items=[]),
    ],
    "idqueue.once": [
        *puts("idqueue", ["a"]),
        *gets(["a"], recipe="idqueue"),
        final("queue", path=IDQUEUE, items=["a"]),
    ],
    # "b" vanished; the only remove was of another id.
    "idqueue.vanish": [
        *op("p:a", "idqueue", "put", 0.0, 0.1, args={"item": "a", "id": "x"}),
        *op("p:b", "idqueue", "put", 0.0, 0.1, args={"item": "b", "id": "y"}),
        *op("r:x", "idqueue", "remove", 1.0, 1.1, args={"id": "x"}, removed=1),
        final("queue", path=IDQUEUE, items=[]),
    ],
    "nodecache.converged": [
        final("node-cache", worker="w0", equal=False, missing=[], extra=[], stale=["/x"]),
    ],
    "childrencache.converged": [
        final("children-cache", worker="w1", equal=False, missing=["/x/1"], extra=[], stale=[]),
    ],
    # DelayQueue.take() raised CancelledError though nobody had cancelled the task.
    "workers.no-stray-cancel": [
        *op("w0:1", "dqueue", "take", 1.0, 2.0, "unknown", error="stray CancelledError: ..."),
    ],
    # A member that left (or whose close failed) is still in the group.
    "group.members": [
        final("group-alive", worker="w0", members={"w0-keep-0": {"data": "61", "sure": True}}),
        final("group", members={"w0-keep-0": "61", "w0-group-3": "62"}),
    ],
    # The store accepted a second owner's begin inside the first one's section.
    "partition.store": [
        write(1, "partition-p0", "w0:1", 10, "begin"),
        write(2, "partition-p0", "w1:1", 12, "begin"),
        write(3, "partition-p0", "w0:1", 10, "end"),
    ],
    # Turned away by the store, yet the write ended as if nothing was lost.
    "partition.told": [
        write(1, "partition-p1", "w0:1", 12, "begin"),
        write(2, "partition-p1", "w1:1", 10, "begin", accepted=False),
        *op("w1:1", "partition", "write", 1.0, 2.0, "ok", token=10, rejected=True),
    ],
    # The former owner's fenced write (token 10) was applied after the new owner's (12).
    "partition.fenced": [
        *op(
            "w0:1",
            "partition",
            "write",
            1.0,
            2.0,
            args={"item": "p0"},
            token=12,
            fenced="applied",
            zxid=0x20,
        ),
        *op(
            "w1:1",
            "partition",
            "write",
            1.0,
            2.0,
            args={"item": "p0"},
            token=10,
            fenced="applied",
            zxid=0x21,
        ),
    ],
    # p1 is claimed by nobody, and w0-keep-0 believes it owns p1 too.
    "partition.owned": [
        final(
            "partition-owned",
            worker="w0",
            members={"w0-keep-0": {"owned": ["p0", "p1"], "stable": True}},
        ),
        final(
            "partitions",
            claims={
                "p0": "w0-keep-0",
                "p2": "w0-keep-0",
                "p3": "w0-keep-0",
                "p4": "w0-keep-0",
                "p5": "w0-keep-0",
            },
        ),
    ],
    # The loop ran nothing for two seconds, busy inside aiocoord.
    "workers.loop-free": [
        {
            "type": "stall",
            "worker": "w0",
            "from": 1.0,
            "to": 3.0,
            "frozen": 0.0,
            "in_library": True,
            "blocked_in": ["aiocoord/_session/_engine.py:1 spin"],
        },
    ],
    # Queue.get() called with an argument it no longer takes: every get "unknown".
    "workers.no-driver-bug": [
        *op("w0:1", "queue", "get", 1.0, 1.1, "unknown", error="driver bug: TypeError: ..."),
    ],
    # A live registrant's instance is missing at the end, and a closed one's is left.
    "discovery.listed": [
        final("discovery-alive", worker="w0", instances={"w0-keep-0": {"payload": "1"}}),
        final("discovery", instances={"w0-keep-1": "1"}),
    ],
    # A killed registrant's instance outlived its session by far, with no fault around.
    "discovery.dead-gone": [
        *op("w0:1", "discovery", "crash", 1.0, 20.0, id="w0-gone-1", killed=2.0, gone=19.0),
    ],
    "discovery.unique": [
        *op("w0:1", "discovery", "list", 1.0, 1.1, server=["a", "b"], cache=["a", "b", "a"]),
    ],
    "discovery.cache": [final("discovery-cache", worker="w0", server=["a", "b"], view=["a"])],
    # b's term (token 12) began and wrote; then a's (token 10) write was applied.
    "leadership.fenced": [
        *op("w0:1", "leadership", "term", 0.5, 1.5, args={"participant": "a", "token": 10}),
        *op("w1:1", "leadership", "term", 2.0, 5.0, args={"participant": "b", "token": 12}),
        *op(
            "w1:2",
            "leadership",
            "write",
            2.5,
            2.6,
            args={"participant": "b"},
            token=12,
            fenced="applied",
            zxid=0x20,
        ),
        *op(
            "w0:2",
            "leadership",
            "write",
            3.0,
            3.1,
            args={"participant": "a"},
            token=10,
            fenced="applied",
            zxid=0x21,
        ),
    ],
    # a handed over to c, which was queued and stayed, but b led next, with no fault.
    "leadership.handover": leadership_handover("b"),
}

HELD: dict[str, list[Record]] = {
    "mutex.store": [
        write(1, "mutex", "a", 10, "begin"),
        write(2, "mutex", "a", 10, "end"),
        write(3, "mutex", "b", 12, "begin"),
        write(4, "mutex", "c", 9, "end", accepted=False),
        write(5, "mutex", "b", 12, "end"),
    ],
    "mutex.told": [
        write(1, "mutex", "w0:1", 10, "begin"),
        write(2, "mutex", "w1:1", 12, "begin"),
        write(3, "mutex", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "mutex", 1.0, 3.0, "fail", rejected=True, token=10),
    ],
    "mutex.holds": [
        *hold("w0:1", "mutex", 1.0, 3.0),
        *hold("w1:1", "mutex", 3.0, 4.0),
        # Overlapping, but told of its loss: the limit fencing closes.
        *hold("w2:1", "mutex", 1.5, 3.5, "fail"),
    ],
    "rwlock.store": [
        write(1, "rwlock", "r1", 10, "begin", mode="read"),
        write(2, "rwlock", "r2", 11, "begin", mode="read"),
        write(3, "rwlock", "r1", 10, "end", mode="read"),
        write(4, "rwlock", "r2", 11, "end", mode="read"),
        write(5, "rwlock", "w", 12, "begin", mode="write"),
        write(6, "rwlock", "w", 12, "end", mode="write"),
    ],
    "rwlock.told": [
        write(1, "rwlock", "w0:1", 10, "end", accepted=False, mode="read"),
        *hold("w0:1", "rwlock", 1.0, 3.0, "fail", kind="read", rejected=True),
    ],
    "rwlock.holds": [
        *hold("w0:1", "rwlock", 1.0, 3.0, kind="read"),
        *hold("w1:1", "rwlock", 2.0, 4.0, kind="read"),
        *hold("w2:1", "rwlock", 4.0, 5.0, kind="write"),
    ],
    "semaphore.store": [
        write(1, "semaphore", "a", 10, "begin"),
        write(2, "semaphore", "b", 11, "begin"),
        write(3, "semaphore", "c", 12, "begin", evicted=[10]),
        write(4, "semaphore", "a", 10, "end", accepted=False),
    ],
    "semaphore.told": [*hold("w0:1", "semaphore", 1.0, 3.0, "fail", rejected=True)],
    "semaphore.holds": [
        *hold("w0:1", "semaphore", 1.0, 5.0),
        *hold("w1:1", "semaphore", 2.0, 5.0),
        *hold("w2:1", "semaphore", 5.0, 6.0),
    ],
    "leader.store": [
        write(1, "leader", "a", 10, "begin"),
        write(2, "leader", "a", 10, "end"),
        write(3, "leader", "b", 12, "begin"),
        write(4, "leader", "b", 12, "end"),
    ],
    "leader.told": [
        write(1, "leader", "w0:1", 10, "begin", accepted=False),
        *hold("w0:1", "leader", 1.0, 3.0, "fail", kind="term"),
    ],
    "leader.terms": [
        *hold("w0:1", "leader", 1.0, 3.0, kind="term"),
        *hold("w1:1", "leader", 3.1, 4.0, kind="term"),
    ],
    "counter.long": [*increments(COUNTER_LONG, 3, 2), final("counter", path=COUNTER_LONG, value=4)],
    "counter.int": [*increments(COUNTER_INT, 3, 0), final("counter", path=COUNTER_INT, value=3)],
    "counter.bounded": [
        *op("w0:1", "bounded-counter", "add", 1, 2, args={"delta": 1}, post=1),
        *op("w0:2", "bounded-counter", "add", 3, 4, args={"delta": 1}, post=2),
        *op("w0:3", "bounded-counter", "add", 5, 6, "unknown", args={"delta": -1}),
        *op("w0:4", "bounded-counter", "add", 7, 8, "fail", error="bound", args={"delta": 5}),
        final("counter", path=COUNTER_BOUNDED, value=1),
    ],
    "barrier.enter": [
        *barrier_round(1, 0.0, ["w0", "w1", "w2"]),
        *barrier_round(2, 1.0, ["w2", "w0", "w1"]),
        # A slow participant is told the barrier filled well after the others left:
        # it was in, with them, from its start on.
        *barrier_round(3, 2.0, ["w0", "w1", "w2"], passed_at=2.5),
        *op("w0:e4", "barrier", "enter", 3.0, 3.5, "fail", error="timeout", args={"attempt": 4}),
    ],
    "queue.once": [
        *puts("queue", ["a", "b", "c"]),
        *puts("queue", ["d"], "unknown"),
        *gets(["a", "b", "d"]),
        final("queue", path=QUEUE, items=["c"]),
    ],
    "queue.vanish": [
        *puts("queue", ["a", "b"]),
        *gets(["a"]),
        {"type": "note", "t": 5.0, "what": "queue-unknown-take", "queue": QUEUE, "path": "x"},
        final("queue", path=QUEUE, items=[]),
    ],
    "aqueue.delivery": [
        *puts("aqueue", ["a", "b", "c"]),
        *takes("a", 1.0, 2.0, "fail", error="TakeLostError", lost=True),
        *takes("a", 3.0, 4.0),
        *takes("b", 1.0, 2.0, "unknown"),
        final("queue", path=AQUEUE, items=["c"]),
    ],
    "aqueue.taker": [
        *puts("aqueue", ["a"]),
        # A paused taker lost the item (and was told) while another took it.
        *takes("a", 1.0, 3.0, "fail", error="TakeLostError", lost=True),
        *takes("a", 2.0, 2.5),
        final("queue", path=AQUEUE, items=[]),
    ],
    "zookeeper.durable": [
        *op("w0:1", "witness", "create", 1.0, 1.1, node="n-0000000001"),
        *op("w0:2", "witness", "create", 2.0, 2.1, "unknown"),
        final("witness", nodes=["n-0000000001", "n-0000000003"]),
    ],
    "cache.converged": [
        final("cache", worker="w0", equal=True, nodes=3),
        final("cache", worker="w1", equal=True, nodes=3),
    ],
    "orphans.none": [final("orphans", paths={"/chaos/mutex": [], "/chaos/barrier": []})],
    "workers.none-hung": [*op("w0:1", "mutex", "hold", 1.0, 2.0), workers_end()],
    "processes.none-left": [processes([])],
    "semmutex.store": [
        write(1, "semmutex", "a", 10, "begin"),
        write(2, "semmutex", "a", 10, "end"),
        write(3, "semmutex", "b", 12, "begin"),
        write(4, "semmutex", "b", 12, "end"),
    ],
    "semmutex.told": [
        write(1, "semmutex", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "semmutex", 1.0, 3.0, "fail", rejected=True, token=10),
    ],
    "semmutex.holds": [*hold("w0:1", "semmutex", 1.0, 3.0), *hold("w1:1", "semmutex", 3.0, 4.0)],
    # Grants on one node: same zxid, growing grant numbers.
    "mutex-local.store": [
        write(1, "mutex-local", "a", 10 << 16, "begin"),
        write(2, "mutex-local", "a", 10 << 16, "end"),
        write(3, "mutex-local", "b", (10 << 16) + 1, "begin"),
        write(4, "mutex-local", "b", (10 << 16) + 1, "end"),
    ],
    "mutex-local.told": [
        write(1, "mutex-local", "w0:1", 10 << 16, "end", accepted=False),
        *hold("w0:1", "mutex-local", 1.0, 3.0, "fail", rejected=True, token=10 << 16),
    ],
    "mutex-local.holds": [
        *hold("w0:1", "mutex-local", 1.0, 3.0),
        *hold("w0:2", "mutex-local", 3.0, 4.0),
    ],
    # The lone holder of the second lock writes only after the MultiLock holder's end.
    "multilock.store": [
        write(1, "multi-a", "a", 10, "begin"),
        write(2, "multi-b", "a", 20, "begin"),
        write(3, "multi-b", "a", 20, "end"),
        write(4, "multi-a", "a", 10, "end"),
        write(5, "multi-b", "c", 22, "begin"),
        write(6, "multi-b", "c", 22, "end"),
    ],
    "multilock.told": [
        write(1, "multi-a", "w0:1", 10, "begin", accepted=False),
        *hold("w0:1", "multilock", 1.0, 3.0, "fail", kind="both"),
    ],
    "multilock.holds": [
        *hold("w0:1", "multilock", 1.0, 3.0, kind="both"),
        *hold("w1:1", "multilock", 3.0, 4.0, kind="b-only"),
    ],
    # b takes its own unexpired lease again: the same node, the same token.
    "lease.store": [
        write(1, "lease", "a", 10, "begin"),
        write(2, "lease", "a", 10, "end"),
        write(3, "lease", "b", 12, "begin"),
        write(4, "lease", "a", 10, "end", accepted=False),
        write(5, "lease", "b", 12, "end"),
        write(6, "lease", "b2", 12, "begin"),
        write(7, "lease", "b2", 12, "end"),
    ],
    "lease.told": [
        write(1, "lease", "w0:1", 10, "end", accepted=False),
        *hold("w0:1", "lease", 1.0, 3.0, "fail", rejected=True, token=10),
    ],
    "lease.holds": [
        *hold("w0:1", "lease", 1.0, 3.0, args={"policy": "session"}),
        *hold("w1:1", "lease", 3.0, 4.0),
        # Overlapping, but lapsed and told so.
        *hold("w2:1", "lease", 2.0, 3.5, "fail"),
    ],
    "latch.store": [
        write(1, "latch", "a", 10, "begin"),
        write(2, "latch", "a", 10, "end"),
        write(3, "latch", "b", 12, "begin"),
        write(4, "latch", "b", 12, "end"),
    ],
    "latch.told": [
        write(1, "latch", "w0:1", 10, "begin", accepted=False),
        *term("w0:1", 1.0, 3.0, "fail"),
    ],
    "latch.terms": [*term("w0:1", 1.0, 3.0), *term("w1:1", 3.1, 4.0)],
    "latch.handover": [
        # Told of the loss at t=1.5, before w1 wrote at t=2.
        *term("w0:1", 1.0, 1.5, "fail"),
        *term("w1:1", 1.8, 2.5),
        write(1, "latch", "w1:1", 12, "begin", t=2.0),
        write(2, "latch", "w1:1", 12, "end", t=2.2),
        # A session-policy latch cut off from ZooKeeper may learn late: excused.
        *term("w2:1", 1.0, 3.0, "fail", policy="session"),
    ],
    "sharedcount.cas": [
        *sets(
            ("w0:1", "ok", 0, 0, 11),
            ("w1:1", "fail", 0, 0, 21),
            ("w0:2", "unknown", 1, 11, 12),
            # Made from the write whose outcome was unknown: it did apply.
            ("w1:2", "ok", 2, 12, 22),
        ),
        final("shared-count", value=22, version=3),
    ],
    "sharedcount.final": [
        *sets(("w0:1", "ok", 0, 0, 11), ("w1:1", "unknown", 1, 11, 21)),
        final("shared-count", value=21, version=2),
    ],
    "sharded.bounds": [
        *sharded("w0:1", "get", total=SHARDED_UPPER),
        *sharded("w0:2", "add", "fail", delta=1, pre=SHARDED_UPPER),
        *sharded("w0:3", "add", "fail", delta=-1, pre=0),
        final("sharded", total=3, shards=[[2, 2], [1, 2]]),
    ],
    "sharded.total": [
        *sharded("w0:1", "add", delta=1),
        *sharded("w0:2", "add", delta=1),
        *sharded("w0:3", "add", "unknown", delta=-1),
        *sharded("w0:4", "add", "fail", delta=1, pre=SHARDED_UPPER),
        final("sharded", total=1, shards=[[1, 2], [0, 2]]),
    ],
    "gate.released": [
        *gate("w0:1", "set", 1.0, 1.1),
        *gate("w1:1", "wait", 1.5, 3.2),  # released once the remove had begun
        *gate("w1:2", "wait", 1.6, 2.6, "fail"),  # timed out
        *gate("w1:3", "wait", 1.1 + STALE_READ / 2, 1.2 + STALE_READ / 2),  # a lagging member
        *gate("w0:2", "remove", 3.0, 3.1),
        *gate("w1:4", "wait", 3.5, 3.6),  # open
    ],
    "pqueue.once": [
        *puts("pqueue", ["a", "b", "c"]),
        *gets(["a", "b"], recipe="pqueue"),
        final("queue", path=PQUEUE, items=["c"]),
    ],
    "pqueue.vanish": [
        *puts("pqueue", ["a", "b"]),
        *gets(["a"], recipe="pqueue"),
        final("queue", path=PQUEUE, items=["b"]),
    ],
    "dqueue.delivery": [
        *puts("dqueue", ["a", "b"]),
        *takes("a", 1.0, 2.0, "fail", "dqueue", error="TakeLostError", lost=True),
        *takes("a", 3.0, 4.0, recipe="dqueue"),
        final("queue", path=DQUEUE, items=["b"]),  # not due yet
    ],
    "dqueue.taker": [
        *puts("dqueue", ["a"]),
        *takes("a", 1.0, 3.0, "fail", "dqueue", error="TakeLostError", lost=True),
        *takes("a", 2.0, 2.5, recipe="dqueue"),
        final("queue", path=DQUEUE, items=[]),
    ],
    "dqueue.due": [
        *op("p:a", "dqueue", "put", 0.0, 0.1, args={"item": "a", "delay": 1.0, "due_ms": 5000}),
        *op("p:b", "dqueue", "put", 0.0, 0.1, args={"item": "b", "delay": 0.0, "due_ms": 4000}),
        *takes("a", 1.0, 2.0, recipe="dqueue", wall_ms=5000),
        *takes("b", 1.0, 2.0, recipe="dqueue", wall_ms=3998),  # rounding
        final("queue", path=DQUEUE, items=[]),
    ],
    "idqueue.once": [
        *puts("idqueue", ["a", "b"]),
        *gets(["a"], recipe="idqueue"),
        final("queue", path=IDQUEUE, items=["b"]),
    ],
    "idqueue.vanish": [
        *op("p:a", "idqueue", "put", 0.0, 0.1, args={"item": "a", "id": "x"}),
        *op("p:b", "idqueue", "put", 0.0, 0.1, args={"item": "b", "id": "y"}),
        *op("r:x", "idqueue", "remove", 1.0, 1.1, args={"id": "x"}, removed=1),
        final("queue", path=IDQUEUE, items=["b"]),
    ],
    "workers.no-stray-cancel": [
        *op("w0:1", "dqueue", "take", 1.0, 2.0, "fail", error="empty"),
        *op("w0:2", "mutex", "hold", 1.0, 46.0, "unknown", error="watchdog: still running"),
    ],
    # The host did not run w0; w1's loop was busy for a second.
    "workers.loop-free": [
        {"type": "stall", "worker": "w0", "from": 1.0, "to": 8.0, "frozen": 7.0},
        {"type": "stall", "worker": "w1", "from": 2.0, "to": 3.0, "frozen": 0.0},
    ],
    "workers.no-driver-bug": [
        *op("w0:1", "queue", "get", 1.0, 1.1, "unknown", error="ConnectionLossError"),
    ],
    "nodecache.converged": [final("node-cache", worker="w0", equal=True, nodes=1)],
    "childrencache.converged": [final("children-cache", worker="w1", equal=True, nodes=3)],
    "partition.store": [
        write(1, "partition-p0", "w0:1", 10, "begin"),
        write(2, "partition-p0", "w0:1", 10, "end"),
        write(3, "partition-p0", "w1:1", 12, "begin"),
        write(4, "partition-p0", "w1:1", 12, "end"),
    ],
    "partition.told": [
        write(1, "partition-p1", "w0:1", 12, "begin"),
        write(2, "partition-p1", "w1:1", 10, "begin", accepted=False),
        *op("w1:1", "partition", "write", 1.0, 2.0, "fail", token=10, rejected=True, lost=True),
    ],
    "partition.fenced": [
        *op(
            "w0:1",
            "partition",
            "write",
            1.0,
            2.0,
            args={"item": "p0"},
            token=10,
            fenced="applied",
            zxid=0x20,
        ),
        *op(
            "w1:1",
            "partition",
            "write",
            1.0,
            2.0,
            args={"item": "p0"},
            token=12,
            fenced="applied",
            zxid=0x21,
        ),
        *op(
            "w0:2",
            "partition",
            "write",
            1.0,
            2.0,
            "fail",
            args={"item": "p0"},
            token=10,
            fenced="refused",
        ),
    ],
    "partition.owned": [
        final(
            "partition-owned",
            worker="w0",
            members={"w0-keep-0": {"owned": ["p0", "p1", "p2"], "stable": True}},
        ),
        final(
            "partition-owned",
            worker="w1",
            members={"w1-keep-0": {"owned": ["p3", "p4", "p5"], "stable": True}},
        ),
        final(
            "partitions",
            claims={
                "p0": "w0-keep-0",
                "p1": "w0-keep-0",
                "p2": "w0-keep-0",
                "p3": "w1-keep-0",
                "p4": "w1-keep-0",
                "p5": "w1-keep-0",
            },
        ),
    ],
    "group.members": [
        final("group-alive", worker="w0", members={"w0-keep-0": {"data": "61", "sure": True}}),
        # Its last update failed: the server may hold the data from before.
        final("group-alive", worker="w1", members={"w1-keep-0": {"data": "63", "sure": False}}),
        final("group", members={"w0-keep-0": "61", "w1-keep-0": "62"}),
    ],
    "discovery.listed": [
        final("discovery-alive", worker="w0", instances={"w0-keep-0": {"payload": "1"}}),
        # Its last update failed: the server may hold the payload from before.
        final(
            "discovery-alive", worker="w1", instances={"w1-keep-0": {"payload": "3", "sure": False}}
        ),
        final("discovery", instances={"w0-keep-0": "1", "w1-keep-0": "2"}),
        *op(
            "w0:1",
            "discovery",
            "crash",
            1.0,
            8.0,
            id="w0-gone-1",
            registered=1.5,
            visible=True,
            killed=2.0,
            gone=6.1,
        ),
    ],
    "discovery.dead-gone": [
        *op("w0:1", "discovery", "crash", 1.0, 8.0, id="w0-gone-1", killed=2.0, gone=6.1),
        # A leader change in between restarts every session's clock: excused.
        *op("w1:1", "discovery", "crash", 10.0, 30.0, id="w1-gone-1", killed=11.0, gone=25.0),
        {"type": "fault", "kind": "kill-leader", "t": 12.0, "end": 14.0},
        # Never registered: nothing to judge.
        *op("w1:2", "discovery", "crash", 31.0, 32.0, "fail", id="w1-gone-2"),
        # Outlived the worker's watch while leaders changed and a member paused: excused,
        # as it is gone by the end reading.
        *op("w2:1", "discovery", "crash", 40.0, 64.0, "unknown", id="w2-gone-1", killed=41.0),
        {"type": "fault", "kind": "pause-member", "t": 50.0, "end": 55.0},
        final("discovery", instances={"w0-keep-0": "1"}),
    ],
    "discovery.unique": [
        *op("w0:1", "discovery", "list", 1.0, 1.1, server=["a", "b"], cache=["a", "b"]),
        *op("w0:2", "discovery", "list", 2.0, 2.1, "fail", cache=["b"]),
        final("discovery-cache", worker="w0", server=["b"], view=["b"]),
    ],
    "discovery.cache": [final("discovery-cache", worker="w0", server=["a", "b"], view=["b", "a"])],
    "leadership.fenced": [
        *op("w0:1", "leadership", "term", 0.5, 1.5, args={"participant": "a", "token": 10}),
        *op(
            "w0:2",
            "leadership",
            "write",
            1.0,
            1.1,
            args={"participant": "a"},
            token=10,
            fenced="applied",
            zxid=0x20,
        ),
        *op("w1:1", "leadership", "term", 2.0, 5.0, args={"participant": "b", "token": 12}),
        *op(
            "w1:2",
            "leadership",
            "write",
            2.5,
            2.6,
            args={"participant": "b"},
            token=12,
            fenced="applied",
            zxid=0x21,
        ),
        # a's late write, sent once b led: refused.
        *op(
            "w0:3",
            "leadership",
            "write",
            3.0,
            3.1,
            "fail",
            args={"participant": "a"},
            token=10,
            fenced="refused",
        ),
    ],
    "leadership.handover": leadership_handover("c"),
}

NAMES = [check.name for check in CHECKS]


@pytest.mark.parametrize("name", NAMES)
def test_each_checker_fails_a_history_that_breaks_its_invariant(name: str) -> None:
    assert name in BROKEN, f"no history breaks {name}: add one"
    result = verdict(name, BROKEN[name])
    assert not result.passed, result
    assert result.problems


@pytest.mark.parametrize("name", NAMES)
def test_each_checker_passes_a_history_that_keeps_its_invariant(name: str) -> None:
    assert name in HELD, f"no history keeps {name}: add one"
    result = verdict(name, HELD[name])
    assert result.passed, result.problems
    assert result.checked > 0


def test_a_lower_counter_value_than_the_successes_fails() -> None:
    result = verdict(
        "counter.long",
        [*increments(COUNTER_LONG, 3, 0), final("counter", path=COUNTER_LONG, value=2)],
    )
    assert not result.passed


def test_a_missing_final_value_fails_rather_than_passes() -> None:
    assert not verdict("counter.long", increments(COUNTER_LONG, 1, 0)).passed
    assert not verdict("queue.vanish", puts("queue", ["a"])).passed


def test_a_token_used_by_two_holders_fails() -> None:
    result = verdict(
        "mutex.store", [write(1, "mutex", "a", 10, "begin"), write(2, "mutex", "b", 10, "begin")]
    )
    assert any("two holders" in p for p in result.problems)


def test_an_item_whose_put_failed_must_not_be_taken() -> None:
    result = verdict(
        "queue.once",
        [*puts("queue", ["a"], "fail"), *gets(["a"]), final("queue", path=QUEUE, items=[])],
    )
    assert not result.passed


def test_a_committed_item_left_in_the_queue_fails() -> None:
    result = verdict(
        "aqueue.delivery",
        [*puts("aqueue", ["a"]), *takes("a", 1.0, 2.0), final("queue", path=AQUEUE, items=["a"])],
    )
    assert not result.passed


def test_a_worker_killed_at_stop_fails_the_hang_check() -> None:
    assert not verdict("workers.none-hung", [workers_end(w1="did not stop: killed")]).passed


def test_an_operation_that_never_completed_fails_the_hang_check() -> None:
    # Its driver ended without recording how (a CancelledError took the task down).
    result = verdict("workers.none-hung", [*op("w2:9", "dqueue", "take", 1.0, None), workers_end()])
    assert any("never completed" in p for p in result.problems), result.problems


def test_a_driver_cancelled_before_stop_fails_the_hang_check() -> None:
    ended = workers_end(**{"w2/dqueue-take-1": "crashed: cancelled, though nobody cancelled it"})
    assert not verdict("workers.none-hung", [ended]).passed


def test_a_checker_that_crashes_fails() -> None:
    broken_record = write(1, "mutex", "a", 10, "begin")
    del broken_record["token"]
    assert not verdict("mutex.store", [broken_record]).passed


def test_a_check_without_anything_to_look_at_is_a_gap() -> None:
    result = verdict("mutex.told", [])
    assert result.passed and result.checked == 0


def test_a_shared_count_set_from_a_value_no_write_left_fails() -> None:
    result = verdict(
        "sharedcount.cas",
        [
            *sets(("w0:1", "ok", 0, 0, 11), ("w1:1", "fail", 0, 0, 21), ("w0:2", "ok", 1, 21, 12)),
            final("shared-count", value=12, version=2),
        ],
    )
    assert any("wrote 11 there" in p for p in result.problems), result.problems


def test_a_shared_count_success_newer_than_the_final_version_fails() -> None:
    result = verdict(
        "sharedcount.final",
        [
            *sets(("w0:1", "ok", 0, 0, 11), ("w0:2", "ok", 1, 11, 12)),
            final("shared-count", value=11, version=1),
        ],
    )
    assert not result.passed


def test_a_sharded_refusal_while_there_was_room_fails() -> None:
    result = verdict(
        "sharded.bounds",
        [
            *sharded("w0:1", "add", "fail", delta=1, pre=SHARDED_UPPER - 1),
            final("sharded", total=3, shards=[[2, 2], [1, 2]]),
        ],
    )
    assert any("there was room" in p for p in result.problems), result.problems


def test_sharded_shards_whose_quotas_lose_room_fail() -> None:
    result = verdict("sharded.bounds", [final("sharded", total=2, shards=[[1, 1], [1, 2]])])
    assert any("quotas" in p for p in result.problems), result.problems


def test_a_group_member_the_server_lacks_fails() -> None:
    result = verdict(
        "group.members",
        [
            final("group-alive", worker="w0", members={"w0-keep-0": {"data": "61", "sure": True}}),
            final("group", members={}),
        ],
    )
    assert not result.passed


def test_a_group_member_publishing_other_data_fails() -> None:
    result = verdict(
        "group.members",
        [
            final("group-alive", worker="w0", members={"w0-keep-0": {"data": "61", "sure": True}}),
            final("group", members={"w0-keep-0": "62"}),
        ],
    )
    assert not result.passed


def test_a_group_not_read_at_the_end_fails() -> None:
    assert not verdict("group.members", [final("group", error="TimeoutError()")]).passed


def test_an_enter_given_up_with_its_session_may_still_count_for_the_others() -> None:
    """w2's client declared its session lost and gave up at t=1.0; the server may
    keep that session, and w2's node, up to a session timeout longer, so w0 and
    w1 passing at t=1.2 with it counted is no violation; so is one given up on a
    timeout while its client was cut off (its node's delete waits for
    ZooKeeper). Given up on a timeout while connected, w2's node was gone: the
    two passed alone."""
    check = next(c for c in CHECKS if c.name == "barrier.enter")

    def judged(error: str) -> Verdict:
        records = [
            *op("w2:e1", "barrier", "enter", 0.0, 1.0, "fail", error=error, args={"attempt": 1}),
            *op("w0:e1", "barrier", "enter", 1.1, 1.2, args={"attempt": 1}),
            *op("w1:e1", "barrier", "enter", 1.1, 1.2, args={"attempt": 1}),
            *op("w0:l1", "barrier", "leave", 1.3, 1.4, args={"attempt": 1}),
            *op("w1:l1", "barrier", "leave", 1.3, 1.4, args={"attempt": 1}),
        ]
        run = {"type": "run", "t": 0.0, "members": 3, "session_timeout": 4.0}
        return run_checks(build_history([run, *records]), [check])[0]

    lost = (
        "BarrierBrokenError: barrier '/chaos/barrier' broken: "
        "the session owning our node was lost while entering"
    )
    assert judged(lost).passed
    assert judged("timeout-disconnected").passed
    assert not judged("timeout").passed


def test_an_enter_that_failed_while_cut_off_may_still_count_for_the_others() -> None:
    """Any enter that gives up while its client is disconnected (an error such
    as NoConnectionError, or cancelled at the end of the run), not only a
    timeout, leaves its node to a background delete that lands once ZooKeeper
    is back: w0 and w1 passing with w2's node counted is no violation. The
    same failure while connected deleted the node before returning, and so
    did an enter whose driver lost track of it only after its cleanup ran
    (status unknown) within a session timeout: two passing alone breaks it."""
    check = next(c for c in CHECKS if c.name == "barrier.enter")

    def judged(error: str, connected: bool, status: str = "fail", at: float = 1.1) -> Verdict:
        failed = op(
            "w2:e1",
            "barrier",
            "enter",
            0.0,
            1.0,
            status,
            error=error,
            args={"attempt": 1},
            connected=connected,
        )
        records = [
            *failed,
            *op("w0:e1", "barrier", "enter", at, at + 0.1, args={"attempt": 1}),
            *op("w1:e1", "barrier", "enter", at, at + 0.1, args={"attempt": 1}),
            *op("w0:l1", "barrier", "leave", at + 0.2, at + 0.3, args={"attempt": 1}),
            *op("w1:l1", "barrier", "leave", at + 0.2, at + 0.3, args={"attempt": 1}),
        ]
        run = {"type": "run", "t": 0.0, "members": 3, "session_timeout": 4.0}
        return run_checks(build_history([run, *records]), [check])[0]

    no_connection = "NoConnectionError: no connection to ZooKeeper within 4 s"
    assert judged(no_connection, connected=False).passed
    assert judged("stopped", connected=False).passed
    assert judged("timeout", connected=False).passed
    assert not judged(no_connection, connected=True).passed
    assert not judged("stopped", connected=True).passed
    assert not judged("timeout", connected=True).passed
    # Excused for one session timeout, not for ever.
    assert not judged(no_connection, connected=False, at=5.5).passed
    assert judged("watchdog", connected=True, status="unknown").passed
    assert not judged("watchdog", connected=True, status="unknown", at=5.5).passed


def test_a_latch_paused_while_leading_is_excused_from_the_handover() -> None:
    pause = {"type": "fault", "t": 1.2, "end": 7.0, "kind": "pause-worker", "worker": "w0"}
    records = [
        *term("w0:1", 1.0, 7.5, "fail"),
        *term("w1:1", 6.0, 6.5),
        write(1, "latch", "w1:1", 12, "begin", t=6.1),
    ]
    assert not verdict("latch.handover", records).passed
    assert verdict("latch.handover", [*records, pause]).passed


def test_a_latch_whose_process_stalled_while_leading_is_excused_from_the_handover() -> None:
    """Stop 39's CI run: w1 led from t=18.98; its connection was suspended at t=19.17
    (the latch published False then, and logged it), and the process then ran
    nothing until t=26.38, so its driver recorded the loss only then; w2 led and
    wrote at t=23.68. The worker's stall watch recorded the stall; a stall that
    does not overlap the term excuses nothing."""
    records = [
        *term("w1:1", 18.98, 26.38, "fail"),
        *term("w2:1", 23.6, 23.9, token=12),
        write(1, "latch", "w2:1", 12, "begin", t=23.68),
    ]
    stall = {"type": "stall", "worker": "w1", "from": 19.17, "to": 26.38, "frozen": 7.2}
    elsewhere = {**stall, "worker": "w0"}
    before = {**stall, "from": 10.0, "to": 12.0}
    assert not verdict("latch.handover", records).passed
    assert verdict("latch.handover", [*records, stall]).passed
    assert not verdict("latch.handover", [*records, elsewhere]).passed
    assert not verdict("latch.handover", [*records, before]).passed


def test_a_loop_blocked_while_its_process_ran_fails_the_run() -> None:
    """A stall of the whole process (the host did not run it) is excused; a loop
    that ran nothing for two seconds while its process ran is a call that never
    yields, in aiocoord or in the driver (chaos seed 5: the leadership driver
    waited on an event already set, 9.6 s), and fails."""
    base = {"type": "stall", "worker": "w1", "from": 3.0, "to": 12.0}
    host = {**base, "frozen": 8.5}
    short = {**base, "to": 4.5, "frozen": 0.0}
    driver = {**base, "frozen": 0.0, "blocked_in": ["chaos/_leaders.py:163 take_part"]}
    ours = {**driver, "in_library": True, "blocked_in": ["aiocoord/_x.py:1 spin"]}
    assert verdict("workers.loop-free", [host, short]).passed
    # The nemesis paused w1 (its stall watch may not have seen its own thread stop).
    pause = {"type": "fault", "t": 2.5, "end": 12.5, "kind": "pause-worker", "worker": "w1"}
    assert verdict("workers.loop-free", [driver, pause]).passed
    failed = verdict("workers.loop-free", [driver, ours])
    assert len(failed.problems) == 2
    assert "in the worker's own code (chaos/_leaders.py:163 take_part)" in failed.problems[0]
    assert "in aiocoord (aiocoord/_x.py:1 spin)" in failed.problems[1]


def test_an_earlier_leaders_late_write_does_not_count_against_the_next_term() -> None:
    """Chaos seed 11: w1 led (token 10) and was paused past its session; w3 led
    (token 12) from t=5.0; w1, resumed, wrote its `end` at t=5.3, before w3 wrote
    (the store accepted it: nobody newer had written), and was told of its loss
    at t=5.4. w3's term learned nothing late; a later leader writing inside it
    still does."""
    pause = {"type": "fault", "t": 1.2, "end": 5.2, "kind": "pause-worker", "worker": "w1"}
    records = [
        pause,
        *term("w1:1", 1.0, 5.4, "fail", policy="session", token=10),
        write(1, "latch", "w1:1", 10, "begin", t=1.1),
        write(2, "latch", "w1:1", 10, "end", t=5.3),
        *term("w3:1", 5.0, 6.5, token=12),
        write(3, "latch", "w3:1", 12, "begin", t=6.0),
        write(4, "latch", "w3:1", 12, "end", t=6.1),
    ]
    assert verdict("latch.handover", records).passed
    later = [
        *term("w2:1", 6.2, 7.0, token=14),
        write(5, "latch", "w2:1", 14, "begin", t=6.3),
    ]
    assert not verdict("latch.handover", [*records, *later]).passed


def test_a_gate_wait_long_after_the_set_is_judged() -> None:
    records = [
        *gate("w0:1", "set", 1.0, 1.1),
        *gate("w1:1", "wait", 1.1 + 2 * STALE_READ, 1.2 + 2 * STALE_READ),
        *gate("w0:2", "remove", 3.0, 3.1),
    ]
    assert not verdict("gate.released", records).passed


def test_a_gate_set_whose_outcome_is_unknown_proves_nothing() -> None:
    records = [
        *gate("w0:1", "set", 1.0, 1.1, "unknown"),
        *gate("w1:1", "wait", 1.5, 2.0),
        *gate("w0:2", "remove", 3.0, 3.1),
    ]
    assert verdict("gate.released", records).passed


def test_a_gate_left_set_at_the_end_holds_every_later_wait() -> None:
    records = [*gate("w0:1", "set", 1.0, 1.1), *gate("w1:1", "wait", 5.0, 5.1)]
    assert not verdict("gate.released", records).passed


def test_an_id_queue_item_put_after_the_remove_is_not_excused() -> None:
    records = [
        *op("r:x", "idqueue", "remove", 1.0, 1.1, args={"id": "x"}, removed=0),
        *op("p:a", "idqueue", "put", 2.0, 2.1, args={"item": "a", "id": "x"}),
        final("queue", path=IDQUEUE, items=[]),
    ]
    assert not verdict("idqueue.vanish", records).passed


def test_the_end_state_reads_curator_queue_items() -> None:
    assert unwrap(wrap_item(b"w0-put-7")) == b"w0-put-7"
    assert unwrap(b"qn-raw") == b"qn-raw"


async def test_the_worker_records_a_stray_cancellation_and_goes_on(tmp_path: Path) -> None:
    history = tmp_path / "w0.jsonl"
    config = WorkerConfig("w0", "", 0, str(history), time.monotonic(), seed=1, members=2)
    worker = Worker(config)

    async def stray(_op_id: str) -> Outcome:
        raise asyncio.CancelledError  # a recipe's own cancellation, escaping

    running = asyncio.Event()

    async def slow(_op_id: str) -> Outcome:
        running.set()
        await asyncio.sleep(30)
        return Outcome("ok")

    try:
        outcome = await worker.op("dqueue", "take", stray)
        assert outcome.status == "unknown"
        assert (outcome.error or "").startswith(STRAY_CANCEL)
        cancelled = asyncio.ensure_future(worker.op("mutex", "hold", slow))
        await running.wait()
        cancelled.cancel()  # a real cancellation is obeyed
        with pytest.raises(asyncio.CancelledError):
            await cancelled
    finally:
        worker.history.close()
    check = next(c for c in CHECKS if c.name == "workers.no-stray-cancel")
    assert not run_checks(build_history(read_records([history])), [check])[0].passed


async def test_the_worker_records_a_driver_bug_and_a_check_fails_on_it(tmp_path: Path) -> None:
    history = tmp_path / "w0.jsonl"
    config = WorkerConfig("w0", "", 0, str(history), time.monotonic(), seed=1, members=2)
    worker = Worker(config)

    async def wrong_call(_op_id: str) -> Outcome:
        raise TypeError("get() takes 1 positional argument but 2 were given")

    try:
        outcome = await worker.op("queue", "get", wrong_call)
    finally:
        worker.history.close()
    assert outcome.status == "unknown"
    assert (outcome.error or "").startswith(DRIVER_BUG)
    check = next(c for c in CHECKS if c.name == "workers.no-driver-bug")
    assert not run_checks(build_history(read_records([history])), [check])[0].passed


# --- the fenced store ----------------------------------------------------------------------


def _store() -> tuple[FencedStore, list[Record]]:
    records: list[Record] = []
    return FencedStore(records.append), records


def _write(store: FencedStore, **request: Any) -> bool:
    request.setdefault("holder", "h")
    request.setdefault("op", "o")
    return bool(asyncio.run(store.write(request))["ok"])


def test_the_store_turns_away_a_token_below_the_highest_accepted() -> None:
    store, records = _store()
    mutex = {"resource": "m", "kind": "exclusive"}
    assert _write(store, **mutex, token=10, action="begin")
    assert _write(store, **mutex, token=12, action="begin")
    assert not _write(store, **mutex, token=10, action="end")
    assert _write(store, **mutex, token=12, action="end")
    assert [r["accepted"] for r in records] == [True, True, False, True]
    assert [r["serial"] for r in records] == [1, 2, 3, 4]


def test_the_store_lets_readers_share_and_fences_them_from_writers() -> None:
    store, _records = _store()
    rw = {"resource": "rw", "kind": "rw"}
    assert _write(store, **rw, token=10, action="begin", mode="read")
    assert _write(store, **rw, token=11, action="begin", mode="read")
    assert _write(store, **rw, token=10, action="end", mode="read")
    assert _write(store, **rw, token=13, action="begin", mode="write")
    assert not _write(store, **rw, token=11, action="end", mode="read")
    assert not _write(store, **rw, token=12, action="begin", mode="write")


def test_the_store_evicts_a_lease_holder_whose_node_is_gone() -> None:
    store, records = _store()

    async def validate(leases: list[tuple[int, str]]) -> set[int]:
        return {token for token, _node in leases if token != 10}

    store.validate = validate
    sem = {"resource": "s", "kind": "semaphore", "limit": 2}
    assert _write(store, **sem, token=10, action="begin", node="/s/leases/lease-1")
    assert _write(store, **sem, token=11, action="begin", node="/s/leases/lease-2")
    assert _write(store, **sem, token=12, action="begin", node="/s/leases/lease-3")
    assert records[-1]["evicted"] == [10] and "over_limit" not in records[-1]
    assert not _write(store, **sem, token=10, action="end")
    assert _write(store, **sem, token=11, action="end")


def test_the_store_records_one_lease_too_many_when_every_node_is_there() -> None:
    store, records = _store()

    async def validate(leases: list[tuple[int, str]]) -> set[int]:
        return {token for token, _node in leases}

    store.validate = validate
    sem = {"resource": "semaphore", "kind": "semaphore", "limit": 1}
    assert _write(store, **sem, token=10, action="begin", node="/s/leases/lease-1")
    assert _write(store, **sem, token=11, action="begin", node="/s/leases/lease-2")
    assert records[-1]["over_limit"] == [10]
    history = build_history(records)
    check = next(c for c in CHECKS if c.name == "semaphore.store")
    assert not run_checks(history, [check])[0].passed


def test_the_store_refuses_a_malformed_request() -> None:
    store, _records = _store()
    with pytest.raises(ValueError):
        _write(store, resource="m", kind="exclusive", token=1, action="write")


# --- the schedule -------------------------------------------------------------------------------


def test_the_schedule_is_the_same_for_the_same_seed() -> None:
    assert schedule(5, 180, 4.0) == schedule(5, 180, 4.0)
    assert schedule(5, 180, 4.0) != schedule(6, 180, 4.0)


def test_a_short_run_injects_every_kind_of_fault_in_time() -> None:
    faults = schedule(5, 44, 4.0)
    assert {f.kind for f in faults} == set(FAULT_KINDS)
    assert all(f.at + f.length <= 44 for f in faults)
    assert all(b.at >= a.at + a.length for a, b in itertools.pairwise(faults))


def test_the_store_turns_away_a_newcomer_whose_lease_node_is_gone() -> None:
    store, records = _store()

    async def validate(leases: list[tuple[int, str]]) -> set[int]:
        return {token for token, _node in leases if token != 9}

    store.validate = validate
    sem = {"resource": "semaphore", "kind": "semaphore", "limit": 2}
    assert _write(store, **sem, token=10, action="begin", node="/s/leases/lease-2")
    assert _write(store, **sem, token=11, action="begin", node="/s/leases/lease-3")
    # A holder paused since its grant comes in late: it, not the others, is out.
    assert not _write(store, **sem, token=9, action="begin", node="/s/leases/lease-1")
    assert records[-1]["evicted"] == [9] and "over_limit" not in records[-1]
    assert _write(store, **sem, token=10, action="end")


async def test_a_store_exchange_cut_short_does_not_answer_the_next_request() -> None:
    released = asyncio.Event()

    async def slow(leases: list[tuple[int, str]]) -> set[int]:
        await released.wait()
        return {token for token, _node in leases}

    store, _records = _store()
    store.validate = slow
    server = StoreServer(store)
    await server.start()
    client = StoreClient(server.port, "h")
    try:
        sem: dict[str, Any] = {"limit": 1, "op": "o", "node": "/n"}
        assert (await client.write("semaphore", "semaphore", 1, "begin", **sem))[0]
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):  # a holder's block cancelled mid-write
                await client.write("semaphore", "semaphore", 2, "begin", **sem)
        released.set()
        accepted, reason = await client.write("mutex", "exclusive", 5, "begin", op="p")
        assert (accepted, reason) == (True, "")
        assert not (await client.write("mutex", "exclusive", 4, "end", op="p"))[0]
    finally:
        client.close()
        await server.aclose()


def test_a_holder_paused_past_its_session_is_left_to_the_fenced_store() -> None:
    # w1 finished its writes, was paused, and thought it led until it woke up:
    # a limit of any recipe (nobody can tell a paused process), not a violation.
    pause = {"type": "fault", "t": 2.0, "end": 8.0, "kind": "pause-worker", "worker": "w1"}
    records = [
        *hold("w1:1", "leader", 1.0, 8.0, kind="term"),
        *hold("w2:1", "leader", 6.0, 6.5, kind="term"),
        pause,
    ]
    result = verdict("leader.terms", records)
    assert result.passed, result.problems
    assert result.counts["excused (session policy or paused)"] == 1
    assert not verdict("leader.terms", records[:-1]).passed


def test_a_session_policy_holder_is_left_to_the_fenced_store() -> None:
    records = [
        *hold("w1:1", "mutex", 1.0, 8.0, args={"policy": "session"}),
        *hold("w2:1", "mutex", 6.0, 6.5, args={"policy": "standard"}),
    ]
    assert verdict("mutex.holds", records).passed


def test_a_registrant_listed_only_after_it_said_it_registered_fails() -> None:
    result = verdict(
        "discovery.listed",
        [
            final("discovery", instances={}),
            *op("w0:1", "discovery", "crash", 1.0, 8.0, id="w0-gone-1", registered=1.5,
                visible=False, killed=2.0, gone=6.1),
        ],
    )  # fmt: skip
    assert any("did not list it" in p for p in result.problems), result.problems


def test_a_registrant_not_gone_within_the_watch_and_no_fault_around_fails() -> None:
    result = verdict(
        "discovery.dead-gone",
        [*op("w0:1", "discovery", "crash", 1.0, 24.0, "unknown", id="w0-gone-1", killed=2.0)],
    )
    assert any("still listed" in p for p in result.problems), result.problems


def test_a_registrant_late_to_go_while_its_observer_stalled_is_excused() -> None:
    """The observer's own stall (its loop ran nothing) delays its watch as a pause
    would; another worker's stall does not."""
    crash = op("w0:1", "discovery", "crash", 1.0, 24.0, "unknown", id="w0-gone-1", killed=2.0)
    stall = {"type": "stall", "worker": "w0", "from": 5.0, "to": 12.0}
    assert verdict("discovery.dead-gone", [*crash, stall]).passed
    assert not verdict("discovery.dead-gone", [*crash, {**stall, "worker": "w1"}]).passed


def test_a_registrant_late_to_go_while_its_observers_client_was_cut_off_is_excused() -> None:
    """A stall-client fault on the observer's own client hides the deletion from
    it until the network comes back; the same fault on another worker does not."""
    crash = op("w0:1", "discovery", "crash", 1.0, 24.0, "unknown", id="w0-gone-1", killed=2.0)
    fault = {"type": "fault", "t": 5.0, "end": 11.0, "kind": "stall-client", "ok": True,
             "worker": "w0", "client": 0, "length": 5.2}  # fmt: skip
    assert verdict("discovery.dead-gone", [*crash, fault]).passed
    assert not verdict("discovery.dead-gone", [*crash, {**fault, "worker": "w1"}]).passed


def test_a_killed_registrant_still_listed_at_the_end_fails() -> None:
    result = verdict("discovery.dead-gone", [final("discovery", instances={"w0-gone-3": "1"})])
    assert any("still listed" in p for p in result.problems), result.problems


def test_a_ready_left_by_a_round_the_stop_cut_short_is_no_orphan() -> None:
    """The stop cancelled every enter of a round that had just filled: its
    persistent ``ready`` stays with nobody to leave (the recipe's next round
    removes it). Without such an enter, or beside any other node, it is an
    orphan."""

    def judged(error: str, children: list[str]) -> Verdict:
        return verdict(
            "orphans.none",
            [
                *op("w0:e1", "barrier", "enter", 1.0, 2.0, "fail", error=error),
                final("orphans", paths={"/chaos/mutex": [], "/chaos/barrier": children}),
            ],
        )

    assert judged("stopped", ["ready"]).passed
    assert not judged("timeout", ["ready"]).passed
    assert not judged("stopped", ["_c_x-0000000001", "ready"]).passed


def test_an_undone_or_premature_witness_delete_fails() -> None:
    """A delete ZooKeeper acknowledged whose node is back at the end, or a delete
    that finds an acknowledged node already gone, is the server's loss; a node
    whose delete may have landed (unknown) may be either present or absent."""

    def judged(*records: list[Record], nodes: list[str]) -> Verdict:
        return verdict(
            "zookeeper.durable",
            [
                *op("w0:1", "witness", "create", 1.0, 1.1, node="n-0000000001"),
                *op("w0:2", "witness", "create", 2.0, 2.1, node="n-0000000002"),
                *[r for rs in records for r in rs],
                final("witness", nodes=nodes),
            ],
        )

    deleted = op("w0:3", "witness", "delete", 3.0, 3.1, args={"node": "n-0000000001"})
    assert judged(deleted, nodes=["n-0000000002"]).passed
    assert not judged(deleted, nodes=["n-0000000001", "n-0000000002"]).passed
    unknown = op("w0:3", "witness", "delete", 3.0, 3.1, "unknown", args={"node": "n-0000000001"})
    assert judged(unknown, nodes=["n-0000000002"]).passed
    assert judged(unknown, nodes=["n-0000000001", "n-0000000002"]).passed
    gone = op(
        "w0:3",
        "witness",
        "delete",
        3.0,
        3.1,
        "fail",
        error="NoNodeError",
        args={"node": "n-0000000001"},
    )
    assert not judged(gone, nodes=["n-0000000002"]).passed


@pytest.mark.parametrize("ours", [False, True])
async def test_the_stall_watch_records_a_blocked_loop_and_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: bool
) -> None:
    """A loop blocked for two seconds is recorded as a stall, with where it was
    blocked; the watching thread ran meanwhile (not frozen). Whether the place
    counts as the library's is judged by path: this test's file stands in for
    aiocoord's when ``ours``."""
    if ours:
        monkeypatch.setattr(chaos._worker, "_LIBRARY", str(Path(__file__).parent) + "/")
    history = HistoryWriter(tmp_path / "w0.jsonl", worker="w0", t0=time.monotonic())
    watch = asyncio.ensure_future(_StallWatch(history).run())
    await asyncio.sleep(0.2)
    time.sleep(2.0)  # noqa: ASYNC251 -- blocking the loop, in this file, is the point
    await asyncio.sleep(0.2)
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    history.close()
    stalls = build_history(read_records([tmp_path / "w0.jsonl"])).stalls
    assert len(stalls) == 1, stalls
    stall = stalls[0]
    assert 1.9 <= stall["to"] - stall["from"] < 3.0
    assert stall["frozen"] < 1.0
    assert stall["in_library"] is ours
    assert any("test_chaos_checks.py" in frame for frame in stall["blocked_in"])


def test_the_stall_watch_counts_a_thread_that_has_not_woken_yet_as_frozen(
    tmp_path: Path,
) -> None:
    """SIGCONT resumes both threads: when the loop records its stall before the
    watching thread has woken to note its own lateness, the thread's last wake
    says the whole process was stopped."""
    history = HistoryWriter(tmp_path / "w0.jsonl", worker="w0", t0=time.monotonic() - 10.0)
    watch = _StallWatch(history)
    watch._woke_at = 4.0  # the thread's last wake, then nothing
    watch._record(4.05, 9.7)
    watch._woke_at = 9.68  # a thread that kept waking: the loop alone was blocked
    watch._record(7.0, 9.7)
    history.close()
    first, second = build_history(read_records([tmp_path / "w0.jsonl"])).stalls
    assert first["frozen"] == pytest.approx(5.65)
    assert second["frozen"] == 0.0
