"""The telemetry calls of one Mutex grant, hot and cold (#28).

bench/telemetry_noop.py times the calls in a tight loop, where the SDK's code
and data stay in the CPU's caches. In a client, each grant's calls run between
the event loop, the socket reads and writes, the parsing and the kernel's
network stack, which push them out. This times the same calls (thread CPU time
around each grant's calls) with, between two grants, a walk over a buffer of
N KiB (one byte every 64, the size of a cache line): 0 is the hot loop.

Set-ups: ``sdk`` (every span sampled, a BatchSpanProcessor whose exporter
drops what it gets; an in-memory metric reader) and ``sdk-metrics`` (a meter
provider only). Each runs in a fresh interpreter.

Run: ``.venv/bin/python -m bench.telemetry_cold`` (prints a Markdown table).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

SIZES_KIB = (0, 32, 256, 1024, 4096)
GRANTS = 2000
REPEAT = 3

_CHILD = r"""
import json, sys, time
mode, sizes, grants = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

class Dropping(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
if mode == "sdk":
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)
from bench.telemetry_setups import mutex_grant

grant = mutex_grant()

clock = time.thread_time
for _ in range(500):
    grant()
out = {}
for size in sizes:
    buffer = bytearray(size * 1024)
    inside = 0.0
    for n in range(grants):
        for i in range(0, len(buffer), 64):
            buffer[i] = (buffer[i] + 1) & 255
        started = clock()
        grant()
        inside += clock() - started
        if n % 1000 == 999:
            reader.get_metrics_data()
    out[size] = inside / grants * 1e6
print(json.dumps(out))
"""


def main() -> None:
    results: dict[str, dict[str, list[float]]] = {}
    for _ in range(REPEAT):
        for mode in ("sdk", "sdk-metrics"):
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, mode, json.dumps(SIZES_KIB), str(GRANTS)],
                capture_output=True,
                text=True,
                check=True,
            )
            for size, value in json.loads(done.stdout).items():
                results.setdefault(mode, {}).setdefault(size, []).append(value)
    print("| set-up | " + " | ".join(f"{size} KiB between grants" for size in SIZES_KIB) + " |")
    print("|---" * (len(SIZES_KIB) + 1) + "|")
    for mode, by_size in results.items():
        cells = [
            f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" for v in by_size.values()
        ]
        print(f"| {mode} | " + " | ".join(cells) + " |")
    print(f"\nµs of thread CPU per grant's telemetry calls, median of {REPEAT} (range)")


if __name__ == "__main__":
    main()
