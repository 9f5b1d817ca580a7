"""A throwaway MIT Kerberos KDC on loopback, for tests of Kerberos-secured servers.

:class:`KerberosKDC` makes a realm in a temp dir of its own (its own ``krb5.conf`` and
``kdc.conf``, a database made with ``kdb5_util``, principals through ``kadmin.local``),
runs ``krb5kdc`` in the foreground as a child process on a free loopback port (UDP and
TCP), and hands out keytabs, passwords, ticket caches and the environment a client
needs. The system's ``/etc/krb5.conf`` is never read or written: every tool runs with
``KRB5_CONFIG`` and ``KRB5_KDC_PROFILE`` pointing into the temp dir.

Needs MIT Kerberos' tools (Debian: ``krb5-kdc``, ``krb5-admin-server``, ``krb5-user``;
in aiocoord's checkout ``scripts/ensure-kerberos.sh`` installs them).
"""

# Timeouts here are the kit's own bounded waits, not a caller's cancellation policy.

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import anyio

from .._exceptions import OperationTimeoutError
from .._process import dying_with_parent
from ._local import HOST, LIVE_PROCS, OWNED_DIRS, cleanup_on_sigterm, free_ports

__all__ = ["KerberosKDC", "KerberosNotFoundError"]

DEFAULT_REALM = "AIOCOORD.TEST"
_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_INSTALL_HINT = (
    "install MIT Kerberos' KDC and tools, e.g. on Debian or Ubuntu "
    "`sudo apt-get install krb5-kdc krb5-admin-server krb5-user` (in aiocoord's own "
    "checkout, `sh scripts/ensure-kerberos.sh` does it)"
)
_PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9._-]+)?")
_REALM = re.compile(r"[A-Z0-9][A-Z0-9.-]*")
_LOG_TAIL_LINES = 30


class KerberosNotFoundError(RuntimeError):
    """An MIT Kerberos tool (``krb5kdc``, ``kdb5_util``, ``kadmin.local``, ``kinit``)
    could not be found."""


def _find_tool(name: str) -> str:
    """*name* on PATH, else in the sbin dirs (often not on a user's PATH)."""
    found = shutil.which(name)
    if found is None:
        found = next((f"{d}/{name}" for d in _SBIN_DIRS if os.access(f"{d}/{name}", os.X_OK)), None)
    if found is None:
        raise KerberosNotFoundError(
            f"no `{name}` on PATH nor in {', '.join(_SBIN_DIRS)}; " + _INSTALL_HINT
        )
    return found


