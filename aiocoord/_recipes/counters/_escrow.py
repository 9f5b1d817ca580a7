"""A bounded counter split over several znodes (escrow, as in the demarcation protocol).

One znode can take one compare-and-set at a time: every versioned write waits
for the previous one, so a bounded :class:`~aiocoord.AtomicLong` shared by many
processes goes no faster than one write commit per change. Here the bound is
split instead. Each shard holds a part of the counter and a quota, the room it
may use; a change takes room from one shard with one versioned write of that
shard alone, so writers on different shards never wait for each other. A shard
that runs out takes room from the others in one transaction (a versioned set
of every shard involved), so the quotas always add up to exactly the range the
bound allows, at every instant, and no shard can sell what the total does not
have.

Layout (aiocoord's own: Curator has no such recipe)::

    <path>              the configuration, written once when the counter is made:
                        b"ESCR", format 1 (1 byte), shards (uint32), lower, upper,
                        initial (int64 each), all big-endian: 33 bytes
    <path>/shard-<i>    for i in 0 .. shards-1: count and quota (uint64 each,
                        big-endian: 16 bytes), with 0 <= count <= quota

The total is ``lower + sum(count)``, and ``sum(quota) == upper - lower``
always. A shard can grow by ``quota - count`` (its free room) and shrink by
``count``, so the total stays within ``[lower, upper]`` whatever the shards do.
Moving room between shards is a transaction that sets every shard involved at
the version it was read at: it keeps the sum of quotas unchanged, and applies
entirely or not at all.

A refusal ("sold out", :attr:`AtomicFailure.BOUND`) is decided only on a
consistent view of every shard. The view is taken in one round trip: a write
of the configuration node (same bytes) followed by a read of every shard; the
server applies a session's requests in order, so every read sees the state at
or after that write's zxid, and a shard whose ``mzxid`` is not newer than that
zxid held the value read at that zxid. When every shard passes, the view is
the counter's exact state at that zxid, which lies within the call; otherwise
it is taken again. (A read followed by a transaction of version checks proves
the same, but some shard often changes within its two round trips: with 8
sessions incrementing on a ``forceSync=yes`` server, 50 views took 791 such
attempts, against 124 with the stamped read.) A view costs one write, so
:meth:`ShardedCounter.get` is dearer than AtomicLong's.

A process writes its home shard, picked from its session id; after a conflict
it moves to another one half the time, so that writers spread over the shards.
A change the home shard cannot take reads every shard: what the total allows
is granted, the home shard taking what it lacks (plus half of what the richest
other shard has, :func:`plan_moves`) in the same transaction as the change,
and what it does not is refused on a consistent view, or, beside grants, in a
transaction that also checks every other shard's version. A write whose reply
was lost raises :class:`OutcomeUnknownError` for the changes it carried, as
AtomicLong does; one never sent is tried again.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import anyio

from ... import _paths, _telemetry
from ..._checks import check_flag, check_int, check_recipe_acl
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    BoundExceededError,
    ConnectionLossError,
    CoordinationError,
    CorruptValueError,
    InvalidArgumentError,
    NoConnectionError,
    NodeExistsError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
)
from ..._session import Client, ExponentialBackoff, RetryPolicy, Transaction
from ..._types import ACL, Stat
from .._kit import recipe_path
from ._adds import AddQueue, AddRequest, AtomicFailure, AtomicStats, AtomicValue
from ._arith import LONG_MAX, LONG_MIN

__all__ = [
    "CONFIG_MAGIC",
    "MAX_SHARDS",
    "SHARD_PREFIX",
    "CounterShard",
    "Move",
    "ShardedCounter",
    "grant",
    "initial_shards",
    "plan_moves",
    "split",
]

SHARD_PREFIX = "shard-"
CONFIG_MAGIC = b"ESCR"
_FORMAT = 1
_CONFIG = struct.Struct(">4sBIqqq")
_SHARD = struct.Struct(">QQ")
MAX_SHARDS = 1024
"""A transaction may name every shard: this keeps it far below the server's request limit."""

DEFAULT_RETRY = ExponentialBackoff(base_sleep=0.001, max_retries=60, max_sleep=0.05)
"""Attempts when none is given: jittered exponential back-off. A conflict on a shard
usually means another process writes it too, so the next try often moves to
another shard."""


