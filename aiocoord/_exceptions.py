"""The whole error hierarchy of aiocoord.

Everything the library raises on purpose derives from :class:`CoordinationError`.
ZooKeeper reply codes map to one class each (:func:`error_for_code`); the wire
library's own exceptions never reach users.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIError",
    "ArgumentTypeError",
    "AuthFailedError",
    "BadArgumentsError",
    "BadVersionError",
    "BarrierBrokenError",
    "BoundExceededError",
    "ClientClosedError",
    "ConnectionLossError",
    "CoordinationError",
    "CorruptValueError",
    "CounterOverflowError",
    "DataInconsistencyError",
    "DataTooLargeError",
    "DeadlockError",
    "DetachedAcquireError",
    "EphemeralOnLocalSessionError",
    "HoldLostError",
    "InvalidACLError",
    "InvalidArgumentError",
    "InvalidConnectStringError",
    "InvalidPathError",
    "LeadershipLostError",
    "LeaseHeldError",
    "LockLostError",
    "MarshallingError",
    "MemberIdInUseError",
    "MissingExtraError",
    "NewConfigNoQuorumError",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoConnectionError",
    "NoNodeError",
    "NoWatcherError",
    "NodeExistsError",
    "NotEmptyError",
    "NotOwnerError",
    "NotReadOnlyError",
    "OperationTimeoutError",
    "OutcomeUnknownError",
    "OwnershipError",
    "PartitionLostError",
    "QueueEmptyError",
    "QuotaExceededError",
    "RecipeClosedError",
    "ReconfigDisabledError",
    "ReconfigInProgressError",
    "RolledBackError",
    "RuntimeInconsistencyError",
    "SaslRequiredError",
    "ServerOperationTimeoutError",
    "ServerRequestTimeoutError",
    "SessionError",
    "SessionExpiredError",
    "SessionMovedError",
    "SystemZooKeeperError",
    "TLSCertificateError",
    "TTLNodesDisabledError",
    "TakeLostError",
    "ThrottledError",
    "UnimplementedError",
    "UnsupportedEventLoopError",
    "ZooKeeperError",
    "error_for_code",
]


class CoordinationError(Exception):
    """Root of every error aiocoord raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's default pickling calls ``cls(*self.args)``, which fits
        # none of the constructors here (they take a path and build the
        # message): restore the message and attributes as they are instead.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(
    cls: type[CoordinationError], args: tuple[Any, ...], state: dict[str, Any]
) -> CoordinationError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


# --- session and connection -------------------------------------------------


class SessionError(CoordinationError):
    """The request could not complete because of the connection or the session."""


class ConnectionLossError(SessionError):
    """The connection to the server dropped.

    ``sent`` tells whether the request had already been written to the server:
    when it had, the server may or may not have applied it, and nobody can know
    which without reading state back. aiocoord never re-sends such a request.
    """

    def __init__(self, message: str = "connection to ZooKeeper lost", *, sent: bool = False):
        super().__init__(message)
        self.sent = sent


class NoConnectionError(ConnectionLossError):
    """No connection to ZooKeeper could be had within the request timeout, so the
    request was never sent (``sent`` is False).

    Not retried by the retry policies: the wait already lasted as long as the
    caller allowed. ``waited`` says how long, and ``__cause__`` (also in the
    message) why the last connection attempt failed.
    """

    def __init__(self, waited: float, reason: str = ""):
        detail = f": {reason}" if reason else ""
        super().__init__(f"no connection to ZooKeeper within {waited:g} s{detail}", sent=False)
        self.waited = waited


class SessionExpiredError(SessionError):
    """The session ended on the server: its ephemeral nodes and watches are gone."""


class ClientClosedError(SessionError):
    """The client was closed by its owner."""


class RecipeClosedError(CoordinationError, RuntimeError):
    """The recipe object was closed (``aclose()``): a ``start()`` under way when it
    was closed, or one called after, raises this (as anyio's ClosedResourceError
    for a closed stream). A task cancelled by its own caller raises CancelledError
    as usual."""


class UnsupportedEventLoopError(CoordinationError, RuntimeError):
    """aiocoord runs on asyncio (also as anyio's asyncio backend); trio and other
    event loops are not supported."""


