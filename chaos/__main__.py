"""``python -m chaos [--seed N] [--duration S] [--workers N] [--out DIR]``: one chaos run.

Prints the report and writes it, with the merged JSON-lines history, to ``--out``
(default: a new directory under the system's temporary directory). The exit status
is 0 only if every invariant held.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from ._controller import RunConfig, run
from ._nemesis import Partitioner

DEFAULT_DURATION = 180.0
DEFAULT_WORKERS = 4
DEFAULT_SEED = 1


def parse(argv: list[str]) -> RunConfig:
    parser = argparse.ArgumentParser(
        prog="python -m chaos",
        description="Drive every aiocoord recipe through a seeded schedule of faults on a "
        "3-node ZooKeeper ensemble and check every invariant from the recorded history.",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seeds the fault schedule")
    parser.add_argument(
        "--duration", type=float, default=DEFAULT_DURATION, help="seconds of faults (default 180)"
    )
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help="worker processes (default 4)"
    )
    parser.add_argument("--out", type=Path, help="where the report and history go")
    parser.add_argument(
        "--no-partitions",
        action="store_true",
        help="stay in this network namespace (no partitions) even where one could be made",
    )
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error("--workers must be at least 2")
    if args.duration < 10:
        parser.error("--duration must be at least 10 s")
    out = args.out
    if out is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = Path(tempfile.gettempdir()) / f"aiocoord-chaos-{stamp}-seed{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    return RunConfig(args.seed, args.duration, args.workers, out, not args.no_partitions)


def main(argv: list[str] | None = None) -> int:
    config = parse(sys.argv[1:] if argv is None else argv)
    partitioner = Partitioner()
    if config.partitions:
        # Before anything else: a namespace is per thread, and children inherit it.
        partitioner.enter_namespace()
    else:
        partitioner.reason = "turned off (--no-partitions)"
    return asyncio.run(run(config, partitioner))


if __name__ == "__main__":
    raise SystemExit(main())
