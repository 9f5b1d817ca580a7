"""Small value types shared by every layer: Stat, watch events, ACLs, codecs."""

from __future__ import annotations

import abc
import base64
import enum
import hashlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, NoReturn, TypeVar

from . import _identities
from ._exceptions import (
    ArgumentTypeError,
    CorruptValueError,
    InvalidArgumentError,
)

__all__ = [
    "ACL",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "Codec",
    "EventType",
    "Perm",
    "Stat",
    "WatchEvent",
    "digest_id",
]


class Stat(NamedTuple):
    """A znode's metadata, as the server reports it (names follow ZooKeeper's).

    A named tuple: built once per reply on the hot path, so it must be cheap.
    """

    czxid: int
    """zxid of the create: unique and increasing across all nodes, forever."""
    mzxid: int
    ctime: int
    """Creation time, milliseconds since the epoch (server clock)."""
    mtime: int
    version: int
    """Number of data changes; the value a conditional set or delete checks."""
    cversion: int
    """Number of child changes."""
    aversion: int
    ephemeral_owner: int
    """Owning session id for an ephemeral node, else 0."""
    data_length: int
    num_children: int
    pzxid: int
    """zxid of the last child change."""

    @property
    def is_ephemeral(self) -> bool:
        """Whether the node lives only as long as the session that created it."""
        return self.ephemeral_owner != 0


class EventType(enum.IntEnum):
    """What a one-shot watch saw (ZooKeeper's event type codes)."""

    CREATED = 1
    DELETED = 2
    CHANGED = 3
    CHILD = 4


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A fired watch: what happened, to which path (namespace removed)."""

    type: EventType
    path: str


class Perm(enum.IntFlag):
    """ACL permission bits."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


@dataclass(frozen=True, slots=True)
class ACL:
    """One access control entry: who (``scheme:id``) may do what (``perms``).

    The class methods build an entry for each of ZooKeeper's schemes, with the id
    written exactly as the server records it (so that it matches), and refuse a
    malformed one (InvalidArgumentError, ArgumentTypeError) before anything is sent.
    """

    perms: Perm
    scheme: str
    id: str

    @classmethod
    def world(cls, perms: Perm = Perm.ALL) -> ACL:
        """Everyone (``world:anyone``)."""
        return cls(_check_perms(perms), "world", "anyone")

    @classmethod
    def auth(cls, perms: Perm = Perm.ALL) -> ACL:
        """Every identity the creating connection has authenticated as (``auth:``);
        the server replaces it with those identities when the node is made."""
        return cls(_check_perms(perms), "auth", "")

    @classmethod
    def digest(cls, user: str, password: str, perms: Perm = Perm.ALL) -> ACL:
        """A digest user, the client that sent ``add_auth("digest", "user:password")``
        (or ``auth=``). Only the hash goes into the entry, not the password."""
        return cls(_check_perms(perms), "digest", digest_id(user, password))

    @classmethod
    def ip(cls, address: str, perms: Perm = Perm.ALL) -> ACL:
        """Clients connecting from an IPv4 address or block (``"10.0.0.0/8"``), as the
        server sees them (behind a proxy or NAT, that is the proxy's address)."""
        return cls(_check_perms(perms), "ip", _identities.ip_id(address))

    @classmethod
    def sasl(cls, user: str, perms: Perm = Perm.ALL) -> ACL:
        """A SASL identity: a DIGEST-MD5 user name, or a name as the server's
        Kerberos rules map it (see :meth:`kerberos` for principals)."""
        return cls(_check_perms(perms), "sasl", _identities.sasl_id(user))

    @classmethod
    def kerberos(
        cls,
        principal: str,
        perms: Perm = Perm.ALL,
        *,
        remove_host: bool = False,
        remove_realm: bool = False,
    ) -> ACL:
        """A Kerberos principal (``primary[/host][@REALM]``) under the ``sasl`` scheme.

        The server records the whole principal, unless it runs with
        ``kerberos.removeHostFromPrincipal`` or ``kerberos.removeRealmFromPrincipal``
        set: then pass ``remove_host`` / ``remove_realm`` to match. (That applies to
        principals of the server's own realm; with custom ``auth_to_local`` rules,
        give the mapped name to :meth:`sasl`.)
        """
        id_ = _identities.kerberos_id(principal, remove_host=remove_host, remove_realm=remove_realm)
        return cls(_check_perms(perms), "sasl", id_)

    @classmethod
    def x509(cls, distinguished_name: str, perms: Perm = Perm.ALL) -> ACL:
        """The client whose TLS certificate has this subject (``"CN=app,O=example"``).

        The DN is parsed and written as ZooKeeper records it (RFC 2253, as Java
        prints it: no spaces around ``,`` and ``=``, keywords in capitals), so
        ``"cn=app, o=example"`` matches too. Needs a server with
        ``X509AuthenticationProvider`` and client certificates required.
        """
        return cls(_check_perms(perms), "x509", _identities.x509_id(distinguished_name))


def _check_perms(perms: object) -> Perm:
    if not isinstance(perms, Perm):
        raise ArgumentTypeError("perms", "an aiocoord.Perm", perms)
    return perms


OPEN_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.ALL, "world", "anyone"),)
"""Anyone may do anything (ZooKeeper's default)."""

