"""aiocoord's Mutex and AtomicLong loops (the aiocoord runner's) under the telemetry
set-ups of bench/telemetry_setups.py, to measure what the OpenTelemetry
instrumentation costs (docs/observability.md): ``no-otel`` (the baseline),
``api`` (no SDK), ``sdk`` (the production set-up: every span sampled, a
BatchSpanProcessor), ``sdk-sampled`` (the same, 1 trace in 100), ``sdk-simple``
(every span exported synchronously to an in-memory exporter: the test set-up,
this bench's ``sdk`` row before 2026-11-26) and ``sdk-requests`` (``sdk`` with
clients that also time every request).

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
from collections.abc import Awaitable, Callable
from typing import Any

from .. import telemetry_setups as setups

VARIANTS = (
    setups.NO_OTEL,
    setups.API,
    setups.SDK,
    setups.SDK_SAMPLED,
    setups.SDK_SIMPLE,
    setups.SDK_REQUESTS,
)
LIBRARY = "aiocoord-telemetry"
CONTENDERS = (1, 8)


def _variant(argv: list[str]) -> str:
    return argv[argv.index("--variant") + 1] if "--variant" in argv else ""


if _variant(sys.argv) == setups.NO_OTEL:
    setups.block()

import aiocoord  # noqa: E402  (after the import hook)

from . import aiocoord_runner  # noqa: E402
from ._common import Offer, Result, RunArgs, main  # noqa: E402


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
        if args.variant == setups.SDK_REQUESTS:
            # Every client the aiocoord runner makes (it calls aiocoord.connect)
            # times its requests: this process runs this one variant only.
            timed = aiocoord.Telemetry(request_metrics=True)
            aiocoord.connect = functools.partial(aiocoord.connect, telemetry=timed)  # type: ignore[assignment]
        async with setups.configure(args.variant) as extra:
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
