"""The OpenTelemetry set-ups the telemetry benches compare (#28), shared by
bench/runners/telemetry_runner.py (rates) and bench/telemetry_cpu.py (CPU per
operation). No import side effects: a process picks its set-up before it
imports aiocoord (``block()`` for ``no-otel``) and then calls ``configure()``.

- ``no-otel``: ``opentelemetry`` cannot be imported (the ``otel`` extra absent);
- ``api``: the API installed, no SDK configured (a library user's default);
- ``sdk``: the production set-up OpenTelemetry recommends: every span
  sampled, handed to a BatchSpanProcessor whose exporter drops what it gets
  (it stands for a network exporter; what encoding and sending cost is the
  exporter's, paid on the processor's thread, and not measured here);
- ``sdk-sampled``: the same, keeping 1 trace in 100
  (``ParentBased(TraceIdRatioBased(0.01))``);
- ``sdk-simple``: every span exported synchronously (SimpleSpanProcessor) to an
  InMemorySpanExporter emptied every second: the test set-up, which was the
  bench's ``sdk`` row until 2026-11-26;
- ``sdk-metrics``: a meter provider only, no tracer provider;
- ``sdk-requests``: as ``sdk``, with clients that also time every request
  (``Telemetry(request_metrics=True)``, off by default; the caller applies it).

Every SDK set-up reads its metrics with an InMemoryMetricReader collected every
second (more often than a production reader's 60 s: a conservative stand-in).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

NO_OTEL, API, SDK, SDK_SAMPLED, SDK_SIMPLE, SDK_METRICS, SDK_REQUESTS = (
    "no-otel",
    "api",
    "sdk",
    "sdk-sampled",
    "sdk-simple",
    "sdk-metrics",
    "sdk-requests",
)
SAMPLED_RATIO = 0.01


class _BlockOpenTelemetry:
    """An import hook that makes ``opentelemetry`` look uninstalled."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is blocked for the no-otel variant")


def block() -> None:
    """Make ``opentelemetry`` unimportable (call before aiocoord is imported)."""
    sys.meta_path.insert(0, _BlockOpenTelemetry())


@contextlib.asynccontextmanager
async def configure(variant: str) -> AsyncIterator[Callable[[], dict[str, Any]]]:
    """Set up telemetry for ``variant`` for the block; yield what to add to a
    result (the spans exported so far)."""
    from aiocoord import _telemetry

    if variant == NO_OTEL:
        assert not _telemetry.AVAILABLE
        yield dict
        return
    assert _telemetry.AVAILABLE
    if variant == API:
        yield dict
        return
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class _Dropping(SpanExporter):
        """Counts the spans a batch processor hands over and keeps none."""

        def __init__(self) -> None:
            self.spans = 0

        def export(self, spans: Any) -> SpanExportResult:
            self.spans += len(spans)
            return SpanExportResult.SUCCESS

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    memory = InMemorySpanExporter()
    dropping = _Dropping()
    provider: Any = None
    if variant == SDK_SIMPLE:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
    elif variant in (SDK, SDK_SAMPLED, SDK_REQUESTS):
        sampled = variant == SDK_SAMPLED
        provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(SAMPLED_RATIO)) if sampled else None
        )
        provider.add_span_processor(BatchSpanProcessor(dropping))
    elif variant != SDK_METRICS:
        raise ValueError(f"unknown telemetry set-up {variant!r}")
    if provider is not None:
        trace.set_tracer_provider(provider)
    emptied = 0

    async def drain() -> None:
        nonlocal emptied
        while True:
            await asyncio.sleep(1.0)
            emptied += len(memory.get_finished_spans())
            memory.clear()
            reader.get_metrics_data()  # what a periodic reader does

    drainer = asyncio.create_task(drain())

    def exported() -> dict[str, Any]:
        if provider is not None:
            provider.force_flush()  # a batch processor's queue, so that all count
        return {"spans_exported": emptied + len(memory.get_finished_spans()) + dropping.spans}

    try:
        yield exported
    finally:
        drainer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drainer
        if provider is not None:
            provider.shutdown()


def mutex_grant() -> Callable[[], None]:
    """One Mutex grant's telemetry calls, as ``Mutex.acquire`` and ``release``
    make them: the acquire span (queue position, fencing token) timed by the
    wait histogram, and the hold record started inside it, ended by the release.

    For the benches that time these calls without a server
    (bench/telemetry_noop.py, bench/telemetry_cold.py), so that both time the
    same calls. Call it once the process's set-up is configured.
    """
    from aiocoord import Telemetry, _telemetry

    tags = _telemetry.recipe_tags(Telemetry(), "mutex", "/bench/lock")
    span, start_hold, wait = _telemetry.span, _telemetry.start_hold, _telemetry.WAIT
    hold = "aiocoord.lock.hold.duration"

    def grant() -> None:
        with span("aiocoord.lock.acquire", tags, duration=wait) as op:
            op.set("aiocoord.queue_position", 0)
            record = start_hold("aiocoord.lock.hold", tags, token=42, duration=hold)
            op.outcome("acquired")
            if op.recording:
                op.set("aiocoord.fencing_token", 42)
        if record is not None:
            record.end("released")

    return grant