class MissingExtraError(CoordinationError, ImportError):
    """An optional dependency is not installed; the message names the extra to install
    (``pip install 'aiocoord[<extra>]'``). ``extra`` and ``package`` name them."""

    def __init__(self, message: str, *, extra: str, package: str) -> None:
        super().__init__(message)
        self.name = package
        self.extra = extra
        self.package = package


class TLSCertificateError(CoordinationError):
    """The server's TLS certificate was refused: the client's ``ssl_context`` does not
    trust its issuer, or it does not name the host connected to.

    Raised by :meth:`~aiocoord.Client.start` once every host refused its
    certificate this way, without waiting for the start timeout: no retry
    could help, it needs another certificate or another ``ssl_context``. The
    client is closed (as after AuthFailedError). ``hosts`` lists the refused
    servers; ``__cause__`` is the handshake's error.
    """

    def __init__(self, hosts: str, reason: str):
        super().__init__(
            f"the TLS certificate of {hosts} was not trusted ({reason}): give "
            "ssl_context the CA that issued it, and connect by a name it carries"
        )
        self.hosts = hosts
        self.reason = reason


class OperationTimeoutError(CoordinationError, TimeoutError):
    """A deadline given to aiocoord (``timeout=``) passed before the work was done."""


class QueueEmptyError(OperationTimeoutError):
    """A queue had no item to give: at once (``get_nowait``, ``peek``), or within
    the ``timeout`` a ``get`` or ``take`` was given."""

    def __init__(self, path: str, timeout: float | None = None):
        within = f"within {timeout:g} s" if timeout else "now"
        super().__init__(f"queue {path!r} had no item {within}")
        self.path = path
        self.timeout = timeout


class OutcomeUnknownError(ConnectionLossError):
    """The connection dropped after a write was sent and before its reply came.

    The write may or may not have been applied; nobody can know without
    another source of truth. aiocoord never reports such a call as succeeded
    or failed.
    """

    def __init__(self, path: str):
        super().__init__(f"write to {path!r} may or may not have been applied", sent=True)
        self.path = path


# --- ownership ----------------------------------------------------------------


class OwnershipError(CoordinationError):
    """Something that must be held (a lock, a lease, leadership) is not held."""


class NotOwnerError(OwnershipError):
    """The caller does not hold what it tried to use or release.

    Locks are owned by the asyncio task that acquired them: another task of
    the same process is not the owner.
    """


class HoldLostError(OwnershipError):
    """What was held is gone: a lock, a lease, leadership or a queue take.

    Catch it to handle every kind of loss at once; each holder raises its own
    subclass (:class:`LockLostError`, :class:`LeadershipLostError`,
    :class:`TakeLostError`). ``path`` names what was held, ``reason`` says
    why it was lost (the session ended, the connection was suspended, its node
    was deleted, a lease lapsed).
    """

    _what = "the hold on"

    def __init__(self, path: str, reason: str = "the session was lost"):
        super().__init__(f"lost {self._what} {path!r}: {reason}")
        self.path = path
        self.reason = reason


class LockLostError(HoldLostError):
    """A lock or lease was lost while held (session loss, per the error policy, or expiry).

    Raised for :class:`~aiocoord.Mutex`, both sides of a read-write lock, the
    semaphores' leases and :class:`~aiocoord.Lease`.
    """

    _what = "the lock on"


class LeaseHeldError(OwnershipError):
    """The lease is held by another holder (``async with lease`` could not take it)."""

    def __init__(self, path: str):
        super().__init__(f"the lease {path!r} is held by another holder")
        self.path = path


class LeadershipLostError(HoldLostError):
    """Leadership ended while its holder was acting as leader.

    Raised on leaving a leadership block after a loss: the connection entered
    a state the error policy calls an error, the session expired, or the
    leader's node was deleted by someone else.
    """

    _what = "leadership of"


class TakeLostError(HoldLostError):
    """A queue take (:meth:`Queue.take <aiocoord.Queue.take>`) lost its item while working
    on it: its marker went with the session, or the connection entered a state the
    error policy calls an error. The item goes back to the queue for another
    consumer; ``path`` is the item's node.
    """

    _what = "the take of"


