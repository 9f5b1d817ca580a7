"""Every example runs on its own and finishes cleanly (against the shared server)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
async def test_example_runs(example: Path, zookeeper) -> None:
    env = {**os.environ, "AIOCOORD_ZK": zookeeper.connect_string}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(example),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 150)
    assert proc.returncode == 0, out.decode()
    assert out.strip(), "an example should say what it did"
