"""aiocoord._process: children that die with their parent, with no Python run in
the forked child before exec (a ``preexec_fn`` there can deadlock a process with
threads, and block its event loop in ``Popen``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiocoord._process import DEATH_SIGNAL_SUPPORTED, EXEC_FAILED, NOT_FOUND, dying_with_parent

REPO = Path(__file__).resolve().parents[2]

linux_only = pytest.mark.skipif(not DEATH_SIGNAL_SUPPORTED, reason="PR_SET_PDEATHSIG is Linux's")

_GET_DEATH_SIGNAL = (
    "import ctypes; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0);"
    " import os; print(v.value, os.getpid())"
)


@linux_only
def test_the_command_runs_in_the_childs_own_pid_with_the_death_signal_set() -> None:
    proc = subprocess.run(
        dying_with_parent([sys.executable, "-c", _GET_DEATH_SIGNAL]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    signal_number, _pid = proc.stdout.split()
    assert int(signal_number) == signal.SIGKILL


@linux_only
def test_the_pid_is_the_commands_and_its_status_passes_through() -> None:
    proc = subprocess.Popen(
        dying_with_parent(["sh", "-c", "echo $$; exit 7"]), stdout=subprocess.PIPE, text=True
    )
    out, _ = proc.communicate(timeout=60)
    assert int(out) == proc.pid
    assert proc.returncode == 7


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead, not yet reaped


@linux_only
def test_the_command_dies_when_the_process_that_started_it_is_killed() -> None:
    starter = (
        "import subprocess, sys, time\n"
        "from aiocoord._process import dying_with_parent\n"
        "child = subprocess.Popen(dying_with_parent(['sleep', '600']))\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert proc.stdout is not None
        sleeper = int(proc.stdout.readline())
        assert not _gone(sleeper)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    deadline = time.monotonic() + 30
    while not _gone(sleeper):
        assert time.monotonic() < deadline, "the command outlived its parent"
        time.sleep(0.05)


@linux_only
def test_a_missing_or_unrunnable_program_raises_as_popen_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        dying_with_parent(["aiocoord-no-such-command-here"])
    with pytest.raises(FileNotFoundError):
        dying_with_parent([str(tmp_path / "missing")])
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    with pytest.raises(PermissionError):
        dying_with_parent([str(plain)])
    with pytest.raises(FileNotFoundError):
        dying_with_parent(["sh"], env={"PATH": str(tmp_path)})


@linux_only
def test_an_exec_failing_in_the_child_exits_as_a_shell_would(tmp_path: Path) -> None:
    program = tmp_path / "vanishing"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    argv = dying_with_parent([str(program)])
    program.unlink()  # gone between the look-up and the exec
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == NOT_FOUND
    assert "vanishing" in proc.stderr
    program.write_text("#!/bin/sh\n")
    program.chmod(0o644)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXEC_FAILED


def test_no_child_is_started_with_a_preexec_fn() -> None:
    """Every child of the package, the chaos harness and the benchmarks is started
    without running Python between fork and exec (aiocoord._process instead)."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("aiocoord", "chaos", "bench", "examples")
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bpreexec_fn\s*=", line)
    ]
    assert offenders == []


def test_the_launcher_is_found_by_the_same_interpreter() -> None:
    argv = dying_with_parent(["true"])
    if DEATH_SIGNAL_SUPPORTED:
        assert argv[0] == sys.executable and argv[-1].endswith("true")
        assert str(os.getpid()) in argv
    else:
        assert argv == ["true"]
