"""Tests of the ZooKeeper launcher itself: real JVMs on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import sys
import time
from pathlib import Path

import anyio
import pytest

from aiocoord.testing._fourletter import four_letter_word
from aiocoord.testing._server import (
    ZooKeeperEnsemble,
    ZooKeeperNotFoundError,
    ZooKeeperServer,
    find_java,
    find_zookeeper_classpath,
)

pytestmark = pytest.mark.timeout(90)

REPO_ROOT = Path(__file__).resolve().parents[2]


def pid_alive(pid: int) -> bool:
    """True if *pid* is a live process (zombies count as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def wait_ended(pid: int, within: float) -> None:
    """Return once *pid* has ended (a zombie counts); fail after *within* seconds.

    The process is not our child, so there is nothing to ``wait()`` on: a pidfd
    (Linux) becomes readable when its process ends."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        with anyio.move_on_after(within):
            await anyio.wait_readable(fd)
        if pid_alive(pid):
            pytest.fail(f"timed out after {within}s waiting for {pid} to end")
    finally:
        os.close(fd)


def open_raw_session(port: int, timeout_ms: int = 30000) -> int:
    """Create a ZooKeeper session with a bare ConnectRequest and drop the TCP connection.

    The session lives on in the server until it expires, which lets the tests see
    whether a restarted server kept its data.
    """
    body = struct.pack(">iqiqi16s?", 0, 0, timeout_ms, 0, 16, b"\0" * 16, False)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        header = sock.recv(4, socket.MSG_WAITALL)
        (length,) = struct.unpack(">i", header)
        reply = sock.recv(length, socket.MSG_WAITALL)
    _protocol, _timeout, session_id = struct.unpack(">iiq", reply[:16])
    assert session_id != 0
    return int(session_id)


async def global_sessions(zk: ZooKeeperServer) -> int:
    mntr = await zk.four_letter_word("mntr")
    values = dict(line.split("\t", 1) for line in mntr.splitlines() if "\t" in line)
    return int(values["zk_global_sessions"])


# ------------------------------------------------------------------------ standalone


async def test_start_serve_stop() -> None:
    async with ZooKeeperServer() as zk:
        assert zk.is_running
        assert zk.pid is not None and pid_alive(zk.pid)
        assert zk.host == "127.0.0.1"
        assert zk.connect_string == f"127.0.0.1:{zk.port}"
        assert await four_letter_word(zk.host, zk.port, "ruok") == "imok"
        assert await zk.mode() == "standalone"
        info = await zk.srvr()
        assert info["Mode"] == "standalone"
        assert info["Zxid"].startswith("0x")
        assert (zk.data_dir / "zoo.cfg").is_file()
        assert (zk.data_dir / "server.log").is_file()

        pid = zk.pid
        await zk.stop()
        assert not zk.is_running
        assert zk.pid is None
        assert not pid_alive(pid)
        with pytest.raises(ConnectionRefusedError):
            await four_letter_word(zk.host, zk.port, "ruok", timeout=2)
        await zk.stop()  # stopping a stopped server is a no-op


async def test_restart_keeps_port_data_and_sessions() -> None:
    async with ZooKeeperServer() as zk:
        port, data_dir, first_pid = zk.port, zk.data_dir, zk.pid
        open_raw_session(port)
        assert await global_sessions(zk) == 1

        await zk.stop()
        await zk.start()

        assert zk.port == port
        assert zk.data_dir == data_dir
        assert zk.pid != first_pid
        assert await zk.mode() == "standalone"
        assert await global_sessions(zk) == 1  # restored from the transaction log


async def test_kill_then_start() -> None:
    async with ZooKeeperServer() as zk:
        pid = zk.pid
        assert pid is not None
        await zk.kill()
        assert not zk.is_running
        assert not pid_alive(pid)
        with pytest.raises(ConnectionRefusedError):
            await four_letter_word(zk.host, zk.port, "ruok", timeout=2)
        await zk.start()
        assert await zk.four_letter_word("ruok") == "imok"


async def test_pause_and_resume() -> None:
    async with ZooKeeperServer() as zk:
        zk.pause()
        assert zk.is_paused and zk.is_running
        with pytest.raises(TimeoutError):
            await zk.four_letter_word("ruok", timeout=0.5)
        zk.resume()
        assert not zk.is_paused
        assert await zk.four_letter_word("ruok", timeout=5) == "imok"

        # A paused server can still be stopped (it gets SIGCONT after SIGTERM).
        zk.pause()
        started = time.monotonic()
        await zk.stop()
        assert not zk.is_running
        assert time.monotonic() - started < 8


async def test_close_reaps_process_and_removes_data_dir() -> None:
    zk = ZooKeeperServer()
    await zk.start()
    pid, data_dir = zk.pid, zk.data_dir
    assert pid is not None and data_dir.is_dir()
    await zk.aclose()
    assert not pid_alive(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not a zombie
    assert not data_dir.exists()
    await zk.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await zk.start()


async def test_crash_during_start_reports_log() -> None:
    zk = ZooKeeperServer(extra_config={"tickTime": "not-a-number"})
    with pytest.raises(RuntimeError, match="exited") as info:
        async with zk:
            pass
    assert "Invalid config" in str(info.value)
    assert not zk.is_running
    assert not zk.data_dir.exists()


async def test_log_true_writes_server_log() -> None:
    async with ZooKeeperServer(log=True) as zk:
        assert "slf4j-simple" in find_zookeeper_classpath(log=True)
        text = zk.log_path.read_text()
        assert "ZooKeeperServer" in text or "binding to port" in text, zk.log_tail()


async def test_four_letter_word_errors() -> None:
    with pytest.raises(ValueError):
        await four_letter_word("127.0.0.1", 1, "toolong")
    with socket.socket() as sock:  # a port that is bound but not listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            await four_letter_word("127.0.0.1", port, "ruok", timeout=2)


# ------------------------------------------------------------ reaping if we crash


CHILD_SCRIPT = """
import os, signal, sys
import anyio
from aiocoord.testing._server import ZooKeeperServer

async def main() -> None:
    zk = ZooKeeperServer()
    await zk.start()
    print(zk.pid, zk.data_dir, flush=True)
    if sys.argv[1] == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if sys.argv[1] == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)  # as a service manager stops it
        await anyio.sleep(30)
    # "exit": return without closing; the atexit hook must clean up

