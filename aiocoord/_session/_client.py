"""The client facade: one ZooKeeper session and every operation on it.

The work happens below it: :mod:`._engine` keeps the session, :mod:`._requests`
builds and validates requests, :mod:`._watching` sets watches and streams
changes, :mod:`._batch` sends several requests at once, :mod:`._nodes` creates
protected nodes. :class:`Client` wires them together for one session.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from typing import Any, ParamSpec, TypeVar, Unpack

from .. import _paths
from .._checks import check_flag, check_int, check_seconds, check_timeout
from .._exceptions import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidPathError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
)
from .._telemetry import DEFAULT as DEFAULT_TELEMETRY
from .._telemetry import Telemetry
from .._types import ACL, OPEN_ACL_UNSAFE, Stat, WatchEvent
from ._background import Background
from ._batch import Pipeline, Transaction
from ._connection import replies
from ._engine import SessionEngine, only_in_session, request_timeout
from ._nodes import OwnNode, Parents, find_protected
from ._options import DEFAULT_MAX_DATA_SIZE, Hosts, Settings, check_credential
from ._requests import ACLProvider, CreateOptions, RequestBuilder
from ._retry import RetryPolicy, call_with_retry, is_retryable
from ._sasl import SaslMechanism
from ._state import ConnectionState, ErrorPolicy
from ._stream import ChangeStream
from ._watch import PersistentWatch, Watch, WatchRegistry
from ._watching import Watcher

__all__ = ["Client", "check_client", "connect", "drop_connection", "hold_reconnects", "sasl_of"]

P = ParamSpec("P")
T = TypeVar("T")

ListenerCallback = Callable[[ConnectionState], object]


class Client:
    """A ZooKeeper session. Create with :func:`connect`; use as ``async with``.

    Paths given to a client are relative to its ``namespace`` (a path prefix
    applied on the client side, created on connect if missing).
    """

    def __init__(
        self,
        hosts: Hosts,
        *,
        namespace: str | None = None,
        session_timeout: float = 10.0,
        connect_timeout: float | None = None,
        request_timeout: float | None = None,
        start_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        auth: Sequence[tuple[str, str | bytes]] | None = None,
        sasl: SaslMechanism | None = None,
        read_only: bool = False,
        default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE,
        acl_provider: ACLProvider | None = None,
        max_data_size: int = DEFAULT_MAX_DATA_SIZE,
        ssl_context: ssl.SSLContext | None = None,
        error_policy: ErrorPolicy | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        settings = Settings(
            namespace=namespace,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            start_timeout=start_timeout,
            retry=retry,
            auth=auth,
            sasl=sasl,
            read_only=read_only,
            default_acl=default_acl,
            acl_provider=acl_provider,
            max_data_size=max_data_size,
            ssl_context=ssl_context,
            error_policy=error_policy,
            telemetry=telemetry,
        )
        self._start_timeout = settings.start_timeout
        self._requests = RequestBuilder(
            settings.namespace,
            settings.default_acl,
            settings.max_data_size,
            settings.acl_provider,
        )
        self._watches = WatchRegistry()
        self._engine = SessionEngine(hosts, settings, self._requests, self._watches)
        self._background = Background()
        self._watcher = Watcher(
            self._engine, self._requests, self._watches, lambda: self.retry_policy
        )
        self.retry_policy: RetryPolicy = settings.retry_policy()
        """The retry policy for :meth:`retry` and for recipes built on this client."""
        self.error_policy: ErrorPolicy = settings.resolved_error_policy()
        """Which connection states recipes treat as losing what they hold."""
        self.telemetry: Telemetry = settings.telemetry or DEFAULT_TELEMETRY
        """How recipes on this client label their metrics (docs/observability.md)."""

    # --- lifecycle ------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self, *, timeout: float | None = None) -> None:
        """Connect and wait for the first session (CONNECTED or READ_ONLY).

        Raises OperationTimeoutError (after closing) if no session was had within
        ``timeout`` seconds (default: the client's ``start_timeout``, else the
        session timeout), naming the last attempt's failure, and
        AuthFailedError if the server refused the credentials (``auth=`` or ``sasl=``).
        """
        if timeout is None:
            timeout = self._start_timeout
        else:
            check_seconds(timeout, "timeout", positive=True, allow_inf=True)
        await self._engine.start(timeout)

    async def aclose(self) -> None:
        """End the session (its ephemeral nodes go at once) and every background task."""
        try:
            await self._background.aclose()
        finally:
            await self._engine.aclose()

    # --- session facts --------------------------------------------------------

    @property
    def max_data_size(self) -> int:
        """The server's ``jute.maxbuffer``: the limit on node data and on each whole
        request (path, ACLs, headers, every operation of a transaction). Larger
        ones raise DataTooLargeError without being sent."""
        return self._requests.max_data_size

    @max_data_size.setter
    def max_data_size(self, value: int) -> None:
        check_int(value, "max_data_size", minimum=1, maximum=2**31 - 1)
        self._requests.max_data_size = value
        self._engine.set_max_request_size(value)

    @property
    def state(self) -> ConnectionState | None:
        """The last state reported (None before the first connection)."""
        return self._engine.state

    @property
    def connected(self) -> bool:
        """Whether a connection to a server is up now (requests go out at once)."""
        return self._engine.connected

    @property
    def closed(self) -> bool:
        """Whether the client was closed (by :meth:`aclose` or a failed :meth:`start`): a
        closed client cannot be started again."""
        return self._engine.closed

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, None if there is none."""
        return self._engine.client_id

    @property
    def session_id(self) -> int:
        """The current session's id, as ephemeral nodes' ``ephemeral_owner`` shows it;
        0 while there is none."""
        return self._engine.session_id

    @property
    def session_timeout(self) -> float:
        """The timeout the server granted (seconds); the requested one before connecting."""
        return self._engine.negotiated_timeout

    @property
    def connected_to(self) -> tuple[str, int] | None:
        """The server the connection goes to, if connected."""
        return self._engine.peer

    @property
    def hosts(self) -> list[tuple[str, int]]:
        """The servers the client may connect to, as ``(host, port)``."""
        return self._engine.hosts

    @property
    def namespace(self) -> str | None:
        """The path prefix applied to every path (``"/app"``), None without one."""
        return self._requests.prefix or None

    async def add_auth(self, scheme: str, credential: str | bytes) -> None:
        """Authenticate as one more identity (``("digest", "user:password")``), now
        and on every later connection, as ``auth=`` does.

        Sent at once (waiting for a connection, like any request); returns once
        the server accepted it, so requests made afterwards act as that identity
        too. Raises AuthFailedError if the server refused it (the client goes on
        without it; the server drops the connection, and the client reconnects
        with its other credentials).
        """
        scheme, value = check_credential(scheme, credential, name="add_auth")
        await self._engine.add_auth(scheme, value)

    def add_listener(self, callback: ListenerCallback) -> None:
        """Call ``callback(state)`` on every transition, in order, from the session task."""
        self._engine.states.add_listener(callback)

    def remove_listener(self, callback: ListenerCallback) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._engine.states.remove_listener(callback)

    def state_changes(self) -> ChangeStream[ConnectionState]:
        """Every state transition from now on, as an async iterator (ends on close)."""
        return self._engine.states.subscribe()

    async def wait_connected(self, *, timeout: float | None = None) -> bool:
        """Wait until connected; False if ``timeout`` passed first."""
        try:
            async with asyncio.timeout(check_timeout(timeout)):
                await self._engine.wait_for_session()
        except TimeoutError:
            return False
        return True

    def request_timeout(self, seconds: float | None) -> contextlib.AbstractContextManager[None]:
        """``with client.request_timeout(2.0):`` requests in the block (from this
        task and tasks it starts) wait at most that long for a connection, instead
        of the client's ``request_timeout``; None waits without bound. An
        enclosing deadline (``anyio.fail_after``, ``asyncio.timeout``) always
        cuts a wait shorter."""
        return request_timeout(check_timeout(seconds, "request timeout"))

    def only_in_session(self, session_id: int) -> contextlib.AbstractContextManager[None]:
        """``with client.only_in_session(sid):`` requests in the block (from this
        task and tasks it starts) go out only in session ``sid``; one that would
        go out in another raises SessionExpiredError, unsent.

        For deleting a node our session owns by a name others may use too (a
        queue's take marker): a delete that waited through a disconnection into a
        new session would remove a node another client made meanwhile.
        """
        return only_in_session(check_int(session_id, "session_id"))

    # --- for recipes -----------------------------------------------------------

    def start_background(
        self,
        coro: Coroutine[Any, Any, object],
        *,
        name: str,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> asyncio.Task[Any]:
        """Run a recipe's background work (a watcher, a batcher) for as long as
        the client lives: cancelled and awaited on close; a failure is logged
        and passed to ``on_error``."""
        return self._background.start(coro, name=name, on_error=on_error)

    def recipe_state(self, key: Hashable, factory: Callable[[], T]) -> T:
        """State every recipe object on this client shares under ``key`` (for
        example one batcher per counter path), made by ``factory`` on first use
        and dropped when the client closes."""
        return self._background.state(key, factory)

    @property
    def background_tasks(self) -> int:
        """How many background tasks recipes are running on this client (for leak checks)."""
        return len(self._background)

    # --- operations -------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        protected: bool = False,
        **options: Unpack[CreateOptions],
    ) -> str:
        """Create a node; return its path (with the sequence suffix, if sequential).

        ``options`` say what kind of node (:class:`CreateOptions`): ``acl``,
        ``ephemeral``, ``sequential``, ``container`` (removed by the server once
        its last child goes), ``ttl`` (seconds; a persistent node the server
        removes when it has had no children and no change for that long; needs
        TTL nodes enabled). ``make_parents`` creates missing ancestors, as
        containers with ``container_parents`` (which implies it). ``protected``
        survives a lost reply: see :meth:`create_with_stat`.
        """
        created, _stat = await self.create_with_stat(
            path,
            data,
            make_parents=make_parents,
            container_parents=container_parents,
            protected=protected,
            **options,
        )
        return created

    async def create_with_stat(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        protected: bool = False,
        **options: Unpack[CreateOptions],
    ) -> tuple[str, Stat]:
        """Like :meth:`create`, also returning the new node's Stat.

        With ``protected=True`` the node's name gets a unique ``_c_<uuid>-``
        prefix. If the connection drops before the reply arrives, the parent's
        children are searched for that prefix once the session is back: a create
        that reached the server is found, not made twice. Only if it is not
        there is the create sent again (under the client's retry policy).
        """
        for flag, name in (
            (make_parents, "make_parents"),
            (container_parents, "container_parents"),
            (protected, "protected"),
        ):
            if type(flag) is not bool:
                check_flag(flag, name, path=path)
        parents: Parents = "container" if container_parents else "plain" if make_parents else None
        if protected:
            _paths.validate_path(path, sequential=options.get("sequential", False))
            if path == "/":
                raise InvalidPathError(path, "the root node always exists")
            parent, name = path.rsplit("/", 1)
            node = OwnNode(
                self,
                parent or "/",
                name,
                data,
                parents=parents,
                retry_if=is_retryable,
                **options,
            )
            await node.create()
            assert node.path is not None and node.stat is not None
            return node.path, node.stat
        op = self._requests.create(path, data, **options)
        try:
            created, stat = await self._engine.call(op)
        except NoNodeError:
            if parents is None:
                raise
            await self.ensure_path(
                _paths.parent(path), container=parents == "container", acl=options.get("acl")
            )
            created, stat = await self._engine.call(op)
        return self._requests.user_path(created), stat

    async def find_protected(self, parent: str, marker: str) -> tuple[str, Stat] | None:
        """The node a protected create with ``marker`` made under ``parent``, if any.

        For recovery after a lost reply. If a retried create left more than one
        node with the marker, the lowest is kept and the others are deleted.
        """
        _paths.validate_path(parent)
        if not isinstance(marker, str) or not marker:
            raise ArgumentTypeError("marker", "a protected marker (a str)", marker, parent)
        return await find_protected(self, parent, marker)

    async def get(self, path: str) -> tuple[bytes, Stat]:
        """The node's data and Stat; NoNodeError if it does not exist."""
        result: tuple[bytes, Stat] = await self._engine.call(self._requests.get(path))
        return result

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        """Replace the node's data; with ``version`` >= 0 only if it still has that version."""
        stat: Stat = await self._engine.call(self._requests.set(path, data, version))
        return stat

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        """Delete the node (checking ``version`` if >= 0); ``recursive`` removes its subtree."""
        _paths.validate_path(path)
        if check_flag(recursive, "recursive", path=path):
            if version != -1:
                raise InvalidArgumentError(
                    "version", "cannot be checked on a recursive delete", path
                )
            await self.delete_recursive(path)
            return
        await self._engine.call(self._requests.delete(path, version))

    async def exists(self, path: str) -> Stat | None:
        """The node's Stat, or None if it does not exist."""
        try:
            stat: Stat = await self._engine.call(self._requests.exists(path))
        except NoNodeError:
            return None
        return stat

    async def children(self, path: str) -> list[str]:
        """The names of the node's children (unordered, as the server lists them)."""
        names, _stat = await self.children_with_stat(path)
        return names

    async def children_with_stat(self, path: str) -> tuple[list[str], Stat]:
        """The children's names and the parent's Stat, read atomically."""
        result: tuple[list[str], Stat] = await self._engine.call(self._requests.children(path))
        return result

    async def sync(self, path: str = "/") -> None:
        """Make the connected server catch up with the leader before later reads."""
        await self._engine.call(self._requests.sync(path))

    async def get_acl(self, path: str) -> tuple[list[ACL], Stat]:
        """The node's ACL and its Stat (``aversion`` counts ACL changes)."""
        result: tuple[list[ACL], Stat] = await self._engine.call(self._requests.get_acl(path))
        return result

    async def set_acl(self, path: str, acl: Sequence[ACL], *, version: int = -1) -> Stat:
        """Replace the node's ACL; with ``version`` >= 0 only if its ``aversion`` still
        matches. Needs the ADMIN permission on the node."""
        stat: Stat = await self._engine.call(self._requests.set_acl(path, acl, version))
        return stat

    async def ensure_path(
        self, path: str, *, container: bool = False, acl: Sequence[ACL] | None = None
    ) -> None:
        """Create ``path`` and any missing ancestors; existing nodes are left alone.

        Each node made gets ``acl`` (default: the client's ``acl_provider``'s
        answer for its path, else ``default_acl``).
        All creates go out at once (one round trip): ZooKeeper applies one
        session's requests in order, so each parent exists before its child's
        create is applied.
        """
        _paths.validate_path(path)
        if path == "/":
            return
        parts = path.strip("/").split("/")
        ops = [
            self._requests.create("/" + "/".join(parts[:i]), b"", container=container, acl=acl)
            for i in range(1, len(parts) + 1)
        ]
        conn = await self._engine.connection()
        self._engine.check_pinned_session()
        futures = conn.submit_all(ops)  # all or none: one too large sends none
        results = await replies(futures)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, NodeExistsError):
                raise result

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it; a missing node is not an error."""
        _paths.validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "refusing to delete the root")
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
        return Transaction(self._requests, self._engine)

    def pipeline(self) -> Pipeline:
        """A builder for requests sent back to back, without waiting between them.

        Not atomic, but ZooKeeper applies one session's requests in order: a
        read queued after a write sees that write. One round trip for all.
        """
        return Pipeline(self._requests, self._engine)

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
        if not callable(operation):
            raise ArgumentTypeError("operation", "an async callable", operation)
        return await call_with_retry(self.retry_policy, lambda: operation(*args, **kwargs))

    # --- watches ----------------------------------------------------------------

    async def watch_exists(self, path: str) -> tuple[Stat | None, Watch]:
        """The node's Stat (or None) and a watch that fires on its next create, change or delete."""
        return await self._watcher.exists(path)

    async def watch_data(self, path: str) -> tuple[bytes, Stat, Watch]:
        """The node's data and Stat, and a watch that fires on its next change or delete."""
        return await self._watcher.data(path)

    async def watch_children(self, path: str) -> tuple[list[str], Stat, Watch]:
        """The children's names, the parent's Stat, and a watch on the next child change."""
        return await self._watcher.children(path)

    async def add_watch(self, path: str, *, recursive: bool = False) -> PersistentWatch:
        """A persistent watch on ``path`` (ZooKeeper >= 3.6): every event until closed.

        ``recursive`` covers the node and everything below it (created, changed
        and deleted events; child events only come without it). Use as
        ``async with await client.add_watch(path) as watch: async for event in watch``.
        The node need not exist. Closing the last local watch on a path removes
        the server's watch too.
        """
        return await self._watcher.add(path, recursive=recursive)

    async def wait_changed(self, path: str, *, timeout: float | None = None) -> WatchEvent:
        """Wait for the next create, data change or delete of ``path``;
        OperationTimeoutError if ``timeout`` passed first.

        Changes made before the watch is set are not seen; to read a value and
        then wait for it to change without a gap, use :meth:`watch_data` or
        :meth:`data_changes`.
        """
        timeout = check_timeout(timeout)
        _stat, watch = await self.watch_exists(path)
        try:
            async with asyncio.timeout(timeout) as scope:
                return await watch
        except TimeoutError:
            if not scope.expired():
                raise  # not ours: an error of the wait itself
            raise OperationTimeoutError(f"{path!r} did not change in {timeout} s") from None
        finally:
            watch.cancel()

    def data_changes(self, path: str) -> ChangeStream[tuple[bytes, Stat] | None]:
        """The node's contents now and after every change: ``(data, stat)``, or None while
        it does not exist. Intermediate states may be skipped (the latest one is always
        seen); a lost session is ridden out. Ends when the client closes."""
        return ChangeStream(source=self._watcher.data_changes(path), name=f"data of {path!r}")

    def children_changes(self, path: str) -> ChangeStream[list[str] | None]:
        """The node's children (sorted) now and after every change; None while the node
        does not exist. Ends when the client closes."""
        return ChangeStream(
            source=self._watcher.children_changes(path), name=f"children of {path!r}"
        )

    @property
    def pending_watches(self) -> int:
        """How many local watch waiters are registered (for leak checks)."""
        return len(self._watches)

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.state.value if self.state else "new"
        ns = self._requests.prefix
        return f"<aiocoord.Client {state} session=0x{self.session_id:x} ns={ns!r}>"


