"""What one instrumented operation costs in telemetry calls alone (no ZooKeeper).

Times the telemetry calls of: a Mutex grant (the acquire span with the wait
histogram, the hold span with the hold histogram), a counter add (its span
with the add histogram), and, apart, the three request-latency records a grant
adds with ``Telemetry(request_metrics=True)`` (create, get_children, delete). In
process CPU time, not wall time: what the calls cost the client, which a busy
machine disturbs less. Each set-up runs in a fresh interpreter:

- ``no-otel``: ``opentelemetry`` cannot be imported (the ``otel`` extra absent);
- ``api``: the API installed, no SDK configured;
- ``sdk``: the SDK with a synchronous in-memory span exporter and an in-memory
  metric reader, both emptied every 1,000 operations (as the bench runner
  empties them every second: about 1,000 grants), so that the cyclic garbage
  collector walks what an application's exporter would hold, not every span
  of the run;
- ``sdk-sampled``: the same, keeping 1 trace in 100 (``ParentBased(TraceIdRatioBased(0.01))``).

With the SDK, a second row times the same spans, attributes and measurements
made straight on the SDK, the cheapest way (attributes known at the start given
then, the others in one call at the end; no span made current): the SDK's own
cost, below which no instrumentation of these operations can go. The
difference is aiocoord's.

Run: ``.venv/bin/python -m bench.telemetry_noop`` (prints a Markdown table).
Compare with a Mutex acquire and release and a counter add on a forceSync=yes
server (bench/results/2026-11-26-telemetry.md).
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
reader = exporter = None
if mode.startswith("sdk"):
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    sampled = mode == "sdk-sampled"
    sampler = ParentBased(TraceIdRatioBased(0.01)) if sampled else None
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
from bench.telemetry_setups import mutex_grant
counter_tags = _telemetry.recipe_tags(Telemetry(), "atomic_long", "/bench/counter")
ADD = "aiocoord.counter.add.duration"

mutex = mutex_grant()

def counter():
    with _telemetry.span("aiocoord.counter.add", counter_tags, duration=ADD) as op:
        op.outcome("added")
        if op.recording:
            op.set("aiocoord.attempts", 1)
            op.set("aiocoord.batch_size", 1)
            op.set("aiocoord.combined", False)
            op.set("aiocoord.promoted", False)

def requests():
    if _telemetry.AVAILABLE:
        for opcode in (1, 12, 2):  # create, get_children, delete
            _telemetry.request_done(opcode, str, True, 0.0005)

def empty():
    pass

shapes = {"mutex": mutex, "counter": counter, "requests": requests, "empty": empty}
if exporter is not None:
    tracer = trace.get_tracer("floor")
    meter = metrics.get_meter("floor")
    def histogram(name):
        bounds = [0.001, 1.0]
        return meter.create_histogram(name, unit="s", explicit_bucket_boundaries_advisory=bounds)
    wait_h, hold_h, add_h = histogram("w"), histogram("h"), histogram("a")
    request_h = histogram("r")
    S = {"aiocoord.recipe": "mutex", "aiocoord.path": "/bench/lock"}
    SC = {"aiocoord.recipe": "atomic_long", "aiocoord.path": "/bench/counter"}
    W = {"aiocoord.recipe": "mutex", "aiocoord.outcome": "acquired"}
    R = {"aiocoord.recipe": "mutex", "aiocoord.outcome": "released"}
    A = {"aiocoord.recipe": "atomic_long", "aiocoord.outcome": "added"}
    ACQUIRED = {
        "aiocoord.queue_position": 0,
        "aiocoord.fencing_token": 42,
        "aiocoord.outcome": "acquired",
        "aiocoord.wait_ms": 0.5,
    }
    ADDED = {
        "aiocoord.attempts": 1,
        "aiocoord.batch_size": 1,
        "aiocoord.combined": False,
        "aiocoord.promoted": False,
        "aiocoord.outcome": "added",
    }
    OPS = ("create", "get_children", "delete")
    Q = [{"aiocoord.operation": o, "aiocoord.outcome": "ok"} for o in OPS]

    def floor_mutex():
        # The same spans, attributes and measurements, made straight on the SDK
        # the cheapest way: what is known at the start given then, the rest in
        # one call at the end.
        acquire = tracer.start_span("aiocoord.lock.acquire", attributes=S)
        token = {**S, "aiocoord.fencing_token": 42}
        hold = tracer.start_span("aiocoord.lock.hold", attributes=token)
        wait_h.record(0.0005, W)
        acquire.set_attributes(ACQUIRED)
        acquire.end()
        hold_h.record(0.0005, R)
        hold.set_attribute("aiocoord.outcome", "released")
        hold.end()

    def floor_counter():
        add = tracer.start_span("aiocoord.counter.add", attributes=SC)
        add_h.record(0.0005, A)
        add.set_attributes(ADDED)
        add.end()

    def floor_requests():
        for attributes in Q:
            request_h.record(0.0005, attributes)

    shapes.update(
        floor_mutex=floor_mutex, floor_counter=floor_counter, floor_requests=floor_requests
    )

DRAIN = 1000  # operations between two drains of the exporter and reader
best = []
for _ in range(repeat):
    for name, fn in shapes.items():
        start = time.process_time()
        for _ in range(loops // DRAIN):
            for _ in range(DRAIN):
                fn()
            if exporter is not None:
                exporter.clear()
                reader.get_metrics_data()
        best.append((name, (time.process_time() - start) / loops))
base = sorted(t for name, t in best if name == "empty")[repeat // 2]
out = {"mode": mode}
for shape in shapes:
    if shape == "empty":
        continue
    times = sorted(t for name, t in best if name == shape)
    low, median, high = times[0], times[repeat // 2], times[-1]
    out[shape] = [(median - base) * 1e6, (low - base) * 1e6, (high - base) * 1e6]
print(json.dumps(out))
"""


def main() -> None:
    print(
        "| set-up | mutex grant, µs (range) | counter add, µs (range) "
        "| 3 request records (request_metrics=True), µs (range) |"
    )
    print("|---|---|---|---|")
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, str(LOOPS), str(REPEAT)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout)
        rows = [(mode, ("mutex", "counter", "requests"))]
        if "floor_mutex" in result:
            rows.append(
                (f"{mode}: the SDK calls alone", ("floor_mutex", "floor_counter", "floor_requests"))
            )
        for label, shapes in rows:
            cells = ["{:.2f} ({:.2f} to {:.2f})".format(*result[shape]) for shape in shapes]
            print(f"| {label} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
