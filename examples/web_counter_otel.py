"""examples/web_counter.py with OpenTelemetry metrics, scraped by Prometheus.

The application, not the library, configures the OpenTelemetry SDK: here a
MeterProvider whose reader is the Prometheus exporter, served on its own port
(``prometheus_client``'s HTTP server), the way a service exposes ``/metrics``.
aiocoord records into the global provider from then on: the counter's adds
(time, outcome, batches shared), the session's requests by operation (asked
for with ``Telemetry(request_metrics=True)``), the outstanding requests and
watches. Nothing in the web service changes.

Needs the ``otel-example`` extra (``pip install 'aiocoord[otel-example]'``:
the OpenTelemetry SDK and ``opentelemetry-exporter-prometheus``).

Run it: it starts an embedded ZooKeeper (unless AIOCOORD_ZK is set), the web
service, and the metrics endpoint; sends 200 concurrent hits; then scrapes
``/metrics`` once and prints aiocoord's series (some of them; values vary).

Expected output of running this file (``...`` stands for what varies):

    serving on http://127.0.0.1:..., metrics on http://127.0.0.1:.../metrics
    200 concurrent POST /hit: all distinct: True
    aiocoord_counter_add_duration_seconds_count{aiocoord_name="hits",aiocoord_outcome="added",aiocoord_recipe="atomic_long",...} 200.0
    aiocoord_counter_combined_batches_total{aiocoord_name="hits",aiocoord_outcome="coalesced",aiocoord_recipe="atomic_long",...} ...
    aiocoord_request_duration_seconds_count{aiocoord_operation="set_data",aiocoord_outcome="ok",...} ...
    aiocoord_requests_outstanding{...} 0.0
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import aiocoord

SHOWN = (
    "aiocoord_counter_add_duration_seconds_count",
    "aiocoord_counter_combined_batches_total",
    "aiocoord_request_duration_seconds_count",
    "aiocoord_requests_outstanding",
)
"""The series this run prints (a scrape has more: buckets, sums, gauges)."""


def configure_metrics() -> tuple[str, object]:
    """Wire the SDK to a Prometheus endpoint on a free port: its URL, and the server."""
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    server, _thread = start_http_server(0, addr="127.0.0.1")
    return f"http://127.0.0.1:{server.server_port}/metrics", server


async def main() -> None:
    import httpx

    # The example's app, with its counter named "hits" for the metrics.
    import web_counter

    from aiocoord.testing import ZooKeeperServer

    metrics_url, metrics_server = configure_metrics()
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(metrics_server.shutdown)  # type: ignore[attr-defined]
        hosts = os.environ.get("AIOCOORD_ZK")
        if not hosts:
            hosts = (await stack.enter_async_context(ZooKeeperServer())).connect_string
        namespace = f"/aiocoord-web-otel-{os.getpid()}"
        # request_metrics=True: also time every ZooKeeper request, by operation
        # (off by default: one measurement per request).
        telemetry = aiocoord.Telemetry(
            names={web_counter.COUNTER_PATH: "hits"}, request_metrics=True
        )
        url = await stack.enter_async_context(
            web_counter.serving(hosts, namespace, telemetry=telemetry)
        )
        print(f"serving on {url}, metrics on {metrics_url}")
        http = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
        responses = await asyncio.gather(*(http.post("/hit") for _ in range(200)))
        hits = {r.json()["hit"] for r in responses}
        print(f"200 concurrent POST /hit: all distinct: {len(hits) == 200}")
        scrape = (await http.get(metrics_url)).text
        for name in SHOWN:
            lines = [line for line in scrape.splitlines() if line.startswith(name + "{")]
            if name == "aiocoord_request_duration_seconds_count":
                lines = [line for line in lines if 'aiocoord_operation="set_data"' in line]
            # Labels the scrape adds (the meter's name and version) vary: shown as "...".
            print(re.sub(r"([{,])otel_scope_[^}]*\}", r"\1...}", lines[0]) if lines else name)
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
