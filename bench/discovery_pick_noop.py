"""What telemetry adds to a service provider's pick (no ZooKeeper): CPU ns per pick.

A pick is a few hundred nanoseconds, and an ``add`` to an OpenTelemetry counter
costs as much even with no SDK set, so a provider counts its picks in an int
and adds them to ``aiocoord.discovery.picks`` in batches (#28). This checks
that a pick without an SDK costs what it did before that: the same loop over
two source trees (this one and a baseline checkout, e.g. main before the
change), in fresh interpreters, alternating, in process CPU time:

- ``no-otel``: ``opentelemetry`` cannot be imported;
- ``api``: the API installed, no SDK configured;
- ``sdk``: an SDK meter provider with an in-memory reader (what counting costs then).

Run: ``.venv/bin/python -m bench.discovery_pick_noop BASELINE_TREE``, where
BASELINE_TREE holds the baseline's ``aiocoord`` package (``git archive main |
tar -x -C /tmp/baseline``); prints a Markdown table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

MODES = ("no-otel", "api", "sdk")
STRATEGIES = ("round_robin", "random", "least_outstanding")
LOOPS = 200_000
RUNS = 5
"""Fresh interpreters per tree, mode and strategy (the trees alternate): median, range."""

_CHILD = r"""
import sys, time, json
mode, strategy, loops = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "no-otel":
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(name)
    sys.meta_path.insert(0, Block())
if mode == "sdk":
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
import aiocoord
from aiocoord import ProviderStrategy, ServiceDiscovery, ServiceInstance

client = aiocoord.connect("127.0.0.1:1")  # never started: a pick reads local state only
provider = ServiceDiscovery(client, "/services").provider(
    "api", strategy=ProviderStrategy(strategy)
)
cache = provider.cache
# The view a started cache would hold (ten instances), set directly: no server.
cache._view = {
    f"i-{n}": ServiceInstance(name="api", id=f"i-{n}", address="10.0.0.1", port=8000 + n)
    for n in range(10)
}
cache._version += 1
pick = provider.instance
for _ in range(10_000):
    pick()
start = time.process_time()
for _ in range(loops):
    pick()
per_pick = (time.process_time() - start) / loops
start = time.process_time()
for _ in range(loops):
    pass
empty = (time.process_time() - start) / loops
print(json.dumps({"ns": (per_pick - empty) * 1e9}))
"""


def _run(tree: Path, mode: str, strategy: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, strategy, str(LOOPS)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return float(json.loads(done.stdout)["ns"])


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} BASELINE_TREE")
    trees = {"baseline": Path(sys.argv[1]).resolve(), "this": Path.cwd().resolve()}
    print("| set-up | strategy | baseline ns/pick (range) | this tree ns/pick (range) | change |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        for strategy in STRATEGIES:
            times: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(RUNS):
                for name, tree in trees.items():
                    times[name].append(_run(tree, mode, strategy))
            cells = []
            for name in trees:
                values = times[name]
                cells.append(
                    f"{statistics.median(values):.0f} ({min(values):.0f} to {max(values):.0f})"
                )
            before = statistics.median(times["baseline"])
            after = statistics.median(times["this"])
            change = f"{(after - before) / before * 100:+.1f} %"
            print(f"| {mode} | {strategy} | {cells[0]} | {cells[1]} | {change} |")


if __name__ == "__main__":
    main()
