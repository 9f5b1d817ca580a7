"""What one instrumented operation costs in telemetry calls alone (no ZooKeeper).

Times, per operation, what a Mutex acquire does for telemetry: one span with
the wait histogram and the queued-contenders counter (``_telemetry.span(...,
duration=WAIT)``), a hold record started and ended, and one request-latency
record, in three set-ups, each in a fresh interpreter:

- ``no-otel``: ``opentelemetry`` cannot be imported (the ``otel`` extra absent);
- ``api``: the API installed, no SDK configured;
- ``sdk``: the SDK with a synchronous in-memory span exporter and an in-memory
  metric reader.

Run: ``.venv/bin/python -m bench.telemetry_noop`` (prints a Markdown table).
Compare with a Mutex acquire and release on a forceSync=yes server (about
1.3 ms here: bench/results/2026-11-25-telemetry.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

MODES = ("no-otel", "api", "sdk")
LOOPS = 20_000
REPEAT = 5

_CHILD = r"""
import sys, time, json
mode, loops, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "no-otel":
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(name)
    sys.meta_path.insert(0, Block())
from aiocoord import Telemetry, _telemetry
if mode == "sdk":
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
else:
    exporter = None
tags = _telemetry.recipe_tags(Telemetry(), "mutex", "/bench/lock")

def operation():
    with _telemetry.span("aiocoord.lock.acquire", tags, duration=_telemetry.WAIT) as op:
        op.outcome("acquired")
        if op.recording:
            op.set("aiocoord.fencing_token", 42)
        record = _telemetry.start_hold("aiocoord.lock.hold", tags, token=42,
                                       duration="aiocoord.lock.hold.duration")
    if record is not None:
        record.end("released")
    if _telemetry.AVAILABLE:
        _telemetry.request_done(1, str, True, 0.0005)

def empty():
    pass

best = []
for _ in range(repeat):
    for fn in (operation, empty):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best.append((fn.__name__, (time.perf_counter() - start) / loops))
        if exporter is not None:
            exporter.clear()
ops = sorted(t for name, t in best if name == "operation")
base = sorted(t for name, t in best if name == "empty")
print(json.dumps({"mode": mode, "median_us": (ops[len(ops) // 2] - base[len(base) // 2]) * 1e6,
                  "min_us": (ops[0] - base[0]) * 1e6, "max_us": (ops[-1] - base[0]) * 1e6}))
"""


def main() -> None:
    print("| set-up | telemetry per acquire+release, median µs | range µs |")
    print("|---|---|---|")
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, str(LOOPS), str(REPEAT)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        print(
            f"| {mode} | {result['median_us']:.2f} | "
            f"{result['min_us']:.2f} to {result['max_us']:.2f} |"
        )


if __name__ == "__main__":
    main()
