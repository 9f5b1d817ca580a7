"""Child processes that die with the process that started them (Linux), with no
Python run between fork and exec.

Linux kills a child when its parent dies if the child asked for it
(``prctl(PR_SET_PDEATHSIG)``), and the request survives ``exec``. Asking from a
``preexec_fn`` runs Python in the forked child before it execs, which is unsafe
in a process with threads (any asyncio program that ever resolved a name in
the default executor, or, before Python 3.12, started a subprocess: its child
watcher waits on each child in a thread). The child can deadlock on a lock
another thread held at the fork, and ``Popen`` blocks its caller (an event
loop, with everything on it) until the child has exec'd or failed.

Here the child execs at once (CPython forks and execs in C, vfork where it
can) into a launcher: a fresh single-threaded interpreter that asks for the
signal, makes sure the process that started it is still its parent (else that
one died before the request took effect), and execs the command in its place,
same PID. Only the standard library, no ``site``, no ``PYTHON*`` variables.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence

__all__ = ["DEATH_SIGNAL_SUPPORTED", "EXEC_FAILED", "NOT_FOUND", "dying_with_parent"]

DEATH_SIGNAL_SUPPORTED = sys.platform.startswith("linux")
"""Whether a child can be made to die with its parent here."""

NOT_FOUND = 127
"""The launcher's exit status when the command is not there (as a shell's)."""

EXEC_FAILED = 126
"""The launcher's exit status when the command is there but cannot be run."""

_LAUNCHER = f"""\
import ctypes, os, signal, sys
parent = int(sys.argv[1])
if ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
    sys.stderr.write("die-with-parent: prctl failed: " + os.strerror(ctypes.get_errno()) + "\\n")
    os._exit({EXEC_FAILED})
if os.getppid() != parent:
    os._exit({EXEC_FAILED})  # the parent is gone already: the command must not run unguarded
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.stderr.write(sys.argv[2] + ": " + (error.strerror or str(error)) + "\\n")
    os._exit({NOT_FOUND} if isinstance(error, FileNotFoundError) else {EXEC_FAILED})
"""
"""Run as ``python -S -E -c _LAUNCHER <parent pid> <command> [args...]``."""


def _resolve(program: str, env: Mapping[str, str] | None) -> str:
    """``program`` as exec would find it; FileNotFoundError or PermissionError as
    ``Popen`` raises them, so callers keep telling "not found" from "cannot run"."""
    if os.sep in program:
        if not os.path.exists(program):
            raise FileNotFoundError(2, os.strerror(2), program)
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise PermissionError(13, os.strerror(13), program)
        return program
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(program, path=path)
    if found is None:
        raise FileNotFoundError(2, os.strerror(2), program)
    return found


def dying_with_parent(command: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that runs ``command`` as a child that is SIGKILLed when this process
    (precisely: the thread that starts it) dies. Pass it to ``Popen`` or
    ``create_subprocess_exec`` without a ``preexec_fn``; the child's PID is the
    command's. Where that is not supported, ``command`` itself.

    The program is looked up first (in ``env``'s PATH if given): FileNotFoundError
    or PermissionError as starting it would raise. Should exec still fail in the
    child, it exits with :data:`NOT_FOUND` or :data:`EXEC_FAILED`.
    """
    if not command:
        raise ValueError("an empty command")
    if not DEATH_SIGNAL_SUPPORTED:
        return list(command)
    program = _resolve(command[0], env)
    return [sys.executable, "-S", "-E", "-c", _LAUNCHER, str(os.getpid()), program, *command[1:]]
