"""kazoo as a peer: its Lock and Counter recipes, pipelined ``set_async`` and
single round trips, its Queue and LockingQueue, and its TreeCache.

kazoo is a threaded client, so contenders are threads (one KazooClient each,
all in this one process), as a kazoo user would run them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import BadVersionError  # type: ignore[import-untyped]
from kazoo.recipe.cache import TreeCache, TreeEvent  # type: ignore[import-untyped]
from kazoo.recipe.queue import LockingQueue, Queue  # type: ignore[import-untyped]

from . import _aio
from ._common import (
    CONVERGE_S,
    CREATE_DEPTH,
    DRAIN_ITEMS,
    DRAIN_LIMIT_S,
    PRODUCER_CONCURRENCY,
    QUEUE_BACKLOG,
    QUEUE_CONSUMERS,
    QUEUE_GRACE_S,
    SET_RATE,
    SMALL_TREE_SHAPE,
    TREE_SHAPE,
    Gate,
    Ledger,
    Offer,
    Result,
    RunArgs,
    Stats,
    Window,
    cache_events_verdict,
    main,
    node_value,
    pipelined_result,
    read_rss_kib,
    read_stamp,
    result,
    stamp,
    tree_paths,
)

LIBRARY = "kazoo"
STOP_GRACE = 60.0
PIPELINE_DEPTH = 1000
LOCKING = "locking"
"""Queue variant: kazoo's LockingQueue (get locks an item, consume removes it)."""
POLL_S = 0.1
"""How often a waiting consumer looks whether it should stop."""


@contextlib.contextmanager
def _clients(connect: str, count: int) -> Iterator[list[Any]]:
    """``count`` started KazooClients (separate sessions), stopped on exit."""
    clients: list[Any] = []
    try:
        for _ in range(count):
            client = KazooClient(hosts=connect, timeout=10.0)
            client.start(timeout=15)
            clients.append(client)
        yield clients
    finally:
        for client in clients:
            client.stop()
            client.close()


def _run_threads(window: Window, bodies: Sequence[Callable[[], None]]) -> None:
    """Run each body in a thread; fail if any is still running long after the window."""
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(b,), daemon=True) for b in bodies]
    for thread in threads:
        thread.start()
    deadline = window.end + STOP_GRACE
    for thread in threads:
        thread.join(max(0.0, deadline - time.perf_counter()))
    if any(thread.is_alive() for thread in threads):
        raise TimeoutError(f"contenders still running {STOP_GRACE} s after the window")
    if errors:
        raise errors[0]


def _mutex(args: RunArgs) -> Result:
    with _clients(args.connect, args.contenders) as clients:
        locks = [
            client.Lock(f"{args.path}/lock", f"contender-{i}") for i, client in enumerate(clients)
        ]
        window = Window(args.seconds, args.warmup)
        gate = Gate(threads=True)
        tallies = [Stats(window) for _ in locks]

        def contender(lock: Any, stats: Stats) -> None:
            while not window.over():
                started = time.perf_counter()
                lock.acquire()
                held = time.perf_counter()
                try:
                    gate.enter()
                    time.sleep(0)  # give another thread the chance to get in, were it able
                    gate.leave()
                finally:
                    lock.release()
                stats.record("acquire", started, held)

        _run_threads(
            window,
            [functools.partial(contender, lk, st) for lk, st in zip(locks, tallies, strict=True)],
        )
        return result(
            args,
            LIBRARY,
            window,
            tallies,
            violation=gate.violation,
            extra={"entries": gate.entries},
        )


def _count_cas_failures(client: Any) -> Callable[[], int]:
    """Wrap ``client.set`` to count BadVersionError answers (failed compare-and-sets);
    kazoo's Counter retries them under the client's retry policy and reports none."""
    plain_set = client.set
    failures = 0

    def counted_set(path: str, value: bytes, version: int = -1) -> Any:
        nonlocal failures
        try:
            return plain_set(path, value, version=version)
        except BadVersionError:
            failures += 1
            raise

    client.set = counted_set
    return lambda: failures


