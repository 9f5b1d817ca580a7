"""kazoo as a peer: its Lock and Counter recipes, pipelined ``set_async`` and
single round trips.

kazoo is a threaded client, so contenders are threads (one KazooClient each,
all in this one process), as a kazoo user would run them.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import BadVersionError  # type: ignore[import-untyped]

from ._common import (
    Gate,
    Offer,
    Result,
    RunArgs,
    Stats,
    Window,
    main,
    pipelined_result,
    result,
)

LIBRARY = "kazoo"
STOP_GRACE = 60.0
PIPELINE_DEPTH = 1000


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


def _pipelined(args: RunArgs) -> Result:
    """``set_async`` with PIPELINE_DEPTH requests outstanding (a semaphore released by
    the completion callback); versions acknowledged must be exactly 1..n."""
    node = f"{args.path}/node"
    with _clients(args.connect, 1) as (client,):
        client.ensure_path(node)
        window = Window(args.seconds, args.warmup)
        stats = Stats(window)
        slots = threading.Semaphore(PIPELINE_DEPTH)
        acked = 0
        version_sum = 0
        errors: list[BaseException] = []

        def done(started: float, outcome: Any) -> None:
            # Completion callbacks run one at a time on kazoo's callback thread.
            nonlocal acked, version_sum
            try:
                stat = outcome.get()
                stats.record("set", started, time.perf_counter())
                acked += 1
                version_sum += stat.version
            except Exception as error:
                errors.append(error)
            finally:
                slots.release()

        payload = b"x" * 16
        while not window.over():
            slots.acquire()
            started = time.perf_counter()
            client.set_async(node, payload).rawlink(functools.partial(done, started))
        for _ in range(PIPELINE_DEPTH):  # wait for every outstanding reply
            if not slots.acquire(timeout=STOP_GRACE):
                raise TimeoutError("replies still outstanding long after the window")
        return pipelined_result(
            args,
            LIBRARY,
            window,
            stats,
            acked=acked,
            version_sum=version_sum,
            final_version=client.get(node)[1].version,
            depth=PIPELINE_DEPTH,
            errors=errors,
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


OFFERS = [
    Offer("mutex", _mutex),
    Offer("counter", _counter),
    Offer("pipelined", _pipelined, contenders=(1,)),
    Offer("latency", _latency, contenders=(1,)),
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
