"""A recipe's own nodes: created so a lost reply cannot duplicate them, deleted surely.

Every recipe that queues, leases or joins creates a node of its own and must
delete it on every way out. Both ends are subtle under connection loss:

- A create whose reply is lost may or may not have happened. The node's name
  carries a unique marker (``_c_<uuid>-``, Curator's "protection mode"), so
  the parent's children tell: the node is found, not created twice.
- A delete must run even while the caller is being cancelled, must not hang
  when ZooKeeper is gone, and must find the node by its marker when its
  create was cut off before the reply.

:class:`OwnNode` does both, for the client facade and for every recipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal, Protocol, TypeVar, Unpack

import anyio

from .. import _paths
from .._exceptions import (
    ClientClosedError,
    ConnectionLossError,
    NoConnectionError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
)
from .._types import ACL, Stat
from ._batch import Pipeline
from ._connection import track_sends
from ._requests import CreateOptions
from ._retry import RetryPolicy, call_with_retry

__all__ = [
    "PROTECTED_PREFIX",
    "OwnNode",
    "cleanup_bound",
    "delete_quietly",
    "find_protected",
    "protected_marker",
    "retry_on_connection_loss",
    "run_cleanup",
]

T = TypeVar("T")

PROTECTED_PREFIX = "_c_"
"""Marks a protected node name (``_c_<uuid>-<name>``), as Curator's protection mode does."""

_marker_base = str(uuid.uuid4())[:24]  # random per process; the rest counts
_marker_count = itertools.count(int.from_bytes(os.urandom(5), "big"))


def protected_marker() -> str:
    """A fresh ``_c_<id>-`` prefix for a protected node name.

    The id has a UUID's shape, as Curator's do (its tools recognise protected
    names by it), but costs a counter step instead of a uuid4 per create:
    random per process, unique within it.
    """
    return f"{PROTECTED_PREFIX}{_marker_base}{next(_marker_count) & 0xFFFFFFFFFFFF:012x}-"


