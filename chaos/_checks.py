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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._discovery import check_cache, check_dead_gone, check_listed, check_unique
from ._history import History, Op
from ._layout import (
    AQUEUE,
    BARRIER,
    COUNTER_BOUND,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_LONG,
    DQUEUE,
    DRIVER_BUG,
    IDQUEUE,
    PQUEUE,
    QUEUE,
    SEMAPHORE_LEASES,
    SHARDED_UPPER,
    STRAY_CANCEL,
)
from ._leaders import check_fenced, check_handover
from ._partitions import PARTITION_ITEMS, partition_fenced, partition_owned, store_resource

__all__ = ["CHECKS", "Check", "Verdict", "run_checks"]

MAX_PROBLEMS = 20
"""Problems listed per check (all are counted)."""
STALE_READ = 0.25
"""Seconds a ZooKeeper member may lag behind a write another client saw complete:
reads are served by the member a client is connected to, and only writes are
linearizable. A plain-barrier waiter released before any remove, having started
within this of the set, may have read the node's absence there: it is not judged."""
DUE_SLACK_MS = 5
"""Milliseconds a delay-queue take may precede its item's due time: the due time is
rounded to the millisecond, and the taker's clock read is truncated."""


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


def _all_of(*parts: tuple[str, Callable[[History, Verdict], None]]) -> Callable[..., None]:
    """One check made of several (label, check): every part's problems, its counts
    under its label, and what they looked at together."""

    def check(history: History, verdict: Verdict) -> None:
        for label, run in parts:
            part = Verdict(verdict.name, verdict.title)
            run(history, part)
            verdict.checked += part.checked
            verdict.counts |= {f"{label}: {key}": value for key, value in part.counts.items()}
            for problem in part.problems:
                verdict.problem(f"{label}: {problem}")
            verdict.problem_count += part.problem_count - len(part.problems)

    return check


# --- holders: locks, read-write locks, semaphores, leadership -----------------------------


def _accepted(history: History, resource: str) -> list[dict[str, Any]]:
    return [s for s in history.store_events(resource) if s.get("accepted")]


def _store_exclusive(
    resource: str, shared_mode: str | None = None, *, unique_tokens: bool = True
) -> Callable[..., None]:
    """Accepted writes never interleave: between an exclusive holder's first and
    last accepted write there is no other holder's; between a shared holder's
    (``shared_mode``, a reader) there is no exclusive holder's. And, with
    ``unique_tokens``, no token is used by two holders (not so for a Lease: a
    holder taking its own unexpired lease again keeps its node, and its token)."""

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
            if unique_tokens and other != op:
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


def _loss_told(recipe: str, *resources: str) -> Callable[..., None]:
    """Every holder the store turned away (a newer holder had written) on any of
    ``resources``, or whose node was found gone, was told by the recipe that it
    lost its hold: its operation ended with the loss (LockLostError,
    LeadershipLostError, a lost lease), not as a normal release."""

    def check(history: History, verdict: Verdict) -> None:
        ops = {o.id: o for o in history.of(recipe)}
        events = [e for resource in resources for e in history.store_events(resource)]
        refused = {str(s.get("op")) for s in events if not s["accepted"]}
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


def _nemesis_pauses(history: History) -> dict[str, list[tuple[float, float]]]:
    """When the nemesis held each worker stopped (SIGSTOP to SIGCONT)."""
    windows: dict[str, list[tuple[float, float]]] = {}
    for fault in history.faults:
        if fault.get("kind") == "pause-worker" and fault.get("worker"):
            end = float(fault.get("end", math.inf))
            windows.setdefault(str(fault["worker"]), []).append((float(fault["t"]), end))
    return windows


def _paused(history: History) -> dict[str, list[tuple[float, float]]]:
    """When each worker ran nothing: paused by the nemesis (SIGSTOP to SIGCONT), or
    stalled on its own (its event loop missed its beat for half a second or more:
    the host did not run it, or a call blocked its loop; :func:`_loop_free` fails
    the run when a call did, for long)."""
    windows = _nemesis_pauses(history)
    for stall in history.stalls:
        span = (float(stall["from"]), float(stall["to"]))
        windows.setdefault(str(stall.get("worker")), []).append(span)
    return windows


def _overlaps(windows: Iterable[tuple[float, float]], start: float, end: float) -> bool:
    """Whether any of ``windows`` shares a moment with [start, end]."""
    return any(a <= end and start <= b for a, b in windows)


def _judged(
    paused: Mapping[str, list[tuple[float, float]]], op: Op, start: float, end: float
) -> bool:
    """Whether ``op``'s holder could not have lost its hold over [start, end] without
    knowing: a client with the standard error policy (a suspended connection
    already counts as a loss, and the client suspends before the server can expire
    the session) in a process that was not paused or stalled meanwhile (see
    :func:`_paused`: a holder cannot learn of a loss while its process runs
    nothing, and records it only once it runs again). A paused process, or a
    session-policy client cut off from ZooKeeper, may still believe it holds after
    its session expired: the recipes document that limit, and the fenced store
    (with the ``told`` checks) covers those holders. ``paused``: :func:`_paused`
    of the run, computed once by the caller for all the holds it judges."""
    stopped = _overlaps(paused.get(op.worker, ()), start, end)
    return op.args.get("policy", "standard") == "standard" and not stopped


