"""Several requests in one round trip: atomic transactions and plain pipelines."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Unpack

from .._exceptions import (
    ArgumentTypeError,
    CoordinationError,
    HoldLostError,
    LockLostError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from .._types import Stat
from . import _zk
from ._connection import replies
from ._engine import SessionEngine, only_in_session
from ._requests import CreateOptions, RequestBuilder

__all__ = ["Fence", "Pipeline", "Transaction"]


@dataclass(frozen=True, slots=True)
class Fence:
    """A holder's proof of ownership, for a transaction to require (:meth:`Transaction.guard`).

    The transaction applies only while ``node`` exists (at ``version``, if >= 0);
    otherwise it applies nothing and raises ``lost_error`` (a HoldLostError:
    LockLostError for a lock or lease, LeadershipLostError for a leader's fence,
    TakeLostError for a queue take's) naming ``owner``. Holder recipes
    hand one out from ``fence()``.
    """

    node: str
    """The node whose existence proves the hold (a lock node, a lease node)."""
    owner: str
    """The recipe's path, for the error."""
    version: int = -1
    lost_error: type[HoldLostError] = LockLostError
    """What a failed guard raises: built as ``lost_error(owner, reason)``."""
    session_id: int = 0
    """If not 0, the transaction goes out only in this session (else it raises
    ``lost_error``, unsent): for a node whose name others reuse once it is gone,
    such as a queue take's marker, where existence alone proves nothing."""
    also: tuple[Fence, ...] = ()
    """Further fences that must hold as well: a MultiLock's fence is its first
    lock's, with the other locks' here; a guard checks them all."""

    def parts(self) -> tuple[Fence, ...]:
        """This fence and every fence in ``also``, flattened."""
        return (self, *(part for fence in self.also for part in fence.parts()))


class _Builder:
    """Shared request building: every method validates its input at once."""

    def __init__(self, requests: RequestBuilder, engine: SessionEngine) -> None:
        self._requests = requests
        self._engine = engine
        self._ops: list[_zk.Op] = []

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} ops={len(self._ops)}>"