def _counter(args: RunArgs) -> Result:
    path = f"{args.path}/counter"
    with _clients(args.connect, args.contenders) as clients:
        counters = [client.Counter(path, default=0) for client in clients]
        cas_failures = [_count_cas_failures(client) for client in clients]
        window = Window(args.seconds, args.warmup)
        tallies = [Stats(window) for _ in counters]
        applied = [0] * len(counters)

        def contender(index: int) -> None:
            shared, stats = counters[index], tallies[index]
            while not window.over():
                before = cas_failures[index]()
                started = time.perf_counter()
                shared += 1  # retried under kazoo's default policy until it applies
                finished = time.perf_counter()
                applied[index] += 1
                stats.record("increment", started, finished)
                if window.counts(finished):
                    stats.conflicts += cas_failures[index]() - before

        _run_threads(window, [functools.partial(contender, i) for i in range(len(counters))])
        value = int(clients[0].get(path)[0] or b"0")  # kazoo creates it empty
        violation = None
        if value != sum(applied):
            violation = f"counter reads {value} after {sum(applied)} successful increments"
        return result(
            args, LIBRARY, window, tallies, violation=violation, extra={"final_value": value}
        )


class _Outstanding:
    """At most ``depth`` of kazoo's async requests in flight: ``send`` waits for a
    slot, ``drain`` for every reply (and raises the first error)."""

    def __init__(self, depth: int) -> None:
        self._depth = depth
        self._slots = threading.Semaphore(depth)
        self.errors: list[BaseException] = []

    def send(
        self, request: Callable[[], Any], on_reply: Callable[[Any], None] | None = None
    ) -> None:
        """Wait for a slot, then send: ``request()`` returns kazoo's async result,
        whose reply goes to ``on_reply`` (kazoo runs callbacks one at a time)."""
        self._slots.acquire()
        sent = request()

        def done(outcome: Any) -> None:
            try:
                reply = outcome.get()
                if on_reply is not None:
                    on_reply(reply)
            except Exception as error:
                self.errors.append(error)
            finally:
                self._slots.release()

        sent.rawlink(done)

    def drain(self, what: str, *, raise_errors: bool = True) -> None:
        for _ in range(self._depth):
            if not self._slots.acquire(timeout=STOP_GRACE):
                raise TimeoutError(f"{what} still outstanding long after they were sent")
        if self.errors and raise_errors:
            raise self.errors[0]


def _pipelined(args: RunArgs) -> Result:
    """``set_async`` with PIPELINE_DEPTH requests outstanding (a semaphore released by
    the completion callback); versions acknowledged must be exactly 1..n."""
    node = f"{args.path}/node"
    with _clients(args.connect, 1) as (client,):
        client.ensure_path(node)
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        outstanding = _Outstanding(PIPELINE_DEPTH)
        acked = 0
        version_sum = 0

        def done(started: float, stat: Any) -> None:
            nonlocal acked, version_sum
            stats.record("set", started, time.perf_counter())
            acked += 1
            version_sum += stat.version

        payload = b"x" * 16
        while not window.over():
            started = time.perf_counter()
            outstanding.send(
                functools.partial(client.set_async, node, payload),
                functools.partial(done, started),
            )
        outstanding.drain("replies", raise_errors=False)  # pipelined_result counts them
        return pipelined_result(
            args,
            LIBRARY,
            window,
            stats,
            acked=acked,
            version_sum=version_sum,
            final_version=client.get(node)[1].version,
            depth=PIPELINE_DEPTH,
            errors=outstanding.errors,
        )


def _latency(args: RunArgs) -> Result:
    node = f"{args.path}/node"
    with _clients(args.connect, 1) as (client,):
        client.ensure_path(node)
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        violation = None
        sequence = 0
        while not window.over():
            sequence += 1
            data = str(sequence).encode()
            started = time.perf_counter()
            client.set(node, data)
            written = time.perf_counter()
            read = client.get(node)[0]
            stats.record("set", started, written)
            stats.record("get", written, time.perf_counter())
            if read != data and violation is None:
                violation = f"read {read!r} right after writing {data!r}"
        return result(args, LIBRARY, window, [stats], violation=violation)


