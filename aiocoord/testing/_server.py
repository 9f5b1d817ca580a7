"""Throwaway ZooKeeper servers and ensembles on loopback, for tests.

Each server is a real JVM in its own temp directory. The JVMs are always reaped: they
die with the process that started them (``PR_SET_PDEATHSIG`` on Linux) and an
``atexit`` hook kills any that are still running when the interpreter exits.
"""

# Timeouts here are the launcher's own bounded waits, not a caller's cancellation policy.

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from glob import glob
from pathlib import Path
from types import TracebackType

import anyio

from .._exceptions import OperationTimeoutError
from .._process import dying_with_parent
from .._session import SaslDigest
from ._certs import ClientCertificate, client_ca_file, make_client_certificate
from ._fourletter import four_letter_word
from ._kdc import KerberosKDC
from ._kerberos_server import kerberos_server_setup
from ._local import (
    HOST,
    LIVE_PROCS,
    OWNED_DIRS,
    cleanup_on_sigterm,
    free_ports,
    wait_until_stopped,
)
from ._security import KerberosServerSetup, QuorumCredentials, SecurityOptions, check_sasl_users

__all__ = [
    "ZooKeeperEnsemble",
    "ZooKeeperNotFoundError",
    "ZooKeeperServer",
    "find_java",
    "find_keytool",
    "find_zookeeper_classpath",
]

DEBIAN_JAVA_DIR = Path("/usr/share/java")
SERVING_MODES = frozenset({"standalone", "leader", "follower", "observer"})
READ_ONLY_MODE = "read-only"
"""What ``srvr`` reports for a member serving reads only (``-Dreadonlymode.enabled=true``)."""
_NETTY_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
_STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
_QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_INSTALL_HINT = (
    "install ZooKeeper and Java, e.g. on Debian or Ubuntu "
    "`sudo apt-get install zookeeper default-jre-headless` (in aiocoord's own "
    "checkout, `make` does it); or set ZOOKEEPER_HOME to an unpacked Apache "
    "ZooKeeper release; or point AIOCOORD_ZK (pytest: --aiocoord-zk) at a running "
    "server or ensemble to test against instead of launching one"
)
_LOG_TAIL_LINES = 30
ENV_ZOOKEEPER_VERSION = "ZOOKEEPER_VERSION"
ENV_JAR_CACHE = "AIOCOORD_JAR_CACHE"


class ZooKeeperNotFoundError(RuntimeError):
    """ZooKeeper's jars or a ``java`` executable could not be found."""


# --------------------------------------------------------------------------- discovery


def jar_cache_dir() -> Path:
    """Where ``scripts/fetch-zookeeper.sh`` unpacks the jars Debian 12 does not ship.

    ``$AIOCOORD_JAR_CACHE`` (the script's own setting), else ``.cache/jars`` in the
    aiocoord checkout this module runs from; the jars are under ``root/usr/share/java``.
    """
    configured = os.environ.get(ENV_JAR_CACHE)
    base = Path(configured) if configured else Path(__file__).resolve().parents[2] / ".cache/jars"
    return base / "root" / "usr" / "share" / "java"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def find_versioned_jars(names: Sequence[str], version: str) -> tuple[str, list[Path]] | None:
    """Debian-style jars ``<name>-<full version>.jar`` for *version* ("3.9" or "3.9.3").

    Looks in /usr/share/java, then in :func:`jar_cache_dir`; the first *name* decides
    which full version (the highest that starts with *version*) and every other name must
    be there in that version, beside it. Returns ``(full version, paths in names' order)``
    or None.
    """
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        return None
    for folder in (DEBIAN_JAVA_DIR, jar_cache_dir()):
        pattern = re.compile(rf"{re.escape(names[0])}-({re.escape(version)}(?:\.\d+)*)\.jar")
        found = [
            m.group(1)
            for p in glob(str(folder / "*.jar"))
            if (m := pattern.fullmatch(Path(p).name))
        ]
        for full in sorted(found, key=_version_key, reverse=True):
            paths = [folder / f"{name}-{full}.jar" for name in names]
            if all(path.is_file() for path in paths):
                return full, paths
    return None


