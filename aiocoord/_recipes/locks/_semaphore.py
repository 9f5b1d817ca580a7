"""Counting semaphore with ephemeral leases (Curator's InterProcessSemaphoreV2 layout).

``<path>/leases`` holds one ephemeral node per granted lease; ``<path>/locks``
is a Mutex that lets one acquirer at a time count them. Only that acquirer
watches the leases, so a release wakes one waiter, not all. Safety does not
rest on the mutex: a lease is granted only when the count, which includes
every live holder's node, is within ``max_leases``, on a listing made in the
session that owns the new lease's node.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_bytes, check_int, check_recipe_acl, check_timeout
from ..._exceptions import (
    HoldLostError,
    LockLostError,
    NotOwnerError,
    OperationTimeoutError,
    SessionExpiredError,
)
from ..._session import (
    Client,
    ErrorPolicy,
    Fence,
    OwnNode,
    Transaction,
    check_error_policy,
    delete_quietly,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL
from .._kit import (
    Deadline,
    Hold,
    HoldContext,
    LockHolding,
    LossMonitor,
    Participant,
    current_task,
    default_node_data,
    read_children,
    recipe_path,
    sort_contenders,
    wait_lost_within,
)
from ._mutex import QuietMutex

__all__ = ["Semaphore", "SemaphoreLease", "SemaphoreMutex"]

_LEASE_NAME = "lease-"
_LEASES = "leases"
_LOCKS = "locks"


class SemaphoreLease(Hold):
    """One granted lease: an ephemeral node, so a crashed holder's lease frees itself.

    A holder: ``is_held``, ``await wait_lost()``, :meth:`fence`,
    :attr:`fencing_token`, :meth:`transaction` and :meth:`hold`.
    """

    def __init__(self, semaphore: Semaphore, node: str) -> None:
        super().__init__()
        self._semaphore = semaphore
        self.node = node
        self.released = False
        self._czxid = 0
        """The lease node's creation zxid (set when the lease is granted)."""

    @property
    def is_held(self) -> bool:
        """Neither released nor lost."""
        return not self.released and not self.lost

    def _check_held(self) -> None:
        if self.released:
            raise NotOwnerError(f"the lease {self.node!r} was released")
        if self.lost:
            raise LockLostError(self._semaphore.path, self.reason)

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the lease is lost (at once if it already is; a release is no
        loss): True; False if ``timeout`` passed first. NotOwnerError once released."""
        if self.released:
            raise NotOwnerError(f"the lease {self.node!r} was released")
        return await wait_lost_within(self, timeout, self._semaphore.path)

    def fence(self) -> Fence:
        """Proof of holding this lease, for a transaction to require (its node exists).

        NotOwnerError once released; LockLostError once known to be lost.
        """
        self._check_held()
        return Fence(self.node, self._semaphore.path)

    @property
    def fencing_token(self) -> int:
        """A number that grows with every lease the semaphore grants: the lease node's
        creation zxid (errors as :meth:`fence`). Hand it to the resource the lease
        guards, which refuses a smaller token than it has seen."""
        self._check_held()
        return self._czxid

    def transaction(self) -> Transaction:
        """A transaction that applies only while this lease's node exists; otherwise
        ``commit()`` applies nothing and raises LockLostError."""
        return self._semaphore._client.transaction().guard(self.fence())

    def hold(self, *, cancel_on_loss: bool = True) -> HoldContext[SemaphoreLease]:
        """``async with lease.hold():`` run a block under this (already granted)
        lease, cancelled if it is lost; the lease is released on leaving it, and
        leaving after a loss raises LockLostError."""
        return HoldContext(_LeaseHolding(self), cancel_on_loss=cancel_on_loss)

    async def release(self) -> None:
        """Give the lease back (deleting its node, surviving connection loss)."""
        if self.released:
            return
        client = self._semaphore._client
        await run_cleanup(client, lambda: delete_quietly(client, self.node), must_finish=True)
        self.released = True
        self._semaphore._monitor.discard(self)

    async def __aenter__(self) -> SemaphoreLease:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        state = "released" if self.released else "lost" if self.lost else "held"
        return f"<SemaphoreLease {self.node!r} {state}>"


class _LeaseHolding:
    """A granted SemaphoreLease's side of :class:`HoldContext`."""

    def __init__(self, lease: SemaphoreLease) -> None:
        self._lease = lease
        self.path = lease._semaphore.path

    async def take_hold(self) -> tuple[SemaphoreLease, Hold]:
        self._lease._check_held()
        return self._lease, self._lease

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        await self._lease.release()

    def lost_error(self, reason: str) -> HoldLostError:
        return LockLostError(self.path, reason)