# --- queues ------------------------------------------------------------------------

Put = Callable[[bytes], object]
Get = Callable[[threading.Event], "bytes | None"]
"""Take one item, waiting for one; None once the event is set (time to stop)."""


def _wake(ready: threading.Event, _event: object) -> None:
    ready.set()


def _plain_getter(client: Any, queue: Any) -> Get:
    """kazoo's Queue.get does not wait: when it finds the queue empty, wait for a
    children watch (as a kazoo user would, rather than poll)."""

    def get(stop: threading.Event) -> bytes | None:
        while not stop.is_set():
            data: bytes | None = queue.get()
            if data is not None:
                return data
            ready = threading.Event()
            if not client.get_children(queue.path, watch=functools.partial(_wake, ready)):
                ready.wait(POLL_S)
        return None

    return get


def _locking_getter(queue: Any) -> Get:
    """LockingQueue: get locks the next item (waiting on its watches), consume removes it."""

    def get(stop: threading.Event) -> bytes | None:
        while not stop.is_set():
            data: bytes | None = queue.get(timeout=POLL_S)
            if data is not None:
                if not queue.consume():
                    raise RuntimeError("LockingQueue.consume failed: the item's lock was lost")
                return data
        return None

    return get


def _queue_ends(
    variant: str, producer: Any, consumers: Sequence[Any], path: str
) -> tuple[Put, list[Get]]:
    if variant == LOCKING:
        return LockingQueue(producer, path).put, [
            _locking_getter(LockingQueue(client, path)) for client in consumers
        ]
    return Queue(producer, path).put, [
        _plain_getter(client, Queue(client, path)) for client in consumers
    ]


def _flow(
    window: Window, ledger: Ledger, put: Put, gets: Sequence[Get], tallies: Sequence[Stats]
) -> bool:
    """One producer (PRODUCER_CONCURRENCY threads sharing its session, at most
    QUEUE_BACKLOG items put but not taken) and a consumer thread per ``gets``
    entry until the window ends; then the consumers take what is left. True if
    every acknowledged item was taken."""
    permits = threading.Semaphore(QUEUE_BACKLOG)
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        while not window.over():
            if not permits.acquire(timeout=POLL_S):
                continue
            number, data = ledger.item()
            put(data)
            ledger.put_done(number)

    def consume(get: Get, stats: Stats) -> None:
        try:
            while not stop.is_set():
                started = time.perf_counter()
                data = get(stop)
                if data is None:
                    continue
                stats.record("take", started, time.perf_counter())
                ledger.took(data)
                permits.release()
        except BaseException as error:
            errors.append(error)

    consumers = [
        threading.Thread(target=consume, args=(get, stats), daemon=True)
        for get, stats in zip(gets, tallies, strict=True)
    ]
    for thread in consumers:
        thread.start()
    complete = False
    try:
        _run_threads(window, [produce] * PRODUCER_CONCURRENCY)
        deadline = time.perf_counter() + QUEUE_GRACE_S
        while not (complete := ledger.complete()):
            if time.perf_counter() > deadline or errors:
                break
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in consumers:
            thread.join(STOP_GRACE)
    if errors:
        raise RuntimeError("a consumer failed") from errors[0]
    if any(thread.is_alive() for thread in consumers):
        raise TimeoutError("consumers still running long after they were stopped")
    return complete


