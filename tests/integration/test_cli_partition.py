"""``aiocoord partition``: the command runs with the owned items in its environment and
runs again when they change. Driven by another member in the test's own process; the
command prints its items when it starts and ends when told (a line on stdin)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from _kit import EVENT_TIMEOUT

import aiocoord
from aiocoord.testing import ZooKeeperTarget

pytestmark = pytest.mark.timeout(60)

CLI = (sys.executable, "-m", "aiocoord")
# Prints its items and tokens, waits for a line on stdin, prints "end".
PRINTER = (
    "import os, sys; print('items', os.environ['AIOCOORD_ITEMS'], "
    "os.environ['AIOCOORD_FENCING_TOKENS'].count('='), flush=True); "
    "sys.stdin.readline(); print('end', flush=True)"
)
PATH = "/cli-part"


@pytest_asyncio.fixture
async def member(zookeeper: ZooKeeperTarget) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """Processes started by a test; any still running at teardown is killed by its pid."""
    started: list[asyncio.subprocess.Process] = []
    yield started
    for proc in started:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()


async def start(
    zookeeper: ZooKeeperTarget, started: list[asyncio.subprocess.Process], *args: str
) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "partition",
        *args,
        "--zk",
        zookeeper.connect_string,
        "--namespace",
        zookeeper.namespace,
        "--",
        sys.executable,
        "-c",
        PRINTER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    started.append(proc)
    return proc


async def line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    text = await asyncio.wait_for(proc.stdout.readline(), EVENT_TIMEOUT)
    assert text, "aiocoord partition ended"
    return text.decode().rstrip("\n")


async def test_the_command_runs_with_its_items_and_again_when_they_change(
    zookeeper: ZooKeeperTarget, member, coord
) -> None:
    proc = await start(
        zookeeper, member, PATH, "--items", "a,b,c", "--id", "cli", "--settle", "0.1"
    )
    assert await line(proc) == "items a,b,c 3"
    other = aiocoord.Partitioner(coord, PATH, ["a", "b", "c"], participant_id="other", settle=0.1)
    async with other:
        # It keeps what it can (two of three), the newcomer takes the rest.
        assert await line(proc) == "items a,b 2"
        assert await other.wait_stable(timeout=EVENT_TIMEOUT)
        assert other.owned == {"c"}
    assert await line(proc) == "items a,b,c 3"
    # The command ends by itself: the member leaves, and its status passes through.
    await finish(proc)
    assert [n for n in await coord.children(PATH) if not n.startswith("token-")] == []


async def test_items_from_a_node(zookeeper: ZooKeeperTarget, member, coord) -> None:
    await coord.create("/cfg/items", b'["x", "y"]', make_parents=True)
    proc = await start(zookeeper, member, PATH, "--items-node", "/cfg/items", "--settle", "0")
    assert await line(proc) == "items x,y 2"
    await coord.set("/cfg/items", b'["y", "z"]')
    assert await line(proc) == "items y,z 2"
    await finish(proc)


async def finish(proc: asyncio.subprocess.Process) -> None:
    """End the command (a line on its stdin): the member leaves, and the CLI exits 0."""
    assert proc.stdin is not None
    proc.stdin.write(b"\n")
    await proc.stdin.drain()
    assert await line(proc) == "end"
    assert await asyncio.wait_for(proc.wait(), EVENT_TIMEOUT) == 0


async def test_usage_errors(zookeeper: ZooKeeperTarget) -> None:
    for argv, wanted in (
        (["partition", PATH, "--", "true"], "one of the arguments --items --items-node"),
        (["partition", PATH, "--items", "a", "--weight", "0", "--", "true"], "--weight"),
        (
            ["partition", PATH, "--items", "a/b", "--zk", zookeeper.connect_string, "--", "true"],
            "a/b",
        ),
    ):
        proc = await asyncio.create_subprocess_exec(
            *CLI, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _out, err = await asyncio.wait_for(proc.communicate(), EVENT_TIMEOUT)
        assert proc.returncode == 2, err
        assert wanted in err.decode(), err
