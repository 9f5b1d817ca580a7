"""Layer 1: the session. The only package that talks to aiozk or the wire.

Recipes (layer 2) import from this package, never from its modules. What
they may use:

- :class:`Client` and what it returns: :class:`Transaction` (with
  :class:`Fence` guards), :class:`Pipeline`, :class:`Watch`,
  :class:`PersistentWatch`. Background work goes through
  ``Client.start_background`` (never a bare ``create_task``) and state
  shared by a client's recipe objects through ``Client.recipe_state``.
- States: :class:`ConnectionState`, :class:`ErrorPolicy`; fan-out of values
  to listeners and streams: :class:`Broadcast`, :class:`ChangeStream` (the one
  stream type every ``changes()``/``events()`` returns).
- A recipe's own nodes: :class:`OwnNode` (protected create, optionally with a
  listing in the same round trip, and a sure delete), and the helpers around
  it: :func:`retry_on_connection_loss`, :func:`run_cleanup`,
  :func:`delete_quietly`, :func:`protected_marker`; :func:`track_sends`
  tells whether a block wrote anything at all (nothing to clean up if not).
- Retries: :class:`RetryPolicy` and its kinds, :func:`call_with_retry`.
- Argument checks of the session's own types: :func:`check_client`,
  :func:`check_error_policy` (the others are in ``aiocoord._checks``).

The modules' other names are the session's own. The test kit (layer 3) may
also use the wire-level ``_connection`` and ``_zk`` modules to act as a
second client (session expiry).
"""

from ._batch import Fence, Pipeline, Transaction
from ._client import (
    Client,
    check_client,
    connect,
    drop_connection,
    hold_reconnects,
    sasl_of,
)
from ._connection import SendRecord, track_sends
from ._engine import authenticate
from ._nodes import (
    PROTECTED_PREFIX,
    OwnNode,
    cleanup_bound,
    delete_quietly,
    find_protected,
    protected_marker,
    retry_on_connection_loss,
    run_cleanup,
)
from ._options import DEFAULT_MAX_DATA_SIZE, ClientOptions
from ._requests import CreateOptions
from ._retry import (
    BoundedExponentialBackoff,
    ExponentialBackoff,
    RetryForever,
    RetryNTimes,
    RetryPolicy,
    RetryUntilElapsed,
    call_with_retry,
    is_retryable,
)
from ._sasl import SaslDigest, SaslExchange, SaslMechanism
from ._state import (
    ConnectionState,
    ErrorPolicy,
    SessionErrorPolicy,
    StandardErrorPolicy,
    check_error_policy,
)
from ._stream import Broadcast, ChangeStream, end_stream
from ._watch import PersistentWatch, Watch, WatchKind

__all__ = [
    "DEFAULT_MAX_DATA_SIZE",
    "PROTECTED_PREFIX",
    "BoundedExponentialBackoff",
    "Broadcast",
    "ChangeStream",
    "Client",
    "ClientOptions",
    "ConnectionState",
    "CreateOptions",
    "ErrorPolicy",
    "ExponentialBackoff",
    "Fence",
    "OwnNode",
    "PersistentWatch",
    "Pipeline",
    "RetryForever",
    "RetryNTimes",
    "RetryPolicy",
    "RetryUntilElapsed",
    "SaslDigest",
    "SaslExchange",
    "SaslMechanism",
    "SendRecord",
    "SessionErrorPolicy",
    "StandardErrorPolicy",
    "Transaction",
    "Watch",
    "WatchKind",
    "authenticate",
    "call_with_retry",
    "check_client",
    "check_error_policy",
    "cleanup_bound",
    "connect",
    "delete_quietly",
    "drop_connection",
    "end_stream",
    "find_protected",
    "hold_reconnects",
    "is_retryable",
    "protected_marker",
    "retry_on_connection_loss",
    "run_cleanup",
    "sasl_of",
    "track_sends",
]
