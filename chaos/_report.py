"""The text report of a chaos run: operations, faults, invariants, gaps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._checks import Verdict
from ._history import STATUSES, History
from ._nemesis import FAULT_KINDS

__all__ = ["RECIPES", "STATIC_GAPS", "render"]

RECIPES = (
    "mutex",
    "mutex-local",
    "rwlock",
    "semaphore",
    "semmutex",
    "multilock",
    "lease",
    "leader",
    "latch",
    "counter",
    "bounded-counter",
    "shared-count",
    "sharded",
    "barrier",
    "gate",
    "queue",
    "aqueue",
    "pqueue",
    "dqueue",
    "idqueue",
    "group",
    "discovery",
    "leadership",
    "tree",
    "witness",
)
"""Every recipe a run drives (``tree`` is the writes the TreeCaches, NodeCaches and
ChildrenCaches follow; ``gate``, the plain Barrier; ``witness``, plain creates that
must all survive)."""

STATIC_GAPS = (
    "Not driven: LeaderElection.run(), LeaderLatch without leaving after each term, "
    "GroupMember.changes() and participants(), the caches' events() streams (only their final "
    "views are compared), Lease without keep_alive, SharedCount.set_count and listeners, "
    "IdQueue and PriorityQueue under take(), DelayQueue under get(), AtomicBytes.",
    "A holder that lost its hold is checked for being told only when the fenced store "
    "turned it away (or its node was found gone); a loss nobody else noticed in time "
    "leaves no trace to check. Only the latch is also checked for learning of its loss "
    "before the next leader writes (latch.handover).",
    "AtomicLong and AtomicInt: only increments are checked (and bounded adds); their "
    "compare_and_set, set, force_set and AtomicBytes.update are not driven.",
    "Queues: max_items, dead_letter, move_aside and put_many are not driven; get() and "
    "take() consumers use separate queues, as the recipe requires. The priority order of "
    "PriorityQueue and the FIFO order of the others are not checked.",
    "The stall-client fault holds every packet of one client both ways; no fault "
    "delays packets without dropping them, or drops one direction only.",
)


def _operations(history: History) -> list[str]:
    counts: Counter[tuple[str, str, str]] = Counter(
        (o.recipe, o.kind, o.status) for o in history.ops
    )
    kinds = sorted({(recipe, kind) for recipe, kind, _status in counts})
    lines = [f"  {'recipe':<16} {'operation':<10} {'ok':>7} {'fail':>7} {'unknown':>7}"]
    recipes = [r for r in RECIPES] + sorted({r for r, _k in kinds} - set(RECIPES))
    for recipe in recipes:
        rows = [kind for r, kind in kinds if r == recipe]
        for kind in rows:
            cells = [counts[(recipe, kind, status)] for status in STATUSES]
            lines.append(f"  {recipe:<16} {kind:<10} " + " ".join(f"{c:>7}" for c in cells))
        totals = [sum(counts[(recipe, kind, status)] for kind in rows) for status in STATUSES]
        lines.append(f"  {recipe:<16} {'(all)':<10} " + " ".join(f"{c:>7}" for c in totals))
    return lines


def _faults(history: History) -> list[str]:
    injected = Counter(str(f["kind"]) for f in history.faults)
    failed = Counter(str(f["kind"]) for f in history.faults if not f.get("ok"))
    lines = []
    for kind in [*FAULT_KINDS, *sorted(set(injected) - set(FAULT_KINDS))]:
        note = f" ({failed[kind]} could not be injected)" if failed[kind] else ""
        lines.append(f"  {kind:<18} {injected[kind]:>4}{note}")
    lines.append(f"  {'total':<18} {sum(injected.values()):>4}")
    for fault in history.faults:
        if not fault.get("ok"):
            lines.append(f"    t={fault['t']:.1f} {fault['kind']}: {fault.get('error')}")
    return lines


def _verdicts(verdicts: Sequence[Verdict]) -> list[str]:
    width = max((len(v.name) for v in verdicts), default=10)
    lines = []
    for verdict in verdicts:
        mark = "PASS" if verdict.passed else "FAIL"
        counts = ", ".join(f"{key} {value}" for key, value in verdict.counts.items())
        lines.append(f"  {mark}  {verdict.name:<{width}}  {verdict.title}")
        if counts:
            lines.append(f"        {'':<{width}}  ({counts})")
        for problem in verdict.problems:
            lines.append(f"        - {problem}")
        if verdict.problem_count > len(verdict.problems):
            lines.append(f"        - ... {verdict.problem_count - len(verdict.problems)} more")
    return lines


def render(
    history: History,
    verdicts: Sequence[Verdict],
    *,
    run_error: str | None,
    out: str,
    wall: float,
) -> str:
    meta: dict[str, Any] = history.meta
    passed = run_error is None and all(v.passed for v in verdicts)
    lines = [
        "aiocoord chaos run",
        f"  seed {meta.get('seed')}, duration {meta.get('duration')} s, "
        f"{meta.get('workers')} workers ({meta.get('members')} barrier members), "
        f"session timeout {meta.get('session_timeout')} s, wall time {wall:.1f} s",
        f"  ensemble: 3 members on {meta.get('connect', '?')}",
        f"  partitions: {meta.get('partitions')}",
        f"  history: {out}/history.jsonl",
        "",
        "Operations by recipe:",
        *_operations(history),
        "",
        "Faults injected by kind:",
        *_faults(history),
        "",
        "Invariants:",
        *_verdicts(verdicts),
        "",
        "Gaps (invariants nothing checked in this run, and what is not covered):",
    ]
    gaps = [v for v in verdicts if v.checked == 0]
    for verdict in gaps:
        lines.append(f"  - {verdict.name}: nothing to check in this run ({verdict.title})")
    if meta.get("partition_reason"):
        lines.append(f"  - no network partitions: {meta['partition_reason']}")
    for gap in STATIC_GAPS:
        lines.append(f"  - {gap}")
    pids = meta.get("pids") or {}
    if pids:
        lines += ["", "Processes started: " + ", ".join(f"{k} {v}" for k, v in pids.items())]
    lines.append("")
    if run_error is not None:
        lines.append(f"RUN ERROR: {run_error}")
    failed = [v.name for v in verdicts if not v.passed]
    lines.append(
        "RESULT: PASS (every invariant held)"
        if passed
        else f"RESULT: FAIL ({', '.join(failed) or 'the run did not complete'})"
    )
    return "\n".join(lines) + "\n"
