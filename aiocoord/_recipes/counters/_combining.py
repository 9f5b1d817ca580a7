"""Cross-process combining of contended counter adds.

Processes incrementing one counter node serialise on its version: each
compare-and-set waits for the previous write to commit, and a loser retries
into the next winner's write. Throughput stays at one commit per increment,
and an unlucky caller can lose many times in a row (the long tail). Combining
turns contention into batches:

- a process whose compare-and-set lost publishes its adds as an ephemeral
  sequential *request* node under ``<counter>/combining``;
- the owner of the lowest pending request reads every pending request and
  applies them all in one transaction: the counter's new value (versioned, so
  any other writer, Curator's included, still conflicts safely), the deletion
  of every request applied, and ``combining``'s data (versioned): the highest
  request applied, the counter's value and version after the write (so the
  next combined write need not read the counter), and, in a few bytes each,
  the results of the last ``RESULTS_KEPT`` requests (more with big batches);
- every other requester waits for the pending request just ahead of it to go;
  then it reads ``combining`` and finds either its own result or itself first
  in line. Sequence numbers only grow, so nobody can queue ahead of a request
  that is already there: the requests ahead of ours are known from one listing.

A request is applied once or never: one whose owner's session ended makes the
transaction fail (it deletes at version 0), and the next attempt goes without
it. A requester that cannot read its result (its session ended first, or it
was paused through more than the results kept) gets
OutcomeUnknownError, as for a compare-and-set whose reply was lost.

The counter node keeps Curator's bytes; the requests are its children, which
Curator's DistributedAtomicLong never reads.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ... import _paths
from ..._exceptions import (
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    CorruptValueError,
    NoConnectionError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
)
from ..._session import (
    PROTECTED_PREFIX,
    Client,
    OwnNode,
    retry_on_connection_loss,
)
from ..._types import ACL, Codec, Stat
from .._kit import wait_change
from ._arith import Entry, grant_all

QUEUE_NAME = "combining"
"""The child of a counter node under which contended adds queue."""
RESULTS_KEPT = 256
"""How many applied requests' results the queue node keeps for their requesters
at least; more while it holds fewer than ``BATCHES_KEPT`` batches."""
BATCHES_KEPT = 32
"""How many batches' results the queue node keeps at least (up to
``RESULTS_MAX`` requests' worth). A requester stalled through more combined
writes than the results kept (a collector's pause, a busy core) can no longer
read its result and gets OutcomeUnknownError: with 32 processes queued,
batches of about 25 made 256 results ten combined writes, a third of a second
of adds, and stalls that long in the 32-session benchmark left 2-9 adds per
run unknown."""
RESULTS_MAX = 2048
"""Never more results than this (the state stays a few kilobytes)."""
REQUEST_NAME = "r"
"""A request is ``<protected marker>r<add>-<sequence>``: ``<add>`` is a single
add as ``delta_lower_upper`` (``n`` for no bound), read from the listing
alone; or empty, and the adds are the node's data (JSON)."""
_MARKER_LENGTH = len(PROTECTED_PREFIX) + 37  # _c_, a UUID and a dash
_DIGITS = 10
_MAX_REQUESTS = 100_000
"""More requests than one transaction can carry (its deletes alone would pass
ZooKeeper's 1 MB request limit): a state claiming more is garbage."""


@dataclass(frozen=True)
class Combined:
    """What a combined transaction did for one request."""

    pre: int
    """The counter's value just before this request's adds."""
    value: int
    """The counter's value after the last transaction (a hint)."""
    version: int
    """The counter node's version after it (a hint)."""
    size: int
    """How many adds the transaction carried, all requests together."""
    alone: bool
    """Whether this request was the only one in it (contention is over)."""


class _Batch(NamedTuple):
    """One combined transaction, as its requesters need it to find their results.

    A named tuple: every queued add decodes a few dozen of these from the state.
    """

    first: int
    """The first request's sequence number."""
    start: int
    """The counter's value before the transaction."""
    size: int
    """How many adds it carried."""
    offsets: tuple[int, ...]
    """Each request's sequence number minus ``first``, in the order applied."""
    added: tuple[int, ...]
    """What each request's adds changed the counter by, in total."""


_INT_ONLY = {int}


class _State:
    """The queue node's data: what has been applied, and the recent batches.

    A batch costs a few bytes (offsets and totals, not values, and usually
    just their count and one total), so the node keeps ``RESULTS_KEPT``
    requests' results in a few hundred bytes.

    The batches are held as stored (see :func:`_walk`), not as :class:`_Batch`:
    a combiner decodes the state, adds one batch and encodes it again on every
    combined write, and expanding and re-compacting the dozens of batches kept
    cost about a tenth of a queued add's calls. :attr:`batches` expands them
    for whoever wants to look.
    """

    __slots__ = ("_stored", "stat_version", "upto", "value", "version")

    def __init__(
        self, upto: int, value: int, version: int, batches: Iterable[_Batch], stat_version: int
    ) -> None:
        self.upto = upto
        """The highest request applied (-1: none yet)."""
        self.value = value
        self.version = version
        self.stat_version = stat_version
        self._stored: tuple[_Walked, ...] = tuple(map(_store, batches))

    @classmethod
    def _of(
        cls, upto: int, value: int, version: int, stored: tuple[_Walked, ...], stat_version: int
    ) -> _State:
        state = cls.__new__(cls)
        state.upto, state.value, state.version = upto, value, version
        state.stat_version, state._stored = stat_version, stored
        return state

    @property
    def batches(self) -> tuple[_Batch, ...]:
        return tuple(map(_expand, self._stored))

    def encode(self) -> bytes:
        # Every reader and every write pays for these bytes, so a batch is
        # written short when it can be: its offsets as their count when its
        # requests are consecutive, its adds as one number when all are equal
        # (both already so in the stored form), and without its first request
        # and start value when they follow on from the batch before (as they
        # nearly always do). The newest batch always has them: most requesters
        # find their result there, without walking the batches before it (see
        # result()).
        batches: list[list[object]] = []
        follows: tuple[int, int] | None = None
        newest = len(self._stored) - 1
        for index, (first, start, size, offsets, added, count, last, total) in enumerate(
            self._stored
        ):
            if index == newest or follows != (first, start):
                batches.append([first, start, size, offsets, added])
            else:
                batches.append([size, offsets, added])
            follows = (first + last + 1, start + total) if count else None
        return json.dumps(
            {"upto": self.upto, "value": self.value, "version": self.version, "batches": batches},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, path: str, data: bytes, stat: Stat) -> _State:
        if not data:
            return cls._of(-1, 0, -1, (), stat.version)
        try:
            raw = json.loads(data)
            upto, value, version = _top(raw)
            stored = tuple(_walk(raw["batches"]))
        except (ValueError, TypeError, KeyError, RecursionError):
            raise CorruptValueError(path, data, "a counter's combining state") from None
        return cls._of(upto, value, version, stored, stat.version)

    @staticmethod
    def result(path: str, data: bytes, seq: int) -> tuple[int, Combined | None]:
        """The state's ``upto``, and what its batch did for request ``seq`` if
        the state holds that result (else None).

        Every queued add reads the state for its result: this finds it without
        building every batch, which took about a tenth of a queued add's CPU,
        and in the newest batch (written whole) without walking the others:
        only the batches it reads are checked, so a state garbled before the
        batch holding ``seq`` can still answer here, where a combiner's
        :meth:`decode` refuses it.
        """
        if not data:
            return -1, None
        found: Combined | None = None
        try:
            raw = json.loads(data)
            upto, value, version = _top(raw)
            if upto >= seq:
                batches = raw["batches"]
                newest = batches[-1] if type(batches) is list and batches else None
                if type(newest) is list and len(newest) == 5:
                    found = _find(seq, _walk((newest,)), value, version)
                if found is None:
                    found = _find(seq, _walk(batches), value, version)
        except (ValueError, TypeError, KeyError, RecursionError):
            raise CorruptValueError(path, data, "a counter's combining state") from None
        return upto, found

    def after(self, batch: _Batch, upto: int, value: int, version: int) -> _State:
        """The state once ``batch`` is applied, keeping ``RESULTS_KEPT`` requests'
        results, or ``BATCHES_KEPT`` batches' if that is more, up to
        ``RESULTS_MAX`` (the newest batch always)."""
        stored = self._stored
        count = len(batch.offsets)
        keep = 0
        for older in reversed(stored):
            count += older[5]
            if count > RESULTS_MAX or (count > RESULTS_KEPT and keep + 1 >= BATCHES_KEPT):
                break
            keep += 1
        kept = stored[len(stored) - keep :] if keep else ()
        return _State._of(upto, value, version, (*kept, _store(batch)), self.stat_version)


def _store(batch: _Batch) -> _Walked:
    """``batch`` in the stored form: offsets as their count when consecutive,
    adds as one number when all are equal."""
    first, start, size, offsets, added = batch
    count = len(offsets)
    if not count:
        return (first, start, size, 0, [], 0, -1, 0)
    stored_offsets: int | list[int] = (
        count if offsets[-1] == count - 1 and offsets == tuple(range(count)) else list(offsets)
    )
    stored_added: int | list[int] = (
        added[0] if len(added) == count and added.count(added[0]) == count else list(added)
    )
    return (first, start, size, stored_offsets, stored_added, count, offsets[-1], sum(added))


def _expand(stored: _Walked) -> _Batch:
    first, start, size, offsets, added, count, _last, _total = stored
    return _Batch(
        first,
        start,
        size,
        tuple(range(offsets)) if isinstance(offsets, int) else tuple(offsets),
        (added,) * count if isinstance(added, int) else tuple(added),
    )


_Walked = tuple[int, int, int, int | list[int], int | list[int], int, int, int]
"""A stored batch as :func:`_walk` gives it: ``(first, start, size, offsets,
added, count, last, total)``, with ``offsets`` and ``added`` as stored, then
their count, the last offset and the adds' sum."""


def _find(
    seq: int,
    walked: Iterable[_Walked],
    value: int,
    version: int,
) -> Combined | None:
    """What the batch holding request ``seq`` among ``walked`` did for it, or None."""
    found = None
    for first, start, size, offsets, added, count, _last, _total in walked:
        # (The walk checked the types: no bool passes these isinstance.)
        if isinstance(offsets, int):
            index = seq - first
            if not 0 <= index < count:
                continue
        elif seq - first in offsets:
            index = offsets.index(seq - first)
        else:
            continue
        pre = start + (added * index if isinstance(added, int) else sum(added[:index]))
        # Sequence numbers are never reused: the last batch holding ``seq`` is
        # the only one, unless the state is garbage.
        found = Combined(pre, value, version, size, alone=False)
    return found


def _top(raw: dict[str, object]) -> tuple[int, int, int]:
    """The state's ``upto``, ``value`` and ``version``, type-checked."""
    upto, value, version = raw["upto"], raw["value"], raw["version"]
    if type(upto) is not int or type(value) is not int or type(version) is not int:
        raise ValueError(raw)
    return upto, value, version


def _walk(encoded: Iterable[Any]) -> list[_Walked]:
    """Each stored batch as a :data:`_Walked`, with ``offsets`` and ``added`` as
    stored (a count or a list; one add or a list) and every number
    type-checked. ValueError or TypeError on anything a combiner does not write.

    A list, not a generator: a combiner walks every kept batch (dozens) on
    each combined write, and a generator's resume per batch cost more than the
    batch's checks.
    """
    walked: list[_Walked] = []
    follows: tuple[int, int] | None = None
    for batch in encoded:
        if len(batch) == 3 and follows is not None:
            first, start = follows
            size, offsets, added = batch
        else:
            first, start, size, offsets, added = batch
            if type(first) is not int or type(start) is not int:
                raise ValueError(batch)
        if type(size) is not int:
            raise ValueError(batch)
        if type(offsets) is int:
            if not 0 <= offsets <= _MAX_REQUESTS:
                raise ValueError(batch)
            count, last = offsets, offsets - 1
        elif type(offsets) is list and not set(map(type, offsets)) - _INT_ONLY:
            count = len(offsets)
            last = offsets[-1] if count else -1
        else:
            raise ValueError(batch)
        if type(added) is int:
            total = added * count
        elif type(added) is list and len(added) == count and not set(map(type, added)) - _INT_ONLY:
            total = sum(added)
        else:
            raise ValueError(batch)
        walked.append((first, start, size, offsets, added, count, last, total))
        follows = (first + last + 1, start + total) if count else None
    return walked


def combining_queue(counter: str) -> str:
    """The path under which adds to ``counter`` queue."""
    return _paths.join(counter, QUEUE_NAME)


@functools.lru_cache(maxsize=4096)
def _parse(name: str) -> tuple[int, Entry | None]:
    """(sequence number, the add in the name or None); (-1, None) for a name
    no requester makes (ignored).

    Cached: a pending request's name comes back in the listing of every
    request made after it until it is applied, and its name never changes."""
    head, tail = name[:-_DIGITS], name[-_DIGITS:]
    body = head[_MARKER_LENGTH:]
    if not (
        head.startswith(PROTECTED_PREFIX)
        and body.startswith(REQUEST_NAME)
        and body.endswith("-")
        and tail.isdigit()
    ):
        return -1, None
    code = body[len(REQUEST_NAME) : -1]
    if not code:
        return int(tail), None
    parts = code.split("_")
    if len(parts) != 3 or parts[0] == "n":
        return -1, None
    try:
        delta = int(parts[0])
        lower = None if parts[1] == "n" else int(parts[1])
        upper = None if parts[2] == "n" else int(parts[2])
    except ValueError:
        return -1, None
    return int(tail), (delta, lower, upper)


def _sequence(name: str) -> int:
    return _parse(name)[0]


def _request_name(entries: Sequence[Entry]) -> tuple[str, bytes]:
    """The name suffix and data of a request carrying ``entries``."""
    if len(entries) == 1:
        delta, lower, upper = entries[0]
        low = "n" if lower is None else lower
        up = "n" if upper is None else upper
        return f"{REQUEST_NAME}{delta}_{low}_{up}-", b""
    encoded = json.dumps([list(entry) for entry in entries], separators=(",", ":")).encode()
    return f"{REQUEST_NAME}-", encoded


def _decode_request(path: str, data: bytes) -> list[Entry]:
    try:
        entries: list[Entry] = []
        for delta, lower, upper in json.loads(data):
            if type(delta) is not int or not all(
                bound is None or type(bound) is int for bound in (lower, upper)
            ):
                raise ValueError(data)
            entries.append((delta, lower, upper))
    except (ValueError, TypeError, RecursionError):
        raise CorruptValueError(
            path, data, "a counter request (JSON [[delta, lower, upper]])"
        ) from None
    return entries


def _raise_lost(results: Sequence[object], *, any_error: bool = False) -> None:
    """Raise the first connection or session error among a pipeline's results
    (first, so that a retry on connection loss sees it); with ``any_error``,
    then the first error of any kind."""
    for result in results:
        if isinstance(result, ConnectionLossError | SessionExpiredError):
            raise result
    if any_error:
        for result in results:
            if isinstance(result, Exception):
                raise result


class Combiner:
    """One counter node's combining queue, as one client takes part in it
    (one request at a time: the client's batcher waits for each batch)."""

    def __init__(self, client: Client, path: str, acl: tuple[ACL, ...] | None) -> None:
        self._client = client
        self._path = path
        self._queue = combining_queue(path)
        self._acl = acl
        self._trust_state = False
        """Whether the queue's state last matched the counter, so that the next
        combined write can go without reading the counter first."""
        self._strays: set[str] = set()
        """Persistent nodes found in the queue: no requester made them (requests
        are ephemeral), so nobody waits for them, and the next write drops them."""

    async def submit(self, entries: Sequence[Entry]) -> Combined:
        """Queue ``entries`` as one request and return once it is applied.

        Raises OutcomeUnknownError if the result cannot be known (see the module).
        """
        own = self._request(*_request_name(entries))
        try:
            node, seq, ahead = await self._enqueue(own)
        except asyncio.CancelledError:
            # Cancelled with the create maybe sent: a request nobody waits for
            # would hold everyone queued behind it.
            self._start_abandon(own)
            raise
        client = self._client
        read: tuple[bytes, Stat] | None = None
        try:
            # Requests go out only in our session; on an error, our request
            # is taken out of the queue in the background (left there, it
            # would hold everyone behind it: nobody combines it but us),
            # started inside this pin so that its delete never goes out in
            # another session (if ours ended, the request went with it).
            with client.only_in_session(client.session_id):
                try:
                    while True:
                        state: _State | None = None
                        if read is not None:
                            upto, found = self._result(seq, read[0])
                            if found is not None:
                                return found
                            ahead = [entry for entry in ahead if entry[0] > upto]
                            if not ahead:
                                state = _State.decode(self._queue, *read)
                        if not ahead:
                            outcome = await self._combine(node, seq, entries, state)
                            if isinstance(outcome, Combined):
                                return outcome
                            if outcome is not None:
                                ahead, read = outcome, None  # requests ahead we had not seen
                                continue
                        elif await self._wait_gone(ahead[-1][1]):
                            # Usually applied with the request ahead of ours: one
                            # read of the state tells, and otherwise serves the
                            # combined write we then make as first in line.
                            ahead.pop()
                        read = await retry_on_connection_loss(client, self._read_state)
                except CorruptValueError as error:
                    if error.path != self._path:
                        self._start_abandon(own)
                    raise  # a corrupt counter: withdrawn below, not abandoned
                except BaseException:  # a cancel too: the add may or may not be applied
                    self._start_abandon(own)
                    raise
        except (SessionExpiredError, NoConnectionError) as error:
            # Still queued or gone with the session: it may have been applied.
            raise OutcomeUnknownError(self._path) from error
        except CorruptValueError as error:
            if error.path != self._path:
                raise
            # The counter holds garbage: take our request back, so that no
            # combiner applies it after we have reported the error.
            if await self._withdraw(node):
                raise
            data, _stat = await retry_on_connection_loss(client, self._read_state)
            _upto, found = self._result(seq, data)
            if found is None:
                raise OutcomeUnknownError(self._path) from None
            return found

    def _start_abandon(self, own: OwnNode) -> None:
        coro = self._abandon(own)
        try:
            self._client.start_background(coro, name=f"aiocoord-counter-abandon {own.target}")
        except RuntimeError:  # the client is closing: its session, and our request, end with it
            coro.close()

    async def _abandon(self, own: OwnNode) -> None:
        node = own.path
        if node is None:
            # Cut off before the create's reply: found by its marker, if it was made.
            await own.delete()
            return
        client = self._client
        while True:
            try:
                await client.delete(node, version=0)
            except (ConnectionLossError, NoConnectionError):
                continue  # the next try waits for the connection (or the session's end)
            except (NoNodeError, BadVersionError, SessionExpiredError, ClientClosedError):
                pass  # applied, or gone with the session or client
            return

    def _result(self, seq: int, data: bytes) -> tuple[int, Combined | None]:
        """The queue state's ``upto`` and our result, if it is applied."""
        upto, found = _State.result(self._queue, data, seq)
        if found is None and upto >= seq:
            # Applied too long ago to be in the results (or gone with a lost session).
            raise OutcomeUnknownError(self._path)
        return upto, found

    async def _withdraw(self, node: str) -> bool:
        """Delete our pending request: False if a combiner took it first."""
        client = self._client
        try:
            await retry_on_connection_loss(
                client, functools.partial(client.delete, node, version=0)
            )
        except NoNodeError:
            return False
        return True

    def _request(self, name: str, payload: bytes) -> OwnNode:
        return OwnNode(
            self._client,
            self._queue,
            name,
            payload,
            parents="plain",
            # Made (and maybe applied) in a session that is gone, or never made.
            on_outcome_unknown=lambda: OutcomeUnknownError(self._path),
            ephemeral=True,
            sequential=True,
            acl=self._acl,
        )

    async def _enqueue(self, own: OwnNode) -> tuple[str, int, list[tuple[int, str]]]:
        """Create our request, and list who is ahead of it, in one round trip.

        Every request listed is pending: a transaction that applies requests
        deletes them, so no state needs reading to tell who is ahead.
        """
        client = self._client
        listed = await own.create(list_children=True)
        assert own.path is not None
        node = own.path
        if listed is None:
            listed = await retry_on_connection_loss(
                client, functools.partial(client.children, self._queue)
            )
        seq = _sequence(_paths.basename(node))
        # A list, not a generator: this runs once per queued add, over every
        # pending request's name (each parsed once per process: _parse caches).
        ahead = [(s, n) for n in listed if 0 <= (s := _parse(n)[0]) < seq]
        ahead.sort()
        return node, seq, ahead

    def _read_state(self) -> Awaitable[tuple[bytes, Stat]]:
        # The client's get itself, not a coroutine around it: one level fewer
        # to resume when the reply comes (every queued add reads the state).
        return self._client.get(self._queue)

    async def _wait_gone(self, name: str) -> bool:
        """Wait for the request ``name`` to change; True if it is (or already was) gone."""

        def stray(stat: Stat) -> bool:
            # Not ephemeral: no requester made it. Skipped from now on, as if gone.
            if stat.ephemeral_owner != 0:
                return False
            self._strays.add(name)
            return True

        path = _paths.join(self._queue, name)
        return await wait_change(self._client, path, gone_if=stray) is not None

    async def _combine(
        self, node: str, seq: int, entries: Sequence[Entry], known: _State | None = None
    ) -> Combined | list[tuple[int, str]] | None:
        """Apply every pending request in one transaction. Our result; or, if the
        listing shows requests ahead of ours, those; or None to look again.

        ``known``: the queue's state just read (ours not applied in it), so that
        only the listing is read now. A combiner that ran since makes the
        transaction fail on the state's version, and the next try reads afresh.
        """
        client = self._client
        pipeline = client.pipeline()
        if known is None:
            pipeline.get(self._queue)
        pipeline.children(self._queue)
        if not self._trust_state:
            pipeline.get(self._path)
        results = await pipeline.execute()
        _raise_lost(results, any_error=True)  # NoNodeError: the counter was deleted under us
        if known is None:
            _upto, found = self._result(seq, results[0][0])
            if found is not None:
                return found
            state = _State.decode(self._queue, *results[0])
            results = results[1:]
        else:
            state = known
        names = results[0][0]
        if _paths.basename(node) not in names:
            if known is not None:
                # Applied since the state we were given, or gone: a fresh read says.
                return await self._combine(node, seq, entries)
            # Only our session's end (or another client) removes a pending request.
            raise OutcomeUnknownError(self._path)
        pending = sorted((s, n) for n in names if (s := _sequence(n)) > state.upto)
        ahead = [entry for entry in pending if entry[0] < seq and entry[1] not in self._strays]
        if ahead:
            return ahead
        if len(results) == 2:
            counter_data, version = results[1][0], results[1][1].version
            value = Codec.LONG.decode(counter_data, self._path) if counter_data else 0
        elif state.version >= 0:
            # The counter as the last combined write left it. It cannot have
            # been deleted and made again since: a node with children (this
            # queue) cannot be deleted. If anyone wrote it since, the
            # transaction fails on its version, and the next try reads it.
            value, version = state.value, state.version
        else:
            data, stat = await retry_on_connection_loss(
                client, functools.partial(client.get, self._path)
            )
            value, version = Codec.LONG.decode(data, self._path) if data else 0, stat.version
        batch: list[tuple[int, str, Sequence[Entry]]] = [(seq, node, entries)]
        transaction = client.transaction()
        unread: list[tuple[int, str]] = []
        for other, name in pending:
            if name in self._strays:
                transaction.delete(_paths.join(self._queue, name))
                self._strays.discard(name)
            elif other > seq:
                path = _paths.join(self._queue, name)
                add = _parse(name)[1]
                if add is None:
                    unread.append((other, path))
                else:
                    batch.append((other, path, [add]))
        if unread:
            pipeline = client.pipeline()
            for _seq, path in unread:
                pipeline.get(path)
            payloads = await pipeline.execute()
            _raise_lost(payloads)
            for (other, path), payload in zip(unread, payloads, strict=True):
                if isinstance(payload, NoNodeError):
                    continue  # withdrawn, or gone with its session
                if isinstance(payload, Exception):
                    raise payload
                try:
                    batch.append((other, path, _decode_request(path, payload[0])))
                except CorruptValueError:
                    # Not written by a requester: nobody waits for it; drop it.
                    transaction.delete(path)
            batch.sort(key=lambda request: request[0])
        size = sum(len(request) for _seq, _path, request in batch)
        current = value
        added: list[int] = []
        for _seq, _path, request in batch:
            _grants, after = grant_all(current, request)
            added.append(after - current)
            current = after
        if current != value:
            transaction.set(self._path, Codec.LONG.encode(current), version=version)
            version += 1
        else:
            transaction.check(self._path, version)
        offsets = tuple(other - seq for other, _path, _request in batch)
        applied = _Batch(seq, value, size, offsets, tuple(added))
        new_state = state.after(applied, pending[-1][0], current, version)
        transaction.set(self._queue, new_state.encode(), version=state.stat_version)
        for _seq, path, _request in batch:
            transaction.delete(path, version=0)
        try:
            await transaction.commit()
        except (BadVersionError, NoNodeError):
            # Another writer came first, or a request left: look again, and
            # read the counter itself in case a direct write moved it.
            self._trust_state = False
            return None
        except NoConnectionError:
            raise
        except ConnectionLossError:
            return None  # the queue's state will say whether it applied
        self._trust_state = True
        return Combined(value, current, version, size, alone=len(batch) == 1)
