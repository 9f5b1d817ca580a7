"""The session manager: one ZooKeeper session kept alive across connections.

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
import itertools
import logging
import os
import random
import ssl
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from .. import _paths
from .._exceptions import (
    AuthFailedError,
    ClientClosedError,
    ConnectionLossError,
    CoordinationError,
    DataTooLargeError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from .._types import ACL, OPEN_ACL_UNSAFE, EventType, Stat, WatchEvent
from . import _zk
from ._batch import Pipeline, Transaction
from ._broadcast import Broadcast, Subscription
from ._connection import Connection, open_connection
from ._retry import BoundedExponentialBackoff, RetryPolicy, call_with_retry
from ._state import ConnectionState, ErrorPolicy, StandardErrorPolicy
from ._watch import Watch, WatchKind, WatchRegistry

__all__ = ["Client", "StateChanges", "connect", "protected_marker"]

log = logging.getLogger("aiocoord")

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_MAX_DATA_SIZE = _zk.JUTE_MAXBUFFER
"""ZooKeeper's default ``jute.maxbuffer`` (just under 1 MiB)."""

PROTECTED_PREFIX = "_c_"
"""Marks a protected node name (``_c_<uuid>-<name>``), as Curator's protection mode does."""


_marker_base = str(uuid.uuid4())[:24]  # random per process; the rest counts
_marker_count = itertools.count(int.from_bytes(os.urandom(5), "big"))


def protected_marker() -> str:
    """A fresh ``_c_<id>-`` prefix for a protected node name.

    The id has a UUID's shape, as Curator's do (its tools recognise protected
    names by it), but costs a counter step instead of a uuid4 per create:
    random per process, unique within it.
    """
    return f"{PROTECTED_PREFIX}{_marker_base}{next(_marker_count) & 0xFFFFFFFFFFFF:012x}-"


_MAX_BACKOFF = 0.5
_CLOSE_TIMEOUT = 2.0
_ZERO_PASSWORD = b"\x00" * 16

ListenerCallback = Callable[[ConnectionState], object]


def _parse_hosts(hosts: str | Sequence[str | tuple[str, int]]) -> list[tuple[str, int]]:
    items: list[str | tuple[str, int]]
    if isinstance(hosts, str):
        if "/" in hosts:
            raise ValueError("a chroot in the connect string is not supported: use namespace=")
        items = [h.strip() for h in hosts.split(",") if h.strip()]
    else:
        items = list(hosts)
    parsed: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            parsed.append((item[0], int(item[1])))
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "2181"
        parsed.append((host.strip("[]"), int(port)))
    if not parsed:
        raise ValueError("no ZooKeeper hosts given")
    return parsed


def _check_data(path: str, data: object, limit: int) -> bytes:
    if isinstance(data, bytes):
        value = data
    elif isinstance(data, bytearray | memoryview):
        value = bytes(data)
    else:
        raise TypeError(f"node data must be bytes, not {type(data).__name__}")
    if len(value) > limit:
        raise DataTooLargeError(path, len(value), limit)
    return value


def _check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool):
        raise TypeError(f"version must be int, not {type(version).__name__}")
    return version


StateChanges = Subscription[ConnectionState]
"""An async iterator over connection state transitions (see :meth:`Client.state_changes`)."""


