"""Local hand-off: the tasks of one process pass a Mutex among themselves.

Without it every task queues a node of its own, and every hand-off is a
delete, a notification and a new look at the queue: a few server round trips
(and, on a production server, disk writes). With it a :class:`Mutex` object
keeps one node in the queue for all its tasks. Once that node holds, the lock
goes from task to task in the order they asked, with no server request at all,
up to ``bound`` grants; then the node is given up, so processes queued behind
it get their turn, and a new one is queued at the back for the tasks still
waiting here.

Every grant has its own fencing token: the node's creation zxid shifted left
by :data:`GRANT_BITS`, plus the grant's number on that node. A later node
always has a larger zxid, so tokens grow across nodes and processes too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..._exceptions import ClientClosedError
from ..._session import Client, run_cleanup
from .._kit import Contender, LossMonitor

__all__ = ["GRANT_BITS", "MAX_LOCAL_GRANTS", "LocalQueue", "LockOwner", "fencing_token"]

GRANT_BITS = 16
"""Low bits of a Mutex fencing token that number the grants on one node."""
MAX_LOCAL_GRANTS = (1 << GRANT_BITS) - 1
"""The largest ``local_handoff`` bound: grant numbers must fit in GRANT_BITS."""


def fencing_token(czxid: int, grant: int) -> int:
    """The token of grant number ``grant`` (0 first) on a lock node made at ``czxid``."""
    return (czxid << GRANT_BITS) | grant


@dataclass(frozen=True, slots=True)
class LockOwner:
    """What the local queue needs from its Mutex: where it is, its loss
    monitor, and three of its steps (bound methods), so that neither side
    reaches into the other's private members."""

    client: Client
    path: str
    monitor: LossMonitor
    new_contender: Callable[[], Contender]
    """A fresh contender for the Mutex's queue."""
    grant: Callable[[asyncio.Task[Any], Contender, int], None]
    """Make ``task`` the holder, by grant number ``grant`` on ``contender``'s node."""
    release_task: Callable[[asyncio.Task[Any]], Awaitable[None]]
    """Release what ``task`` holds (passing the lock on)."""


