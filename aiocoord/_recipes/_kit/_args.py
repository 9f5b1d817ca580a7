"""Argument helpers every recipe constructor shares: its path and its node data."""

from __future__ import annotations

import os
import secrets
import socket

from ... import _paths
from ..._exceptions import InvalidPathError
from ..._session import Client, check_client

__all__ = ["default_node_data", "generated_participant_id", "recipe_path"]


def recipe_path(client: Client, path: str, what: str) -> str:
    """Check what every recipe is built on, before anything is sent: an aiocoord
    Client, and a valid znode path of the recipe's own (not the root, nor in the
    server's ``/zookeeper`` subtree once the client's namespace is applied)."""
    check_client(client, path)
    _paths.validate_path(path)
    if path == "/":
        raise InvalidPathError(path, f"a {what} needs its own path, not the root")
    return _paths.check_unreserved(path, (client.namespace or "") + path, what)


def default_node_data() -> bytes:
    """What a contender node holds unless told otherwise: who queued it."""
    return f"{socket.gethostname()}:{os.getpid()}".encode()


def generated_participant_id() -> str:
    """The id of a participant not given one (``participant_id=None``):
    ``<host>:<pid>:<16 hex digits>``, who it is and unique to this object, so
    two participants in one process are told apart. Also a valid node name
    (a group member's id is its node's name)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"
