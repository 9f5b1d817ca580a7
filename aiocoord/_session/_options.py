"""A client's options: the keyword arguments of :func:`connect`, with their defaults."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from .._checks import check_bytes, check_flag, check_int, check_seconds
from .._exceptions import ArgumentTypeError, InvalidArgumentError, InvalidConnectStringError
from .._telemetry import Telemetry
from .._types import ACL, OPEN_ACL_UNSAFE
from . import _zk
from ._requests import ACLProvider
from ._retry import BoundedExponentialBackoff, RetryPolicy
from ._sasl import SaslMechanism
from ._state import ErrorPolicy, StandardErrorPolicy, check_error_policy

__all__ = [
    "DEFAULT_MAX_DATA_SIZE",
    "ClientOptions",
    "Settings",
    "check_credential",
    "parse_hosts",
]

DEFAULT_MAX_DATA_SIZE = _zk.JUTE_MAXBUFFER
"""ZooKeeper's default ``jute.maxbuffer`` (just under 1 MiB)."""

Hosts = str | Sequence[str | tuple[str, int]]


class ClientOptions(TypedDict, total=False):
    """The keyword arguments of :func:`connect` and :class:`Client`, as a type for
    a dict of them (``connect(hosts, **options)``); defaults in :class:`Settings`."""

    namespace: str | None
    session_timeout: float
    connect_timeout: float | None
    request_timeout: float | None
    start_timeout: float | None
    retry: RetryPolicy | None
    auth: Sequence[tuple[str, str | bytes]] | None
    sasl: SaslMechanism | None
    read_only: bool
    default_acl: Sequence[ACL]
    acl_provider: ACLProvider | None
    max_data_size: int
    ssl_context: ssl.SSLContext | None
    error_policy: ErrorPolicy | None
    telemetry: Telemetry | None


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
    sasl: SaslMechanism | None = None
    read_only: bool = False
    default_acl: Sequence[ACL] = OPEN_ACL_UNSAFE
    acl_provider: ACLProvider | None = None
    max_data_size: int = DEFAULT_MAX_DATA_SIZE
    ssl_context: ssl.SSLContext | None = None
    error_policy: ErrorPolicy | None = None
    telemetry: Telemetry | None = None
    credentials: list[tuple[str, bytes]] = field(init=False)

    def __post_init__(self) -> None:
        # The session timeout goes on the wire as 32-bit milliseconds.
        check_seconds(self.session_timeout, "session_timeout", positive=True, maximum=2**31 / 1000)
        if self.connect_timeout is not None:
            check_seconds(self.connect_timeout, "connect_timeout", positive=True)
        for name in ("request_timeout", "start_timeout"):
            value = getattr(self, name)
            if value is not None:
                check_seconds(value, name, positive=True, allow_inf=True)
        _check_instance(self.retry, RetryPolicy, "retry", "an aiocoord.RetryPolicy")
        if self.sasl is not None and not isinstance(self.sasl, SaslMechanism):
            raise ArgumentTypeError(
                "sasl", "an aiocoord.SaslDigest, an aiocoord.SaslKerberos or None", self.sasl
            )
        check_flag(self.read_only, "read_only")
        check_int(self.max_data_size, "max_data_size", minimum=1, maximum=2**31 - 1)
        _check_instance(self.ssl_context, ssl.SSLContext, "ssl_context", "an ssl.SSLContext")
        check_error_policy(self.error_policy)
        _check_instance(self.telemetry, Telemetry, "telemetry", "an aiocoord.Telemetry")
        if self.acl_provider is not None and not callable(self.acl_provider):
            raise ArgumentTypeError(
                "acl_provider", "a callable from a path to an ACL list, or None", self.acl_provider
            )
        object.__setattr__(self, "credentials", _credentials(self.auth))

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
        return float(self.request_timeout)  # checked positive in __post_init__

    def retry_policy(self) -> RetryPolicy:
        return self.retry or BoundedExponentialBackoff()

    def resolved_error_policy(self) -> ErrorPolicy:
        return self.error_policy or StandardErrorPolicy()


def _check_instance(value: object, kind: type, name: str, expected: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise ArgumentTypeError(name, f"{expected} or None", value)


def _credentials(auth: object) -> list[tuple[str, bytes]]:
    """``auth`` as ``(scheme, credential bytes)`` pairs."""
    if auth is None:
        return []
    if isinstance(auth, str | bytes) or not isinstance(auth, Sequence):
        raise ArgumentTypeError("auth", "a sequence of (scheme, credential) pairs", auth)
    credentials = []
    for index, pair in enumerate(auth):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ArgumentTypeError(f"auth[{index}]", "a (scheme, credential) pair", pair)
        credentials.append(check_credential(*pair, name=f"auth[{index}]"))
    return credentials


def check_credential(scheme: object, credential: object, *, name: str) -> tuple[str, bytes]:
    """An auth ``(scheme, credential)`` as sent: the credential as bytes."""
    if not isinstance(scheme, str) or not scheme:
        raise InvalidArgumentError(name, f"scheme {scheme!r} is not a name")
    if isinstance(credential, str):
        credential = credential.encode()
    return scheme, check_bytes(credential, f"{name} credential")


def parse_hosts(hosts: Hosts) -> list[tuple[str, int]]:
    """``"h1:2181,h2"`` or ``[("h1", 2181), "h2:2181"]`` as (host, port) pairs."""
    items: list[str | tuple[str, int]]
    if isinstance(hosts, str):
        if "/" in hosts:
            raise InvalidConnectStringError(
                hosts, "a chroot in the connect string is not supported: use namespace="
            )
        items = [h.strip() for h in hosts.split(",") if h.strip()]
    elif isinstance(hosts, Sequence) and not isinstance(hosts, bytes):
        items = list(hosts)
    else:
        raise InvalidConnectStringError(hosts, "expected 'host:port,...' or a list of them")
    parsed: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            if (
                len(item) != 2
                or not isinstance(item[0], str)
                or not item[0]
                or isinstance(item[1], bool)
                or not isinstance(item[1], int)
                or not 0 < item[1] < 65536
            ):
                raise InvalidConnectStringError(
                    hosts, f"{item!r} is not a (host, port) pair with a port in 1..65535"
                )
            parsed.append((item[0], item[1]))
            continue
        if not isinstance(item, str):
            raise InvalidConnectStringError(hosts, f"{item!r} is not 'host:port'")
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "2181"
        valid_port = port.isascii() and port.isdigit() and 0 < int(port) < 65536
        if not valid_port or not host.strip("[]"):
            raise InvalidConnectStringError(hosts, f"{item!r} is not host:port")
        parsed.append((host.strip("[]"), int(port)))
    if not parsed:
        raise InvalidConnectStringError(hosts, "no ZooKeeper hosts given")
    return parsed