def _holds(history: History, recipe: str, verdict: Verdict, *, excuse: bool = True) -> list[Op]:
    """Holds that ended normally (never lost) and whose holder could not have lost
    them unknowingly (:func:`_judged`). With ``excuse`` False every such hold counts:
    for a recipe whose holder checks its own hold on the clock (the Lease)."""
    ended = [
        o
        for o in history.of(recipe)
        if o.status == "ok" and o.get("t_acq") is not None and o.get("t_rel") is not None
    ]
    paused = _paused(history)
    holds = [
        hold
        for hold in ended
        if not excuse or _judged(paused, hold, float(hold.get("t_acq")), float(hold.get("t_rel")))
    ]
    verdict.counts["holds without loss"] = len(ended)
    if excuse:
        verdict.counts["excused (session policy or paused)"] = len(ended) - len(holds)
    return holds


def _holds_exclusive(
    recipe: str, shared_mode: str | None = None, *, excuse: bool = True
) -> Callable[..., None]:
    """Holds that ended without a loss never overlapped in time (a shared mode,
    the readers of a read-write lock, may overlap among itself); see :func:`_holds`
    for which holds count."""

    def check(history: History, verdict: Verdict) -> None:
        holds = sorted(
            _holds(history, recipe, verdict, excuse=excuse), key=lambda o: float(o.get("t_acq"))
        )
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


def _handover(recipe: str, resource: str) -> Callable[..., None]:
    """A holder learns of its loss before anyone else writes: no accepted write of
    another holder falls inside a term, from leading (``t_acq``) to leaving
    (``t_rel``) or to being told of the loss (``t_lost``: the latch's ``changes()``
    yielding False). Terms count as in :func:`_judged` (standard policy, not paused).

    Only a later leader's write (a higher token than the term's own) counts
    against a term: an earlier leader writing late (a paused process, its session
    already expired) tells nothing about whether this term learned of its own
    loss in time. That late write is the earlier leader's, judged in its own term,
    and fenced by the store (accepted only while no later leader had written)."""

    def check(history: History, verdict: Verdict) -> None:
        terms: list[tuple[Op, float, float]] = []
        excused = earlier = 0
        paused = _paused(history)
        for op in history.of(recipe):
            if op.get("t_acq") is None:
                continue
            end = op.get("t_rel") if op.status == "ok" else op.get("t_lost")
            if end is None:
                end = op.complete
            if end is None:
                continue
            start = float(op.get("t_acq"))
            if not _judged(paused, op, start, float(end)):
                excused += 1
                continue
            terms.append((op, start, float(end)))
        writes = _accepted(history, resource)
        for op, start, end in terms:
            token = op.get("token")
            for event in writes:
                at = float(event.get("t", 0))
                if str(event.get("op")) != op.id and start < at < end:
                    theirs = event.get("token")
                    if token is not None and theirs is not None and int(theirs) < int(token):
                        earlier += 1
                        continue
                    verdict.problem(
                        f"{op.id} ({op.status}) led from t={start:.3f} and learned of no loss "
                        f"before t={end:.3f}, but {event.get('op')} wrote (token "
                        f"{event.get('token')}) at t={at:.3f}"
                    )
                    break
        verdict.checked = len(terms)
        verdict.counts = {
            "terms judged": len(terms),
            "of which ended by a loss": sum(1 for op, _s, _e in terms if op.status != "ok"),
            "excused (session policy or paused)": excused,
            "accepted writes": len(writes),
            "earlier leaders' late writes in a term": earlier,
        }

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


def _shared_sets(history: History) -> list[Op]:
    return history.of("shared-count", "try_set")


def _shared_count_cas(history: History, verdict: Verdict) -> None:
    """SharedCount: every successful ``try_set_count`` was a versioned write: no two
    succeeded on the same version, and each started from the value the write
    before it (in version order) left, never from one a refused set tried."""
    sets = _shared_sets(history)
    ok = [o for o in sets if o.status == "ok"]
    by_version: dict[int, list[Op]] = {}
    for op in ok:
        by_version.setdefault(int(op.args["prev_version"]), []).append(op)
    for version, winners in sorted(by_version.items()):
        if len(winners) > 1:
            verdict.problem(
                f"{len(winners)} sets succeeded on version {version}: {[o.id for o in winners]}"
            )
    for op in ok:
        version, value = int(op.args["prev_version"]), int(op.args["prev_value"])
        if version == 0:
            if value != 0:
                verdict.problem(f"{op.id} set from version 0 with value {value}, not the seed 0")
            continue
        made = [o for o in sets if int(o.args["prev_version"]) == version - 1]
        winners = [o for o in made if o.status == "ok"]
        maybe = [o for o in made if o.status == "unknown"]
        if winners and all(int(o.args["new"]) != value for o in winners):
            verdict.problem(
                f"{op.id} set from version {version} holding {value}, but "
                f"{winners[0].id} wrote {winners[0].args['new']} there"
            )
        elif not winners and all(int(o.args["new"]) != value for o in maybe):
            verdict.problem(
                f"{op.id} set from version {version} holding {value}: no write that "
                "succeeded (or may have) made it"
            )
    verdict.checked = len(ok)
    verdict.counts = {
        "succeeded": len(ok),
        "refused": sum(1 for o in sets if o.status == "fail"),
        "unknown": sum(1 for o in sets if o.status == "unknown"),
    }


