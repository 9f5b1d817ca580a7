"""``aiocoord top``: ``--once --json`` for scripts, and the live view driven in a real
terminal (a pseudo-terminal whose screen the pyte emulator reads, as a person would)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import struct
import sys
import termios
from collections.abc import AsyncIterator, Callable

import pyte
import pytest
from _waiting import acquiring

import aiocoord
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(90)

CLI = (sys.executable, "-m", "aiocoord", "top")


def _connection(zookeeper: ZooKeeperTarget) -> list[str]:
    return ["--zk", zookeeper.connect_string, "--namespace", zookeeper.namespace]


async def _once(zookeeper: ZooKeeperTarget, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        *_connection(zookeeper),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_once_json_lists_each_recipe_with_holders_waiters_and_depth(
    started, children_reach, zookeeper: ZooKeeperTarget
) -> None:
    holder_client, waiter_client = await started(2)
    holder = aiocoord.Mutex(holder_client, "/app/lock")
    await holder.acquire()
    waiter = acquiring(aiocoord.Mutex(waiter_client, "/app/lock"))
    try:
        await children_reach(holder_client, "/app/lock", 2)
        await aiocoord.Queue(holder_client, "/app/jobs").put_many([b"a", b"b", b"c"])
        await aiocoord.AtomicLong(holder_client, "/app/hits").force_set(7)
        async with aiocoord.Semaphore(holder_client, "/app/slots", 2):
            code, out, err = await _once(zookeeper, "/app", "--once", "--json")
    finally:
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        await holder.release()
    assert code == 0, err
    document = json.loads(out)
    assert document["path"] == "/app"
    rows = {r["path"]: r for r in document["recipes"]}
    lock = rows["/app/lock"]
    assert (lock["kind"], lock["waiters"]) == ("lock", 1)
    assert len(lock["holders"]) == 1
    assert "holder_nodes" not in lock
    assert (rows["/app/jobs"]["kind"], rows["/app/jobs"]["depth"]) == ("queue", 3)
    assert (rows["/app/hits"]["kind"], rows["/app/hits"]["value"]) == ("counter", 7)
    assert (rows["/app/slots"]["kind"], len(rows["/app/slots"]["holders"])) == ("semaphore", 1)


async def test_once_prints_a_table(coord, zookeeper: ZooKeeperTarget) -> None:
    await aiocoord.Queue(coord, "/app/jobs").put(b"a")
    code, out, err = await _once(zookeeper, "/app", "--once")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "aiocoord top /app"
    assert lines[2].split()[:2] == ["KIND", "PATH"]
    assert lines[3].split()[:2] == ["queue", "/app/jobs"]


async def test_the_live_view_needs_a_terminal(zookeeper: ZooKeeperTarget) -> None:
    code, _out, err = await _once(zookeeper, "/")
    assert code == 2  # usage
    assert "needs a terminal" in err


class Terminal:
    """A pseudo-terminal running ``aiocoord top``, its screen kept by pyte."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self.proc = proc
        self.master = master
        self.screen = pyte.Screen(120, 30)
        self.stream = pyte.ByteStream(self.screen)
        self._changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed its side
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.stream.feed(data)
        self._changed.set()

    @property
    def text(self) -> str:
        return "\n".join(self.screen.display)

    async def wait_for(self, check: Callable[[str], bool], what: str) -> str:
        """Wait until the screen passes ``check`` (checked on every output)."""
        try:
            async with asyncio.timeout(20):
                while not check(self.text):
                    self._changed.clear()
                    if self.proc.returncode is not None:
                        raise AssertionError(f"top ended before {what}:\n{self.text}")
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {what} on the screen:\n{self.text}") from None
        return self.text

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def row(self, path: str) -> list[str]:
        for line in self.screen.display:
            if f" {path} " in line:
                return line.split()
        raise AssertionError(f"no row for {path}:\n{self.text}")


@contextlib.asynccontextmanager
async def terminal(zookeeper: ZooKeeperTarget, *args: str) -> AsyncIterator[Terminal]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env |= {"TERM": "xterm", "COLUMNS": "120", "LINES": "30"}
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        *_connection(zookeeper),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    term = Terminal(proc, master)
    try:
        yield term
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        with contextlib.suppress(ValueError):
            asyncio.get_running_loop().remove_reader(master)
        os.close(master)


async def test_the_live_view_follows_a_hand_off_sorts_and_quits(
    started, children_reach, zookeeper: ZooKeeperTarget
) -> None:
    first_client, second_client = await started(2)
    first = aiocoord.Mutex(first_client, "/app/lock", data=b"first")
    second = aiocoord.Mutex(second_client, "/app/lock", data=b"second")
    await aiocoord.Queue(first_client, "/app/jobs").put(b"a")
    await first.acquire()
    second_holds, done = asyncio.Event(), asyncio.Event()

    async def hold_second() -> None:
        async with second:
            second_holds.set()
            await done.wait()

    holding = asyncio.create_task(hold_second())
    try:
        await children_reach(first_client, "/app/lock", 2)
        async with terminal(zookeeper, "/app", "--interval", "0.2") as term:
            await term.wait_for(lambda t: " /app/lock " in t and "first" in t, "the lock's row")
            assert term.row("/app/lock")[:3] == ["lock", "/app/lock", "1"]
            assert "sort: path (ascending)" in term.text
            await first.release()
            await second_holds.wait()
            # The holder changed between two refreshes: one hand-off in the last minute.
            await term.wait_for(
                lambda t: "second" in t and term.row("/app/lock")[2:6] == ["0", "-", "-", "1"],
                "hand-off",
            )
            term.press("w")
            await term.wait_for(lambda t: "sort: waiters (ascending)" in t, "new order")
            term.press("r")
            await term.wait_for(lambda t: "sort: waiters (descending)" in t, "reverse order")
            term.press("q")
            async with asyncio.timeout(15):
                code = await term.proc.wait()
            assert code == 0
    finally:
        if first.is_held:
            await first.release()
        done.set()
        await holding
