"""``aiocoord server``: a ZooKeeper (or an ensemble) in the foreground, from the launcher
the tests use (:mod:`aiocoord.testing`), until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from ._exit import CliError, ExitCode
from ._output import log, write_line
from ._session import (
    DEFAULT_ZK,
    ENV_SASL_PASSWORD,
    ENV_SASL_USER,
    ENV_TLS_CA,
    ENV_ZK,
    Interrupts,
)

if TYPE_CHECKING:
    from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer

__all__ = ["server_command"]

DEFAULT_PORT = int(DEFAULT_ZK.rsplit(":", 1)[1])
_ALIVE_CHECK = 1.0
"""Seconds between checks that the server processes still run."""


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CliError(
                    ExitCode.FAILED,
                    f"port {port} is in use (a server already running?); --port 0 picks a free one",
                ) from error
            raise CliError(ExitCode.FAILED, f"cannot use port {port}: {error}") from error


def _build(args: argparse.Namespace) -> ZooKeeperServer | ZooKeeperEnsemble:
    # The test kit (and pytest with it) loads only for this command.
    from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer

    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    users = _sasl_users(args.sasl_user or ())
    if args.ensemble > 1:
        if args.tls:
            raise CliError(ExitCode.USAGE, "--tls works with a single server")
        if args.port is not None:
            raise CliError(
                ExitCode.USAGE, "--port sets a single server's port; an ensemble picks free ones"
            )
        ensemble = ZooKeeperEnsemble(
            args.ensemble, tls=args.tls, sasl_users=users, require_sasl=bool(users)
        )
        if data_dir is not None:
            for member in ensemble:
                # ZooKeeper reads a member's id from its data dir.
                member_dir = data_dir / f"member-{member.myid}"
                member_dir.mkdir(parents=True, exist_ok=True)
                (member_dir / "myid").write_text(f"{member.myid}\n")
                member.extra_config["dataDir"] = str(member_dir)
        return ensemble
    port = DEFAULT_PORT if args.port is None else args.port
    if port:
        _check_port_free(port)
    extra: dict[str, str] = {}
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        extra["dataDir"] = str(data_dir)
    return ZooKeeperServer(
        port=port or None,
        extra_config=extra,
        tls=args.tls,
        sasl_users=users,
        require_sasl=bool(users),
    )


def _sasl_users(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``--sasl-user NAME:PASSWORD`` values as a dict (a usage error if malformed)."""
    users: dict[str, str] = {}
    for pair in pairs:
        name, sep, password = pair.partition(":")
        if not sep or not name:
            raise CliError(ExitCode.USAGE, "--sasl-user takes NAME:PASSWORD")
        users[name] = password
    return users


async def _exited(pid: int | None) -> None:
    """Return once process ``pid`` has exited (told by a pidfd on Linux)."""
    if pid is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd here: look now and then
        while _alive(pid):  # noqa: ASYNC110 - nothing to wait on but the clock
            await asyncio.sleep(_ALIVE_CHECK)
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _any_exits(pids: list[int | None]) -> None:
    waits = [asyncio.ensure_future(_exited(pid)) for pid in pids]
    try:
        await asyncio.wait(waits, return_when="FIRST_COMPLETED")
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.wait(waits)


async def server_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperNotFoundError

    if args.ensemble < 1:
        raise CliError(ExitCode.USAGE, "--ensemble needs at least 1 member")
    try:
        target = _build(args)
    except ValueError as error:  # a SASL user name or password the kit cannot write
        raise CliError(ExitCode.USAGE, f"--sasl-user: {error}") from error
    except OSError as error:
        raise CliError(ExitCode.USAGE, f"cannot use --data-dir: {error}") from error
    members = list(target) if isinstance(target, ZooKeeperEnsemble) else [target]
    try:
        try:
            log.info("starting ZooKeeper (%d member(s))", len(members))
            await target.start()
        except ZooKeeperNotFoundError as error:
            raise CliError(ExitCode.UNAVAILABLE, " ".join(str(error).split())) from error
        except (RuntimeError, TimeoutError, OSError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise CliError(ExitCode.UNAVAILABLE, f"ZooKeeper did not start: {first}") from error
        kind = f"an ensemble of {len(members)}" if len(members) > 1 else "standalone"
        where = f"data in {args.data_dir}" if args.data_dir else "data discarded on exit"
        write_line(f"# ZooKeeper is serving ({kind}, {where}); Ctrl-C stops it")
        write_line(f"# connect string: {target.connect_string}")
        write_line("# pid " + " ".join(str(member.pid) for member in members))
        if args.tls:
            write_line(f"# TLS connect string: {target.secure_connect_string}")
            write_line(f"export {ENV_TLS_CA}={members[0].tls_ca_file}")
            write_line("# (a TLS client: aiocoord --tls --zk <TLS connect string> ...)")
        if args.sasl_user:
            first = next(iter(members[0].sasl_users))
            write_line(f"# SASL required; users: {', '.join(members[0].sasl_users)}")
            write_line(f"export {ENV_SASL_USER}={first}")
            write_line(
                f"# (and the password: export {ENV_SASL_PASSWORD}=... or --sasl-password-file)"
            )
        write_line(f"export {ENV_ZK}={target.connect_string}")
        await _any_exits([member.pid for member in members])
        stopped = [str(member.connect_string) for member in members if not member.is_running]
        raise CliError(ExitCode.FAILED, f"ZooKeeper at {', '.join(stopped)} exited on its own")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(target.aclose())