class PartitionLostError(HoldLostError):
    """A :class:`~aiocoord.Partitioner` member no longer owns an item: its claim went
    with the session, was given back in a rebalance, or the connection entered a
    state the error policy calls an error. Raised by a transaction guarded by the
    item's fence; ``path`` is the item's claim node.
    """

    _what = "the partition item"


class MemberIdInUseError(OwnershipError):
    """Another live session already holds this group member id."""

    def __init__(self, path: str):
        super().__init__(f"the member id {path!r} is held by another session")
        self.path = path


class BarrierBrokenError(CoordinationError):
    """A barrier's protocol cannot go on: this participant's node vanished under it.

    Raised by a double barrier's enter or leave when our participant node was
    taken away (its session expired, or another client deleted it): passing
    or waiting on would break the barrier's promise to the others.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"barrier {path!r} broken: {reason}")
        self.path = path
        self.reason = reason


class DeadlockError(CoordinationError, RuntimeError):
    """The request could never be granted (upgrading a read lock to the write lock)."""


class DetachedAcquireError(CoordinationError, RuntimeError):
    """A lock that belongs to the task that acquires it was acquired by a task that
    runs nothing but that ``acquire()``: ``asyncio.create_task(lock.acquire())``,
    ``asyncio.ensure_future``, or ``asyncio.wait_for`` on Python 3.11 (which runs its
    argument in a task of its own). That task ends as soon as it holds, so nobody could
    use the lock; it is refused before any node is created.
    """

    def __init__(self, subject: str):
        super().__init__(
            f"{subject}: acquire() ran as a task of its own (asyncio.create_task, "
            "ensure_future, or asyncio.wait_for on Python 3.11), but the lock belongs to "
            "the task that acquires it and that task ends when acquire() returns. Await "
            "acquire() in the task that uses the lock; for a deadline use "
            "acquire(timeout=...) or asyncio.timeout()"
        )
        self.subject = subject


# --- input ------------------------------------------------------------------


class InvalidConnectStringError(CoordinationError, ValueError):
    """The hosts given to :func:`~aiocoord.connect` are not ``host:port`` pairs."""

    def __init__(self, hosts: object, reason: str):
        super().__init__(f"bad ZooKeeper hosts {hosts!r}: {reason}")
        self.hosts = hosts


class InvalidPathError(CoordinationError, ValueError):
    """A znode path breaks ZooKeeper's rules; nothing was sent."""

    def __init__(self, path: object, reason: str):
        super().__init__(f"invalid znode path {path!r}: {reason}")
        self.path = path
        self.reason = reason


def _for_path(path: object) -> str:
    return "" if path is None else f" for {path!r}"


class ArgumentTypeError(CoordinationError, TypeError):
    """An argument of the wrong type (a float count, a str where bytes go, a tuple
    where an ACL goes); nothing was sent.

    ``argument`` names it; ``path`` is the znode path it was meant for, if any.
    """

    def __init__(self, argument: str, expected: str, value: object, path: object = None):
        where = "" if path is None else f" (for {path!r})"
        super().__init__(f"{argument} must be {expected}, not {type(value).__name__}{where}")
        self.argument = argument
        self.expected = expected
        self.path = path


class InvalidArgumentError(CoordinationError, ValueError):
    """An argument of the right type but a refused value (a count below 1, a NaN or
    negative timeout, an empty ACL); nothing was sent.

    ``argument`` names it; ``path`` is the znode path it was meant for, if any.
    """

    def __init__(self, argument: str, reason: str, path: object = None):
        super().__init__(f"bad {argument}{_for_path(path)}: {reason}")
        self.argument = argument
        self.path = path
        self.reason = reason


