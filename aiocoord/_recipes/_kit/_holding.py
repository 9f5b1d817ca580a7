"""What every holder recipe shares: learning that a hold was lost, and the one
hold scope (:class:`HoldContext`) behind every ``hold()``.

A hold (a lock, a semaphore lease, leadership, a queue take) is lost when the
client enters a state its error policy calls an error: LOST always, SUSPENDED
under the standard policy (nobody can tell, while disconnected, whether the
session still stands), or when the holder finds its node gone. Holders can
poll ``lost``, await :meth:`Hold.wait_lost`, or run their work in a cancel
scope that is cancelled on loss.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import CodeType
from typing import Any, Generic, Protocol

import anyio
from typing_extensions import TypeVar

from ... import _telemetry
from ..._checks import check_flag, check_timeout
from ..._exceptions import (
    DetachedAcquireError,
    HoldLostError,
    LockLostError,
    NotOwnerError,
    OperationTimeoutError,
)
from ..._session import Client, ConnectionState, ErrorPolicy

__all__ = [
    "Hold",
    "HoldContext",
    "Holding",
    "LockHolding",
    "LossMonitor",
    "NotifyingHold",
    "acquiring_task",
    "current_task",
    "end_record",
    "exit_loss_scope",
    "native_cancel_pending",
    "not_owner",
    "start_record",
    "task_owned_acquire",
    "wait_lost_within",
]

log = logging.getLogger("aiocoord")

T = TypeVar("T", default=None)
"""What entering a hold scope gives the block (None for a lock's ``hold()``)."""
T_co = TypeVar("T_co", covariant=True)


def native_cancel_pending() -> bool:
    """Whether the running task has a cancellation that nothing has delivered.

    A hold's cancel scope, cancelled by a loss at the moment a native
    ``task.cancel()`` arrives (a close, a TaskGroup), can take the one
    CancelledError for its own and end quietly: the task would go on as if
    never cancelled, and a loop in it would never stop. The task's count of
    requested cancellations still tells; the caller then raises CancelledError.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def exit_loss_scope(scope: anyio.CancelScope, exc_type: Any, exc: Any, tb: Any) -> bool:
    """Exit the cancel scope a hold's block runs in; True if it swallowed the
    cancellation a loss caused (the caller then reports the loss).

    False when it took a native cancellation for the loss's (see
    :func:`native_cancel_pending`): the block's CancelledError then propagates
    from the caller's ``__aexit__``, which returns None.
    """
    return bool(scope.__exit__(exc_type, exc, tb)) and not native_cancel_pending()


class Hold:
    """Local record of one thing held, and whether it has been lost."""

    def __init__(self) -> None:
        self.lost = False
        self.reason = ""
        self.subject = ""
        """What is held, for the log (``lock '/a'``); set by :meth:`LossMonitor.add`."""
        self.session_id = 0
        """The session that granted it; set by :meth:`LossMonitor.add`."""
        self._lost_event = asyncio.Event()
        self._scopes: list[anyio.CancelScope] = []
        self.record: _telemetry.HoldRecord | None = None
        """The hold's span and timer, while telemetry is on (see :class:`LossMonitor`)."""
        self.outcome: str | None = None
        """How the hold ended, for its telemetry, when neither simply released nor
        lost (a leader's ``resigned``, ``handed_over``); set before it ends."""

    def mark_lost(self, reason: str, *, warn: bool = True) -> None:
        """Record the loss (the first ``reason`` stays), wake waiters, cancel scopes.

        ``warn=False`` for an end the holder chose (closing what holds), which
        is no news to an operator.
        """
        if self.lost:
            return
        self.lost = True
        self.reason = reason
        if warn and self.record is not None:
            self.record.lost(reason)
        if warn:
            # An operator's first clue that two holders may overlap: always WARNING.
            log.warning(
                "%s lost (session 0x%x): %s", self.subject or "a hold", self.session_id, reason
            )
        self._lost_event.set()
        for scope in self._scopes:
            scope.cancel()

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the hold is lost (at once if it already is; a release is no
        loss): True; False if ``timeout`` (checked seconds, None: no bound) passed
        first. ``reason`` then says why it was lost."""
        if self.lost:
            return True
        with anyio.move_on_after(timeout):
            await self._lost_event.wait()
            return True
        return False

    def add_scope(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` when the hold is lost (at once if it already is)."""
        self._scopes.append(scope)
        if self.lost:
            scope.cancel()

    def remove_scope(self, scope: anyio.CancelScope) -> None:
        """Stop cancelling ``scope`` on loss (its block is over)."""
        if scope in self._scopes:
            self._scopes.remove(scope)


def start_record(
    hold: Hold,
    span_name: str,
    tags: _telemetry.Tags | None,
    *,
    token: int | None = None,
    duration: str | None = None,
) -> None:
    """Start ``hold``'s telemetry record (a span named ``span_name`` and, with
    ``duration``, a sample of that histogram when it ends), unless it has one or
    telemetry is off. Every hold record starts here, and ends in :func:`end_record`."""
    if tags is not None and hold.record is None:
        hold.record = _telemetry.start_hold(span_name, tags, token=token, duration=duration)


