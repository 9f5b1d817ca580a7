"""Small value types shared by every layer: Stat, watch events, ACLs."""

from __future__ import annotations

import base64
import enum
import hashlib
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ACL",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "EventType",
    "Perm",
    "Stat",
    "WatchEvent",
    "digest_acl",
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
    """One access control entry: who (``scheme:id``) may do what (``perms``)."""

    perms: Perm
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.ALL, "world", "anyone"),)
"""Anyone may do anything (ZooKeeper's default)."""

READ_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.READ, "world", "anyone"),)

CREATOR_ALL_ACL: tuple[ACL, ...] = (ACL(Perm.ALL, "auth", ""),)
"""Every permission for the identities the creating connection authenticated as."""


def digest_id(username: str, password: str) -> str:
    """The id ZooKeeper's digest scheme derives from ``username:password``."""
    raw = hashlib.sha1(f"{username}:{password}".encode()).digest()
    return f"{username}:{base64.b64encode(raw).decode()}"


def digest_acl(username: str, password: str, perms: Perm = Perm.ALL) -> ACL:
    """An ACL entry granting ``perms`` to a digest user (without sending the password)."""
    return ACL(perms, "digest", digest_id(username, password))
