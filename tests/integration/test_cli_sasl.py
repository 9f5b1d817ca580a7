"""The command line against SASL-required servers: DIGEST-MD5 on one that ``aiocoord
server`` starts itself, Kerberos on the test kit's, with a real KDC."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
import pytest_asyncio

from aiocoord.testing import KerberosKDC, ZooKeeperServer

pytestmark = pytest.mark.timeout(90)

CLI = (sys.executable, "-m", "aiocoord")


def _clean_env() -> dict[str, str]:
    """The environment without the CLI's AIOCOORD_ settings (the jar cache stays: it
    picks the ZooKeeper version the server command runs)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AIOCOORD_") or k == "AIOCOORD_JAR_CACHE"
    }


async def run(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 30
) -> tuple[int, str, str]:
    """Run ``aiocoord`` to its end, with only ``env`` among the AIOCOORD_ variables."""
    clean = _clean_env()
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest_asyncio.fixture
async def sasl_server() -> AsyncIterator[dict[str, str]]:
    """``aiocoord server --sasl-user alice:...`` running; yields its export lines."""
    clean = _clean_env()
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "server",
        "--port",
        "0",
        "--sasl-user",
        "alice:alice-secret",
        "--sasl-user",
        "bob:bob-secret",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean,
    )
    assert proc.stdout is not None
    exports: dict[str, str] = {}
    try:
        while "AIOCOORD_ZK" not in exports:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, "aiocoord server ended before serving"
            if line.startswith("export "):
                name, _sep, value = line.removeprefix("export ").strip().partition("=")
                exports[name] = value
            assert "secret" not in line  # the passwords are not printed
        yield exports
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()


async def test_commands_authenticate_from_flags_or_environment(
    sasl_server: dict[str, str], tmp_path: Path
) -> None:
    zk = ["--zk", sasl_server["AIOCOORD_ZK"]]
    assert sasl_server["AIOCOORD_SASL_USER"] == "alice"
    password_file = tmp_path / "password"
    password_file.write_text("alice-secret\n")
    flags = ["--sasl-user", "alice", "--sasl-password-file", str(password_file)]
    assert await run("counter", "add", "/c", "3", *zk, *flags) == (0, "3\n", "")
    from_env = {"AIOCOORD_SASL_USER": "alice", "AIOCOORD_SASL_PASSWORD": "alice-secret"}
    code, out, _err = await run("counter", "get", "/c", *zk, env=from_env)
    assert (code, out) == (0, "3\n")
    file_env = {"AIOCOORD_SASL_USER": "alice", "AIOCOORD_SASL_PASSWORD_FILE": str(password_file)}
    code, out, _err = await run("counter", "add", "/c", "1", *zk, env=file_env)
    assert (code, out) == (0, "4\n")
    # No SASL: the server's refusal, told as such (exit 77), not a generic failure.
    code, out, err = await run("counter", "get", "/c", *zk)
    assert (code, out) == (77, "")
    assert "requires SASL" in err and "--sasl-user" in err
    # A wrong password: refused at once, and the password is not repeated.
    password_file.write_text("not-it\n")
    code, out, err = await run("counter", "get", "/c", *zk, *flags)
    assert (code, out) == (77, "")
    assert "refused the SASL user's credentials" in err and "not-it" not in err


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--sasl-password-file", "/nonexistent"], {}, "needs --sasl-user"),
        (["--sasl-user", "alice"], {}, "needs a password"),
        (["--sasl-user", "alice", "--sasl-password-file", "/nonexistent/pw"], {}, "cannot read"),
        ([], {"AIOCOORD_SASL_USER": "alice"}, "needs a password"),
    ],
)
async def test_bad_sasl_options_are_usage_errors_before_connecting(
    args: list[str], env: dict[str, str], says: str
) -> None:
    # A server nobody runs: the options are refused before any connection is tried.
    code, out, err = await run("counter", "get", "/c", "--zk", "127.0.0.1:1", *args, env=env)
    assert (code, out) == (2, "")
    assert says in err


async def test_server_refuses_a_malformed_sasl_user() -> None:
    code, _out, err = await run("server", "--port", "0", "--sasl-user", "alice")
    assert code == 2 and "NAME:PASSWORD" in err


async def test_kerberos_commands_authenticate_from_the_ticket_cache() -> None:
    async with KerberosKDC() as kdc:
        await kdc.add_principal("alice", password="alice-secret")
        cache = await kdc.kinit("alice", password="alice-secret")
        with_ticket = kdc.environment(ccache=cache)
        async with ZooKeeperServer(kerberos=kdc, require_sasl=True) as server:
            zk = ["--zk", server.connect_string]
            flags = ["--kerberos", "--principal", kdc.principal("alice")]
            assert await run("counter", "add", "/k", "2", *zk, *flags, env=with_ticket) == (
                0,
                "2\n",
                "",
            )
            from_env = {**with_ticket, "AIOCOORD_KERBEROS": "1"}
            code, out, _err = await run("counter", "get", "/k", *zk, env=from_env)
            assert (code, out) == (0, "2\n")
            # No ticket in the cache: refused at once, the cause named (exit 77).
            no_ticket = {**kdc.environment(), "AIOCOORD_KERBEROS": "1"}
            code, out, err = await run("counter", "get", "/k", *zk, env=no_ticket)
            assert (code, out) == (77, "")
            assert "Kerberos authentication" in err and "no ticket" in err, err
