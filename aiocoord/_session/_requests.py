"""Request building: user paths in, validated request records out.

Every operation a client, transaction or pipeline sends is built here: the path
is validated and moved into the client's namespace, data is checked against the
server's size limit, and the result is a :class:`~._zk.Op` ready for the wire.
Nothing here does I/O, so bad input fails before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict, Unpack

from .. import _paths
from .._checks import check_acl, check_bytes, check_flag, check_int, check_ttl_ms
from .._exceptions import DataTooLargeError, InvalidArgumentError, InvalidPathError
from .._types import ACL
from . import _zk

__all__ = ["ACLProvider", "CreateOptions", "RequestBuilder", "check_data", "check_version"]


class ACLProvider(Protocol):
    """``acl_provider=`` of :func:`~aiocoord.connect` (Curator's ``ACLProvider``): any
    callable from a path to the ACL of a node about to be made there.

    Called for every create that gives no ``acl=`` (recipes' nodes and missing
    parents included) with the caller's path (before the namespace; a sequential
    node's without its suffix). None means the client's ``default_acl``. It must
    not do I/O: it runs as the request is built.
    """

    def __call__(self, path: str, /) -> Sequence[ACL] | None:
        """The ACL for a node made at ``path``, or None for ``default_acl``."""
        ...


class CreateOptions(TypedDict, total=False):
    """What kind of node a create makes (keyword arguments of every ``create``)."""

    acl: Sequence[ACL] | None
    """The node's ACL; None (the default) asks the client's ``acl_provider``, else
    uses its ``default_acl``."""
    ephemeral: bool
    """Deleted by the server when the creating session ends."""
    sequential: bool
    """The server appends a 10-digit, per-parent increasing counter to the name."""
    container: bool
    """Removed by the server once it has had children and the last one is gone."""
    ttl: float | None
    """Seconds a persistent node may sit unchanged and childless before the
    server removes it (needs TTL nodes enabled on the server)."""


def check_data(path: str, data: object, limit: int) -> bytes:
    """Node data as bytes, refused (ArgumentTypeError, DataTooLargeError) before sending."""
    value = data if type(data) is bytes else check_bytes(data, "node data", path=path)
    if len(value) > limit:
        raise DataTooLargeError(path, len(value), limit)
    return value


def check_version(version: object, path: str | None = None) -> int:
    """A version to check: -1 (any) or a node version (>= 0)."""
    if type(version) is int and -1 <= version < 2**31:
        return version
    return check_int(version, "version", path=path, minimum=-1, maximum=2**31 - 1)


class RequestBuilder:
    """Builds one client's requests: validation, namespace and size limit in one place."""

    def __init__(
        self,
        namespace: str | None,
        default_acl: Sequence[ACL],
        max_data_size: int,
        acl_provider: ACLProvider | None = None,
    ) -> None:
        self.prefix = _paths.check_namespace(namespace)
        self.default_acl = check_acl(default_acl, "default_acl")
        self.max_data_size = max_data_size
        self.acl_provider = acl_provider

    def acl_for(self, path: str) -> tuple[ACL, ...]:
        """The ACL a node made at ``path`` without ``acl=`` gets: the provider's
        answer, checked (naming the path if it is no ACL), else ``default_acl``."""
        provider = self.acl_provider
        if provider is None:
            return self.default_acl
        acl = provider(path)
        if acl is None:
            return self.default_acl
        return check_acl(acl, "acl_provider's ACL", path=path)

    def server_path(self, path: str) -> str:
        """``path`` as the server knows it (inside the namespace)."""
        if not self.prefix:
            return path
        return self.prefix if path == "/" else self.prefix + path

    def user_path(self, server_path: str) -> str:
        """A server path as the user knows it (namespace removed)."""
        if not self.prefix:
            return server_path
        if server_path.startswith(self.prefix):
            return server_path[len(self.prefix) :] or "/"
        return server_path

    def create(self, path: str, data: bytes, **options: Unpack[CreateOptions]) -> _zk.Op:
        ephemeral = options.get("ephemeral", False)
        sequential = options.get("sequential", False)
        container = options.get("container", False)
        ttl = options.get("ttl")
        acl = options.get("acl")
        _paths.validate_path(path, sequential=sequential)
        value = check_data(path, data, self.max_data_size)
        for flag, name in (
            (ephemeral, "ephemeral"),
            (sequential, "sequential"),
            (container, "container"),
        ):
            if type(flag) is not bool:
                check_flag(flag, name, path=path)
        if sum((ephemeral, container, ttl is not None)) > 1:
            raise InvalidArgumentError(
                "create options", "ephemeral, container and ttl exclude each other", path
            )
        if container and sequential:
            raise InvalidArgumentError("create options", "a container cannot be sequential", path)
        ttl_ms = None if ttl is None else check_ttl_ms(ttl, path=path)
        if path == "/":
            raise InvalidPathError(path, "the root node always exists")
        acls = self.acl_for(path) if acl is None else check_acl(acl, path=path)
        return _zk.create_op(
            path,
            self.server_path(path),
            value,
            acls,
            ephemeral=ephemeral,
            sequential=sequential,
            container=container,
            ttl_ms=ttl_ms,
        )

    def set(self, path: str, data: bytes, version: int) -> _zk.Op:
        _paths.validate_path(path)
        value = check_data(path, data, self.max_data_size)
        return _zk.set_data_op(path, self.server_path(path), value, check_version(version, path))

    def delete(self, path: str, version: int) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.delete_op(path, self.server_path(path), check_version(version, path))

    def check(self, path: str, version: int) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.check_op(path, self.server_path(path), check_version(version, path))

    def get(self, path: str, *, watch: bool = False) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.get_data_op(path, self.server_path(path), watch)

    def exists(self, path: str, *, watch: bool = False) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.exists_op(path, self.server_path(path), watch)

    def children(self, path: str, *, watch: bool = False) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.children_op(path, self.server_path(path), watch)

    def sync(self, path: str) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.sync_op(path, self.server_path(path))

    def get_acl(self, path: str) -> _zk.Op:
        _paths.validate_path(path)
        return _zk.get_acl_op(path, self.server_path(path))

    def set_acl(self, path: str, acl: Sequence[ACL], version: int) -> _zk.Op:
        _paths.validate_path(path)
        acls = check_acl(acl, path=path)
        return _zk.set_acl_op(path, self.server_path(path), acls, check_version(version, path))