def _queue(args: RunArgs) -> Result:
    path = f"{args.path}/queue"
    with _clients(args.connect, 1 + args.contenders) as (producer, *consumers):
        put, gets = _queue_ends(args.variant, producer, consumers, path)
        window = Window(args.seconds, args.warmup)
        ledger = Ledger(threads=True)
        tallies = [Stats(window) for _ in gets]
        complete = _flow(window, ledger, put, gets, tallies)
        violation, extra = ledger.check()
        if not complete and violation is None:
            violation = f"items still missing {QUEUE_GRACE_S:g} s after the window"
        extra |= {"backlog": QUEUE_BACKLOG, "producer_concurrency": PRODUCER_CONCURRENCY}
        return result(args, LIBRARY, window, tallies, violation=violation, extra=extra)


def _drain(args: RunArgs) -> Result:
    with _clients(args.connect, 2) as (producer, consumer):
        warm_ledger = Ledger(threads=True)
        if args.warmup > 0:
            warm = Window(args.warmup, 0.0)
            warm_put, warm_gets = _queue_ends(
                args.variant, producer, [consumer], f"{args.path}/warm"
            )
            _flow(warm, warm_ledger, warm_put, warm_gets, [Stats(warm)])
        put, (get,) = _queue_ends(args.variant, producer, [consumer], f"{args.path}/queue")
        ledger = Ledger(threads=True)

        def produce() -> None:
            while (item := ledger.item())[0] < DRAIN_ITEMS:
                put(item[1])
                ledger.put_done(item[0])

        started = time.perf_counter()
        _run_threads(Window(DRAIN_LIMIT_S, 0.0), [produce] * PRODUCER_CONCURRENCY)
        produce_s = time.perf_counter() - started
        stats = Stats(Window(DRAIN_LIMIT_S + STOP_GRACE, 0.0))
        give_up = threading.Event()
        timer = threading.Timer(DRAIN_LIMIT_S, give_up.set)
        timer.start()
        taken = 0
        started = time.perf_counter()
        try:
            while taken < DRAIN_ITEMS:
                began = time.perf_counter()
                data = get(give_up)
                if data is None:
                    break
                stats.record("take", began, time.perf_counter())
                ledger.took(data)
                taken += 1
        finally:
            timer.cancel()
        drain_s = time.perf_counter() - started
        return _aio.drain_result(
            args,
            LIBRARY,
            ledger,
            stats,
            produce_s=produce_s,
            drain_s=drain_s,
            gave_up=taken < DRAIN_ITEMS,
            warm_items=len(warm_ledger.taken),
        )


# --- caches ------------------------------------------------------------------------


def _make_tree(client: Any, root: str, shape: Sequence[int]) -> None:
    """Create a tree with ``create_async``, CREATE_DEPTH outstanding (sent parents
    first; one session's requests apply in order)."""
    outstanding = _Outstanding(CREATE_DEPTH)
    for path in [root, *tree_paths(root, shape)]:
        outstanding.send(functools.partial(client.create_async, path, node_value(path)))
    outstanding.drain("creates")


class _TreeCache:
    """kazoo's TreeCache as the cache scenarios drive it; ``start`` returns once
    the INITIALIZED event came."""

    def __init__(self, client: Any, path: str, on_update: _aio.OnUpdate | None = None) -> None:
        self._cache = TreeCache(client, path)
        self._path = path
        self._initialized = threading.Event()

        def listener(event: Any) -> None:
            if event.event_type == TreeEvent.INITIALIZED:
                self._initialized.set()
            elif event.event_type == TreeEvent.NODE_UPDATED and on_update is not None:
                on_update(event.event_data.path, event.event_data.data)

        self._cache.listen(listener)

    def start(self, timeout: float = DRAIN_LIMIT_S) -> None:
        self._cache.start()
        if not self._initialized.wait(timeout):
            raise TimeoutError(f"TreeCache not initialized after {timeout:g} s")

    def close(self) -> None:
        self._cache.close()

    def value(self, path: str) -> bytes | None:
        node = self._cache.get_data(path)
        return None if node is None else node.data

    def paths(self) -> list[str]:
        found, todo = [], [self._path]
        while todo:
            path = todo.pop()
            found.append(path)
            todo += [f"{path}/{name}" for name in self._cache.get_children(path, default=())]
        return found


