"""The benchmark chart (#30): one panel per question and server configuration,
none empty, ratios to the best peer on one shared log axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import report

pytest.importorskip("matplotlib")


def _run(scenario: str, library: str, contenders: int, rate: float, **extra: Any) -> dict[str, Any]:
    return {
        "server": "sync",
        "scenario": scenario,
        "library": library,
        "variant": extra.pop("variant", ""),
        "contenders": contenders,
        "rate": rate,
        "ops": int(rate),
        "window_s": 1.0,
        "latency_ms": {"acquire": {"p50": 1.0, "p99": 2.0}},
        "conflicts": 0,
        "failures": 0,
        **extra,
    }


def test_every_panel_names_its_server_and_none_is_empty(tmp_path: Path) -> None:
    runs = [
        _run("mutex", "aiocoord", 8, 1300.0),
        _run("mutex", "curator", 8, 1000.0),
        _run("mutex", "aiocoord", 32, 40000.0, variant="local-handoff"),  # the outlier
        _run("mutex", "curator", 32, 900.0),
        _run("counter", "aiocoord", 8, 0.0, error="it broke"),  # measured, but nothing to draw
    ]
    document = {
        "date": "2026-11-26",
        "machine": {"nproc": 2, "cpu": "test"},
        "config": {
            "repeat": 1,
            "seconds": 1.0,
            "servers": [{"name": "sync", "title": "standalone, forceSync=yes (as production)"}],
        },
        "runs": runs,
    }
    document["results"] = report.summarize(runs)
    titles = report.chart(document, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").stat().st_size > 0
    assert len(titles) == 2  # the mutex's ratios and its latency; no counter panel
    assert all("[standalone, forceSync=yes]" in title for title in titles)
    assert "÷ best peer" in titles[0]