# --- pure rules ----------------------------------------------------------------------


def split(amount: int, parts: int) -> list[int]:
    """``amount`` (>= 0) in ``parts`` near-equal parts, the larger ones first."""
    base, extra = divmod(amount, parts)
    return [base + (i < extra) for i in range(parts)]


def initial_shards(parts: int, lower: int, upper: int, initial: int) -> list[tuple[int, int]]:
    """(count, quota) of each shard of a new counter at ``initial``.

    Quotas and counts are both split evenly, larger parts first, so every
    shard's count fits its quota.
    """
    counts = split(initial - lower, parts)
    quotas = split(upper - lower, parts)
    return list(zip(counts, quotas, strict=True))


def grant(value: int, deltas: Sequence[int], lower: int, upper: int) -> list[int | None]:
    """Apply ``deltas`` one after another to ``value``: for each, the value after it
    if that stays within ``[lower, upper]``, else None (refused, value unchanged)."""
    posts: list[int | None] = []
    for delta in deltas:
        new = value + delta
        if lower <= new <= upper:
            posts.append(new)
            value = new
        else:
            posts.append(None)
    return posts


@dataclass(frozen=True, slots=True)
class Move:
    """What one donor shard hands the shard that needs room.

    The donor's count shrinks by ``count`` and its quota by ``count + room``;
    the receiving shard's count grows by ``count`` and its quota by
    ``count + room``. The sum of quotas does not change, nor does the total.
    ``count`` lets the receiver shrink (decrements), ``room`` lets it grow.
    """

    donor: int
    count: int
    room: int


def _take(amounts: Sequence[int], home: int, want: int) -> dict[int, int]:
    """Take ``want`` from the shards other than ``home``, richest first."""
    taken: dict[int, int] = {}
    for i in sorted((i for i in range(len(amounts)) if i != home), key=lambda i: -amounts[i]):
        if want <= 0:
            break
        give = min(want, amounts[i])
        if give > 0:
            taken[i] = give
            want -= give
    return taken


def plan_moves(
    shards: Sequence[tuple[int, int]], home: int, deltas: Sequence[int]
) -> list[Move] | None:
    """The moves that let shard ``home`` apply ``deltas`` in order, keeping
    ``0 <= count <= quota`` after each: [] if it can as it is, None if all
    shards together cannot (the total would leave its bounds).

    ``shards`` holds (count, quota) per shard. A shard that must move takes
    what it lacks plus half of what the richest other shard has in that
    direction, so that its next changes need no move for a while; donors give
    richest first, so a move usually involves one other shard.
    """
    counts = [count for count, _quota in shards]
    frees = [quota - count for count, quota in shards]
    running = highest = lowest = 0
    for delta in deltas:
        running += delta
        highest, lowest = max(highest, running), min(lowest, running)
    if highest > sum(frees) or -lowest > sum(counts):
        return None
    rooms = _take(frees, home, _want(frees, home, highest - frees[home]))
    given = _take(counts, home, _want(counts, home, -lowest - counts[home]))
    return [
        Move(donor, given.get(donor, 0), rooms.get(donor, 0))
        for donor in sorted(rooms.keys() | given.keys())
    ]


