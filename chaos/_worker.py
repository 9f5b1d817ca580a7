"""A chaos worker: one process with its own ZooKeeper sessions, driving every recipe
and recording every operation.

The controller starts it as ``python -m chaos._worker CONFIG`` (a JSON object)
and talks to it over stdin/stdout, one JSON object per line: the worker says
``ready``; the controller may ask it to ``expire`` or ``drop`` one of its
clients' sessions or connections (faults that act on a client object), or to
``stall`` one client's network for a while, then
``stop`` (finish the operations under way), ``final`` (compare its caches with
the server's tree, and say which of its group members are alive) and ``exit``.

Each worker has two clients: client 0 with the standard error policy (a
suspended connection already counts as losing a lock) and client 1 with the
session policy (only an expired session does). The recipes are spread over both.
Each client reaches the ensemble through TCP proxies of its own in this process
(one per member), which a ``stall`` holds: the client's traffic stops both ways
while the process, and the servers, run on.
Every operation runs under a watchdog (:data:`~chaos._layout.OP_BOUND`); one that
outlives it is recorded as a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import itertools
import json
import logging
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiocoord
from aiocoord import (
    AtomicInt,
    AtomicLong,
    Barrier,
    BarrierBrokenError,
    ChildrenCache,
    ConnectionLossError,
    CoordinationError,
    DelayQueue,
    DoubleBarrier,
    GroupMember,
    IdQueue,
    LeaderElection,
    LeaderLatch,
    Lease,
    LeaseHeldError,
    MultiLock,
    Mutex,
    NodeCache,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    NotOwnerError,
    OutcomeUnknownError,
    OwnershipError,
    PriorityQueue,
    PromotedToLock,
    Queue,
    QueueEmptyError,
    ReadWriteLock,
    RetryNTimes,
    Semaphore,
    SemaphoreMutex,
    SessionErrorPolicy,
    SessionExpiredError,
    ShardedCounter,
    SharedCount,
    StandardErrorPolicy,
    TakeLostError,
    TreeCache,
    VersionedValue,
)
from aiocoord.testing import TcpProxy, drop_connection, expire_session

from ._discovery import DiscoveryDriver
from ._history import HistoryWriter, Status
from ._layout import (
    ACQUIRE_TIMEOUT,
    AQUEUE,
    BARRIER,
    BARRIER_TIMEOUT,
    BUG_ERRORS,
    CHILDREN_CACHED,
    COUNTER_BOUND,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_INT_LOCK,
    COUNTER_LONG,
    DQUEUE,
    DRIVER_BUG,
    DUMP_STACKS,
    GATE,
    GATE_WAIT,
    GROUP,
    IDQUEUE,
    LATCH,
    LEADER,
    LEASE,
    LEASE_TTL,
    MULTI_A,
    MULTI_B,
    MUTEX,
    MUTEX_LOCAL,
    MUTEX_LOCAL_BOUND,
    NODE_CACHED,
    OP_BOUND,
    PQUEUE,
    QUEUE,
    RWLOCK,
    SEMAPHORE,
    SEMAPHORE_LEASES,
    SEMMUTEX,
    SESSION_TIMEOUT,
    SHARDED,
    SHARDED_SHARDS,
    SHARDED_UPPER,
    SHARED_COUNT,
    STRAY_CANCEL,
    TOLD_BOUND,
    TREE,
    WITNESS,
)
from ._store import Kind, StoreClient

__all__ = ["CACHE_SETTLE", "STOP_BOUND", "WorkerConfig", "main", "read_tree"]

STOP_BOUND = OP_BOUND + 10.0
"""How long the worker waits for its drivers to finish once told to stop."""
CACHE_SETTLE = 15.0
"""How long the cache may take to catch up with the server once writes have stopped."""
CONNECT_BOUND = 60.0
QUEUE_WAIT = 2.0
"""How long a queue consumer waits for an item before trying again."""

log = logging.getLogger("chaos.worker")


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What the controller tells a worker."""

    name: str
    connect: str
    store_port: int
    history: str
    t0: float
    seed: int
    members: int
    """How many participants a double barrier round needs (one per worker)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        return cls(**json.loads(text))


@dataclass(slots=True)
class Outcome:
    """How an operation ended, for the history."""

    status: Status
    error: str | None = None
    value: dict[str, Any] = field(default_factory=dict)


_Queue = Queue[bytes] | PriorityQueue[bytes] | DelayQueue[bytes] | IdQueue[bytes]
_AnyCache = TreeCache | NodeCache | ChildrenCache
_Put = Callable[[str, random.Random], tuple[Callable[[], Awaitable[bool]], dict[str, Any]]]
"""How a put loop puts one item: the call, and what to record of it."""

_Step = tuple[str, str, Callable[[str], Awaitable[Outcome]]]
"""One step of a holder loop: recipe, operation, and the body run under the watchdog."""
_Pick = Callable[[random.Random, StoreClient], _Step]


@dataclass(slots=True)
class _Section:
    """What a holder did inside its hold: its token, when, and whether the store refused it."""

    token: int | None = None
    t_acq: float | None = None
    t_rel: float | None = None
    rejected: bool = False
    reason: str = ""
    told_after: float | None = None

    def value(self, *, lost: bool, **extra: Any) -> dict[str, Any]:
        return {
            "token": self.token,
            "t_acq": self.t_acq,
            "t_rel": self.t_rel,
            "rejected": self.rejected,
            "reason": self.reason,
            "lost": lost,
            **extra,
        }


def _unsent(error: BaseException) -> bool:
    """Whether a failed request is known not to have reached the server."""
    if isinstance(error, OutcomeUnknownError):
        return False
    if isinstance(error, ConnectionLossError):
        return not error.sent
    return isinstance(error, SessionExpiredError)


def _policy(client: aiocoord.Client) -> str:
    """``standard`` (a suspended connection loses a hold) or ``session`` (only expiry)."""
    return "standard" if isinstance(client.error_policy, StandardErrorPolicy) else "session"


def _wall_ms() -> int:
    """The wall clock in milliseconds, as the delay queue reads it for due times."""
    return int(time.time() * 1000)


def _name(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text[:160]}" if text else type(error).__name__


async def read_tree(
    client: aiocoord.Client, root: str, max_depth: int | None = None
) -> dict[str, tuple[str, int]]:
    """The server's tree under ``root`` (``max_depth`` levels below it; None: all):
    path -> (data as hex, mzxid)."""
    tree: dict[str, tuple[str, int]] = {}
    todo = [(root, 0)]
    while todo:
        path, depth = todo.pop()
        try:
            data, stat = await client.get(path)
            names = [] if depth == max_depth else await client.children(path)
        except NoNodeError:
            continue
        tree[path] = (data.hex(), stat.mzxid)
        todo += [(f"{path}/{name}", depth + 1) for name in names]
    return tree


class _QueueWarnings(logging.Handler):
    """Turns the queue recipe's warnings about items it may have taken without
    reporting them (a lost reply) into history notes: they explain items that
    are neither taken nor left in the queue."""

    def __init__(self, history: HistoryWriter) -> None:
        super().__init__(logging.WARNING)
        self._history = history

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        if not message.startswith("queue %r:"):
            return
        if "reply to deleting" not in message and "could not put back" not in message:
            return
        args = record.args if isinstance(record.args, tuple) else ()
        self._history.write(
            {
                "type": "note",
                "what": "queue-unknown-take",
                "worker": self._history.worker,
                "queue": str(args[0]) if args else "",
                "path": str(args[1]) if len(args) > 1 else "",
                "message": record.getMessage()[:300],
            }
        )


class _StallWatch:
    """Notices when this worker stops running: its event loop misses its beat.

    A stretch in which the loop ran nothing (the operating system did not run
    the process, or a call blocked the loop) is recorded as a ``stall``: for that
    time the worker was as good as paused, and a holder cannot learn of a loss
    while it is. A thread keeps watch beside the loop and says which it was:

    - ``frozen``: how long the thread itself did not run either (the whole process
      was not running: the host, not our code);
    - ``blocked_in``: where the loop was, sampled once it had missed its beat for
      :attr:`SAMPLE_AFTER` seconds (every thread's stack also goes to stderr);
      ``in_library`` says whether the innermost frame outside the standard
      library is aiocoord's: an asyncio library must never block its loop.
    """

    BEAT = 0.05
    RECORD_AFTER = 0.5
    """A loop late by this much is recorded (shorter lags are ordinary load)."""
    SAMPLE_AFTER = 1.5
    LATE = 0.5
    """The watching thread, waking every 0.1 s, counts as not run when this late."""

    def __init__(self, history: HistoryWriter) -> None:
        self._history = history
        self._last = time.monotonic()
        self._late: list[tuple[float, float]] = []
        self._woke_at = history.now()
        """When the watching thread last woke (history time)."""
        self._sample: tuple[list[str], bool] | None = None
        self._stop = threading.Event()
        self._main = threading.main_thread().ident
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)

    async def run(self) -> None:
        self._thread.start()
        try:
            while True:
                before = time.monotonic()
                t_before = self._history.now()
                self._sample = None
                await asyncio.sleep(self.BEAT)
                self._last = time.monotonic()
                if self._last - before - self.BEAT >= self.RECORD_AFTER:
                    self._record(t_before, self._history.now())
        finally:
            self._stop.set()

    def _record(self, start: float, end: float) -> None:
        frozen = sum(max(0.0, min(b, end) - max(a, start)) for a, b in self._late)
        # Resumed together (SIGCONT), the loop may get here before the thread has
        # woken to note its own late wake: then it has not run since its last one.
        woke = self._woke_at
        if end - woke >= 0.1 + self.LATE:
            frozen += end - max(woke, start)
        sample = self._sample
        self._history.write(
            {
                "type": "stall",
                "worker": self._history.worker,
                "from": start,
                "to": end,
                "frozen": round(min(frozen, end - start), 3),
                "blocked_in": sample[0] if sample else [],
                "in_library": sample[1] if sample else False,
            }
        )

    def _watch(self) -> None:
        woke = time.monotonic()
        while not self._stop.wait(0.1):
            now = time.monotonic()
            at = self._history.now()
            late = now - woke - 0.1 >= self.LATE
            if late:
                self._late.append((at - (now - woke), at))
            woke, self._woke_at = now, at
            if late:
                continue  # the whole process just resumed: give the loop its turn first
            if now - self._last >= self.SAMPLE_AFTER and self._sample is None:
                self._sample = self._where()
                print(
                    f"stall-watch: the event loop has not run for {now - self._last:.2f} s; "
                    "every thread's stack:",
                    file=sys.stderr,
                    flush=True,
                )
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)

    def _where(self) -> tuple[list[str], bool]:
        """The main thread's innermost frames, and whether the innermost one outside
        the standard library is aiocoord's."""
        frame = sys._current_frames().get(self._main) if self._main is not None else None
        frames = traceback.extract_stack(frame)[::-1] if frame is not None else []
        stdlib = os.path.dirname(os.__file__)
        own = next((f.filename for f in frames if not f.filename.startswith(stdlib)), "")
        library = own.startswith(_LIBRARY) and not own.startswith(_LIBRARY_TESTING)
        return [f"{f.filename}:{f.lineno} {f.name}" for f in frames[:4]], library


_LIBRARY = os.path.dirname(aiocoord.__file__) + os.sep
_LIBRARY_TESTING = os.path.join(_LIBRARY, "testing") + os.sep


class Worker:
    """One worker process's recipes, drivers and commands."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.name = config.name
        self.history = HistoryWriter(Path(config.history), worker=config.name, t0=config.t0)
        self.stopping = asyncio.Event()
        self.clients: list[aiocoord.Client] = []
        self.proxies: list[list[TcpProxy]] = []
        """Per client, its proxies to the ensemble's members (what a stall holds)."""
        self.cache: TreeCache | None = None
        self.node_cache: NodeCache | None = None
        self.children_cache: ChildrenCache | None = None
        self.members: list[GroupMember] = []
        """Group members kept for the whole run, one per client."""
        self.data_sure: dict[str, bool] = {}
        """Per kept member: whether its last data update surely reached the server."""
        self._serial = itertools.count(1)
        self.discovery = DiscoveryDriver(self)
        from ._partition_worker import Partitions  # it builds on this module

        self.partitions = Partitions(self)
        from ._leaders import Leadership

        self.leadership = Leadership(self)

    # --- plumbing ---------------------------------------------------------------------

    def now(self) -> float:
        return self.history.now()

    def rng(self, driver: str) -> random.Random:
        return random.Random(f"{self.config.seed}/{self.name}/{driver}")

    def store(self, driver: str) -> StoreClient:
        return StoreClient(self.config.store_port, f"{self.name}/{driver}")

    @staticmethod
    def reply(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    async def nap(self, seconds: float) -> None:
        """Sleep, waking early when told to stop."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.stopping.wait()

    async def op(
        self,
        recipe: str,
        kind: str,
        body: Callable[[str], Awaitable[Outcome]],
        **args: Any,
    ) -> Outcome:
        """Run one operation under the watchdog and record it."""
        op_id = self.history.invoke(recipe, kind, **args)
        try:
            async with asyncio.timeout(OP_BOUND) as watchdog:
                outcome = await body(op_id)
        except TimeoutError as error:
            if watchdog.expired():
                outcome = Outcome("unknown", f"watchdog: still running after {OP_BOUND:g} s")
                log.error("%s %s %s hung: %r", op_id, recipe, kind, error)
            else:
                outcome = Outcome("unknown", _name(error))
        except asyncio.CancelledError as error:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # ours to obey: the worker is closing
            # Nobody cancelled this task: a recipe let a cancellation of its own
            # escape. Record it (a check fails on it) and go on driving.
            outcome = Outcome("unknown", f"{STRAY_CANCEL}: {error!r}")
            log.error("%s %s %s: %s", op_id, recipe, kind, STRAY_CANCEL, exc_info=error)
        except BUG_ERRORS as error:
            outcome = Outcome("unknown", f"{DRIVER_BUG}: {_name(error)}")
            log.error("%s %s %s: %s", op_id, recipe, kind, DRIVER_BUG, exc_info=error)
        except Exception as error:
            outcome = Outcome("unknown", _name(error))
        self.history.complete(op_id, outcome.status, error=outcome.error, value=outcome.value)
        return outcome

    async def forever(
        self, driver: str, step: Callable[[random.Random], Awaitable[object]], pause: float
    ) -> None:
        """Call ``step`` until told to stop, with a seeded random pause in between."""
        rng = self.rng(driver)
        await self.nap(rng.uniform(0, pause))  # do not all start at once
        while not self.stopping.is_set():
            await step(rng)
            await self.nap(rng.uniform(0.2 * pause, pause))

    # --- holders: locks, leases, leadership ----------------------------------------------

    async def await_told(self, section: _Section, wait_lost: Callable[[], Awaitable[None]]) -> None:
        """A holder the store turned away, or whose node is gone, has lost its hold:
        wait (up to TOLD_BOUND) for the recipe to say so. A hold's cancel scope may
        end this wait by cancelling the block it runs in."""
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TOLD_BOUND):
                await wait_lost()
                section.told_after = time.monotonic() - started

    async def fenced(
        self,
        store: StoreClient,
        op_id: str,
        section: _Section,
        writes: Sequence[tuple[str, int]],
        kind: Kind,
        wait_lost: Callable[[], Awaitable[None]],
        rng: random.Random,
        *,
        mode: str | None = None,
        limit: int | None = None,
        node: str | None = None,
    ) -> None:
        """The critical section: ``begin`` to each (resource, token) of ``writes`` in
        order, a short pause, then ``end`` in reverse order.

        If the store turns us away, a newer holder has written: the recipe must
        tell us that we lost what we hold, within TOLD_BOUND (the hold's cancel
        scope ends this block when it does).
        """
        for action, targets in (("begin", list(writes)), ("end", list(reversed(writes)))):
            for resource, token in targets:
                ok, reason = await store.write(
                    resource, kind, token, action, op=op_id, mode=mode, limit=limit, node=node
                )
                if not ok:
                    section.rejected, section.reason = True, reason
                    await self.await_told(section, wait_lost)
                    return
            if action == "begin":
                await asyncio.sleep(rng.uniform(0.05, 0.3))

    async def hold_fenced(
        self,
        op_id: str,
        holding: contextlib.AbstractAsyncContextManager[object],
        token: Callable[[], Awaitable[int | None]],
        wait_lost: Callable[[], Awaitable[None]],
        resource: str,
        store: StoreClient,
        rng: random.Random,
        *,
        kind: Kind = "exclusive",
        mode: str | None = None,
    ) -> Outcome:
        """Hold a lock, a lease or leadership for one block (``holding``) and write
        under it with ``token()`` (None: the hold's node is gone already, which the
        recipe must then report as a loss)."""
        section = _Section()
        try:
            async with holding:
                section.t_acq = self.now()
                section.token = await token()
                if section.token is None:
                    section.rejected, section.reason = True, "its node is gone"
                    await self.await_told(section, wait_lost)
                else:
                    await self.fenced(
                        store,
                        op_id,
                        section,
                        [(resource, section.token)],
                        kind,
                        wait_lost,
                        rng,
                        mode=mode,
                    )
                section.t_rel = self.now()
        except LeaseHeldError as error:  # an OwnershipError, but nothing was held
            return Outcome("fail", _name(error), section.value(lost=False, mode=mode))
        except OwnershipError as error:  # LockLostError, LeadershipLostError, NotOwnerError
            return Outcome("fail", _name(error), section.value(lost=True, mode=mode))
        except CoordinationError as error:
            if section.t_acq is None:  # never held: nothing to judge
                return Outcome("fail", _name(error), section.value(lost=False, mode=mode))
            return Outcome("unknown", _name(error), section.value(lost=False, mode=mode))
        return Outcome("ok", None, section.value(lost=False, mode=mode))

    @staticmethod
    def token_of(holder: Mutex | LeaderElection | LeaderLatch) -> Callable[[], Awaitable[int]]:
        """The holder's own fencing token (its node's creation zxid)."""

        async def token() -> int:
            return holder.fencing_token

        return token

    def exclusive_step(
        self,
        recipe: str,
        kind: str,
        holding: Callable[[], contextlib.AbstractAsyncContextManager[object]],
        token: Callable[[], Awaitable[int | None]],
        wait_lost: Callable[[], Awaitable[None]],
        store: StoreClient,
        rng: random.Random,
        *,
        resource: str | None = None,
    ) -> _Step:
        """A step that holds an exclusive recipe (``holding()``, made when the step
        runs) and writes under it to ``resource`` (default: the recipe's name)."""
        return (
            recipe,
            kind,
            lambda op_id: self.hold_fenced(
                op_id, holding(), token, wait_lost, resource or recipe, store, rng
            ),
        )

    async def fenced_loop(
        self, driver: str, client: aiocoord.Client, pause: float, pick: _Pick
    ) -> None:
        """Drive one holder recipe forever on this driver's store connection:
        ``pick`` says what each step is (recipe, operation) and runs it."""
        store = self.store(driver)

        async def step(rng: random.Random) -> None:
            recipe, kind, body = pick(rng, store)
            await self.op(recipe, kind, body, driver=driver, policy=_policy(client))

        try:
            await self.forever(driver, step, pause)
        finally:
            store.close()

    async def mutex_loop(
        self,
        driver: str,
        client: aiocoord.Client,
        lock: Mutex | None = None,
        recipe: str = "mutex",
        pause: float = 0.3,
    ) -> None:
        """Hold a Mutex of this driver's own, or ``lock``, shared with other drivers
        (a Mutex with local hand-off: each grant has its own, larger token)."""
        if lock is None:
            lock = Mutex(client, MUTEX, data=f"{self.name}/{driver}".encode())
        held = lock

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return self.exclusive_step(
                recipe,
                "hold",
                lambda: held.hold(timeout=ACQUIRE_TIMEOUT),
                self.token_of(held),
                held.wait_lost,
                store,
                rng,
            )

        await self.fenced_loop(driver, client, pause, pick)

    async def rw_loop(self, driver: str, client: aiocoord.Client) -> None:
        rw = ReadWriteLock(client, RWLOCK, data=f"{self.name}/{driver}".encode())

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            write = rng.random() < 0.35
            lock = rw.write_lock if write else rw.read_lock
            mode = "write" if write else "read"
            return (
                "rwlock",
                mode,
                lambda op_id: self.hold_fenced(
                    op_id,
                    lock.hold(timeout=ACQUIRE_TIMEOUT),
                    self.token_of(lock),
                    lock.wait_lost,
                    "rwlock",
                    store,
                    rng,
                    kind="rw",
                    mode=mode,
                ),
            )

        await self.fenced_loop(driver, client, 0.3, pick)

    async def leader_loop(self, driver: str, client: aiocoord.Client) -> None:
        election = LeaderElection(client, LEADER, participant_id=f"{self.name}/{driver}")

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return self.exclusive_step(
                "leader",
                "term",
                lambda: election.hold(timeout=ACQUIRE_TIMEOUT),
                self.token_of(election),
                election.wait_lost,
                store,
                rng,
            )

        await self.fenced_loop(driver, client, 0.4, pick)

    async def hold_lease(
        self,
        op_id: str,
        semaphore: Semaphore,
        client: aiocoord.Client,
        store: StoreClient,
        rng: random.Random,
    ) -> Outcome:
        """Hold one lease; its token is the lease node's creation zxid."""
        section = _Section()
        try:
            leases = await semaphore.acquire(1, timeout=ACQUIRE_TIMEOUT)
        except aiocoord.OperationTimeoutError:
            return Outcome("fail", "timeout", section.value(lost=False))
        except CoordinationError as error:
            return Outcome("fail", _name(error), section.value(lost=False))
        lease = leases[0]
        lost = False
        try:
            section.t_acq = self.now()
            stat = await client.exists(lease.node)
            if stat is None or stat.ephemeral_owner != client.session_id:
                # Our lease node is gone already: the recipe must say so.
                section.rejected, section.reason = True, "the lease node is gone"
                await self.await_told(section, lease.wait_lost)
            else:
                section.token = stat.czxid
                body = asyncio.ensure_future(
                    self.fenced(
                        store,
                        op_id,
                        section,
                        [("semaphore", section.token)],
                        "semaphore",
                        lease.wait_lost,
                        rng,
                        limit=SEMAPHORE_LEASES,
                        node=lease.node,
                    )
                )
                lost = await self.unless_lost(body, [asyncio.ensure_future(lease.wait_lost())])
                if not lost:
                    section.t_rel = self.now()
        except CoordinationError as error:
            with contextlib.suppress(CoordinationError):
                await lease.release()
            return Outcome("unknown", _name(error), section.value(lost=lease.lost))
        await lease.release()
        lost = lost or lease.lost
        if lost:
            return Outcome("fail", "lease lost", section.value(lost=True))
        return Outcome("ok", None, section.value(lost=False))

    @staticmethod
    async def unless_lost(
        body: asyncio.Future[None], losses: Sequence[asyncio.Future[Any]]
    ) -> bool:
        """Run ``body`` (a critical section outside any cancel scope) until it ends or
        one of ``losses`` (waits for a loss) does; a loss first cancels it: True then."""
        lost = False
        try:
            await asyncio.wait({body, *losses}, return_when=asyncio.FIRST_COMPLETED)
            if not body.done():  # lost while inside: leave at once
                body.cancel()
                lost = True
            with contextlib.suppress(asyncio.CancelledError):
                await body
        finally:
            body.cancel()
            for loss in losses:
                loss.cancel()
            await asyncio.gather(*losses, return_exceptions=True)
        return lost

    async def semaphore_loop(self, driver: str, client: aiocoord.Client) -> None:
        semaphore = Semaphore(
            client, SEMAPHORE, SEMAPHORE_LEASES, data=f"{self.name}/{driver}".encode()
        )

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return (
                "semaphore",
                "lease",
                lambda op_id: self.hold_lease(op_id, semaphore, client, store, rng),
            )

        await self.fenced_loop(driver, client, 0.3, pick)

    async def semmutex_loop(self, driver: str, client: aiocoord.Client) -> None:
        """A SemaphoreMutex (a one-lease semaphore), fenced as the Mutex with its lease
        node's creation zxid: leases on one path are granted in creation order."""
        lock = SemaphoreMutex(client, SEMMUTEX, data=f"{self.name}/{driver}".encode())

        async def token() -> int | None:
            stat = await client.exists(lock.fence().node)
            if stat is None or stat.ephemeral_owner != client.session_id:
                return None
            return stat.czxid

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return self.exclusive_step(
                "semmutex",
                "hold",
                lambda: lock.hold(timeout=ACQUIRE_TIMEOUT),
                token,
                lock.wait_lost,
                store,
                rng,
            )

        await self.fenced_loop(driver, client, 0.4, pick)

    async def lease_loop(self, driver: str, client: aiocoord.Client) -> None:
        """The Lease (a try-lock on TTL nodes, kept alive while held), fenced with its
        node's creation zxid. Taking it never waits: a held lease is a ``fail``."""
        lease = Lease(client, LEASE, LEASE_TTL, participant_id=f"{self.name}/{driver}")

        async def token() -> int | None:
            node = lease.node
            stat = None if node is None else await client.exists(node)
            return None if stat is None else stat.czxid

        async def wait_lost() -> None:
            if lease.is_held:
                await lease.wait_lost()

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return self.exclusive_step("lease", "hold", lease.hold, token, wait_lost, store, rng)

        await self.fenced_loop(driver, client, 0.4, pick)

    async def hold_multi(
        self,
        op_id: str,
        multi: MultiLock,
        locks: tuple[Mutex, Mutex],
        store: StoreClient,
        rng: random.Random,
    ) -> Outcome:
        """Take both locks through the MultiLock; write to both resources, each with
        its lock's fencing token (begin a, begin b, end b, end a)."""
        section = _Section()
        try:
            if not await multi.acquire(timeout=ACQUIRE_TIMEOUT):
                return Outcome("fail", "timeout", section.value(lost=False))
        except CoordinationError as error:
            return Outcome("fail", _name(error), section.value(lost=False))
        first, second = locks
        lost, error_text, unknown = False, None, False
        tokens: dict[str, int] = {}
        try:
            section.t_acq = self.now()
            tokens = {"token_a": first.fencing_token, "token_b": second.fencing_token}
            section.token = tokens["token_b"]
            losses = [asyncio.ensure_future(lock.wait_lost()) for lock in locks]

            async def wait_lost() -> None:
                await asyncio.wait(losses, return_when=asyncio.FIRST_COMPLETED)

            writes = [("multi-a", tokens["token_a"]), ("multi-b", tokens["token_b"])]
            body = asyncio.ensure_future(
                self.fenced(store, op_id, section, writes, "exclusive", wait_lost, rng)
            )
            lost = await self.unless_lost(body, losses)
            lost = lost or not all(lock.is_owned_by_current_task() for lock in locks)
            if not lost:
                section.t_rel = self.now()
        except OwnershipError as error:  # lost before its token could be read
            lost, error_text = True, _name(error)
        except CoordinationError as error:
            unknown, error_text = True, _name(error)
        finally:
            try:
                await multi.release()
            except CoordinationError as error:
                unknown, error_text = not lost, error_text or _name(error)
        if lost:
            return Outcome("fail", error_text or "lost", section.value(lost=True, **tokens))
        if unknown:
            return Outcome("unknown", error_text, section.value(lost=False, **tokens))
        return Outcome("ok", None, section.value(lost=False, **tokens))

    async def multilock_loop(self, driver: str, client: aiocoord.Client) -> None:
        """A MultiLock over two Mutex paths; a third of the steps take the second path
        alone, with a plain Mutex, so the MultiLock's hold is tested against it."""
        data = f"{self.name}/{driver}".encode()
        locks = (Mutex(client, MULTI_A, data=data), Mutex(client, MULTI_B, data=data))
        multi = MultiLock(locks)

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            if rng.random() < 0.35:
                alone = locks[1]
                return self.exclusive_step(
                    "multilock",
                    "b-only",
                    lambda: alone.hold(timeout=ACQUIRE_TIMEOUT),
                    self.token_of(alone),
                    alone.wait_lost,
                    store,
                    rng,
                    resource="multi-b",
                )
            return (
                "multilock",
                "both",
                lambda op_id: self.hold_multi(op_id, multi, locks, store, rng),
            )

        await self.fenced_loop(driver, client, 0.4, pick)

    async def latch_term(
        self,
        op_id: str,
        client: aiocoord.Client,
        driver: str,
        store: StoreClient,
        rng: random.Random,
    ) -> Outcome:
        """Join the latch, wait to lead, write one fenced section as leader, leave.

        A term runs from leading (``wait_leader``) to leaving (``t_rel``) or to
        ``changes()`` yielding False (``t_lost``: the loss, which ends the section).
        """
        latch = LeaderLatch(client, LATCH, participant_id=f"{self.name}/{driver}")
        section = _Section()
        gained, told = asyncio.Event(), asyncio.Event()
        t_lost: list[float] = []

        async def follow() -> None:
            try:
                async for leading in latch.changes():
                    if leading:
                        gained.set()
                    elif gained.is_set():
                        t_lost.append(self.now())
                        return
            finally:
                if gained.is_set():  # lost, or the latch ended (failed) while leading
                    told.set()

        async def wait_told() -> None:
            await told.wait()

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0)  # subscribed before the latch starts: no change is missed
        started = False
        try:
            try:
                await latch.start()
                started = True
                if not await latch.wait_leader(timeout=ACQUIRE_TIMEOUT):
                    return Outcome("fail", "timeout", section.value(lost=False))
                section.t_acq = self.now()
                section.token = latch.fencing_token
            except NotOwnerError as error:  # lost between leading and reading the token
                return Outcome("fail", _name(error), section.value(lost=True, t_lost=self.now()))
            except CoordinationError as error:
                return Outcome("fail", _name(error), section.value(lost=False))
            body = asyncio.ensure_future(
                self.fenced(
                    store, op_id, section, [("latch", section.token)], "exclusive", wait_told, rng
                )
            )
            lost = await self.unless_lost(body, [asyncio.ensure_future(told.wait())])
            if lost or told.is_set():
                ended = t_lost[0] if t_lost else self.now()
                return Outcome("fail", "leadership lost", section.value(lost=True, t_lost=ended))
            section.t_rel = self.now()
            return Outcome("ok", None, section.value(lost=False))
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
            if started:
                await latch.aclose()

    async def latch_loop(self, driver: str, client: aiocoord.Client) -> None:
        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return (
                "latch",
                "term",
                lambda op_id: self.latch_term(op_id, client, driver, store, rng),
            )

        await self.fenced_loop(driver, client, 0.4, pick)

    # --- counters ---------------------------------------------------------------------------

    @staticmethod
    async def add(
        counter: AtomicLong | AtomicInt,
        delta: int,
        lower: int | None = None,
        upper: int | None = None,
    ) -> Outcome:
        try:
            result = await counter.add(delta, lower=lower, upper=upper)
        except CoordinationError as error:
            status: Status = "fail" if _unsent(error) else "unknown"
            return Outcome(status, _name(error), {"delta": delta})
        value = {"delta": delta, "pre": result.pre_value, "post": result.post_value}
        if result.succeeded:
            return Outcome("ok", None, value)
        return Outcome("fail", str(result.reason), value)

    async def counter_loop(
        self, driver: str, counter: AtomicLong | AtomicInt, recipe: str, path: str
    ) -> None:
        async def step(rng: random.Random) -> None:
            await self.op(
                recipe, "increment", lambda _op: self.add(counter, 1), driver=driver, path=path
            )

        await self.forever(driver, step, 0.1)

    async def bounded_loop(self, driver: str, client: aiocoord.Client) -> None:
        counter = AtomicLong(client, COUNTER_BOUNDED, coalesce=False)

        async def step(rng: random.Random) -> None:
            delta = 1 if rng.random() < 0.6 else -1
            await self.op(
                "bounded-counter",
                "add",
                lambda _op: self.add(counter, delta, lower=0, upper=COUNTER_BOUND),
                driver=driver,
                path=COUNTER_BOUNDED,
                delta=delta,
            )

        await self.forever(driver, step, 0.15)

    def unique_value(self, serial: int, driver: int) -> int:
        """A SharedCount value no other write of the run uses (fits 32 bits)."""
        index = int(self.name.lstrip("w") or 0)
        return (index + 1) * 10_000_000 + serial * 2 + driver

    async def try_set(self, count: SharedCount, previous: VersionedValue[int], new: int) -> Outcome:
        try:
            done = await count.try_set_count(previous, new)
        except CoordinationError as error:
            status: Status = "fail" if _unsent(error) else "unknown"
            return Outcome(status, _name(error))
        return Outcome("ok") if done else Outcome("fail", "refused")

    async def shared_count_loop(self, driver: str, client: aiocoord.Client, number: int) -> None:
        """Compare-and-set a SharedCount to values of our own, each from the version
        and value the count last heard; the history says which sets won."""
        count = SharedCount(client, SHARED_COUNT, 0)
        serial = itertools.count(1)
        while not self.stopping.is_set():
            try:
                async with asyncio.timeout(ACQUIRE_TIMEOUT):
                    await count.start()
                break
            except (TimeoutError, CoordinationError) as error:
                log.info("%s: SharedCount did not start (%r); again", driver, error)
                await self.nap(1.0)
        else:
            return

        async def step(rng: random.Random) -> None:
            previous = count.versioned_value
            new = self.unique_value(next(serial), number)
            await self.op(
                "shared-count",
                "try_set",
                lambda _op: self.try_set(count, previous, new),
                driver=driver,
                prev_version=previous.version,
                prev_value=previous.value,
                new=new,
            )

        try:
            await self.forever(driver, step, 0.3)
        finally:
            await count.aclose()

    async def sharded_loop(self, driver: str, client: aiocoord.Client, *, coalesce: bool) -> None:
        """±1 on a ShardedCounter with a small bound, and now and then a read of the
        exact total (which must be within the bounds)."""
        counter = ShardedCounter(
            client, SHARDED, upper=SHARDED_UPPER, shards=SHARDED_SHARDS, coalesce=coalesce
        )

        async def add(delta: int) -> Outcome:
            try:
                result = await counter.add(delta)
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error), {"delta": delta})
            value = {"delta": delta, "pre": result.pre_value, "post": result.post_value}
            if result.succeeded:
                return Outcome("ok", None, value)
            return Outcome("fail", str(result.reason), value)

        async def total() -> Outcome:
            try:
                result = await counter.get()
            except CoordinationError as error:
                return Outcome("fail", _name(error))
            return Outcome("ok", None, {"total": result.post_value})

        async def step(rng: random.Random) -> None:
            if rng.random() < 0.2:
                await self.op("sharded", "get", lambda _op: total(), driver=driver)
                return
            delta = 1 if rng.random() < 0.6 else -1
            await self.op("sharded", "add", lambda _op: add(delta), driver=driver, delta=delta)

        await self.forever(driver, step, 0.3)

    # --- double barrier -------------------------------------------------------------------

    async def barrier_enter(self, barrier: DoubleBarrier, client: aiocoord.Client) -> Outcome:
        """Enter, giving up at once when the run stops (the others stop coming).

        An enter that gives up (timeout, error, cancelled) while its client is
        disconnected leaves its node to a background delete that lands once
        ZooKeeper is back, and the others count that node until then. So every
        failed enter records ``connected``: the state read in the entering task
        right after the enter returned or raised, with no await in between, so
        it is the state the recipe's cleanup decided on. The entering task never
        outlives this call (a watchdog's cancellation cancels it too)."""

        async def enter() -> tuple[bool | BaseException, bool]:
            try:
                entered: bool | BaseException = await barrier.enter(timeout=BARRIER_TIMEOUT)
            except (CoordinationError, asyncio.CancelledError) as error:
                # Only this call cancels the task, and it awaits it: the
                # cancellation is ours, recorded as "stopped" below.
                return error, client.connected
            return entered, client.connected

        entering = asyncio.ensure_future(enter())
        stopped = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({entering, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not entering.done():
                entering.cancel()
                # Shielded: the enter's cleanup finishes before the op is recorded,
                # even when the watchdog is what cancels us.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(entering)
        if entering.cancelled():  # cancelled before it began: it made no node
            return Outcome("fail", "stopped", {"connected": client.connected})
        entered, connected = entering.result()
        if isinstance(entered, BaseException):
            stopped_here = isinstance(entered, asyncio.CancelledError)
            error = "stopped" if stopped_here else _name(entered)
        elif entered:
            return Outcome("ok")
        else:
            error = "timeout"
        return Outcome("fail", error, {"connected": connected})

    @staticmethod
    async def barrier_leave(barrier: DoubleBarrier) -> Outcome:
        try:
            left = await barrier.leave(timeout=BARRIER_TIMEOUT)
        except (BarrierBrokenError, CoordinationError) as error:
            return Outcome("fail", _name(error))
        return Outcome("ok") if left else Outcome("fail", "timeout")

    async def barrier_loop(self, driver: str, client: aiocoord.Client) -> None:
        attempts = itertools.count(1)

        async def step(rng: random.Random) -> None:
            attempt = next(attempts)
            barrier = DoubleBarrier(
                client, BARRIER, self.config.members, data=f"{self.name}/{attempt}".encode()
            )
            entered = await self.op(
                "barrier", "enter", lambda _op: self.barrier_enter(barrier, client), attempt=attempt
            )
            if entered.status != "ok":
                return
            await asyncio.sleep(rng.uniform(0.01, 0.1))
            await self.op(
                "barrier", "leave", lambda _op: self.barrier_leave(barrier), attempt=attempt
            )

        await self.forever(driver, step, 0.2)

    # --- plain barrier ------------------------------------------------------------------------

    @staticmethod
    async def gate_call(gate: Barrier, kind: str, _op_id: str) -> Outcome:
        """Set or remove a plain barrier (``kind``), for :meth:`op`."""
        try:
            await (gate.set_barrier() if kind == "set" else gate.remove_barrier())
        except CoordinationError as error:
            return Outcome("unknown", _name(error))
        return Outcome("ok")

    async def gate_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Set and remove this worker's own barrier in turns (one task: the history
        orders its node's states); remove it at the end, so nobody waits on."""
        path = f"{GATE}/{self.name}"
        gate = Barrier(client, path)
        rng = self.rng(driver)
        closed = False
        await self.nap(rng.uniform(0, 0.5))
        try:
            while not self.stopping.is_set():
                kind = "remove" if closed else "set"
                call = functools.partial(self.gate_call, gate, kind)
                await self.op("gate", kind, call, path=path)
                closed = not closed
                await self.nap(rng.uniform(0.4, 1.5) if closed else rng.uniform(0.2, 0.6))
        finally:
            if closed:
                remove = functools.partial(self.gate_call, gate, "remove")
                await self.op("gate", "remove", remove, path=path)

    async def gate_wait_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Wait on any worker's barrier: released (ok) or not within GATE_WAIT (fail)."""

        async def wait(gate: Barrier) -> Outcome:
            try:
                released = await gate.wait_on_barrier(timeout=GATE_WAIT)
            except CoordinationError as error:
                return Outcome("unknown", _name(error))
            return Outcome("ok") if released else Outcome("fail", "timeout")

        async def step(rng: random.Random) -> None:
            path = f"{GATE}/w{rng.randrange(self.config.members)}"
            gate = Barrier(client, path)
            await self.op("gate", "wait", lambda _op: wait(gate), driver=driver, path=path)

        await self.forever(driver, step, 0.3)

    # --- queues -----------------------------------------------------------------------------

    @staticmethod
    async def put(send: Callable[[], Awaitable[bool]], item: str) -> Outcome:
        try:
            put = await send()
        except CoordinationError as error:
            status: Status = "fail" if _unsent(error) else "unknown"
            return Outcome(status, _name(error), {"item": item})
        return Outcome("ok" if put else "fail", None if put else "full", {"item": item})

    async def put_loop(self, driver: str, recipe: str, put: _Put, pause: float = 0.25) -> None:
        """Put item after item: ``put(item, rng)`` says how (and what to record)."""
        serial = itertools.count(1)

        async def step(rng: random.Random) -> None:
            item = f"{self.name}-{driver}-{next(serial)}"
            send, args = put(item, rng)
            await self.op(recipe, "put", lambda _op: self.put(send, item), item=item, **args)

        await self.forever(driver, step, pause)

    async def fifo_put_loop(
        self, driver: str, client: aiocoord.Client, recipe: str, path: str
    ) -> None:
        queue: Queue[bytes] = Queue(client, path)

        def put(
            item: str, rng: random.Random
        ) -> tuple[Callable[[], Awaitable[bool]], dict[str, Any]]:
            return (lambda: queue.put(item.encode(), timeout=ACQUIRE_TIMEOUT)), {}

        await self.put_loop(driver, recipe, put)

    async def priority_put_loop(self, driver: str, client: aiocoord.Client) -> None:
        queue: PriorityQueue[bytes] = PriorityQueue(client, PQUEUE)

        def put(
            item: str, rng: random.Random
        ) -> tuple[Callable[[], Awaitable[bool]], dict[str, Any]]:
            priority = rng.randint(-2, 2)
            send = lambda: queue.put(item.encode(), priority, timeout=ACQUIRE_TIMEOUT)  # noqa: E731
            return send, {"priority": priority}

        await self.put_loop(driver, "pqueue", put, 0.4)

    async def delay_put_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Items due 0 to 1.5 s from now; ``due_ms`` is the due time the recipe puts
        in the item's name (wall clock, as its consumers read it)."""
        queue: DelayQueue[bytes] = DelayQueue(client, DQUEUE)

        def put(
            item: str, rng: random.Random
        ) -> tuple[Callable[[], Awaitable[bool]], dict[str, Any]]:
            delay = rng.choice((0.0, rng.uniform(0.1, 1.5)))
            due = time.time() + delay
            send = lambda: queue.put(item.encode(), at=due, timeout=ACQUIRE_TIMEOUT)  # noqa: E731
            return send, {"delay": round(delay, 3), "due_ms": round(due * 1000)}

        await self.put_loop(driver, "dqueue", put, 0.4)

    async def id_queue_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Put items under a few ids of ours; now and then remove every item of one id."""
        queue: IdQueue[bytes] = IdQueue(client, IDQUEUE)
        serial = itertools.count(1)

        async def remove(item_id: str) -> Outcome:
            try:
                removed = await queue.remove(item_id)
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error))
            return Outcome("ok", None, {"removed": removed})

        async def step(rng: random.Random) -> None:
            item_id = f"{self.name}-{rng.randrange(6)}"
            if rng.random() < 0.1:
                await self.op("idqueue", "remove", lambda _op: remove(item_id), id=item_id)
                return
            item = f"{self.name}-{driver}-{next(serial)}"
            send = lambda: queue.put(item.encode(), item_id, timeout=ACQUIRE_TIMEOUT)  # noqa: E731
            await self.op("idqueue", "put", lambda _op: self.put(send, item), item=item, id=item_id)

        await self.forever(driver, step, 0.4)

    async def get(self, queue: _Queue) -> Outcome:
        try:
            data = await queue.get(timeout=QUEUE_WAIT)
        except QueueEmptyError:
            return Outcome("fail", "empty")
        except OutcomeUnknownError as error:
            return Outcome("unknown", _name(error), {"path": error.path})
        except (ConnectionLossError, SessionExpiredError) as error:
            # get() reports a take whose delete may have gone through as
            # OutcomeUnknownError; any other connection error took nothing.
            return Outcome("fail", _name(error))
        except CoordinationError as error:
            return Outcome("unknown", _name(error))
        return Outcome("ok", None, {"item": data.decode(), "wall_ms": _wall_ms()})

    async def get_loop(self, driver: str, recipe: str, queue: _Queue, pause: float = 0.1) -> None:
        async def step(rng: random.Random) -> None:
            await self.op(recipe, "get", lambda _op: self.get(queue), driver=driver)

        await self.forever(driver, step, pause)

    async def take(self, queue: _Queue, rng: random.Random) -> Outcome:
        """Take one item at least once: the block returning deletes it."""
        seen: dict[str, Any] = {}
        try:
            async with queue.take(timeout=QUEUE_WAIT) as data:
                seen |= {"item": data.decode(), "t_body": self.now(), "wall_ms": _wall_ms()}
                await asyncio.sleep(rng.uniform(0.01, 0.1))
                seen["t_end"] = self.now()
        except QueueEmptyError:
            return Outcome("fail", "empty")
        except TakeLostError as error:
            return Outcome("fail", _name(error), seen | {"lost": True})
        except CoordinationError as error:
            if "item" in seen:  # the commit may or may not have gone through
                return Outcome("unknown", _name(error), seen)
            status: Status = "fail" if isinstance(error, ConnectionLossError) else "unknown"
            if isinstance(error, OutcomeUnknownError):
                status = "unknown"
            return Outcome(status, _name(error), seen)
        return Outcome("ok", None, seen)

    async def take_loop(self, driver: str, recipe: str, queue: _Queue, pause: float = 0.1) -> None:
        async def step(rng: random.Random) -> None:
            await self.op(recipe, "take", lambda _op: self.take(queue, rng), driver=driver)

        await self.forever(driver, step, pause)

    # --- group membership -------------------------------------------------------------------

    async def group_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Members that join and leave (ids used once), and updates of the data of the
        members kept for the whole run (``self.members``, compared at the end)."""
        serial = itertools.count(1)

        async def join(member: GroupMember) -> Outcome:
            try:
                await member.start()
            except CoordinationError as error:
                return Outcome("fail", _name(error))
            return Outcome("ok")

        async def leave(member: GroupMember) -> Outcome:
            await member.aclose()
            return Outcome("ok")

        async def update(member: GroupMember, data: bytes) -> Outcome:
            try:
                await member.update(data)
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error))
            return Outcome("ok")

        async def step(rng: random.Random) -> None:
            if self.members and rng.random() < 0.4:
                member = rng.choice(self.members)
                data = f"{self.name}-{next(self._serial)}".encode()
                done = await self.op(
                    "group", "update", lambda _op: update(member, data), id=member.participant_id
                )
                self.data_sure[member.participant_id] = done.status == "ok"
                return
            member_id = f"{self.name}-{driver}-{next(serial)}"
            member = GroupMember(client, GROUP, participant_id=member_id, data=member_id.encode())
            joined = await self.op("group", "join", lambda _op: join(member), id=member_id)
            if joined.status == "ok":
                await asyncio.sleep(rng.uniform(0.1, 0.8))
                await self.op("group", "leave", lambda _op: leave(member), id=member_id)

        await self.forever(driver, step, 0.5)

    # --- the tree under the caches -------------------------------------------------------

    async def tree_write(
        self, client: aiocoord.Client, kind: str, path: str, data: bytes
    ) -> Outcome:
        try:
            if kind == "create":
                await client.create(path, data, make_parents=True)
            elif kind == "set":
                await client.set(path, data)
            else:
                await client.delete(path)
        except (NoNodeError, NodeExistsError, NotEmptyError) as error:
            return Outcome("fail", type(error).__name__)
        except CoordinationError as error:
            status: Status = "fail" if _unsent(error) else "unknown"
            return Outcome(status, _name(error))
        return Outcome("ok")

    async def tree_loop(self, driver: str, client: aiocoord.Client) -> None:
        async def step(rng: random.Random) -> None:
            branch = f"{TREE}/{rng.choice('abcd')}"
            leaf = f"{branch}/{rng.randrange(4)}"
            roll = rng.random()
            kind, path = (
                ("create", leaf)
                if roll < 0.4
                else ("set", leaf)
                if roll < 0.8
                else ("delete", leaf)
                if roll < 0.95
                else ("delete", branch)
            )
            data = f"{self.name}-{next(self._serial)}".encode()
            await self.op(
                "tree", kind, lambda _op: self.tree_write(client, kind, path, data), path=path
            )

        await self.forever(driver, step, 0.15)

    async def witness_loop(self, driver: str, client: aiocoord.Client) -> None:
        """Plain creates and deletes, each acknowledged one recorded: ZooKeeper must
        keep every node it acknowledged creating and not bring back one it
        acknowledged deleting. About one in three steps deletes the oldest node
        this driver made (acknowledged, never deleted before): a lost delete is
        what a queue's item taken twice looks like from the server's side."""
        made: list[str] = []

        async def create() -> Outcome:
            try:
                node = await client.create(f"{WITNESS}/n-", self.name.encode(), sequential=True)
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error))
            name = node.rsplit("/", 1)[1]
            made.append(name)
            return Outcome("ok", None, {"node": name})

        async def delete(name: str) -> Outcome:
            try:
                await client.delete(f"{WITNESS}/{name}")
            except NoNodeError as error:
                # Nobody else deletes it, and it is never deleted twice: the
                # acknowledged create is gone.
                return Outcome("fail", _name(error), {"node": name})
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error), {"node": name})
            return Outcome("ok", None, {"node": name})

        async def step(rng: random.Random) -> None:
            if made and rng.random() < 0.35:
                name = made.pop(0)
                await self.op(
                    "witness", "delete", lambda _op: delete(name), driver=driver, node=name
                )
            else:
                await self.op("witness", "create", lambda _op: create(), driver=driver)

        await self.forever(driver, step, 0.1)

    async def cache_final(
        self,
        what: str,
        cache: _AnyCache | None,
        client: aiocoord.Client,
        root: str,
        depth: int | None,
    ) -> dict[str, Any]:
        """Once every writer has stopped: does the cache's view equal the server's
        tree under ``root`` (down to ``depth``)?"""
        result: dict[str, Any] = {"type": "final", "what": what, "worker": self.name, "path": root}
        started = time.monotonic()
        try:
            assert cache is not None
            async with asyncio.timeout(CACHE_SETTLE + 30):
                await client.sync(root)
                server = await read_tree(client, root, depth)
                view: dict[str, tuple[str, int]] = {}
                deadline = time.monotonic() + CACHE_SETTLE
                while True:
                    view = {
                        path: ("" if data is None else data.hex(), stat.mzxid)
                        for path, (data, stat) in cache.snapshot().items()
                    }
                    if view == server or time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(0.1)
        except Exception as error:
            result |= {"equal": False, "error": _name(error)}
            return result
        result |= {
            "equal": view == server,
            "nodes": len(server),
            "waited": round(time.monotonic() - started, 3),
            "missing": sorted(set(server) - set(view))[:20],
            "extra": sorted(set(view) - set(server))[:20],
            "stale": sorted(p for p in set(server) & set(view) if server[p] != view[p])[:20],
        }
        return result

    async def group_final(self) -> dict[str, Any]:
        """Which of the members kept for the run are members now (given time to come
        back after an outage), with the data each last published for sure."""
        alive: dict[str, dict[str, Any]] = {}
        for member in self.members:
            with contextlib.suppress(TimeoutError, CoordinationError, RuntimeError):
                async with asyncio.timeout(CACHE_SETTLE):
                    await member.wait_member()
            if member.is_member:
                alive[member.participant_id] = {
                    "data": member.data.hex(),
                    "sure": self.data_sure.get(member.participant_id, True),
                }
        return {"type": "final", "what": "group-alive", "worker": self.name, "members": alive}

    async def finals(self) -> list[dict[str, Any]]:
        """What the controller records once the workers have stopped (``final``)."""
        standard, session = self.clients
        *records, discovery, partitions = await asyncio.gather(
            self.cache_final("cache", self.cache, standard, TREE, None),
            self.cache_final("node-cache", self.node_cache, session, NODE_CACHED, 0),
            self.cache_final("children-cache", self.children_cache, session, CHILDREN_CACHED, 1),
            self.group_final(),
            self.discovery.final(),
            self.partitions.final(),
        )
        return [*records, partitions, *discovery]

    # --- running --------------------------------------------------------------------------------

    def drivers(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        standard, session = self.clients
        local = Mutex(
            standard,
            MUTEX_LOCAL,
            data=f"{self.name}/local".encode(),
            local_handoff=MUTEX_LOCAL_BOUND,
        )
        long_counter = AtomicLong(standard, COUNTER_LONG)
        int_counter = AtomicInt(
            session,
            COUNTER_INT,
            retry=RetryNTimes(2, 0.001),
            promoted_to_lock=PromotedToLock(COUNTER_INT_LOCK, max_lock_time=ACQUIRE_TIMEOUT),
        )
        pqueue: PriorityQueue[bytes] = PriorityQueue(session, PQUEUE)
        idqueue: IdQueue[bytes] = IdQueue(session, IDQUEUE)
        dqueues: list[DelayQueue[bytes]] = [DelayQueue(c, DQUEUE) for c in self.clients]
        return [
            ("mutex-0", self.mutex_loop("mutex-0", standard)),
            ("mutex-1", self.mutex_loop("mutex-1", session)),
            *(
                (
                    f"mutex-local-{i}",
                    self.mutex_loop(f"mutex-local-{i}", standard, local, "mutex-local", 0.1),
                )
                for i in range(3)
            ),
            ("rwlock-0", self.rw_loop("rwlock-0", standard)),
            ("rwlock-1", self.rw_loop("rwlock-1", session)),
            ("semaphore-0", self.semaphore_loop("semaphore-0", standard)),
            ("semaphore-1", self.semaphore_loop("semaphore-1", session)),
            ("semmutex-0", self.semmutex_loop("semmutex-0", standard)),
            ("semmutex-1", self.semmutex_loop("semmutex-1", session)),
            ("multilock-0", self.multilock_loop("multilock-0", standard)),
            ("multilock-1", self.multilock_loop("multilock-1", session)),
            ("lease-0", self.lease_loop("lease-0", standard)),
            ("lease-1", self.lease_loop("lease-1", session)),
            ("leader-0", self.leader_loop("leader-0", standard)),
            ("leader-1", self.leader_loop("leader-1", session)),
            ("latch-0", self.latch_loop("latch-0", standard)),
            ("latch-1", self.latch_loop("latch-1", session)),
            # Two tasks on one counter and client: their increments are coalesced.
            ("counter-a", self.counter_loop("counter-a", long_counter, "counter", COUNTER_LONG)),
            ("counter-b", self.counter_loop("counter-b", long_counter, "counter", COUNTER_LONG)),
            ("counter-int", self.counter_loop("counter-int", int_counter, "counter", COUNTER_INT)),
            ("counter-bounded", self.bounded_loop("counter-bounded", session)),
            ("shared-count-0", self.shared_count_loop("shared-count-0", standard, 0)),
            ("shared-count-1", self.shared_count_loop("shared-count-1", session, 1)),
            ("sharded-0", self.sharded_loop("sharded-0", standard, coalesce=True)),
            ("sharded-1", self.sharded_loop("sharded-1", session, coalesce=False)),
            ("barrier", self.barrier_loop("barrier", standard)),
            ("gate", self.gate_loop("gate", standard)),
            ("gate-wait", self.gate_wait_loop("gate-wait", session)),
            ("queue-put", self.fifo_put_loop("queue-put", standard, "queue", QUEUE)),
            ("queue-get", self.get_loop("queue-get", "queue", Queue(session, QUEUE))),
            ("aqueue-put", self.fifo_put_loop("aqueue-put", session, "aqueue", AQUEUE)),
            ("aqueue-take-0", self.take_loop("aqueue-take-0", "aqueue", Queue(standard, AQUEUE))),
            ("aqueue-take-1", self.take_loop("aqueue-take-1", "aqueue", Queue(session, AQUEUE))),
            ("pqueue-put", self.priority_put_loop("pqueue-put", standard)),
            ("pqueue-get", self.get_loop("pqueue-get", "pqueue", pqueue, 0.2)),
            ("dqueue-put", self.delay_put_loop("dqueue-put", session)),
            ("dqueue-take-0", self.take_loop("dqueue-take-0", "dqueue", dqueues[0], 0.2)),
            ("dqueue-take-1", self.take_loop("dqueue-take-1", "dqueue", dqueues[1], 0.2)),
            ("idqueue", self.id_queue_loop("idqueue", standard)),
            ("idqueue-get", self.get_loop("idqueue-get", "idqueue", idqueue, 0.2)),
            ("group", self.group_loop("group", standard)),
            *self.partitions.drivers(self.clients),
            ("tree", self.tree_loop("tree", standard)),
            ("witness", self.witness_loop("witness", session)),
            *self.discovery.drivers(),
            *self.leadership.drivers(self.clients),
        ]

    async def connect(self) -> None:
        for policy in (StandardErrorPolicy(), SessionErrorPolicy()):
            proxies = []
            for member in self.config.connect.split(","):
                host, port = member.rsplit(":", 1)
                proxy = TcpProxy(host, int(port))
                await proxy.start()
                proxies.append(proxy)
            self.proxies.append(proxies)
            client = aiocoord.connect(
                ",".join(proxy.connect_string for proxy in proxies),
                session_timeout=SESSION_TIMEOUT,
                error_policy=policy,
            )
            self.clients.append(client)
            await client.start()
        standard, session = self.clients
        self.cache = TreeCache(standard, TREE)
        await self.cache.start()
        self.node_cache = NodeCache(session, NODE_CACHED)
        await self.node_cache.start()
        self.children_cache = ChildrenCache(session, CHILDREN_CACHED)
        await self.children_cache.start()
        for index, client in enumerate(self.clients):
            member_id = f"{self.name}-keep-{index}"
            member = GroupMember(client, GROUP, participant_id=member_id, data=member_id.encode())
            await member.start()
            self.members.append(member)
        await self.discovery.start()
        await self.partitions.start(self.clients)
        await self.leadership.start(self.clients)

    async def fault(self, command: dict[str, Any]) -> None:
        """Expire a session, drop a connection or stall the network of one of our
        clients, as asked."""
        index = int(command.get("client", 0)) % len(self.clients)
        client = self.clients[index]
        started = self.now()
        try:
            if command["cmd"] == "expire":
                await expire_session(client, timeout=20.0)
            elif command["cmd"] == "stall":
                # Nothing passes either way, and no close: what the client sees of
                # a network that drops its packets. Released even if cancelled.
                for proxy in self.proxies[index]:
                    proxy.hold()
                try:
                    await asyncio.sleep(float(command["length"]))
                finally:
                    for proxy in self.proxies[index]:
                        proxy.release()
            else:
                drop_connection(client)
            self.reply({"reply": command["cmd"], "ok": True, "t": started})
        except Exception as error:
            self.reply({"reply": command["cmd"], "ok": False, "error": _name(error)})

    async def aclose(self) -> None:
        await self.discovery.aclose()
        await self.partitions.aclose()
        for member in self.members:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await member.aclose()
        for cache in (self.cache, self.node_cache, self.children_cache):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    if cache is not None:
                        await cache.aclose()
        for client in self.clients:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await client.aclose()
        for proxy in itertools.chain.from_iterable(self.proxies):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await proxy.aclose()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        commands = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
        logging.getLogger("aiocoord").addHandler(_QueueWarnings(self.history))
        watch = asyncio.ensure_future(_StallWatch(self.history).run())
        try:
            async with asyncio.timeout(CONNECT_BOUND):
                await self.connect()
        except Exception as error:
            self.reply({"reply": "ready", "ok": False, "error": _name(error)})
            watch.cancel()
            await self.aclose()
            return 1
        self.reply({"reply": "ready", "ok": True, "pid": os.getpid()})
        drivers = {asyncio.ensure_future(coro): name for name, coro in self.drivers()}
        side: set[asyncio.Future[None]] = set()
        try:
            while line := await commands.readline():
                command = json.loads(line)
                name = command.get("cmd")
                if name in ("expire", "drop", "stall"):
                    fault = asyncio.ensure_future(self.fault(command))
                    side.add(fault)
                    fault.add_done_callback(side.discard)
                elif name == "stop":
                    self.stopping.set()
                    _done, pending = await asyncio.wait(drivers, timeout=STOP_BOUND)
                    crashed: dict[str, str] = {}
                    for driver, driver_name in drivers.items():
                        if driver.done() and driver.cancelled():
                            # Nothing here cancels a driver before exit: it ended early.
                            crashed[driver_name] = "cancelled, though nobody cancelled it"
                        elif driver.done():
                            failure = driver.exception()
                            if failure is not None:
                                log.error("%s crashed", driver_name, exc_info=failure)
                                crashed[driver_name] = _name(failure)
                    hung = sorted(drivers[t] for t in pending)
                    self.reply({"reply": "stopped", "hung": hung, "crashed": crashed})
                elif name == "final":
                    self.reply({"reply": "final", "records": await self.finals()})
                elif name == "exit":
                    break
        finally:
            for future in [*drivers, *side, watch]:
                future.cancel()
            await asyncio.gather(*drivers, *side, watch, return_exceptions=True)
            await self.aclose()
            self.history.close()
        self.reply({"reply": "bye"})
        return 0


def main() -> int:
    config = WorkerConfig.from_json(sys.argv[1])
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The controller sends this before killing a worker that did not answer in time:
    # every thread's stack goes to stderr (raw/<name>.stderr), even with the event
    # loop blocked in a call, so a hang says where it was.
    faulthandler.register(DUMP_STACKS, file=sys.stderr, all_threads=True)
    return asyncio.run(Worker(config).run())


if __name__ == "__main__":
    raise SystemExit(main())
