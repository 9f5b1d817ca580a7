"""Distributed atomic numbers on versioned compare-and-set (Curator's DistributedAtomic*).

A counter is one znode holding the value in Curator's encoding (8-byte
big-endian for a long, 4-byte for an int). Every change reads the value and
its version and writes the new value only if the version is unchanged; on a
conflict it retries under a retry policy, then optionally takes a lock
(``PromotedToLock``) and tries again with the field to itself.

Outcomes are honest. ``succeeded`` is True only for a write the server
confirmed, False only when nothing was applied; a write whose reply was lost
with the connection raises :class:`OutcomeUnknownError` instead.

Concurrent ``add`` calls on one counter from one process are coalesced: while
a write is in flight the next calls queue, and one versioned write then applies
them all, each caller getting the pre- and post-value it would have seen had
the calls run one after another in arrival order (bounds included).

Across processes, a coalesced batch whose compare-and-set lost joins the
counter's combining queue (``_combining``) instead of retrying: the first in
line applies every queued batch in one transaction, so contention makes
batches, not retries, and nobody is starved.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

from ... import _telemetry
from ..._checks import check_flag, check_int, check_recipe_acl, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    BoundExceededError,
    ConnectionLossError,
    CounterOverflowError,
    InvalidArgumentError,
    NoConnectionError,
    NodeExistsError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
)
from ..._session import Client, ExponentialBackoff, RetryNTimes, RetryPolicy
from ..._types import ACL, Codec, Stat
from .._kit import recipe_path
from ..locks._mutex import Mutex
from ._adds import AddQueue, AddRequest, AtomicFailure, AtomicStats, AtomicValue
from ._arith import LONG_MAX, LONG_MIN, Denied, Entry, Grant, bounded, grant_all
from ._combining import Combiner, combining_queue

__all__ = [
    "AtomicBytes",
    "AtomicInt",
    "AtomicLong",
    "PromotedToLock",
]

T = TypeVar("T")

DEFAULT_RETRY = ExponentialBackoff(base_sleep=0.001, max_retries=60, max_sleep=0.05)
"""Compare-and-set retries when none is given and adds are not combined:
jittered exponential back-off.

Measured with 8 and 32 sessions on one counter: a fixed short pause (Curator's
usual RetryNTimes) lets every loser retry into the next winner's write, and
throughput collapses; spreading the losers out lets the last winner, whose
remembered version is current, chain several increments at one round trip
each. About 2.5 times the increments per second, and none given up.
"""

PROBE_EVERY = 4
"""A combining counter's direct writes look at its queue once in this many."""


@dataclass(frozen=True)
class PromotedToLock:
    """After the optimistic retries fail, take a Mutex at ``lock_path`` and retry.

    ``max_lock_time`` bounds the wait for the lock (None: wait); ``retry``
    governs the attempts made while holding it.
    """

    lock_path: str
    max_lock_time: float | None = None
    retry: RetryPolicy = field(default_factory=lambda: RetryNTimes(10, 0.001))


def _encode(codec: Codec[T], value: T, path: str | None = None) -> bytes:
    """``codec.encode``, reporting a number too wide for the counter as CounterOverflowError
    (and, with ``path``, a value of the wrong type as ArgumentTypeError naming it)."""
    try:
        return codec.encode(value)
    except ArgumentTypeError as error:
        if path is None:
            raise
        expected = "an int" if codec is not Codec.BYTES else "bytes"
        raise ArgumentTypeError(error.argument, expected, value, path) from None
    except OverflowError as error:
        where = "" if path is None else f"{path!r}: "
        raise CounterOverflowError(f"{where}{error}") from None


# --- one compare-and-set engine per counter node and process ---------------------


class _Refused:
    """``make`` returns this to decline writing (a bound or a mismatch)."""

    def __init__(self, reason: AtomicFailure) -> None:
        self.reason = reason


@dataclass
class _Attempt(Generic[T]):
    done: bool
    pre: T
    post: T
    refused: AtomicFailure | None = None