class DataTooLargeError(CoordinationError, ValueError):
    """Node data, or a whole request, is larger than the server accepts; nothing was sent.

    ``limit`` is the client's ``max_data_size`` (the server's ``jute.maxbuffer``).
    For node data, ``size`` is the data's length. For a whole request
    (``request`` true: data plus path, ACLs and headers, or all the operations of
    a transaction), ``size`` is its encoded length as the server measures it
    (everything after the 4-byte length prefix); ``path`` is None for a
    transaction. Sending such a request would only make the server drop the
    connection, so the client refuses it instead: it is not a connection loss
    and is never retried.
    """

    def __init__(self, path: str | None, size: int, limit: int, *, request: bool = False):
        if request:
            about = "" if path is None else f" for {path!r}"
            message = (
                f"request{about} of {size} bytes exceeds the server's limit of {limit} "
                "(max_data_size, the server's jute.maxbuffer)"
            )
        else:
            message = f"data for {path!r} is {size} bytes, over the limit of {limit}"
        super().__init__(message)
        self.path = path
        self.size = size
        self.limit = limit
        self.request = request


class CorruptValueError(CoordinationError, ValueError):
    """A node holds bytes that are not a valid value for the recipe reading it."""

    def __init__(self, path: str, data: bytes, expected: str):
        super().__init__(f"{path!r} holds {data[:32]!r} ({len(data)} bytes), not {expected}")
        self.path = path
        self.data = data


# --- counters -----------------------------------------------------------------


class CounterOverflowError(CoordinationError, OverflowError):
    """The result would not fit the counter's integer width; nothing was written."""


class BoundExceededError(CoordinationError):
    """A bounded change was refused: it would have left ``[lower, upper]``."""

    def __init__(self, path: str, value: int, delta: int, lower: int | None, upper: int | None):
        super().__init__(
            f"{path!r}: {value} {'+' if delta >= 0 else '-'} {abs(delta)} leaves "
            f"[{'-inf' if lower is None else lower}, {'+inf' if upper is None else upper}]"
        )
        self.path = path
        self.value = value
        self.delta = delta


# --- ZooKeeper reply codes --------------------------------------------------


class ZooKeeperError(CoordinationError):
    """The server answered a request with an error code.

    ``path`` is the request's path (namespace removed) when it has one;
    ``op_index`` is the position of the failing operation in a transaction.
    """

    code: int = 0
    default_message = "ZooKeeper error"

    def __init__(self, path: str | None = None, *, op_index: int | None = None):
        self.path = path
        self.op_index = op_index
        text = self.default_message
        if path is not None:
            text = f"{text}: {path}"
        if op_index is not None:
            text = f"{text} (transaction operation {op_index})"
        super().__init__(text)


class SystemZooKeeperError(ZooKeeperError):
    """The server failed internally (SYSTEMERROR)."""

    code = -1
    default_message = "server system error"


class RuntimeInconsistencyError(ZooKeeperError):
    """A transaction operation not tried because an earlier one failed (RUNTIMEINCONSISTENCY)."""

    code = -2
    default_message = "runtime inconsistency (an earlier operation of the transaction failed)"


class DataInconsistencyError(ZooKeeperError):
    """The server found its data inconsistent (DATAINCONSISTENCY)."""

    code = -3
    default_message = "data inconsistency"


class MarshallingError(ZooKeeperError):
    """The server could not decode or encode the request (MARSHALLINGERROR)."""

    code = -5
    default_message = "marshalling error"


class UnimplementedError(ZooKeeperError):
    """The server does not implement the request, or has it switched off (UNIMPLEMENTED):
    an older server, or a feature that needs enabling."""

    code = -6
    default_message = "operation not implemented or not enabled on this server"


class TTLNodesDisabledError(UnimplementedError):
    """The server refuses TTL nodes: start it with ``-Dzookeeper.extendedTypesEnabled=true``."""

    default_message = (
        "TTL nodes are disabled on this server (start it with "
        "-Dzookeeper.extendedTypesEnabled=true)"
    )


class ServerOperationTimeoutError(ZooKeeperError):
    """The server timed the operation out (OPERATIONTIMEOUT)."""

    code = -7
    default_message = "server-side operation timeout"


class BadArgumentsError(ZooKeeperError):
    """The server refused the request's arguments (BADARGUMENTS), such as a TTL out of range."""

    code = -8
    default_message = "bad arguments"


class APIError(ZooKeeperError):
    """The reply carried ZooKeeper's generic APIERROR code, which servers do not normally send."""

    code = -100
    default_message = "API error"


