"""Connection states, as Curator names them, and the policy that decides which are errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .._exceptions import ArgumentTypeError

__all__ = [
    "ConnectionState",
    "ErrorPolicy",
    "SessionErrorPolicy",
    "StandardErrorPolicy",
    "check_error_policy",
]


class ConnectionState(enum.Enum):
    """Where the client's link to ZooKeeper stands.

    The sequence is always one of: CONNECTED (or READ_ONLY) first; then
    SUSPENDED when the connection drops; RECONNECTED when the same session is
    back; LOST when the session is gone, followed by CONNECTED once a new
    session is up. No state is skipped or repeated.
    """

    CONNECTED = "connected"
    """A new session is established (the first one, or a new one after LOST)."""
    SUSPENDED = "suspended"
    """The connection dropped; the session may still be alive on the server."""
    RECONNECTED = "reconnected"
    """The same session is connected again: ephemeral nodes and watches survived."""
    LOST = "lost"
    """The session expired: its ephemeral nodes and watches are gone."""
    READ_ONLY = "read_only"
    """Connected to a server that lost its quorum and serves reads only."""

    @property
    def is_connected(self) -> bool:
        """True for the states in which requests can be served (reads only, in READ_ONLY)."""
        return self in (
            ConnectionState.CONNECTED,
            ConnectionState.RECONNECTED,
            ConnectionState.READ_ONLY,
        )


class ErrorPolicy:
    """Decides which connection states end what a recipe holds (a lock, leadership)."""

    def is_error_state(self, state: ConnectionState) -> bool:
        """Whether entering ``state`` means holders must assume they lost what they hold."""
        raise NotImplementedError


def check_error_policy(policy: object, path: object = None) -> ErrorPolicy | None:
    """``policy`` if it is an :class:`ErrorPolicy` or None (the client's, for a recipe)."""
    if policy is not None and not isinstance(policy, ErrorPolicy):
        raise ArgumentTypeError("error_policy", "an aiocoord.ErrorPolicy or None", policy, path)
    return policy


@dataclass(frozen=True)
class StandardErrorPolicy(ErrorPolicy):
    """SUSPENDED and LOST are both errors: the safe choice.

    While suspended, nobody can tell whether the session is still alive, so a
    lock holder must assume it may have lost the lock.
    """

    def is_error_state(self, state: ConnectionState) -> bool:
        """True for SUSPENDED and LOST."""
        return state in (ConnectionState.SUSPENDED, ConnectionState.LOST)


@dataclass(frozen=True)
class SessionErrorPolicy(ErrorPolicy):
    """Only LOST is an error: holders ride out short disconnections.

    Cheaper during network blips, but between the disconnection and the
    client learning of expiry another process may already hold the lock.
    """

    def is_error_state(self, state: ConnectionState) -> bool:
        """True for LOST only."""
        return state is ConnectionState.LOST