def _cache_build(args: RunArgs) -> Result:
    root, warm_root = f"{args.path}/tree", f"{args.path}/warm"
    with _clients(args.connect, 2) as (writer, reader):
        _make_tree(writer, root, TREE_SHAPE)
        builds = 0
        if args.warmup > 0:
            _make_tree(writer, warm_root, SMALL_TREE_SHAPE)
            deadline = time.perf_counter() + args.warmup
            while builds == 0 or time.perf_counter() < deadline:
                warm = _TreeCache(reader, warm_root)
                warm.start()
                warm.close()
                builds += 1
        gc.collect()
        rss_before = read_rss_kib()
        cache = _TreeCache(reader, root)
        started = time.perf_counter()
        cache.start()
        build_s = time.perf_counter() - started
        try:
            gc.collect()
            rss_after = read_rss_kib()
            violation = _aio.check_tree(cache.paths(), cache.value, root, TREE_SHAPE)
        finally:
            cache.close()
        return _aio.cache_build_result(
            args,
            LIBRARY,
            build_s,
            violation,
            {"rss_before_kib": rss_before, "rss_after_kib": rss_after, "warm_builds": builds},
        )


def _cache_events(args: RunArgs) -> Result:
    """The latency from a set (sent by ``set_async`` from this thread, paced at
    SET_RATE) to the TreeCache's listener seeing it (on kazoo's cache thread)."""
    root = f"{args.path}/tree"
    with _clients(args.connect, 2) as (writer, reader):
        _make_tree(writer, root, SMALL_TREE_SHAPE)
        leaves = tree_paths(root, SMALL_TREE_SHAPE)[-math.prod(SMALL_TREE_SHAPE) :]
        holder: list[Stats] = []
        received: set[int] = set()

        def on_update(path: str, data: bytes | None) -> None:
            arrived = time.perf_counter_ns()
            sent = read_stamp(data)
            if sent is None or not holder:
                return
            received.add(sent)
            holder[0].record("event", sent / 1e9, arrived / 1e9)

        cache = _TreeCache(reader, root, on_update)
        cache.start()
        try:
            window = Window(args.seconds, args.warmup)
            holder.append(Stats(window))
            last: dict[str, bytes] = {}
            sent_at: list[int] = []
            outstanding = _Outstanding(PIPELINE_DEPTH)

            def send(path: str) -> Any:
                sent = time.perf_counter_ns()
                data = stamp(sent)
                last[path] = data
                sent_at.append(sent)
                return writer.set_async(path, data)

            period = 1e9 / SET_RATE
            due = float(time.perf_counter_ns())
            count = 0
            while not window.over():
                now = time.perf_counter_ns()
                while due <= now:
                    path = leaves[count % len(leaves)]
                    outstanding.send(functools.partial(send, path))
                    count += 1
                    due += period
                time.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
            outstanding.drain("sets")
            deadline = time.perf_counter() + CONVERGE_S
            stale = [p for p, data in last.items() if cache.value(p) != data]
            while stale and time.perf_counter() < deadline:
                time.sleep(0.05)
                stale = [p for p in stale if cache.value(p) != last[p]]
        finally:
            cache.close()
        violation, extra = cache_events_verdict(window, stale, sent_at, received, leaves)
        return result(args, LIBRARY, window, holder, violation=violation, extra=extra)


OFFERS = [
    Offer("mutex", _mutex),
    Offer("counter", _counter),
    Offer("pipelined", _pipelined, contenders=(1,)),
    Offer("latency", _latency, contenders=(1,)),
    Offer("queue", _queue, contenders=QUEUE_CONSUMERS),
    Offer("queue", _queue, variant=LOCKING, contenders=QUEUE_CONSUMERS),
    Offer("drain", _drain, contenders=(1,)),
    Offer("drain", _drain, variant=LOCKING, contenders=(1,)),
    Offer("cache_build", _cache_build, contenders=(1,)),
    Offer("cache_events", _cache_events, contenders=(1,)),
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
