"""Turn the driver's runs into the report: medians, ratios, a markdown table, a chart.

``python -m bench.report bench/results/<date>.json`` renders the markdown and
the chart again from a saved JSON document.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["summarize", "write"]

Row = dict[str, Any]
OURS = "aiocoord"
PEERS = ("curator", "curator/promoted", "kazoo", "aiozk", "java")
COLORS = {
    "aiocoord": "#1f77b4",
    "aiocoord/shared-client": "#6baed6",
    "aiocoord/local-handoff": "#08306b",
    "curator": "#d62728",
    "curator/promoted": "#ff9896",
    "kazoo": "#2ca02c",
    "aiozk": "#ff7f0e",
    "java": "#7f7f7f",
}
UNITS = {
    "mutex": "hand-offs/s",
    "counter": "increments/s",
    "bounded": "increments/s",
    "pipelined": "sets/s",
    "latency": "round trips/s",
    "election": "hand-overs/s",
    "barrier": "rounds/s",
    "queue": "items/s",
    "drain": "items/s",
    "cache_build": "nodes/s",
    "cache_events": "events/s",
    "discovery_events": "changes seen/s",
    "discovery_pick": "picks/s",
    "memory": "hand-offs/s",
}
NOISY_CORES = 0.25
"""Runs during which other processes used more CPU than this are flagged as noisy."""
TELEMETRY = "aiocoord-telemetry"
"""The telemetry runner's library (bench/runners/telemetry_runner.py): aiocoord's own
mutex and counter loops, once per OpenTelemetry set-up (its variants)."""
TELEMETRY_BASELINE = "no-otel"
"""The set-up every other telemetry set-up is compared with, in the same run."""
TELEMETRY_SETUPS = {
    "no-otel": "no OpenTelemetry installed: the baseline",
    "api": "API only, no SDK configured",
    "sdk": "SDK, every span sampled, batch span processor",
    "sdk-sampled": "SDK, 1 trace in 100, batch span processor",
    "sdk-simple": "SDK, every span exported synchronously to memory",
    "sdk-requests": "SDK, batch span processor, plus request metrics",
}
"""What each telemetry variant measures (bench/telemetry_setups.py), in the order the
tables list them; a variant not named here is shown by its name only. Results before
2026-11-26 name the synchronous in-memory set-up ``sdk``."""


# --- medians ------------------------------------------------------------------------------


def _label(run: Row) -> str:
    return f"{run['library']}/{run['variant']}" if run.get("variant") else str(run["library"])


def _named(label: str) -> str:
    """A label as tables and legends show it: a telemetry variant with its set-up,
    since the label alone ("aiocoord-telemetry/api") does not say what was measured."""
    library, _, variant = label.partition("/")
    setup = TELEMETRY_SETUPS.get(variant) if library == TELEMETRY else None
    return f"{label} ({setup})" if setup else label


def _measure(scenario: str) -> Callable[[Row], float]:
    """What a scenario's median run is chosen by: its rate, or for the scenarios
    measured as a latency per event, that latency's p50."""
    kind = LATENCY_MEASURED.get(scenario)
    if kind is None:
        return lambda run: float(run["rate"])
    return lambda run: float(run["latency_ms"].get(kind, {}).get("p50", math.inf))


DEFAULT_SERVER = "default"
"""The server configuration of runs recorded before there were several."""