class _LeaseVanished(Exception):
    """Our lease node is gone, or the session that owned it is (Curator retries then)."""


class Semaphore:
    """At most ``max_leases`` holders at once, across all processes.

    ``async with sem:`` holds one lease for a block (each task its own, so
    many tasks may share one Semaphore object); ``acquire(n)`` returns leases
    to release one by one. A lease is lost with the session (and, under the
    standard error policy, when the connection is suspended): check
    ``lease.lost`` or ``await lease.wait_lost()``. A waiter whose session
    expired, or whose node somebody deleted, queues again, as Curator's does.

    ``acl`` (default: the client's ``default_acl``) is the ACL of every node
    the semaphore makes, its paths and their missing parents included.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        max_leases: int,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "semaphore")
        self.max_leases = check_int(max_leases, "max_leases", path=path, minimum=1)
        self._client = client
        self.path = path
        self._data = default_node_data() if data is None else check_bytes(data, "data", path=path)
        self._acl = check_recipe_acl(acl, path)
        """The ACL of the lease nodes and the parents made for them (None: the client's)."""
        error_policy = check_error_policy(error_policy, path)
        self._leases_path = f"{path}/{_LEASES}"
        # Orders the waiters; part of this recipe, so it reports nothing of its own.
        self._mutex = QuietMutex(client, f"{path}/{_LOCKS}", data=self._data, acl=self._acl)
        self._tags = _telemetry.recipe_tags(client.telemetry, "semaphore", path, client.namespace)
        self._monitor = LossMonitor(
            client,
            error_policy or client.error_policy,
            f"semaphore lease on {path!r}",
            tags=self._tags,
        )
        self._entered: dict[asyncio.Task[Any], list[SemaphoreLease]] = {}

    def __repr__(self) -> str:
        # Leases from acquire() are the caller's to track: only the limit is shown.
        return f"<Semaphore {self.path!r} max_leases={self.max_leases}>"

    async def acquire(self, n: int = 1, *, timeout: float | None = None) -> list[SemaphoreLease]:
        """Wait for ``n`` leases; OperationTimeoutError if ``timeout`` passed first
        (nothing is kept then).

        ``timeout=0`` looks once and never waits. (There is no ``try_acquire``:
        a ``try_`` method answers a bool, and this answer is leases.) Leases are
        taken one at a time; if anything fails part-way, the ones already taken
        are released before the error propagates.
        """
        leases = await self._acquire(n, timeout)
        if leases is None:
            raise OperationTimeoutError(
                f"{n} of {self.max_leases} leases of semaphore {self.path!r} "
                f"not granted within {timeout:g} s"
            )
        return leases

    async def _acquire(self, n: int, timeout: float | None) -> list[SemaphoreLease] | None:
        """``n`` leases, or None (nothing kept) if ``timeout`` passed first."""
        check_int(n, "n", path=self.path, minimum=1, maximum=self.max_leases)
        timeout = check_timeout(timeout, path=self.path)
        deadline = Deadline(timeout)
        leases: list[SemaphoreLease] = []
        with _telemetry.span("aiocoord.lock.acquire", self._tags, duration=_telemetry.WAIT) as op:
            op.set("aiocoord.leases", n)
            try:
                for _ in range(n):
                    lease = await self._acquire_one(deadline)
                    if lease is None:
                        await _release_all(leases)
                        op.outcome("timeout")
                        return None
                    leases.append(lease)
            except BaseException:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await _release_all(leases)
                raise
            op.outcome("acquired")
            op.set("aiocoord.fencing_token", leases[-1]._czxid)
        return leases

    async def _acquire_one(self, deadline: Deadline) -> SemaphoreLease | None:
        while True:
            try:
                return await self._try_one(deadline)
            except _LeaseVanished:
                # Our node went with the session or was deleted: start over,
                # mutex included (a waiter outside it could starve with others).
                if deadline.passed:
                    return None

    async def _try_one(self, deadline: Deadline) -> SemaphoreLease | None:
        if deadline.passed:
            # No time to wait: one look, without queueing on the mutex (which
            # only orders waiters; the count alone keeps leases within bounds).
            with anyio.move_on_after(deadline.first_look(self._client)):
                return await self._take_lease(deadline)
            return None
        if not await self._mutex.acquire(timeout=deadline.remaining()):
            return None
        lease: SemaphoreLease | None = None
        try:
            lease = await self._take_lease(deadline)
        finally:
            try:
                await self._mutex.release()
            except BaseException:
                if lease is not None:
                    await lease.release()
                raise
        return lease

    async def _take_lease(self, deadline: Deadline) -> SemaphoreLease | None:
        """Create a lease node and wait for room: the lease, or None at ``deadline``.

        Raises _LeaseVanished (with the node cleaned up) if the node is lost.
        """
        own = OwnNode(
            self._client,
            self._leases_path,
            _LEASE_NAME,
            self._data,
            ephemeral=True,
            sequential=True,
            acl=self._acl,
        )
        try:
            await own.create()
            assert own.path is not None and own.stat is not None
            node, owner = own.path, own.stat.ephemeral_owner
            if await self._wait_for_room(node, owner, deadline):
                # Registered before any await: the monitor sees every
                # transition after the listing that granted the lease.
                lease = SemaphoreLease(self, node)
                lease._czxid = own.stat.czxid
                self._monitor.add(lease, owner, token=lease._czxid)
                return lease
        except SessionExpiredError:
            await own.delete()
            raise _LeaseVanished from None
        except BaseException:
            await own.delete()
            raise
        await own.delete()
        return None

    async def _wait_for_room(self, node: str, owner: int, deadline: Deadline) -> bool:
        """True once the leases, ours among them, are within ``max_leases``; False at
        ``deadline`` (at once if it has passed: one look)."""
        client = self._client
        name = _paths.basename(node)
        while True:
            names, _stat, watch = await retry_on_connection_loss(
                client, lambda: client.watch_children(self._leases_path)
            )
            async with watch:
                # A listing from another session than our node's says nothing
                # of our node: it may have expired with its session.
                if client.session_id != owner or name not in names:
                    raise _LeaseVanished
                if len(names) <= self.max_leases:
                    return True
                if deadline.passed:
                    return False
                with anyio.move_on_after(deadline.remaining()) as scope:
                    await watch
                if scope.cancelled_caught:
                    return False

    async def __aenter__(self) -> SemaphoreLease:
        leases = await self.acquire(1)
        self._entered.setdefault(current_task(), []).append(leases[0])
        return leases[0]

    async def __aexit__(self, *exc_info: object) -> None:
        task = current_task()
        stack = self._entered[task]
        lease = stack.pop()
        if not stack:
            del self._entered[task]
        await lease.release()

    async def participants(self) -> list[Participant]:
        """Every lease node now, in the order they were made, with its data: live
        holders, and waiters counting. ``holds`` is True for the first
        ``max_leases`` (a waiter is granted a lease once the count, its own node
        included, is within the limit, so the newest nodes are the waiting ones)."""
        found = await read_children(
            self._client, self._leases_path, select=lambda n: sort_contenders(n, (_LEASE_NAME,))
        )
        return [
            Participant(None, child.path, child.data, place < self.max_leases)
            for place, child in enumerate(found)
        ]


async def _release_all(leases: Sequence[SemaphoreLease]) -> None:
    for lease in reversed(leases):
        await lease.release()


class SemaphoreMutex:
    """A non-reentrant lock (Curator's InterProcessSemaphoreMutex): a one-lease semaphore.

    Unlike :class:`Mutex`, it is not owned by a task: the holder acquiring
    again waits (for itself) like anyone else, and another task may release
    it. ``release()`` gives back the calling task's lease, or, from a task
    that took none, the one lease this object holds.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        data: bytes | None = None,
        error_policy: ErrorPolicy | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        self._semaphore = Semaphore(client, path, 1, data=data, error_policy=error_policy, acl=acl)
        self._semaphore._tags = self._semaphore._monitor.tags = _telemetry.recipe_tags(
            client.telemetry, "semaphore_mutex", path, client.namespace
        )
        self.path = path
        # Leases by the task that took them: a lease lost with its session must
        # not be mistaken for the one another task took after it.
        self._leases: dict[asyncio.Task[Any], SemaphoreLease] = {}

    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Wait for the lock; False if ``timeout`` passed (``0``: try once)."""
        leases = await self._semaphore._acquire(1, timeout)
        if leases is None:
            return False
        previous = self._leases.get(current_task())
        if previous is not None:
            # With one lease, a new grant means the previous lease's node is
            # gone: it was lost, and there is nothing left of it to release.
            self._semaphore._monitor.discard(previous)
        self._leases[current_task()] = leases[0]
        return True

    async def try_acquire(self) -> bool:
        """Take the lock if it is free now; never wait."""
        return await self.acquire(timeout=0)

    def _caller_lease_or_raise(self) -> SemaphoreLease:
        lease = self._lease_for_caller()
        if lease is None:
            raise NotOwnerError(f"{self.path!r} is not held")
        return lease

    def _lease_for_caller(self) -> SemaphoreLease | None:
        lease = self._leases.get(current_task())
        if lease is None and len(self._leases) == 1:
            lease = next(iter(self._leases.values()))
        return lease

    async def release(self) -> None:
        """Give the lock back: the calling task's lease, or else the one this object holds.

        NotOwnerError if there is none to give back.
        """
        lease = self._caller_lease_or_raise()
        await lease.release()
        for task, held in list(self._leases.items()):
            if held is lease:
                del self._leases[task]

    @property
    def is_held(self) -> bool:
        """True while some task holds the lock through this object and it has not been lost."""
        return any(not lease.lost for lease in self._leases.values())

    def fence(self) -> Fence:
        """The calling task's proof of holding, for a transaction to require
        (see :meth:`Mutex.fence`); NotOwnerError if not held."""
        lease = self._caller_lease_or_raise()
        return lease.fence()

    @property
    def fencing_token(self) -> int:
        """A number that grows with every grant of this lock: the lease node's
        creation zxid (see :attr:`Mutex.fencing_token`); NotOwnerError if not held."""
        return self._caller_lease_or_raise().fencing_token

    def transaction(self) -> Transaction:
        """A transaction that applies only while the lock is still held; otherwise
        ``commit()`` applies nothing and raises LockLostError."""
        return self._caller_lease_or_raise().transaction()

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the held lease is lost: True; False if ``timeout`` passed
        first (NotOwnerError if not held).

        The lease is looked up when the wait starts, in the awaiting task: its
        own lease, or else the one this object holds, so a holder may hand the
        wait to a task of its own (as :meth:`Mutex.wait_lost`).
        """
        return await self._caller_lease_or_raise().wait_lost(timeout=timeout)

    def hold(self, *, cancel_on_loss: bool = True, timeout: float | None = None) -> HoldContext:
        """``async with lock.hold():`` run a block that is cancelled if the lock is lost
        (as :meth:`Mutex.hold`)."""
        holding = LockHolding(
            self.path,
            check_timeout(timeout, path=self.path),
            acquire=self.acquire,
            release=self.release,
            caller_hold=self._caller_lease_or_raise,
        )
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    async def __aenter__(self) -> SemaphoreMutex:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<SemaphoreMutex {self.path!r} held={self.is_held}>"
