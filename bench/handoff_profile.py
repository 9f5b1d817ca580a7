"""Server requests and client CPU per mutex hand-off, aiocoord against Curator (#30).

Rates on a shared machine are noisy; what a hand-off costs is not. For each
library and contender count this runs the mutex scenario's runner twice on a
fresh ``forceSync=yes`` standalone server:

- through a counting TCP proxy: every request the clients send, by kind
  (ZooKeeper's opcode), and every watch event the server sends back, divided by
  the hand-offs of the whole run (warm-up included, as the counts are);
- directly: the hand-offs/s of the window, the server's disk syncs per hand-off
  (``mntr``'s fsync count: writes that share a sync are cheaper), and the runner's CPU seconds per
  hand-off (user + system of the whole process, start-up included, divided by
  every hand-off of the run).

Run: ``.venv/bin/python -m bench.handoff_profile`` (``PROFILE_SECONDS``, default 5;
``PROFILE_CONTENDERS``, default ``8,32``; ``PROFILE_LIBRARIES``, default
``aiocoord,curator``). Prints a markdown table.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import resource
import struct
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiocoord
from aiocoord.testing import ZooKeeperServer
from bench import run as driver

OPCODES = {
    1: "create",
    2: "delete",
    3: "exists",
    4: "getData",
    5: "setData",
    8: "getChildren",
    9: "sync",
    11: "ping",
    12: "getChildren2",
    13: "check",
    14: "multi",
    15: "create2",
    19: "createContainer",
    -11: "closeSession",
    101: "setWatches",
    105: "setWatches2",
}
"""The opcodes a lock loop sends (others are shown by number)."""
_LENGTH = struct.Struct("!i")
_REQUEST = struct.Struct("!ii")  # xid, opcode
_REPLY_XID = struct.Struct("!i")
_NOTIFICATION = -1


class _Counts:
    def __init__(self) -> None:
        self.requests: collections.Counter[str] = collections.Counter()
        self.events = 0


class _Direction:
    """Cut one direction of a ZooKeeper connection into frames and count them."""

    def __init__(self, counts: _Counts, *, requests: bool) -> None:
        self._counts = counts
        self._requests = requests
        self._buffer = bytearray()
        self._first = True  # the connect request or reply has no xid/opcode

    def feed(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset = 0
        while len(buffer) - offset >= 4:
            (length,) = _LENGTH.unpack_from(buffer, offset)
            if len(buffer) - offset - 4 < length:
                break
            body = offset + 4
            if self._first:
                self._first = False
                if self._requests:
                    self._counts.requests["connect"] += 1
            elif self._requests:
                _xid, opcode = _REQUEST.unpack_from(buffer, body)
                self._counts.requests[OPCODES.get(opcode, f"op{opcode}")] += 1
            else:
                (xid,) = _REPLY_XID.unpack_from(buffer, body)
                if xid == _NOTIFICATION:
                    self._counts.events += 1
            offset = body + length
        del buffer[:offset]


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: _Direction
) -> None:
    try:
        while data := await reader.read(65536):
            direction.feed(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.asynccontextmanager
async def counting_proxy(target: str, counts: _Counts) -> Any:
    """A loopback proxy to ``target`` (host:port) that counts what passes; yields host:port."""
    host, port = target.rsplit(":", 1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(
            _pump(reader, up_writer, _Direction(counts, requests=True)),
            _pump(up_reader, writer, _Direction(counts, requests=False)),
        )

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        address = server.sockets[0].getsockname()
        yield f"{address[0]}:{address[1]}"
    finally:
        server.close()


async def _run(
    command: Sequence[str], contenders: int, seconds: float, connect: str, path: str
) -> tuple[dict[str, Any], float]:
    """One runner process; its result line and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = await asyncio.create_subprocess_exec(
        *command,
        "mutex",
        str(contenders),
        f"{seconds:g}",
        connect,
        path,
        "--warmup",
        "2",
        cwd=driver.REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), seconds + 120)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # our own child, by its PID
        await proc.wait()
        raise
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = driver._last_json_line(stdout.decode(errors="replace"))
    if line is None or proc.returncode != 0:
        raise RuntimeError(stderr.decode(errors="replace")[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return line, cpu


async def _fsyncs(server: ZooKeeperServer) -> tuple[int, int]:
    """How many disk syncs the server has made, and their total milliseconds (``mntr``)."""
    values = dict(
        line.split("\t", 1) for line in (await server.four_letter_word("mntr")).splitlines()
    )
    return int(values["zk_cnt_fsynctime"]), int(values["zk_sum_fsynctime"])


async def main() -> int:
    seconds = float(os.environ.get("PROFILE_SECONDS", "5"))
    levels = [int(n) for n in os.environ.get("PROFILE_CONTENDERS", "8,32").split(",")]
    wanted = os.environ.get("PROFILE_LIBRARIES", "aiocoord,curator").split(",")
    client_pin, server_pin = driver.pin_commands()
    commands: dict[str, tuple[str, ...]] = {
        "aiocoord": (sys.executable, "-m", "bench.runners.aiocoord_runner"),
    }
    with driver.build_dir() as build:
        notes: list[str] = []
        for runner in driver.java_runners(build, notes):
            if runner.name == "curator":
                commands["curator"] = runner.command
        rows = []
        async with ZooKeeperServer(tick_time_ms=driver.TICK_TIME_MS, force_sync=True) as server:
            if server_pin and server.pid is not None:
                await asyncio.to_thread(
                    driver.subprocess.run, [*server_pin, str(server.pid)], check=True
                )
            async with aiocoord.connect(server.connect_string) as client:
                await client.ensure_path(driver.ZNODE_ROOT)
                await driver.warm_up_server(client, driver.SERVER_CONFIGS[0].warmup_s)
                for contenders in levels:
                    for library in wanted:
                        command = (*client_pin, *commands[library])
                        path = f"{driver.ZNODE_ROOT}/profile-{uuid.uuid4().hex[:8]}"
                        await client.ensure_path(path)
                        counts = _Counts()
                        async with counting_proxy(server.connect_string, counts) as proxied:
                            counted, _cpu = await _run(command, contenders, seconds, proxied, path)
                        await driver.delete_tree(client, path)
                        await client.ensure_path(path)
                        started = time.monotonic()
                        syncs = await _fsyncs(server)
                        timed, cpu = await _run(
                            command, contenders, seconds, server.connect_string, path
                        )
                        syncs = [b - a for a, b in zip(syncs, await _fsyncs(server), strict=True)]
                        await driver.delete_tree(client, path)
                        handoffs = counted["extra"]["entries"]
                        rows.append(
                            {
                                "library": library,
                                "contenders": contenders,
                                "handoffs_counted": handoffs,
                                "requests": {
                                    k: v / handoffs for k, v in sorted(counts.requests.items())
                                },
                                "events": counts.events / handoffs,
                                "rate": timed["rate"],
                                "cpu_ms_per_handoff": 1000 * cpu / timed["extra"]["entries"],
                                "fsyncs": syncs[0] / timed["extra"]["entries"],
                                "fsync_ms": syncs[1] / max(syncs[0], 1),
                                "wall_s": time.monotonic() - started,
                                "load": os.getloadavg()[0],
                            }
                        )
                        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(_table(rows))
    return 0


_SHOWN = ("create2", "create", "delete", "getChildren", "getChildren2", "exists", "getData")


def _table(rows: Sequence[dict[str, Any]]) -> str:
    kinds = [k for k in _SHOWN if any(k in r["requests"] for r in rows)]
    head = [
        "library",
        "sessions",
        *kinds,
        "other",
        "all",
        "events",
        "fsyncs",
        "fsync ms",
        "hand-offs/s",
        "CPU ms",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        req = r["requests"]
        other = sum(v for k, v in req.items() if k not in kinds)
        cells = [
            r["library"],
            str(r["contenders"]),
            *(f"{req.get(k, 0.0):.2f}" for k in kinds),
            f"{other:.2f}",
            f"{sum(req.values()):.2f}",
            f"{r['events']:.2f}",
            f"{r['fsyncs']:.2f}",
            f"{r['fsync_ms']:.2f}",
            f"{r['rate']:,.0f}",
            f"{r['cpu_ms_per_handoff']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