def _shared_count_final(history: History, verdict: Verdict) -> None:
    """SharedCount: the final value is the last write in version order (the
    successful one made from the version before the final one, or one whose outcome
    is unknown), and no successful set is newer than the final version."""
    sets = _shared_sets(history)
    records = history.final("shared-count")
    final = records[0] if records else {}
    value, version = final.get("value"), final.get("version")
    verdict.checked = len(sets)
    verdict.counts = {
        "sets": len(sets),
        "final version": -1 if version is None else int(version),
        "final value": -1 if value is None else int(value),
    }
    if value is None or version is None:
        verdict.problem("the shared count's final value was not read")
        return
    version, value = int(version), int(value)
    for op in sets:
        if op.status == "ok" and int(op.args["prev_version"]) >= version:
            verdict.problem(
                f"{op.id} succeeded on version {op.args['prev_version']}, but the final "
                f"version is {version}"
            )
    if version == 0:
        if value != 0:
            verdict.problem(f"final value {value} at version 0, not the seed 0")
        return
    made = [o for o in sets if int(o.args["prev_version"]) == version - 1]
    winners = [o for o in made if o.status == "ok"]
    candidates = winners or [o for o in made if o.status == "unknown"]
    if all(int(o.args["new"]) != value for o in candidates):
        wrote = [(o.id, o.status, o.args["new"]) for o in made][:5]
        verdict.problem(
            f"final value {value} (version {version}) is not the last write's: writes "
            f"from version {version - 1}: {wrote}"
        )


def _sharded_final(history: History) -> dict[str, Any] | None:
    records = history.final("sharded")
    return records[0] if records else None


def _sharded_bounds(history: History, verdict: Verdict) -> None:
    """ShardedCounter: the total never leaves [0, SHARDED_UPPER]. Every exact total
    read is inside; a refusal came only when the total it was based on had no room
    for the change; at the end the shards' quotas add up to the range and each
    shard's count is within its quota."""
    gets = [o for o in history.of("sharded", "get") if o.status == "ok"]
    for op in gets:
        total = op.get("total")
        if total is None or not 0 <= int(total) <= SHARDED_UPPER:
            verdict.problem(f"{op.id} read the total {total}, outside [0, {SHARDED_UPPER}]")
    adds = history.of("sharded", "add")
    refused = [o for o in adds if o.status == "fail" and o.error == "bound"]
    for op in refused:
        pre, delta = op.get("pre"), int(op.args.get("delta", 0))
        if pre is None or 0 <= int(pre) + delta <= SHARDED_UPPER:
            verdict.problem(f"{op.id} refused {delta:+d} at total {pre}: there was room")
    final = _sharded_final(history)
    if final is None:
        verdict.problem("the sharded counter was not read at the end")
    else:
        total, shards = int(final["total"]), [tuple(s) for s in final.get("shards") or []]
        if not 0 <= total <= SHARDED_UPPER:
            verdict.problem(f"final total {total} is outside [0, {SHARDED_UPPER}]")
        if sum(quota for _count, quota in shards) != SHARDED_UPPER:
            verdict.problem(f"the shards' quotas do not add up to {SHARDED_UPPER}: {shards}")
        if any(not 0 <= count <= quota for count, quota in shards):
            verdict.problem(f"a shard's count is outside its quota: {shards}")
        if sum(count for count, _quota in shards) != total:
            verdict.problem(f"the shards' counts {shards} do not add up to the total {total}")
    verdict.checked = len(gets) + len(refused) + (final is not None)
    verdict.counts = {
        "totals read": len(gets),
        "refused at a bound": len(refused),
        "most read": max((int(o.get("total", 0)) for o in gets), default=-1),
    }


def _sharded_total(history: History, verdict: Verdict) -> None:
    """ShardedCounter: the final total is the successful changes' sum, give or take
    the ones whose outcome is unknown."""
    adds = history.of("sharded", "add")
    ok = [o for o in adds if o.status == "ok"]
    unknown = [o for o in adds if o.status == "unknown"]
    net = sum(int(o.args.get("delta", 0)) for o in ok)
    low = net + sum(min(0, int(o.args.get("delta", 0))) for o in unknown)
    high = net + sum(max(0, int(o.args.get("delta", 0))) for o in unknown)
    final = _sharded_final(history)
    verdict.checked = len(adds)
    verdict.counts = {
        "succeeded": len(ok),
        "refused": sum(1 for o in adds if o.status == "fail"),
        "unknown": len(unknown),
        "final": -1 if final is None else int(final["total"]),
    }
    if final is None:
        verdict.problem("the sharded counter was not read at the end")
    elif not low <= int(final["total"]) <= high:
        verdict.problem(
            f"final total {final['total']} is outside [{low}, {high}] (successful deltas {net})"
        )