class _Engine(Generic[T]):
    """Reads, compares and sets one node; remembers the last version it saw.

    The memory saves the read on the next call: a write tried on the
    remembered version either applies (nobody wrote in between) or fails
    with BadVersion, which costs one round trip and a fresh read.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        codec: Codec[T],
        zero: T,
        acl: tuple[ACL, ...] | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.codec = codec
        self.zero = zero
        self.acl = acl
        """The ACL of the node (and missing parents) if this engine creates it."""
        self._known: tuple[T, int] | None = None
        self.queue: str | None = None
        """The combining queue to look at with each write, if adds are combined."""
        self._queue_busy = False
        self._writes = 0
        self._may_have_queue = True
        """False while the node's last stat we saw had no child: no combining
        queue exists, so a write need not look at it."""

    def queue_busy(self) -> bool:
        """Whether a write saw requests waiting in the combining queue (and forget it)."""
        busy, self._queue_busy = self._queue_busy, False
        return busy

    def forget(self) -> None:
        self._known = None

    def remember(self, value: T, version: int) -> None:
        """What a write made elsewhere (a combined transaction) left in the node."""
        self._known = (value, version)
        self._may_have_queue = True

    async def read(self) -> tuple[T, int]:
        """(value, version); version -1 when the node does not exist (value: zero)."""
        client = self.client
        while True:
            try:
                data, stat = await client.get(self.path)
            except NoNodeError:
                self._known = None
                return self.zero, -1
            except NoConnectionError:
                raise  # waited as long as allowed: repeating would wait again
            except (ConnectionLossError, SessionExpiredError):
                continue  # a read is safe to repeat; requests wait while suspended
            # An empty node reads as zero, as Curator's does.
            value = self.codec.decode(data, self.path) if data else self.zero
            self._known = (value, stat.version)
            self._may_have_queue = stat.num_children > 0
            return value, stat.version

    async def attempt(self, make: Callable[[T], T | _Refused]) -> _Attempt[T]:
        """One compare-and-set: True when written, False on a conflict (nothing applied)."""
        known = self._known
        fresh = known is None
        value, version = known if known is not None else await self.read()
        new = make(value)
        if isinstance(new, _Refused) and not fresh:
            # Never refuse on a remembered value: it may be stale.
            value, version = await self.read()
            fresh = True
            new = make(value)
        if isinstance(new, _Refused):
            return _Attempt(False, value, value, new.reason)
        data = _encode(self.codec, new, self.path)
        stat = await self._write(data, version)
        if stat is None:
            self._known = None
            return _Attempt(False, value, value)
        self._known = (new, stat.version)
        self._may_have_queue = stat.num_children > 0
        return _Attempt(True, value, new)

    async def _write(self, data: bytes, version: int) -> Stat | None:
        client = self.client
        try:
            if version < 0:
                _path, stat = await client.create_with_stat(
                    self.path, data, make_parents=True, acl=self.acl
                )
                return stat
            skip_probe = self._writes % PROBE_EVERY != 0
            self._writes += 1
            if self.queue is None or skip_probe or not self._may_have_queue:
                return await client.set(self.path, data, version=version)
            # Look at the combining queue in the same round trip: requests
            # waiting there mean other processes are queueing, and a writer that
            # keeps winning would starve their combined write. Every few writes
            # suffices (a starved combiner waits that many of ours at most),
            # and spares an uncontended counter a request per write. A counter
            # whose last stat showed no child has no queue at all (it is the
            # node's only child): the next reply's stat tells when one appears,
            # so a counter nobody has queued on pays one request per write.
            probe, written = await (
                client.pipeline().exists(self.queue).set(self.path, data, version=version).execute()
            )
            self._queue_busy = isinstance(probe, Stat) and probe.num_children > 0
            if isinstance(written, _LOST_RACE):
                return None  # not raised: its traceback would hold this frame, a cycle
            if isinstance(written, Exception):
                raise written
            written_stat: Stat = written
            return written_stat
        except _LOST_RACE:
            # Lost the race (or the write never left before the session went):
            # nothing was applied.
            return None
        except NoConnectionError:
            raise
        except ConnectionLossError as error:
            if error.sent:
                raise OutcomeUnknownError(self.path) from error
            return None

    async def force(self, value: T) -> None:
        data = _encode(self.codec, value, self.path)
        client = self.client
        while True:
            try:
                stat = await client.set(self.path, data)
            except NoNodeError:
                try:
                    _path, stat = await client.create_with_stat(
                        self.path, data, make_parents=True, acl=self.acl
                    )
                except NodeExistsError:
                    continue
            except NoConnectionError:
                raise
            except ConnectionLossError as error:
                if error.sent:
                    raise OutcomeUnknownError(self.path) from error
                continue
            self._known = (value, stat.version)
            return


_LOST_RACE = (BadVersionError, NoNodeError, NodeExistsError, SessionExpiredError)
"""A compare-and-set write that failed with these was not applied."""


def _engine_for(
    client: Client, path: str, codec: Codec[T], zero: T, acl: tuple[ACL, ...] | None = None
) -> _Engine[T]:
    """The one engine of a counter path (and ACL) on ``client``, shared by its recipe objects."""
    engine: _Engine[T] = client.recipe_state(
        (_Engine, path, codec, acl), lambda: _Engine(client, path, codec, zero, acl)
    )
    return engine


# --- the retry / promotion loop ------------------------------------------------


async def _run_cas(
    engine: _Engine[T],
    make: Callable[[T], T | _Refused],
    retry: RetryPolicy,
    promoted: PromotedToLock | None,
    batch_size: int = 1,
) -> tuple[_Attempt[T], AtomicStats]:
    stats = AtomicStats(batch_size=batch_size)
    start = time.monotonic()
    outcome = await _tries(engine, make, retry, stats, promoted=False)
    stats.optimistic_time = time.monotonic() - start
    if outcome.done or outcome.refused or promoted is None:
        return outcome, stats
    start = time.monotonic()
    lock = Mutex(engine.client, promoted.lock_path, acl=engine.acl)
    try:
        if await lock.acquire(timeout=promoted.max_lock_time):
            try:
                outcome = await _tries(engine, make, promoted.retry, stats, promoted=True)
            finally:
                await lock.release()
    finally:
        stats.promoted_time = time.monotonic() - start
    return outcome, stats


async def _tries(
    engine: _Engine[T],
    make: Callable[[T], T | _Refused],
    retry: RetryPolicy,
    stats: AtomicStats,
    *,
    promoted: bool,
) -> _Attempt[T]:
    start = time.monotonic()
    failures = 0
    while True:
        outcome = await engine.attempt(make)
        if promoted:
            stats.promoted_tries += 1
        else:
            stats.optimistic_tries += 1
        if outcome.done or outcome.refused:
            return outcome
        failures += 1
        pause = retry.delay(failures, time.monotonic() - start)
        if pause is None:
            return outcome
        if pause > 0:
            await anyio.sleep(pause)


def _result(outcome: _Attempt[T], stats: AtomicStats) -> AtomicValue[T]:
    if outcome.done:
        return AtomicValue(True, outcome.pre, outcome.post, stats)
    reason = outcome.refused or AtomicFailure.CONTENTION
    return AtomicValue(False, outcome.pre, outcome.pre, stats, reason)


# --- coalescing ---------------------------------------------------------------------


class _Batcher(AddQueue):
    """Applies each batch of adds on one counter node in one write.

    With a combiner, a batch whose compare-and-set lost goes to the
    cross-process combining queue, and so do the batches after it until one
    is applied alone there (contention is over).

    A cancel leaves it consistent (as AddQueue requires): each write is
    atomic, and a combining request whose caller is cancelled is taken back
    out of the queue.
    """

    def __init__(
        self,
        engine: _Engine[int],
        retry: RetryPolicy,
        promoted: PromotedToLock | None,
        combiner: Combiner | None,
        tags: _telemetry.Tags,
    ) -> None:
        super().__init__(engine.client, f"aiocoord-counter-batcher {engine.path}")
        self._tags = tags
        self._engine = engine
        self._retry = retry
        self._promoted = promoted
        self._combiner = combiner
        self._queued = False

    async def apply(self, batch: list[AddRequest]) -> None:
        entries: list[Entry] = [(r.delta, r.lower, r.upper) for r in batch]
        grants: list[Grant] = []
        combiner = self._combiner
        if combiner is None or not self._queued:

            def make(value: int) -> int | _Refused:
                grants[:], final = grant_all(value, entries)
                if all(isinstance(g, Denied) for g in grants):
                    return _Refused(AtomicFailure.BOUND)
                return final

            outcome, stats = await _run_cas(
                self._engine, make, self._retry, self._promoted, batch_size=len(batch)
            )
            if len(batch) > 1 and (outcome.done or outcome.refused):
                _telemetry.add("aiocoord.counter.combined_batches", 1, self._local_tags())
            if outcome.done or outcome.refused or combiner is None:
                contended = not (outcome.done or outcome.refused)
                self._settle(batch, None if contended else grants, stats, outcome.pre)
                if combiner is not None and self._engine.queue_busy():
                    self._queued = True  # others queue: join them next time
                return
            self._queued = True
        else:
            stats = AtomicStats(batch_size=len(batch))
        start = time.monotonic()
        combined = await combiner.submit(entries)
        stats.queued_time = time.monotonic() - start
        stats.batch_size = combined.size
        if combined.size > 1:
            _telemetry.add("aiocoord.counter.combined_batches", 1, self._queue_tags())
        self._queued = not combined.alone
        self._engine.remember(combined.value, combined.version)
        grants, _final = grant_all(combined.pre, entries)
        self._settle(batch, grants, stats, combined.pre)

    def _local_tags(self) -> dict[str, object]:
        """Metric attributes of a batch coalesced in this process."""
        return self._tags.metric_with_outcome("coalesced")

    def _queue_tags(self) -> dict[str, object]:
        """Metric attributes of a batch combined across processes."""
        return self._tags.metric_with_outcome("combined")

    def _settle(
        self, batch: list[AddRequest], grants: list[Grant] | None, stats: AtomicStats, pre: int
    ) -> None:
        """Give each caller its result; ``grants`` None: the retries ran out (contention).

        An add refused by its bound reports the value it was refused at: the
        batch's start plus the adds granted before it.
        """
        current = pre
        for i, request in enumerate(batch):
            granted = None if grants is None else grants[i]
            if isinstance(granted, tuple):
                current = granted[1]  # applied, even for a caller no longer waiting
            if request.future.done():
                continue
            if granted is None:
                value: AtomicValue[int] = AtomicValue(
                    False, pre, pre, stats, AtomicFailure.CONTENTION
                )
            elif isinstance(granted, tuple):
                value = AtomicValue(True, granted[0], granted[1], stats)
            elif granted is Denied.OVERFLOW:
                request.future.set_exception(
                    CounterOverflowError(
                        f"{self._engine.path!r}: adding {request.delta} overflows 64 bits"
                    )
                )
                continue
            else:
                value = AtomicValue(False, current, current, stats, AtomicFailure.BOUND)
            request.future.set_result(value)


# --- public types ---------------------------------------------------------------------


class _Atomic(Generic[T]):
    """What every atomic value shares: read, compare-and-set, set, initialize."""

    _codec: Codec[T]
    _zero: T
    """What a missing or empty node reads as."""

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        retry: RetryPolicy | None = None,
        promoted_to_lock: PromotedToLock | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "counter")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ArgumentTypeError("retry", "an aiocoord.RetryPolicy or None", retry, path)
        if promoted_to_lock is not None:
            if not isinstance(promoted_to_lock, PromotedToLock):
                raise ArgumentTypeError(
                    "promoted_to_lock", "an aiocoord.PromotedToLock or None", promoted_to_lock, path
                )
            recipe_path(client, promoted_to_lock.lock_path, "promotion lock")
            check_timeout(promoted_to_lock.max_lock_time, "max_lock_time", path=path)
            lock_retry = promoted_to_lock.retry
            if not isinstance(lock_retry, RetryPolicy):
                raise ArgumentTypeError(
                    "promoted_to_lock.retry", "an aiocoord.RetryPolicy", lock_retry, path
                )
        self._client = client
        self.path = path
        self._retry = retry or DEFAULT_RETRY
        self._promoted = promoted_to_lock
        self._acl = check_recipe_acl(acl, path)
        """The ACL of the counter's node, its promotion lock's, and missing parents'."""
        kind = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()  # atomic_long
        self._tags = _telemetry.recipe_tags(client.telemetry, kind, path, client.namespace)

    def __repr__(self) -> str:
        promoted = self._promoted
        lock = f" promoted_to_lock={promoted.lock_path!r}" if promoted is not None else ""
        return f"<{type(self).__name__} {self.path!r}{lock}>"

    def _engine(self, *, combining: bool = False) -> _Engine[T]:
        engine = _engine_for(self._client, self.path, self._codec, self._zero, self._acl)
        if combining:
            engine.queue = combining_queue(self.path)
        return engine

    async def _update(self, make: Callable[[T], T | _Refused]) -> AtomicValue[T]:
        outcome, stats = await _run_cas(self._engine(), make, self._retry, self._promoted)
        return _result(outcome, stats)

    async def get(self) -> AtomicValue[T]:
        """The current value (zero if the node does not exist), in pre- and post-value."""
        value, _version = await self._engine().read()
        return AtomicValue(True, value, value, AtomicStats(optimistic_tries=1))

    async def compare_and_set(self, expected: T, new: T) -> AtomicValue[T]:
        """Set ``new`` only if the node exists and holds ``expected``.

        One attempt: a conflict, another value or a missing node gives
        ``succeeded=False, reason=AtomicFailure.MISMATCH``. A missing node is never
        created here, although :meth:`get` reads it as zero: as Curator's compareAndSet.
        """
        _encode(self._codec, expected, self.path)
        _encode(self._codec, new, self.path)
        engine = self._engine()

        def make(value: T) -> T | _Refused:
            return new if value == expected else _Refused(AtomicFailure.MISMATCH)

        start = time.monotonic()
        # Compare against the value now, not a remembered one.
        value, version = await engine.read()
        if version < 0 or value != expected:
            stats = AtomicStats(optimistic_tries=1, optimistic_time=time.monotonic() - start)
            return AtomicValue(False, value, value, stats, AtomicFailure.MISMATCH)
        outcome = await engine.attempt(make)  # writes on the version just read
        stats = AtomicStats(optimistic_tries=1, optimistic_time=time.monotonic() - start)
        if not outcome.done and not outcome.refused:
            return AtomicValue(False, outcome.pre, outcome.pre, stats, AtomicFailure.MISMATCH)
        return _result(outcome, stats)

    async def set(self, new: T) -> AtomicValue[T]:
        """Set ``new`` whatever the current value, by compare-and-set under the retry policy."""
        _encode(self._codec, new, self.path)
        return await self._update(lambda _value: new)

    async def force_set(self, new: T) -> None:
        """Write ``new`` unconditionally (creating the node if needed)."""
        await self._engine().force(new)

    async def initialize(self, value: T) -> bool:
        """Create the node with ``value``; False (and no change) if it already exists."""
        data = _encode(self._codec, value, self.path)
        try:
            await self._client.create(self.path, data, make_parents=True, acl=self._acl)
        except NodeExistsError:
            return False
        except ConnectionLossError as error:
            if error.sent:
                raise OutcomeUnknownError(self.path) from error
            raise
        return True