class NoNodeError(ZooKeeperError):
    """The node does not exist (NONODE); for a create, its parent does not."""

    code = -101
    default_message = "no such node"


class NoAuthError(ZooKeeperError):
    """The node's ACL does not grant this connection's identities the operation (NOAUTH)."""

    code = -102
    default_message = "not authorized"


class BadVersionError(ZooKeeperError):
    """The node is no longer at the version the write, delete or check named (BADVERSION):
    someone changed it first."""

    code = -103
    default_message = "version does not match"


class NoChildrenForEphemeralsError(ZooKeeperError):
    """A create under an ephemeral node (NOCHILDRENFOREPHEMERALS): they cannot have children."""

    code = -108
    default_message = "ephemeral nodes may not have children"


class NodeExistsError(ZooKeeperError):
    """A create found the path already taken (NODEEXISTS)."""

    code = -110
    default_message = "node already exists"


class NotEmptyError(ZooKeeperError):
    """A delete of a node that still has children (NOTEMPTY); ``recursive=True`` takes them too."""

    code = -111
    default_message = "node has children"


class InvalidACLError(ZooKeeperError):
    """The server refused the ACL (INVALIDACL): empty, malformed, or ``auth`` with no
    authenticated identity."""

    code = -114
    default_message = "invalid ACL"


class AuthFailedError(ZooKeeperError):
    """The server refused the client's credentials (AUTHFAILED), those of ``auth=``
    or of ``sasl=``, or the SASL exchange could not complete: the client stops for
    good (retrying would be refused the same way). Credentials given to
    ``add_auth()`` and refused are not kept, and the client goes on.

    ``scheme`` names the refused ``auth`` scheme, ``mechanism`` the SASL mechanism
    (``"DIGEST-MD5"``, ``"GSSAPI"``), ``reason`` what is known of the cause. A
    ZooKeeper server does not tell an unknown SASL user from a wrong password: it
    answers both with an error code and closes the connection. The message never
    holds a credential.
    """

    code = -115
    default_message = "authentication failed"

    def __init__(
        self,
        path: str | None = None,
        *,
        op_index: int | None = None,
        scheme: str | None = None,
        mechanism: str | None = None,
        reason: str | None = None,
        runtime: bool = False,
    ):
        super().__init__(path, op_index=op_index)
        self.scheme = scheme
        """The ``auth`` scheme whose credentials were refused, when known."""
        self.mechanism = mechanism
        """The SASL mechanism whose authentication failed, when it was SASL."""
        self.reason = reason
        """What is known of the cause, when anything is."""
        if mechanism is not None:
            detail = f": {reason}" if reason else ""
            self.args = (f"SASL authentication ({mechanism}) failed{detail}; the client is closed",)
        elif scheme is not None and not runtime:
            self.args = (
                f"authentication failed: the server refused the {scheme!r} credentials "
                "given in auth= (AUTHFAILED); the client is closed",
            )
        elif scheme is not None:
            self.args = (
                f"authentication failed: the server refused the {scheme!r} credentials "
                "given to add_auth() (AUTHFAILED); they are not kept",
            )


class SessionMovedError(ZooKeeperError):
    """The session has since connected to another server, so this one ignored the request
    (SESSIONMOVED)."""

    code = -118
    default_message = "session moved to another server"


class NotReadOnlyError(ZooKeeperError):
    """A write sent to a read-only server (NOTREADONLY): one cut off from its quorum."""

    code = -119
    default_message = "write refused: server is read-only"


class EphemeralOnLocalSessionError(ZooKeeperError):
    """An ephemeral create in a local session (EPHEMERALONLOCALSESSION): a server with
    ``localSessionsEnabled`` and without ``localSessionsUpgradingEnabled``."""

    code = -120
    default_message = "ephemeral nodes cannot be created in a local session"


class NoWatcherError(ZooKeeperError):
    """A watch removal found no such watch on the server (NOWATCHER)."""

    code = -121
    default_message = "no such watcher"


class ServerRequestTimeoutError(ZooKeeperError):
    """The server dropped the request after its ``zookeeper.request.timeout``
    (REQUESTTIMEOUT): it may or may not have been applied."""

    code = -122
    default_message = "the server timed the request out"


