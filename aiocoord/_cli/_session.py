"""The CLI's ZooKeeper session (from ``--zk``, ``--auth``, TLS and timeout options) and
its signal handling."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Iterator

import aiocoord

from ._exit import CliError, ExitCode
from ._output import log, quiet_unless_verbose, session_hex

__all__ = [
    "DEFAULT_ZK",
    "ENV_KERBEROS",
    "ENV_KERBEROS_HOSTNAME",
    "ENV_KERBEROS_PRINCIPAL",
    "ENV_KERBEROS_SERVICE",
    "ENV_SASL_PASSWORD",
    "ENV_SASL_PASSWORD_FILE",
    "ENV_SASL_USER",
    "ENV_TLS_CA",
    "ENV_ZK",
    "Interrupts",
    "bad_input",
    "connected",
    "make_client",
    "zk_hosts",
]

ENV_ZK = "AIOCOORD_ZK"
ENV_TLS_CA = "AIOCOORD_TLS_CA"
ENV_SASL_USER = "AIOCOORD_SASL_USER"
ENV_SASL_PASSWORD_FILE = "AIOCOORD_SASL_PASSWORD_FILE"
ENV_SASL_PASSWORD = "AIOCOORD_SASL_PASSWORD"
ENV_KERBEROS = "AIOCOORD_KERBEROS"
ENV_KERBEROS_PRINCIPAL = "AIOCOORD_KERBEROS_PRINCIPAL"
ENV_KERBEROS_SERVICE = "AIOCOORD_KERBEROS_SERVICE"
ENV_KERBEROS_HOSTNAME = "AIOCOORD_KERBEROS_HOSTNAME"
DEFAULT_ZK = "127.0.0.1:2181"


@contextlib.contextmanager
def bad_input() -> Iterator[None]:
    """Input the library refuses (a bad path, a count below 1) is a usage error."""
    try:
        yield
    except (ValueError, TypeError, OverflowError) as error:
        raise CliError(ExitCode.USAGE, " ".join(str(error).split())) from error


def zk_hosts(args: argparse.Namespace) -> str:
    """The connect string: ``--zk``, else $AIOCOORD_ZK, else the local default."""
    hosts: str = args.zk or os.environ.get(ENV_ZK) or DEFAULT_ZK
    return hosts


def _tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    ca = args.tls_ca or (os.environ.get(ENV_TLS_CA) if args.tls else None)
    if not (args.tls or ca or args.tls_cert or args.tls_insecure):
        return None
    try:
        context = ssl.create_default_context(cafile=ca)
        if args.tls_cert:
            context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as error:
        raise CliError(ExitCode.USAGE, f"cannot load the TLS files: {error}") from error
    if args.tls_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _env_switch(name: str) -> bool:
    text = os.environ.get(name, "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise CliError(ExitCode.USAGE, f"${name} takes 1 or 0, not {text!r}")


def _wants_kerberos(args: argparse.Namespace) -> bool:
    """Kerberos or not: ``--kerberos``/``--sasl-user`` choose, else the environment.
    Both mechanisms from the same source is a usage error."""
    if args.kerberos and args.sasl_user:
        raise CliError(ExitCode.USAGE, "--kerberos and --sasl-user exclude each other")
    if args.kerberos or args.sasl_user:
        return bool(args.kerberos)
    kerberos = _env_switch(ENV_KERBEROS)
    if kerberos and os.environ.get(ENV_SASL_USER):
        raise CliError(ExitCode.USAGE, f"${ENV_KERBEROS} and ${ENV_SASL_USER} exclude each other")
    return kerberos


def _kerberos(args: argparse.Namespace) -> aiocoord.SaslKerberos:
    def option(flag: str | None, env: str) -> str | None:
        return flag if flag is not None else os.environ.get(env) or None

    if args.sasl_password_file:
        raise CliError(ExitCode.USAGE, "--sasl-password-file goes with --sasl-user, not Kerberos")
    service = option(args.kerberos_service, ENV_KERBEROS_SERVICE)
    try:
        with bad_input():
            return aiocoord.SaslKerberos(
                principal=option(args.principal, ENV_KERBEROS_PRINCIPAL),
                service="zookeeper" if service is None else service,
                hostname=option(args.kerberos_hostname, ENV_KERBEROS_HOSTNAME),
            )
    except aiocoord.MissingExtraError as error:
        raise CliError(
            ExitCode.UNAVAILABLE,
            f"Kerberos needs the {error.package} package: pip install 'aiocoord[{error.extra}]'",
        ) from error


def _sasl(args: argparse.Namespace) -> aiocoord.SaslMechanism | None:
    """The SASL mechanism: Kerberos (``--kerberos``), else DIGEST-MD5 credentials
    from ``--sasl-user``/``--sasl-password-file``, each also from the environment;
    None when neither is asked for."""
    if _wants_kerberos(args):
        return _kerberos(args)
    for flag, value in (
        ("--principal", args.principal),
        ("--kerberos-service", args.kerberos_service),
        ("--kerberos-hostname", args.kerberos_hostname),
    ):
        if value is not None:
            raise CliError(ExitCode.USAGE, f"{flag} needs --kerberos")
    user = args.sasl_user or os.environ.get(ENV_SASL_USER)
    password_file = args.sasl_password_file or os.environ.get(ENV_SASL_PASSWORD_FILE)
    if not user:
        if args.sasl_password_file:
            raise CliError(ExitCode.USAGE, "--sasl-password-file needs --sasl-user")
        return None
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as file:
                password = file.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as error:
            raise CliError(
                ExitCode.USAGE, f"cannot read the SASL password file {password_file!r}: {error}"
            ) from error
    elif ENV_SASL_PASSWORD in os.environ:
        password = os.environ[ENV_SASL_PASSWORD]
    else:
        raise CliError(
            ExitCode.USAGE,
            f"SASL user {user!r} needs a password: --sasl-password-file, "
            f"${ENV_SASL_PASSWORD_FILE} or ${ENV_SASL_PASSWORD}",
        )
    with bad_input():
        return aiocoord.SaslDigest(user, password)


def make_client(args: argparse.Namespace) -> aiocoord.Client:
    """A client for the options, not started (nothing is sent: input is checked first)."""
    auth: list[tuple[str, str]] = []
    for credential in args.auth or ():
        user, sep, _password = credential.partition(":")
        if not sep or not user:
            raise CliError(ExitCode.USAGE, f"--auth takes user:password, not {credential!r}")
        auth.append(("digest", credential))
    options: aiocoord.ClientOptions = {
        "session_timeout": args.session_timeout,
        "start_timeout": args.connect_timeout,
        "connect_timeout": min(args.connect_timeout, 2.0),
        "auth": auth,
        "sasl": _sasl(args),
        "ssl_context": _tls_context(args),
    }
    if args.namespace:
        options["namespace"] = args.namespace
    with bad_input():
        return aiocoord.connect(zk_hosts(args), **options)


@contextlib.asynccontextmanager
async def connected(client: aiocoord.Client, args: argparse.Namespace) -> AsyncIterator[None]:
    """Start ``client`` within ``--connect-timeout``; close it (ending its session) after."""
    hosts = zk_hosts(args)
    try:
        with quiet_unless_verbose():
            await client.start(timeout=args.connect_timeout)
    except aiocoord.AuthFailedError as error:
        if error.mechanism == "GSSAPI":
            message = f"Kerberos authentication with ZooKeeper at {hosts} failed ({error.reason})"
        elif error.mechanism is not None:
            message = f"ZooKeeper at {hosts} refused the SASL user's credentials ({error.reason})"
        else:
            message = f"ZooKeeper at {hosts} refused --auth"
        raise CliError(ExitCode.NO_PERMISSION, message) from error
    except aiocoord.OperationTimeoutError as error:
        raise CliError(ExitCode.UNAVAILABLE, f"cannot reach ZooKeeper: {error}") from error
    except aiocoord.CoordinationError as error:  # e.g. every server's certificate refused
        message = " ".join(str(error).split())
        raise CliError(ExitCode.UNAVAILABLE, f"cannot connect to ZooKeeper: {message}") from error
    log.info("connected to %s (session %s)", hosts, session_hex(client.session_id))
    try:
        yield
    finally:
        await client.aclose()


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP while a command runs go to it (its exit status then
    tells); otherwise they cancel the CLI's work, which cleans up (deletes its nodes,
    ends its session) and exits ``128 + N``. A second signal during that cleanup
    exits at once: the session's nodes then go when it times out.

    A SIGINT typed at the terminal already reached the command (same process
    group), so it is not sent again.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.signum: int | None = None
        """The first signal received (forwarded or not)."""
        self.child: asyncio.subprocess.Process | None = None
        """The running command, to forward signals to."""
        self._task: asyncio.Task[object] | None = None
        self._cancelled = False

    @property
    def stopping(self) -> bool:
        """Whether a signal asked the CLI to stop."""
        return self.signum is not None

    def install(self, task: asyncio.Task[object]) -> None:
        self._task = task
        loop = asyncio.get_running_loop()
        for signum in self.SIGNALS:
            loop.add_signal_handler(signum, self._received, signum)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in self.SIGNALS:
            loop.remove_signal_handler(signum)

    def _received(self, signum: int) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        child = self.child
        if child is not None and child.returncode is None:
            if not (signum == signal.SIGINT and _terminal_sent_it()):
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signum)
            return
        if self._cancelled:
            # A second signal: stop waiting for the cleanup, and die of it.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self._cancelled = True
        self.signum = signum
        if self._task is not None:
            self._task.cancel()


def _terminal_sent_it() -> bool:
    """Whether we run in the foreground of a terminal (whose Ctrl-C reaches our
    whole process group, the command included)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False
