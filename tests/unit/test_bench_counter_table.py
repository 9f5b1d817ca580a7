"""The counter harness's table (#30) shows who got the adds, not only how many."""

from __future__ import annotations

from typing import Any

from bench import counter_processes


def _record(library: str, rate: float, adds: list[int], longest: float) -> dict[str, Any]:
    return {
        "server": "sync",
        "sessions": len(adds),
        "library": library,
        "rate": rate,
        "p50": 0.4,
        "p99": 1.2,
        "max": longest,
        "adds_per_session": adds,
        "requests_per_add": 1.4,
        "writes_per_add": 1.2,
        "client_cpu_us_per_add": 160.0,
        "failures": 0,
        "load1": 1.0,
    }


def _rows(records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    lines = counter_processes.summarize(records).splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return {row[2]: dict(zip(header, row, strict=True)) for row in rows}


def test_a_session_winning_nearly_every_add_shows_beside_a_fair_share() -> None:
    rows = _rows(
        [
            _record("aiocoord-cas", 2136.0, [5991, 7, 139, 120, 98, 140, 3000, 7500], 3052.4),
            _record("aiocoord", 1155.0, [1160, 1143, 1164, 1150, 1158, 1161, 1162, 1159], 21.0),
        ]
    )
    assert rows["aiocoord-cas"]["adds per session"] == "7 / 140 / 7,500"
    assert rows["aiocoord-cas"]["max ms"] == "3,052"
    assert rows["aiocoord"]["adds per session"] == "1,143 / 1,160 / 1,164"


def test_a_run_recorded_before_the_shares_were_kept_still_reports() -> None:
    record = _record("curator", 1455.0, [], 36.0)
    del record["adds_per_session"], record["max"]
    row = _rows([record])["curator"]
    assert row["adds per session"] == "—"
    assert row["max ms"] == "—"


def test_curator_as_processes_reports_no_client_cpu_like_curator() -> None:
    # Neither Curator mode measures client CPU over the window (the JVMs'
    # whole-run CPU includes start-up): the column says so, not "nan".
    records = [_record(name, 900.0, [110] * 8, 40.0) for name in ("curator", "curator-apart")]
    for record in records:
        del record["client_cpu_us_per_add"]
    rows = _rows([*records, _record("aiocoord", 1000.0, [125] * 8, 20.0)])
    assert rows["curator"]["client CPU µs/add"] == "—"
    assert rows["curator-apart"]["client CPU µs/add"] == "—"
    assert rows["aiocoord"]["client CPU µs/add"] == "160"
