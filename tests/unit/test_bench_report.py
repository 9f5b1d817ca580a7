"""The benchmark report's telemetry rows (#28): each OpenTelemetry set-up of the
telemetry runner is named in the tables and the chart, and compared with the
no-otel set-up of the same run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import report

FIXTURE = Path(__file__).parent / "data" / "bench_telemetry.json"


def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(FIXTURE.read_text())
    document["results"] = report.summarize(document["runs"])
    return document


def _section(markdown: str, title: str) -> list[list[str]]:
    """The body rows of the table under ``## title``, as lists of cells."""
    lines = markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    table = [line for line in lines if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table[1:]]


def test_headline_rows_name_their_telemetry_set_up() -> None:
    rows = _section(report.markdown(_document()), "aiocoord against its peers")
    measurements = [row[0] for row in rows]
    assert len(set(measurements)) == len(measurements)  # no two rows look the same
    assert "mutex hand-offs/s, 1 contender, telemetry api: API only, no SDK configured" in (
        measurements
    )
    assert any("telemetry no-otel: no OpenTelemetry installed" in m for m in measurements)


def test_mutex_table_names_each_variant_with_its_set_up() -> None:
    rows = _section(report.markdown(_document()), "Mutex hand-offs")
    assert [row[1] for row in rows] == [
        "aiocoord-telemetry/api (API only, no SDK configured)",
        "aiocoord-telemetry/no-otel (no OpenTelemetry installed: the baseline)",
        "aiocoord-telemetry/sdk (SDK, every span sampled, batch span processor)",
    ]


def test_telemetry_table_gives_each_set_up_its_ratio_to_no_otel_in_the_same_run() -> None:
    rows = _section(
        report.markdown(_document()), "Telemetry: each set-up against no OpenTelemetry (same run)"
    )
    # (scenario, contenders, variant) -> (rate ÷ no-otel, CPU per op ÷ no-otel)
    ratios = {(r[0], r[1], r[2]): (r[9], r[10]) for r in rows}
    assert ratios == {
        ("mutex", "1", "no-otel"): ("baseline", "baseline"),
        ("mutex", "1", "api"): ("0.99x", "1.01x"),
        ("mutex", "1", "sdk"): ("0.80x", "2.50x"),
        # no no-otel row at this contender count: nothing to compare with
        ("counter", "1", "api"): ("—", "—"),
        ("counter", "8", "no-otel"): ("baseline", "baseline"),
        ("counter", "8", "sdk-requests"): ("0.75x", "1.50x"),
    }
    # the baseline first, then the set-ups in the runner's order
    assert [r[2] for r in rows if r[0] == "mutex"] == ["no-otel", "api", "sdk"]
    assert rows[2][3] == "SDK, every span sampled, batch span processor"


def test_a_report_without_telemetry_rows_has_no_telemetry_table() -> None:
    document = _document()
    for run in document["runs"]:
        run["library"], run["variant"] = "aiocoord", ""
    document["runs"] = document["runs"][:1]
    document["results"] = report.summarize(document["runs"])
    assert "## Telemetry" not in report.markdown(document)


def test_chart_draws_the_ratios_to_no_otel_with_named_set_ups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    drawn: list[Any] = []
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure to read it back
    titles = report.chart(_document(), tmp_path / "chart.png")
    monkeypatch.undo()
    plt.close(drawn[0])
    panel = next(ax for ax in drawn[0].axes if ax.get_title().startswith("Telemetry"))
    assert titles[-1].startswith("Telemetry: rate ÷ no-otel's, same run")
    assert [t.get_text() for t in panel.get_xticklabels()] == ["mutex x1", "counter x8"]
    assert [t.get_text() for t in panel.get_legend().get_texts()] == [
        "aiocoord-telemetry/api (API only, no SDK configured)",
        "aiocoord-telemetry/sdk (SDK, every span sampled, batch span processor)",
        "aiocoord-telemetry/sdk-requests (SDK, batch span processor, plus request metrics)",
    ]
    heights = sorted(round(bar.get_height(), 2) for bar in panel.patches)
    assert heights == [0.75, 0.8, 0.99]


def test_the_header_says_how_long_the_servers_were_loaded_before_the_first_run() -> None:
    document = _document()
    servers = report.servers(document)
    header = report.markdown(document).split("\n## ", 1)[0]
    assert "loaded for" not in header  # a document from before the field: nothing claimed
    document["config"]["servers"] = [
        {**servers[0], "server_warmup_s": 8.0},
        {"name": "ensemble", "title": "3-node ensemble", "server_warmup_s": 90.0},
    ]
    header = report.markdown(document).split("\n## ", 1)[0]
    assert ", loaded for 8 s before the first run" in header
    assert "**ensemble**: 3-node ensemble, loaded for 90 s before the first run" in header