class _AtomicNumber(_Atomic[int]):
    """Shared implementation of AtomicLong and AtomicInt: arithmetic and bounds."""

    _codec = Codec.LONG
    _zero = 0

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        retry: RetryPolicy | None = None,
        promoted_to_lock: PromotedToLock | None = None,
        coalesce: bool = True,
        combine: bool | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        super().__init__(client, path, retry=retry, promoted_to_lock=promoted_to_lock, acl=acl)
        self._coalesce = check_flag(coalesce, "coalesce", path=path)
        can_combine = self._coalesce and promoted_to_lock is None and self._codec is Codec.LONG
        if combine is None:
            combine = can_combine
        elif check_flag(combine, "combine", path=path) and not can_combine:
            raise InvalidArgumentError(
                "combine",
                "needs a coalescing AtomicLong without promoted_to_lock "
                "(combining replaces the promotion lock)",
                path,
            )
        self._combine = combine
        # Combining adds make one compare-and-set, then queue: retrying into
        # other writers' commits is what the queue replaces.
        self._add_retry = RetryNTimes(0, 0) if combine and retry is None else self._retry
        self._batcher: _Batcher | None = None
        """This path's batcher on the client, once looked up (see add)."""

    async def add(
        self,
        delta: int,
        *,
        lower: int | None = None,
        upper: int | None = None,
        raise_on_bound: bool = False,
    ) -> AtomicValue[int]:
        """Add ``delta``; with ``lower``/``upper``, only if the result stays within them.

        A refused bounded change returns ``succeeded=False, reason=AtomicFailure.BOUND``
        (or raises BoundExceededError with ``raise_on_bound``). Nothing ever
        takes the value outside the bounds, whatever the contention or faults.
        """
        check_int(delta, "delta", path=self.path)
        for bound, name in ((lower, "lower"), (upper, "upper")):
            if bound is not None:
                check_int(bound, name, path=self.path)
        check_flag(raise_on_bound, "raise_on_bound", path=self.path)
        if lower is not None and upper is not None and lower > upper:
            raise InvalidArgumentError("bounds", f"lower ({lower}) > upper ({upper})", self.path)
        if not (self._codec is Codec.LONG and LONG_MIN <= delta <= LONG_MAX):
            _encode(self._codec, delta, self.path)  # a delta that does not fit is an overflow
        with _telemetry.span(
            "aiocoord.counter.add", self._tags, duration="aiocoord.counter.add.duration"
        ) as op:
            if self._coalesce and self._codec is Codec.LONG:
                # Every object on this path and client with these options shares
                # one batcher; each remembers it (a lookup hashes the options).
                batcher = self._batcher
                if batcher is None:
                    batcher = self._batcher = self._client.recipe_state(
                        (
                            _Batcher,
                            self.path,
                            self._add_retry,
                            self._promoted,
                            self._combine,
                            self._acl,
                        ),
                        lambda: _Batcher(
                            self._engine(combining=self._combine),
                            self._add_retry,
                            self._promoted,
                            Combiner(self._client, self.path, self._acl) if self._combine else None,
                            self._tags,
                        ),
                    )
                result = await batcher.add(delta, lower, upper)
            else:
                codec = self._codec

                def make(value: int) -> int | _Refused:
                    granted = bounded(value, delta, lower, upper, codec)
                    if isinstance(granted, tuple):
                        return granted[1]
                    return _Refused(AtomicFailure.BOUND)

                result = await self._update(make)
            op.outcome("added" if result.succeeded else str(result.reason))
            if op.recording:
                stats = result.stats
                op.set("aiocoord.attempts", stats.optimistic_tries + stats.promoted_tries)
                op.set("aiocoord.batch_size", stats.batch_size)
                op.set("aiocoord.combined", stats.batch_size > 1)
                op.set("aiocoord.promoted", stats.promoted_tries > 0)
        if raise_on_bound and result.reason is AtomicFailure.BOUND:
            raise BoundExceededError(self.path, result.pre_value, delta, lower, upper)
        return result

    async def increment(
        self,
        *,
        lower: int | None = None,
        upper: int | None = None,
        raise_on_bound: bool = False,
    ) -> AtomicValue[int]:
        """Add 1 (bounds as for :meth:`add`)."""
        return await self.add(1, lower=lower, upper=upper, raise_on_bound=raise_on_bound)

    async def decrement(
        self,
        *,
        lower: int | None = None,
        upper: int | None = None,
        raise_on_bound: bool = False,
    ) -> AtomicValue[int]:
        """Subtract 1 (bounds as for :meth:`add`)."""
        return await self.add(-1, lower=lower, upper=upper, raise_on_bound=raise_on_bound)

    async def subtract(
        self,
        delta: int,
        *,
        lower: int | None = None,
        upper: int | None = None,
        raise_on_bound: bool = False,
    ) -> AtomicValue[int]:
        """Subtract ``delta`` (bounds as for :meth:`add`)."""
        return await self.add(
            -check_int(delta, "delta", path=self.path),
            lower=lower,
            upper=upper,
            raise_on_bound=raise_on_bound,
        )