anyio.run(main)
"""


@pytest.mark.parametrize("how", ["crash", "exit", "sigterm"])
async def test_server_dies_with_its_parent(how: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with anyio.fail_after(45):
        result = await anyio.run_process(
            [sys.executable, "-c", CHILD_SCRIPT, how], env=env, check=False
        )
    out = result.stdout.decode().split()
    assert len(out) == 2, (result.stdout, result.stderr)
    pid, data_dir = int(out[0]), Path(out[1])
    try:
        if how == "crash":
            assert result.returncode == -signal.SIGKILL
        elif how == "sigterm":
            # It still dies of SIGTERM, but its temp dirs went first.
            assert result.returncode == -signal.SIGTERM, result.stderr
            assert not await anyio.Path(data_dir).exists()
        else:
            assert result.returncode == 0, result.stderr
            assert not await anyio.Path(data_dir).exists()

        await wait_ended(pid, 10)  # the JVM dies with its parent
    finally:
        if pid_alive(pid):  # only on failure: don't leak the JVM our child started
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(data_dir, ignore_errors=True)


# ------------------------------------------------------------------------- discovery


def test_bogus_zookeeper_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path / "no-such-zookeeper"))
    with pytest.raises(ZooKeeperNotFoundError, match="ZOOKEEPER_HOME"):
        find_zookeeper_classpath()


def test_zookeeper_home_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "conf").mkdir()
    for jar in ("lib/zookeeper-3.8.0.jar", "lib/zookeeper-jute-3.8.0.jar", "lib/netty.jar"):
        (tmp_path / jar).touch()
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    entries = find_zookeeper_classpath().split(os.pathsep)
    assert str(tmp_path / "lib" / "zookeeper-3.8.0.jar") in entries
    assert str(tmp_path / "lib" / "netty.jar") in entries
    assert str(tmp_path / "conf") in entries


def test_zookeeper_version_puts_its_jute_jar_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Debian 13's zookeeper-3.9.3.jar names the system's (3.8.0) jute jar in its manifest,
    which the JVM searches right after it: the versioned jute jar must come before."""
    cache = tmp_path / "root" / "usr" / "share" / "java"
    cache.mkdir(parents=True)
    for jar in ("zookeeper-9.7.1.jar", "zookeeper-jute-9.7.1.jar", "zookeeper-9.7.2.jar"):
        (cache / jar).touch()  # 9.7.2 has no jute jar beside it: not a usable version
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setenv("AIOCOORD_JAR_CACHE", str(tmp_path))
    monkeypatch.setenv("ZOOKEEPER_VERSION", "9.7")
    entries = find_zookeeper_classpath().split(os.pathsep)
    assert entries[:2] == [
        str(cache / "zookeeper-jute-9.7.1.jar"),
        str(cache / "zookeeper-9.7.1.jar"),
    ]


