"""The ``aiocoord`` command line, run as a subprocess against a real server.

Commands under a lock or an election are small Python programs that print a
line when they start and then wait for a line on their stdin (which the CLI
passes through): the test decides when each one ends, and what the others
did meanwhile is read from their output and from ZooKeeper, never timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from _waiting import acquiring

import aiocoord
from aiocoord.testing import TcpProxy, ZooKeeperTarget, expire_session

pytestmark = pytest.mark.timeout(60)

CLI = (sys.executable, "-m", "aiocoord")

# Prints "start <tag> <pid>", waits for a line on stdin, prints "end <tag>".
WAITER = (
    "import os, sys; tag = sys.argv[1]; print('start', tag, os.getpid(), flush=True); "
    "sys.stdin.readline(); print('end', tag, flush=True)"
)
# The same, but deaf to SIGTERM (only SIGKILL stops it).
STUBBORN = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + WAITER


def child(script: str, tag: str) -> list[str]:
    return ["--", sys.executable, "-c", script, tag]


class Cli:
    """One running ``aiocoord`` process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def line(self, timeout: float = 15) -> str:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            _out, err = await self.finish()
            raise AssertionError(f"aiocoord ended ({self.proc.returncode}): {err}")
        return line.decode().rstrip("\n")

    async def send(self, text: str = "") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        await self.proc.stdin.drain()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    async def finish(self, timeout: float = 20, *, close_stdin: bool = True) -> tuple[str, str]:
        """Wait for the end (stdin closed first, unless told); the rest of stdout, and
        stderr."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        if close_stdin and self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        out, err, _code = await asyncio.wait_for(
            asyncio.gather(self.proc.stdout.read(), self.proc.stderr.read(), self.proc.wait()),
            timeout,
        )
        return out.decode(), err.decode()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode


Run = Callable[..., "asyncio.Future[Cli]"]


@pytest_asyncio.fixture
async def cli(zookeeper: ZooKeeperTarget) -> AsyncIterator[Callable[..., object]]:
    """``await cli(*args, zk=..., connect=True, stdin=b"")``: start ``aiocoord``; with
    ``connect`` (the default) pointed at the test's server and namespace. Every
    process still running at teardown is killed by its pid."""
    started: list[Cli] = []

    async def start(*args: str, zk: str | None = None, connect: bool = True) -> Cli:
        options = []
        if connect:
            options = ["--zk", zk or zookeeper.connect_string]
            options += ["--namespace", zookeeper.namespace]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
        head = list(args)
        # Options go after the command's own positionals but before "--".
        cut = head.index("--") if "--" in head else len(head)
        argv = [*head[:cut], *options, *head[cut:]]
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        made = Cli(proc)
        started.append(made)
        return made

    yield start
    for made in started:
        if made.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(made.pid, signal.SIGKILL)
            await made.proc.wait()


async def run(cli: Callable[..., object], *args: str, **kw: object) -> tuple[int, str, str]:
    made = await cli(*args, **kw)  # type: ignore[misc]
    out, err = await made.finish()
    return made.returncode, out, err


async def process_ended(pid: int) -> None:
    """Wait (on a pidfd, no polling) until process ``pid`` is gone."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await asyncio.wait_for(gone, 15)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# --- lock --------------------------------------------------------------------------


async def test_two_lock_processes_exclude_each_other(cli, coord, children_reach) -> None:
    first = await cli("lock", "/l", *child(WAITER, "a"))
    assert (await first.line()).startswith("start a")
    second = await cli("lock", "/l", *child(WAITER, "b"))
    await children_reach(coord, "/l", 2)  # the second one is queued behind the first
    await first.send()
    assert await first.line() == "end a"
    assert await first.finish() == ("", "")  # a healthy run says nothing on stderr
    assert first.returncode == 0
    # Only once the first has ended does the second's command start.
    assert (await second.line()).startswith("start b")
    await second.send()
    assert await second.line() == "end b"
    await second.finish()
    assert second.returncode == 0
    assert await coord.exists("/l") is None or await coord.children("/l") == []


async def test_the_commands_exit_status_passes_through(cli) -> None:
    code, _out, _err = await run(cli, "lock", "/s", "--", sys.executable, "-c", "exit(7)")
    assert code == 7
    killed = ["--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), 15)"]
    code, _out, _err = await run(cli, "lock", "/s", *killed)
    assert code == 128 + signal.SIGTERM
    code, _out, err = await run(cli, "lock", "/s", "--", "no-such-command-here")
    assert code == 127 and "not found" in one_line(err)


