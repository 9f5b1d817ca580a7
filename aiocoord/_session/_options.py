"""A client's options: the keyword arguments of :func:`connect`, with their defaults."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from .._exceptions import InvalidConnectStringError
from .._types import ACL, OPEN_ACL_UNSAFE
from . import _zk
from ._retry import BoundedExponentialBackoff, RetryPolicy
from ._state import ErrorPolicy, StandardErrorPolicy

__all__ = ["DEFAULT_MAX_DATA_SIZE", "ClientOptions", "Settings", "parse_hosts"]

DEFAULT_MAX_DATA_SIZE = _zk.JUTE_MAXBUFFER
"""ZooKeeper's default ``jute.maxbuffer`` (just under 1 MiB)."""

Hosts = str | Sequence[str | tuple[str, int]]


class ClientOptions(TypedDict, total=False):
    """Keyword arguments of :func:`connect` and :class:`Client` (defaults in :class:`Settings`)."""

    namespace: str | None
    session_timeout: float
    connect_timeout: float | None
    request_timeout: float | None
    start_timeout: float | None
    retry: RetryPolicy | None
    auth: Sequence[tuple[str, str | bytes]] | None
    read_only: bool
    default_acl: Sequence[ACL]
    max_data_size: int
    ssl_context: ssl.SSLContext | None
    error_policy: ErrorPolicy | None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """:class:`ClientOptions` resolved: validated, with every default filled in."""

    namespace: str | None = None
    session_timeout: float = 10.0
    connect_timeout: float | None = None
    request_timeout: float | None = None
    start_timeout: float | None = None
    retry: RetryPolicy | None = None
    auth: Sequence[tuple[str, str | bytes]] | None = None
    read_only: bool = False
    default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE
    max_data_size: int = DEFAULT_MAX_DATA_SIZE
    ssl_context: ssl.SSLContext | None = None
    error_policy: ErrorPolicy | None = None
    credentials: list[tuple[str, bytes]] = field(init=False)

    def __post_init__(self) -> None:
        if self.session_timeout <= 0:
            raise ValueError("session_timeout must be positive")
        object.__setattr__(
            self,
            "credentials",
            [
                (scheme, cred.encode() if isinstance(cred, str) else bytes(cred))
                for scheme, cred in (self.auth or ())
            ],
        )

    def connect_timeout_for(self, host_count: int) -> float:
        """Seconds one connection attempt may take.

        A server answers a handshake in milliseconds. One that accepted the
        socket but stays silent (seen from a server still starting up) must not
        hold the client for a whole session timeout: the default is capped at 2 s.
        """
        if self.connect_timeout is not None:
            return float(self.connect_timeout)
        return max(0.5, min(2.0, self.session_timeout / host_count))

    def request_timeout_or_default(self) -> float:
        """How long a request waits for a connection: by default one session
        timeout, the longest a session can outlive its last connection."""
        if self.request_timeout is None:
            return self.session_timeout
        if self.request_timeout <= 0:
            raise ValueError("request_timeout must be positive")
        return float(self.request_timeout)

    def retry_policy(self) -> RetryPolicy:
        return self.retry or BoundedExponentialBackoff()

    def resolved_error_policy(self) -> ErrorPolicy:
        return self.error_policy or StandardErrorPolicy()


def parse_hosts(hosts: Hosts) -> list[tuple[str, int]]:
    """``"h1:2181,h2"`` or ``[("h1", 2181), "h2:2181"]`` as (host, port) pairs."""
    items: list[str | tuple[str, int]]
    if isinstance(hosts, str):
        if "/" in hosts:
            raise InvalidConnectStringError(
                hosts, "a chroot in the connect string is not supported: use namespace="
            )
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
        if not port.isdigit() or not 0 < int(port) < 65536 or not host.strip("[]"):
            raise InvalidConnectStringError(hosts, f"{item!r} is not host:port")
        parsed.append((host.strip("[]"), int(port)))
    if not parsed:
        raise InvalidConnectStringError(hosts, "no ZooKeeper hosts given")
    return parsed