def end_record(hold: Hold, outcome: str | None = None) -> None:
    """End ``hold``'s record (if it has one) with ``outcome``; by default how the
    hold ended: its ``outcome``, else ``lost`` or ``released``."""
    record, hold.record = hold.record, None
    if record is not None:
        record.end(outcome or hold.outcome or ("lost" if hold.lost else "released"))


async def wait_lost_within(hold: Hold, timeout: object, path: str = "") -> bool:
    """Every holder's ``wait_lost(timeout=)``: wait until ``hold`` is lost, True;
    False if ``timeout`` seconds passed first (None: no bound; 0: look once)."""
    seconds = check_timeout(timeout, path=path or None)
    return await Hold.wait_lost(hold, timeout=seconds)  # the event, whatever a subclass adds


class LossMonitor:
    """Marks a recipe's holds lost when the client enters an error state.

    Listens to the client only while it has holds, so idle recipes cost nothing.

    With ``tags`` (telemetry), each hold from :meth:`add` to :meth:`discard` is a
    span named ``span_name`` and a sample of the ``duration`` histogram, and a
    loss counts in ``aiocoord.holds.lost``.
    """

    def __init__(
        self,
        client: Client,
        policy: ErrorPolicy,
        what: str = "",
        *,
        tags: _telemetry.Tags | None = None,
        span_name: str = "aiocoord.lock.hold",
        duration: str | None = "aiocoord.lock.hold.duration",
    ) -> None:
        self._client = client
        self._policy = policy
        self._what = what
        """What the holds are, for the log when one is lost (``lock '/a'``)."""
        self._holds: set[Hold] = set()
        self.tags = tags
        self._span_name = span_name
        self._duration = duration

    def add(self, hold: Hold, session_id: int, *, token: int | None = None) -> None:
        """Watch ``hold``, granted in session ``session_id`` (``token``: its fencing
        token, for its span).

        Call it with no await between the decision that granted the hold and
        this call: transitions before it are judged here, from the current
        state and session, and every later one by the listener.
        """
        hold.subject, hold.session_id = self._what, session_id
        start_record(hold, self._span_name, self.tags, token=token, duration=self._duration)
        if not self._holds:
            self._client.add_listener(self._on_state)
        self._holds.add(hold)
        if self._client.session_id != session_id:
            hold.mark_lost("the session that granted it has ended")
            return
        # The connection may have dropped after the grant's reply arrived.
        state = self._client.state
        if state is not None and self._policy.is_error_state(state):
            hold.mark_lost(f"the connection was {state.value}")

    def still_holds(self, session_id: int) -> bool:
        """Whether something granted in ``session_id`` would still count as held now."""
        if self._client.session_id != session_id:
            return False
        state = self._client.state
        return state is None or not self._policy.is_error_state(state)

    def discard(self, hold: Hold) -> None:
        end_record(hold)
        self._holds.discard(hold)
        if not self._holds:
            self._client.remove_listener(self._on_state)

    def _on_state(self, state: ConnectionState) -> None:
        if self._policy.is_error_state(state):
            for hold in list(self._holds):
                hold.mark_lost(f"the connection was {state.value}")


