"""The session engine: one ZooKeeper session kept alive across connections.

A background task owns the connection. It connects (trying each host in turn),
keeps the session alive with pings, notices a dead connection within
milliseconds (socket closed) or within two thirds of the session timeout (server
silent), reconnects with short back-off, re-arms watches, and turns all of that
into :class:`ConnectionState` transitions.

Requests never get re-sent behind the caller's back: one that was in flight when
the connection dropped fails with ``ConnectionLossError(sent=True)``; one issued
while SUSPENDED waits for the session to come back (or fails with
SessionExpiredError if it does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import ssl
import time
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from .. import _telemetry
from .._exceptions import (
    AuthFailedError,
    ClientClosedError,
    ConnectionLossError,
    CoordinationError,
    DataTooLargeError,
    NoConnectionError,
    OperationTimeoutError,
    SaslRequiredError,
    SessionExpiredError,
    TLSCertificateError,
    UnsupportedEventLoopError,
    error_for_code,
)
from .._types import EventType
from . import _zk
from ._connection import Connection, ReplyHook, open_connection
from ._options import Settings, parse_hosts
from ._requests import RequestBuilder
from ._sasl import SaslMechanism
from ._state import ConnectionState
from ._stream import Broadcast
from ._watch import WatchKind, WatchRegistry

__all__ = ["DEFAULT", "SessionEngine", "authenticate", "only_in_session", "request_timeout"]

log = logging.getLogger("aiocoord")

_MAX_BACKOFF = 0.5
_WARN_EVERY = 10.0
"""Seconds between warnings while connection attempts keep failing."""
_CLOSE_TIMEOUT = 2.0
_ZERO_PASSWORD = b"\x00" * 16


class _Default:
    """The type of :data:`DEFAULT`."""


DEFAULT = _Default()
"""Use the request timeout in force (the client's, or a :func:`request_timeout` scope's)."""

_override: contextvars.ContextVar[float | None] = contextvars.ContextVar("aiocoord_request_timeout")


_pinned: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "aiocoord_pinned_session", default=None
)


V = TypeVar("V")


class _Scoped(Generic[V]):
    """Sets a context variable for a ``with`` block (this task and the tasks it
    starts), and restores it after. A class rather than a generator-based
    context manager: a queued counter add enters one, and the generator's
    machinery cost more than the rest of the scope."""

    __slots__ = ("_token", "_value", "_var")

    def __init__(self, var: contextvars.ContextVar[V], value: V) -> None:
        self._var = var
        self._value = value
        self._token: contextvars.Token[V] | None = None

    def __enter__(self) -> None:
        if self._token is not None:  # as a generator-based one, it is not reentrant
            raise RuntimeError("this scope is already entered")
        self._token = self._var.set(self._value)

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        self._var.reset(self._token)
        self._token = None


def only_in_session(session_id: int) -> contextlib.AbstractContextManager[None]:
    """Within the block (this task and tasks it starts), requests go out only in
    session ``session_id``: one that would go out in another (it waited through
    a disconnection into a new session) raises SessionExpiredError unsent."""
    return _Scoped(_pinned, session_id)


def request_timeout(seconds: float | None) -> contextlib.AbstractContextManager[None]:
    """Within the block (this task and tasks it starts), requests wait at most
    ``seconds`` for a connection (None: without bound), whatever the client's
    ``request_timeout``."""
    return _Scoped(_override, seconds)


async def authenticate(conn: Connection, mechanism: SaslMechanism, host: str) -> None:
    """Run one SASL exchange on ``conn`` (connected to ``host``), right after the
    session handshake and before anything else is sent on it.

    As ZooKeeper's Java client does: after the ConnectResponse, before auth
    packets, watch re-arming and queued requests. The server answers refused
    credentials with an error code (AUTHFAILED, or SESSIONCLOSEDREQUIRESASLAUTH
    where SASL is required) and closes the socket: AuthFailedError, never
    retried. A socket that closes with no such answer is a connection loss
    like any other (the next server is tried).
    """
    exchange = mechanism.exchange(host)
    name = exchange.mechanism
    token: bytes | None = await exchange.first()
    while token is not None:
        try:
            reply: bytes = await conn.submit(_zk.sasl_op(token))
        except (AuthFailedError, SaslRequiredError) as refusal:
            # A DIGEST-MD5 refusal does not say which part of the credentials is wrong.
            unsaid = (
                "; ZooKeeper does not say whether the user is unknown or the password wrong"
                if name == "DIGEST-MD5"
                else ""
            )
            raise AuthFailedError(
                mechanism=name,
                reason=f"{conn.peer[0]}:{conn.peer[1]} refused the credentials "
                f"(error {refusal.code}{unsaid})",
            ) from None
        if exchange.complete:
            break
        token = await exchange.step(reply)
    if not exchange.complete:
        raise AuthFailedError(mechanism=name, reason="the exchange ended before it was complete")
    log.debug("SASL %s authentication with %s:%s done", name, *conn.peer)


class SessionEngine:
    """Connects, keeps the session, reports states, and carries requests.

    The client facade, transactions and pipelines send through :meth:`call`
    and :meth:`connection`; everything else here is the session task's.
    """

    def __init__(
        self,
        hosts: str | Sequence[str | tuple[str, int]],
        settings: Settings,
        requests: RequestBuilder,
        watches: WatchRegistry,
    ) -> None:
        self._hosts = parse_hosts(hosts)
        self._session_timeout = float(settings.session_timeout)
        self._request_timeout = settings.request_timeout_or_default()
        self._connect_timeout = settings.connect_timeout_for(len(self._hosts))
        self._auth = list(settings.credentials)
        """Sent on every connection, in order: ``auth=`` then what :meth:`add_auth` added."""
        self._sasl = settings.sasl
        self._allow_read_only = settings.read_only
        self._ssl = settings.ssl_context
        self._timed = _telemetry.times_requests(settings.telemetry)
        self._requests = requests
        self._watches = watches

        self.states: Broadcast[ConnectionState] = Broadcast("connection states")
        """Every state transition, in order."""
        self.state: ConnectionState | None = None
        """The last state reported (None before the first connection)."""
        self._conn: Connection | None = None
        self._ready: asyncio.Future[Connection] | None = None
        self.session_id = 0
        """The current session's id; 0 while there is none."""
        self._reported_session = 0
        """The session the last state transition was about (for the log)."""
        self._password = _ZERO_PASSWORD
        self.negotiated_timeout = self._session_timeout
        """The timeout the server granted (seconds); the requested one before connecting."""
        self._last_zxid = 0
        self._session_lost = False
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self.closed = False
        self._fatal: BaseException | None = None
        self._suspended_at: float | None = None
        self._deferred_events: list[tuple[EventType, str]] | None = None
        self._host_index = random.randrange(len(self._hosts))
        self._last_failure: tuple[str, BaseException] | None = None
        self._last_warning = time.monotonic()  # the first warning after one quiet period
        self._refused_certificates: dict[tuple[str, int], ssl.SSLCertVerificationError] = {}
        """Hosts whose latest attempt failed on their TLS certificate."""
        self._had_session = False
        self._trace = _telemetry.SessionTrace()
        self._reconnect_holds = 0
        self._reconnects_allowed = asyncio.Event()
        self._reconnects_allowed.set()

    # --- facts ------------------------------------------------------------------

    @property
    def hosts(self) -> list[tuple[str, int]]:
        return list(self._hosts)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        if not self.session_id:
            return None
        return self.session_id, self._password

    @property
    def sasl(self) -> SaslMechanism | None:
        """The SASL mechanism every connection authenticates with, if any."""
        return self._sasl

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def peer(self) -> tuple[str, int] | None:
        return self._conn.peer if self._conn is not None else None

    def outstanding_requests(self) -> int:
        """Requests sent on the live connection and not yet answered (a gauge)."""
        conn = self._conn
        return conn.in_flight if conn is not None else 0

    def active_watches(self) -> int:
        """Watches set and not yet fired or removed (a gauge)."""
        return len(self._watches)

    def set_max_request_size(self, value: int) -> None:
        if self._conn is not None:
            self._conn.max_request_size = value

    # --- lifecycle --------------------------------------------------------------

    async def start(self, timeout: float | None) -> None:
        """Connect and wait for the first session; see :meth:`Client.start`."""
        if self._runner is not None:
            raise RuntimeError("client already started")
        if self.closed:
            raise ClientClosedError("client is closed")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise UnsupportedEventLoopError(
                "aiocoord needs a running asyncio event loop (with anyio: backend='asyncio');"
                " trio and other loops are not supported"
            ) from None
        self._ready = loop.create_future()
        # The session task outlives start(): not under the caller's span.
        self._runner = loop.create_task(
            self._run(), name="aiocoord-session", context=_telemetry.detached_context()
        )
        _telemetry.track_session(self)
        limit = self._session_timeout if timeout is None else timeout
        try:
            with _telemetry.span("aiocoord.session.connect") as scope:
                async with asyncio.timeout(limit):
                    conn = await asyncio.shield(self._ready)
                scope.set("aiocoord.session_id", f"0x{self.session_id:x}")
                scope.set("server.address", conn.peer[0])
                scope.set("server.port", conn.peer[1])
                scope.outcome("connected")
        except TimeoutError:
            await self.aclose()
            hosts = ",".join(f"{h}:{p}" for h, p in self._hosts)
            failure = self._last_failure
            detail = f" (last attempt: {failure[0]})" if failure else ""
            raise OperationTimeoutError(
                f"no ZooKeeper session from {hosts} within {limit} s{detail}"
            ) from (failure[1] if failure else None)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """End the session (its ephemeral nodes go at once) and stop the session task."""
        if self.closed:
            return
        self._closing = True
        conn = self._conn
        if conn is not None and conn.is_open:
            with contextlib.suppress(CoordinationError, TimeoutError, OSError):
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await conn.submit(_zk.close_op())
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        if conn is not None:
            conn.close()
        self._conn = None
        self.closed = True
        _telemetry.track_session(self, tracked=False)
        error = ClientClosedError("client closed")
        self._watches.fail_all(error)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()
        self.states.close()

    def drop_connection(self) -> None:
        """Cut the socket abruptly, as a network failure would (the session stays)."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("the client is not connected")
        conn.abort()

    @contextlib.contextmanager
    def hold_reconnects(self) -> Iterator[None]:
        """Keep the session task from connecting while inside (the test kit).

        Expiring a session from a second connection moves the session there
        first, which drops ours; a client that reconnected before the close
        applied would take the session back, report RECONNECTED, and only
        then lose it.
        """
        self._reconnect_holds += 1
        self._reconnects_allowed.clear()
        try:
            yield
        finally:
            self._reconnect_holds -= 1
            if not self._reconnect_holds:
                self._reconnects_allowed.set()

    # --- the session task -----------------------------------------------------

    def _set_state(self, state: ConnectionState) -> None:
        # LOST is reported after the session id was cleared: name the lost one.
        self._reported_session = self.session_id or self._reported_session
        log.info(
            "ZooKeeper connection state: %s (session 0x%x)", state.value, self._reported_session
        )
        self.state = state
        peer = self.peer
        _telemetry.session_state(
            self._trace, state.name, self._reported_session, peer[0] if peer else None
        )
        self.states.publish(state)

    async def _run(self) -> None:
        try:
            await self._run_sessions()
        except asyncio.CancelledError:
            raise
        except (AuthFailedError, SaslRequiredError, TLSCertificateError) as error:
            log.warning("the ZooKeeper session task stops: %s", error)
            self._fail_fatally(error)
        except Exception as error:
            log.exception("aiocoord session task failed")
            self._fail_fatally(error)

    async def _run_sessions(self) -> None:
        backoff = 0.01
        failures_in_round = 0
        while not self._closing:
            if self._reconnect_holds:
                await self._reconnects_allowed.wait()
            self._check_client_side_expiry()
            host, port = self._hosts[self._host_index]
            self._host_index = (self._host_index + 1) % len(self._hosts)
            conn = await self._try_connect(host, port)
            if conn is None:
                self._check_certificates()
                failures_in_round += 1
                if failures_in_round >= len(self._hosts):
                    failures_in_round = 0
                    await self._sleep_while_suspended(backoff * (0.5 + random.random()))
                    backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            failures_in_round = 0
            backoff = 0.01
            await self._serve(conn)
            if self._closing:
                return
            self._suspend(conn)
            # Retry the same server first: after a blip it is the likeliest to be back.
            self._host_index = (self._host_index - 1) % len(self._hosts)

    def _suspend(self, conn: Connection) -> None:
        """Report SUSPENDED for ``conn``, once, as soon as it is known to be gone."""
        self._last_zxid = max(self._last_zxid, conn.last_zxid)
        if self._conn is not conn or self._closing:
            return
        self._conn = None
        self._suspended_at = time.monotonic()
        self._ready = asyncio.get_running_loop().create_future()
        self._set_state(ConnectionState.SUSPENDED)

    def _session_ended(self, conn: Connection) -> None:
        """A reply said the session has ended, yet ``conn`` stays open.

        Drop the connection: the reconnect presents the session again, a
        server checks it with the leader and refuses it, and the client
        reports LOST and starts a new session. Staying on would leave holders
        trusting a session whose ephemeral nodes are gone.
        """
        if self._closing or conn is not self._conn:
            return  # requests behind our own closeSession get this answer
        if not conn.is_open:
            return  # dropped already: by an earlier such reply in the same read
        log.warning(
            "%s:%s refused a request of session 0x%x as expired, but kept the "
            "connection open; reconnecting",
            *conn.peer,
            self.session_id,
        )
        conn.abort()

    def _check_client_side_expiry(self) -> None:
        """Declare LOST once suspended longer than the session timeout.

        The server expires a session one timeout after it last heard from the
        client, which was no later than the disconnection; past that point the
        session is gone (or about to be) and holders must not trust it.
        """
        if self._suspended_at is None or self._session_lost:
            return
        if time.monotonic() - self._suspended_at >= self.negotiated_timeout:
            self._lose_session()

    async def _sleep_while_suspended(self, pause: float) -> None:
        if self._suspended_at is not None and not self._session_lost:
            remaining = self._suspended_at + self.negotiated_timeout - time.monotonic()
            pause = max(0.0, min(pause, remaining))
        await asyncio.sleep(pause)

    def _lose_session(self) -> None:
        self._session_lost = True
        self.session_id = 0
        self._password = _ZERO_PASSWORD
        # A server refuses a client that has seen a newer zxid than its own.
        # That guards a session against going back in time; a new session has
        # nothing to guard, and keeping the old zxid would lock the client out
        # of a rebuilt ensemble (wiped data, restored backup) forever.
        self._last_zxid = 0
        error = SessionExpiredError("ZooKeeper session expired")
        self._watches.fail_all(error)
        old_ready = self._ready
        self._ready = asyncio.get_running_loop().create_future()
        if old_ready is not None and not old_ready.done():
            old_ready.set_exception(error)
            old_ready.exception()
        self._set_state(ConnectionState.LOST)

    def _note_failure(self, host: str, port: int, error: BaseException, *, handshake: bool) -> None:
        """Remember why the last attempt failed (for the error ``start()`` raises) and
        say so at WARNING now and then, not only at DEBUG: an operator must see why
        the client stays disconnected."""
        if isinstance(error, TimeoutError):
            what = "no answer to the handshake" if handshake else "connecting timed out"
        elif isinstance(error, ConnectionLossError):
            # A server closes the socket without a word when it refuses a client
            # that has seen a newer zxid than its own (see its log), or while it
            # is not serving yet.
            what = f"the server closed the connection during the handshake ({error})"
        else:
            what = f"{type(error).__name__}: {error}"
        self._last_failure = (f"{host}:{port}: {what}", error)
        log.debug("connecting to %s:%s failed: %r", host, port, error)
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY:
            self._last_warning = now
            log.warning("cannot connect to ZooKeeper at %s:%s: %s; retrying", host, port, what)

    async def _try_connect(self, host: str, port: int) -> Connection | None:
        timeout = self._connect_timeout
        if self._suspended_at is not None and not self._session_lost:
            remaining = self._suspended_at + self.negotiated_timeout - time.monotonic()
            timeout = max(0.05, min(timeout, remaining))
        log.debug("connecting to %s:%s (session 0x%x)", host, port, self.session_id)
        conn: Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                conn = await open_connection(
                    host,
                    port,
                    self._on_event_frame,
                    self._suspend,
                    self._ssl,
                    timed=self._timed,
                    on_session_ended=self._session_ended,
                    on_sasl_required=self._sasl_required,
                )
                reply = await conn.send_connect(
                    self._last_zxid,
                    int(self._session_timeout * 1000),
                    self.session_id,
                    self._password,
                    self._allow_read_only,
                )
                if reply.timeout_ms <= 0:
                    # The server says our session no longer exists.
                    conn.close()
                    if self.session_id and not self._session_lost:
                        self._lose_session()
                    self.session_id = 0
                    self._password = _ZERO_PASSWORD
                    return None
                resumed = reply.session_id == self.session_id and not self._session_lost
                # Events that re-armed watches fire during priming; hold them
                # until the state says RECONNECTED, so that whoever wakes on
                # one sees a connected client.
                self._deferred_events = []
                if self._sasl is not None:
                    await authenticate(conn, self._sasl, host)
                await self._prime(conn, resumed)
        except (OSError, TimeoutError, ConnectionLossError) as error:
            self._note_failure(host, port, error, handshake=conn is not None)
            if isinstance(error, ssl.SSLCertVerificationError):
                self._refused_certificates[host, port] = error
            else:
                self._refused_certificates.pop((host, port), None)
            if conn is not None:
                conn.abort()
            self._flush_deferred_events()
            return None
        except (AuthFailedError, SaslRequiredError):
            if conn is not None:
                conn.abort()
            self._flush_deferred_events()
            raise
        self._establish(conn, reply, resumed)
        self._flush_deferred_events()
        return conn

    def _flush_deferred_events(self) -> None:
        # Fired even when priming failed: the server consumed those watches, and
        # the next re-arm (from a newer zxid) would not report the change again.
        events, self._deferred_events = self._deferred_events, None
        for event_type, server_path in events or ():
            self._watches.fire(event_type, server_path, self._requests.user_path(server_path))

    def _sasl_required(self, conn: Connection) -> None:
        """A reply said the server requires SASL of this client (it closes the socket).

        Every connection would be refused the same way: the client stops, as
        after AuthFailedError. The request answered so fails with
        SaslRequiredError, and so does every later one.
        """
        if self._closing or conn is not self._conn:
            return  # not established yet: authenticate() or _prime() raises it
        log.warning(
            "%s:%s requires SASL authentication and the client has none: closing the client",
            *conn.peer,
        )
        # SUSPENDED first, truthfully: the connection is gone for good, and
        # holders must not go on trusting it.
        self._suspend(conn)
        self._fail_fatally(SaslRequiredError())
        conn.abort()

    async def _prime(self, conn: Connection, resumed: bool) -> None:
        """Authenticate and (for a resumed session) re-arm watches before any request."""
        waiters = [conn.send_special(_zk.XID_AUTH, _zk.auth_frame(s, c)) for s, c in self._auth]
        if resumed and len(self._watches):
            frames = _zk.set_watches_frames(
                self._last_zxid,
                self._watches.paths(WatchKind.DATA),
                self._watches.paths(WatchKind.EXIST),
                self._watches.paths(WatchKind.CHILD),
                self._watches.paths(WatchKind.PERSISTENT),
                self._watches.paths(WatchKind.RECURSIVE),
                # Room for the record's own 36 bytes within the server's limit.
                max_bytes=min(128 * 1024, self._requests.max_data_size - 64),
            )
            waiters += [conn.send_special(_zk.XID_SET_WATCHES, f) for f in frames]
        for index, waiter in enumerate(waiters):
            code = await waiter
            if code == SaslRequiredError.code:
                raise SaslRequiredError()
            if code == AuthFailedError.code:
                # Auth replies come first, in the order of ``auth``.
                scheme = self._auth[index][0] if index < len(self._auth) else None
                raise AuthFailedError(scheme=scheme)

    def _check_certificates(self) -> None:
        """Give up (TLSCertificateError) once every host refused its TLS certificate
        before any session was had: a configuration error, which retrying until
        the start timeout would only hide. After a session, a refusal is retried
        like any failure (a certificate being replaced), and reported in
        NoConnectionError."""
        refused = self._refused_certificates
        if self._had_session or len(refused) < len(set(self._hosts)):
            return
        hosts = ",".join(f"{host}:{port}" for host, port in refused)
        error = next(iter(refused.values()))
        raise TLSCertificateError(hosts, error.verify_message or str(error)) from error

    def _fail_fatally(self, error: BaseException) -> None:
        self._fatal = error
        self._closing = True
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()

    def _establish(self, conn: Connection, reply: _zk.ConnectReply, resumed: bool) -> None:
        self._had_session = True
        self.session_id = reply.session_id
        self._password = reply.password
        self.negotiated_timeout = reply.timeout_ms / 1000.0
        self._session_lost = False
        self._suspended_at = None
        conn.max_request_size = self._requests.max_data_size
        self._conn = conn
        if reply.read_only:
            state = ConnectionState.READ_ONLY
        elif resumed:
            state = ConnectionState.RECONNECTED
        else:
            state = ConnectionState.CONNECTED
        ready = self._ready
        self._set_state(state)
        if ready is not None and not ready.done():
            ready.set_result(conn)

    async def _serve(self, conn: Connection) -> None:
        """Keep ``conn`` alive with pings until it closes or goes silent."""
        read_timeout = self.negotiated_timeout * 2 / 3
        ping_interval = read_timeout / 2
        tick = min(ping_interval / 2, 1.0)
        if self._requests.prefix:
            self._ensure_namespace()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(tick):
                    await asyncio.shield(conn.closed)
            if conn.closed.done() or self._closing:
                break
            now = time.monotonic()
            if now - conn.last_recv > read_timeout:
                log.warning(
                    "no reply from %s:%s for %.1f s; reconnecting", *conn.peer, read_timeout
                )
                conn.abort()
                break
            if now - conn.last_send >= ping_interval:
                with contextlib.suppress(ConnectionLossError):
                    conn.send_ping()

    def _ensure_namespace(self) -> None:
        # Pipelined and unawaited: requests sent after these see the nodes.
        # (Built raw: the namespace's own path must not get the prefix again.)
        prefix = self._requests.prefix
        parts = prefix.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            path = "/" + "/".join(parts[:i])
            op = _zk.create_op(
                path,
                path,
                b"",
                self._requests.default_acl,
                ephemeral=False,
                sequential=False,
                container=False,
                ttl_ms=None,
            )
            self.send_now(op)

    def _on_event_frame(self, frame: bytes) -> None:
        event_type, _state, server_path = _zk.parse_event(frame, _zk.REPLY_HEADER.size)
        if event_type is None:
            return
        if self._deferred_events is not None:
            self._deferred_events.append((event_type, server_path))
            return
        self._watches.fire(event_type, server_path, self._requests.user_path(server_path))

    # --- carrying requests ---------------------------------------------------------

    async def connection(self, limit: float | _Default | None = DEFAULT) -> Connection:
        """The live connection, waiting through SUSPENDED for the session to come back.

        The wait lasts at most ``limit`` seconds (default: the request timeout
        in force, see :func:`request_timeout`; None: no bound), then raises
        NoConnectionError naming the last attempt's failure.
        """
        conn = self._conn
        if conn is not None and conn.is_open:
            return conn
        if isinstance(limit, _Default):
            limit = _override.get(self._request_timeout)
        lost_before = self._session_lost
        try:
            async with asyncio.timeout(limit):
                return await self._wait_for_connection()
        except TimeoutError:
            assert limit is not None
            # The default limit is one session timeout, which is also when the
            # session is lost by the client's clock: whichever timer the loop
            # runs first, a session that is over by now is the answer.
            self._check_client_side_expiry()
            if self._session_lost and not lost_before:
                raise SessionExpiredError("ZooKeeper session expired") from None
            failure = self._last_failure
            if failure is None:
                raise NoConnectionError(limit) from None
            raise NoConnectionError(limit, failure[0]) from failure[1]

    def check_pinned_session(self) -> None:
        """SessionExpiredError if requests here belong to a session that is not
        the current one (see :func:`only_in_session`); call right before sending."""
        pinned = _pinned.get()
        if pinned is not None and pinned != self.session_id:
            raise SessionExpiredError("the session these requests belong to has ended")

    async def wait_for_session(self) -> Connection:
        """The live connection, waiting without bound, through lost sessions, for
        one to come (ClientClosedError once the client closes)."""
        while True:
            try:
                return await self.connection(None)
            except SessionExpiredError:
                continue

    async def _wait_for_connection(self) -> Connection:
        while True:
            conn = self._conn
            if conn is not None and conn.is_open:
                return conn
            # Before the dead connection is looked at: while the client closes,
            # _suspend leaves it in place, and looping on it would spin.
            if self.closed or self._closing:
                if self._fatal is not None:
                    raise self._fatal
                raise ClientClosedError("client is closed")
            if conn is not None:
                # Closed, but the session task has not reported it yet: report
                # it now (idempotent), then wait for the session like anyone.
                self._suspend(conn)
                continue
            ready = self._ready
            if ready is None:
                raise RuntimeError("client not started: use 'async with connect(...)'")
            await asyncio.shield(ready)

    def send_now(self, op: _zk.Op) -> asyncio.Future[Any] | None:
        """Send ``op`` at once if connected (None if not, nothing sent); the
        reply's future needs no awaiting.

        For requests whose place in the order matters more than their outcome
        (removing a watch before a later request re-adds it).
        """
        conn = self._conn
        if conn is None or not conn.is_open:
            return None
        try:
            future = conn.submit(op)
        except (ConnectionLossError, DataTooLargeError):
            return None
        future.add_done_callback(_ignore_result)
        return future

    async def add_auth(self, scheme: str, credential: bytes) -> None:
        """Authenticate the live connection now and, once the server accepted it,
        every later one (before any other request, as ``auth=`` is).

        A refusal raises AuthFailedError and is not remembered; the server closes
        the connection after refusing (so does this, at once), and the client
        reconnects with the credentials it had. If the connection is lost before
        the answer, the credential goes out again on the next one (it belongs to
        a connection, so nothing is in doubt).
        """
        pair = (scheme, credential)
        frame = _zk.auth_frame(scheme, credential)
        while True:
            if self._closing:
                raise ClientClosedError("client closed")
            conn = await self.connection()
            try:
                code = await conn.send_special(_zk.XID_AUTH, frame)
            except ConnectionLossError:
                continue
            if code == AuthFailedError.code:
                # The server closes the connection after this reply: drop it now,
                # so that requests made after the error wait for the next one.
                conn.abort()
                raise AuthFailedError(scheme=scheme, runtime=True)
            if code != 0:
                raise error_for_code(code)
            if pair not in self._auth:
                self._auth.append(pair)
            if self._conn is conn:
                return
            # A new connection came up before the list had it: authenticate there too.

    async def call(self, op: _zk.Op, hook: ReplyHook | None = None) -> Any:
        """Send one request (waiting for a connection first) and return its reply."""
        while True:
            conn = self._conn
            if self._closing:
                if self._fatal is not None and not self.closed:
                    # Stopped by the server (SaslRequiredError), not closed by its
                    # owner. (Its traceback reset: the same error is raised each time.)
                    raise self._fatal.with_traceback(None)
                # The connection stays open while closeSession is in flight;
                # anything sent behind it would only come back SESSIONEXPIRED.
                raise ClientClosedError("client closed")
            if conn is None or not conn.is_open:
                conn = await self.connection()
            self.check_pinned_session()
            try:
                future = conn.submit(op, hook)
            except ConnectionLossError as error:
                if error.sent:
                    raise
                # The connection closed under us before anything was written:
                # nothing to be unsure about, so wait for the next one.
                continue
            try:
                return await future
            except BaseException as error:
                # The future holds the error and the error's traceback holds this
                # frame: dropping the future breaks that cycle, so that a refused
                # request (a lost compare-and-set, thousands a second on a
                # contended counter) is freed at once, not by the cyclic collector.
                del future
                if isinstance(error, (SessionExpiredError, ConnectionLossError)) and self._closing:
                    # A request in flight as aclose() ends the session: the server
                    # answers it SESSIONEXPIRED (it came after closeSession) or the
                    # socket closes under it. Either way the cause is the close.
                    raise ClientClosedError("client closed") from error
                raise


def _ignore_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
