"""What the package says of itself matches what it is."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_license_the_metadata_names_is_shipped() -> None:
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]


def test_the_summary_and_classifiers_claim_only_what_exists() -> None:
    import aiocoord

    summary = PROJECT["description"].lower()
    for recipe, name in [("election", "LeaderElection"), ("barrier", "Barrier")]:
        assert recipe not in summary or hasattr(aiocoord, name), recipe
    # asyncio only: trio (and so anyio in general) is not supported.
    assert "Framework :: AnyIO" not in PROJECT["classifiers"]
    assert "Framework :: AsyncIO" in PROJECT["classifiers"]