def current_task() -> asyncio.Task[Any]:
    """The calling asyncio task: what owns a lock."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("locks are owned by asyncio tasks: call from within a task")
    return task


_F = TypeVar("_F", bound=Callable[..., Any])
# The code of every acquire whose hold belongs to the calling task, and of the
# methods that only call one (try_acquire).
_TASK_OWNED_ACQUIRES: set[CodeType] = set()


def task_owned_acquire(function: _F) -> _F:
    """Mark a coroutine function whose hold belongs to the task that calls it (a
    Mutex's ``acquire``, or a ``try_acquire`` that calls it); see :func:`acquiring_task`."""
    _TASK_OWNED_ACQUIRES.add(function.__code__)
    return function


def acquiring_task(subject: str) -> asyncio.Task[Any]:
    """The calling task, which is about to own a hold; called first thing by an
    acquire marked with :func:`task_owned_acquire`.

    Raises :class:`DetachedAcquireError` if that acquire (with only marked acquires
    above it) is the task's top-level coroutine: ``create_task(lock.acquire())``,
    ``ensure_future``, or Python 3.11's ``wait_for``. The task would end holding, the
    lock would be released as it ends, and whoever awaited it would go on believing it
    held the lock. The frames tell: a running coroutine's frame links back to the
    coroutine awaiting it, and the task's own coroutine is at the top.
    """
    task = current_task()
    top = getattr(task.get_coro(), "cr_frame", None)
    here = inspect.currentframe()
    frame = here.f_back if here is not None else None  # the acquire that called
    while frame is not None and frame.f_code in _TASK_OWNED_ACQUIRES:
        if frame is top:
            raise DetachedAcquireError(subject)
        frame = frame.f_back
    return task


def not_owner(path: str) -> NotOwnerError:
    """The error for a task that uses a lock it does not hold, with the usual cause."""
    return NotOwnerError(
        f"{path!r} is not held by the calling task (on Python 3.11, asyncio.wait_for "
        "runs its argument in a task of its own: use acquire(timeout=...) or "
        "asyncio.timeout() instead)"
    )


class NotifyingHold(Hold):
    """A hold that calls ``on_lost()`` the moment it is first lost (a leader's term,
    a partitioner's connection). ``warn=False`` for a recipe that warns of the loss
    in its own words."""

    def __init__(self, on_lost: Callable[[], None], *, warn: bool = True) -> None:
        super().__init__()
        self.__on_lost = on_lost
        self.__warn = warn

    def mark_lost(self, reason: str, *, warn: bool = True) -> None:
        if self.lost:
            return
        super().mark_lost(reason, warn=warn and self.__warn)
        self.__on_lost()


class Holding(Protocol[T_co]):
    """What :class:`HoldContext` needs from a holder to run one block under it.

    Each holder family implements it in a small adapter of its own (a lock's,
    a lease's, a take's, leadership's), so the scope never reaches into a
    holder's internals.
    """

    @property
    def path(self) -> str:
        """What is held, for reprs."""
        ...

    async def take_hold(self) -> tuple[T_co, Hold]:
        """Wait for the hold (raising if it cannot be had: a timeout, a lease held by
        another): what ``async with`` gives the block, and the hold to watch."""
        ...

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        """Give the hold up (``completed``: the block returned and nothing was lost)."""
        ...

    def lost_error(self, reason: str) -> HoldLostError:
        """The error leaving the block after a loss raises."""
        ...


class LockHolding:
    """A task-owned lock's side of :class:`HoldContext` (Mutex and its read-write
    sides, SemaphoreMutex): acquire within the timeout, watch the calling task's
    hold, release."""

    def __init__(
        self,
        path: str,
        timeout: float | None,
        *,
        acquire: Callable[..., Awaitable[bool]],
        release: Callable[[], Awaitable[None]],
        caller_hold: Callable[[], Hold | None],
    ) -> None:
        self.path = path
        self._timeout = timeout
        self._acquire = acquire
        self._release = release
        self._caller_hold = caller_hold

    async def take_hold(self) -> tuple[None, Hold]:
        if not await self._acquire(timeout=self._timeout):
            raise OperationTimeoutError(f"could not acquire {self.path!r} in {self._timeout} s")
        hold = self._caller_hold()
        assert hold is not None
        return None, hold

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        await self._release()

    def lost_error(self, reason: str) -> HoldLostError:
        return LockLostError(self.path, reason)


class HoldContext(Generic[T]):
    """``async with holder.hold():`` take the hold, run the block, give it up; report a loss.

    The one hold scope every holder uses (``Mutex.hold()``, ``Lease.hold()``,
    ``LeaderElection.hold()``, a queue's ``take()``, ...). With
    ``cancel_on_loss`` the block runs in a cancel scope that is cancelled the
    moment the hold is lost. Either way, leaving the block after a loss raises
    the holder's :class:`~aiocoord.HoldLostError` (LockLostError,
    LeadershipLostError, TakeLostError), so the holder always learns of it.
    A context may be entered again once its block is over.
    """

    def __init__(self, holding: Holding[T], *, cancel_on_loss: bool) -> None:
        self._holding = holding
        self._cancel_on_loss = check_flag(cancel_on_loss, "cancel_on_loss", path=holding.path)
        self._scope: anyio.CancelScope | None = None
        self._hold: Hold | None = None
        self._active = False

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._holding.path!r} "
            f"cancel_on_loss={self._cancel_on_loss} {self._state()}>"
        )

    def _state(self) -> str:
        if self._hold is not None and self._hold.lost:
            return "lost"
        return "holding" if self._active else "inactive"

    @property
    def lost(self) -> bool:
        """Whether the hold of the current (or last) block was lost."""
        return self._hold is not None and self._hold.lost

    async def __aenter__(self) -> T:
        if self._active:
            raise RuntimeError(f"{self!r} is already entered: one block at a time")
        self._active = True
        try:
            value, hold = await self._holding.take_hold()
        except BaseException:
            self._active = False
            raise
        self._hold = hold
        if self._cancel_on_loss:
            self._scope = anyio.CancelScope()
            self._scope.__enter__()
            hold.add_scope(self._scope)
        return value

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Returns None, not a bool: the block's exceptions always propagate. The
        # scope swallows only the cancellation a loss caused, and a loss always
        # raises the holder's error here; so type checkers see a block that may
        # not be left silently (a ``return`` inside it is the function's return).
        hold, scope = self._hold, self._scope
        assert hold is not None
        self._scope = None
        suppress = False
        try:
            if scope is not None:
                hold.remove_scope(scope)
                suppress = exit_loss_scope(scope, exc_type, exc, tb)
            await self._holding.end_hold(hold, completed=exc_type is None and not hold.lost)
        finally:
            self._active = False
        if hold.lost and (exc_type is None or suppress):
            raise self._holding.lost_error(hold.reason)
        assert not suppress, "a hold's scope is cancelled only by a loss"
