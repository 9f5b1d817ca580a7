"""What the test kit's launchers share: the loopback host, free ports, and the registry
of the processes and temp dirs they own (reaped at exit and on SIGTERM)."""

# Timeouts here are the launcher's own bounded waits, not a caller's cancellation policy.

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "HOST",
    "LIVE_PROCS",
    "OWNED_DIRS",
    "cleanup_on_sigterm",
    "free_ports",
    "wait_until_stopped",
]

HOST = "127.0.0.1"

# ------------------------------------------------------------------- process registry

# pid -> (process, pid of the Python process that started it). Only these are signalled.
LIVE_PROCS: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
# temp dirs we created -> pid of the Python process that created them.
OWNED_DIRS: dict[str, int] = {}


def _cleanup_at_exit() -> None:
    """Kill the JVMs and remove the temp dirs this process still owns."""
    me = os.getpid()
    procs = [proc for proc, owner in list(LIVE_PROCS.values()) if owner == me]
    for proc in procs:
        with contextlib.suppress(OSError):
            proc.kill()  # Popen.kill polls first, so it never signals a reaped pid
    for proc in procs:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    LIVE_PROCS.clear()
    for path, owner in list(OWNED_DIRS.items()):
        if owner == me:
            shutil.rmtree(path, ignore_errors=True)
    OWNED_DIRS.clear()


atexit.register(_cleanup_at_exit)


def _on_sigterm(signum: int, frame: object) -> None:
    """Clean up, then die of SIGTERM as the process would have without us."""
    _cleanup_at_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def cleanup_on_sigterm() -> None:
    """SIGTERM's default action skips ``atexit``: a process stopped with it (by a
    service manager, a CI timeout) would leave its temp dirs behind. Take the
    signal only where nobody else did (still the default, in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


# ------------------------------------------------------------------------------ ports


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


@contextlib.contextmanager
def _bound(port: int) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
        yield sock
    finally:
        sock.close()


def wait_until_stopped(pid: int, timeout: float = 2.0) -> None:
    """Return once every thread of ``pid`` has stopped (Linux's /proc; elsewhere at once).

    SIGSTOP is delivered to each thread on its own; a JVM thread busy in a
    system call (a disk sync, say) may serve a little longer, and a test that
    pauses a server must not see it answer afterwards.
    """
    tasks = f"/proc/{pid}/task"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = []
            for tid in os.listdir(tasks):
                with open(f"{tasks}/{tid}/stat") as stat:
                    # The state follows the command name, which is in parentheses.
                    states.append(stat.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            return  # no /proc, or the process is gone
        if all(state in "TtZX" for state in states):
            return
        time.sleep(0.001)


def free_ports(count: int) -> list[int]:
    """Pick *count* distinct free loopback ports.

    Ports come from below the kernel's ephemeral range when possible: a client that
    reconnects in a loop to a stopped server on an ephemeral port can, rarely, connect
    to itself (TCP simultaneous open) and then hold the port the server restarts on.
    Falls back to binding port 0.
    """
    low, _high = _ephemeral_range()
    candidates_floor = 10000
    ports: list[int] = []
    with contextlib.ExitStack() as stack:
        attempts = 0
        while len(ports) < count:
            attempts += 1
            if low - candidates_floor > 1000 and attempts < 200:
                port = random.randrange(candidates_floor, low)
            else:
                port = 0
            if port in ports:
                continue
            try:
                sock = stack.enter_context(_bound(port))
            except OSError:
                if port == 0:
                    raise
                continue
            ports.append(sock.getsockname()[1])
    return ports