# --- double barrier ---------------------------------------------------------------------


def _barrier(history: History, verdict: Verdict) -> None:
    """Nobody passed enter before ``members`` participants had entered, in every
    round: for each successful enter there is a moment between its start and its
    end at which ``members`` attempts were in (from their enter's start until they
    began to leave, or gave up; one that gave up because its session was lost,
    or in any way while its client was disconnected, or in a way the driver
    could not read, may be counted by the others for one more session
    timeout)."""
    members = int(history.meta.get("members", 0))
    session_timeout = float(history.meta.get("session_timeout", 0))
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
            if enter.status == "unknown" or _session_lost(enter) or _cut_off(enter):
                # The client gave its session up, or gave up (timed out, failed
                # or was cancelled) while cut off and left its node to a delete
                # that runs once ZooKeeper is back, or ended in a way the driver
                # could not read (its cleanup did run: the driver waits for
                # the entering task to finish); either way the server may
                # keep the node (which the others count) up to a session
                # timeout longer, as after a leader change that restarts its
                # clock.
                end += session_timeout
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


def _cut_off(op: Op) -> bool:
    """Whether failed enter ``op`` ended while its client was disconnected (its
    node's delete then waits for ZooKeeper). Histories from before every failed
    enter recorded ``connected`` name only a timeout that way."""
    return op.get("connected") is False or op.error == "timeout-disconnected"


def _session_lost(op: Op) -> bool:
    """Whether ``op`` failed because its client declared its session lost."""
    return op.error is not None and "session owning our node was lost" in op.error


# --- plain barrier ------------------------------------------------------------------------


