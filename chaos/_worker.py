"""A chaos worker: one process with its own ZooKeeper sessions, driving every recipe
and recording every operation.

The controller starts it as ``python -m chaos._worker CONFIG`` (a JSON object)
and talks to it over stdin/stdout, one JSON object per line: the worker says
``ready``; the controller may ask it to ``expire`` or ``drop`` one of its
clients' sessions or connections (faults that act on a client object), then
``stop`` (finish the operations under way), ``final`` (compare its TreeCache with
the server's tree) and ``exit``.

Each worker has two clients: client 0 with the standard error policy (a
suspended connection already counts as losing a lock) and client 1 with the
session policy (only an expired session does). The recipes are spread over both.
Every operation runs under a watchdog (:data:`~chaos._layout.OP_BOUND`); one that
outlives it is recorded as a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiocoord
from aiocoord import (
    AtomicInt,
    AtomicLong,
    BarrierBrokenError,
    ConnectionLossError,
    CoordinationError,
    DoubleBarrier,
    LeaderElection,
    LockLostError,
    Mutex,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OutcomeUnknownError,
    OwnershipError,
    PromotedToLock,
    Queue,
    QueueEmptyError,
    ReadWriteLock,
    RetryNTimes,
    Semaphore,
    SessionErrorPolicy,
    SessionExpiredError,
    StandardErrorPolicy,
    TreeCache,
)
from aiocoord.testing import drop_connection, expire_session

from ._history import HistoryWriter, Status
from ._layout import (
    ACQUIRE_TIMEOUT,
    AQUEUE,
    BARRIER,
    BARRIER_TIMEOUT,
    COUNTER_BOUND,
    COUNTER_BOUNDED,
    COUNTER_INT,
    COUNTER_INT_LOCK,
    COUNTER_LONG,
    LEADER,
    MUTEX,
    OP_BOUND,
    QUEUE,
    RWLOCK,
    SEMAPHORE,
    SEMAPHORE_LEASES,
    SESSION_TIMEOUT,
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


def _name(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text[:160]}" if text else type(error).__name__


async def read_tree(client: aiocoord.Client, root: str) -> dict[str, tuple[str, int]]:
    """The server's tree under ``root``: path -> (data as hex, mzxid)."""
    tree: dict[str, tuple[str, int]] = {}
    todo = [root]
    while todo:
        path = todo.pop()
        try:
            data, stat = await client.get(path)
            names = await client.children(path)
        except NoNodeError:
            continue
        tree[path] = (data.hex(), stat.mzxid)
        todo += [f"{path}/{name}" for name in names]
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