class Client:
    """A ZooKeeper session. Create with :func:`connect`; use as ``async with``.

    Paths given to a client are relative to its ``namespace`` (a path prefix
    applied on the client side, created on connect if missing).
    """

    def __init__(
        self,
        hosts: str | Sequence[str | tuple[str, int]],
        *,
        namespace: str | None = None,
        session_timeout: float = 10.0,
        connect_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        auth: Sequence[tuple[str, str | bytes]] | None = None,
        read_only: bool = False,
        default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE,
        max_data_size: int = DEFAULT_MAX_DATA_SIZE,
        ssl_context: ssl.SSLContext | None = None,
        error_policy: ErrorPolicy | None = None,
    ) -> None:
        self._hosts = _parse_hosts(hosts)
        if namespace:
            ns = namespace if namespace.startswith("/") else "/" + namespace
            _paths.validate_path(ns)
            self._prefix = "" if ns == "/" else ns
        else:
            self._prefix = ""
        if session_timeout <= 0:
            raise ValueError("session_timeout must be positive")
        self._session_timeout = float(session_timeout)
        # A server answers a handshake in milliseconds. One that accepted the
        # socket but stays silent (seen from a server still starting up) must not
        # hold the client for a whole session timeout: cap the default at 2 s.
        self._connect_timeout = (
            float(connect_timeout)
            if connect_timeout is not None
            else max(0.5, min(2.0, self._session_timeout / len(self._hosts)))
        )
        self.retry_policy: RetryPolicy = retry or BoundedExponentialBackoff()
        """The retry policy for :meth:`retry` and for recipes built on this client."""
        self.error_policy: ErrorPolicy = error_policy or StandardErrorPolicy()
        """Which connection states recipes treat as losing what they hold."""
        self._auth = [
            (scheme, cred.encode() if isinstance(cred, str) else bytes(cred))
            for scheme, cred in (auth or ())
        ]
        self._allow_read_only = read_only
        self._default_acl = tuple(default_acl)
        self._max_data_size = max_data_size
        self._ssl = ssl_context

        self._state: ConnectionState | None = None
        self._conn: Connection | None = None
        self._ready: asyncio.Future[Connection] | None = None
        self._session_id = 0
        self._password = _ZERO_PASSWORD
        self._negotiated_timeout = self._session_timeout
        self._last_zxid = 0
        self._session_lost = False
        self._watches = WatchRegistry()
        self._states: Broadcast[ConnectionState] = Broadcast()
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False
        self._fatal: BaseException | None = None
        self._suspended_at: float | None = None
        self._deferred_events: list[tuple[EventType, str]] | None = None
        self._host_index = random.randrange(len(self._hosts))

    # --- lifecycle ------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self, timeout: float | None = None) -> None:
        """Connect and wait for the first session (CONNECTED or READ_ONLY).

        Raises OperationTimeoutError (after closing) if no server answered within
        ``timeout`` seconds (default: the session timeout), and AuthFailedError
        if the server refused the credentials.
        """
        if self._runner is not None:
            raise RuntimeError("client already started")
        if self._closed:
            raise ClientClosedError("client is closed")
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._runner = loop.create_task(self._run(), name="aiocoord-session")
        limit = self._session_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            hosts = ",".join(f"{h}:{p}" for h, p in self._hosts)
            raise OperationTimeoutError(
                f"no ZooKeeper server at {hosts} within {limit} s"
            ) from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """End the session (its ephemeral nodes go at once) and stop the background task."""
        if self._closed:
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
        self._closed = True
        error = ClientClosedError("client closed")
        self._watches.fail_all(error)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()
        self._states.close()

    # --- session facts --------------------------------------------------------

    @property
    def max_data_size(self) -> int:
        """The server's ``jute.maxbuffer``: the limit on node data and on each whole
        request (path, ACLs, headers, every operation of a transaction). Larger
        ones raise DataTooLargeError without being sent."""
        return self._max_data_size

    @max_data_size.setter
    def max_data_size(self, value: int) -> None:
        self._max_data_size = value
        if self._conn is not None:
            self._conn.max_request_size = value

    @property
    def state(self) -> ConnectionState | None:
        """The last state reported (None before the first connection)."""
        return self._state

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, None if there is none."""
        if not self._session_id:
            return None
        return self._session_id, self._password

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def session_timeout(self) -> float:
        """The timeout the server granted (seconds); the requested one before connecting."""
        return self._negotiated_timeout

    @property
    def connected_to(self) -> tuple[str, int] | None:
        """The server the connection goes to, if connected."""
        return self._conn.peer if self._conn is not None else None

    @property
    def hosts(self) -> list[tuple[str, int]]:
        return list(self._hosts)

    @property
    def namespace(self) -> str | None:
        return self._prefix or None

    def add_listener(self, callback: ListenerCallback) -> None:
        """Call ``callback(state)`` on every transition, in order, from the session task."""
        self._states.add_listener(callback)

    def remove_listener(self, callback: ListenerCallback) -> None:
        self._states.remove_listener(callback)

    def state_changes(self) -> StateChanges:
        """Every state transition from now on, as an async iterator (ends on close)."""
        return self._states.subscribe()

    async def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait until connected; False if ``timeout`` passed first."""
        try:
            async with asyncio.timeout(timeout):
                await self._connection()
        except TimeoutError:
            return False
        except SessionExpiredError:
            return await self.wait_connected(timeout)
        return True

    # --- the session task -----------------------------------------------------

    def _set_state(self, state: ConnectionState) -> None:
        log.info("ZooKeeper connection state: %s", state.value)
        self._state = state
        self._states.publish(state)

    async def _run(self) -> None:
        try:
            await self._run_sessions()
        except asyncio.CancelledError:
            raise
        except AuthFailedError as error:
            self._fail_fatally(error)
        except Exception as error:
            log.exception("aiocoord session task failed")
            self._fail_fatally(error)

    async def _run_sessions(self) -> None:
        backoff = 0.01
        failures_in_round = 0
        while not self._closing:
            self._check_client_side_expiry()
            host, port = self._hosts[self._host_index]
            self._host_index = (self._host_index + 1) % len(self._hosts)
            conn = await self._try_connect(host, port)
            if conn is None:
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

    def _check_client_side_expiry(self) -> None:
        """Declare LOST once suspended longer than the session timeout.

        The server expires a session one timeout after it last heard from the
        client, which was no later than the disconnection; past that point the
        session is gone (or about to be) and holders must not trust it.
        """
        if self._suspended_at is None or self._session_lost:
            return
        if time.monotonic() - self._suspended_at >= self._negotiated_timeout:
            self._lose_session()

    async def _sleep_while_suspended(self, pause: float) -> None:
        if self._suspended_at is not None and not self._session_lost:
            remaining = self._suspended_at + self._negotiated_timeout - time.monotonic()
            pause = max(0.0, min(pause, remaining))
        await asyncio.sleep(pause)

    def _lose_session(self) -> None:
        self._session_lost = True
        self._session_id = 0
        self._password = _ZERO_PASSWORD
        error = SessionExpiredError("ZooKeeper session expired")
        self._watches.fail_all(error)
        old_ready = self._ready
        self._ready = asyncio.get_running_loop().create_future()
        if old_ready is not None and not old_ready.done():
            old_ready.set_exception(error)
            old_ready.exception()
        self._set_state(ConnectionState.LOST)

    async def _try_connect(self, host: str, port: int) -> Connection | None:
        timeout = self._connect_timeout
        if self._suspended_at is not None and not self._session_lost:
            remaining = self._suspended_at + self._negotiated_timeout - time.monotonic()
            timeout = max(0.05, min(timeout, remaining))
        conn: Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                conn = await open_connection(
                    host, port, self._on_event_frame, self._suspend, self._ssl
                )
                reply = await conn.send_connect(
                    self._last_zxid,
                    int(self._session_timeout * 1000),
                    self._session_id,
                    self._password,
                    self._allow_read_only,
                )
                if reply.timeout_ms <= 0:
                    # The server says our session no longer exists.
                    conn.close()
                    if self._session_id and not self._session_lost:
                        self._lose_session()
                    self._session_id = 0
                    self._password = _ZERO_PASSWORD
                    return None
                resumed = reply.session_id == self._session_id and not self._session_lost
                # Events that re-armed watches fire during priming; hold them
                # until the state says RECONNECTED, so that whoever wakes on
                # one sees a connected client.
                self._deferred_events = []
                await self._prime(conn, resumed)
        except (OSError, TimeoutError, ConnectionLossError) as error:
            log.debug("connecting to %s:%s failed: %r", host, port, error)
            if conn is not None:
                conn.abort()
            self._flush_deferred_events()
            return None
        except AuthFailedError:
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
            self._watches.fire(event_type, server_path, self._user_path(server_path))

    async def _prime(self, conn: Connection, resumed: bool) -> None:
        """Authenticate and (for a resumed session) re-arm watches before any request."""
        waiters = [conn.send_special(_zk.XID_AUTH, _zk.auth_frame(s, c)) for s, c in self._auth]
        if resumed and len(self._watches):
            frames = _zk.set_watches_frames(
                self._last_zxid,
                self._watches.paths(WatchKind.DATA),
                self._watches.paths(WatchKind.EXIST),
                self._watches.paths(WatchKind.CHILD),
                # Room for the record's own 36 bytes within the server's limit.
                max_bytes=min(128 * 1024, self._max_data_size - 64),
            )
            waiters += [conn.send_special(_zk.XID_SET_WATCHES, f) for f in frames]
        for waiter in waiters:
            code = await waiter
            if code == AuthFailedError.code:
                raise AuthFailedError()

    def _fail_fatally(self, error: BaseException) -> None:
        self._fatal = error
        self._closing = True
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()

    def _establish(self, conn: Connection, reply: _zk.ConnectReply, resumed: bool) -> None:
        self._session_id = reply.session_id
        self._password = reply.password
        self._negotiated_timeout = reply.timeout_ms / 1000.0
        self._session_lost = False
        self._suspended_at = None
        conn.max_request_size = self._max_data_size
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
        read_timeout = self._negotiated_timeout * 2 / 3
        ping_interval = read_timeout / 2
        tick = min(ping_interval / 2, 1.0)
        if self._prefix:
            self._ensure_namespace(conn)
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

    def _ensure_namespace(self, conn: Connection) -> None:
        # Pipelined and unawaited: requests sent after these see the nodes.
        prefix = self._prefix
        parts = prefix.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            path = "/" + "/".join(parts[:i])
            op = _zk.create_op(
                path,
                path,
                b"",
                self._default_acl,
                ephemeral=False,
                sequential=False,
                container=False,
                ttl_ms=None,
            )
            with contextlib.suppress(ConnectionLossError, DataTooLargeError):
                conn.submit(op).add_done_callback(_ignore_result)

    def _on_event_frame(self, frame: bytes) -> None:
        event_type, _state, server_path = _zk.parse_event(frame, _zk.REPLY_HEADER.size)
        if event_type is None:
            return
        if self._deferred_events is not None:
            self._deferred_events.append((event_type, server_path))
            return
        self._watches.fire(event_type, server_path, self._user_path(server_path))

    # --- request plumbing -------------------------------------------------------

    def _server_path(self, path: str) -> str:
        if not self._prefix:
            return path
        return self._prefix if path == "/" else self._prefix + path

    def _user_path(self, server_path: str) -> str:
        if not self._prefix:
            return server_path
        if server_path.startswith(self._prefix):
            return server_path[len(self._prefix) :] or "/"
        return server_path

    async def _connection(self) -> Connection:
        """The live connection, waiting through SUSPENDED for the session to come back."""
        while True:
            conn = self._conn
            if conn is not None:
                if conn.is_open:
                    return conn
                # Closing, but the session task has not reported it yet: report
                # it now (idempotent), then wait for the session like anyone.
                self._suspend(conn)
                continue
            if self._closed or self._closing:
                if self._fatal is not None:
                    raise self._fatal
                raise ClientClosedError("client is closed")
            ready = self._ready
            if ready is None:
                raise RuntimeError("client not started: use 'async with connect(...)'")
            await asyncio.shield(ready)

    async def _call(self, op: _zk.Op, hook: Callable[[int], None] | None = None) -> Any:
        conn = self._conn
        if conn is None or not conn.is_open:
            conn = await self._connection()
        return await conn.submit(op, hook)

    def _watch_hook(
        self, path: str, server_path: str, kinds: dict[int, WatchKind], out: list[Watch]
    ) -> Callable[[int], None]:
        """A reply hook that registers a watch of the kind the reply code implies."""

        def hook(code: int) -> None:
            kind = kinds.get(code)
            if kind is not None:
                watch = Watch(self._watches, kind, path, server_path)
                self._watches.add(watch)
                out.append(watch)

        return hook

    async def _call_watched(
        self, op: _zk.Op, path: str, server_path: str, kinds: dict[int, WatchKind]
    ) -> tuple[Any, Watch | None, BaseException | None]:
        out: list[Watch] = []
        hook = self._watch_hook(path, server_path, kinds, out)
        try:
            result = await self._call(op, hook)
        except asyncio.CancelledError:
            for watch in out:
                watch.cancel()
            raise
        except CoordinationError as error:
            return None, (out[0] if out else None), error
        return result, (out[0] if out else None), None

    # --- operations -------------------------------------------------------------

    def _create_request(
        self,
        path: str,
        data: bytes,
        *,
        acl: Sequence[ACL] | None,
        ephemeral: bool,
        sequential: bool,
        container: bool,
        ttl: float | None,
    ) -> _zk.Op:
        """Validate a create and build its request (shared with transactions and pipelines)."""
        _paths.validate_path(path, sequential=sequential)
        value = _check_data(path, data, self._max_data_size)
        if sum((ephemeral, container, ttl is not None)) > 1:
            raise ValueError("ephemeral, container and ttl exclude each other")
        if container and sequential:
            raise ValueError("a container node cannot be sequential")
        ttl_ms: int | None = None
        if ttl is not None:
            ttl_ms = int(ttl * 1000)
            if ttl_ms <= 0:
                raise ValueError("ttl must be positive")
        if path == "/":
            raise ValueError("the root node always exists")
        acls = tuple(acl) if acl is not None else self._default_acl
        return _zk.create_op(
            path,
            self._server_path(path),
            value,
            acls,
            ephemeral=ephemeral,
            sequential=sequential,
            container=container,
            ttl_ms=ttl_ms,
        )

    def _set_request(self, path: str, data: bytes, version: int) -> _zk.Op:
        _paths.validate_path(path)
        value = _check_data(path, data, self._max_data_size)
        return _zk.set_data_op(path, self._server_path(path), value, _check_version(version))

    def _delete_request(self, path: str, version: int) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.delete_op(path, self._server_path(path), _check_version(version))

    def _check_request(self, path: str, version: int) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.check_op(path, self._server_path(path), _check_version(version))

    def _get_request(self, path: str) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.get_data_op(path, self._server_path(path), False)

    def _exists_request(self, path: str) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.exists_op(path, self._server_path(path), False)

    def _children_request(self, path: str) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.children_op(path, self._server_path(path), False)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
        make_parents: bool = False,
        container_parents: bool = False,
        protected: bool = False,
    ) -> str:
        """Create a node; return its path (with the sequence suffix, if sequential).

        ``container`` nodes are removed by the server once their last child goes;
        ``ttl`` (seconds) makes a persistent node the server removes when it has
        had no children and no change for that long (needs TTL nodes enabled).
        ``make_parents`` creates missing ancestors, as containers with
        ``container_parents`` (which implies it). ``protected`` survives a lost
        reply: see :meth:`create_with_stat`.
        """
        created, _stat = await self.create_with_stat(
            path,
            data,
            acl=acl,
            ephemeral=ephemeral,
            sequential=sequential,
            container=container,
            ttl=ttl,
            make_parents=make_parents,
            container_parents=container_parents,
            protected=protected,
        )
        return created

    async def create_with_stat(
        self,
        path: str,
        data: bytes = b"",
        *,
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
        make_parents: bool = False,
        container_parents: bool = False,
        protected: bool = False,
    ) -> tuple[str, Stat]:
        """Like :meth:`create`, also returning the new node's Stat.

        With ``protected=True`` the node's name gets a unique ``_c_<uuid>-``
        prefix. If the connection drops before the reply arrives, the parent's
        children are searched for that prefix once the session is back: a create
        that reached the server is found, not made twice. Only if it is not
        there is the create sent again.
        """
        marker = ""
        if protected:
            _paths.validate_path(path, sequential=sequential)
            parent, name = path.rsplit("/", 1)
            marker = protected_marker()
            path = f"{parent}/{marker}{name}"
        op = self._create_request(
            path,
            data,
            acl=acl,
            ephemeral=ephemeral,
            sequential=sequential,
            container=container,
            ttl=ttl,
        )
        parents = "container" if container_parents else "plain" if make_parents else None
        if not protected:
            return await self._create_once(op, parents)

        async def attempt() -> tuple[str, Stat]:
            try:
                return await self._create_once(op, parents)
            except (ConnectionLossError, SessionExpiredError) as error:
                if isinstance(error, ConnectionLossError) and not error.sent:
                    raise
                found = await self.find_protected(_paths.parent(path), marker)
                if found is not None:
                    return found
                raise

        return await call_with_retry(self.retry_policy, attempt)

    async def _create_once(self, op: _zk.Op, parents: str | None) -> tuple[str, Stat]:
        try:
            created, stat = await self._call(op)
        except NoNodeError:
            if parents is None or op.path is None:
                raise
            await self.ensure_path(_paths.parent(op.path), container=parents == "container")
            created, stat = await self._call(op)
        return self._user_path(created), stat

    async def find_protected(self, parent: str, marker: str) -> tuple[str, Stat] | None:
        """The node a protected create with ``marker`` made under ``parent``, if any.

        For recovery after a lost reply. If a retried create left more than one
        node with the marker, the lowest is kept and the others are deleted.
        """
        with contextlib.suppress(NoNodeError):
            await self.sync(parent)
            children = await self.children(parent)
            matches = sorted(c for c in children if c.startswith(marker))
            for extra in matches[1:]:
                with contextlib.suppress(NoNodeError):
                    await self.delete(_paths.join(parent, extra))
            if matches:
                found = _paths.join(parent, matches[0])
                stat = await self.exists(found)
                if stat is not None:
                    return found, stat
        return None

    async def get(self, path: str) -> tuple[bytes, Stat]:
        """The node's data and Stat; NoNodeError if it does not exist."""
        result: tuple[bytes, Stat] = await self._call(self._get_request(path))
        return result

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        """Replace the node's data; with ``version`` >= 0 only if it still has that version."""
        stat: Stat = await self._call(self._set_request(path, data, version))
        return stat

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        """Delete the node (checking ``version`` if >= 0); ``recursive`` removes its subtree."""
        _paths.validate_path(path)
        if recursive:
            if version != -1:
                raise ValueError("version cannot be checked on a recursive delete")
            await self.delete_recursive(path)
            return
        await self._call(self._delete_request(path, version))

    async def exists(self, path: str) -> Stat | None:
        """The node's Stat, or None if it does not exist."""
        try:
            stat: Stat = await self._call(self._exists_request(path))
        except NoNodeError:
            return None
        return stat

    async def children(self, path: str) -> list[str]:
        """The names of the node's children (unordered, as the server lists them)."""
        names, _stat = await self.children_with_stat(path)
        return names

    async def children_with_stat(self, path: str) -> tuple[list[str], Stat]:
        """The children's names and the parent's Stat, read atomically."""
        result: tuple[list[str], Stat] = await self._call(self._children_request(path))
        return result

    async def sync(self, path: str = "/") -> None:
        """Make the connected server catch up with the leader before later reads."""
        _paths.validate_path(path)
        await self._call(_zk.sync_op(path, self._server_path(path)))

    async def get_acl(self, path: str) -> tuple[list[ACL], Stat]:
        _paths.validate_path(path)
        result: tuple[list[ACL], Stat] = await self._call(
            _zk.get_acl_op(path, self._server_path(path))
        )
        return result

    async def set_acl(self, path: str, acl: Sequence[ACL], *, version: int = -1) -> Stat:
        _paths.validate_path(path)
        op = _zk.set_acl_op(path, self._server_path(path), tuple(acl), _check_version(version))
        stat: Stat = await self._call(op)
        return stat

    async def ensure_path(self, path: str, *, container: bool = False) -> None:
        """Create ``path`` and any missing ancestors; existing nodes are left alone.

        All creates go out at once (one round trip): ZooKeeper applies one
        session's requests in order, so each parent exists before its child's
        create is applied.
        """
        _paths.validate_path(path)
        if path == "/":
            return
        parts = path.strip("/").split("/")
        ops = [
            self._create_request(
                "/" + "/".join(parts[:i]),
                b"",
                acl=None,
                ephemeral=False,
                sequential=False,
                container=container,
                ttl=None,
            )
            for i in range(1, len(parts) + 1)
        ]
        conn = await self._connection()
        futures = conn.submit_all(ops)  # all or none: one too large sends none
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, NodeExistsError):
                raise result

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it; a missing node is not an error."""
        _paths.validate_path(path)
        if path == "/":
            raise ValueError("refusing to delete the root")
        for _ in range(10):
            try:
                children = await self.children(path)
            except NoNodeError:
                return
            for child in children:
                await self.delete_recursive(_paths.join(path, child))
            try:
                await self.delete(path)
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue  # a child appeared meanwhile: go again
        raise NotEmptyError(path)

    def transaction(self) -> Transaction:
        """A builder for an atomic multi-operation: all apply, or none."""
        return Transaction(self)

    def pipeline(self) -> Pipeline:
        """A builder for requests sent back to back, without waiting between them.

        Not atomic, but ZooKeeper applies one session's requests in order: a
        read queued after a write sees that write. One round trip for all.
        """
        return Pipeline(self)

    async def retry(
        self,
        operation: Callable[P, Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``operation(*args, **kwargs)`` under the client's retry policy.

        Connection loss and session expiry are retried; answers such as
        NoNodeError or BadVersionError are not.
        """
        return await call_with_retry(self.retry_policy, lambda: operation(*args, **kwargs))

    # --- watches ----------------------------------------------------------------

    async def watch_exists(self, path: str) -> tuple[Stat | None, Watch]:
        """The node's Stat (or None) and a watch that fires on its next create, change or delete."""
        _paths.validate_path(path)
        server_path = self._server_path(path)
        kinds = {0: WatchKind.DATA, _zk.NO_NODE_CODE: WatchKind.EXIST}
        stat, watch, error = await self._call_watched(
            _zk.exists_op(path, server_path, True), path, server_path, kinds
        )
        if error is not None and not isinstance(error, NoNodeError):
            raise error
        assert watch is not None
        return stat, watch

    async def watch_data(self, path: str) -> tuple[bytes, Stat, Watch]:
        """The node's data and Stat, and a watch that fires on its next change or delete."""
        _paths.validate_path(path)
        server_path = self._server_path(path)
        result, watch, error = await self._call_watched(
            _zk.get_data_op(path, server_path, True), path, server_path, {0: WatchKind.DATA}
        )
        if error is not None:
            raise error
        assert watch is not None
        data, stat = result
        return data, stat, watch

    async def watch_children(self, path: str) -> tuple[list[str], Stat, Watch]:
        """The children's names, the parent's Stat, and a watch on the next child change."""
        _paths.validate_path(path)
        server_path = self._server_path(path)
        result, watch, error = await self._call_watched(
            _zk.children_op(path, server_path, True), path, server_path, {0: WatchKind.CHILD}
        )
        if error is not None:
            raise error
        assert watch is not None
        names, stat = result
        return names, stat, watch

    async def wait_for_change(self, path: str) -> WatchEvent:
        """Wait for the next create, data change or delete of ``path``.

        Changes made before the watch is set are not seen; to read a value and
        then wait for it to change without a gap, use :meth:`watch_data` or
        :meth:`data_changes`.
        """
        _stat, watch = await self.watch_exists(path)
        try:
            return await watch
        finally:
            watch.cancel()

    def data_changes(self, path: str) -> AsyncGenerator[tuple[bytes, Stat] | None, None]:
        """The node's contents now and after every change: ``(data, stat)``, or None while
        it does not exist. Intermediate states may be skipped (the latest one is always
        seen); a lost session is ridden out. Ends when the client closes."""

        async def read(watched: str) -> tuple[tuple[bytes, Stat], Watch]:
            data, stat, watch = await self.watch_data(watched)
            return (data, stat), watch

        return self._changes(path, read, lambda s: (s[1].mzxid, s[1].version))

    def children_changes(self, path: str) -> AsyncGenerator[list[str] | None, None]:
        """The node's children (sorted) now and after every change; None while the node
        does not exist. Ends when the client closes."""

        async def read(watched: str) -> tuple[list[str], Watch]:
            names, _stat, watch = await self.watch_children(watched)
            return sorted(names), watch

        return self._changes(path, read, lambda names: names)

    async def _changes(
        self,
        path: str,
        read: Callable[[str], Awaitable[tuple[T, Watch]]],
        identity: Callable[[T], object],
    ) -> AsyncGenerator[T | None, None]:
        """The loop behind the ``*_changes`` iterators: read with a watch (or, while
        the node is missing, watch for its creation), yield what is new, wait."""
        last: object = _UNSEEN
        while True:
            watch: Watch | None = None
            try:
                snapshot: T | None
                try:
                    snapshot, watch = await self.retry(read, path)
                except NoNodeError:
                    stat, watch = await self.retry(self.watch_exists, path)
                    if stat is not None:
                        continue  # created in between: read it
                    snapshot = None
                seen = None if snapshot is None else identity(snapshot)
                if seen != last:
                    last = seen
                    yield snapshot
                assert watch is not None
                await watch
            except ClientClosedError:
                return
            except SessionExpiredError:
                continue
            finally:
                if watch is not None:
                    watch.cancel()

    @property
    def pending_watches(self) -> int:
        """How many local watch waiters are registered (for leak checks)."""
        return len(self._watches)

    def __repr__(self) -> str:
        state = self._state.value if self._state else "new"
        return f"<aiocoord.Client {state} session=0x{self._session_id:x} ns={self._prefix!r}>"


