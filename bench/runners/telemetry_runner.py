"""aiocoord's Mutex and AtomicLong loops (the aiocoord runner's) under three telemetry
set-ups, to measure what the OpenTelemetry instrumentation costs (docs/observability.md):

- ``no-otel``: the ``opentelemetry`` package cannot be imported (blocked before
  aiocoord is), as when the ``otel`` extra is not installed: the baseline;
- ``api``: the API installed, no SDK configured (what a library's users get by
  default): spans and instruments are the API's no-ops;
- ``sdk``: the SDK configured, every span exported synchronously to an
  in-memory exporter (SimpleSpanProcessor, emptied every second) and every
  metric aggregated for an in-memory reader (collected every second);
- ``sdk-requests``: the same, with clients that also time every request
  (``Telemetry(request_metrics=True)``, off by default).

The variant must be known before aiocoord is imported, so it is read from the
command line first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import resource
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

NO_OTEL, API, SDK, SDK_REQUESTS = "no-otel", "api", "sdk", "sdk-requests"
VARIANTS = (NO_OTEL, API, SDK, SDK_REQUESTS)
LIBRARY = "aiocoord-telemetry"
CONTENDERS = (1, 8)


class _BlockOpenTelemetry:
    """An import hook that makes ``opentelemetry`` look uninstalled."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is blocked for the no-otel variant")


def _variant(argv: list[str]) -> str:
    return argv[argv.index("--variant") + 1] if "--variant" in argv else ""


if _variant(sys.argv) == NO_OTEL:
    sys.meta_path.insert(0, _BlockOpenTelemetry())

import aiocoord  # noqa: E402  (after the import hook)
from aiocoord import _telemetry  # noqa: E402

from . import aiocoord_runner  # noqa: E402
from ._common import Offer, Result, RunArgs, main  # noqa: E402


@contextlib.asynccontextmanager
async def _set_up(variant: str) -> AsyncIterator[Callable[[], dict[str, Any]]]:
    """Configure telemetry for ``variant``; yield what to add to the result."""
    if variant == NO_OTEL:
        assert not _telemetry.AVAILABLE
        yield lambda: {}
        return
    assert _telemetry.AVAILABLE
    if variant == API:
        yield lambda: {}
        return
    if variant == SDK_REQUESTS:
        # Every client the aiocoord runner makes (it calls aiocoord.connect) times
        # its requests: this process runs this one variant only.
        timed = aiocoord.Telemetry(request_metrics=True)
        aiocoord.connect = functools.partial(aiocoord.connect, telemetry=timed)
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    spans = 0

    async def drain() -> None:
        nonlocal spans
        while True:
            await asyncio.sleep(1.0)
            spans += len(exporter.get_finished_spans())
            exporter.clear()
            reader.get_metrics_data()  # what a periodic reader does

    drainer = asyncio.create_task(drain())
    try:
        yield lambda: {"spans_exported": spans + len(exporter.get_finished_spans())}
    finally:
        drainer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drainer


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _cpu_in_window(args: RunArgs, into: dict[str, float]) -> None:
    """This process's CPU seconds over (about) the measured window: the telemetry's
    cost is client CPU, which other load on the machine disturbs far less than the
    rate (a busy core slows every variant's hand-offs alike, not its CPU per op)."""
    await asyncio.sleep(args.warmup)
    before = _cpu_seconds()
    await asyncio.sleep(args.seconds)
    into["cpu_s"] = _cpu_seconds() - before


def _measured(run: Callable[[RunArgs], Awaitable[Result]]) -> Callable[[RunArgs], Any]:
    async def measured(args: RunArgs) -> Result:
        async with _set_up(args.variant) as extra:
            cpu: dict[str, float] = {}
            meter = asyncio.create_task(_cpu_in_window(args, cpu))
            try:
                outcome = await run(dataclasses.replace(args, variant=""))
            finally:
                meter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await meter
            if isinstance(outcome, dict):
                outcome["library"], outcome["variant"] = LIBRARY, args.variant
                outcome.setdefault("extra", {})
                if isinstance(outcome["extra"], dict):
                    outcome["extra"].update(extra())
                    ops = outcome.get("ops") or 0
                    if "cpu_s" in cpu and ops:
                        outcome["extra"]["client_cpu_us_per_op"] = cpu["cpu_s"] / ops * 1e6
            return outcome

    return measured


OFFERS = [
    Offer(scenario, _measured(run), variant=variant, contenders=CONTENDERS)
    for scenario, run in (("mutex", aiocoord_runner._mutex), ("counter", aiocoord_runner._counter))
    for variant in VARIANTS
]

if __name__ == "__main__":
    main(LIBRARY, OFFERS)