class Transaction(_Builder):
    """Operations applied atomically by :meth:`commit`: all of them, or none.

    ``commit()`` returns one result per operation (created path, new Stat, or
    None); if any fails it raises that operation's error, with ``op_index`` set,
    and nothing was applied.
    """

    def __init__(self, requests: RequestBuilder, engine: SessionEngine) -> None:
        super().__init__(requests, engine)
        self._fences: dict[int, Fence] = {}

    def __repr__(self) -> str:
        guards = len(self._fences)
        return f"<{type(self).__name__} ops={len(self._ops) - guards} guards={guards}>"

    def create(self, path: str, data: bytes = b"", **options: Unpack[CreateOptions]) -> Transaction:
        """Create a node (options as :meth:`Client.create`); result: its path."""
        self._ops.append(self._requests.create(path, data, **options))
        return self

    def delete(self, path: str, *, version: int = -1) -> Transaction:
        """Delete a node (only at ``version``, if >= 0); result: None."""
        self._ops.append(self._requests.delete(path, version))
        return self

    def set(self, path: str, data: bytes, *, version: int = -1) -> Transaction:
        """Replace a node's data (only at ``version``, if >= 0); result: the new Stat."""
        self._ops.append(self._requests.set(path, data, version))
        return self

    def check(self, path: str, version: int = -1) -> Transaction:
        """Require ``path`` to exist (and, if ``version`` >= 0, to be at that version)."""
        self._ops.append(self._requests.check(path, version))
        return self

    def guard(self, *fences: Fence) -> Transaction:
        """Apply only while each fence's holder still holds (else the fence's
        ``lost_error``: LockLostError for a lock).

        Several guards (two locks, a lock and a lease) may fence one
        transaction. A guard has no entry in :meth:`commit`'s results and
        does not count in an error's ``op_index``.
        """
        for given in fences:
            if not isinstance(given, Fence):
                raise ArgumentTypeError("fence", "an aiocoord.Fence (from a lock's fence())", given)
        for given in fences:
            for fence in given.parts():
                self._fences[len(self._ops)] = fence
                self._ops.append(self._requests.check(fence.node, fence.version))
        return self

    async def commit(self) -> list[str | Stat | None]:
        """Send every operation as one request: one result per operation, in order.

        If any operation fails, none is applied and its error is raised, with
        ``op_index`` counting only the operations added (not the guards); a
        failed guard raises its fence's ``lost_error`` (LockLostError for a
        lock's fence) instead.
        """
        if not self._ops:
            return []
        pinned = [fence for fence in self._fences.values() if fence.session_id]
        session = pinned[0].session_id if pinned else 0
        for fence in pinned:
            if fence.session_id != session:
                raise fence.lost_error(fence.owner, "its session is not the other fences' one")
        try:
            with only_in_session(session) if session else contextlib.nullcontext():
                raw: list[_zk.MultiResult] = await self._engine.call(_zk.multi_op(self._ops))
        except SessionExpiredError as error:
            if not pinned:
                raise
            raise pinned[0].lost_error(pinned[0].owner, "the session that held it ended") from error
        except ZooKeeperError as error:
            index = error.op_index
            if index is not None and index in self._fences:
                fence = self._fences[index]
                raise fence.lost_error(fence.owner, "its node is gone") from error
            if index is not None:
                error.op_index = index - sum(1 for i in self._fences if i < index)
            raise
        user_path = self._requests.user_path
        results: list[str | Stat | None] = []
        for i, item in enumerate(raw):
            if i in self._fences:
                continue
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

    def __init__(self, requests: RequestBuilder, engine: SessionEngine) -> None:
        super().__init__(requests, engine)
        self._finish: list[Callable[[Any], Any]] = []

    def _push(self, op: _zk.Op, finish: Callable[[Any], Any]) -> Pipeline:
        self._ops.append(op)
        self._finish.append(finish)
        return self

    def create(self, path: str, data: bytes = b"", **options: Unpack[CreateOptions]) -> Pipeline:
        """Result: ``(created path, Stat)``."""
        user_path = self._requests.user_path
        return self._push(
            self._requests.create(path, data, **options), lambda r: (user_path(r[0]), r[1])
        )

    def get(self, path: str) -> Pipeline:
        """Result: ``(data, Stat)``."""
        return self._push(self._requests.get(path), _same)

    def set(self, path: str, data: bytes, *, version: int = -1) -> Pipeline:
        """Result: the new Stat."""
        return self._push(self._requests.set(path, data, version), _same)

    def delete(self, path: str, *, version: int = -1) -> Pipeline:
        """Result: None."""
        return self._push(self._requests.delete(path, version), _same)

    def exists(self, path: str) -> Pipeline:
        """Result: the Stat, or None if the node does not exist."""
        return self._push(self._requests.exists(path), _same)

    def children(self, path: str) -> Pipeline:
        """Result: ``(names, parent Stat)``."""
        return self._push(self._requests.children(path), _same)

    async def execute(self) -> list[Any]:
        """Send every request at once; each entry is a result or a CoordinationError."""
        if not self._ops:
            return []
        conn = await self._engine.connection()
        self._engine.check_pinned_session()
        futures = conn.submit_all(self._ops)
        outcomes = await replies(futures)
        results: list[Any] = []
        for op, finish, outcome in zip(self._ops, self._finish, outcomes, strict=True):
            if not isinstance(outcome, BaseException):  # a reply (checked first: the usual case)
                results.append(finish(outcome))
            elif op.opcode == _zk.OP_EXISTS and isinstance(outcome, NoNodeError):
                results.append(None)
            elif isinstance(outcome, CoordinationError):
                results.append(outcome)
            else:
                raise outcome
        return results


def _same(result: Any) -> Any:
    return result