class Worker:
    """One worker process's recipes, drivers and commands."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.name = config.name
        self.history = HistoryWriter(Path(config.history), worker=config.name, t0=config.t0)
        self.stopping = asyncio.Event()
        self.clients: list[aiocoord.Client] = []
        self.cache: TreeCache | None = None
        self._serial = itertools.count(1)

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

    async def fenced(
        self,
        store: StoreClient,
        op_id: str,
        section: _Section,
        resource: str,
        kind: Kind,
        wait_lost: Callable[[], Awaitable[None]],
        rng: random.Random,
        *,
        mode: str | None = None,
        limit: int | None = None,
        node: str | None = None,
    ) -> None:
        """The critical section: ``begin`` and ``end`` to the fenced store.

        If the store turns us away, a newer holder has written: the recipe must
        tell us that we lost what we hold, within TOLD_BOUND (the hold's cancel
        scope ends this block when it does).
        """
        assert section.token is not None
        ok, reason = await store.write(
            resource, kind, section.token, "begin", op=op_id, mode=mode, limit=limit, node=node
        )
        if ok:
            await asyncio.sleep(rng.uniform(0.05, 0.3))
            ok, reason = await store.write(
                resource, kind, section.token, "end", op=op_id, mode=mode, limit=limit, node=node
            )
        if ok:
            return
        section.rejected, section.reason = True, reason
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TOLD_BOUND):
                await wait_lost()
                section.told_after = time.monotonic() - started

    async def hold_fenced(
        self,
        op_id: str,
        holding: contextlib.AbstractAsyncContextManager[object],
        holder: Mutex | LeaderElection,
        resource: str,
        kind: Kind,
        store: StoreClient,
        rng: random.Random,
        mode: str | None = None,
    ) -> Outcome:
        """Hold a Mutex (or one side of a ReadWriteLock), or lead an election, and
        write under it with its fencing token."""
        section = _Section()
        try:
            async with holding:
                section.t_acq = self.now()
                section.token = holder.fencing_token
                await self.fenced(
                    store, op_id, section, resource, kind, holder.wait_lost, rng, mode=mode
                )
                section.t_rel = self.now()
        except OwnershipError as error:  # LockLostError, LeadershipLostError
            return Outcome("fail", _name(error), section.value(lost=True, mode=mode))
        except CoordinationError as error:
            if section.t_acq is None:  # never held: nothing to judge
                return Outcome("fail", _name(error), section.value(lost=False, mode=mode))
            return Outcome("unknown", _name(error), section.value(lost=False, mode=mode))
        return Outcome("ok", None, section.value(lost=False, mode=mode))

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

    async def mutex_loop(self, driver: str, client: aiocoord.Client) -> None:
        lock = Mutex(client, MUTEX, data=f"{self.name}/{driver}".encode())

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return (
                "mutex",
                "hold",
                lambda op_id: self.hold_fenced(
                    op_id,
                    lock.hold(timeout=ACQUIRE_TIMEOUT),
                    lock,
                    "mutex",
                    "exclusive",
                    store,
                    rng,
                ),
            )

        await self.fenced_loop(driver, client, 0.3, pick)

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
                    lock,
                    "rwlock",
                    "rw",
                    store,
                    rng,
                    mode,
                ),
            )

        await self.fenced_loop(driver, client, 0.3, pick)

    async def leader_loop(self, driver: str, client: aiocoord.Client) -> None:
        election = LeaderElection(client, LEADER, f"{self.name}/{driver}")

        def pick(rng: random.Random, store: StoreClient) -> _Step:
            return (
                "leader",
                "term",
                lambda op_id: self.hold_fenced(
                    op_id,
                    election.leadership(timeout=ACQUIRE_TIMEOUT),
                    election,
                    "leader",
                    "exclusive",
                    store,
                    rng,
                ),
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
        except CoordinationError as error:
            return Outcome("fail", _name(error), section.value(lost=False))
        if leases is None:
            return Outcome("fail", "timeout", section.value(lost=False))
        lease = leases[0]
        lost = False
        try:
            section.t_acq = self.now()
            stat = await client.exists(lease.node)
            if stat is None or stat.ephemeral_owner != client.session_id:
                # Our lease node is gone already: the recipe must say so.
                section.rejected, section.reason = True, "the lease node is gone"
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TOLD_BOUND):
                        await lease.wait_lost()
            else:
                section.token = stat.czxid
                body = asyncio.ensure_future(
                    self.fenced(
                        store,
                        op_id,
                        section,
                        "semaphore",
                        "semaphore",
                        lease.wait_lost,
                        rng,
                        limit=SEMAPHORE_LEASES,
                        node=lease.node,
                    )
                )
                watcher = asyncio.ensure_future(lease.wait_lost())
                try:
                    await asyncio.wait({body, watcher}, return_when=asyncio.FIRST_COMPLETED)
                    if not body.done():  # lost while inside: leave at once
                        body.cancel()
                        lost = True
                    with contextlib.suppress(asyncio.CancelledError):
                        await body
                    if not lost:
                        section.t_rel = self.now()
                finally:
                    watcher.cancel()
                    body.cancel()
        except CoordinationError as error:
            with contextlib.suppress(CoordinationError):
                await lease.release()
            return Outcome("unknown", _name(error), section.value(lost=lease.lost))
        await lease.release()
        lost = lost or lease.lost
        if lost:
            return Outcome("fail", "lease lost", section.value(lost=True))
        return Outcome("ok", None, section.value(lost=False))

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

    # --- double barrier -------------------------------------------------------------------

    async def barrier_enter(self, barrier: DoubleBarrier) -> Outcome:
        """Enter, giving up at once when the run stops (the others stop coming)."""
        entering = asyncio.ensure_future(barrier.enter(BARRIER_TIMEOUT))
        stopped = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({entering, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not entering.done():
            entering.cancel()
            with contextlib.suppress(asyncio.CancelledError, CoordinationError):
                await entering
            return Outcome("fail", "stopped")
        try:
            entered = entering.result()
        except CoordinationError as error:
            return Outcome("fail", _name(error))
        return Outcome("ok") if entered else Outcome("fail", "timeout")

    @staticmethod
    async def barrier_leave(barrier: DoubleBarrier) -> Outcome:
        try:
            left = await barrier.leave(BARRIER_TIMEOUT)
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
                "barrier", "enter", lambda _op: self.barrier_enter(barrier), attempt=attempt
            )
            if entered.status != "ok":
                return
            await asyncio.sleep(rng.uniform(0.01, 0.1))
            await self.op(
                "barrier", "leave", lambda _op: self.barrier_leave(barrier), attempt=attempt
            )

        await self.forever(driver, step, 0.2)

    # --- queues -----------------------------------------------------------------------------

    @staticmethod
    async def put(queue: Queue[bytes], item: str) -> Outcome:
        try:
            put = await queue.put(item.encode(), timeout=ACQUIRE_TIMEOUT)
        except CoordinationError as error:
            status: Status = "fail" if _unsent(error) else "unknown"
            return Outcome(status, _name(error), {"item": item})
        return Outcome("ok" if put else "fail", None if put else "full", {"item": item})

    async def put_loop(self, driver: str, client: aiocoord.Client, recipe: str, path: str) -> None:
        queue: Queue[bytes] = Queue(client, path)
        serial = itertools.count(1)

        async def step(rng: random.Random) -> None:
            item = f"{self.name}-{driver}-{next(serial)}"
            await self.op(recipe, "put", lambda _op: self.put(queue, item), item=item)

        await self.forever(driver, step, 0.25)

    @staticmethod
    async def get(queue: Queue[bytes]) -> Outcome:
        try:
            data = await queue.get(QUEUE_WAIT)
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
        return Outcome("ok", None, {"item": data.decode()})

    async def get_loop(self, driver: str, client: aiocoord.Client) -> None:
        queue: Queue[bytes] = Queue(client, QUEUE)

        async def step(rng: random.Random) -> None:
            await self.op("queue", "get", lambda _op: self.get(queue), driver=driver)

        await self.forever(driver, step, 0.1)

    async def take(self, queue: Queue[bytes], rng: random.Random) -> Outcome:
        """Take one item at least once: the block returning deletes it."""
        seen: dict[str, Any] = {}
        try:
            async with queue.take(QUEUE_WAIT) as data:
                seen |= {"item": data.decode(), "t_body": self.now()}
                await asyncio.sleep(rng.uniform(0.01, 0.1))
                seen["t_end"] = self.now()
        except QueueEmptyError:
            return Outcome("fail", "empty")
        except LockLostError as error:
            return Outcome("fail", _name(error), seen | {"lost": True})
        except CoordinationError as error:
            if "item" in seen:  # the commit may or may not have gone through
                return Outcome("unknown", _name(error), seen)
            status: Status = "fail" if isinstance(error, ConnectionLossError) else "unknown"
            if isinstance(error, OutcomeUnknownError):
                status = "unknown"
            return Outcome(status, _name(error), seen)
        return Outcome("ok", None, seen)

    async def take_loop(self, driver: str, client: aiocoord.Client) -> None:
        queue: Queue[bytes] = Queue(client, AQUEUE)

        async def step(rng: random.Random) -> None:
            await self.op("aqueue", "take", lambda _op: self.take(queue, rng), driver=driver)

        await self.forever(driver, step, 0.1)

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
        """Plain creates, each acknowledged one recorded: ZooKeeper must keep them all."""

        async def create() -> Outcome:
            try:
                node = await client.create(f"{WITNESS}/n-", self.name.encode(), sequential=True)
            except CoordinationError as error:
                status: Status = "fail" if _unsent(error) else "unknown"
                return Outcome(status, _name(error))
            return Outcome("ok", None, {"node": node.rsplit("/", 1)[1]})

        async def step(rng: random.Random) -> None:
            await self.op("witness", "create", lambda _op: create(), driver=driver)

        await self.forever(driver, step, 0.1)

    async def cache_final(self) -> dict[str, Any]:
        """Once every writer has stopped: does the cache's view equal the server's tree?"""
        result: dict[str, Any] = {"type": "final", "what": "cache", "worker": self.name}
        cache = self.cache
        client = self.clients[0]
        started = time.monotonic()
        try:
            assert cache is not None
            async with asyncio.timeout(CACHE_SETTLE + 30):
                await client.sync(TREE)
                server = await read_tree(client, TREE)
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

    # --- running --------------------------------------------------------------------------------

    def drivers(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        standard, session = self.clients
        long_counter = AtomicLong(standard, COUNTER_LONG)
        int_counter = AtomicInt(
            session,
            COUNTER_INT,
            retry=RetryNTimes(2, 0.001),
            promoted_to_lock=PromotedToLock(COUNTER_INT_LOCK, max_lock_time=ACQUIRE_TIMEOUT),
        )
        return [
            ("mutex-0", self.mutex_loop("mutex-0", standard)),
            ("mutex-1", self.mutex_loop("mutex-1", session)),
            ("rwlock-0", self.rw_loop("rwlock-0", standard)),
            ("rwlock-1", self.rw_loop("rwlock-1", session)),
            ("semaphore-0", self.semaphore_loop("semaphore-0", standard)),
            ("semaphore-1", self.semaphore_loop("semaphore-1", session)),
            ("leader-0", self.leader_loop("leader-0", standard)),
            ("leader-1", self.leader_loop("leader-1", session)),
            # Two tasks on one counter and client: their increments are coalesced.
            ("counter-a", self.counter_loop("counter-a", long_counter, "counter", COUNTER_LONG)),
            ("counter-b", self.counter_loop("counter-b", long_counter, "counter", COUNTER_LONG)),
            ("counter-int", self.counter_loop("counter-int", int_counter, "counter", COUNTER_INT)),
            ("counter-bounded", self.bounded_loop("counter-bounded", session)),
            ("barrier", self.barrier_loop("barrier", standard)),
            ("queue-put", self.put_loop("queue-put", standard, "queue", QUEUE)),
            ("queue-get", self.get_loop("queue-get", session)),
            ("aqueue-put", self.put_loop("aqueue-put", session, "aqueue", AQUEUE)),
            ("aqueue-take-0", self.take_loop("aqueue-take-0", standard)),
            ("aqueue-take-1", self.take_loop("aqueue-take-1", session)),
            ("tree", self.tree_loop("tree", standard)),
            ("witness", self.witness_loop("witness", session)),
        ]

    async def connect(self) -> None:
        for policy in (StandardErrorPolicy(), SessionErrorPolicy()):
            client = aiocoord.connect(
                self.config.connect, session_timeout=SESSION_TIMEOUT, error_policy=policy
            )
            self.clients.append(client)
            await client.start()
        self.cache = TreeCache(self.clients[0], TREE)
        await self.cache.start()

    async def fault(self, command: dict[str, Any]) -> None:
        """Expire a session or drop a connection of one of our clients, as asked."""
        client = self.clients[int(command.get("client", 0)) % len(self.clients)]
        started = self.now()
        try:
            if command["cmd"] == "expire":
                await expire_session(client, timeout=20.0)
            else:
                drop_connection(client)
            self.reply({"reply": command["cmd"], "ok": True, "t": started})
        except Exception as error:
            self.reply({"reply": command["cmd"], "ok": False, "error": _name(error)})

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                if self.cache is not None:
                    await self.cache.aclose()
        for client in self.clients:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await client.close()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        commands = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
        logging.getLogger("aiocoord").addHandler(_QueueWarnings(self.history))
        try:
            async with asyncio.timeout(CONNECT_BOUND):
                await self.connect()
        except Exception as error:
            self.reply({"reply": "ready", "ok": False, "error": _name(error)})
            await self.close()
            return 1
        self.reply({"reply": "ready", "ok": True, "pid": os.getpid()})
        drivers = {asyncio.ensure_future(coro): name for name, coro in self.drivers()}
        side: set[asyncio.Future[None]] = set()
        try:
            while line := await commands.readline():
                command = json.loads(line)
                name = command.get("cmd")
                if name in ("expire", "drop"):
                    fault = asyncio.ensure_future(self.fault(command))
                    side.add(fault)
                    fault.add_done_callback(side.discard)
                elif name == "stop":
                    self.stopping.set()
                    _done, pending = await asyncio.wait(drivers, timeout=STOP_BOUND)
                    crashed: dict[str, str] = {}
                    for driver, driver_name in drivers.items():
                        if driver.done() and not driver.cancelled():
                            failure = driver.exception()
                            if failure is not None:
                                log.error("%s crashed", driver_name, exc_info=failure)
                                crashed[driver_name] = _name(failure)
                    hung = sorted(drivers[t] for t in pending)
                    self.reply({"reply": "stopped", "hung": hung, "crashed": crashed})
                elif name == "final":
                    self.reply({"reply": "final", "cache": await self.cache_final()})
                elif name == "exit":
                    break
        finally:
            for future in [*drivers, *side]:
                future.cancel()
            await asyncio.gather(*drivers, *side, return_exceptions=True)
            await self.close()
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
    return asyncio.run(Worker(config).run())


if __name__ == "__main__":
    raise SystemExit(main())
