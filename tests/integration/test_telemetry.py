"""OpenTelemetry spans and metrics (docs/observability.md), read through the SDK's
in-memory exporter and reader.

The global providers can be set once per process: the ``otel`` fixture installs
them on first use, with a span processor that forwards only while a test
captures (the suite's other tests run on, unrecorded). Metrics are cumulative
for the process: tests read them through clients with ``Telemetry(paths=True)``
and look only at their own paths (each test has its own namespace).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import aiocoord
from aiocoord import Telemetry
from aiocoord.testing import ZooKeeperTarget, drop_connection

pytestmark = pytest.mark.timeout(120)


class _Capturing(SpanProcessor):
    """Forwards ended spans to the exporter only while a test captures."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._inner = SimpleSpanProcessor(exporter)
        self.on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.processor = _Capturing(self.exporter)
        self.reader = InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(self.processor)
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader]))
        self.tracer = trace.get_tracer("tests")

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def points(self, metric: str, **match: object) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, data point)`` of ``metric`` whose attributes include ``match``
        (keys with ``_`` for ``.``: ``aiocoord_path``)."""
        wanted = {k.replace("_", ".", 1): v for k, v in match.items()}
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name != metric:
                        continue
                    for point in m.data.data_points:
                        attributes = dict(point.attributes or {})
                        if all(attributes.get(k) == v for k, v in wanted.items()):
                            found.append((attributes, point))
        return found


_OTEL: Otel | None = None


@pytest.fixture
def otel() -> Iterator[Otel]:
    global _OTEL
    if _OTEL is None:
        _OTEL = Otel()
    _OTEL.exporter.clear()
    _OTEL.processor.on = True
    try:
        yield _OTEL
    finally:
        _OTEL.processor.on = False
        _OTEL.exporter.clear()


@pytest.fixture
def traced(zookeeper: ZooKeeperTarget, client_factory: Callable[..., aiocoord.Client]) -> Any:
    """``traced(**kwargs)``: a client whose metrics carry paths (the test's namespace's)."""

    def make(**kwargs: Any) -> aiocoord.Client:
        kwargs.setdefault("telemetry", Telemetry(paths=True))
        return client_factory(**kwargs)

    return make


def _ns(zookeeper: ZooKeeperTarget, path: str) -> str:
    return zookeeper.namespace + path


async def test_mutex_acquire_and_hold_spans_nest_under_the_callers_span(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client:
        lock = aiocoord.Mutex(client, "/locks/a")
        with otel.tracer.start_as_current_span("request") as request:
            async with lock:
                token = lock.fencing_token
    acquire = otel.span("aiocoord.lock.acquire")
    hold = otel.span("aiocoord.lock.hold")
    parent_id = request.get_span_context().span_id
    assert acquire.parent is not None and acquire.parent.span_id == parent_id
    # The hold outlives the acquire: a sibling, not a child.
    assert hold.parent is not None and hold.parent.span_id == parent_id
    attributes = dict(acquire.attributes or {})
    assert attributes["aiocoord.path"] == _ns(zookeeper, "/locks/a")
    assert attributes["aiocoord.recipe"] == "mutex"
    assert attributes["aiocoord.outcome"] == "acquired"
    assert attributes["aiocoord.queue_position"] == 0
    assert attributes["aiocoord.fencing_token"] == token
    assert attributes["aiocoord.wait_ms"] >= 0
    assert dict(hold.attributes or {})["aiocoord.outcome"] == "released"
    assert dict(hold.attributes or {})["aiocoord.fencing_token"] == token

    path = _ns(zookeeper, "/locks/a")
    [(wait_attributes, wait)] = otel.points("aiocoord.lock.wait.duration", aiocoord_path=path)
    assert wait.count == 1
    assert wait_attributes == {
        "aiocoord.recipe": "mutex",
        "aiocoord.path": path,
        "aiocoord.outcome": "acquired",
    }
    [(_, held)] = otel.points("aiocoord.lock.hold.duration", aiocoord_path=path)
    assert held.count == 1
    [(_, queued)] = otel.points("aiocoord.contenders.queued", aiocoord_path=path)
    assert queued.value == 0  # counted while waiting, not after


async def test_a_waiter_reports_its_queue_position_and_a_timeout(
    otel: Otel, traced: Any, children_reach: Any
) -> None:
    async with traced() as holder_client, traced() as waiter_client:
        holder = aiocoord.Mutex(holder_client, "/locks/b")
        waiter = aiocoord.Mutex(waiter_client, "/locks/b")
        await holder.acquire()
        assert not await waiter.acquire(timeout=0.2)
        acquired = asyncio.Event()

        async def wait_turn() -> None:
            async with waiter:
                acquired.set()

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(wait_turn())
            # Release once its contender node is in the queue behind the holder's.
            await children_reach(holder_client, "/locks/b", 2)
            await holder.release()
        assert acquired.is_set()
    outcomes = [
        (
            dict(s.attributes or {})["aiocoord.outcome"],
            dict(s.attributes or {}).get("aiocoord.queue_position"),
        )
        for s in otel.spans("aiocoord.lock.acquire")
    ]
    assert ("timeout", None) in outcomes
    assert ("acquired", 1) in outcomes


async def test_queue_counter_barrier_and_cache_spans(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced() as client:
        queue = aiocoord.Queue(client, "/q")
        await queue.put(b"one")
        await queue.put(b"two")
        assert await queue.get() == b"one"
        async with queue.take() as item:
            assert item == b"two"
        counter = aiocoord.AtomicLong(client, "/c")
        await asyncio.gather(*(counter.increment() for _ in range(5)))
        barrier = aiocoord.DoubleBarrier(client, "/b", 1)
        async with barrier.entered():
            pass
        await client.create("/cached/x", make_parents=True)
        async with aiocoord.TreeCache(client, "/cached") as cache:
            assert cache.get("/cached/x") is not None
            [(_, size)] = otel.points(
                "aiocoord.cache.size", aiocoord_path=_ns(zookeeper, "/cached")
            )
            assert size.value == 2
    names = {s.name for s in otel.spans()}
    assert {
        "aiocoord.queue.put",
        "aiocoord.queue.get",
        "aiocoord.queue.take",
        "aiocoord.queue.take.hold",
        "aiocoord.counter.add",
        "aiocoord.barrier.enter",
        "aiocoord.barrier.leave",
        "aiocoord.cache.build",
    } <= names
    take = otel.span("aiocoord.queue.take")
    assert dict(take.attributes or {})["aiocoord.recipe"] == "queue"
    adds = otel.spans("aiocoord.counter.add")
    assert len(adds) == 5
    for add in adds:
        attributes = dict(add.attributes or {})
        assert attributes["aiocoord.outcome"] == "added"
        assert attributes["aiocoord.recipe"] == "atomic_long"
        assert attributes["aiocoord.attempts"] >= 1
    # Five concurrent increments of one process share writes: some batch carried several.
    assert any(dict(a.attributes or {})["aiocoord.combined"] for a in adds)
    counter_path = _ns(zookeeper, "/c")
    assert otel.points("aiocoord.counter.combined_batches", aiocoord_path=counter_path)
    [(_, add_time)] = otel.points("aiocoord.counter.add.duration", aiocoord_path=counter_path)
    assert add_time.count == 5
    take_times = otel.points("aiocoord.queue.take.duration", aiocoord_path=_ns(zookeeper, "/q"))
    assert sum(point.count for _, point in take_times) == 2


async def test_nothing_is_emitted_for_a_recipe_the_user_did_not_use(
    otel: Otel, traced: Any, zookeeper: ZooKeeperTarget
) -> None:
    async with traced(telemetry=Telemetry(paths=True, request_metrics=True)) as client:
        await client.create("/plain", b"x")
        await client.get("/plain")
        semaphore = aiocoord.Semaphore(client, "/sem", 2)
        async with semaphore:
            pass
    recipes = {dict(s.attributes or {}).get("aiocoord.recipe") for s in otel.spans()}
    # The semaphore's own waiting-room mutex is part of it: no "mutex" anywhere.
    assert recipes == {None, "semaphore"}
    prefix = zookeeper.namespace
    mine = [
        attributes
        for name in ("aiocoord.lock.wait.duration", "aiocoord.lock.hold.duration")
        for attributes, _ in otel.points(name)
        if str(attributes.get("aiocoord.path", "")).startswith(prefix)
    ]
    assert {a["aiocoord.recipe"] for a in mine} == {"semaphore"}
    operations = {a["aiocoord.operation"] for a, _ in otel.points("aiocoord.request.duration")}
    assert {"create", "get_data"} <= operations


async def test_request_latency_is_recorded_only_when_asked_for(otel: Otel, traced: Any) -> None:
    def requests(operation: str, outcome: str = "ok") -> int:
        points = otel.points(
            "aiocoord.request.duration", aiocoord_operation=operation, aiocoord_outcome=outcome
        )
        return sum(point.count for _, point in points)

    def counts() -> tuple[int, int, int]:
        return requests("create"), requests("get_data"), requests("exists", "error")

    async with traced() as client:  # the default: request_metrics=False
        before = counts()
        await client.create("/r", b"x")
        await client.get("/r")
        await client.exists("/nothing-here")
        assert counts() == before
        async with aiocoord.Mutex(client, "/lock"):
            pass
        # The recipes' own instruments do not depend on it.
        assert otel.points("aiocoord.lock.hold.duration")
    async with traced(telemetry=Telemetry(paths=True, request_metrics=True)) as client:
        await client.get("/r")
        await client.get("/r")
        # A missing node is an error reply: the outcome is the server's answer.
        await client.exists("/nothing-here")
    assert counts() == (before[0], before[1] + 2, before[2] + 1)


async def test_metrics_carry_a_name_and_no_path_by_default(
    otel: Otel, client_factory: Callable[..., aiocoord.Client]
) -> None:
    telemetry = Telemetry(names={"/orders": "orders"})
    client = client_factory(telemetry=telemetry)
    async with client, aiocoord.Mutex(client, "/orders/42/lock"):
        pass
    span_attributes = dict(otel.span("aiocoord.lock.acquire").attributes or {})
    assert span_attributes["aiocoord.name"] == "orders"
    assert span_attributes["aiocoord.path"].endswith("/orders/42/lock")
    points = otel.points("aiocoord.lock.hold.duration", aiocoord_name="orders")
    assert points
    assert all("aiocoord.path" not in attributes for attributes, _ in points)


async def test_session_spans_and_counters(otel: Otel, traced: Any, state_log: Any) -> None:
    reconnects = sum(p.value for _, p in otel.points("aiocoord.session.reconnects"))
    client = traced()
    with otel.tracer.start_as_current_span("startup") as startup:
        await client.start()
    try:
        states = state_log(client)
        lock = aiocoord.Mutex(client, "/lost")
        # SUSPENDED loses a hold under the standard error policy.
        with pytest.raises(aiocoord.LockLostError):
            async with lock:
                drop_connection(client)
                await states.wait_for(aiocoord.ConnectionState.RECONNECTED)
    finally:
        await client.aclose()
    connect = otel.span("aiocoord.session.connect")
    assert connect.parent is not None
    assert connect.parent.span_id == startup.get_span_context().span_id
    outage = otel.span("aiocoord.session.disconnected")
    # The session task does not run under the span that started the client.
    assert outage.parent is None
    assert [e.name for e in outage.events] == [
        "aiocoord.session.suspended",
        "aiocoord.session.reconnected",
    ]
    assert sum(p.value for _, p in otel.points("aiocoord.session.reconnects")) == reconnects + 1
    hold = otel.span("aiocoord.lock.hold")
    assert [e.name for e in hold.events] == ["aiocoord.hold.lost"]
    assert dict(hold.attributes or {})["aiocoord.outcome"] == "lost"
    assert otel.points("aiocoord.holds.lost", aiocoord_recipe="mutex")


async def test_gauges_count_outstanding_requests_and_watches(otel: Otel, traced: Any) -> None:
    async with traced() as client:
        await client.create("/watched")
        _, watch = await client.watch_exists("/watched")
        try:
            [(_, watches)] = otel.points("aiocoord.watches.active")
            assert watches.value >= 1
            [(_, outstanding)] = otel.points("aiocoord.requests.outstanding")
            assert outstanding.value >= 0
        finally:
            watch.cancel()


def test_the_library_runs_without_opentelemetry(zookeeper: ZooKeeperTarget) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError(f"{name} is blocked")
                return None

        sys.meta_path.insert(0, Block())
        import aiocoord
        from aiocoord import _telemetry

        assert not _telemetry.AVAILABLE
        assert not any(m.startswith("opentelemetry") for m in sys.modules)

        async def main():
            hosts, namespace = sys.argv[1], sys.argv[2]
            telemetry = aiocoord.Telemetry(names={"/x": "x"})
            async with aiocoord.connect(hosts, namespace=namespace, telemetry=telemetry) as c:
                async with aiocoord.Mutex(c, "/x/lock"):
                    pass
                value = await aiocoord.AtomicLong(c, "/x/n").increment()
                assert value.post_value == 1
            print("ok")

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, zookeeper.connect_string, zookeeper.namespace + "-nootel"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