class ReconfigDisabledError(ZooKeeperError):
    """A dynamic reconfiguration on an ensemble that has it switched off
    (RECONFIGDISABLED: ``reconfigEnabled=false``)."""

    code = -123
    default_message = "dynamic reconfiguration is disabled on this ensemble"


class SaslRequiredError(ZooKeeperError):
    """The ensemble requires SASL authentication and this client has none
    (SESSIONCLOSEDREQUIRESASLAUTH: ``zookeeper.sessionRequireClientSASLAuth=true``).

    The server closed the connection; the client is closed too, since every
    reconnection would be refused the same way. Connect with ``sasl=`` (such as
    :class:`~aiocoord.SaslDigest`). A client that tried SASL and was refused gets
    :class:`AuthFailedError` instead.
    """

    code = -124
    default_message = (
        "the ensemble requires SASL authentication and this client has none "
        "(connect with sasl=aiocoord.SaslDigest(...)); the client is closed"
    )


class QuotaExceededError(ZooKeeperError):
    """The write would break a hard quota set on a parent path (QUOTAEXCEEDED,
    ``setquota`` with ``zookeeper.enforceQuota=true``); nothing was written."""

    code = -125
    default_message = "quota exceeded"


class ThrottledError(ZooKeeperError):
    """The server shed the request under load (THROTTLEDOP): nothing was applied,
    and the same request may succeed a little later."""

    code = -127
    default_message = "request throttled by the server"


class NewConfigNoQuorumError(ZooKeeperError):
    """A reconfiguration's new configuration has no quorum of connected followers
    (NEWCONFIGNOQUORUM)."""

    code = -13
    default_message = "the new configuration has no quorum"


class ReconfigInProgressError(ZooKeeperError):
    """Another reconfiguration is under way (RECONFIGINPROGRESS)."""

    code = -14
    default_message = "another reconfiguration is in progress"


class RolledBackError(ZooKeeperError):
    """This operation of a transaction was fine, but another one failed, so none applied."""

    code = 0
    default_message = "rolled back because another operation of the transaction failed"


_CODES: dict[int, type[ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        SystemZooKeeperError,
        RuntimeInconsistencyError,
        DataInconsistencyError,
        MarshallingError,
        UnimplementedError,
        ServerOperationTimeoutError,
        BadArgumentsError,
        APIError,
        NoNodeError,
        NoAuthError,
        BadVersionError,
        NoChildrenForEphemeralsError,
        NodeExistsError,
        NotEmptyError,
        InvalidACLError,
        AuthFailedError,
        SessionMovedError,
        NotReadOnlyError,
        EphemeralOnLocalSessionError,
        NoWatcherError,
        ServerRequestTimeoutError,
        ReconfigDisabledError,
        SaslRequiredError,
        QuotaExceededError,
        ThrottledError,
        NewConfigNoQuorumError,
        ReconfigInProgressError,
        RolledBackError,
    )
}

# Codes that describe the session rather than the request.
CONNECTION_LOSS_CODE = -4
SESSION_EXPIRED_CODE = -112
UNKNOWN_SESSION_CODE = -12
SASL_REQUIRED_CODE = SaslRequiredError.code
"""The server no longer knows the session the request came in (it was just closed
or expired): nothing was applied, and the session is gone."""


def error_for_code(code: int, path: str | None = None, *, op_index: int | None = None) -> Exception:
    """The exception for a ZooKeeper reply code (``code`` must not be 0 outside a transaction)."""
    if code == CONNECTION_LOSS_CODE:
        return ConnectionLossError(f"server reported connection loss for {path!r}", sent=True)
    if code == SESSION_EXPIRED_CODE:
        return SessionExpiredError(f"session expired (request on {path!r})")
    if code == UNKNOWN_SESSION_CODE:
        return SessionExpiredError(f"the server no longer knows the session (request on {path!r})")
    cls = _CODES.get(code)
    if cls is None:
        error = ZooKeeperError(path, op_index=op_index)
        error.code = code
        error.args = (f"ZooKeeper error code {code}" + (f": {path}" if path else ""),)
        return error
    return cls(path, op_index=op_index)