async def test_interrupting_the_cli_releases_the_lock_at_once(cli, coord, children_reach) -> None:
    holder = await cli("lock", "/i", *child(WAITER, "a"))
    assert (await holder.line()).startswith("start a")
    waiting = await cli("lock", "/i", "--", "true")
    await children_reach(coord, "/i", 2)
    waiting.signal(signal.SIGTERM)  # interrupted while waiting: its place is given up
    await waiting.finish()
    assert waiting.returncode == 128 + signal.SIGTERM
    assert len(await coord.children("/i")) == 1
    holder.signal(signal.SIGINT)  # goes to the command, then the lock is released
    await holder.finish(close_stdin=False)
    assert holder.returncode == 128 + signal.SIGINT
    # Released, not left to expire with the session (10 s): a new taker gets it now.
    code, _out, _err = await run(cli, "lock", "/i", "--timeout", "3", "--", "true")
    assert code == 0


async def test_a_deleted_lock_node_stops_the_command_and_exits_71(cli, coord) -> None:
    holder = await cli("lock", "/d", "--grace", "0.5", *child(STUBBORN, "a"))
    started = await holder.line()
    command_pid = int(started.split()[2])
    (node,) = await coord.children("/d")
    await coord.delete(f"/d/{node}")
    # SIGTERM is ignored: SIGKILL follows after the grace period.
    await process_ended(command_pid)
    _out, err = await holder.finish()
    assert holder.returncode == 71
    assert "lost the lock on '/d'" in err and "was deleted" in err


async def test_revoke_stops_a_revocable_holders_command_and_the_next_one_runs(
    cli, coord, children_reach
) -> None:
    holder = await cli("lock", "/r", "--revocable", *child(WAITER, "a"))
    assert (await holder.line()).startswith("start a")
    waiting = await cli("lock", "/r", *child(WAITER, "b"))
    first, _second = sorted(await children_reach(coord, "/r", 2), key=lambda n: n[-10:])

    code, out, _err = await run(cli, "revoke", "/r")
    assert code == 0 and one_line(out) == f"/r/{first}"  # the holder only, not the waiter
    _out, err = await holder.finish(close_stdin=False)
    assert holder.returncode == 128 + signal.SIGTERM  # the command's own status
    assert "was asked back; the command was stopped" in err
    assert (await waiting.line()).startswith("start b")

    # A holder that did not ask to be revocable is asked, and carries on.
    code, _out, _err = await run(cli, "revoke", "/r")
    assert code == 0
    await waiting.send()
    assert await waiting.line() == "end b"
    await waiting.finish()
    assert waiting.returncode == 0


async def test_revoke_fails_where_nobody_holds_a_lock(cli, coord) -> None:
    code, _out, err = await run(cli, "revoke", "/nothing")
    assert code == 1 and "no lock at '/nothing' (found nothing)" in one_line(err)
    await coord.create("/free", b"")
    code, _out, err = await run(cli, "revoke", "/free")
    assert code == 1 and "nobody holds '/free'" in one_line(err)
    code, _out, err = await run(cli, "counter", "add", "/visits", "1")
    code, _out, err = await run(cli, "revoke", "/visits")
    assert code == 1 and "(found a counter)" in one_line(err)
    code, _out, err = await run(cli, "lock", "/s", "--semaphore", "2", "--revocable", "--", "true")
    assert code == 2 and "--revocable goes with a lock" in err


async def test_a_suspended_connection_stops_the_command_and_logs_a_warning(
    cli, zookeeper, coord
) -> None:
    host, port = zookeeper.connect_string.split(":")
    async with TcpProxy(host, int(port)) as proxy:
        holder = await cli("lock", "/p", *child(WAITER, "a"), zk=proxy.connect_string)
        assert (await holder.line()).startswith("start a")
        (node,) = await coord.children("/p")
        _data, stat = await coord.get(f"/p/{node}")
        proxy.cut()  # the connection drops: the lock can no longer be vouched for
        _out, err = await holder.finish(close_stdin=False)
    assert holder.returncode == 71
    # The library's WARNING names the session and the path; the CLI's line follows.
    assert f"lock '/p' lost (session 0x{stat.ephemeral_owner:x})" in err
    assert err.strip().splitlines()[-1].startswith("aiocoord lock: lost the lock on '/p'")