def summarize(runs: Iterable[Row]) -> list[Row]:
    """One row per (server configuration, scenario, library, variant, contenders):
    the numbers of the run with the median rate (the lower middle one for an even
    count), its spread over the runs, and a violation or error in place of numbers
    if any run had one."""
    groups: dict[tuple[str, str, str, int], list[Row]] = {}
    for run in runs:
        key = (run.get("server", DEFAULT_SERVER), run["scenario"], _label(run), run["contenders"])
        groups.setdefault(key, []).append(run)
    rows = []
    for (server, scenario, label, contenders), group in groups.items():
        row: Row = {
            "server": server,
            "scenario": scenario,
            "label": label,
            "library": group[0]["library"],
            "variant": group[0]["variant"],
            "contenders": contenders,
            "runs": len(group),
            "other_cores_max": max(r.get("cpu", {}).get("other_cores", 0.0) for r in group),
        }
        good = [r for r in group if "error" not in r]
        violations = [r["violation"] for r in good if r.get("violation")]
        if not good:
            row["error"] = group[0]["error"]
        elif violations:
            row["violation"] = violations[0]
        else:
            measure = _measure(scenario)
            ordered = sorted(good, key=measure)
            median = ordered[(len(ordered) - 1) // 2]
            for key in ("rate", "ops", "window_s", "latency_ms", "conflicts", "failures"):
                row[key] = median[key]
            row["extra"] = median.get("extra", {})
            if median.get("server_packets") is not None:
                row["server_packets"] = median["server_packets"]
            values = [measure(r) for r in good]
            row["rate_spread"] = (
                (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0
            )
            if len(good) < len(group):
                row["partial"] = f"{len(group) - len(good)} of {len(group)} runs failed"
        rows.append(row)
    return rows


# --- formatting ------------------------------------------------------------------------------


def _ok(row: Row | None) -> bool:
    return row is not None and "error" not in row and "violation" not in row


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value:.3f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    if not ours or not theirs:
        return "—"
    return f"{ours / theirs:.2f}x"


def _latency(row: Row | None, kind: str, point: str) -> float | None:
    if not _ok(row):
        return None
    assert row is not None
    value = row["latency_ms"].get(kind, {}).get(point)
    return float(value) if value is not None else None


def _check(row: Row) -> str:
    if "error" in row:
        return f"**error**: {row['error']}"
    if "violation" in row:
        return f"**VIOLATION**: {row['violation']}"
    return "ok" + (f" ({row['partial']})" if "partial" in row else "")


def _table(header: Sequence[str], body: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines


class _Index:
    """Rows looked up by (scenario, label, contenders)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        self._by = {(r["scenario"], r["label"], r["contenders"]): r for r in rows}

    def get(self, scenario: str, label: str, contenders: int) -> Row | None:
        return self._by.get((scenario, label, contenders))

    def of(self, scenario: str) -> list[Row]:
        def order(row: Row) -> tuple[int, int, str]:
            label = row["label"]
            rank = 0 if label == OURS else 1 if label.startswith(OURS) else 2
            return row["contenders"], rank, label

        return sorted((r for r in self.rows if r["scenario"] == scenario), key=order)

    def peers(self, scenario: str) -> list[str]:
        present = {r["label"] for r in self.rows if r["scenario"] == scenario}
        known = [p for p in PEERS if p in present]
        return known + sorted(present - set(known) - {r for r in present if r.startswith(OURS)})


# --- markdown ----------------------------------------------------------------------------------


def servers(document: Row) -> list[Row]:
    """The document's server configurations, headline first (older documents had one)."""
    config = document["config"]
    if "servers" in config:
        return list(config["servers"])
    return [{"name": DEFAULT_SERVER, "title": config["server"]}]


def _warmed(server: Row) -> str:
    """How long the fresh servers were loaded before the first run (older documents: unknown)."""
    seconds = server.get("server_warmup_s")
    return "" if seconds is None else f", loaded for {seconds:g} s before the first run"


def _rows_of(document: Row, server: str) -> list[Row]:
    return [r for r in document["results"] if r.get("server", DEFAULT_SERVER) == server]


def markdown(document: Row) -> str:
    config, versions, machine = document["config"], document["versions"], document["machine"]
    configs = servers(document)
    lines = [
        f"# aiocoord benchmark, {document['date']}",
        "",
        f"- Machine: {machine['nproc']} cores ({machine['cpu']}), {machine['memory']}, "
        f"Linux {machine['kernel']}",
        "- Software: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
        "- Servers: "
        + "; ".join(f"**{c['name']}**: {c['title']}{_warmed(c)}" for c in configs)
        + ". Each configuration runs on fresh servers, pinned to core 0; every library's "
        "runner is one process pinned to core 1"
        + ("" if config["pinned"] else " (**not pinned this time**: see notes)")
        + ". Every contender has its own session unless marked *shared-client* "
        "(tasks of one process sharing one client) or *local-handoff* (the same, sharing "
        "one `Mutex(local_handoff=64)`).",
        f"- Each number is the median of {config['repeat']} run(s) of {config['seconds']:g} s "
        f"measured after {config['warmup_s']:g} s of warm-up; *spread* is (max - min) / median "
        "of the rates over those runs. Latencies are in milliseconds.",
        "- Ratios are aiocoord ÷ peer, both measured in this run on the same server: above 1 "
        "aiocoord does more per second; for latencies, below 1 aiocoord is quicker.",
        _load_line(document),
        "",
    ]
    for server in configs:
        index = _Index(_rows_of(document, server["name"]))
        if not index.rows:
            continue
        body: list[str] = []
        body += _headline(index)
        body += _throughput_section(index, "mutex", "Mutex hand-offs", "acquire")
        body += _counter_section(index)
        body += _counter_section(
            index,
            "bounded",
            "Bounded counter: one znode against a sharded one (escrow)",
            base=BOUNDED_BASE,
            intro="Bounded increments with the bound far away (nothing sells out): "
            "single-znode is AtomicLong.increment(upper=...), sharded is "
            "ShardedCounter(upper=...) with its default 8 shards; every contender "
            "has its own session.",
        )
        body += _throughput_section(index, "pipelined", "Pipelined sets on one node", "set")
        body += _latency_section(index)
        body += _coordination_section(index)
        body += _queue_section(index)
        body += _cache_section(index)
        body += _discovery_section(index)
        body += _memory_section(index)
        body += _telemetry_section(index)
        if len(configs) > 1:
            lines += [f"# Server {server['name']}: {server['title']}", ""]
            body = ["#" + line if line.startswith("## ") else line for line in body]
        lines += body
    notes = list(document.get("notes", []))
    notes += [
        f"{r.get('server', '')} {r['scenario']} x{r['contenders']} {r['label']}: ".lstrip()
        + _check(r)
        for r in document["results"]
        if not _ok(r)
    ]
    noisy = [r for r in document["results"] if r.get("other_cores_max", 0) > NOISY_CORES]
    if noisy:
        notes.append(
            f"Noisy (other processes used over {NOISY_CORES} cores during a run): "
            + ", ".join(
                f"{r.get('server', '')} {r['scenario']} x{r['contenders']} {r['label']} "
                f"({r['other_cores_max']:.2f})"
                for r in noisy
            )
        )
    if notes:
        lines += ["## Notes", "", *[f"- {note}" for note in notes], ""]
    return "\n".join(lines)


def _load_line(document: Row) -> str:
    loads = [r["cpu"]["other_cores"] for r in document["runs"] if "cpu" in r]
    if not loads:
        return ""
    return (
        "- Other processes on the machine used on average "
        f"{statistics.mean(loads):.2f} cores during runs (at most {max(loads):.2f}); "
        f"each run first waited up to 10 s for them to fall under 0.2 cores."
    )


def _headline(index: _Index) -> list[str]:
    labels = {r["label"] for r in index.rows}
    libraries = {r["library"] for r in index.rows}
    peers = [p for p in PEERS if p in labels or ("/" not in p and p in libraries)]
    body = []
    for scenario in ("mutex", "counter", "pipelined"):
        for ours in index.of(scenario):
            if not ours["label"].startswith(OURS):
                continue
            cells = [
                f"{scenario} {UNITS[scenario]}, {_contenders(ours)}",
                _rate(ours["rate"]) if _ok(ours) else _check(ours),
            ]
            for peer in peers:
                theirs = index.get(scenario, peer, ours["contenders"])
                ok = _ok(ours) and _ok(theirs)
                cells.append(_ratio(ours["rate"], theirs["rate"]) if ok and theirs else "—")
            body.append(cells)
    for kind in ("get", "set"):
        for point in ("p50", "p99"):
            ours_row = index.get("latency", OURS, 1)
            mine = _latency(ours_row, kind, point)
            if mine is None:
                continue
            cells = [f"{kind} round trip {point} (ms, lower is better)", _ms(mine)]
            cells += [
                _ratio(mine, _latency(index.get("latency", p, 1), kind, point)) for p in peers
            ]
            body.append(cells)
    for scenario, kind in COORDINATION.items():
        for ours in index.of(scenario):
            if ours["label"] != OURS:
                continue
            for point in ("p50", "p99"):
                mine = _latency(ours, kind, point)
                if mine is None:
                    continue
                cells = [f"{TITLES[scenario]} {point}, {_contenders(ours)} (ms, lower is better)"]
                cells.append(_ms(mine))
                cells += [
                    _ratio(mine, _latency(index.get(scenario, p, ours["contenders"]), kind, point))
                    for p in peers
                ]
                body.append(cells)
    body += _family_headline(index, peers)
    if not body:
        return []
    header = ["measurement", "aiocoord", *[f"aiocoord ÷ {p}" for p in peers]]
    lines = ["## aiocoord against its peers", "", *_table(header, body), ""]
    return lines


def _best(
    index: _Index, scenario: str, column: str, contenders: int, value: Callable[[Row], float | None]
) -> Row | None:
    """The best row of a peer column in a scenario where libraries run in several
    variants: the column's own label, or (a library's column) its best variant.
    ``value`` is higher-is-better."""
    rows = [
        r
        for r in index.of(scenario)
        if r["contenders"] == contenders
        and _ok(r)
        and value(r) is not None
        and (r["label"] == column or ("/" not in column and r["library"] == column))
    ]
    return max(rows, key=lambda r: value(r) or 0.0, default=None)


def _family_headline(index: _Index, peers: Sequence[str]) -> list[list[str]]:
    """Headline rows of the queue and cache scenarios: each peer column compares
    with that library's best variant (named in the cell), and the measurement
    names the best peer overall."""
    rows: list[tuple[str, Row, Callable[[Row], float | None], bool, Callable[[float], str]]] = []
    for ours in index.of("queue"):
        if ours["label"] == OURS:
            n = ours["contenders"]
            title = f"queue items/s, {n} consumer{'s' if n != 1 else ''}"
            rows.append((title, ours, lambda r: r.get("rate"), False, _rate))
    for ours in index.of("drain"):
        if ours["label"] == OURS:
            rows.append(
                ("queue drain items/s (10,000 items)", ours, lambda r: r.get("rate"), False, _rate)
            )
    for ours in index.of("cache_build"):
        if ours["label"] == OURS:
            rows.append(
                (
                    "cache build seconds (s, lower is better)",
                    ours,
                    lambda r: (r.get("extra") or {}).get("build_s"),
                    True,
                    lambda v: f"{v:.2f}",
                )
            )
    for ours in index.of("cache_events"):
        if ours["label"] == OURS:
            for point in ("p50", "p99"):
                rows.append(
                    (
                        f"cache event {point} under 1,000 sets/s (ms, lower is better)",
                        ours,
                        lambda r, p=point: _latency(r, "event", p),
                        True,
                        _ms,
                    )
                )
    body = []
    for title, ours, value, lower, shown in rows:
        mine = value(ours) if _ok(ours) else None
        if mine is None:
            body.append([title, _check(ours), *["—" for _ in peers]])
            continue

        def better(
            r: Row, value: Callable[[Row], float | None] = value, lower: bool = lower
        ) -> float | None:
            v = value(r)
            return None if v is None else (-v if lower else v)

        cells = [title, shown(mine)]
        found: list[Row] = []
        for peer in peers:
            theirs = _best(index, ours["scenario"], peer, ours["contenders"], better)
            if theirs is None:
                cells.append("—")
                continue
            found.append(theirs)
            named = f" ({theirs['variant']})" if theirs["label"] != peer else ""
            cells.append(_ratio(mine, value(theirs)) + named)
        if found:
            top = max(found, key=lambda r: better(r) or 0.0)
            cells[0] += f"; best peer {top['label']}: {_ratio(mine, value(top))}"
        body.append(cells)
    return body


def _contenders(row: Row) -> str:
    n = row["contenders"]
    shared = {
        "shared-client": " (one shared client)",
        "local-handoff": " (one shared client, local hand-off)",
    }.get(row["variant"], "")
    if row["library"] == TELEMETRY:
        setup = TELEMETRY_SETUPS.get(row["variant"], row["variant"])
        shared = f", telemetry {row['variant']}: {setup}"
    return f"{n} contender{'s' if n != 1 else ''}{shared}"


def _vs_ours(index: _Index, row: Row, value: Callable[[Row], float | None]) -> str:
    if row["label"].startswith(OURS) or not _ok(row):
        return "—"
    ours = index.get(row["scenario"], OURS, row["contenders"])
    return _ratio(value(ours), value(row)) if ours is not None and _ok(ours) else "—"


def _throughput_section(index: _Index, scenario: str, title: str, kind: str) -> list[str]:
    rows = index.of(scenario)
    if not rows:
        return []
    body = []
    for row in rows:
        ok = _ok(row)
        body.append(
            [
                str(row["contenders"]),
                _named(row["label"]),
                _rate(row["rate"]) if ok else "—",
                f"{row['rate_spread']:.0%}" if ok else "—",
                _ms(_latency(row, kind, "p50")),
                _ms(_latency(row, kind, "p99")),
                _vs_ours(index, row, lambda r: r.get("rate")),
                _check(row),
            ]
        )
    header = [
        "contenders",
        "library",
        UNITS[scenario],
        "spread",
        f"{kind} p50",
        f"{kind} p99",
        "aiocoord ÷ this",
        "check",
    ]
    return [f"## {title}", "", *_table(header, body), ""]


BOUNDED_BASE = "aiocoord/single-znode"
"""The bounded scenario's rows are compared with this one (AtomicLong with ``upper``)."""


def _versus(index: _Index, row: Row, base: str) -> str:
    """This row's rate ÷ the ``base`` row's at the same contender count."""
    theirs = index.get(row["scenario"], base, row["contenders"])
    if row["label"] == base or not _ok(row) or theirs is None or not _ok(theirs):
        return "—"
    return _ratio(row["rate"], theirs["rate"])


def _counter_section(
    index: _Index,
    scenario: str = "counter",
    title: str = "Counter increments (compare-and-set)",
    base: str | None = None,
    intro: str = "",
) -> list[str]:
    """The counter table; with ``base``, the ratio column is each row ÷ that row."""
    rows = index.of(scenario)
    if not rows:
        return []
    body = []
    for row in rows:
        ok = _ok(row)
        per_increment = row["conflicts"] / row["ops"] if ok and row["ops"] else 0.0
        body.append(
            [
                str(row["contenders"]),
                _named(row["label"]),
                _rate(row["rate"]) if ok else "—",
                f"{row['rate_spread']:.0%}" if ok else "—",
                _ms(_latency(row, "increment", "p50")),
                _ms(_latency(row, "increment", "p99")),
                f"{per_increment:.2f}" if ok else "—",
                f"{row['failures']:,}" if ok else "—",
                _vs_ours(index, row, lambda r: r.get("rate"))
                if base is None
                else _versus(index, row, base),
                _check(row),
            ]
        )
    header = [
        "contenders",
        "library",
        "increments/s",
        "spread",
        "p50",
        "p99",
        "failed CAS per increment",
        "failed increments",
        "aiocoord ÷ this" if base is None else f"this ÷ {base}",
        "check (final value = successes)",
    ]
    return [f"## {title}", "", *([intro, ""] if intro else []), *_table(header, body), ""]


def _latency_section(index: _Index) -> list[str]:
    rows = index.of("latency")
    if not rows:
        return []
    ours = index.get("latency", OURS, 1)
    body = []
    for row in rows:
        cells = [row["label"]]
        for kind in ("get", "set"):
            cells += [_ms(_latency(row, kind, "p50")), _ms(_latency(row, kind, "p99"))]
        for kind in ("get", "set"):
            mine = _latency(ours, kind, "p50")
            theirs = _latency(row, kind, "p50")
            cells.append("—" if row["label"].startswith(OURS) else _ratio(mine, theirs))
        cells.append(_check(row))
        body.append(cells)
    header = [
        "library",
        "get p50",
        "get p99",
        "set p50",
        "set p99",
        "aiocoord ÷ this (get p50)",
        "aiocoord ÷ this (set p50)",
        "check",
    ]
    return ["## Single round trips (sequential set, then get)", "", *_table(header, body), ""]


COORDINATION = {"election": "handover", "barrier": "release"}
"""Scenarios measured as a latency per event, and the sample kind each records."""
TITLES = {"election": "leader hand-over", "barrier": "double barrier release"}
LATENCY_MEASURED = {**COORDINATION, "cache_events": "event", "discovery_events": "event"}
"""Every scenario whose median run is chosen by a latency's p50, and its kind."""


def _coordination_section(index: _Index) -> list[str]:
    body = []
    for scenario, kind in COORDINATION.items():
        for row in index.of(scenario):
            ok = _ok(row)
            n = (row.get("latency_ms", {}).get(kind) or {}).get("n", 0)
            cells = [TITLES[scenario], str(row["contenders"]), row["label"]]
            cells.append(f"{n:,}" if ok else "—")
            cells += [_ms(_latency(row, kind, "p50")), _ms(_latency(row, kind, "p99"))]
            for point in ("p50", "p99"):
                cells.append(_vs_ours(index, row, lambda r, k=kind, p=point: _latency(r, k, p)))
            cells.append(_check(row))
            body.append(cells)
    if not body:
        return []
    header = [
        "measurement",
        "participants",
        "library",
        "samples",
        "p50",
        "p99",
        "aiocoord ÷ this (p50)",
        "aiocoord ÷ this (p99)",
        "check",
    ]
    return [
        "## Leader hand-over and double barrier release (ms)",
        "",
        "Hand-over: from one leader giving leadership up to the next leader's term "
        "starting (every participant in its own session, re-queueing after each term). "
        "Release: from the last participant's enter call until every participant's "
        "enter has returned.",
        "",
        *_table(header, body),
        "",
    ]


def _requests_per_item(row: Row) -> str:
    """The server's received packets during the whole run, per item taken in it
    (the drain's warm-up included)."""
    extra = row.get("extra") or {}
    items = extra.get("items", 0) + extra.get("warm_items", 0)
    packets = row.get("server_packets")
    if not _ok(row) or not items or packets is None:
        return "—"
    return f"{packets / items:.1f}"


def _queue_check(row: Row) -> str:
    if not _ok(row):
        return _check(row)
    extra = row.get("extra", {})
    text = (
        f"ok: {extra.get('items', 0):,} items, {extra.get('duplicates', 0)} twice, "
        f"{extra.get('lost', 0)} lost"
    )
    if "gave_up_after_s" in extra:
        text += f" (gave up after {extra['gave_up_after_s']:g} s, not all taken)"
    return text + (f" ({row['partial']})" if "partial" in row else "")


def _queue_section(index: _Index) -> list[str]:
    lines: list[str] = []
    body = []
    for row in index.of("queue"):
        ok = _ok(row)
        body.append(
            [
                str(row["contenders"]),
                _named(row["label"]),
                _rate(row["rate"]) if ok else "—",
                f"{row['rate_spread']:.0%}" if ok else "—",
                _ms(_latency(row, "take", "p50")),
                _ms(_latency(row, "take", "p99")),
                _requests_per_item(row),
                _vs_ours(index, row, lambda r: r.get("rate")),
                _queue_check(row),
            ]
        )
    if body:
        header = [
            "consumers",
            "library",
            "items/s",
            "spread",
            "take p50",
            "take p99",
            "server requests per item",
            "aiocoord ÷ this",
            "check (every item taken exactly once)",
        ]
        lines += [
            "## Queues: items through one queue",
            "",
            "One producer (8 puts outstanding, at most 200 items waiting) and 1, 4 or 8 "
            "consumers, each in its own session. After the window the producer stops and "
            "the consumers take what is left; every acknowledged item must have been taken "
            "exactly once. Server requests per item: packets the server received during the "
            "whole run (puts, takes, watches, pings) per item taken. Variants: aiocoord/take "
            "and kazoo/locking take at least once (the item stays until the consumer is done); "
            "curator/simple is SimpleDistributedQueue, curator/distributed DistributedQueue "
            "with a QueueConsumer (it calls no take, so it has no take latency).",
            "",
            *_table(header, body),
            "",
        ]
    body = []
    for row in index.of("drain"):
        ok = _ok(row)
        extra = row.get("extra", {})
        body.append(
            [
                row["label"],
                _rate(row["rate"]) if ok else "—",
                f"{row['rate_spread']:.0%}" if ok else "—",
                f"{extra['drain_s']:.1f} s" if ok and "drain_s" in extra else "—",
                _ms(_latency(row, "take", "p50")),
                _ms(_latency(row, "take", "p99")),
                _rate(extra["produce_rate"]) if ok and "produce_rate" in extra else "—",
                _requests_per_item(row),
                _vs_ours(index, row, lambda r: r.get("rate")),
                _queue_check(row),
            ]
        )
    if body:
        header = [
            "library",
            "items/s drained",
            "spread",
            "drain time",
            "take p50",
            "take p99",
            "items/s produced",
            "server requests per item (put + take)",
            "aiocoord ÷ this",
            "check (every item taken exactly once)",
        ]
        lines += [
            "## Queues: produce 10,000 items, then drain them with one consumer",
            "",
            *_table(header, body),
            "",
        ]
    return lines


def _cache_section(index: _Index) -> list[str]:
    lines: list[str] = []

    def build_s(row: Row | None) -> float | None:
        if row is None or not _ok(row):
            return None
        value = row.get("extra", {}).get("build_s")
        return float(value) if value is not None else None

    body = []
    for row in index.of("cache_build"):
        ok = _ok(row)
        extra = row.get("extra", {})
        heap = extra.get("heap_per_node_bytes")
        body.append(
            [
                row["label"],
                f"{extra['nodes']:,}" if ok else "—",
                _ms(build_s(row)),
                f"{row['rate_spread']:.0%}" if ok else "—",
                f"{extra['rss_per_node_bytes']:,.0f} B" if ok else "—",
                f"{heap:,.0f} B" if ok and heap is not None else "—",
                _vs_ours(index, row, build_s),
                _check(row),
            ]
        )
    if body:
        header = [
            "library",
            "nodes",
            "seconds to build",
            "spread",
            "RSS growth per node",
            "heap per node (after GC)",
            "aiocoord ÷ this (seconds)",
            "check (view = tree)",
        ]
        lines += [
            "## Caches: building a tree cache",
            "",
            "A tree of 10 x 10 x 100 nodes with 100-byte values, created before the "
            "measurement; the time from starting the cache until it reports itself "
            "initialized, in a session of its own. Memory: the client process's RSS growth "
            "(after a garbage collection) while the cache is open, per node; the JVM's RSS "
            "says little (its heap grows and shrinks on its own), so Java also reports the "
            "used heap after a GC. The warm-up builds and closes caches of a 1,110-node tree.",
            "",
            *_table(header, body),
            "",
        ]
    body = []
    for row in index.of("cache_events"):
        ok = _ok(row)
        extra = row.get("extra", {})
        n = (row.get("latency_ms", {}).get("event") or {}).get("n", 0)
        cells = [row["label"], f"{n:,}" if ok else "—"]
        cells.append(_rate(extra["sets_per_s"]) if ok and "sets_per_s" in extra else "—")
        cells += [_ms(_latency(row, "event", p)) for p in ("p50", "p99", "max")]
        cells.append(f"{extra.get('missed_events', 0):,}" if ok else "—")
        for point in ("p50", "p99"):
            cells.append(_vs_ours(index, row, lambda r, p=point: _latency(r, "event", p)))
        cells.append(_check(row))
        body.append(cells)
    if body:
        header = [
            "library",
            "events",
            "sets/s sent",
            "p50",
            "p99",
            "max",
            "sets never seen as an event",
            "aiocoord ÷ this (p50)",
            "aiocoord ÷ this (p99)",
            "check (view = last sets)",
        ]
        lines += [
            "## Caches: event latency (ms)",
            "",
            "A cache of a 1,110-node tree (1,000 leaves) while another client of the same "
            "process, in its own session, sets 1,000 leaves per second (each leaf once a "
            "second), every value carrying its send time: from the set being sent to the "
            "cache's listener seeing the new value. Afterwards the view must hold the last "
            "value set on every leaf.",
            "",
            *_table(header, body),
            "",
        ]
    return lines


def _ns_per_pick(row: Row | None, point: str, kind: str = "batch") -> float | None:
    """A discovery_pick row's cost of one pick in ns: a batch's time at ``point`` (on
    the clock, or ``kind="cpu"``: the thread's CPU time) over the batch's size."""
    batch = _latency(row, kind, point)
    if batch is None or row is None:
        return None
    return batch * 1e6 / float(row.get("extra", {}).get("batch") or 1)


def _discovery_section(index: _Index) -> list[str]:
    """Service discovery: cache event latency under churn, and the cost of a pick."""
    lines: list[str] = []
    body = []
    for row in index.of("discovery_events"):
        ok = _ok(row)
        n = (row.get("latency_ms", {}).get("event") or {}).get("n", 0)
        cells = [str(row["contenders"]), row["label"], f"{n:,}" if ok else "—"]
        cells += [_ms(_latency(row, "event", p)) for p in ("p50", "p99", "max")]
        cells += [_ms(_latency(row, kind, "p50")) for kind in ("register", "unregister")]
        cells.append(f"{row['rate_spread']:.0%}" if ok else "—")
        for point in ("p50", "p99"):
            cells.append(_vs_ours(index, row, lambda r, p=point: _latency(r, "event", p)))
        cells.append(_check(row))
        body.append(cells)
    if body:
        header = [
            "watchers",
            "library",
            "changes seen",
            "p50",
            "p99",
            "max",
            "register p50",
            "unregister p50",
            "spread (p50)",
            "aiocoord ÷ this (p50)",
            "aiocoord ÷ this (p99)",
            "check (every view = the registrant's instances)",
        ]
        lines += [
            "## Service discovery: cache event latency under registration churn (ms)",
            "",
            "N watchers, each a service cache in a session of its own (all in one process), "
            "follow one service while a registrant (another session of that process) "
            "unregisters its oldest instance and registers a new one, alternately, 100 times "
            "a second (about 20 instances live; Curator's JSON with a map payload): from the "
            "registrant's call starting to each watcher's cache showing the change. aiocoord "
            "`ServiceDiscovery.cache()` (its event stream), Curator `ServiceCache` (its "
            "listener says only that something changed: each watcher compares the ids it "
            "holds). Afterwards every watcher must hold exactly the registrant's instances.",
            "",
            *_table(header, body),
            "",
        ]
    body = []
    for row in index.of("discovery_pick"):
        ok = _ok(row)
        strategy = row["variant"]
        mine = index.get("discovery_pick", f"{OURS}/{strategy}", row["contenders"])
        cells = [row["library"], strategy.replace("_", " ")]
        median, p99 = _ns_per_pick(row, "p50"), _ns_per_pick(row, "p99")
        cpu = _ns_per_pick(row, "p50", "cpu")
        for value in (cpu, median, p99):
            cells.append(f"{value:,.0f}" if value else "—")
        cells.append(_rate(row["rate"]) if ok else "—")
        cells.append(f"{row['rate_spread']:.0%}" if ok else "—")
        ratios = ["—", "—"]
        if row["library"] != OURS and _ok(mine):
            ratios = [
                _ratio(_ns_per_pick(mine, "p50", "cpu"), cpu),
                _ratio(_ns_per_pick(mine, "p50"), median),
            ]
        cells += [*ratios, _check(row)]
        body.append(cells)
    if body:
        header = [
            "library",
            "strategy",
            "ns per pick (CPU time, median batch)",
            "ns per pick (clock, median batch)",
            "ns per pick (clock, p99 batch)",
            "picks/s",
            "spread",
            "aiocoord ÷ this (CPU time, same strategy)",
            "aiocoord ÷ this (clock, same strategy)",
            "check",
        ]
        lines += [
            "## Service discovery: the cost of a pick (ns)",
            "",
            "A provider over a service of 10 instances (registered by another session, "
            "already in its cache) asked for an instance in a loop, timed per batch of "
            "1,000 picks, on the clock and in the picking thread's CPU time (which leaves "
            "out the time it was preempted: the figure to read on a busy machine); the cost "
            "of a pick is a batch's time over 1,000. aiocoord "
            "`discovery.provider(name, strategy=...)`, Curator `ServiceProvider` with "
            "`RoundRobinStrategy` and `RandomStrategy` (Curator has no power-of-two or "
            "least-outstanding strategy). Checked after the loop: no pick without an "
            "instance, every instance picked, round robin even within one.",
            "",
            *_table(header, body),
            "",
        ]
    return lines


def _memory_section(index: _Index) -> list[str]:
    rows = index.of("memory")
    if not rows:
        return []
    body = []
    for row in rows:
        extra = row.get("extra", {})
        ok = _ok(row) and "rss_per_waiter_bytes" in extra
        body.append(
            [
                f"{row['contenders']:,}",
                f"{extra['rss_per_waiter_bytes'] / 1024:,.1f} KiB" if ok else "—",
                f"{extra['queue_s']:.1f} s" if ok else "—",
                f"{extra['server_znodes_per_waiter']:.2f}" if ok else "—",
                f"{extra['server_watches_per_waiter']:.2f}" if ok else "—",
                _rate(row["rate"]) if ok else "—",
                f"{extra['peak_rss_kib'] / 1024:,.0f} MiB" if ok else "—",
                _check(row),
            ]
        )
    header = [
        "waiters",
        "client RSS per waiter",
        "time until all queued",
        "server znodes per waiter",
        "server watches per waiter",
        "hand-offs/s draining the queue",
        "peak RSS",
        "check (FIFO, exclusive, nothing left)",
    ]
    return [
        "## Memory: waiters on one aiocoord Mutex (one client, one process)",
        "",
        *_table(header, body),
        "",
    ]


def _telemetry_rows(index: _Index, scenario: str) -> list[Row]:
    """The telemetry runner's rows of a scenario: by contenders, then in
    TELEMETRY_SETUPS' order (the baseline first)."""
    order = list(TELEMETRY_SETUPS)

    def rank(row: Row) -> tuple[int, int, str]:
        variant = row["variant"]
        return row["contenders"], order.index(variant) if variant in order else len(order), variant

    rows = [r for r in index.rows if r["scenario"] == scenario and r["library"] == TELEMETRY]
    return sorted(rows, key=rank)


def _telemetry_baseline(index: _Index, row: Row) -> Row | None:
    """The no-otel row measured with ``row`` (same server, scenario, contenders)."""
    base = index.get(row["scenario"], f"{TELEMETRY}/{TELEMETRY_BASELINE}", row["contenders"])
    return base if _ok(base) else None


def _cpu_per_op(row: Row | None) -> float | None:
    if not _ok(row):
        return None
    assert row is not None
    value = (row.get("extra") or {}).get("client_cpu_us_per_op")
    return float(value) if value is not None else None


def _telemetry_section(index: _Index) -> list[str]:
    """Each telemetry set-up against no OpenTelemetry in the same run: the rate's
    ratio (below 1 is slower) and the client CPU per operation's (above 1 costs more)."""
    body = []
    for scenario, kind in TAILS.items():
        for row in _telemetry_rows(index, scenario):
            ok = _ok(row)
            base = _telemetry_baseline(index, row)
            cpu = _cpu_per_op(row)
            if row["variant"] == TELEMETRY_BASELINE:
                versus = ["baseline", "baseline"]
            elif ok and base is not None:
                versus = [_ratio(row["rate"], base["rate"]), _ratio(cpu, _cpu_per_op(base))]
            else:
                versus = ["—", "—"]
            body.append(
                [
                    scenario,
                    str(row["contenders"]),
                    row["variant"],
                    TELEMETRY_SETUPS.get(row["variant"], "—"),
                    f"{_rate(row['rate'])} {UNITS[scenario]}" if ok else "—",
                    f"{row['rate_spread']:.0%}" if ok else "—",
                    _ms(_latency(row, kind, "p50")),
                    _ms(_latency(row, kind, "p99")),
                    f"{cpu:,.0f}" if cpu is not None else "—",
                    *versus,
                    _check(row),
                ]
            )
    if not body:
        return []
    header = [
        "scenario",
        "contenders",
        "variant",
        "set-up",
        "rate",
        "spread",
        "p50 (ms)",
        "p99 (ms)",
        "client CPU µs per op",
        "rate ÷ no-otel",
        "CPU per op ÷ no-otel",
        "check",
    ]
    return [
        "## Telemetry: each set-up against no OpenTelemetry (same run)",
        "",
        "aiocoord's mutex and counter loops under each OpenTelemetry set-up "
        "(bench/runners/telemetry_runner.py). Ratios are this set-up ÷ no-otel at the "
        "same contender count in this run: a rate below 1x is slower; client CPU per "
        "operation above 1x costs more.",
        "",
        *_table(header, body),
        "",
    ]


# --- chart ---------------------------------------------------------------------------------------


PANEL_TITLES = {
    "mutex": "Mutex hand-offs/s",
    "counter": "Counter increments/s",
    "bounded": "Bounded counter increments/s",
    "pipelined": "Pipelined sets/s (one client)",
    "latency": "Sequential set+get round trips/s",
    "election": "Leader hand-over p50",
    "barrier": "Double barrier release p50",
    "queue": "Queue items/s",
    "drain": "Queue drain items/s",
    "cache_build": "Cache build nodes/s",
    "cache_events": "Cache event latency p50",
    "discovery_events": "Discovery change latency p50",
    "discovery_pick": "Discovery picks/s",
}
"""The question each chart panel answers (the memory scenario is a line of text)."""
TAILS = {"mutex": "acquire", "counter": "increment"}
"""Scenarios that also get a latency panel (p50 and p99, ms), and the sample kind."""
COLUMNS = 4
"""Panels per row of the chart."""
RATIO_LIMITS = (0.05, 50.0)
"""The shared log axis of every ratio panel, widened if a ratio falls outside."""


def chart(document: Row, path: Path) -> list[str]:
    """One panel per question and server configuration, none empty.

    A throughput panel shows every library's rate divided by the best peer's
    at the same contender count (1 = the best peer; above is faster), and a
    scenario measured by a latency its p50 divided by the best peer's (below
    1 is faster). All ratio panels share one log axis, so that one outlier (a
    local hand-off 30 times faster) flattens nothing. A scenario without peers
    shows its own numbers (linear, from 0). Latency panels show p99 bars and p50
    ticks in ms, log axis. Each title names its server configuration.
    Returns the panels' titles.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _assign_colors(document)
    rows_of_panels: list[list[tuple[Callable[[Any], None], str]]] = []
    ratios: list[float] = []
    for server in servers(document):
        index = _Index(_rows_of(document, server["name"]))
        where = _server_label(server)
        panels: list[tuple[Callable[[Any], None], str]] = []
        rows_of_panels.append(panels)
        for scenario in PANEL_TITLES:
            if not any(_ok(r) for r in index.of(scenario)):
                continue
            panels.append((_ratio_panel(index, scenario, where, ratios), "ratio"))
            if scenario in TAILS:
                panels.append(
                    (
                        lambda ax, i=index, sc=scenario, w=where: _percentile_bars(
                            ax,
                            i,
                            sc,
                            TAILS[sc],
                            f"{PANEL_TITLES[sc].split()[0]} {TAILS[sc]} latency (ms)\n[{w}]",
                        ),
                        "latency",
                    )
                )
        if _telemetry_groups(index):
            panels.append((lambda ax, i=index, w=where: _telemetry_panel(ax, i, w), "overhead"))
    # Each server configuration starts a row of its own (wrapped at COLUMNS).
    grid = [
        panels[start : start + COLUMNS]
        for panels in rows_of_panels
        for start in range(0, len(panels), COLUMNS)
    ]
    if not grid:
        return []
    columns = max(len(row) for row in grid)
    fig, axes = plt.subplots(
        len(grid), columns, figsize=(6.4 * columns, 4.6 * len(grid) + 1.2), squeeze=False
    )
    low = min([RATIO_LIMITS[0], *(r / 1.5 for r in ratios)])
    high = max([RATIO_LIMITS[1], *(r * 1.5 for r in ratios)])
    for row_axes, row in zip(axes, grid, strict=True):
        for ax, (draw, kind) in zip(row_axes, row, strict=False):
            draw(ax)
            if kind == "ratio" and ax.get_ylabel().startswith("÷"):
                ax.set_ylim(low, high)
        for ax in row_axes[len(row) :]:
            fig.delaxes(ax)  # no empty panels
    machine, config = document["machine"], document["config"]
    setting = (
        f"{machine['nproc']} cores ({machine['cpu']}); median of {config['repeat']} x "
        f"{config['seconds']:g} s; server core 0, clients core 1"
    )
    fig.suptitle(
        f"aiocoord benchmark {document['date']}\n" + textwrap.fill(setting, 60 * columns),
        fontsize=12,
    )
    memory = _memory_line(document)
    if memory:
        fig.text(0.5, 0.005, memory, ha="center", fontsize=11)
    fig.tight_layout(rect=(0, 0.025, 1, 0.95))
    fig.savefig(path, dpi=80)
    titles = [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    return titles


_EXTRA_COLORS = (
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
)


_palette: dict[str, str] = {}
"""Colours of the labels COLORS does not know, for the chart being drawn."""


def _color(label: str) -> str:
    """One colour per label, the same in every panel of a chart."""
    return COLORS.get(label) or _palette.get(label) or _EXTRA_COLORS[0]


def _assign_colors(document: Row) -> None:
    """Give every label of the document without a colour of its own one from a
    fixed palette, in name order: distinct within the chart."""
    labels = sorted({_label(run) for run in document["runs"]} - set(COLORS))
    _palette.clear()
    _palette.update(
        {label: _EXTRA_COLORS[i % len(_EXTRA_COLORS)] for i, label in enumerate(labels)}
    )


def _server_label(server: Row) -> str:
    """A server configuration for a panel title: its title up to any explanation."""
    return str(server["title"]).split(" (")[0]


def _memory_line(document: Row) -> str | None:
    for server in servers(document):
        index = _Index(_rows_of(document, server["name"]))
        memory = [r for r in index.of("memory") if _ok(r) and "rss_per_waiter_bytes" in r["extra"]]
        if memory:
            extra = memory[0]["extra"]
            return (
                f"Memory [{_server_label(server)}]: {memory[0]['contenders']:,} waiters on one "
                f"aiocoord Mutex: {extra['rss_per_waiter_bytes'] / 1024:,.1f} KiB RSS per waiter, "
                f"{extra['queue_s']:.1f} s to queue, "
                f"{extra['server_watches_per_waiter']:.2f} server watches per waiter"
            )
    return None


def _panel_value(scenario: str) -> tuple[Callable[[Row], float], bool]:
    """What a panel compares, and whether more is better."""
    kind = LATENCY_MEASURED.get(scenario)
    if kind is None:
        return (lambda row: float(row["rate"])), True
    return (lambda row: float(row["latency_ms"].get(kind, {}).get("p50", math.nan))), False


def _ratio_panel(
    index: _Index, scenario: str, where: str, ratios: list[float]
) -> Callable[[Any], None]:
    """A panel drawer for ``scenario``: ratios to the best peer (collected into
    ``ratios`` now, so that every ratio panel gets the same axis)."""
    value, higher_is_better = _panel_value(scenario)
    peers = set(index.peers(scenario))
    levels = sorted({r["contenders"] for r in index.of(scenario)})
    best: dict[int, float] = {}
    for level in levels:
        values = [
            v
            for label in peers
            if _ok(row := index.get(scenario, label, level))
            and (v := value(row)) > 0
            and math.isfinite(v)
        ]
        if values:
            best[level] = max(values) if higher_is_better else min(values)
    bars: list[tuple[float, float, str, float | None, Row]] = []
    for position, width, label, row in _slots(index, scenario):
        number = value(row) if _ok(row) else None
        if number is not None and (not math.isfinite(number) or number <= 0):
            number = None
        if best and number is not None:
            number = number / best[row["contenders"]] if row["contenders"] in best else None
            if number is not None:
                ratios.append(number)
        bars.append((position, width, label, number, row))

    def draw(ax: Any) -> None:
        direction = "higher is faster" if higher_is_better else "lower is faster"
        if best:
            ax.set_title(f"{PANEL_TITLES[scenario]} ÷ best peer's ({direction})\n[{where}]")
            ax.set_ylabel("÷ best peer (log)")
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        else:
            unit = "ms" if not higher_is_better else UNITS.get(scenario, "")
            ax.set_title(f"{PANEL_TITLES[scenario]} (no peer: {unit})\n[{where}]")
            ax.set_ylabel(unit)
            tallest = max((b[3] for b in bars if b[3] is not None), default=1.0)
            ax.set_ylim(0, tallest * 1.2)
        for position, width, label, number, row in bars:
            if number is None:
                mark = "✗" if not _ok(row) else "-"
                ax.text(position, 1.0, mark, ha="center", va="bottom", color="red", fontsize=12)
                continue
            ax.bar(position, number, width, color=_color(label), label=_named(label))
            text = f"{number:.2f}" if best else _rate(number)
            ax.text(position, number, text, ha="center", va="bottom", fontsize=7, rotation=90)
        if best:
            ax.set_yscale("log")
        _legend_once(ax)
        ax.set_xticks(range(len(levels)), [f"{n} contender{'s' if n > 1 else ''}" for n in levels])
        ax.grid(axis="y", alpha=0.3, which="both")

    return draw


def _labels(index: _Index, scenario: str) -> list[str]:
    present = {r["label"] for r in index.of(scenario)}
    ours = sorted(p for p in present if p.startswith(OURS))
    return ours + index.peers(scenario)


def _slots(index: _Index, scenario: str) -> list[tuple[float, float, str, Row]]:
    """(x position, bar width, label, row) for every row of a scenario: one group per
    contender count, its bars side by side and centred on the group's tick."""
    labels = _labels(index, scenario)
    levels = sorted({r["contenders"] for r in index.of(scenario)})
    width = 0.8 / max(1, len(labels))
    slots = []
    for x, level in enumerate(levels):
        here = [(lb, r) for lb in labels if (r := index.get(scenario, lb, level)) is not None]
        for i, (label, row) in enumerate(here):
            slots.append((x + width * (i - len(here) / 2 + 0.5), width, label, row))
    return slots


def _percentile_bars(ax: Any, index: _Index, scenario: str, kind: str, title: str) -> None:
    """p99 as bars, p50 as black ticks on them, log scale."""
    rows = index.of(scenario)
    ax.set_title(title.replace("\n", ": bars p99, ticks p50\n", 1))
    if not rows:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    levels = sorted({r["contenders"] for r in rows})
    for position, width, label, row in _slots(index, scenario):
        p99, p50 = _latency(row, kind, "p99"), _latency(row, kind, "p50")
        if p99 is None or p50 is None:
            continue
        ax.bar(position, p99, width, color=_color(label), label=_named(label))
        ax.plot([position - width / 2, position + width / 2], [p50, p50], color="black")
    ax.set_yscale("log")
    _legend_once(ax)
    ax.set_xticks(range(len(levels)), [f"{n} contender{'s' if n > 1 else ''}" for n in levels])
    ax.grid(axis="y", alpha=0.3, which="both")


def _telemetry_groups(index: _Index) -> list[tuple[str, int, list[tuple[str, float]]]]:
    """(scenario, contenders, [(label, rate ÷ no-otel's)]) for every group of
    telemetry rows whose baseline was measured; the baseline itself left out."""
    groups = []
    for scenario in TAILS:
        for level in sorted({r["contenders"] for r in _telemetry_rows(index, scenario)}):
            rows = [r for r in _telemetry_rows(index, scenario) if r["contenders"] == level]
            base = _telemetry_baseline(index, rows[0])
            bars = [
                (r["label"], r["rate"] / base["rate"])
                for r in rows
                if base is not None and base["rate"] and _ok(r) and r is not base
            ]
            if bars:
                groups.append((scenario, level, bars))
    return groups


def _telemetry_panel(ax: Any, index: _Index, where: str) -> None:
    """Each telemetry set-up's rate ÷ no-otel's in the same run, per scenario and
    contender count (linear: the ratios sit near 1)."""
    groups = _telemetry_groups(index)
    ax.set_title(f"Telemetry: rate ÷ no-otel's, same run (higher is faster)\n[{where}]")
    ax.set_ylabel("÷ no-otel")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    tallest = 1.0
    for x, (_, _, bars) in enumerate(groups):
        width = 0.8 / len(bars)
        for i, (label, ratio) in enumerate(bars):
            position = x + width * (i - len(bars) / 2 + 0.5)
            ax.bar(position, ratio, width, color=_color(label), label=_named(label))
            ax.text(position, ratio, f"{ratio:.2f}x", ha="center", va="bottom", fontsize=7)
            tallest = max(tallest, ratio)
    ax.set_ylim(0, tallest * 1.25)
    ax.set_xticks(range(len(groups)), [f"{sc} x{n}" for sc, n, _ in groups])
    _legend_once(ax)
    ax.grid(axis="y", alpha=0.3)


def _legend_once(ax: Any) -> None:
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    if unique:
        # Long names (a telemetry variant with its set-up) in smaller type.
        size = 9 if max(len(name) for name in unique) < 40 else 7
        ax.legend(unique.values(), unique.keys(), fontsize=size)


# --- files ----------------------------------------------------------------------------------------


def write(document: Row, stem: Path) -> list[Path]:
    """Write ``<stem>.json``, ``<stem>.md`` and ``<stem>.png``; return their paths."""
    json_path, md_path, png_path = (stem.with_suffix(s) for s in (".json", ".md", ".png"))
    json_path.write_text(json.dumps(document, indent=1) + "\n")
    md_path.write_text(markdown(document) + "\n")
    chart(document, png_path)
    return [json_path, md_path, png_path]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.report bench/results/<date>.json")
    source = Path(sys.argv[1])
    saved = json.loads(source.read_text())
    saved["results"] = summarize(saved["runs"])
    for written in write(saved, source.with_suffix("")):
        print(written)