def _granted(future: asyncio.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


class _Waiter:
    __slots__ = ("future", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class LocalQueue:
    """The tasks of one Mutex object waiting behind the node they share.

    At any time the object has at most one node: being queued (by the first
    task that asked, in the foreground with that task's timeout, or for the
    tasks that wait here, in the background) or holding (``carrier``). Grants
    and hand-offs happen without an await, so the loss monitor judges each one
    from the state of the moment.
    """

    def __init__(self, owner: LockOwner, bound: int) -> None:
        self._owner = owner
        self._bound = bound
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._busy = False
        """A node of ours is queued or holds (whoever asks now waits here)."""
        self._carrier: Contender | None = None
        """Our node, once it holds."""
        self._grants = 0
        """Grants made on ``_carrier`` so far."""
        self._fetcher: asyncio.Task[Any] | None = None
        """The background task queueing a node for the waiters, if any."""

    def __repr__(self) -> str:
        return f"<LocalQueue {self._owner.path!r} waiting={self.waiting} bound={self._bound}>"

    @property
    def waiting(self) -> int:
        """How many tasks wait here for a local hand-off."""
        return sum(1 for waiter in self._waiters if not waiter.future.done())

    async def acquire(self, task: asyncio.Task[Any], timeout: float | None) -> bool:
        """Hold the lock for ``task`` (registered with the owner); False on timeout."""
        if not self._busy:
            return await self._acquire_node(task, timeout)
        if timeout == 0:
            return False  # a task of ours holds or is queued: the lock is not free
        waiter = _Waiter(task)
        self._waiters.append(waiter)
        try:
            with anyio.move_on_after(timeout):
                await waiter.future
        except BaseException:
            if _granted(waiter.future):
                # Granted in the moment it was cancelled: pass the lock on.
                await run_cleanup(self._owner.client, lambda: self._owner.release_task(task))
            else:
                self._leave(waiter)
            raise
        if _granted(waiter.future):
            return True  # also if the timeout fired in the same moment
        self._leave(waiter)
        return False

    async def _acquire_node(self, task: asyncio.Task[Any], timeout: float | None) -> bool:
        """No node of ours exists: queue one, in the foreground, with the caller's timeout."""
        self._busy = True
        contender = self._owner.new_contender()
        try:
            held = await contender.acquire(timeout=timeout)
        except BaseException:
            self._node_gone()
            raise
        if not held:
            self._node_gone()
            return False
        self._carrier, self._grants = contender, 1
        try:
            self._owner.grant(task, contender, 0)
        except BaseException:  # an error policy that raised: nobody holds our node
            await self._give_up()
            raise
        return True

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter that was not granted gives up (timed out, cancelled, or failed)."""
        waiter.future.cancel()
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        if not self._waiters and self._fetcher is not None:
            # Nobody is left to queue for: call the background queueing off (it
            # deletes its node); whoever asks next queues a node of its own.
            self._fetcher.cancel()
            self._fetcher = None
            self._busy = False

    def _node_gone(self) -> None:
        """Our node was given up or never held: queue anew for whoever still waits."""
        self._carrier = None
        self._grants = 0
        self._busy = bool(self._waiters)
        if not self._busy:
            return
        try:
            self._fetcher = self._owner.client.start_background(
                self._fetch(), name=f"aiocoord-local-queue {self._owner.path}"
            )
        except RuntimeError:  # the client is closing
            self._fail_waiters(ClientClosedError("the client closed"))

    def _fail_waiters(self, error: BaseException) -> None:
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(error)
        self._waiters.clear()
        self._busy = False

    async def _fetch(self) -> None:
        """Queue a node for the tasks waiting here and grant it to the first of them."""
        me = asyncio.current_task()
        contender = self._owner.new_contender()
        try:
            await contender.acquire()
        except asyncio.CancelledError:
            if self._fetcher is me:  # not called off by _leave: the client is closing
                self._fetcher = None
                self._fail_waiters(ClientClosedError("the client closed"))
            raise
        except Exception as error:  # a refused ACL, say: every waiter gets it
            if self._fetcher is me:
                self._fetcher = None
                self._fail_waiters(error)
            return
        self._fetcher = None
        self._carrier, self._grants = contender, 0
        if not self._grant_next():
            await self._give_up()

    def _usable(self) -> bool:
        """Whether our held node may still be granted: same session, and a state
        the error policy does not call a loss."""
        carrier = self._carrier
        return carrier is not None and self._owner.monitor.still_holds(carrier.session_id)

    def _grant_next(self) -> bool:
        """Grant the lock to the first task still waiting here; False if none may have it."""
        carrier = self._carrier
        if carrier is None or self._grants >= self._bound or not self._usable():
            return False
        while self._waiters:
            waiter = self._waiters.popleft()
            if waiter.future.done():
                continue  # gave up
            grant, self._grants = self._grants, self._grants + 1
            try:
                self._owner.grant(waiter.task, carrier, grant)
            except BaseException as error:  # an error policy that raised
                waiter.future.set_exception(error)
                continue
            waiter.future.set_result(None)
            return True
        return False

    async def release(self) -> None:
        """The holder let go (its hold is already unregistered): hand the lock to
        the next task here, or give our node up.

        A hand-off returns at once, with no request. Giving up returns once the
        node is gone, as a plain Mutex release does.
        """
        if self._grant_next():
            return
        await self._give_up()

    async def _give_up(self) -> None:
        carrier = self._carrier
        self._node_gone()  # the tasks still waiting here queue anew, at the back
        if carrier is not None:
            await run_cleanup(self._owner.client, carrier.release, must_finish=True)