def _want(amounts: Sequence[int], home: int, need: int) -> int:
    """What the home shard asks for: nothing if it needs nothing, else what it
    needs plus half of the richest other shard's amount (as far as they have it)."""
    if need <= 0:
        return 0
    others = [amount for i, amount in enumerate(amounts) if i != home]
    return min(sum(others), need + (max(others) + 1) // 2)


# --- encoding ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Config:
    shards: int
    lower: int
    upper: int
    initial: int

    @property
    def span(self) -> int:
        return self.upper - self.lower

    def encode(self) -> bytes:
        return _CONFIG.pack(
            CONFIG_MAGIC, _FORMAT, self.shards, self.lower, self.upper, self.initial
        )

    @classmethod
    def decode(cls, data: bytes, path: str) -> _Config:
        expected = "a ShardedCounter configuration"
        if len(data) != _CONFIG.size:
            raise CorruptValueError(path, data, expected)
        magic, version, shards, lower, upper, initial = _CONFIG.unpack(data)
        if (
            magic != CONFIG_MAGIC
            or version != _FORMAT
            or not 1 <= shards <= MAX_SHARDS
            or not lower <= initial <= upper
        ):
            raise CorruptValueError(path, data, expected)
        return cls(shards, lower, upper, initial)


def _decode_shard(data: bytes, path: str) -> tuple[int, int]:
    if len(data) == _SHARD.size:
        count, quota = _SHARD.unpack(data)
        if count <= quota:
            return count, quota
    raise CorruptValueError(path, data, "a ShardedCounter shard (count <= quota, 16 bytes)")


@dataclass(frozen=True, slots=True)
class _Seen:
    """A shard as last read or written by this process."""

    count: int
    quota: int
    version: int
    mzxid: int = 0


class _Reading(NamedTuple):
    shards: list[_Seen]
    consistent: bool
    """Every shard's value held at one instant within the read (see the module docstring)."""


def _settle(request: AddRequest, result: AtomicValue[int]) -> None:
    """Hand a request its result, unless its caller stopped waiting (cancelled)."""
    if not request.future.done():
        request.future.set_result(result)


class _Lost(Exception):
    """A write's reply was lost: it may or may not have been applied."""

    def __init__(self, path: str, requests: Sequence[AddRequest]) -> None:
        super().__init__(path)
        self.path = path
        self.requests = requests


W = TypeVar("W")


async def _unless_conflict(
    write: Callable[[], Awaitable[W]], path: str, requests: Sequence[AddRequest]
) -> W | None:
    """``write()``'s result, or None if nothing was applied (a conflict, or a
    request that never left); _Lost if its reply was lost after it was sent."""
    try:
        return await write()
    except (BadVersionError, NoNodeError, SessionExpiredError):
        return None
    except NoConnectionError:
        raise
    except ConnectionLossError as error:
        if error.sent:
            raise _Lost(path, requests) from error
        return None


# --- the engine: one per counter and client --------------------------------------------


class _Escrow(AddQueue):
    """Applies adds to one sharded counter for one client; remembers the shards
    it last saw and the shard this process writes (its home).

    A cancel leaves it consistent (as AddQueue requires): every write is one
    versioned write or transaction, and what it remembers of the shards is
    only a hint.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        config: _Config,
        retry: RetryPolicy,
        acl: tuple[ACL, ...] | None,
    ) -> None:
        super().__init__(client, f"aiocoord-sharded-counter {path}")
        self.path = path
        self.config = config
        self.retry = retry
        self.acl = acl
        """The ACL of the nodes this engine creates (None: the client's default)."""
        self.config_data = config.encode()
        self.paths = [_paths.join(path, f"{SHARD_PREFIX}{i}") for i in range(config.shards)]
        self._ready = False
        self._known: list[_Seen | None] = [None] * config.shards
        self._home: int | None = None
        self._random = random.Random()

    # --- making and checking the layout

    async def ensure(self) -> bool:
        """Make the counter's nodes if missing and check its configuration; True
        if this call made them."""
        if self._ready:
            return False
        created = False
        while True:
            try:
                data, _stat = await self.client.get(self.path)
            except NoNodeError:
                created = await self._create() or created
                continue
            except NoConnectionError:
                raise
            except (ConnectionLossError, SessionExpiredError):
                continue  # a read is safe to repeat
            self._check_config(data)
            self._ready = True
            return created

    async def _create(self) -> bool:
        config = self.config
        transaction = self.client.transaction().create(self.path, self.config_data, acl=self.acl)
        shards = initial_shards(config.shards, config.lower, config.upper, config.initial)
        for path, (count, quota) in zip(self.paths, shards, strict=True):
            transaction.create(path, _SHARD.pack(count, quota), acl=self.acl)
        try:
            await transaction.commit()
        except NodeExistsError:
            return False  # made by someone else: its configuration is checked next
        except NoNodeError:
            parent = _paths.parent(self.path)
            if parent == "/":
                raise  # the client's namespace itself is gone: nothing to make it under
            await self.client.ensure_path(parent, acl=self.acl)
            return False
        except NoConnectionError:
            raise
        except (ConnectionLossError, SessionExpiredError):
            return False  # made or not: the next read tells
        return True

    def _check_config(self, data: bytes) -> None:
        found = _Config.decode(data, self.path)
        ours = self.config
        if found == ours:
            return
        for name in ("shards", "lower", "upper", "initial"):
            if getattr(found, name) != getattr(ours, name):
                raise InvalidArgumentError(
                    name,
                    f"the sharded counter there was made with shards={found.shards}, "
                    f"lower={found.lower}, upper={found.upper}, initial={found.initial}; "
                    f"this one has {name}={getattr(ours, name)}",
                    self.path,
                )

    async def _missing(self, path: str) -> None:
        """A node of ours is gone: the whole counter (it is made again) or one shard (an error)."""
        self._ready = False
        self._known = [None] * self.config.shards
        while True:
            try:
                root = await self.client.exists(self.path)
            except NoConnectionError:
                raise
            except (ConnectionLossError, SessionExpiredError):
                continue
            break
        if root is not None and path != self.path:
            raise NoNodeError(path)  # someone deleted one shard: its part of the total is lost
        await self.ensure()

    # --- reading

    async def read_one(self, shard: int) -> _Seen:
        path = self.paths[shard]
        while True:
            try:
                data, stat = await self.client.get(path)
            except NoNodeError:
                await self._missing(path)
                continue
            except NoConnectionError:
                raise
            except (ConnectionLossError, SessionExpiredError):
                continue
            return self._remember(shard, data, stat)

    def _remember(self, shard: int, data: bytes, stat: Stat) -> _Seen:
        count, quota = _decode_shard(data, self.paths[shard])
        seen = _Seen(count, quota, stat.version, stat.mzxid)
        self._known[shard] = seen
        return seen

    async def read_all(self) -> _Reading:
        """Every shard in one round trip, behind a write that stamps the read with a zxid."""
        while True:
            pipeline = self.client.pipeline().set(self.path, self.config_data)
            for path in self.paths:
                pipeline.get(path)
            stamp, *reads = await pipeline.execute()
            outcomes = [stamp, *reads]
            if any(isinstance(o, NoConnectionError) for o in outcomes):
                raise next(o for o in outcomes if isinstance(o, NoConnectionError))
            if any(isinstance(o, ConnectionLossError | SessionExpiredError) for o in outcomes):
                continue  # the stamp changes nothing, so repeating it is safe
            if isinstance(stamp, NoNodeError):
                await self._missing(self.path)
                continue
            gone = [p for p, o in zip(self.paths, reads, strict=True) if isinstance(o, NoNodeError)]
            if gone:
                await self._missing(gone[0])
                continue
            for outcome in outcomes:
                if isinstance(outcome, CoordinationError):
                    raise outcome
            zxid = stamp.mzxid
            shards = [self._remember(i, data, stat) for i, (data, stat) in enumerate(reads)]
            return _Reading(shards, all(seen.mzxid <= zxid for seen in shards))

    async def snapshot(self) -> list[_Seen]:
        """Every shard at one instant within the call (retried until a read is consistent)."""
        await self.ensure()
        started = time.monotonic()
        failures = 0
        while True:
            reading = await self.read_all()
            if reading.consistent:
                if sum(seen.quota for seen in reading.shards) != self.config.span:
                    raise CorruptValueError(
                        self.path,
                        self.config_data,
                        f"a counter whose shard quotas add up to {self.config.span}",
                    )
                return reading.shards
            failures += 1
            pause = self.retry.delay(failures, time.monotonic() - started)
            await anyio.sleep(DEFAULT_RETRY.max_sleep if pause is None else pause)

    # --- writing

    async def _set_one(
        self, shard: int, seen: _Seen, count: int, batch: Sequence[AddRequest]
    ) -> Stat | None:
        """Set one shard's count at the version seen; None on a conflict (nothing applied)."""
        path = self.paths[shard]
        self._known[shard] = None
        data = _SHARD.pack(count, seen.quota)
        stat = await _unless_conflict(
            lambda: self.client.set(path, data, version=seen.version), path, batch
        )
        if stat is not None:
            self._known[shard] = _Seen(count, seen.quota, stat.version, stat.mzxid)
        return stat

    async def _commit(
        self, transaction: Transaction, path: str, granted: Sequence[AddRequest]
    ) -> list[str | Stat | None] | None:
        """Commit: the results, or None on a conflict (nothing applied)."""
        return await _unless_conflict(transaction.commit, path, granted)

    # --- one batch

    def home(self) -> int:
        """The shard this process writes: picked from the session id, moved by conflicts."""
        if self._home is None:
            seed = f"{self.client.session_id}:{self.path}"
            self._home = random.Random(seed).randrange(self.config.shards)
        return self._home

    def _hop(self, shard: int) -> int:
        n = self.config.shards
        if n == 1:
            return shard
        other = self._random.randrange(n - 1)
        return other + (other >= shard)

    async def add_alone(self, delta: int) -> AtomicValue[int]:
        """One change, not coalesced, starting on a random shard (calls of one
        process then spread over the shards instead of queueing on one)."""
        future: asyncio.Future[AtomicValue[int]] = asyncio.get_running_loop().create_future()
        start = self._random.randrange(self.config.shards)
        await self.apply([AddRequest(delta, None, None, future)], start)
        return future.result()

    async def apply(self, batch: list[AddRequest], shard: int | None = None) -> None:
        """Settle every request of ``batch``: applied, refused or given up.

        ``shard``: where to start (None: the home shard, which then follows
        where this process last wrote).
        """
        await self.ensure()
        sticky = shard is None
        at = self.home() if shard is None else shard
        stats = AtomicStats(batch_size=len(batch))
        started = time.monotonic()
        failures = 0
        pending = batch
        while True:
            pending = [r for r in pending if not r.future.done()]
            if not pending:
                return
            stats.optimistic_tries += 1
            try:
                settled = await self._local(at, pending, stats, started)
                if settled is None:
                    settled = await self._global(at, pending, stats, started)
            except _Lost as lost:
                for request in lost.requests:
                    if not request.future.done():
                        request.future.set_exception(OutcomeUnknownError(lost.path))
                continue  # the others (refused on a view that was not confirmed) try again
            if settled:
                if sticky:
                    self._home = at
                continue
            failures += 1
            pause = self.retry.delay(failures, time.monotonic() - started)
            if pause is None:
                seen = self._known[at]
                value = seen.count if seen is not None else 0
                stats.optimistic_time = time.monotonic() - started
                for request in pending:
                    result = AtomicValue(False, value, value, stats, AtomicFailure.CONTENTION)
                    _settle(request, result)
                return
            if self._random.random() < 0.5:
                # Another writer uses this shard: half the time move away, so that
                # writers spread over the shards instead of taking turns on one.
                at = self._hop(at)
                self._known[at] = None
                if sticky:
                    self._home = at
            if pause > 0:
                await anyio.sleep(pause)

    async def _local(
        self, shard: int, pending: list[AddRequest], stats: AtomicStats, started: float
    ) -> bool | None:
        """All of ``pending`` on one shard with one write: True when applied, False on a
        conflict, None if the shard (as last seen) has not the room."""
        seen = self._known[shard] or await self.read_one(shard)
        posts = grant(seen.count, [r.delta for r in pending], 0, seen.quota)
        if any(post is None for post in posts):
            return None
        last = posts[-1]
        assert last is not None
        if await self._set_one(shard, seen, last, pending) is None:
            return False
        stats.optimistic_time = time.monotonic() - started
        value = seen.count
        for request, post in zip(pending, posts, strict=True):
            assert post is not None
            _settle(request, AtomicValue(True, value, post, stats))
            value = post
        return True

    async def _global(
        self, home: int, pending: list[AddRequest], stats: AtomicStats, started: float
    ) -> bool:
        """Decide ``pending`` on a view of every shard: grant what the total allows
        (moving room to ``home`` if it lacks it), refuse the rest. False on a conflict."""
        reading = await self.read_all()
        shards = reading.shards
        config = self.config
        total = sum(seen.count for seen in shards)
        deltas = [r.delta for r in pending]
        totals = grant(total, deltas, 0, config.span)
        granted = [r for r, t in zip(pending, totals, strict=True) if t is not None]
        if not granted and not reading.consistent:
            return False  # a refusal needs an exact view: look again
        moves = plan_moves([(s.count, s.quota) for s in shards], home, [r.delta for r in granted])
        if moves is None:
            # Only an inconsistent view (room moving while it was read) can show
            # the shards short of what the total allows: look again.
            return False
        transaction = self.client.transaction()
        if granted:
            at = shards[home]
            count = at.count + sum(m.count for m in moves)
            quota = at.quota + sum(m.count + m.room for m in moves)
            final = count + sum(r.delta for r in granted)
            writes = {home: (final, quota)}
            for move in moves:
                donor = shards[move.donor]
                writes[move.donor] = (
                    donor.count - move.count,
                    donor.quota - move.count - move.room,
                )
            for i, (count, quota) in writes.items():
                transaction.set(self.paths[i], _SHARD.pack(count, quota), version=shards[i].version)
            if len(granted) < len(pending):
                # A refusal beside the grants: it holds only if no other shard
                # changed in between, so the transaction checks them all.
                for i, seen in enumerate(shards):
                    if i not in writes:
                        transaction.check(self.paths[i], seen.version)
            for i in writes:
                self._known[i] = None
            results = await self._commit(transaction, self.paths[home], granted)
            if results is None:
                return False
            for (i, (count, quota)), stat in zip(writes.items(), results, strict=False):
                if isinstance(stat, Stat):
                    self._known[i] = _Seen(count, quota, stat.version, stat.mzxid)
        stats.optimistic_time = time.monotonic() - started
        value = shards[home].count + sum(m.count for m in moves)
        for request, after in zip(pending, totals, strict=True):
            if after is None:
                before = config.lower + total
                _settle(request, AtomicValue(False, before, before, stats, AtomicFailure.BOUND))
                continue
            _settle(request, AtomicValue(True, value, value + request.delta, stats))
            value += request.delta
            total = after
        return True


# --- public ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CounterShard:
    """One shard of a :class:`ShardedCounter`, as :meth:`ShardedCounter.snapshot` reads it.

    The counter's total is ``lower`` plus every shard's ``count``; a shard may
    grow by ``free`` and shrink by ``count`` before it needs room from the others.
    """

    index: int
    count: int
    quota: int

    @property
    def free(self) -> int:
        """How much the shard may still grow: ``quota - count``."""
        return self.quota - self.count


class ShardedCounter:
    """A bounded counter that many processes can change at once: the range
    ``[lower, upper]`` is split into per-shard quotas (escrow).

    Each change is one versioned write of one shard, so processes writing
    different shards do not wait for each other; a shard that runs out takes
    room from the others in one transaction. Changes never take the total
    outside ``[lower, upper]``, and a change is refused (``reason`` is
    :attr:`AtomicFailure.BOUND`) only when the whole counter, read at one
    instant, has no room for it: never while another shard could still make it.

    Results are :class:`AtomicValue`\\ s. For an applied change, ``pre_value``
    and ``post_value`` are the count of the shard that took it, before and
    after (their difference is the delta); the total is :meth:`get`. For a
    refusal they are the exact total the refusal was based on. A write whose
    reply was lost raises :class:`OutcomeUnknownError`, as for AtomicLong.

    The nodes (aiocoord's own layout: Curator has no such recipe) are made on
    first use, or by :meth:`initialize`, with ``shards``, ``lower``, ``upper``
    and ``initial`` (default: 0, or the nearest bound if 0 is outside them); a
    counter that exists with other values raises :class:`InvalidArgumentError`
    naming the first difference. ``acl`` is the ACL of the nodes it makes
    (and of missing parents); None uses the client's ``default_acl``.
    Concurrent changes from one process are coalesced into one write
    (``coalesce=True``), as AtomicLong's are.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        upper: int,
        lower: int = 0,
        shards: int = 8,
        initial: int | None = None,
        retry: RetryPolicy | None = None,
        coalesce: bool = True,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "sharded counter")
        check_int(shards, "shards", path=path, minimum=1, maximum=MAX_SHARDS)
        check_int(lower, "lower", path=path, minimum=LONG_MIN, maximum=LONG_MAX)
        check_int(upper, "upper", path=path, minimum=LONG_MIN, maximum=LONG_MAX)
        if lower > upper:
            raise InvalidArgumentError("lower", f"{lower} is above upper ({upper})", path)
        if initial is None:
            initial = min(max(0, lower), upper)
        check_int(initial, "initial", path=path, minimum=lower, maximum=upper)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ArgumentTypeError("retry", "an aiocoord.RetryPolicy", retry, path)
        self._coalesce = check_flag(coalesce, "coalesce", path=path)
        self._client = client
        self.path = path
        self._config = _Config(shards, lower, upper, initial)
        self._retry = retry or DEFAULT_RETRY
        self._acl = check_recipe_acl(acl, path)
        self._tags = _telemetry.recipe_tags(
            client.telemetry, "sharded_counter", path, client.namespace
        )

    def __repr__(self) -> str:
        config = self._config
        return (
            f"<ShardedCounter {self.path!r} shards={config.shards} "
            f"bounds=[{config.lower}, {config.upper}]>"
        )

    @property
    def shards(self) -> int:
        """How many shards the range is split over."""
        return self._config.shards

    @property
    def lower(self) -> int:
        """The least total the counter may hold."""
        return self._config.lower

    @property
    def upper(self) -> int:
        """The greatest total the counter may hold."""
        return self._config.upper

    def _engine(self) -> _Escrow:
        config = self._config
        return self._client.recipe_state(
            (_Escrow, self.path, config, self._retry, self._acl),
            lambda: _Escrow(self._client, self.path, config, self._retry, self._acl),
        )

    async def initialize(self) -> bool:
        """Create the counter's nodes now (it is otherwise done on first use).

        True if this call created them; False if they existed with the same
        configuration (or this call's create was cut off and its outcome is
        unknown). Another configuration raises :class:`InvalidArgumentError`.
        """
        return await self._engine().ensure()

    async def snapshot(self) -> tuple[CounterShard, ...]:
        """Every shard's count and quota, all as they were at one instant during the call."""
        shards = await self._engine().snapshot()
        return tuple(CounterShard(i, s.count, s.quota) for i, s in enumerate(shards))

    async def get(self) -> AtomicValue[int]:
        """The exact total, read at one instant, in pre- and post-value."""
        started = time.monotonic()
        shards = await self._engine().snapshot()
        total = self._config.lower + sum(s.count for s in shards)
        stats = AtomicStats(optimistic_tries=1, optimistic_time=time.monotonic() - started)
        return AtomicValue(True, total, total, stats)

    async def add(self, delta: int, *, raise_on_bound: bool = False) -> AtomicValue[int]:
        """Add ``delta`` (negative to take away) if the total stays within the bounds.

        A refused change returns ``succeeded=False, reason=AtomicFailure.BOUND``
        (or raises BoundExceededError with ``raise_on_bound``); taking away
        gives the room back to the shard that takes it.
        """
        check_int(delta, "delta", path=self.path)
        check_flag(raise_on_bound, "raise_on_bound", path=self.path)
        engine = self._engine()
        with _telemetry.span(
            "aiocoord.counter.add", self._tags, duration="aiocoord.counter.add.duration"
        ) as op:
            if self._coalesce:
                result = await engine.add(delta, None, None)
            else:
                result = await engine.add_alone(delta)
            op.outcome("added" if result.succeeded else str(result.reason))
            if op.recording:
                stats = result.stats
                op.set("aiocoord.attempts", stats.optimistic_tries)
                op.set("aiocoord.batch_size", stats.batch_size)
                op.set("aiocoord.combined", stats.batch_size > 1)
        if raise_on_bound and result.reason is AtomicFailure.BOUND:
            config = self._config
            raise BoundExceededError(self.path, result.pre_value, delta, config.lower, config.upper)
        return result

    async def increment(self, *, raise_on_bound: bool = False) -> AtomicValue[int]:
        """Add 1 (see :meth:`add`)."""
        return await self.add(1, raise_on_bound=raise_on_bound)

    async def decrement(self, *, raise_on_bound: bool = False) -> AtomicValue[int]:
        """Take 1 away (see :meth:`add`)."""
        return await self.add(-1, raise_on_bound=raise_on_bound)

    async def subtract(self, delta: int, *, raise_on_bound: bool = False) -> AtomicValue[int]:
        """Take ``delta`` away (see :meth:`add`)."""
        check_int(delta, "delta", path=self.path)
        return await self.add(-delta, raise_on_bound=raise_on_bound)
