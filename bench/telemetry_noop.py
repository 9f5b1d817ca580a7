"""What one instrumented operation costs in telemetry calls alone (no ZooKeeper).

Times the telemetry calls of two operations: a Mutex acquire and release (the
acquire span with the wait histogram, the hold span and histogram, and three
request-latency records: create, get_children, delete) and a counter add (its
span with the add histogram, two request records: get_data, set_data). In
process CPU time, not wall time: what the calls cost the client, which a busy
machine disturbs less. Each set-up runs in a fresh interpreter:

- ``no-otel``: ``opentelemetry`` cannot be imported (the ``otel`` extra absent);
- ``api``: the API installed, no SDK configured;
- ``sdk``: the SDK with a synchronous in-memory span exporter and an in-memory
  metric reader;
- ``sdk-sampled``: the same, keeping 1 trace in 100 (``ParentBased(TraceIdRatioBased(0.01))``).

Run: ``.venv/bin/python -m bench.telemetry_noop`` (prints a Markdown table).
Compare with a Mutex acquire and release and a counter add on a forceSync=yes
server (bench/results/2026-11-25-telemetry.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

MODES = ("no-otel", "api", "sdk", "sdk-sampled")
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
if mode.startswith("sdk"):
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    sampled = mode == "sdk-sampled"
    sampler = ParentBased(TraceIdRatioBased(0.01)) if sampled else None
    provider = TracerProvider(sampler=sampler)
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
        for opcode in (1, 12, 2):  # create, get_children, delete
            _telemetry.request_done(opcode, str, True, 0.0005)

def counter_add():
    add_time = "aiocoord.counter.add.duration"
    with _telemetry.span("aiocoord.counter.add", tags, duration=add_time) as op:
        op.outcome("added")
        if op.recording:
            op.set("aiocoord.attempts", 1)
            op.set("aiocoord.batch_size", 1)
    if _telemetry.AVAILABLE:
        _telemetry.request_done(4, str, True, 0.0005)
        _telemetry.request_done(5, str, True, 0.0005)

def empty():
    pass

best = []
for _ in range(repeat):
    for fn in (operation, counter_add, empty):
        start = time.process_time()
        for _ in range(loops):
            fn()
        best.append((fn.__name__, (time.process_time() - start) / loops))
        if exporter is not None:
            exporter.clear()
base = sorted(t for name, t in best if name == "empty")[repeat // 2]
out = {"mode": mode}
for shape in ("operation", "counter_add"):
    times = sorted(t for name, t in best if name == shape)
    low, median, high = times[0], times[repeat // 2], times[-1]
    out[shape] = [(median - base) * 1e6, (low - base) * 1e6, (high - base) * 1e6]
print(json.dumps(out))
"""


def main() -> None:
    print("| set-up | mutex acquire+release, µs (range) | counter add, µs (range) |")
    print("|---|---|---|")
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, str(LOOPS), str(REPEAT)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        cells = [
            f"{median:.2f} ({low:.2f} to {high:.2f})"
            for median, low, high in (result["operation"], result["counter_add"])
        ]
        print(f"| {mode} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