def test_missing_zookeeper_version_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setenv("AIOCOORD_JAR_CACHE", str(tmp_path))
    monkeypatch.setenv("ZOOKEEPER_VERSION", "3.1")
    with pytest.raises(ZooKeeperNotFoundError) as raised:
        find_zookeeper_classpath()
    assert "make zookeeper ZOOKEEPER_VERSION=3.9" in str(raised.value)
    assert "ZOOKEEPER_HOME" in str(raised.value)


async def test_server_runs_the_zookeeper_version_asked_for() -> None:
    """``make test ZOOKEEPER_VERSION=3.9`` must test 3.9.3, not the system's 3.8.0."""
    wanted = os.environ.get("ZOOKEEPER_VERSION")
    if os.environ.get("ZOOKEEPER_HOME"):
        wanted = None  # a release of the user's: any version
    elif not wanted:  # the system's: Debian's zookeeper.jar and zookeeper-<version>.jar
        system = Path("/usr/share/java/zookeeper.jar")
        same = [p for p in system.parent.glob("zookeeper-[0-9]*.jar") if p.samefile(system)]
        wanted = same[0].stem.removeprefix("zookeeper-")
    async with ZooKeeperServer() as zk:
        version = (await zk.srvr())["Zookeeper version"]
    assert wanted is None or version.startswith(f"{wanted}"), version


def test_missing_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ZooKeeperNotFoundError, match="java"):
        find_java()


# -------------------------------------------------------------------------- ensemble


@pytest.mark.ensemble
async def test_ensemble_failover_and_rejoin() -> None:
    async with ZooKeeperEnsemble(3) as ensemble:
        assert len(ensemble.connect_string.split(",")) == 3
        ports = {p for m in ensemble.members for p in (m.port, m._peer_port, m._election_port)}
        assert len(ports) == 9
        for member in ensemble.members:
            assert (member.data_dir / "myid").read_text().strip() == str(member.myid)
        modes = sorted([await m.mode() for m in ensemble.members])
        assert modes == ["follower", "follower", "leader"]

        old_leader = await ensemble.leader()
        assert len(await ensemble.followers()) == 2
        await old_leader.kill()

        new_leader = await ensemble.wait_quorum(timeout=30)
        assert new_leader is not old_leader
        assert await new_leader.mode() == "leader"
        followers = await ensemble.followers()
        assert len(followers) == 1 and old_leader not in followers

        await old_leader.start(timeout=30)
        assert await old_leader.mode() == "follower"
        assert await ensemble.wait_quorum(timeout=30) is new_leader

        # A paused member is left out of the quorum check, not waited for.
        follower = (await ensemble.followers())[0]
        follower.pause()
        assert await ensemble.wait_quorum(timeout=30) is new_leader
        follower.resume()
        await ensemble.wait_quorum(timeout=30)
    assert all(not m.is_running and not m.data_dir.exists() for m in ensemble.members)