async def test_shared_and_semaphore_modes(cli, coord) -> None:
    readers = [await cli("lock", "/rw", "--shared", *child(WAITER, t)) for t in "ab"]
    for reader, tag in zip(readers, "ab", strict=True):  # both read at once
        assert (await reader.line()).startswith(f"start {tag}")
    code, _out, err = await run(cli, "lock", "/rw", "--", "true")  # a mutex would not exclude
    assert code == 1 and "read-write lock" in one_line(err)
    code, _out, _err = await run(cli, "lock", "/rw", "--write", "--timeout", "0", "--", "true")
    assert code == 75
    for reader in readers:
        await reader.send()
        await reader.finish()
    slots = [await cli("lock", "/sem", "--semaphore", "2", *child(WAITER, t)) for t in "ab"]
    for slot in slots:
        assert (await slot.line()).startswith("start")
    code, _out, _err = await run(
        cli, "lock", "/sem", "--semaphore", "2", "--timeout", "0.2", "--", "true"
    )
    assert code == 75
    for slot in slots:
        await slot.send()
        await slot.finish()
        assert slot.returncode == 0


# --- elect -------------------------------------------------------------------------


async def test_elect_hands_over_when_the_leader_is_killed(cli, coord, children_reach) -> None:
    options = ["--session-timeout", "2"]
    first = await cli("elect", "/e", "--id", "a", *options, *child(WAITER, "a"))
    started = await first.line()
    assert started.startswith("start a")
    second = await cli("elect", "/e", "--id", "b", *options, *child(WAITER, "b"))
    await children_reach(coord, "/e", 2)
    first.signal(signal.SIGKILL)
    # Its command dies with it (it must not lead on unguarded)...
    await process_ended(int(started.split()[2]))
    # ...and the other leads once the dead one's session has expired.
    assert (await second.line(timeout=20)).startswith("start b")
    await second.send()
    await second.finish()
    assert second.returncode == 0


async def test_elect_requeue_runs_the_command_again_after_a_lost_term(cli, coord) -> None:
    elector = await cli("elect", "/r", "--requeue", "--grace", "5", *child(WAITER, "a"))
    first_pid = int((await elector.line()).split()[2])
    (node,) = await coord.children("/r")
    await coord.delete(f"/r/{node}")  # leadership lost: the command is stopped...
    await process_ended(first_pid)
    again = await elector.line()  # ...and runs again once leading again
    assert again.startswith("start a") and int(again.split()[2]) != first_pid
    elector.signal(signal.SIGTERM)  # goes to the command; its status is the CLI's
    _out, err = await elector.finish(close_stdin=False)
    assert elector.returncode == 128 + signal.SIGTERM
    assert "lost leadership of '/r'" in err


async def test_elect_observe_prints_the_leader_on_every_change(cli, coord) -> None:
    observer = await cli("elect", "--observe", "/o")
    assert await observer.line() == "no leader"
    election = aiocoord.LeaderElection(coord, "/o", participant_id="a")
    async with election.hold():
        token = election.fencing_token
        assert await observer.line() == f'leader a token {token}: "a"'
        await election.proclaim(b"10.0.0.7:80")
        assert await observer.line() == f'leader a token {token}: "10.0.0.7:80"'
    assert await observer.line() == "no leader"
    observer.signal(signal.SIGINT)
    await observer.finish(close_stdin=False)
    assert observer.returncode == 0


async def test_elect_priority_takes_over_and_stops_the_old_leaders_command(
    cli, coord, children_reach
) -> None:
    first = await cli("elect", "/p", "--id", "low", *child(WAITER, "low"))
    started = await first.line()
    assert started.startswith("start low")
    second = await cli("elect", "/p", "--id", "high", "--priority", "5", *child(WAITER, "high"))
    assert (await second.line()).startswith("start high")
    await process_ended(int(started.split()[2]))  # the old leader's command was stopped
    _out, err = await first.finish()
    assert first.returncode == 71 and "priority take-over by 'high'" in err
    await second.send()
    await second.finish()
    assert second.returncode == 0


# --- counter, queue, barrier ---------------------------------------------------------


async def test_counter_round_trip_in_curators_bytes(cli, coord) -> None:
    assert (await run(cli, "counter", "set", "/n", "41"))[:2] == (0, "41\n")
    assert (await run(cli, "counter", "add", "/n", "1"))[:2] == (0, "42\n")
    data, _stat = await coord.get("/n")
    assert data == struct.pack(">q", 42)  # DistributedAtomicLong's 8 bytes
    await coord.set("/n", struct.pack(">q", -5))
    assert (await run(cli, "counter", "get", "/n"))[:2] == (0, "-5\n")
    code, out, err = await run(cli, "counter", "add", "/n", "-10", "--lower", "-6")
    assert (code, out) == (1, "") and "unchanged" in one_line(err)
    assert (await coord.get("/n"))[0] == struct.pack(">q", -5)


