"""The invariants of a chaos run, each a function over the recorded history.

Every check returns a :class:`Verdict`: PASS or FAIL, how many things it looked
at (``checked``; none means the invariant was not exercised: a gap to report),
counts worth showing, and the problems it found. The checks read only the
history (see :mod:`chaos._history`), so each one can be fed a hand-made history
that breaks it (``tests/unit/test_chaos_checks.py`` does).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ._history import History, Op
from ._layout import (
    AQUEUE,
    COUNTER_BOUND,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_LONG,
    QUEUE,
    SEMAPHORE_LEASES,
)

__all__ = ["CHECKS", "Check", "Verdict", "run_checks"]

MAX_PROBLEMS = 20
"""Problems listed per check (all are counted)."""


@dataclass(slots=True)
class Verdict:
    """The outcome of one check."""

    name: str
    title: str
    checked: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    @property
    def passed(self) -> bool:
        return self.problem_count == 0

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    title: str
    run: Callable[[History, Verdict], None]


# --- holders: locks, read-write locks, semaphores, leadership -----------------------------


def _accepted(history: History, resource: str) -> list[dict[str, Any]]:
    return [s for s in history.store_events(resource) if s.get("accepted")]


def _store_exclusive(resource: str, shared_mode: str | None = None) -> Callable[..., None]:
    """Accepted writes never interleave: between an exclusive holder's first and
    last accepted write there is no other holder's; between a shared holder's
    (``shared_mode``, a reader) there is no exclusive holder's. And no token is
    used by two holders."""

    def check(history: History, verdict: Verdict) -> None:
        events = history.store_events(resource)
        accepted = [s for s in events if s.get("accepted")]
        verdict.checked = len(accepted)
        verdict.counts = {
            "accepted writes": len(accepted),
            "rejected writes": len(events) - len(accepted),
        }
        spans: dict[str, list[int]] = {}
        shared: dict[str, bool] = {}
        holder_of_token: dict[int, str] = {}
        for index, event in enumerate(accepted):
            op = str(event.get("op"))
            spans.setdefault(op, [index, index])[1] = index
            shared[op] = shared_mode is not None and event.get("mode") == shared_mode
            token = int(event["token"])
            other = holder_of_token.setdefault(token, op)
            if other != op:
                verdict.problem(f"token {token} used by two holders: {other} and {op}")
        verdict.counts["holders"] = len(spans)
        for op, (first, last) in spans.items():
            for index in range(first + 1, last):
                other = str(accepted[index].get("op"))
                if other == op or (shared[op] and shared[other]):
                    continue
                at = float(accepted[index].get("t", 0))
                verdict.problem(
                    f"{other} wrote (token {accepted[index]['token']}) between the writes of "
                    f"{op} (token {accepted[first]['token']}) at t={at:.3f}"
                )
                break

    return check


def _store_limit(resource: str, limit: int) -> Callable[..., None]:
    """The store never counted more than ``limit`` holders with a valid lease inside
    at once: whenever one too many came in, ZooKeeper showed that some holder inside
    had lost its lease node (and that holder was evicted)."""

    def check(history: History, verdict: Verdict) -> None:
        events = history.store_events(resource)
        inside: set[int] = set()
        evicted = unverified = most = begins = 0
        for event in events:
            for victim in event.get("evicted") or ():
                inside.discard(int(victim))
                evicted += 1
            if not event.get("accepted"):
                continue
            token = int(event["token"])
            if event.get("action") != "begin":
                inside.discard(token)
                continue
            begins += 1
            inside.add(token)
            most = max(most, len(inside))
            if event.get("unverified"):
                unverified += 1
            elif event.get("over_limit") is not None or len(inside) > limit:
                at = float(event.get("t", 0))
                verdict.problem(
                    f"{event.get('op')} (token {token}) came in at t={at:.3f} while "
                    f"{sorted(inside - {token})} still held their lease nodes"
                )
        verdict.checked = begins
        verdict.counts = {
            "accepted begins": begins,
            "most inside at once": most,
            "evicted (lease node gone)": evicted,
            "unverified (ZooKeeper did not answer)": unverified,
            "rejected writes": sum(1 for e in events if not e.get("accepted")),
        }

    return check


def _loss_told(recipe: str, resource: str) -> Callable[..., None]:
    """Every holder the store turned away (a newer holder had written), or whose
    node was found gone, was told by the recipe that it lost its hold: its
    operation ended with the loss (LockLostError, LeadershipLostError, a lost
    lease), not as a normal release."""

    def check(history: History, verdict: Verdict) -> None:
        ops = {o.id: o for o in history.of(recipe)}
        refused = {str(s.get("op")) for s in history.store_events(resource) if not s["accepted"]}
        refused |= {o.id for o in ops.values() if o.get("rejected")}
        told = undetermined = 0
        for op_id in sorted(refused):
            op = ops.get(op_id)
            if op is None or op.status == "unknown":
                undetermined += 1
            elif op.status == "ok":
                verdict.problem(
                    f"{op_id} ({op.args.get('driver')}, token {op.get('token')}) was turned "
                    f"away ({op.get('reason')}) but ended without being told of a loss"
                )
            else:
                told += 1
        verdict.checked = len(refused)
        verdict.counts = {
            "turned away": len(refused),
            "told": told,
            "outcome unknown": undetermined,
        }

    return check


def _paused(history: History) -> dict[str, list[tuple[float, float]]]:
    """When each worker was paused (SIGSTOP to SIGCONT), from the fault records."""
    windows: dict[str, list[tuple[float, float]]] = {}
    for fault in history.faults:
        if fault.get("kind") == "pause-worker" and fault.get("worker"):
            end = float(fault.get("end", math.inf))
            windows.setdefault(str(fault["worker"]), []).append((float(fault["t"]), end))
    return windows


def _holds(history: History, recipe: str, verdict: Verdict) -> list[Op]:
    """Holds that ended normally (never lost) and whose holder could not have lost
    them unknowingly: a client with the standard error policy (a suspended
    connection already counts as a loss, and the client suspends before the server
    can expire the session) in a process that was not paused meanwhile. A paused
    process, or a session-policy client cut off from ZooKeeper, may still believe
    it holds after its session expired: the recipes document that limit, and the
    fenced store (with the ``told`` checks) covers those holders."""
    paused = _paused(history)
    ended = [
        o
        for o in history.of(recipe)
        if o.status == "ok" and o.get("t_acq") is not None and o.get("t_rel") is not None
    ]
    holds = []
    for hold in ended:
        start, end = float(hold.get("t_acq")), float(hold.get("t_rel"))
        stopped = any(a <= end and start <= b for a, b in paused.get(hold.worker, ()))
        if hold.args.get("policy", "standard") == "standard" and not stopped:
            holds.append(hold)
    verdict.counts["holds without loss"] = len(ended)
    verdict.counts["excused (session policy or paused)"] = len(ended) - len(holds)
    return holds


def _holds_exclusive(recipe: str, shared_mode: str | None = None) -> Callable[..., None]:
    """Holds that ended without a loss never overlapped in time (a shared mode,
    the readers of a read-write lock, may overlap among itself); see :func:`_holds`
    for which holds count."""

    def check(history: History, verdict: Verdict) -> None:
        holds = sorted(_holds(history, recipe, verdict), key=lambda o: float(o.get("t_acq")))
        active: list[Op] = []
        for hold in holds:
            start = float(hold.get("t_acq"))
            active = [a for a in active if float(a.get("t_rel")) > start]
            for other in active:
                if shared_mode is not None and hold.kind == other.kind == shared_mode:
                    continue
                verdict.problem(
                    f"{other.id} ({other.kind}, {other.get('t_acq'):.3f}-{other.get('t_rel'):.3f})"
                    f" and {hold.id} ({hold.kind}, {start:.3f}-{hold.get('t_rel'):.3f}) both "
                    "held and neither was told of a loss"
                )
            active.append(hold)
        verdict.checked = len(holds)
        if shared_mode is not None:
            verdict.counts["of which shared"] = sum(1 for h in holds if h.kind == shared_mode)

    return check


def _holds_limit(recipe: str, limit: int) -> Callable[..., None]:
    """Never more than ``limit`` holds that ended without a loss at once (see
    :func:`_holds` for which holds count)."""

    def check(history: History, verdict: Verdict) -> None:
        holds = _holds(history, recipe, verdict)
        edges = sorted(
            [(float(h.get("t_acq")), 1, h.id) for h in holds]
            + [(float(h.get("t_rel")), -1, h.id) for h in holds]
        )
        inside: set[str] = set()
        most = 0
        for at, step, op_id in edges:
            if step < 0:
                inside.discard(op_id)
                continue
            inside.add(op_id)
            most = max(most, len(inside))
            if len(inside) > limit:
                verdict.problem(f"{len(inside)} holds at t={at:.3f}: {sorted(inside)}")
        verdict.checked = len(holds)
        verdict.counts["most at once"] = most

    return check


# --- counters ---------------------------------------------------------------------------


def _final_value(history: History, path: str) -> int | None:
    for record in history.final("counter"):
        if record.get("path") == path and record.get("value") is not None:
            return int(record["value"])
    return None


def _counter(path: str) -> Callable[..., None]:
    """Increments: succeeded <= final <= succeeded + outcome-unknown; and no two
    successful increments saw the same post-value (a lost update)."""

    def check(history: History, verdict: Verdict) -> None:
        ops = [o for o in history.of("counter", "increment") if o.args.get("path") == path]
        ok = [o for o in ops if o.status == "ok"]
        unknown = sum(1 for o in ops if o.status == "unknown")
        final = _final_value(history, path)
        verdict.checked = len(ops)
        verdict.counts = {
            "succeeded": len(ok),
            "failed": sum(1 for o in ops if o.status == "fail"),
            "unknown": unknown,
            "final": -1 if final is None else final,
        }
        if final is None:
            verdict.problem(f"no final value was read for {path}")
        elif not len(ok) <= final <= len(ok) + unknown:
            verdict.problem(
                f"final value {final} is outside [succeeded {len(ok)}, "
                f"succeeded + unknown {len(ok) + unknown}]"
            )
        seen = Counter(o.get("post") for o in ok)
        for post, times in sorted(seen.items(), key=lambda kv: str(kv[0])):
            if times > 1:
                verdict.problem(f"{times} successful increments all reported post-value {post}")

    return check


def _bounded_counter(history: History, verdict: Verdict) -> None:
    """The bounded counter never leaves [0, COUNTER_BOUND]: no success reports a
    value outside, the final value is inside, and it equals the successful deltas'
    sum give or take the outcome-unknown ones."""
    ops = history.of("bounded-counter")
    ok = [o for o in ops if o.status == "ok"]
    unknown = [o for o in ops if o.status == "unknown"]
    final = _final_value(history, COUNTER_BOUNDED)
    for op in ok:
        post = op.get("post")
        if post is None or not 0 <= int(post) <= COUNTER_BOUND:
            verdict.problem(f"{op.id} reported value {post}, outside [0, {COUNTER_BOUND}]")
    net = sum(int(o.args.get("delta", 0)) for o in ok)
    low = net + sum(min(0, int(o.args.get("delta", 0))) for o in unknown)
    high = net + sum(max(0, int(o.args.get("delta", 0))) for o in unknown)
    verdict.checked = len(ops)
    verdict.counts = {
        "succeeded": len(ok),
        "refused at a bound": sum(1 for o in ops if o.status == "fail" and o.error == "bound"),
        "unknown": len(unknown),
        "final": -1 if final is None else final,
    }
    if final is None:
        verdict.problem("no final value was read")
    elif not 0 <= final <= COUNTER_BOUND:
        verdict.problem(f"final value {final} is outside [0, {COUNTER_BOUND}]")
    elif not low <= final <= high:
        verdict.problem(f"final value {final} is outside [{low}, {high}] (successful deltas {net})")


# --- double barrier ---------------------------------------------------------------------


def _barrier(history: History, verdict: Verdict) -> None:
    """Nobody passed enter before ``members`` participants had entered, in every
    round: for each successful enter there is a moment between its start and its
    end at which ``members`` attempts were in (from their enter's start until they
    began to leave, or gave up)."""
    members = int(history.meta.get("members", 0))
    enters = history.of("barrier", "enter")
    leaves = {(o.worker, o.args.get("attempt")): o for o in history.of("barrier", "leave")}
    spans: list[tuple[float, float]] = []
    for enter in enters:
        end = math.inf
        if enter.status == "ok":
            leave = leaves.get((enter.worker, enter.args.get("attempt")))
            if leave is not None:
                end = leave.invoke
        elif enter.complete is not None:
            end = enter.complete
        spans.append((enter.invoke, end))
    passed = [e for e in enters if e.status == "ok" and e.complete is not None]
    for enter in passed:
        assert enter.complete is not None
        start, end = enter.invoke, enter.complete
        near = [(a, b) for a, b in spans if a <= end and b >= start]
        moments = {start} | {a for a, _b in near if start <= a <= end}
        most = max(sum(1 for a, b in near if a <= t <= b) for t in moments)
        if most < members:
            verdict.problem(
                f"{enter.id} passed at t={end:.3f} (entered at {start:.3f}) with at most "
                f"{most} of {members} participants in"
            )
    verdict.checked = len(passed)
    verdict.counts = {
        "members": members,
        "enters passed": len(passed),
        "enters failed": sum(1 for e in enters if e.status == "fail"),
        "leaves": len(leaves),
    }


# --- queues -------------------------------------------------------------------------------


def _remaining(history: History, path: str) -> list[str] | None:
    for record in history.final("queue"):
        if record.get("path") == path:
            return [str(item) for item in record.get("items") or []]
    return None


def _put_items(history: History, recipe: str) -> tuple[set[str], set[str], set[str]]:
    """Items put: acknowledged, outcome unknown, failed (nothing put)."""
    puts = history.of(recipe, "put")
    ok = {str(o.args["item"]) for o in puts if o.status == "ok"}
    unknown = {str(o.args["item"]) for o in puts if o.status == "unknown"}
    failed = {str(o.args["item"]) for o in puts if o.status == "fail"}
    return ok, unknown, failed


def _unknown_takes(history: History, recipe: str, path: str) -> int:
    notes = sum(
        1 for n in history.notes if n.get("what") == "queue-unknown-take" and n.get("queue") == path
    )
    takes = sum(1 for o in history.of(recipe) if o.kind != "put" and o.status == "unknown")
    return notes + takes


def _queue_once(history: History, verdict: Verdict) -> None:
    """Every item get() took was taken once: never twice, never also left in the
    queue, never one that was not put (or whose put failed)."""
    ok, unknown, failed = _put_items(history, "queue")
    taken = Counter(str(o.get("item")) for o in history.of("queue", "get") if o.status == "ok")
    remaining = Counter(_remaining(history, QUEUE) or [])
    for item, times in sorted(taken.items()):
        if times > 1:
            verdict.problem(f"{item} was taken {times} times")
        if remaining[item]:
            verdict.problem(f"{item} was taken and is still in the queue")
    for item in sorted(set(taken) | set(remaining)):
        if item in failed:
            verdict.problem(f"{item} is in the history although its put failed")
        elif item not in ok and item not in unknown:
            verdict.problem(f"{item} was never put")
    for item, times in sorted(remaining.items()):
        if times > 1:
            verdict.problem(f"{item} is in the queue {times} times")
    verdict.checked = sum(taken.values())
    verdict.counts = {"taken": sum(taken.values()), "left in the queue": sum(remaining.values())}


def _queue_vanish(history: History, verdict: Verdict) -> None:
    """No acknowledged item vanished: each was taken or is still in the queue,
    save as many as get() calls reported an unknown outcome for (a lost reply)."""
    ok, _unknown, _failed = _put_items(history, "queue")
    taken = {str(o.get("item")) for o in history.of("queue", "get") if o.status == "ok"}
    remaining = _remaining(history, QUEUE)
    if remaining is None:
        verdict.problem("the queue's final contents were not read")
        remaining = []
    vanished = sorted(ok - taken - set(remaining))
    excused = _unknown_takes(history, "queue", QUEUE)
    if len(vanished) > excused:
        verdict.problem(
            f"{len(vanished)} acknowledged items vanished, {excused} takes had an unknown "
            f"outcome: {vanished[:10]}"
        )
    verdict.checked = len(ok)
    verdict.counts = {
        "acknowledged puts": len(ok),
        "vanished": len(vanished),
        "takes with unknown outcome": excused,
    }


def _take_items(history: History) -> list[Op]:
    return [o for o in history.of("aqueue", "take") if o.get("item") is not None]


def _aqueue_delivery(history: History, verdict: Verdict) -> None:
    """take(): every acknowledged item was delivered to a take that committed (then
    removed), or is still in the queue, or a take of it had an unknown outcome; a
    take that ended lost (LockLostError: "the item goes back") must leave the item
    for another; an item whose take committed is not left in the queue."""
    ok, unknown_puts, failed = _put_items(history, "aqueue")
    takes = _take_items(history)
    committed = Counter(str(o.get("item")) for o in takes if o.status == "ok")
    delivered = {str(o.get("item")) for o in takes}
    unsure = {str(o.get("item")) for o in takes if o.status == "unknown"}
    remaining = _remaining(history, AQUEUE)
    if remaining is None:
        verdict.problem("the queue's final contents were not read")
        remaining = []
    for item in sorted(set(committed) & set(remaining)):
        verdict.problem(f"{item} was taken (committed) and is still in the queue")
    for item in sorted(delivered | set(remaining)):
        if item in failed:
            verdict.problem(f"{item} is in the history although its put failed")
        elif item not in ok and item not in unknown_puts:
            verdict.problem(f"{item} was never put")
    vanished = sorted(ok - set(committed) - set(remaining) - unsure)
    excused = _unknown_takes(history, "aqueue", AQUEUE) - len(unsure)
    if len(vanished) > max(0, excused):
        for item in vanished:
            lost = [f"{o.id} ({o.error})" for o in takes if o.get("item") == item]
            told = f"; its takes ended: {lost}" if lost else "; never delivered"
            verdict.problem(
                f"{item} was acknowledged, never committed, not left in the queue{told}"
            )
    verdict.checked = len(ok)
    verdict.counts = {
        "acknowledged puts": len(ok),
        "delivered": len(delivered),
        "redelivered": sum(1 for o in takes) - len(delivered),
        "committed": sum(committed.values()),
        "left in the queue": len(remaining),
        "vanished": len(vanished),
    }


def _aqueue_one_taker(history: History, verdict: Verdict) -> None:
    """take(): no item was committed twice, and no two takers held one item at once
    unless one of them was told it lost it."""
    by_item: dict[str, list[Op]] = {}
    for op in _take_items(history):
        by_item.setdefault(str(op.get("item")), []).append(op)
    for item, ops in sorted(by_item.items()):
        commits = [o.id for o in ops if o.status == "ok"]
        if len(commits) > 1:
            verdict.problem(f"{item} was committed {len(commits)} times: {commits}")
        ops = sorted(ops, key=lambda o: float(o.get("t_body")))
        for first, second in itertools.pairwise(ops):
            first_end = first.get("t_end", first.complete)
            overlap = first_end is None or float(first_end) > float(second.get("t_body"))
            if overlap and first.status == "ok" and second.status == "ok":
                verdict.problem(f"{first.id} and {second.id} held {item} at the same time")
    verdict.checked = sum(len(ops) for ops in by_item.values())
    verdict.counts = {"deliveries": verdict.checked, "items": len(by_item)}


# --- ZooKeeper itself ----------------------------------------------------------------------


def _witness(history: History, verdict: Verdict) -> None:
    """Every create ZooKeeper acknowledged is still there at the end (nothing ever
    deletes them). A loss here is the server's: it explains other checks' failures
    at the same time (a counter or a queue going back)."""
    ok = [o for o in history.of("witness", "create") if o.status == "ok"]
    records = history.final("witness")
    if not records:
        verdict.problem("the witness nodes were not listed at the end")
        return
    present = set(records[0].get("nodes") or [])
    missing = [o for o in ok if o.get("node") not in present]
    if missing:
        first, last = min(o.complete or 0 for o in missing), max(o.complete or 0 for o in missing)
        verdict.problem(
            f"{len(missing)} acknowledged creates are gone (acknowledged between "
            f"t={first:.3f} and t={last:.3f}): {[o.get('node') for o in missing[:5]]}"
        )
    verdict.checked = len(ok)
    verdict.counts = {"acknowledged creates": len(ok), "missing": len(missing)}


# --- caches, orphans, workers, processes --------------------------------------------------


def _caches(history: History, verdict: Verdict) -> None:
    """After the run, each worker's TreeCache view equals the server's tree."""
    records = history.final("cache")
    for record in records:
        if not record.get("equal"):
            detail = record.get("error") or (
                f"missing {record.get('missing')}, extra {record.get('extra')}, "
                f"stale {record.get('stale')}"
            )
            verdict.problem(f"{record.get('worker')}: the cache differs from the server: {detail}")
    verdict.checked = len(records)
    verdict.counts = {
        "caches compared": len(records),
        "nodes": max((int(r.get("nodes", 0)) for r in records), default=0),
    }


def _orphans(history: History, verdict: Verdict) -> None:
    """Once every worker stopped, no contender, lease, barrier or taken-marker node is left."""
    records = history.final("orphans")
    if not records:
        verdict.problem("the recipe paths were not listed at the end")
    listed = 0
    for record in records:
        for path, children in sorted((record.get("paths") or {}).items()):
            listed += 1
            if children:
                verdict.problem(f"{path} still has {len(children)} children: {children[:5]}")
    verdict.checked = listed
    verdict.counts = {"paths listed": listed}


def _workers(history: History, verdict: Verdict) -> None:
    """No worker hung: every operation ended within the watchdog's bound, every
    worker stopped when told to (none had to be killed)."""
    watchdog = [o for o in history.ops if (o.error or "").startswith("watchdog")]
    for op in watchdog:
        verdict.problem(f"{op.id} ({op.recipe} {op.kind}) {op.error}")
    records = history.final("workers")
    for record in records:
        for name, problem in sorted((record.get("problems") or {}).items()):
            verdict.problem(f"{name}: {problem}")
    if not records:
        verdict.problem("the workers' ends were not recorded")
    verdict.checked = len(history.ops)
    verdict.counts = {
        "workers": max((int(r.get("count", 0)) for r in records), default=0),
        "operations": len(history.ops),
    }


def _processes(history: History, verdict: Verdict) -> None:
    """No process the run started is left running."""
    records = history.final("processes")
    if not records:
        verdict.problem("the processes were not checked at the end")
    checked = 0
    for record in records:
        checked += int(record.get("checked", 0))
        for left in record.get("left") or []:
            verdict.problem(f"still running: {left}")
    verdict.checked = checked
    verdict.counts = {"processes checked": checked}


CHECKS: tuple[Check, ...] = (
    Check(
        "mutex.store", "fenced writes of Mutex holders never interleave", _store_exclusive("mutex")
    ),
    Check("mutex.told", "a Mutex holder turned away was told", _loss_told("mutex", "mutex")),
    Check("mutex.holds", "Mutex holds without loss never overlap", _holds_exclusive("mutex")),
    Check(
        "rwlock.store",
        "fenced writes of a writer never interleave with anyone's",
        _store_exclusive("rwlock", "read"),
    ),
    Check(
        "rwlock.told", "a ReadWriteLock holder turned away was told", _loss_told("rwlock", "rwlock")
    ),
    Check(
        "rwlock.holds",
        "write holds never overlap any hold (without loss)",
        _holds_exclusive("rwlock", "read"),
    ),
    Check(
        "semaphore.store",
        f"the store never counts more than {SEMAPHORE_LEASES} lease holders",
        _store_limit("semaphore", SEMAPHORE_LEASES),
    ),
    Check(
        "semaphore.told",
        "a lease holder turned away was told",
        _loss_told("semaphore", "semaphore"),
    ),
    Check(
        "semaphore.holds",
        f"never more than {SEMAPHORE_LEASES} leases held (without loss) at once",
        _holds_limit("semaphore", SEMAPHORE_LEASES),
    ),
    Check("leader.store", "leader terms never interleave in the store", _store_exclusive("leader")),
    Check("leader.told", "a leader turned away was told", _loss_told("leader", "leader")),
    Check("leader.terms", "terms without loss never overlap", _holds_exclusive("leader")),
    Check(
        "counter.long",
        "AtomicLong: succeeded <= final <= succeeded + unknown",
        _counter(COUNTER_LONG),
    ),
    Check(
        "counter.int",
        "AtomicInt (promoted to lock): succeeded <= final <= succeeded + unknown",
        _counter(COUNTER_INT),
    ),
    Check(
        "counter.bounded",
        f"the bounded counter never leaves [0, {COUNTER_BOUND}]",
        _bounded_counter,
    ),
    Check("barrier.enter", "nobody passes enter before `members` entered", _barrier),
    Check("queue.once", "get(): every item taken exactly once", _queue_once),
    Check("queue.vanish", "get(): no acknowledged item vanishes", _queue_vanish),
    Check(
        "aqueue.delivery",
        "take(): every acknowledged item delivered, then removed; none vanish",
        _aqueue_delivery,
    ),
    Check("aqueue.taker", "take(): one committed taker per item", _aqueue_one_taker),
    Check(
        "zookeeper.durable",
        "every create ZooKeeper acknowledged survives (the server's promise)",
        _witness,
    ),
    Check("cache.converged", "each TreeCache equals the server's tree after the run", _caches),
    Check("orphans.none", "no contender, barrier or taken-marker node left", _orphans),
    Check("workers.none-hung", "no worker hung (every await bounded)", _workers),
    Check("processes.none-left", "no process left running", _processes),
)


def run_checks(history: History, checks: Iterable[Check] = CHECKS) -> list[Verdict]:
    """Every check's verdict; a check that crashes fails, with the error as its problem."""
    verdicts = []
    for check in checks:
        verdict = Verdict(check.name, check.title)
        try:
            check.run(history, verdict)
        except Exception as error:
            verdict.problem(f"the check itself failed: {type(error).__name__}: {error}")
        verdicts.append(verdict)
    return verdicts