def _gate(history: History, verdict: Verdict) -> None:
    """A waiter on a plain barrier was released only once the barrier was removed,
    never while it was set: no released wait lies wholly within a span when the
    node surely existed (from a set that had completed to the start of the next
    remove of that barrier, each barrier set and removed by one task in turn).
    A wait released before any remove that started within STALE_READ of the set is
    not judged (its member may not have applied the set yet)."""
    closed: dict[str, list[tuple[float, float, str]]] = {}
    changes: dict[str, list[Op]] = {}
    for op in history.of("gate"):
        if op.kind in ("set", "remove"):
            changes.setdefault(str(op.args.get("path")), []).append(op)
    for path, ops in changes.items():
        for current, following in itertools.pairwise([*ops, None]):
            assert current is not None
            if current.kind == "set" and current.status == "ok" and current.complete is not None:
                end = math.inf if following is None else following.invoke
                closed.setdefault(path, []).append((current.complete, end, current.id))
    waits = history.of("gate", "wait")
    released = [w for w in waits if w.status == "ok" and w.complete is not None]
    waited_for_remove = unjudged = 0
    for wait in released:
        assert wait.complete is not None
        for start, end, set_id in closed.get(str(wait.args.get("path")), []):
            if not start <= wait.invoke <= end:
                continue
            if wait.complete > end:
                waited_for_remove += 1
            elif wait.invoke < start + STALE_READ:
                unjudged += 1
            else:
                verdict.problem(
                    f"{wait.id} was released at t={wait.complete:.3f} from {wait.args['path']}, "
                    f"set by {set_id} at t={start:.3f} and not removed before t={end:.3f}"
                )
            break
    verdict.checked = len(released)
    verdict.counts = {
        "sets": sum(1 for ops in changes.values() for o in ops if o.kind == "set"),
        "removes": sum(1 for ops in changes.values() for o in ops if o.kind == "remove"),
        "released": len(released),
        "of which waited for a remove": waited_for_remove,
        f"released within {STALE_READ:g} s of a set (not judged)": unjudged,
        "timed out": sum(1 for w in waits if w.status == "fail"),
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
    takes = sum(
        1 for o in history.of(recipe) if o.kind in ("get", "take") and o.status == "unknown"
    )
    return notes + takes


def _removed(history: History, recipe: str) -> set[str]:
    """IdQueue: the items an acknowledged (or maybe applied) ``remove(id)`` may have
    deleted: those of its id put before the remove ended."""
    removes = [o for o in history.of(recipe, "remove") if o.status != "fail"]
    if not removes:
        return set()
    gone: set[str] = set()
    for put in history.of(recipe, "put"):
        for remove in removes:
            ended = math.inf if remove.complete is None else remove.complete
            if remove.args.get("id") == put.args.get("id") and put.invoke < ended:
                gone.add(str(put.args["item"]))
                break
    return gone


def _queue_once(recipe: str, path: str) -> Callable[..., None]:
    """Every item get() took was taken once: never twice, never also left in the
    queue, never one that was not put (or whose put failed)."""

    def check(history: History, verdict: Verdict) -> None:
        ok, unknown, failed = _put_items(history, recipe)
        taken = Counter(str(o.get("item")) for o in history.of(recipe, "get") if o.status == "ok")
        remaining = Counter(_remaining(history, path) or [])
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
        verdict.counts = {
            "taken": sum(taken.values()),
            "left in the queue": sum(remaining.values()),
        }

    return check


def _queue_vanish(recipe: str, path: str) -> Callable[..., None]:
    """No acknowledged item vanished: each was taken or is still in the queue,
    save as many as get() calls reported an unknown outcome for (a lost reply),
    and (IdQueue) those a ``remove`` of their id may have deleted."""

    def check(history: History, verdict: Verdict) -> None:
        ok, _unknown, _failed = _put_items(history, recipe)
        taken = {str(o.get("item")) for o in history.of(recipe, "get") if o.status == "ok"}
        remaining = _remaining(history, path)
        if remaining is None:
            verdict.problem("the queue's final contents were not read")
            remaining = []
        removed = _removed(history, recipe)
        gone = ok - taken - set(remaining)
        vanished = sorted(gone - removed)
        excused = _unknown_takes(history, recipe, path)
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
        if history.of(recipe, "remove"):
            verdict.counts["removed by id"] = len(gone & removed)

    return check


def _take_items(history: History, recipe: str) -> list[Op]:
    return [o for o in history.of(recipe, "take") if o.get("item") is not None]


def _queue_delivery(recipe: str, path: str) -> Callable[..., None]:
    """take(): every acknowledged item was delivered to a take that committed (then
    removed), or is still in the queue, or a take of it had an unknown outcome; a
    take that ended lost (TakeLostError: "the item goes back") must leave the item
    for another; an item whose take committed is not left in the queue."""

    def check(history: History, verdict: Verdict) -> None:
        ok, unknown_puts, failed = _put_items(history, recipe)
        takes = _take_items(history, recipe)
        committed = Counter(str(o.get("item")) for o in takes if o.status == "ok")
        delivered = {str(o.get("item")) for o in takes}
        unsure = {str(o.get("item")) for o in takes if o.status == "unknown"}
        remaining = _remaining(history, path)
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
        excused = _unknown_takes(history, recipe, path) - len(unsure)
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

    return check


def _queue_one_taker(recipe: str) -> Callable[..., None]:
    """take(): no item was committed twice, and no two takers held one item at once
    unless one of them was told it lost it."""

    def check(history: History, verdict: Verdict) -> None:
        by_item: dict[str, list[Op]] = {}
        for op in _take_items(history, recipe):
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

    return check


def _queue_due(recipe: str) -> Callable[..., None]:
    """DelayQueue: no item was delivered before its due time (both on the wall
    clock, which the recipe's consumers compare due times with; one machine)."""

    def check(history: History, verdict: Verdict) -> None:
        due = {
            str(o.args["item"]): int(o.args["due_ms"])
            for o in history.of(recipe, "put")
            if o.args.get("due_ms") is not None
        }
        delivered = [
            o
            for o in history.of(recipe)
            if o.kind in ("get", "take") and o.get("item") is not None and o.get("wall_ms")
        ]
        early = 0
        for op in delivered:
            item = str(op.get("item"))
            if item not in due:
                continue  # never put: the delivery check names it
            ahead = due[item] - int(op.get("wall_ms"))
            if ahead > DUE_SLACK_MS:
                early += 1
                verdict.problem(f"{op.id} got {item} {ahead} ms before it was due")
        delayed = [o for o in history.of(recipe, "put") if float(o.args.get("delay") or 0) > 0]
        verdict.checked = len(delivered)
        verdict.counts = {
            "deliveries": len(delivered),
            "puts with a delay": len(delayed),
            "delivered early": early,
        }

    return check


# --- ZooKeeper itself ----------------------------------------------------------------------


def _witness(history: History, verdict: Verdict) -> None:
    """Every create ZooKeeper acknowledged is still there at the end unless its node
    was deleted, and every delete it acknowledged stays done (nothing else
    touches these nodes). A loss here is the server's: it explains other
    checks' failures at the same time (a counter going back, a queue item
    taken twice)."""
    creates = [o for o in history.of("witness", "create") if o.status == "ok"]
    deletes = history.of("witness", "delete")
    records = history.final("witness")
    if not records:
        verdict.problem("the witness nodes were not listed at the end")
        return
    present = set(records[0].get("nodes") or [])
    # A delete that may have landed (ok or unknown) excuses its node's absence.
    deleted = {_node(o) for o in deletes if o.status != "fail"}
    missing = [o for o in creates if o.get("node") not in present | deleted]
    vanished = [o for o in deletes if o.error == "NoNodeError"]
    back = [o for o in deletes if o.status == "ok" and _node(o) in present]

    def span(ops: list[Op]) -> str:
        first, last = min(o.complete or 0 for o in ops), max(o.complete or 0 for o in ops)
        return f"acknowledged between t={first:.3f} and t={last:.3f}"

    if missing:
        verdict.problem(
            f"{len(missing)} acknowledged creates are gone ({span(missing)}): "
            f"{[o.get('node') for o in missing[:5]]}"
        )
    if vanished:
        verdict.problem(
            f"{len(vanished)} acknowledged creates were gone when deleted: "
            f"{[_node(o) for o in vanished[:5]]}"
        )
    if back:
        verdict.problem(
            f"{len(back)} acknowledged deletes were undone ({span(back)}): "
            f"{[_node(o) for o in back[:5]]}"
        )
    acknowledged = [o for o in deletes if o.status == "ok"]
    verdict.checked = len(creates) + len(acknowledged)
    verdict.counts = {
        "acknowledged creates": len(creates),
        "acknowledged deletes": len(acknowledged),
        "missing": len(missing) + len(vanished),
        "undone deletes": len(back),
    }


def _node(op: Op) -> str | None:
    """The witness node a delete was about (named when invoked, whatever its end)."""
    return op.args.get("node") or op.get("node")


# --- caches, orphans, workers, processes --------------------------------------------------


def _caches(what: str, kind: str) -> Callable[..., None]:
    """After the run, each worker's cache (``kind``, recorded as ``what``) holds
    what the server holds (data and mzxid of every node it covers)."""

    def check(history: History, verdict: Verdict) -> None:
        records = history.final(what)
        for record in records:
            if not record.get("equal"):
                detail = record.get("error") or (
                    f"missing {record.get('missing')}, extra {record.get('extra')}, "
                    f"stale {record.get('stale')}"
                )
                verdict.problem(
                    f"{record.get('worker')}: the {kind} differs from the server: {detail}"
                )
        verdict.checked = len(records)
        verdict.counts = {
            "caches compared": len(records),
            "nodes": max((int(r.get("nodes", 0)) for r in records), default=0),
        }

    return check


def _group(history: History, verdict: Verdict) -> None:
    """Once the workers stopped, the group as the server holds it is exactly the
    members still alive (those each worker kept for the whole run): every member
    that left is gone, and each alive one publishes the data it last set for sure."""
    alive: dict[str, dict[str, Any]] = {}
    for record in history.final("group-alive"):
        alive |= dict(record.get("members") or {})
    records = history.final("group")
    if not records or records[0].get("members") is None:
        error = records[0].get("error") if records else "not read"
        verdict.problem(f"the group was not read from the server at the end: {error}")
        return
    server: dict[str, str] = dict(records[0]["members"])
    for member in sorted(set(server) - set(alive)):
        verdict.problem(f"{member} is in the group, but no running member has that id")
    for member in sorted(set(alive) - set(server)):
        verdict.problem(f"{member} believes it is a member, but the group lacks it")
    unsure = 0
    for member in sorted(set(alive) & set(server)):
        if not alive[member].get("sure", True):
            unsure += 1
        elif alive[member].get("data") != server[member]:
            verdict.problem(
                f"{member} publishes {alive[member].get('data')} (hex), the server holds "
                f"{server[member]}"
            )
    joins = history.of("group", "join")
    verdict.checked = len(alive) + len(server)
    verdict.counts = {
        "alive": len(alive),
        "in the group": len(server),
        "joined and left": sum(1 for o in joins if o.status == "ok"),
        "updates": sum(1 for o in history.of("group", "update") if o.status == "ok"),
        "data not compared (last update unsure)": unsure,
    }


def _orphans(history: History, verdict: Verdict) -> None:
    """Once every worker stopped, no contender, lease, latch, group-member, barrier or
    taken-marker node is left.

    One exception: the DoubleBarrier's ``ready`` alone, when the stop cancelled
    enters. A round can fill (its last participant creates the persistent
    ``ready``) and then have every enter cancelled by the stop before anyone
    passed, so nobody is left to leave and delete it, as with Curator's barrier.
    The recipe removes such a ``ready`` at its next round (it is older than
    every node still there: ``_live_ready``), so it is no leak; the check
    still fails on a ``ready`` when no enter was cut short, or beside any other
    node."""
    records = history.final("orphans")
    if not records:
        verdict.problem("the recipe paths were not listed at the end")
    cut_short = any(op.error == "stopped" for op in history.of("barrier", "enter"))
    listed = excused = 0
    for record in records:
        for path, children in sorted((record.get("paths") or {}).items()):
            listed += 1
            if path == BARRIER and children == ["ready"] and cut_short:
                excused += 1
            elif children:
                verdict.problem(f"{path} still has {len(children)} children: {children[:5]}")
    verdict.checked = listed
    verdict.counts = {"paths listed": listed, "ready left by a round the stop cut short": excused}


def _workers(history: History, verdict: Verdict) -> None:
    """No worker hung: every operation ended within the watchdog's bound (and has
    its completion recorded), every driver ran until told to stop, every worker
    stopped when told to (none had to be killed)."""
    watchdog = [o for o in history.ops if (o.error or "").startswith("watchdog")]
    for op in watchdog:
        verdict.problem(f"{op.id} ({op.recipe} {op.kind}) {op.error}")
    for op in history.ops:
        if op.complete is None:
            verdict.problem(f"{op.id} ({op.recipe} {op.kind}, t={op.invoke:.3f}) never completed")
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


BLOCKED_BOUND = 2.0
"""How long a worker's loop may run nothing while its process runs: no call in a
worker (recipe or driver) should block it that long; a loaded host's lag is shorter."""


def _loop_free(history: History, verdict: Verdict) -> None:
    """No worker's event loop was blocked, by the library or by its driver: a stall
    (the loop ran nothing for half a second or more) during which the process
    itself ran for :data:`BLOCKED_BOUND` seconds or more (the stall watch's thread
    ran on time) is a call that never yields. A stall of the whole process (the
    host did not run it, the nemesis paused it) only excuses the holds it
    overlaps (:func:`_paused`)."""
    blocked = 0
    pauses = _nemesis_pauses(history)
    for stall in history.stalls:
        start, end = float(stall["from"]), float(stall["to"])
        ran = end - start - float(stall.get("frozen", 0.0))
        paused = _overlaps(pauses.get(str(stall.get("worker")), ()), start, end)
        if ran < BLOCKED_BOUND or paused:
            continue
        blocked += 1
        owner = "aiocoord" if stall.get("in_library") else "the worker's own code"
        where = "; ".join(stall.get("blocked_in") or []) or "not sampled"
        verdict.problem(
            f"{stall.get('worker')}: the event loop ran nothing from t={start:.3f} to "
            f"t={end:.3f} while the process ran {ran:.1f} s, blocked in {owner} ({where})"
        )
    verdict.checked = len(history.stalls)
    verdict.counts = {"stalls": len(history.stalls), "of which blocked": blocked}


def _stray_cancels(history: History, verdict: Verdict) -> None:
    """No operation raised CancelledError while nobody had cancelled its task: a
    recipe whose own cancel scope lets such an error escape ends its caller's task
    as if the caller had been cancelled."""
    stray = [o for o in history.ops if (o.error or "").startswith(STRAY_CANCEL)]
    for op in stray:
        verdict.problem(f"{op.id} ({op.recipe} {op.kind}, t={op.invoke:.3f}): {op.error}")
    verdict.checked = len(history.ops)
    verdict.counts = {"operations": len(history.ops), "stray cancellations": len(stray)}
    for recipe, times in sorted(Counter(o.recipe for o in stray).items()):
        verdict.counts[f"in {recipe}"] = times


def _driver_bugs(history: History, verdict: Verdict) -> None:
    """No operation failed on the driver's own mistake (an API it calls wrongly):
    such operations are recorded as unknown, and every check would pass over them."""
    bugs = [o for o in history.ops if (o.error or "").startswith(DRIVER_BUG)]
    for op in bugs[:20]:
        verdict.problem(f"{op.id} ({op.recipe} {op.kind}, t={op.invoke:.3f}): {op.error}")
    verdict.checked = len(history.ops)
    verdict.counts = {"operations": len(history.ops), "driver bugs": len(bugs)}


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
    Check(
        "mutex-local.store",
        "fenced writes of local hand-off Mutex holders never interleave",
        _store_exclusive("mutex-local"),
    ),
    Check(
        "mutex-local.told",
        "a local hand-off Mutex holder turned away was told",
        _loss_told("mutex-local", "mutex-local"),
    ),
    Check(
        "mutex-local.holds",
        "local hand-off Mutex holds without loss never overlap",
        _holds_exclusive("mutex-local"),
    ),
    Check(
        "semmutex.store",
        "fenced writes of SemaphoreMutex holders never interleave",
        _store_exclusive("semmutex"),
    ),
    Check(
        "semmutex.told",
        "a SemaphoreMutex holder turned away was told",
        _loss_told("semmutex", "semmutex"),
    ),
    Check(
        "semmutex.holds",
        "SemaphoreMutex holds without loss never overlap",
        _holds_exclusive("semmutex"),
    ),
    Check(
        "multilock.store",
        "fenced writes under either of the MultiLock's locks never interleave",
        _all_of(("a", _store_exclusive("multi-a")), ("b", _store_exclusive("multi-b"))),
    ),
    Check(
        "multilock.told",
        "a MultiLock (or lone second lock) holder turned away was told",
        _loss_told("multilock", "multi-a", "multi-b"),
    ),
    Check(
        "multilock.holds",
        "MultiLock holds and lone holds of its second lock never overlap",
        _holds_exclusive("multilock"),
    ),
    Check(
        "lease.store",
        "fenced writes of Lease holders never interleave",
        _store_exclusive("lease", unique_tokens=False),
    ),
    Check("lease.told", "a Lease holder turned away was told", _loss_told("lease", "lease")),
    Check(
        "lease.holds",
        "Lease holds without loss never overlap (none excused: the TTL is on the clock)",
        _holds_exclusive("lease", excuse=False),
    ),
    Check("leader.store", "leader terms never interleave in the store", _store_exclusive("leader")),
    Check("leader.told", "a leader turned away was told", _loss_told("leader", "leader")),
    Check("leader.terms", "terms without loss never overlap", _holds_exclusive("leader")),
    Check("latch.store", "latch terms never interleave in the store", _store_exclusive("latch")),
    Check("latch.told", "a latch leader turned away was told", _loss_told("latch", "latch")),
    Check("latch.terms", "latch terms without loss never overlap", _holds_exclusive("latch")),
    Check(
        "latch.handover",
        "a latch learns it lost leadership (changes() yields False) before another writes",
        _handover("latch", "latch"),
    ),
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
    Check(
        "sharedcount.cas",
        "SharedCount: one successful set per version, each from the previous write's value",
        _shared_count_cas,
    ),
    Check(
        "sharedcount.final",
        "SharedCount: the final value is the last write in version order",
        _shared_count_final,
    ),
    Check(
        "sharded.bounds",
        f"ShardedCounter: the total never leaves [0, {SHARDED_UPPER}]; refusals only without room",
        _sharded_bounds,
    ),
    Check(
        "sharded.total",
        "ShardedCounter: succeeded <= final <= succeeded + unknown (by delta)",
        _sharded_total,
    ),
    Check("barrier.enter", "nobody passes enter before `members` entered", _barrier),
    Check("gate.released", "a Barrier waiter is released only after a remove", _gate),
    Check("queue.once", "get(): every item taken exactly once", _queue_once("queue", QUEUE)),
    Check("queue.vanish", "get(): no acknowledged item vanishes", _queue_vanish("queue", QUEUE)),
    Check(
        "aqueue.delivery",
        "take(): every acknowledged item delivered, then removed; none vanish",
        _queue_delivery("aqueue", AQUEUE),
    ),
    Check("aqueue.taker", "take(): one committed taker per item", _queue_one_taker("aqueue")),
    Check(
        "pqueue.once",
        "PriorityQueue get(): every item taken exactly once",
        _queue_once("pqueue", PQUEUE),
    ),
    Check(
        "pqueue.vanish",
        "PriorityQueue get(): no acknowledged item vanishes",
        _queue_vanish("pqueue", PQUEUE),
    ),
    Check(
        "dqueue.delivery",
        "DelayQueue take(): every acknowledged item delivered, then removed; none vanish",
        _queue_delivery("dqueue", DQUEUE),
    ),
    Check(
        "dqueue.taker",
        "DelayQueue take(): one committed taker per item",
        _queue_one_taker("dqueue"),
    ),
    Check("dqueue.due", "DelayQueue: no item taken before it was due", _queue_due("dqueue")),
    Check(
        "idqueue.once",
        "IdQueue get(): every item taken exactly once",
        _queue_once("idqueue", IDQUEUE),
    ),
    Check(
        "idqueue.vanish",
        "IdQueue get(): no acknowledged item vanishes (but by remove(id))",
        _queue_vanish("idqueue", IDQUEUE),
    ),
    Check(
        "zookeeper.durable",
        "every create and delete ZooKeeper acknowledged holds (the server's promise)",
        _witness,
    ),
    Check(
        "cache.converged",
        "each TreeCache equals the server's tree after the run",
        _caches("cache", "TreeCache"),
    ),
    Check(
        "nodecache.converged",
        "each NodeCache equals the server's node after the run",
        _caches("node-cache", "NodeCache"),
    ),
    Check(
        "childrencache.converged",
        "each ChildrenCache equals the server's node and children after the run",
        _caches("children-cache", "ChildrenCache"),
    ),
    Check("group.members", "the group is exactly the members alive after the run", _group),
    Check(
        "discovery.listed",
        "a live registrant is listed (with its last payload); only live ones at the end",
        check_listed,
    ),
    Check(
        "discovery.dead-gone",
        "a killed registrant's instance disappears within a session timeout",
        check_dead_gone,
    ),
    Check("discovery.unique", "no listing or cache view holds an id twice", check_unique),
    Check(
        "discovery.cache",
        "each ServiceCache equals the server's instances after the run",
        check_cache,
    ),
    Check(
        "partition.store",
        "fenced writes of an item's owners never interleave",
        _all_of(
            *(
                # One grant serves many writes (operations), all with its token.
                (item, _store_exclusive(store_resource(item), unique_tokens=False))
                for item in PARTITION_ITEMS
            )
        ),
    ),
    Check(
        "partition.told",
        "a partitioner member turned away was told it lost the item",
        _loss_told("partition", *(store_resource(item) for item in PARTITION_ITEMS)),
    ),
    Check(
        "partition.fenced",
        "ZooKeeper refused every fenced write of an item's former owner",
        partition_fenced,
    ),
    Check(
        "partition.owned",
        "once the nemesis stopped every item has one owner, as its members believe",
        partition_owned,
    ),
    Check(
        "leadership.fenced",
        "at most one leader holds a valid fence: hand-overs, resigns and priority joins",
        check_fenced,
    ),
    Check(
        "leadership.handover",
        "a live hand-over target leads next, when no fault intervened",
        check_handover,
    ),
    Check(
        "orphans.none",
        "no contender, lease, latch, member, barrier or taken-marker node left",
        _orphans,
    ),
    Check("workers.none-hung", "no worker hung (every await bounded)", _workers),
    Check(
        "workers.loop-free",
        f"no worker's event loop was blocked (by aiocoord or its driver) for {BLOCKED_BOUND:g} s",
        _loop_free,
    ),
    Check(
        "workers.no-stray-cancel",
        "no operation raised a CancelledError nobody asked for",
        _stray_cancels,
    ),
    Check(
        "workers.no-driver-bug",
        "no operation failed on the driver's own mistake (a TypeError, AttributeError, ...)",
        _driver_bugs,
    ),
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