async def test_queue_put_then_get(cli) -> None:
    assert (await run(cli, "queue", "put", "/q", "hello"))[0] == 0
    putter = await cli("queue", "put", "/q")
    assert putter.proc.stdin is not None
    putter.proc.stdin.write(b"\x00raw\n")
    await putter.finish()
    assert putter.returncode == 0
    assert (await run(cli, "queue", "get", "/q"))[:2] == (0, "hello\n")
    getter = await cli("queue", "get", "/q", "--raw")
    out, _err = await getter.finish()
    assert out == "\x00raw\n"
    code, _out, err = await run(cli, "queue", "get", "/q", "--timeout", "0.2")
    assert code == 75 and "no item" in one_line(err)


async def test_barrier_runs_the_command_once_all_members_are_in(cli, coord, children_reach) -> None:
    script = "import sys; print('in', sys.argv[1], flush=True)"
    first = await cli("barrier", "/b", "--members", "2", *child(script, "a"))
    await children_reach(coord, "/b", 1)
    second = await cli("barrier", "/b", "--members", "2", *child(script, "b"))
    outputs = await asyncio.gather(first.finish(), second.finish())
    assert [out for out, _err in outputs] == ["in a\n", "in b\n"]
    assert first.returncode == second.returncode == 0


# --- inspect and watch ---------------------------------------------------------------


async def test_inspect_shows_a_locks_holder_and_waiter(cli, started, children_reach) -> None:
    holder_client, waiter_client = await started(2)
    holder = aiocoord.Mutex(holder_client, "/x")
    await holder.acquire()
    waiter = acquiring(aiocoord.Mutex(waiter_client, "/x"))
    try:
        await children_reach(holder_client, "/x", 2)
        code, out, _err = await run(cli, "inspect", "/x", "--json")
        assert code == 0
        report = json.loads(out)
        assert report["kind"] == "lock"
        assert report["holder"]["session"] == f"0x{holder_client.session_id:x}"
        assert [w["session"] for w in report["waiters"]] == [f"0x{waiter_client.session_id:x}"]
        assert report["holder"]["ctime_ms"] <= report["waiters"][0]["ctime_ms"]
        code, text, _err = await run(cli, "inspect", "/x")
        assert text.splitlines()[0].startswith("/x: lock")
        assert f"waiting      session 0x{waiter_client.session_id:x}" in text
    finally:
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        await holder.release()


async def test_inspect_recognises_each_recipes_layout(cli, started, children_reach) -> None:
    client, other = await started(2)
    semaphore = aiocoord.Semaphore(client, "/app/slots", 3)
    read_write = aiocoord.ReadWriteLock(client, "/app/rw")
    async with (
        aiocoord.LeaderLatch(client, "/app/latch", participant_id="me"),
        aiocoord.GroupMember(client, "/app/group", participant_id="worker-1", data=b"up"),
        read_write.read_lock,
        semaphore,
    ):
        await aiocoord.AtomicLong(client, "/app/hits").force_set(12)
        busy = [aiocoord.AtomicLong(c, "/app/busy") for c in (client, other, client)]
        for counter in busy:  # the third's write lost to the second's: it queued
            await counter.increment()
        await aiocoord.Queue(client, "/app/jobs").put(b"job")
        entering = asyncio.create_task(aiocoord.DoubleBarrier(other, "/app/meet", 2).enter())
        try:
            await children_reach(client, "/app/meet", 1)
            code, out, _err = await run(cli, "inspect", "/app", "--json")
        finally:
            entering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entering
    assert code == 0
    kinds = {r["path"]: r for r in json.loads(out)["children"]}
    assert kinds["/app/latch"]["kind"] == "leader latch"
    assert kinds["/app/latch"]["leader"]["data"] == "me"
    assert kinds["/app/group"]["members"][0]["id"] == "worker-1"
    assert kinds["/app/rw"]["holders"][0]["mode"] == "read"
    assert len(kinds["/app/slots"]["leases"]) == 1
    assert kinds["/app/hits"]["value"] == 12
    assert await client.exists("/app/busy/combining") is not None
    assert (kinds["/app/busy"]["value"], kinds["/app/busy"]["queued"]) == (3, 0)
    assert kinds["/app/jobs"]["depth"] == 1
    assert kinds["/app/meet"]["entered"] == 1


