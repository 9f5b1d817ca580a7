"""A shared integer everyone can watch (Curator's SharedCount, same 4-byte encoding)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio

from ... import _telemetry
from ..._checks import check_int, check_recipe_acl
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    ClientClosedError,
    CoordinationError,
    CorruptValueError,
    CounterOverflowError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from ..._session import Broadcast, ChangeStream, Client, Watch, run_cleanup, track_sends
from ..._types import ACL, Codec, Stat
from .._kit import Lifecycle, Reconnects, Resource, recipe_path

__all__ = ["SharedCount", "VersionedValue"]

T = TypeVar("T")

log = logging.getLogger("aiocoord")

_MAX_PAUSE = 1.0
"""Longest pause between reads when the server keeps refusing them (seconds)."""


@dataclass(frozen=True, slots=True)
class VersionedValue(Generic[T]):
    """A value and the node version it was read at: the ticket for a conditional set."""

    version: int
    value: T


class SharedCount(Resource):
    """An int kept in one znode, with local reads and change notifications.

    ``async with SharedCount(client, path, seed) as count:`` creates the node
    with ``seed`` if missing and keeps ``count.count`` current from a watch.

    Listeners and ``changes()`` iterators hear, as Curator's do: every write
    this instance makes or reads from the server (an equal value included;
    fast successive writes by others may be seen as the latest one only), and
    the value read again after each reconnection (RECONNECTED, or a new session
    after LOST), changed or not. Starting notifies nobody. Connection states
    are not repeated here: follow them with ``client.add_listener`` or
    ``client.state_changes()``.

    Bytes that are not a 4-byte count make ``start()`` raise
    :class:`CorruptValueError`; once started, such a value is logged as a
    warning and skipped, and ``count`` keeps the last good one.

    ``start()`` creates the node with the seed if it is missing, reads it and
    starts watching; a failed start may be tried again. ``aclose()`` stops
    watching and ends ``changes()`` iterators; the node stays (it is the
    count's, not this object's).
    """

    def __init__(
        self, client: Client, path: str, seed: int, *, acl: Sequence[ACL] | None = None
    ) -> None:
        recipe_path(client, path, "shared count")
        self._client = client
        self.path = path
        self._seed = seed
        self._encode(seed)  # refused now, not at start()
        self._acl = check_recipe_acl(acl, path)
        """The ACL of the count's node and of the missing parents made for it."""
        self._current: VersionedValue[int] | None = None
        self._mzxid = -1
        """The zxid of the write ``_current`` came from: orders values across re-creations."""
        self._changes: Broadcast[int] = Broadcast(f"count {path!r}")
        self._watcher: asyncio.Task[None] | None = None
        self._life = Lifecycle(f"shared count {path!r}", self._open, self._shut)
        super().__init__(self._life)
        self._reconnects = Reconnects(client, self._on_reconnected)
        self._reconnected = asyncio.Event()
        """Set on each reconnection: the value must be read again and announced."""
        self._wait_scope: anyio.CancelScope | None = None
        self._tags = _telemetry.recipe_tags(
            client.telemetry, "shared_count", path, client.namespace
        )

    def __repr__(self) -> str:
        current = self._current
        if current is None:
            return f"<SharedCount {self.path!r} not started>"
        state = "watching" if self._watcher is not None else "stopped"
        return (
            f"<SharedCount {self.path!r} count={current.value} version={current.version} {state}>"
        )

    def _encode(self, value: int) -> bytes:
        """Curator's 4-byte encoding; a value too wide is a CounterOverflowError."""
        check_int(value, "count", path=self.path)
        try:
            return Codec.INT.encode(value)
        except OverflowError:
            raise CounterOverflowError(
                f"{self.path!r}: {value} does not fit a 32-bit SharedCount"
            ) from None

    def _decode(self, data: bytes) -> int:
        return Codec.INT.decode(data, self.path)

    # --- life cycle -------------------------------------------------------------

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`)."""
        self._current = None
        self._reconnected.clear()
        self._reconnects.listen()
        watch: Watch | None = None
        try:
            seed = self._encode(self._seed)
            while True:
                await self._create_seed(seed)
                snapshot, watch = await self._read()
                if snapshot is not None:
                    break
                watch.cancel()  # deleted since: create it again
            data, stat = snapshot
            self._current = VersionedValue(stat.version, self._decode(data))
            self._mzxid = stat.mzxid
            self._watcher = self._client.start_background(
                self._watch(watch),
                name=f"aiocoord-shared-count {self.path}",
                on_error=self._changes.close,
            )
        except BaseException:
            if watch is not None:
                watch.cancel()
            self._reconnects.stop()
            raise

    async def _create_seed(self, seed: bytes) -> None:
        """Create the node holding ``seed`` unless it exists.

        Cancelled (a close) once the create went out, this waits for its reply
        and deletes the node it made if nobody wrote to it since, so that a
        closed count never leaves a node made later; cancelled before, it
        sends nothing.
        """
        client = self._client
        with track_sends() as sends:  # the task runs in a copy of this context
            create = asyncio.ensure_future(
                client.create_with_stat(self.path, seed, make_parents=True, acl=self._acl)
            )
        try:
            await asyncio.shield(create)
        except NodeExistsError:
            return
        except asyncio.CancelledError:
            if not sends.sent:
                create.cancel()  # delivered before anything is written
                await run_cleanup(client, lambda: asyncio.wait([create]))
            else:

                async def undo() -> None:
                    try:
                        _path, stat = await create
                    except CoordinationError:
                        return  # not made by us
                    with contextlib.suppress(NoNodeError, BadVersionError, NotEmptyError):
                        await client.delete(self.path, version=stat.version)

                await run_cleanup(client, undo)
            if create.done() and not create.cancelled():
                create.exception()  # seen
            raise

    async def _shut(self, started: bool) -> None:
        """The closing (see :class:`Lifecycle`): stop the watcher, end the iterators."""
        self._reconnects.stop()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self._changes.close()

    # --- the watcher --------------------------------------------------------------

    def _on_reconnected(self) -> None:
        """Ask the watcher for a fresh read after each reconnection (CURATOR-311)."""
        self._reconnected.set()
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    async def _read(self) -> tuple[tuple[bytes, Stat] | None, Watch]:
        """The node's (data, stat), or None if it is missing, and a watch on its next change."""
        client = self._client
        while True:
            try:
                data, stat, watch = await client.retry(client.watch_data, self.path)
                return (data, stat), watch
            except NoNodeError:
                stat_or_none, watch = await client.retry(client.watch_exists, self.path)
                if stat_or_none is None:
                    return None, watch
                watch.cancel()  # created in between: read it

    async def _watch(self, watch: Watch) -> None:
        """Wait for a change or a reconnection, read again, repeat; never gives up."""
        try:
            while True:
                with anyio.CancelScope() as scope:
                    self._wait_scope = scope
                    if self._reconnected.is_set():
                        scope.cancel()
                    with contextlib.suppress(SessionExpiredError):
                        await watch  # expired: the session took the watch; read again
                self._wait_scope = None
                watch.cancel()
                watch = await self._reread()
        except ClientClosedError:
            return
        finally:
            self._wait_scope = None
            watch.cancel()

    async def _reread(self) -> Watch:
        """Read the value with a new watch, retrying failures after a pause."""
        announce = False
        failures = 0
        while True:
            if self._reconnected.is_set():
                self._reconnected.clear()
                announce = True
            try:
                snapshot, watch = await self._read()
            except ClientClosedError:
                raise
            except Exception as error:
                failures += 1
                log.warning(
                    "SharedCount %s: reading the value failed (%r); retrying", self.path, error
                )
                pause = min(0.01 * 2**failures, _MAX_PAUSE)
                with anyio.move_on_after(pause):
                    await self._reconnected.wait()
                continue
            if snapshot is not None:
                self._receive(*snapshot, announce=announce)
            return watch

    def _receive(self, data: bytes, stat: Stat, *, announce: bool = False) -> None:
        """Take a value read from the server; skip (with a warning) one that is not a count."""
        try:
            value = self._decode(data)
        except CorruptValueError as error:
            kept = "nothing" if self._current is None else self._current.value
            log.warning("SharedCount: %s; keeping %s", error, kept)
            return
        self._update(VersionedValue(stat.version, value), stat.mzxid, announce=announce)

    def _update(self, value: VersionedValue[int], mzxid: int, *, announce: bool = False) -> None:
        """Keep ``value`` if it is newer; notify once if so, or if ``announce``."""
        if self._current is None:
            return  # not started
        if mzxid > self._mzxid:
            self._current, self._mzxid = value, mzxid
        elif not announce:
            return  # a write already known
        self._changes.publish(self._current.value)

    # --- reading and writing -------------------------------------------------------

    @property
    def versioned_value(self) -> VersionedValue[int]:
        """The count and its node version as last heard from the server: the ticket
        for :meth:`try_set_count`. RuntimeError before :meth:`start`."""
        if self._current is None:
            raise RuntimeError("SharedCount not started")
        return self._current

    @property
    def count(self) -> int:
        """The count as last heard from the server (a watch keeps it current; reading it
        sends nothing). RuntimeError before :meth:`start`."""
        return self.versioned_value.value

    async def try_set_count(self, previous: VersionedValue[int], new: int) -> bool:
        """Set ``new`` only if nobody changed the count since ``previous`` was read.

        ``previous`` must equal :attr:`versioned_value` (version and value),
        else nothing is sent and the answer is False; so a made-up version such
        as -1 (ZooKeeper's "any version") never acts as a wildcard. After a
        refusal by the server the value is read again, so ``count`` is current.
        """
        if not isinstance(previous, VersionedValue):
            raise ArgumentTypeError("previous", "an aiocoord.VersionedValue", previous, self.path)
        data = self._encode(new)
        current = self.versioned_value
        with _telemetry.span("aiocoord.counter.set", self._tags) as op:
            if previous.version < 0 or (previous.version, previous.value) != (
                current.version,
                current.value,
            ):
                op.outcome("mismatch")  # a stale ticket: nothing sent
                return False
            try:
                stat = await self._client.set(self.path, data, version=previous.version)
            except BadVersionError:
                op.outcome("contention")
                # Someone wrote first: catch up now rather than when the watch says so.
                # A value that is not a count is left to the watcher to report.
                with contextlib.suppress(CoordinationError):
                    data, stat = await self._client.get(self.path)
                    self._update(VersionedValue(stat.version, self._decode(data)), stat.mzxid)
                return False
            except NoNodeError:
                op.outcome("missing")
                return False
            op.outcome("set")
            self._update(VersionedValue(stat.version, new), stat.mzxid)
            return True

    async def set_count(self, new: int) -> None:
        """Set ``new`` unconditionally."""
        data = self._encode(new)
        with _telemetry.span("aiocoord.counter.set", self._tags) as op:
            stat = await self._client.set(self.path, data)
            op.outcome("set")
        self._update(VersionedValue(stat.version, new), stat.mzxid)

    def changes(self) -> ChangeStream[int]:
        """The values notified from now on (see the class), as an async iterator."""
        return self._changes.subscribe()

    def add_listener(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(count)`` on every notification (see the class)."""
        self._changes.add_listener(callback)

    def remove_listener(self, callback: Callable[[int], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._changes.remove_listener(callback)