def find_zookeeper_classpath(*, log: bool = False) -> str:
    """Return a Java classpath that runs a ZooKeeper server.

    ``$ZOOKEEPER_HOME`` (an Apache release: ``*.jar`` and ``lib/*.jar``) wins. Otherwise
    Debian's jars: ``$ZOOKEEPER_VERSION`` (e.g. ``3.8`` or ``3.9``) picks the version, from
    /usr/share/java or from the jars ``scripts/fetch-zookeeper.sh`` fetched from Debian 13
    (:func:`jar_cache_dir`); unset, the system's zookeeper.jar. The log binding is
    slf4j-nop (silent) or, when *log* is true, slf4j-simple (logs to stderr).

    Debian's zookeeper.jar lists netty-handler but not netty-codec in its manifest's
    Class-Path, and Netty's ``SslHandler`` extends netty-codec's ``ByteToMessageDecoder``:
    without that jar a TLS port accepts TCP and then drops every connection
    (``ClassNotFoundException`` in the server log). So netty-codec.jar is added.

    A jar's manifest Class-Path is searched right after that jar, and Debian 13's
    zookeeper-3.9.3.jar names ``/usr/share/java/zookeeper-jute.jar``, which on Debian 12
    is 3.8.0's: so the versioned jute jar goes first, or the server dies on every
    connection with ``NoSuchMethodError``.
    """
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        root = Path(home)
        jars = sorted(glob(str(root / "*.jar"))) + sorted(glob(str(root / "lib" / "*.jar")))
        if not any(Path(jar).name.startswith("zookeeper") for jar in jars):
            raise ZooKeeperNotFoundError(
                f"ZOOKEEPER_HOME={home!r} has no zookeeper*.jar in it or in its lib/; "
                + _INSTALL_HINT
            )
        conf = root / "conf"
        # conf/ holds the release's logging configuration (logback.xml / log4j.properties).
        return os.pathsep.join([*jars, *([str(conf)] if conf.is_dir() else [])])
    wanted = os.environ.get(ENV_ZOOKEEPER_VERSION)
    if wanted:
        found = find_versioned_jars(["zookeeper-jute", "zookeeper"], wanted)
        if found is None:
            raise ZooKeeperNotFoundError(
                f"ZooKeeper {wanted} ({ENV_ZOOKEEPER_VERSION}) is not in {DEBIAN_JAVA_DIR} "
                f"nor in {jar_cache_dir()}. For 3.9 run `make zookeeper ZOOKEEPER_VERSION=3.9` "
                "in aiocoord's checkout (scripts/fetch-zookeeper.sh fetches Debian 13's 3.9.3); "
                "3.8 is Debian 12's `zookeeper` package; for another version set "
                "ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release, or unset "
                f"{ENV_ZOOKEEPER_VERSION} to use the system's"
            )
        required = found[1]
        # The jars' manifests name their dependencies in /usr/share/java (Debian 12's).
        deps = [DEBIAN_JAVA_DIR / "netty-handler.jar", DEBIAN_JAVA_DIR / "slf4j-api.jar"]
        missing = [str(jar) for jar in deps if not jar.is_file()]
    else:
        required = [DEBIAN_JAVA_DIR / "zookeeper.jar", DEBIAN_JAVA_DIR / "zookeeper-jute.jar"]
        missing = [str(jar) for jar in required if not jar.is_file()]
    if missing:
        raise ZooKeeperNotFoundError(
            f"ZooKeeper jars not found ({', '.join(missing)}); " + _INSTALL_HINT
        )
    codec = DEBIAN_JAVA_DIR / "netty-codec.jar"
    if codec.is_file():
        required.append(codec)
    bindings = (
        ["slf4j-simple.jar", "slf4j-nop.jar"] if log else ["slf4j-nop.jar", "slf4j-simple.jar"]
    )
    binding = next((DEBIAN_JAVA_DIR / b for b in bindings if (DEBIAN_JAVA_DIR / b).is_file()), None)
    # zookeeper.jar's manifest Class-Path pulls in slf4j-api, netty, jackson, ...
    return os.pathsep.join(str(p) for p in [*required, *([binding] if binding else [])])


def find_java() -> str:
    """Return the ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperNotFoundError(
            "no `java` executable (checked $JAVA_HOME/bin and PATH); " + _INSTALL_HINT
        )
    return found


def find_keytool() -> str:
    """Return the JDK's ``keytool``: next to :func:`find_java`'s ``java``, else on PATH."""
    java = Path(find_java())
    for bin_dir in (java.parent, java.resolve().parent):
        candidate = bin_dir / "keytool"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("keytool")
    if found is None:
        raise ZooKeeperNotFoundError(
            f"no `keytool` next to {java} or on PATH (needed for tls=True); " + _INSTALL_HINT
        )
    return found


# ----------------------------------------------------------------------------- server


class _Quorum:
    """Shared state of an ensemble's members: their ports, allocated once for all."""

    def __init__(self, members: list[ZooKeeperServer], *, sasl: bool = False) -> None:
        self.members = members
        self.allocated = False
        self.credentials = QuorumCredentials() if sasl else None
        """The members' own SASL user (quorum SASL), when the ensemble has SASL users."""

    def allocate(self) -> None:
        if self.allocated:
            return
        ports = iter(free_ports(sum(4 if m.tls else 3 for m in self.members)))
        for member in self.members:
            member._port = next(ports)
            member._peer_port = next(ports)
            member._election_port = next(ports)
            if member.tls:
                member._secure_port = next(ports)
        self.allocated = True

    def server_lines(self) -> dict[str, str]:
        # Quorum SASL with Kerberos lets a member in only when its principal's host
        # (zookeeper/localhost) is one of the server lines' hosts.
        host = "localhost" if any(m.kerberos is not None for m in self.members) else HOST
        return {
            f"server.{m._myid}": f"{host}:{m._peer_port}:{m._election_port}" for m in self.members
        }


