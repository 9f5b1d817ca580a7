"""The chaos controller kills a worker that does not answer only after asking it for
every thread's stack (on its stderr), so a hang says where it was."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from chaos._controller import WorkerHandle

# A worker stand-in that blocks its only thread in a call, as a stuck one would.
_HUNG = """\
import faulthandler, sys, time
from chaos._layout import DUMP_STACKS
faulthandler.register(DUMP_STACKS, file=sys.stderr, all_threads=True)
def stuck_in_a_blocking_call():
    print('{"reply": "ready", "ok": true}', flush=True)
    time.sleep(600)
stuck_in_a_blocking_call()
"""

REPO = Path(__file__).resolve().parents[2]


async def test_a_hung_worker_killed_leaves_its_stacks_on_stderr(tmp_path: Path) -> None:
    stderr_path = tmp_path / "w0.stderr"
    with stderr_path.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _HUNG,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=REPO,
        )
        worker = WorkerHandle("w0", proc)
        assert await worker.expect("ready", 60) is not None
        await worker.kill()
    assert proc.returncode is not None
    assert "stuck_in_a_blocking_call" in stderr_path.read_text()