def _free_udp_and_tcp_port() -> int:
    """A loopback port free for both TCP and UDP right now (the KDC listens on both)."""
    for _ in range(100):
        port = free_ports(1)[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind((HOST, port))
            except OSError:
                continue
        return port
    raise OSError("no loopback port free for both TCP and UDP")


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait until *proc* has exited (and is reaped); False if *timeout* s pass first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while proc.poll() is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


class KerberosKDC:
    """An MIT Kerberos KDC for realm *realm* on 127.0.0.1, in a temp dir of its own.

    ``async with KerberosKDC() as kdc:`` makes the realm, starts ``krb5kdc`` and waits
    until it accepts connections; leaving the block stops it (by PID) and removes the
    dir. :meth:`start` and :meth:`aclose` do the same without the block, and
    :meth:`stop` stops the process but keeps the realm, so :meth:`start` can run it
    again on the same port.

    Principals: :meth:`add_principal` (a random key, or a password),
    :meth:`keytab` (export its keys), :meth:`kinit` (a ticket cache of its own),
    :meth:`environment` (``KRB5_CONFIG``, ``KRB5CCNAME``, ``KRB5_CLIENT_KTNAME``,
    ``KRB5_KTNAME`` for a client or an acceptor in another process, or for
    ``os.environ`` in this one).

    *clock_skew* (seconds) is the realm's tolerated clock difference, also how long
    past its end a ticket is still taken: tests of expiry pass a small one. Tickets
    last *max_ticket_lifetime* seconds at most.
    """

    def __init__(
        self,
        *,
        realm: str = DEFAULT_REALM,
        clock_skew: int = 300,
        max_ticket_lifetime: int = 3600,
        log: bool = False,
    ) -> None:
        if not isinstance(realm, str) or not _REALM.fullmatch(realm):
            raise ValueError(f"realm must be upper-case letters, digits, dots: {realm!r}")
        if clock_skew < 0 or max_ticket_lifetime < 1:
            raise ValueError("clock_skew must be >= 0 and max_ticket_lifetime >= 1")
        self.realm = realm
        self.clock_skew = clock_skew
        self.max_ticket_lifetime = max_ticket_lifetime
        self.log = log
        self._master_password = secrets.token_hex(16)
        self._port: int | None = None
        self._dir: Path | None = None
        self._created = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        # kadmin.local runs one at a time: ensemble members start concurrently.
        self._admin = anyio.Lock()
        self._ensuring = anyio.Lock()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<KerberosKDC {self.realm} {HOST}:{self._port} pid={self.pid} {state}>"

    # -- where things are

    @property
    def directory(self) -> Path:
        """The temp dir: configuration, database, keytabs, ticket caches, ``kdc.log``."""
        if self._dir is None:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            self._dir = Path(tempfile.mkdtemp(prefix="aiocoord-kdc-"))
            OWNED_DIRS[str(self._dir)] = os.getpid()
            cleanup_on_sigterm()
        return self._dir

    @property
    def port(self) -> int:
        """The KDC's port on 127.0.0.1, UDP and TCP (picked on first use, then kept)."""
        if self._port is None:
            self._port = _free_udp_and_tcp_port()
        return self._port

    @property
    def krb5_conf(self) -> Path:
        """The realm's ``krb5.conf``: give it to clients as ``KRB5_CONFIG`` and to a JVM
        as ``-Djava.security.krb5.conf``."""
        return self.directory / "krb5.conf"

    @property
    def log_path(self) -> Path:
        """The KDC's log (and its stdout and stderr)."""
        return self.directory / "kdc.log"

    @property
    def pid(self) -> int | None:
        """PID of the running ``krb5kdc``, or None."""
        return self._proc.pid if self.is_running and self._proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the ``krb5kdc`` process exists."""
        return self._proc is not None and self._proc.poll() is None

    def principal(self, name: str) -> str:
        """*name* with this realm: ``alice`` -> ``alice@AIOCOORD.TEST``.

        A name that already ends in ``@<realm>`` is returned as is; ValueError for a
        name that is not ``primary`` or ``primary/instance`` (or names another realm).
        """
        if not isinstance(name, str):
            raise TypeError(f"a principal name is a str, not {type(name).__name__}")
        base, at, realm = name.partition("@")
        if at and realm != self.realm:
            raise ValueError(f"principal {name!r} is not in realm {self.realm}")
        if not _PRINCIPAL.fullmatch(base):
            raise ValueError(f"bad principal name {name!r}: want primary or primary/instance")
        return f"{base}@{self.realm}"

    def _file_for(self, principal: str, suffix: str) -> Path:
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", principal.partition("@")[0])
        return self.directory / f"{stem}.{suffix}"

    def default_ccache(self, name: str) -> Path:
        """The ticket cache :meth:`kinit` fills for principal *name* by default."""
        return self._file_for(self.principal(name), "ccache")

    def environment(
        self,
        *,
        ccache: Path | str | None = None,
        client_keytab: Path | str | None = None,
        keytab: Path | str | None = None,
    ) -> dict[str, str]:
        """The variables a Kerberos client (or acceptor) needs for this realm.

        Always ``KRB5_CONFIG``; ``KRB5CCNAME`` for *ccache* (a path; else a cache
        of this KDC's dir that holds no ticket, so the user's own is never used),
        ``KRB5_CLIENT_KTNAME`` for *client_keytab* (a client gets its initial ticket
        from it when the cache has none) and ``KRB5_KTNAME`` for *keytab* (an
        acceptor's keys).
        """
        cache = ccache if ccache is not None else self.directory / "empty.ccache"
        env = {"KRB5_CONFIG": str(self.krb5_conf), "KRB5CCNAME": f"FILE:{cache}"}
        if client_keytab is not None:
            env["KRB5_CLIENT_KTNAME"] = f"FILE:{client_keytab}"
        if keytab is not None:
            env["KRB5_KTNAME"] = f"FILE:{keytab}"
        return env

    def _tool_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KRB5")}
        env["KRB5_CONFIG"] = str(self.krb5_conf)
        env["KRB5_KDC_PROFILE"] = str(self.directory / "kdc.conf")
        env["KRB5CCNAME"] = f"FILE:{self.directory / 'empty.ccache'}"
        return env

    # -- lifecycle

    async def __aenter__(self) -> KerberosKDC:
        try:
            await self.start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self, *, timeout: float = 30.0) -> None:
        """Make the realm (first time only), start ``krb5kdc`` and wait until it accepts
        connections. RuntimeError (with the end of its log) if it exits,
        OperationTimeoutError after *timeout* seconds."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if not self._created:
            await self._create_realm()
        if not self.is_running:
            self._spawn()
        await self._wait_serving(timeout)

    def _write_config(self) -> None:
        d = self.directory
        realm, port = self.realm, self.port
        self.krb5_conf.write_text(
            f"""[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    clockskew = {self.clock_skew}
    kdc_timesync = 1
    ticket_lifetime = {self.max_ticket_lifetime}
    forwardable = false
    default_ccache_name = FILE:{d / "empty.ccache"}
    default_keytab_name = FILE:{d / "none.keytab"}
    default_client_keytab_name = FILE:{d / "none-client.keytab"}

[realms]
    {realm} = {{
        kdc = {HOST}:{port}
    }}

[domain_realm]
    localhost = {realm}
    .localhost = {realm}
    {HOST} = {realm}
"""
        )
        (d / "kdc.conf").write_text(
            f"""[kdcdefaults]
    kdc_listen = {HOST}:{port}
    kdc_tcp_listen = {HOST}:{port}

[realms]
    {realm} = {{
        database_name = {d / "principal"}
        key_stash_file = {d / "stash"}
        acl_file = {d / "kadm5.acl"}
        max_life = {self.max_ticket_lifetime}s
        max_renewable_life = 0
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log_path}
"""
        )
        (d / "kadm5.acl").write_text("")

    async def _create_realm(self) -> None:
        self._write_config()
        create = [_find_tool("kdb5_util"), "create", "-s", "-r", self.realm]
        await self._run(
            [*create, "-P", self._master_password],
            what="kdb5_util create",
        )
        self._created = True

    async def _run(self, command: list[str], *, what: str, stdin: bytes | None = None) -> str:
        result = await anyio.run_process(
            command, input=stdin, check=False, env=self._tool_env(), cwd=self.directory
        )
        output = (result.stdout + result.stderr).decode(errors="replace")
        if result.returncode != 0:
            raise RuntimeError(f"{what} failed (status {result.returncode}): {output.strip()}")
        return output

    def _spawn(self) -> None:
        command = [_find_tool("krb5kdc"), "-n", "-r", self.realm]
        with self.log_path.open("ab") as log:
            log.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(command)}\n".encode())
            log.flush()
            env = self._tool_env()
            self._proc = subprocess.Popen(
                dying_with_parent(command, env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env=env,
                start_new_session=True,
            )
        LIVE_PROCS[self._proc.pid] = (self._proc, os.getpid())

    async def _wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                self._forget()
                code = None if proc is None else proc.returncode
                raise RuntimeError(
                    f"krb5kdc for {self.realm} on {HOST}:{self.port} exited (status {code}); "
                    f"end of {self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(
                    f"krb5kdc on {HOST}:{self.port} not accepting after {timeout:g}s "
                    f"(last: {last}); end of {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with anyio.fail_after(1.0):
                    stream = await anyio.connect_tcp(HOST, self.port)
                await stream.aclose()
                return
            except (OSError, TimeoutError) as exc:
                last = repr(exc)
            await anyio.sleep(0.05)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop ``krb5kdc`` (SIGTERM to its PID, SIGKILL after *grace* s); the realm stays."""
        with anyio.CancelScope(shield=True):
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                if not await _wait_exit(proc, grace):
                    proc.kill()
                    await _wait_exit(proc, None)
            self._forget()

    async def aclose(self) -> None:
        """Stop the KDC and remove its dir (keytabs and ticket caches too). Idempotent."""
        with anyio.CancelScope(shield=True):
            await self.stop()
            self._closed = True
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                OWNED_DIRS.pop(str(self._dir), None)

    def _forget(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            LIVE_PROCS.pop(proc.pid, None)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last *lines* lines of :attr:`log_path`."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(cannot read log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    # -- principals, keytabs, tickets

    async def _kadmin(self, query: str) -> str:
        if not self._created:
            raise RuntimeError(f"start {self!r} first: the realm is made by start()")
        async with self._admin:
            return await self._run(
                [_find_tool("kadmin.local"), "-r", self.realm, "-q", query],
                what=f"kadmin.local {query.split()[0]}",
            )

    async def has_principal(self, name: str) -> bool:
        """Whether principal *name* is in the realm's database."""
        principal = self.principal(name)
        output = await self._kadmin(f"getprinc {principal}")
        return f"Principal: {principal}" in output

    async def add_principal(self, name: str, *, password: str | None = None) -> str:
        """Add principal *name* (``alice``, ``zookeeper/localhost``) to the realm; return
        its full name (``alice@AIOCOORD.TEST``).

        With *password* it can :meth:`kinit` with that password; without, it gets a
        random key, for :meth:`keytab`. Either way :meth:`keytab` can export its keys.
        """
        principal = self.principal(name)
        if password is None:
            await self._kadmin(f"addprinc -randkey {principal}")
        else:
            if not isinstance(password, str) or not password:
                raise ValueError("password must be a non-empty str")
            if any(c.isspace() or c in "\"'\\" for c in password):
                raise ValueError("password must not hold spaces, quotes or backslashes")
            await self._kadmin(f"addprinc -pw {password} {principal}")
        return principal

    async def ensure_principal(self, name: str) -> str:
        """:meth:`add_principal` (a random key) unless *name* is there already; its full name."""
        async with self._ensuring:
            if await self.has_principal(name):
                return self.principal(name)
            return await self.add_principal(name)

    async def keytab(self, name: str, path: Path | str | None = None) -> Path:
        """Export principal *name*'s keys (unchanged: a password stays valid) into the
        keytab *path* (default: ``<name>.keytab`` in :attr:`directory`); return its path."""
        principal = self.principal(name)
        target = Path(path) if path is not None else self._file_for(principal, "keytab")
        await self._kadmin(f"ktadd -k {target} -norandkey {principal}")
        return target

    async def kinit(
        self,
        name: str,
        *,
        password: str | None = None,
        keytab: Path | str | None = None,
        lifetime: float | None = None,
        ccache: Path | str | None = None,
    ) -> Path:
        """Get principal *name* a ticket-granting ticket into *ccache* (default:
        :meth:`default_ccache`); return the cache's path.

        With *password*, or from *keytab*, else from the keytab :meth:`keytab` exports.
        *lifetime* (seconds, at least 1) asks for a short-lived ticket, to test expiry;
        the KDC gives at most ``max_ticket_lifetime``.
        """
        principal = self.principal(name)
        target = Path(ccache) if ccache is not None else self.default_ccache(name)
        command = [_find_tool("kinit"), "-c", f"FILE:{target}"]
        if lifetime is not None:
            if not lifetime >= 1:
                raise ValueError("lifetime must be at least 1 second")
            command += ["-l", f"{int(lifetime)}s"]
        stdin = None
        if password is not None:
            stdin = f"{password}\n".encode()
        else:
            if keytab is None:
                keytab = await self.keytab(name)
            command += ["-k", "-t", f"FILE:{keytab}"]
        await self._run([*command, principal], what=f"kinit {principal}", stdin=stdin)
        return target

    async def wait_expired(self, ccache: Path | str, *, timeout: float = 60.0) -> None:
        """Return once every ticket in *ccache* has ended and the clock skew the realm
        allows has passed too, so no acceptor or KDC of the realm takes them any more."""
        deadline = time.monotonic() + timeout
        klist = _find_tool("klist")
        while True:
            # klist -s: status 1 once the cache holds no ticket still valid.
            result = await anyio.run_process(
                [klist, "-s", "-c", f"FILE:{ccache}"], check=False, env=self._tool_env()
            )
            if result.returncode != 0:
                break
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(f"tickets in {ccache} still valid after {timeout:g}s")
            await anyio.sleep(0.1)
        # The end has passed; the skew after it is a known span, not a guess.
        await anyio.sleep(self.clock_skew + 0.5)

    def skew_clock(self, ccache: Path | str, seconds: int) -> None:
        """Make clients that use *ccache* run their clock *seconds* off the KDC's.

        MIT Kerberos keeps a client's offset from the KDC's clock in the ticket cache
        (a FILE cache's header, with ``kdc_timesync``, which this realm sets) and adds
        it to the time it puts in each request: an offset beyond :attr:`clock_skew`
        gets the client refused for clock skew, as a host with a wrong clock is.
        """
        path = Path(ccache)
        raw = path.read_bytes()
        version, header_length = struct.unpack(">HH", raw[:4])
        if version != 0x0504:
            raise ValueError(f"{path} is not a version 4 FILE ticket cache")
        # One header field: tag 1 (the KDC time offset), 8 bytes: seconds, microseconds.
        header = struct.pack(">HHii", 1, 8, int(seconds), 0)
        path.write_bytes(
            struct.pack(">HH", version, len(header)) + header + raw[4 + header_length :]
        )

    def destroy_tickets(self, ccache: Path | str) -> None:
        """Remove the ticket cache *ccache* (as ``kdestroy``)."""
        with contextlib.suppress(FileNotFoundError):
            Path(ccache).unlink()