_UNSEEN = object()
"""What the ``*_changes`` iterators have yielded before the first snapshot."""


def _ignore_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def connect(
    hosts: str | Sequence[str | tuple[str, int]],
    *,
    namespace: str | None = None,
    session_timeout: float = 10.0,
    connect_timeout: float | None = None,
    retry: RetryPolicy | None = None,
    auth: Sequence[tuple[str, str | bytes]] | None = None,
    read_only: bool = False,
    default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE,
    max_data_size: int = DEFAULT_MAX_DATA_SIZE,
    ssl_context: ssl.SSLContext | None = None,
    error_policy: ErrorPolicy | None = None,
) -> Client:
    """A client for ``hosts`` (``"h1:2181,h2:2181"``); use it as ``async with connect(...)``.

    Nothing happens until the ``async with`` (or ``await client.start()``).

    - ``namespace``: a path prefix applied to every path (created if missing).
    - ``session_timeout``: seconds the server keeps the session (and its
      ephemeral nodes) without hearing from the client; the server may adjust it.
    - ``connect_timeout``: seconds one connection attempt (TCP, TLS, handshake)
      may take; default: the session timeout split over the hosts, at most 2 s.
    - ``retry``: the policy of :meth:`Client.retry` and of the recipes.
    - ``auth``: ``(scheme, credential)`` pairs such as ``("digest", "user:pw")``,
      sent on every connection. ``default_acl`` applies to creates without one.
    - ``read_only``: accept a server that lost its quorum (state READ_ONLY).
    - ``ssl_context``: connect with TLS (to a ``secureClientPort``).
    - ``error_policy``: which states count as losing a lock or leadership.
    """
    return Client(
        hosts,
        namespace=namespace,
        session_timeout=session_timeout,
        connect_timeout=connect_timeout,
        retry=retry,
        auth=auth,
        read_only=read_only,
        default_acl=default_acl,
        max_data_size=max_data_size,
        ssl_context=ssl_context,
        error_policy=error_policy,
    )
