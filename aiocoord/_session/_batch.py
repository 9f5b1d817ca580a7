"""Several requests in one round trip: atomic transactions and plain pipelines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._exceptions import CoordinationError, NoNodeError
from .._types import ACL, Stat
from . import _zk

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["Pipeline", "Transaction"]


class _Builder:
    """Shared request building: every method validates its input at once."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._ops: list[_zk.Op] = []

    def __len__(self) -> int:
        return len(self._ops)

    def _add_create(
        self,
        path: str,
        data: bytes,
        acl: Sequence[ACL] | None,
        ephemeral: bool,
        sequential: bool,
        container: bool,
        ttl: float | None,
    ) -> None:
        self._ops.append(
            self._client._create_request(
                path,
                data,
                acl=acl,
                ephemeral=ephemeral,
                sequential=sequential,
                container=container,
                ttl=ttl,
            )
        )


class Transaction(_Builder):
    """Operations applied atomically by :meth:`commit`: all of them, or none.

    ``commit()`` returns one result per operation (created path, new Stat, or
    None); if any fails it raises that operation's error, with ``op_index`` set,
    and nothing was applied.
    """

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
    ) -> Transaction:
        self._add_create(path, data, acl, ephemeral, sequential, container, ttl)
        return self

    def delete(self, path: str, *, version: int = -1) -> Transaction:
        self._ops.append(self._client._delete_request(path, version))
        return self

    def set(self, path: str, data: bytes, *, version: int = -1) -> Transaction:
        self._ops.append(self._client._set_request(path, data, version))
        return self

    def check(self, path: str, version: int = -1) -> Transaction:
        """Require ``path`` to exist (and, if ``version`` >= 0, to be at that version)."""
        self._ops.append(self._client._check_request(path, version))
        return self

    async def commit(self) -> list[str | Stat | None]:
        if not self._ops:
            return []
        raw: list[_zk.MultiResult] = await self._client._call(_zk.multi_op(self._ops))
        user_path = self._client._user_path
        results: list[str | Stat | None] = []
        for item in raw:
            if isinstance(item, str):
                results.append(user_path(item))
            elif item is None or isinstance(item, Stat):  # Stat is a tuple: test it first
                results.append(item)
            else:
                results.append(user_path(item[0]))  # (path, Stat) from a create
        return results


class Pipeline(_Builder):
    """Requests written back to back and answered in order, in one round trip.

    Unlike a transaction, each request succeeds or fails on its own:
    :meth:`execute` returns a list holding each result or the error it raised.
    A later request sees the effect of an earlier one (ZooKeeper applies a
    session's requests in order), so ``create`` then ``children`` lists the
    new node.
    """

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self._finish: list[Callable[[Any], Any]] = []

    def _push(self, op: _zk.Op, finish: Callable[[Any], Any]) -> Pipeline:
        self._ops.append(op)
        self._finish.append(finish)
        return self

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
    ) -> Pipeline:
        """Result: ``(created path, Stat)``."""
        self._add_create(path, data, acl, ephemeral, sequential, container, ttl)
        user_path = self._client._user_path
        self._finish.append(lambda r: (user_path(r[0]), r[1]))
        return self

    def get(self, path: str) -> Pipeline:
        """Result: ``(data, Stat)``."""
        return self._push(self._client._get_request(path), _same)

    def set(self, path: str, data: bytes, *, version: int = -1) -> Pipeline:
        """Result: the new Stat."""
        return self._push(self._client._set_request(path, data, version), _same)

    def delete(self, path: str, *, version: int = -1) -> Pipeline:
        """Result: None."""
        return self._push(self._client._delete_request(path, version), _same)

    def exists(self, path: str) -> Pipeline:
        """Result: the Stat, or None if the node does not exist."""
        return self._push(self._client._exists_request(path), _same)

    def children(self, path: str) -> Pipeline:
        """Result: ``(names, parent Stat)``."""
        return self._push(self._client._children_request(path), _same)

    async def execute(self) -> list[Any]:
        """Send every request at once; each entry is a result or a CoordinationError."""
        if not self._ops:
            return []
        conn = await self._client._connection()
        futures = conn.submit_all(self._ops)
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        results: list[Any] = []
        for op, finish, outcome in zip(self._ops, self._finish, outcomes, strict=True):
            if isinstance(outcome, NoNodeError) and op.opcode == _zk.OP_EXISTS:
                results.append(None)
            elif isinstance(outcome, CoordinationError):
                results.append(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.append(finish(outcome))
        return results


def _same(result: Any) -> Any:
    return result
