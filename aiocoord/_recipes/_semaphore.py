"""Counting semaphore with ephemeral leases (Curator's InterProcessSemaphoreV2 layout).

``<path>/leases`` holds one ephemeral node per granted lease; ``<path>/locks``
is a Mutex that lets one acquirer at a time count them. Only that acquirer
watches the leases, so a release wakes one waiter, not all. Safety does not
rest on the mutex: a lease is granted only when the count, which includes
every live holder's node, is within ``max_leases``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Coroutine
from typing import Any

import anyio

from .. import _paths
from .._exceptions import ConnectionLossError, NoNodeError, NotOwnerError, SessionExpiredError
from .._session._client import Client, protected_marker
from .._session._state import ErrorPolicy
from ._contenders import (
    cleanup_scope,
    delete_own_node,
    delete_quietly,
    recipe_path,
    retry_on_connection_loss,
)
from ._holding import Hold, LossMonitor
from ._lock import HoldContext, Mutex, default_node_data

__all__ = ["Semaphore", "SemaphoreLease", "SemaphoreMutex"]

_LEASE_NAME = "lease-"
_LEASES = "leases"
_LOCKS = "locks"


class SemaphoreLease(Hold):
    """One granted lease: an ephemeral node, so a crashed holder's lease frees itself."""

    def __init__(self, semaphore: Semaphore, node: str) -> None:
        super().__init__()
        self._semaphore = semaphore
        self.node = node
        self.released = False

    async def release(self) -> None:
        """Give the lease back (deleting its node, surviving connection loss)."""
        if self.released:
            return
        client = self._semaphore._client
        with cleanup_scope(client, must_finish=True):
            await delete_quietly(client, self.node)
        self.released = True
        self._semaphore._monitor.discard(self)

    async def __aenter__(self) -> SemaphoreLease:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        state = "released" if self.released else "lost" if self.lost else "held"
        return f"<SemaphoreLease {self.node!r} {state}>"


class Semaphore:
    """At most ``max_leases`` holders at once, across all processes.

    ``async with sem:`` holds one lease for a block; ``acquire(n)`` returns
    leases to release one by one. A lease is lost with the session (and, under
    the standard error policy, when the connection is suspended): check
    ``lease.lost`` or ``await lease.wait_lost()``.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        max_leases: int,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
    ) -> None:
        recipe_path(path, "semaphore")
        if not isinstance(max_leases, int) or max_leases < 1:
            raise ValueError("max_leases must be an int >= 1")
        self._client = client
        self.path = path
        self.max_leases = max_leases
        self._data = default_node_data() if data is None else bytes(data)
        self._leases_path = f"{path}/{_LEASES}"
        self._mutex = Mutex(client, f"{path}/{_LOCKS}", data=self._data)
        self._monitor = LossMonitor(client, error_policy or client.error_policy)
        self._held: list[SemaphoreLease] = []

    async def acquire(
        self, n: int = 1, timeout: float | None = None
    ) -> list[SemaphoreLease] | None:
        """Wait for ``n`` leases; None if ``timeout`` passed first (nothing is kept then).

        Leases are taken one at a time; if anything fails part-way, the ones
        already taken are released before the error propagates.
        """
        if n < 1 or n > self.max_leases:
            raise ValueError(f"n must be between 1 and max_leases ({self.max_leases})")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        leases: list[SemaphoreLease] = []
        try:
            for _ in range(n):
                remaining = None if timeout is None else max(0.0, deadline - time.monotonic())
                lease = await self._acquire_one(remaining)
                if lease is None:
                    for taken in reversed(leases):
                        await taken.release()
                    return None
                leases.append(lease)
        except BaseException:
            for taken in reversed(leases):
                with contextlib.suppress(Exception):
                    await taken.release()
            raise
        return leases

    async def _acquire_one(self, timeout: float | None) -> SemaphoreLease | None:
        if not await self._mutex.acquire(timeout):
            return None
        node: str | None = None
        marker = protected_marker()
        try:
            with anyio.move_on_after(None if timeout is None else max(0.0, timeout)) as scope:
                node = await self._create_lease(marker)
                await self._wait_for_room(node)
            if scope.cancelled_caught:
                await self._drop(node, marker)
                return None
        except BaseException:
            await self._drop(node, marker)
            raise
        finally:
            await self._mutex.release()
        assert node is not None
        lease = SemaphoreLease(self, node)
        self._monitor.add(lease)
        return lease

    async def _create_lease(self, marker: str) -> str:
        client = self._client
        target = f"{self._leases_path}/{marker}{_LEASE_NAME}"
        while True:
            try:
                return await client.create(
                    target, self._data, ephemeral=True, sequential=True, container_parents=True
                )
            except ConnectionLossError as error:
                if not error.sent:
                    continue
                found = await retry_on_connection_loss(
                    client, lambda: client.find_protected(self._leases_path, marker)
                )
                if found is not None:
                    return found[0]

    async def _wait_for_room(self, node: str) -> None:
        client = self._client
        name = _paths.basename(node)
        while True:
            names, _stat, watch = await retry_on_connection_loss(
                client, lambda: client.watch_children(self._leases_path)
            )
            try:
                if name not in names:
                    raise SessionExpiredError(f"lease node {node!r} vanished while waiting")
                if len(names) <= self.max_leases:
                    return
                await watch
            finally:
                watch.cancel()

    async def _drop(self, node: str | None, marker: str) -> None:
        await delete_own_node(self._client, self._leases_path, node, marker)

    async def __aenter__(self) -> SemaphoreLease:
        leases = await self.acquire(1)
        assert leases is not None
        self._held.append(leases[0])
        return leases[0]

    async def __aexit__(self, *exc_info: object) -> None:
        await self._held.pop().release()

    async def lease_nodes(self) -> list[str]:
        """Names of the lease nodes that exist now (live holders, and waiters counting)."""
        try:
            return sorted(await self._client.children(self._leases_path))
        except NoNodeError:
            return []


class SemaphoreMutex:
    """A non-reentrant lock (Curator's InterProcessSemaphoreMutex): a one-lease semaphore.

    Unlike :class:`Mutex`, it is not owned by a task: any task may release it,
    and the holder acquiring again waits (for itself) like anyone else.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
    ) -> None:
        self._semaphore = Semaphore(client, path, 1, data=data, error_policy=error_policy)
        self.path = path
        self._lease: SemaphoreLease | None = None

    async def acquire(self, timeout: float | None = None) -> bool:
        leases = await self._semaphore.acquire(1, timeout)
        if leases is None:
            return False
        self._lease = leases[0]
        return True

    async def release(self) -> None:
        lease = self._lease
        if lease is None:
            raise NotOwnerError(f"{self.path!r} is not held")
        await lease.release()
        self._lease = None

    @property
    def is_held(self) -> bool:
        return self._lease is not None and not self._lease.lost

    def _hold_of_caller(self) -> Hold | None:
        return self._lease

    def wait_lost(self) -> Coroutine[Any, Any, None]:
        """Wait until the held lease is lost (NotOwnerError if not held)."""
        if self._lease is None:
            raise NotOwnerError(f"{self.path!r} is not held")
        return self._lease.wait_lost()

    def hold(self, *, cancel_on_loss: bool = True, timeout: float | None = None) -> HoldContext:
        return HoldContext(self, cancel_on_loss=cancel_on_loss, timeout=timeout)

    async def __aenter__(self) -> SemaphoreMutex:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.release()