class AtomicLong(_AtomicNumber):
    """A 64-bit signed counter (Curator's DistributedAtomicLong, same bytes on the wire).

    ``await counter.increment()`` returns an :class:`AtomicValue`: check
    ``succeeded``; on ``OutcomeUnknownError`` the increment may or may not
    have been applied. Concurrent ``add`` calls on the same path from one
    process share writes (``coalesce=True``, the default): same results,
    fewer round trips. Across processes, an add whose compare-and-set lost
    queues under ``<path>/combining`` and is applied with the others queued
    there in one transaction (``combine``, on unless ``coalesce=False`` or a
    ``promoted_to_lock`` is given; ``retry`` then counts the compare-and-set
    attempts before queueing, by default one).
    """


class AtomicInt(_AtomicNumber):
    """A 32-bit signed counter (Curator's DistributedAtomicInteger). Not coalesced."""

    _codec = Codec.INT

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        retry: RetryPolicy | None = None,
        promoted_to_lock: PromotedToLock | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        super().__init__(
            client, path, retry=retry, promoted_to_lock=promoted_to_lock, coalesce=False, acl=acl
        )


class AtomicBytes(_Atomic[bytes]):
    """Atomic updates of a node's raw bytes with a function of the current bytes
    (Curator's DistributedAtomicValue)."""

    _codec = Codec.BYTES
    _zero = b""

    async def update(self, function: Callable[[bytes], bytes]) -> AtomicValue[bytes]:
        """Replace the value with ``function(current)`` (may run more than once).

        ``function`` must return bytes: anything else raises ArgumentTypeError
        and nothing is written.
        """
        if not callable(function):
            raise ArgumentTypeError("function", "a callable", function, self.path)
        return await self._update(function)
