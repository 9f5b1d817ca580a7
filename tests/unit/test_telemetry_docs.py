"""docs/observability.md names every span, event and instrument the package emits."""

from __future__ import annotations

import ast
from pathlib import Path

from aiocoord import _telemetry

ROOT = Path(__file__).resolve().parents[2]


def _emitted_names() -> set[str]:
    """Every string constant in the package shaped like a span, event or instrument
    name (``aiocoord.<area>.<what>``; attribute keys have one dot)."""
    names: set[str] = set()
    for source in (ROOT / "aiocoord").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                shaped = value.count(".") >= 2 and " " not in value and not value.endswith(".")
                if value.startswith("aiocoord.") and shaped:
                    names.add(value)
    return names


def _documented(name: str, page: str) -> bool:
    """In the page whole, or as a sibling's short form (`aiocoord.group.join` /
    `.update`)."""
    family, _, last = name.rpartition(".")
    return f"`{name}`" in page or (f"`{family}." in page and f"`.{last}`" in page)


def test_every_span_event_and_instrument_is_in_the_observability_page() -> None:
    page = (ROOT / "docs" / "observability.md").read_text()
    names = _emitted_names() | set(_telemetry.INSTRUMENTS)
    assert "aiocoord.leader.term" in names  # the scan finds them
    assert sorted(name for name in names if not _documented(name, page)) == []