class Nodes(Protocol):
    """What the helpers here need of a client (:class:`~aiocoord.Client` has it)."""

    @property
    def retry_policy(self) -> RetryPolicy: ...
    @property
    def session_timeout(self) -> float: ...
    @property
    def session_id(self) -> int: ...
    def pipeline(self) -> Pipeline: ...
    async def ensure_path(
        self, path: str, *, container: bool = False, acl: Sequence[ACL] | None = None
    ) -> None: ...
    async def sync(self, path: str = "/") -> None: ...
    async def children(self, path: str) -> list[str]: ...
    async def exists(self, path: str) -> Stat | None: ...
    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None: ...
    async def wait_connected(self, *, timeout: float | None = None) -> bool: ...
    def start_background(
        self,
        coro: Coroutine[Any, Any, object],
        *,
        name: str,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> asyncio.Task[Any]: ...


def _is_connection_loss(error: BaseException) -> bool:
    return isinstance(error, ConnectionLossError) and not isinstance(error, NoConnectionError)


async def retry_on_connection_loss(client: Nodes, operation: Callable[[], Awaitable[T]]) -> T:
    """Retry an idempotent request cut by a dropped connection, under the client's policy.

    Session expiry is not retried here: the caller's ephemeral node went with
    the session, and only the caller knows how to start over.
    """
    # The first attempt is made here, so that while the connection holds (nearly
    # always) the retry loop is not one more coroutine to resume on every reply.
    started = time.monotonic()
    try:
        return await operation()
    except ConnectionLossError as error:
        if not _is_connection_loss(error):
            raise
        failed = error
    return await call_with_retry(
        client.retry_policy, operation, retry_if=_is_connection_loss, failed=failed, started=started
    )


def cleanup_bound(client: Nodes) -> float:
    """How long a shielded cleanup may take: requests wait through SUSPENDED for at
    most one session timeout before the session is declared lost (and with it, any
    ephemeral node), so a bit more than that always suffices."""
    return client.session_timeout * 2 + 5.0


async def run_cleanup(
    client: Nodes, cleanup: Callable[[], Awaitable[object]], *, must_finish: bool = False
) -> None:
    """Run a recipe's cleanup (deleting its own node) to the end, whatever cancels
    the caller meanwhile.

    An anyio shield alone does not do it: a native ``task.cancel()`` (from
    ``asyncio.timeout``, a TaskGroup, ``wait_for``) still lands inside a shielded
    scope, and a second one arriving while the delete is in flight would abandon
    it, leaving a dead holder's node in the queue for as long as its session
    lives. So the cleanup runs as a task of its own; the caller waits for it,
    absorbing cancellations, and re-raises CancelledError once it has finished.

    Bounded by :func:`cleanup_bound` (TimeoutError past it if ``must_finish``);
    an expired session or a closed client counts as done, since either took the
    node away (and so, in time, does a session that cannot be reached).
    """
    timer = anyio.fail_after if must_finish else anyio.move_on_after

    async def bounded() -> None:
        with (
            timer(cleanup_bound(client)),
            contextlib.suppress(SessionExpiredError, ClientClosedError, NoConnectionError),
        ):
            await cleanup()

    task = asyncio.ensure_future(bounded())
    cancelled = False
    # The shield keeps anyio's level-triggered cancellation from re-delivering
    # on every loop pass; the loop absorbs native cancellations.
    with anyio.CancelScope(shield=True):
        while True:
            try:
                await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.done():
                    if task.cancelled():
                        raise
                    break
                cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


async def delete_quietly(client: Nodes, path: str) -> None:
    """Delete ``path``, retrying connection loss; already gone counts as done."""

    async def delete() -> None:
        with contextlib.suppress(NoNodeError):
            await client.delete(path)

    await retry_on_connection_loss(client, delete)


async def find_protected(client: Nodes, parent: str, marker: str) -> tuple[str, Stat] | None:
    """The node a protected create with ``marker`` made under ``parent``, if any.

    For recovery after a lost reply. If a retried create left more than one
    node with the marker, the lowest is kept and the others are deleted.
    """
    with contextlib.suppress(NoNodeError):
        await client.sync(parent)
        children = await client.children(parent)
        matches = sorted(c for c in children if c.startswith(marker))
        for extra in matches[1:]:
            with contextlib.suppress(NoNodeError):
                await client.delete(_paths.join(parent, extra))
        if matches:
            found = _paths.join(parent, matches[0])
            stat = await client.exists(found)
            if stat is not None:
                return found, stat
    return None


Parents = Literal["container", "plain"] | None


class OwnNode:
    """One protected node under ``parent``: create it (optionally listing its
    siblings in the same round trip) and delete it, surviving lost replies.

    ``name`` follows the marker (``_c_<id>-<name>``), so sequence numbers and
    Curator's name-based sorting work as for an unprotected node. With
    ``protected=False`` the node is named ``name`` alone, which must then be
    unique by itself (a UUID, as Curator's double barrier names its nodes):
    the name is its own marker.

    ``on_outcome_unknown``: for a node whose mere existence may have had an
    effect (a request others act on and delete). A create whose reply was lost,
    whose node is not found once the session has changed, may have been made
    and consumed in the old one: the create raises ``on_outcome_unknown()``
    instead of making the node again.
    """

    def __init__(
        self,
        client: Nodes,
        parent: str,
        name: str,
        data: bytes = b"",
        *,
        parents: Parents = "container",
        retry_if: Callable[[BaseException], bool] = _is_connection_loss,
        protected: bool = True,
        on_outcome_unknown: Callable[[], Exception] | None = None,
        **options: Unpack[CreateOptions],
    ) -> None:
        self._client = client
        self.parent = parent
        self.marker = protected_marker() if protected else name
        node_name = f"{self.marker}{name}" if protected else name
        self.target = f"{parent}/{node_name}" if parent != "/" else f"/{node_name}"
        self._on_outcome_unknown = on_outcome_unknown
        self._data = data
        self._options = options
        self._parents = parents
        self._retry_if = retry_if
        self.path: str | None = None
        """The created node's path, once known."""
        self.stat: Stat | None = None
        """The created node's Stat, once known."""
        self._sent = False
        """Whether a create may have reached the server (else there is nothing to find)."""
        self._sent_in = 0
        """The session the last create went out in."""

    @property
    def created(self) -> bool:
        return self.path is not None

    async def create(self, *, list_children: bool = False) -> list[str] | None:
        """Create the node; with ``list_children``, return the parent's children
        as listed right after the create (so they include ours and everyone
        queued before it), or None if that listing was lost with a reply.

        Missing parents are created (``parents``). Connection loss (and
        whatever ``retry_if`` allows) is retried under the client's policy; a
        create that reached the server is found by its marker, not repeated.
        """
        with track_sends() as sends:
            try:
                # The first attempt is made here, as in retry_on_connection_loss:
                # the retry loop is one more coroutine to resume on each reply.
                started = time.monotonic()
                try:
                    return await self._attempt(list_children)
                except Exception as error:
                    if not self._retriable(error):
                        raise
                    failed = error
                return await call_with_retry(
                    self._client.retry_policy,
                    lambda: self._attempt(list_children),
                    retry_if=self._retriable,
                    failed=failed,
                    started=started,
                )
            finally:
                self._sent = self._sent or sends.sent

    def _retriable(self, error: BaseException) -> bool:
        # An unknown outcome is a connection loss too, but never one to retry.
        return not isinstance(error, OutcomeUnknownError) and self._retry_if(error)

    async def _attempt(self, list_children: bool) -> list[str] | None:
        client = self._client
        while True:
            session = self._sent_in = client.session_id
            try:
                pipeline = client.pipeline().create(self.target, self._data, **self._options)
                if list_children:
                    pipeline.children(self.parent)
                results = await pipeline.execute()
            except NoConnectionError:
                raise
            except (ConnectionLossError, SessionExpiredError) as error:
                results = [error, error]
            created = results[0]
            if not isinstance(created, Exception):  # made (the usual case, checked first)
                self.path, self.stat = created
                listing = results[1] if list_children else None
                return None if listing is None or isinstance(listing, Exception) else listing[0]
            if isinstance(created, NoNodeError) and self._parents is not None:
                await retry_on_connection_loss(
                    client,
                    # The parents get the node's own ACL: see the README on ACLs.
                    lambda: client.ensure_path(
                        self.parent,
                        container=self._parents == "container",
                        acl=self._options.get("acl"),
                    ),
                )
                continue
            if isinstance(created, ConnectionLossError | SessionExpiredError):
                if isinstance(created, ConnectionLossError) and not created.sent:
                    raise created
                found = await retry_on_connection_loss(
                    client, lambda: find_protected(client, self.parent, self.marker)
                )
                if found is None:
                    if self._on_outcome_unknown is not None and client.session_id != session:
                        raise self._on_outcome_unknown() from created
                    raise created
                self.path, self.stat = found
                return None
            raise created

    async def delete(self) -> None:
        """Delete the node, shielded and time-bounded; found by its marker if its
        create's reply was lost. A node that went with its session counts as deleted.

        A create that never left the client (cut off while it waited for a
        connection) made nothing: then this returns at once, sending nothing.
        """
        if self.path is None and not self._sent:
            return
        done = False
        path = self.path

        async def delete() -> None:
            nonlocal done
            await self._delete_now(path)
            done = True

        await run_cleanup(self._client, delete)
        if not done:
            self._delete_later(path)
        self.path = None
        self.stat = None
        self._sent = False

    async def _delete_now(self, path: str | None) -> None:
        """Delete ``path``, or the node found by our marker if it is not known."""
        if path is None:
            found = await retry_on_connection_loss(
                self._client, lambda: find_protected(self._client, self.parent, self.marker)
            )
            path = found[0] if found is not None else None
        if path is not None:
            await delete_quietly(self._client, path)

    def _delete_later(self, path: str | None) -> None:
        """The bounded delete gave up (ZooKeeper out of reach for longer than the
        bound): delete the node in the background once ZooKeeper answers again,
        for as long as the client lives (Curator's guaranteed delete). Else a
        node whose create the server applied before it went away would stand
        when it comes back: an ephemeral one too, since a restarted server lets
        its sessions reconnect. An ephemeral node whose session ended is gone."""
        client = self._client
        ephemeral = bool(self._options.get("ephemeral"))
        # The session owning the node: its Stat says, or else the one its create went out in.
        session = self.stat.ephemeral_owner if self.stat is not None else self._sent_in

        async def later() -> None:
            while True:
                try:
                    await client.wait_connected()
                except ClientClosedError:
                    return  # the session ends with the client
                if ephemeral and client.session_id != session:
                    return  # the node went with its session
                try:
                    await self._delete_now(path)
                    return
                except (SessionExpiredError, ConnectionLossError):
                    continue  # wait for ZooKeeper (or the new session) and look again

        coro = later()
        try:
            client.start_background(coro, name=f"aiocoord-delete-later {self.target}")
        except RuntimeError:  # the client is closing: its session ends, and our node with it
            coro.close()