async def test_watch_prints_each_change(cli, coord) -> None:
    await coord.create("/w", b"one")
    watcher = await cli("watch", "/w", "--json")
    assert json.loads(await watcher.line()) | {"mzxid": 0} == {
        "event": "created",
        "path": "/w",
        "version": 0,
        "mzxid": 0,
        "data": "one",
    }
    assert json.loads(await watcher.line())["event"] == "initialized"
    await coord.set("/w", b"two")
    changed = json.loads(await watcher.line())
    assert (changed["event"], changed["data"], changed["version"]) == ("updated", "two", 1)
    await coord.delete("/w")
    assert json.loads(await watcher.line())["event"] == "deleted"
    watcher.signal(signal.SIGINT)
    await watcher.finish()
    assert watcher.returncode == 0  # interrupting is how a watch ends


# --- failures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["lock", "relative/path", "--", "true"], "invalid znode path"),
        (["lock", "/l", "--semaphore", "0", "--", "true"], "--semaphore"),
        (["lock", "/l"], "which command"),
        (["counter", "add", "/c"], "needs N"),
        (["barrier", "/b", "--members", "2"], "which command"),
        (["watch", "/w", "--auth", "nocolon"], "user:password"),
    ],
)
async def test_bad_input_exits_2_with_one_line_and_sends_nothing(cli, args, says) -> None:
    # A server nobody runs: bad input is refused before any connection is tried.
    started = time.monotonic()
    code, out, err = await run(cli, *args, zk="127.0.0.1:1")
    assert code == 2 and out == ""
    assert says in one_line(err)
    assert time.monotonic() - started < 10


async def test_an_unreachable_server_exits_69_within_the_connect_timeout(cli) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        started = time.monotonic()
        code, out, err = await run(
            cli, "counter", "get", "/c", "--connect-timeout", "1", zk=f"127.0.0.1:{port}"
        )
    assert code == 69 and out == ""
    assert "cannot reach ZooKeeper" in one_line(err)
    assert time.monotonic() - started < 8


async def test_the_console_script_has_help_with_exit_codes() -> None:
    script = Path(sys.executable).parent / "aiocoord"
    proc = await asyncio.create_subprocess_exec(
        str(script), "--help", stdout=asyncio.subprocess.PIPE
    )
    out, _err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
    assert b"aiocoord lock /demo -- echo hi" in out and b"exit status:" in out


# --- server --------------------------------------------------------------------------


async def test_server_serves_plain_and_tls_and_stops_without_leftovers(cli) -> None:
    server = await cli("server", "--port", "0", "--tls", connect=False)
    lines = {}
    while "AIOCOORD_ZK" not in lines:
        line = await server.line(timeout=45)
        if line.startswith("export "):
            name, _sep, value = line.removeprefix("export ").partition("=")
            lines[name] = value
        elif line.startswith("# pid"):
            lines["pids"] = line.removeprefix("# pid").strip()
        elif line.startswith("# TLS connect string: "):
            lines["tls"] = line.removeprefix("# TLS connect string: ")
    code, out, _err = await run(cli, "counter", "add", "/c", "3", zk=lines["AIOCOORD_ZK"])
    assert (code, out) == (0, "3\n")
    tls = ["--tls", "--tls-ca", lines["AIOCOORD_TLS_CA"]]
    code, out, _err = await run(cli, "counter", "get", "/c", *tls, zk=lines["tls"])
    assert (code, out) == (0, "3\n")
    # The system's CAs do not vouch for the self-signed certificate.
    untrusted = ["--tls", "--connect-timeout", "2"]
    code, out, err = await run(cli, "counter", "get", "/c", *untrusted, zk=lines["tls"])
    assert (code, out) == (69, "") and "ZooKeeper" in one_line(err)
    server.signal(signal.SIGTERM)
    await server.finish(timeout=30)
    assert server.returncode == 0
    for pid in lines["pids"].split():
        await process_ended(int(pid))
    host, port = lines["AIOCOORD_ZK"].split(":")
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()


# --- logs --------------------------------------------------------------------------


async def test_a_healthy_round_logs_no_warning_and_a_lost_lock_one_naming_it(
    started, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = await started(2)
    with caplog.at_level(logging.DEBUG, logger="aiocoord"):
        async with aiocoord.Mutex(first, "/healthy"):
            pass
        await aiocoord.AtomicLong(first, "/healthy-count").add(1)
        election = aiocoord.LeaderElection(second, "/healthy-election", participant_id="b")
        async with election.hold():
            pass
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert any("connection state" in r.getMessage() for r in caplog.records)
        lock = aiocoord.Mutex(first, "/lost")
        await lock.acquire()
        session = first.session_id
        await expire_session(first)
        await lock.release()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(w.startswith(f"lock '/lost' lost (session 0x{session:x}): ") for w in warnings)