def connect(
    hosts: Hosts,
    *,
    namespace: str | None = None,
    session_timeout: float = 10.0,
    connect_timeout: float | None = None,
    request_timeout: float | None = None,
    start_timeout: float | None = None,
    retry: RetryPolicy | None = None,
    auth: Sequence[tuple[str, str | bytes]] | None = None,
    sasl: SaslMechanism | None = None,
    read_only: bool = False,
    default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE,
    acl_provider: ACLProvider | None = None,
    max_data_size: int = DEFAULT_MAX_DATA_SIZE,
    ssl_context: ssl.SSLContext | None = None,
    error_policy: ErrorPolicy | None = None,
    telemetry: Telemetry | None = None,
) -> Client:
    """A client for ``hosts`` (``"h1:2181,h2:2181"``); use it as ``async with connect(...)``.

    Nothing happens until the ``async with`` (or ``await client.start()``).

    - ``namespace``: a path prefix applied to every path (created if missing).
    - ``session_timeout``: seconds the server keeps the session (and its
      ephemeral nodes) without hearing from the client; the server may adjust
      it. Default 10.
    - ``connect_timeout``: seconds one connection attempt (TCP, TLS, handshake)
      may take; default: the session timeout split over the hosts, at most 2 s.
    - ``request_timeout``: seconds a request waits for a connection before
      raising NoConnectionError; default: the session timeout.
    - ``start_timeout``: seconds ``start()`` (``async with``) waits for the
      first session; default: the session timeout.
    - ``retry``: the policy of :meth:`Client.retry` and of the recipes.
    - ``auth``: ``(scheme, credential)`` pairs such as ``("digest", "user:pw")``,
      sent on every connection (:meth:`Client.add_auth` adds more later).
    - ``sasl``: authenticate with SASL on every connection, before any request
      (:class:`SaslDigest`: DIGEST-MD5 user and password; :class:`SaslKerberos`:
      GSSAPI); the connection then holds the ACL identity ``sasl:<user>``.
      Refused credentials raise AuthFailedError; an ensemble that requires SASL
      of a client without it, SaslRequiredError. Either closes the client.
    - ``acl_provider``: called with a node's path (before the namespace) for
      every create without ``acl=``, recipes' and missing parents' included:
      the ACL list for it, or None for ``default_acl``. ``default_acl``
      (default: OPEN_ACL_UNSAFE) applies to creates without either, and to the
      namespace's own nodes.
    - ``read_only``: accept a server that lost its quorum (state READ_ONLY).
    - ``max_data_size``: the server's ``jute.maxbuffer`` (default ZooKeeper's).
    - ``ssl_context``: connect with TLS (to a ``secureClientPort``).
    - ``error_policy``: which states count as losing a lock or leadership.
    - ``telemetry``: how recipes label their OpenTelemetry metrics (names, paths),
      and whether requests are timed (``request_metrics``); see
      docs/observability.md. Spans and metrics need the ``otel`` extra and an
      application that configures an SDK.
    """
    return Client(
        hosts,
        namespace=namespace,
        session_timeout=session_timeout,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
        start_timeout=start_timeout,
        retry=retry,
        auth=auth,
        sasl=sasl,
        read_only=read_only,
        default_acl=default_acl,
        acl_provider=acl_provider,
        max_data_size=max_data_size,
        ssl_context=ssl_context,
        error_policy=error_policy,
        telemetry=telemetry,
    )


def drop_connection(client: Client) -> None:
    """Cut the client's socket abruptly, as a network failure would (see
    :func:`aiocoord.testing.drop_connection`)."""
    client._engine.drop_connection()


def sasl_of(client: Client) -> SaslMechanism | None:
    """The SASL mechanism ``client`` authenticates with (for
    :func:`aiocoord.testing.expire_session`, whose connection must too)."""
    return client._engine.sasl


def hold_reconnects(client: Client) -> contextlib.AbstractContextManager[None]:
    """Keep ``client`` from connecting while inside (for
    :func:`aiocoord.testing.expire_session`)."""
    return client._engine.hold_reconnects()


def check_client(client: object, path: object = None) -> Client:
    """``client`` if it is a :class:`Client`: what every recipe checks first, so a
    wrong argument fails at once and says so (not with an AttributeError later)."""
    if not isinstance(client, Client):
        raise ArgumentTypeError("client", "an aiocoord.Client", client, path)
    return client