READ_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.READ, "world", "anyone"),)

CREATOR_ALL_ACL: tuple[ACL, ...] = (ACL(Perm.ALL, "auth", ""),)
"""Every permission for the identities the creating connection authenticated as."""


def digest_id(username: str, password: str) -> str:
    """The id ZooKeeper's digest scheme derives from ``username:password``."""
    for name, value in (("username", username), ("password", password)):
        if not isinstance(value, str):
            raise ArgumentTypeError(name, "a str", value)
    if not username:
        raise InvalidArgumentError("username", "empty")
    if ":" in username:
        # The server takes the user name to end at the first colon.
        raise InvalidArgumentError("username", f"{username!r} holds ':'")
    try:
        raw = hashlib.sha1(f"{username}:{password}".encode()).digest()
    except UnicodeEncodeError as error:
        raise InvalidArgumentError("username:password", f"not UTF-8 ({error.reason})") from None
    return f"{username}:{base64.b64encode(raw).decode()}"


# --- codecs -------------------------------------------------------------------

T = TypeVar("T")


class Codec(abc.ABC, Generic[T]):
    """How a recipe turns values into a znode's bytes and back.

    ``encode`` refuses a value it cannot represent, so nothing is sent (the
    ready-made codecs raise ArgumentTypeError or InvalidArgumentError, a
    TypeError or ValueError, and a plain OverflowError for an integer too
    wide, which the recipes report as they see fit); ``decode`` raises
    :class:`CorruptValueError` naming the node when its bytes hold no value.
    The ready-made codecs are class attributes, such as ``Codec.LONG``.
    """

    __slots__ = ()

    BYTES: ClassVar[Codec[bytes]]
    """The bytes themselves (any bytes-like value in, bytes out)."""
    UTF8: ClassVar[Codec[str]]
    """A string as UTF-8."""
    JSON: ClassVar[Codec[Any]]
    """A JSON value as compact UTF-8 (no NaN or infinities: they are not JSON)."""
    LONG: ClassVar[Codec[int]]
    """An 8-byte big-endian signed integer: Curator's DistributedAtomicLong."""
    INT: ClassVar[Codec[int]]
    """A 4-byte big-endian signed integer: Curator's SharedCount and DistributedAtomicInteger."""

    @abc.abstractmethod
    def encode(self, value: T) -> bytes:
        """The bytes that hold ``value``."""

    @abc.abstractmethod
    def decode(self, data: bytes, path: str) -> T:
        """The value ``data``, read from the node at ``path``, holds."""


@dataclass(frozen=True)
class _Bytes(Codec[bytes]):
    def __repr__(self) -> str:
        return "Codec.BYTES"

    def encode(self, value: bytes) -> bytes:
        if isinstance(value, bytes):
            return value
        try:
            return bytes(memoryview(value))  # never bytes(value): bytes(5) is 5 zero bytes
        except TypeError:
            raise ArgumentTypeError("value", "bytes-like", value) from None

    def decode(self, data: bytes, path: str) -> bytes:
        return bytes(data)


@dataclass(frozen=True)
class _Utf8(Codec[str]):
    def __repr__(self) -> str:
        return "Codec.UTF8"

    def encode(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise ArgumentTypeError("value", "a str", value)
        try:
            return value.encode()
        except UnicodeEncodeError as error:  # a lone surrogate
            reason = f"not encodable as UTF-8 ({error.reason})"
            raise InvalidArgumentError("value", reason) from None

    def decode(self, data: bytes, path: str) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise CorruptValueError(path, data, "UTF-8 text") from None


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class _Json(Codec[Any]):
    def __repr__(self) -> str:
        return "Codec.JSON"

    def encode(self, value: Any) -> bytes:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            return text.encode()
        except TypeError as error:  # a set, bytes, an object, maybe deep inside
            raise ArgumentTypeError("value", f"made of JSON types ({error})", value) from None
        except (ValueError, RecursionError) as error:  # NaN, a cycle
            raise InvalidArgumentError("value", f"not JSON ({error})") from None

    def decode(self, data: bytes, path: str) -> Any:
        try:
            return json.loads(data.decode(), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise CorruptValueError(path, data, "a JSON value in UTF-8") from None


@dataclass(frozen=True)
class _Integer(Codec[int]):
    size: int
    """Bytes on the wire."""

    def __repr__(self) -> str:
        # As the ready-made instances are spelled in code.
        name = {8: "LONG", 4: "INT"}.get(self.size)
        return f"Codec.{name}" if name else f"<Codec: {self.size * 8}-bit integer>"

    def encode(self, value: int) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentTypeError("value", "an int", value)
        try:
            return value.to_bytes(self.size, "big", signed=True)
        except OverflowError:
            # Plain: what a value too wide means is the recipe's to say.
            raise OverflowError(f"{value} does not fit in {self.size * 8} bits") from None

    def decode(self, data: bytes, path: str) -> int:
        if len(data) != self.size:
            raise CorruptValueError(path, data, f"a {self.size}-byte big-endian signed integer")
        return int.from_bytes(data, "big", signed=True)


Codec.BYTES = _Bytes()
Codec.UTF8 = _Utf8()
Codec.JSON = _Json()
Codec.LONG = _Integer(8)
Codec.INT = _Integer(4)