class ZooKeeperServer:
    """A ZooKeeper server JVM on 127.0.0.1 with its own temp data dir.

    ``async with ZooKeeperServer() as zk:`` starts it and waits until it serves; leaving
    the block stops it and removes the data dir. In between, the server can be stopped,
    killed, paused and restarted (same port and data, so sessions survive a restart).

    With ``tls=True`` it also serves TLS on :attr:`secure_port` (the plain port stays):
    a self-signed certificate for 127.0.0.1 is made with the JDK's ``keytool`` on the
    first start, and :meth:`client_ssl_context` trusts it. TLS needs ZooKeeper's Netty
    connection factory, so both ports use Netty then. With ``tls_client_auth=True`` the
    secure port also requires a client certificate from the kit's client CA
    (:meth:`make_client_certificate`), whose subject becomes the client's ``x509``
    identity (ZooKeeper's X509AuthenticationProvider).

    The server skips fsync (``forceSync=no``) unless ``force_sync=True``: tests
    run faster, and the data still survives the JVM being killed. Production
    servers sync every write to disk, so measure speed with ``force_sync=True``.

    ``sasl_users`` (``{"alice": "secret"}``) makes it a SASL server: DIGEST-MD5
    users in a JAAS file the kit writes, ZooKeeper's SASL authentication provider
    (a client's identity is ``sasl:<user>``); :meth:`sasl_digest` gives a client
    the credentials. ``require_sasl=True`` refuses every client that does not
    authenticate (``zookeeper.sessionRequireClientSASLAuth``).

    ``kerberos=kdc`` (a running :class:`~aiocoord.testing.KerberosKDC`) makes it a
    Kerberos (SASL GSSAPI) server instead: the kit adds ``zookeeper/localhost`` to
    the realm, exports its keytab into the data dir and logs in with it
    (``Krb5LoginModule``); clients connect with :class:`~aiocoord.SaslKerberos` and
    their identity is ``sasl:<principal>``, shortened as
    ``kerberos_remove_host_from_principal`` / ``kerberos_remove_realm_from_principal``
    say (ZooKeeper's ``kerberos.removeHostFromPrincipal`` / ``removeRealmFromPrincipal``).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        container_check_interval_ms: int = 1000,
        extra_config: Mapping[str, str] | None = None,
        jvm_args: Sequence[str] = (),
        heap_mb: int = 256,
        log: bool = False,
        tls: bool = False,
        force_sync: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        require_sasl: bool = False,
        kerberos: KerberosKDC | None = None,
        kerberos_remove_host_from_principal: bool | None = None,
        kerberos_remove_realm_from_principal: bool | None = None,
        tls_client_auth: bool = False,
    ) -> None:
        if min_session_timeout_ms > max_session_timeout_ms:
            raise ValueError("min_session_timeout_ms > max_session_timeout_ms")
        if tls_client_auth and not tls:
            raise ValueError("tls_client_auth=True needs tls=True")
        self.sasl_users: dict[str, str] = check_sasl_users(sasl_users)
        self.require_sasl = require_sasl
        if self.sasl_users and kerberos is not None:
            # ZooKeeper's server runs GSSAPI when its Server login holds a Kerberos
            # principal, DIGEST-MD5 otherwise: never both for clients.
            raise ValueError("a server takes sasl_users or kerberos, not both")
        if require_sasl and not self.sasl_users and kerberos is None:
            raise ValueError(
                "require_sasl=True needs sasl_users or kerberos (no client could connect)"
            )
        self._port = port
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.container_check_interval_ms = container_check_interval_ms
        self.extra_config: dict[str, str] = dict(extra_config or {})
        self.jvm_args: tuple[str, ...] = tuple(jvm_args)
        self.heap_mb = heap_mb
        self.log = log
        self.tls = tls
        self.tls_client_auth = tls_client_auth
        self.force_sync = force_sync
        self.kerberos = kerberos
        self._kerberos_options = {
            "remove_host_from_principal": kerberos_remove_host_from_principal,
            "remove_realm_from_principal": kerberos_remove_realm_from_principal,
        }
        self._kerberos_setup: KerberosServerSetup | None = None
        self._secure_port: int | None = None
        self._kit_certificate: ClientCertificate | None = None
        """Presented by the kit's own readiness check when client certificates are required."""
        self._client_ca_file: Path | None = None
        self._tls_password = secrets.token_hex(16)
        self._data_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._closed = False
        # Set by ZooKeeperEnsemble for quorum members.
        self._quorum: _Quorum | None = None
        self._myid = 0
        self._peer_port = 0
        self._election_port = 0

    def __repr__(self) -> str:
        kind = f"member {self._myid}" if self._quorum else "standalone"
        state = "paused" if self.is_paused else "running" if self.is_running else "stopped"
        tls = f" tls:{self._secure_port}" if self.tls else ""
        sasl = " sasl-required" if self.require_sasl else " sasl" if self.sasl_users else ""
        return f"<ZooKeeperServer {kind} {HOST}:{self._port}{tls}{sasl} pid={self.pid} {state}>"

    # -- properties

    @property
    def host(self) -> str:
        """Always 127.0.0.1."""
        return HOST

    def _allocate_ports(self) -> None:
        if self._quorum is not None:
            self._quorum.allocate()
            return
        # One batch of distinct ports; a port the caller chose may be among them.
        taken = {p for p in (self._port, self._secure_port) if p is not None}
        fresh = iter(p for p in free_ports(2 + len(taken)) if p not in taken)
        if self._port is None:
            self._port = next(fresh)
        if self.tls and self._secure_port is None:
            self._secure_port = next(fresh)

    @property
    def port(self) -> int:
        """The client port (picked on first use, kept across restarts)."""
        if self._port is None:
            self._allocate_ports()
        assert self._port is not None
        return self._port

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"{HOST}:{self.port}"

    @property
    def secure_port(self) -> int:
        """The TLS client port (``secureClientPort``); only with ``tls=True``."""
        self._require_tls()
        if self._secure_port is None:
            self._allocate_ports()
        assert self._secure_port is not None
        return self._secure_port

    @property
    def secure_connect_string(self) -> str:
        """``127.0.0.1:<secure_port>``; connect with ``ssl_context=client_ssl_context()``."""
        return f"{HOST}:{self.secure_port}"

    @property
    def tls_ca_file(self) -> Path:
        """The server's self-signed certificate (PEM), made on the first :meth:`start`."""
        self._require_tls()
        return self.data_dir / "tls" / "server-cert.pem"

    def client_ssl_context(self, certificate: ClientCertificate | None = None) -> ssl.SSLContext:
        """A client context that trusts this server's certificate (and no other) and
        checks that it is issued to 127.0.0.1 (its only name: ``IP:127.0.0.1``);
        presenting ``certificate``, if given."""
        return _client_context([self], certificate)

    async def make_client_certificate(self, name: str) -> ClientCertificate:
        """A client certificate for ``CN=<name>,OU=clients,O=aiocoord-test`` that
        every ``tls_client_auth=True`` server of the kit accepts (made with the
        ``openssl`` command, once per name and process)."""
        return await make_client_certificate(name)

    def sasl_digest(self, username: str | None = None) -> SaslDigest:
        """DIGEST-MD5 credentials of one of :attr:`sasl_users` (default: the first),
        to give a client as ``sasl=``."""
        if not self.sasl_users:
            raise RuntimeError(f"{self!r} was not created with sasl_users")
        name = next(iter(self.sasl_users)) if username is None else username
        if name not in self.sasl_users:
            raise KeyError(f"no sasl user {name!r} on {self!r}")
        return SaslDigest(name, self.sasl_users[name])

    def _security(self) -> SecurityOptions:
        return SecurityOptions(
            sasl_users=self.sasl_users,
            require_sasl=self.require_sasl,
            quorum=self._quorum.credentials if self._quorum is not None else None,
            kerberos=self._kerberos_setup,
        )

    def _require_tls(self) -> None:
        if not self.tls:
            raise RuntimeError(f"{self!r} was not created with tls=True")

    @property
    def myid(self) -> int | None:
        """This member's id in its ensemble, or None for a standalone server."""
        return self._myid if self._quorum is not None else None

    @property
    def data_dir(self) -> Path:
        """The temp dir: ZooKeeper's dataDir, plus ``zoo.cfg`` and ``server.log``."""
        if self._data_dir is None:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            self._data_dir = Path(tempfile.mkdtemp(prefix="aiocoord-zk-"))
            OWNED_DIRS[str(self._data_dir)] = os.getpid()
            cleanup_on_sigterm()
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """The server's stdout+stderr, appended to on every start."""
        return self.data_dir / "server.log"

    @property
    def pid(self) -> int | None:
        """PID of the running JVM, or None."""
        return self._proc.pid if self.is_running and self._proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the JVM process exists (also while paused)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def is_paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._paused and self.is_running

    # -- lifecycle

    async def __aenter__(self) -> ZooKeeperServer:
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

    async def start(self, *, timeout: float = 60.0) -> None:
        """Start (or restart) the JVM and wait until it serves clients.

        Serving means ``ruok`` answers ``imok`` and ``srvr`` reports a mode; for an
        ensemble member that needs a quorum. Raises RuntimeError (with the end of
        ``server.log``) if the JVM exits, OperationTimeoutError after *timeout* seconds.
        The default is generous: a JVM on a loaded 2-core machine was seen to need
        more than 30 s, and a crash is reported at once whatever the bound.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if not self.is_running:
            if self.tls:
                await self._make_certificate()
            if self.kerberos is not None and self._kerberos_setup is None:
                self._kerberos_setup = await kerberos_server_setup(
                    self.kerberos,
                    self.data_dir,
                    quorum=self._quorum is not None,
                    **self._kerberos_options,
                )
            if self.tls_client_auth:
                self._client_ca_file = await client_ca_file()
                self._kit_certificate = await make_client_certificate("aiocoord-test-kit")
            self._spawn()
        await self._wait_serving(timeout)

    async def _make_certificate(self) -> None:
        """Make the keystore and the PEM of :attr:`tls_ca_file`, once per data dir.

        Each certificate gets a subject of its own: a context that trusts several
        self-signed certificates (an ensemble's) finds the right one by subject name.
        """
        tls_dir = self.data_dir / "tls"
        keystore = tls_dir / "keystore.p12"
        pem = self.tls_ca_file
        if keystore.is_file() and pem.is_file():
            return
        tls_dir.mkdir(exist_ok=True)
        keystore.unlink(missing_ok=True)
        keytool = find_keytool()
        store = ["-keystore", str(keystore), "-storetype", "PKCS12"]
        store += ["-storepass", self._tls_password]
        generate = [
            keytool, "-genkeypair", "-noprompt", "-alias", "zookeeper",
            "-keyalg", "EC", "-groupname", "secp256r1", "-sigalg", "SHA256withECDSA",
            "-dname", f"CN={HOST},OU=aiocoord-test-{secrets.token_hex(8)}",
            "-ext", f"SAN=IP:{HOST}",
            "-ext", "KU=digitalSignature", "-ext", "EKU=serverAuth",
            "-startdate", "-1d", "-validity", "30",
            "-keypass", self._tls_password, *store,
        ]  # fmt: skip
        export = [keytool, "-exportcert", "-rfc", "-alias", "zookeeper", "-file", str(pem)]
        for command in (generate, export + store):
            result = await anyio.run_process(command, check=False, cwd=tls_dir)
            if result.returncode != 0:
                output = (result.stdout + result.stderr).decode(errors="replace")
                raise RuntimeError(
                    f"keytool {command[1]} failed (status {result.returncode}): " + output.strip()
                )

    def _spawn(self) -> None:
        classpath = find_zookeeper_classpath(log=self.log)
        java = find_java()
        port = self.port
        data_dir = self.data_dir
        config: dict[str, str] = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(data_dir),
            "clientPort": str(port),
            "clientPortAddress": HOST,
            "minSessionTimeout": str(self.min_session_timeout_ms),
            "maxSessionTimeout": str(self.max_session_timeout_ms),
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
        }
        if self._quorum is not None:
            config |= {
                "initLimit": "10",
                "syncLimit": "5",
                "reconfigEnabled": "false",
                "standaloneEnabled": "false",
                **self._quorum.server_lines(),
            }
            (data_dir / "myid").write_text(f"{self._myid}\n")
        if self.tls:
            # Keys ZooKeeper does not know become system properties "zookeeper.<key>".
            config |= {
                "secureClientPort": str(self.secure_port),
                "secureClientPortAddress": HOST,
                "serverCnxnFactory": _NETTY_FACTORY,
                "ssl.keyStore.location": str(data_dir / "tls" / "keystore.p12"),
                "ssl.keyStore.password": self._tls_password,
                "ssl.keyStore.type": "PKCS12",
                # The trust store would check client certificates, which clientAuth=none
                # does not ask for; ZooKeeper still builds a trust manager from it.
                "ssl.trustStore.location": str(self.tls_ca_file),
                "ssl.trustStore.type": "PEM",
                "ssl.clientAuth": "none",
            }
        security_config, security_flags = self._security().apply(data_dir)
        config |= security_config
        if self.tls_client_auth:
            config |= {
                "ssl.trustStore.location": str(self._client_ca_file),
                "ssl.clientAuth": "need",
                "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            }
        config |= self.extra_config
        config_path = data_dir / "zoo.cfg"
        config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        command = [
            java,
            "-Dzookeeper.extendedTypesEnabled=true",
            f"-Dznode.container.checkIntervalMs={self.container_check_interval_ms}",
            "-Dzookeeper.4lw.commands.whitelist=*",
            "-Dzookeeper.admin.enableServer=false",
            # Tests skip fsync by default: data still reaches the OS, so it survives
            # the JVM being killed. Production servers sync (benchmarks need that).
            f"-Dzookeeper.forceSync={'yes' if self.force_sync else 'no'}",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            *security_flags,
            *self.jvm_args,
            "-cp",
            classpath,
            _QUORUM_MAIN if self._quorum is not None else _STANDALONE_MAIN,
            str(config_path),
        ]
        with self.log_path.open("ab") as log:
            log.write(f"==== {time.strftime('%H:%M:%S')} {' '.join(command)}\n".encode())
            log.flush()
            # The server dies with this process (the thread starting it, precisely:
            # the event loop's), set up without a preexec_fn (see aiocoord._process).
            self._proc = subprocess.Popen(
                dying_with_parent(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                start_new_session=True,
            )
        self._paused = False
        LIVE_PROCS[self._proc.pid] = (self._proc, os.getpid())

    async def _wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                self._forget()
                code = None if proc is None else proc.returncode
                hint = "" if self.log else " (pass log=True for the server's own log)"
                raise RuntimeError(
                    f"ZooKeeper on {self.connect_string} exited (status {code}) while "
                    f"starting; end of {self.log_path}{hint}:\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OperationTimeoutError(
                    f"ZooKeeper on {self.connect_string} not serving after {timeout:g}s "
                    f"(last: {last}); end of {self.log_path}:\n{self.log_tail()}"
                )
            per_try = min(1.0, max(remaining, 0.05))
            step = "ruok"
            try:
                answer = await four_letter_word(HOST, self.port, "ruok", timeout=per_try)
                if answer.strip() != "imok":
                    last = f"ruok -> {answer!r}"
                else:
                    step = "srvr"
                    info = await self.srvr(timeout=per_try)
                    if info.get("Mode") not in SERVING_MODES:
                        last = f"srvr -> {info.get('Mode') or info.get('', '')!r}"
                    elif not self.tls:
                        return
                    else:
                        step = f"TLS handshake with {self.secure_connect_string}"
                        await self._tls_handshake(per_try)
                        return
            except OSError as exc:
                last = f"{step}: {exc!r}"
            await anyio.sleep(0.05)

    async def _tls_handshake(self, timeout: float) -> None:
        """Complete a TLS handshake on the secure port (an OSError if it fails).

        More than a TCP accept: Netty accepts and then drops the connection when TLS
        cannot be set up (unreadable keystore, missing classes), which only the server
        log would otherwise show.
        """
        with anyio.fail_after(timeout):
            try:
                stream = await anyio.connect_tcp(
                    HOST,
                    self.secure_port,
                    ssl_context=self.client_ssl_context(self._kit_certificate),
                    tls_standard_compatible=False,  # closing waits for no close_notify
                )
            except OSError as exc:
                if isinstance(exc.__cause__, OSError):
                    raise exc.__cause__ from None
                raise
            except (anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                raise ConnectionResetError(
                    f"{self.secure_connect_string} dropped the TLS handshake"
                ) from exc
        await stream.aclose()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop gracefully: SIGTERM, then SIGKILL if it has not exited after *grace* s."""
        with anyio.CancelScope(shield=True):
            proc = self._proc
            if proc is None or proc.poll() is not None:
                self._forget()
                return
            proc.send_signal(signal.SIGTERM)
            if self._paused:
                proc.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            if not await self._wait_exit(grace):
                proc.kill()
                await self._wait_exit(None)
            self._forget()

    def wipe(self) -> None:
        """Delete the stopped server's data (its transaction log and snapshots), as
        a rebuilt server, a wiped volume or a restored empty backup has none.

        On the next start it knows no session and no zxid: clients that saw
        later zxids must start new sessions there.
        """
        if self.is_running:
            raise RuntimeError(f"stop {self!r} before wiping its data")
        shutil.rmtree(self.data_dir / "version-2", ignore_errors=True)

    async def kill(self) -> None:
        """Kill with SIGKILL (no shutdown at all) and wait until the process is gone."""
        with anyio.CancelScope(shield=True):
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.kill()
                await self._wait_exit(None)
            self._forget()

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): connections stay open but nothing is answered."""
        proc = self._require_running()
        proc.send_signal(signal.SIGSTOP)
        wait_until_stopped(proc.pid)
        self._paused = True

    def resume(self) -> None:
        """Unfreeze the JVM after :meth:`pause` (SIGCONT)."""
        proc = self._require_running()
        proc.send_signal(signal.SIGCONT)
        self._paused = False

    async def aclose(self) -> None:
        """Stop the server and remove its data dir. Idempotent."""
        with anyio.CancelScope(shield=True):
            await self.stop()
            self._closed = True
            if self._data_dir is not None:
                shutil.rmtree(self._data_dir, ignore_errors=True)
                OWNED_DIRS.pop(str(self._data_dir), None)

    def _require_running(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"{self!r} is not running")
        return proc

    async def _wait_exit(self, timeout: float | None) -> bool:
        proc = self._proc
        if proc is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while proc.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            await anyio.sleep(0.01)
        return True

    def _forget(self) -> None:
        """Drop a process that has exited (and been reaped) from the registry."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            LIVE_PROCS.pop(proc.pid, None)
            self._paused = False

    # -- introspection

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last *lines* lines of ``server.log``."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return f"(cannot read log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    async def four_letter_word(self, word: str, *, timeout: float = 5.0) -> str:
        """Send a four letter word (``ruok``, ``mntr``, ``cons``, ...) to this server."""
        return await four_letter_word(HOST, self.port, word, timeout=timeout)

    async def srvr(self, *, timeout: float = 5.0) -> dict[str, str]:
        """The ``srvr`` answer as ``{"Mode": "leader", "Zxid": "0x...", ...}``.

        Lines without ``Key: value`` (e.g. "This ZooKeeper instance is not currently
        serving requests") are joined under the key ``""``.
        """
        text = await self.four_letter_word("srvr", timeout=timeout)
        info: dict[str, str] = {}
        other: list[str] = []
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip():
                info[key.strip()] = value.strip()
            elif line.strip():
                other.append(line.strip())
        if other:
            info[""] = "\n".join(other)
        return info

    async def mode(self, *, timeout: float = 5.0) -> str:
        """``"standalone"``, ``"leader"``, ``"follower"``, ``"observer"`` or
        ``"read-only"`` (:data:`READ_ONLY_MODE`); RuntimeError if not serving."""
        info = await self.srvr(timeout=timeout)
        mode = info.get("Mode")
        if mode is None:
            raise RuntimeError(f"{self!r} is not serving: {info.get('', info)!r}")
        return mode

    async def wait_in_mode(self, *modes: str, timeout: float = 30.0) -> str:
        """Wait until ``srvr`` reports one of *modes*; return it.

        E.g. ``await member.wait_in_mode(READ_ONLY_MODE)`` once its quorum is gone
        (with ``-Dreadonlymode.enabled=true`` among its ``jvm_args``). OperationTimeoutError
        after *timeout* s; RuntimeError (with the end of the log) if the JVM exits.
        """
        if not modes:
            raise ValueError("name at least one mode")
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                raise RuntimeError(f"{self!r} is not running; end of log:\n{self.log_tail()}")
            per_try = min(2.0, max(deadline - time.monotonic(), 0.05))
            try:
                mode = await self.mode(timeout=per_try)
                if mode in modes:
                    return mode
                last = mode
            except (OSError, RuntimeError) as exc:
                last = str(exc) or repr(exc)
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(
                    f"{self!r} not in mode {' or '.join(modes)} after {timeout:g}s (last: {last})"
                )
            await anyio.sleep(0.05)


def _client_context(
    servers: Sequence[ZooKeeperServer], certificate: ClientCertificate | None = None
) -> ssl.SSLContext:
    """Verify the peer's certificate and name against these servers' certificates only."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.load_verify_locations(cadata="".join(_read_pem(server) for server in servers))
    if certificate is not None:
        certificate.load_into(context)
    return context


def _read_pem(server: ZooKeeperServer) -> str:
    try:
        return server.tls_ca_file.read_text()
    except FileNotFoundError:
        raise RuntimeError(
            f"{server!r} has no certificate yet: it is made on the first start()"
        ) from None


# --------------------------------------------------------------------------- ensemble


class ZooKeeperEnsemble:
    """A real ZooKeeper quorum of *size* JVMs on loopback.

    ``members`` are :class:`ZooKeeperServer` objects with the usual controls (stop,
    kill, pause, start again), so tests can take members down and bring them back.

    ``sasl_users`` and ``require_sasl`` are as for :class:`ZooKeeperServer`, on every
    member; with SASL users the members also authenticate to each other with SASL
    (quorum SASL, required both ways), as a secured production ensemble does.
    With ``kerberos=kdc`` that quorum SASL is Kerberos (every member logs in as
    ``zookeeper/localhost``, and the server lines name ``localhost``, the host
    quorum SASL authorises).
    """

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        container_check_interval_ms: int = 1000,
        extra_config: Mapping[str, str] | None = None,
        jvm_args: Sequence[str] = (),
        heap_mb: int = 256,
        log: bool = False,
        tls: bool = False,
        force_sync: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        require_sasl: bool = False,
        kerberos: KerberosKDC | None = None,
        kerberos_remove_host_from_principal: bool | None = None,
        kerberos_remove_realm_from_principal: bool | None = None,
        tls_client_auth: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError("an ensemble needs at least one member")
        self.members: list[ZooKeeperServer] = [
            ZooKeeperServer(
                tick_time_ms=tick_time_ms,
                min_session_timeout_ms=min_session_timeout_ms,
                max_session_timeout_ms=max_session_timeout_ms,
                container_check_interval_ms=container_check_interval_ms,
                extra_config=extra_config,
                jvm_args=jvm_args,
                heap_mb=heap_mb,
                log=log,
                tls=tls,
                force_sync=force_sync,
                sasl_users=sasl_users,
                require_sasl=require_sasl,
                kerberos=kerberos,
                kerberos_remove_host_from_principal=kerberos_remove_host_from_principal,
                kerberos_remove_realm_from_principal=kerberos_remove_realm_from_principal,
                tls_client_auth=tls_client_auth,
            )
            for _ in range(size)
        ]
        self._quorum = _Quorum(self.members, sasl=bool(sasl_users))
        for myid, member in enumerate(self.members, start=1):
            member._quorum = self._quorum
            member._myid = myid

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.members!r}>"

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[ZooKeeperServer]:
        return iter(self.members)

    @property
    def connect_string(self) -> str:
        """All members' ``host:port``, comma-separated."""
        return ",".join(m.connect_string for m in self.members)

    @property
    def secure_connect_string(self) -> str:
        """All members' ``host:secure_port`` (``tls=True`` only), comma-separated."""
        return ",".join(m.secure_connect_string for m in self.members)

    def client_ssl_context(self, certificate: ClientCertificate | None = None) -> ssl.SSLContext:
        """A client context that trusts every member's certificate (``tls=True`` only),
        presenting ``certificate``, if given."""
        return _client_context(self.members, certificate)

    async def make_client_certificate(self, name: str) -> ClientCertificate:
        """A client certificate every member accepts (see
        :meth:`ZooKeeperServer.make_client_certificate`)."""
        return await make_client_certificate(name)

    def sasl_digest(self, username: str | None = None) -> SaslDigest:
        """DIGEST-MD5 credentials of one of the members' SASL users (default: the first)."""
        return self.members[0].sasl_digest(username)

    async def __aenter__(self) -> ZooKeeperEnsemble:
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

    async def start(self, *, timeout: float = 60.0) -> None:
        """Start all members concurrently; return once each is leader or follower."""
        self._quorum.allocate()
        errors: list[Exception] = []

        async def start_one(member: ZooKeeperServer) -> None:
            try:
                await member.start(timeout=timeout)
            except Exception as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for member in self.members:
                tg.start_soon(start_one, member)
        if errors:
            # A crash explains more than the timeouts it causes in the other members.
            raise next((e for e in errors if not isinstance(e, TimeoutError)), errors[0])

    async def aclose(self) -> None:
        """Stop every member and remove the data dirs. Idempotent."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for member in self.members:
                    tg.start_soon(member.aclose)

    async def modes(self, *, timeout: float = 2.0) -> dict[int, str | None]:
        """Each running, unpaused member's mode by myid (None: not serving/answering)."""
        result: dict[int, str | None] = {}

        async def query(member: ZooKeeperServer) -> None:
            try:
                result[member._myid] = await member.mode(timeout=timeout)
            except (OSError, RuntimeError):
                result[member._myid] = None

        async with anyio.create_task_group() as tg:
            for member in self._live_members():
                tg.start_soon(query, member)
        return result

    async def leader(self, *, timeout: float = 30.0) -> ZooKeeperServer:
        """The member whose ``srvr`` says leader, waiting up to *timeout* s for one."""
        deadline = time.monotonic() + timeout
        while True:
            modes = await self.modes()
            leaders = [myid for myid, mode in modes.items() if mode == "leader"]
            if len(leaders) == 1:
                return self.members[leaders[0] - 1]
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(f"no single leader after {timeout:g}s: modes {modes}")
            await anyio.sleep(0.1)

    async def followers(self) -> list[ZooKeeperServer]:
        """The members whose ``srvr`` says follower right now."""
        modes = await self.modes()
        return [m for m in self.members if modes.get(m._myid) == "follower"]

    async def wait_quorum(self, *, timeout: float = 30.0) -> ZooKeeperServer:
        """Wait until one member leads and every running member serves; return the leader.

        Paused members are ignored (they cannot answer).
        """
        deadline = time.monotonic() + timeout
        while True:
            modes = await self.modes()
            leaders = [myid for myid, mode in modes.items() if mode == "leader"]
            if len(leaders) == 1 and all(
                mode in ("leader", "follower", "observer") for mode in modes.values()
            ):
                return self.members[leaders[0] - 1]
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(f"no quorum after {timeout:g}s: modes by myid {modes}")
            await anyio.sleep(0.1)

    def _live_members(self) -> list[ZooKeeperServer]:
        return [m for m in self.members if m.is_running and not m.is_paused]
