"""How fast aiocoord notices a dead server and comes back (the session-layer targets).

Runs against a private server it kills and restarts (never the shared bench
server): for each round, SIGKILL the JVM and time until the client reports
SUSPENDED (the socket's close, not a heartbeat), then start the server again
and time from "serving" (the launcher's ruok/srvr check passed) to RECONNECTED
with the same session. Writes ``bench/results/<date>-recovery.json`` and prints
a line a person can read. Part of ``make bench``; runs on its own with
``.venv/bin/python -m bench.recovery``.

Targets from the foundation issue: SUSPENDED within 100 ms of the connection
closing; usable again within 1 s of the server serving.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import statistics
import time
from pathlib import Path

import aiocoord
from aiocoord.testing import ZooKeeperServer

ROUNDS = 10
RESULTS = Path(__file__).resolve().parent / "results"


async def measure(rounds: int = ROUNDS) -> dict[str, object]:
    suspended_ms: list[float] = []
    reconnected_ms: list[float] = []
    same_session = True
    async with (
        ZooKeeperServer() as server,
        aiocoord.connect(server.connect_string) as client,
    ):
        session = client.session_id
        seen: dict[aiocoord.ConnectionState, float] = {}
        # A listener stamps each transition the moment the session task makes it.
        client.add_listener(lambda state: seen.__setitem__(state, time.perf_counter()))
        for _ in range(rounds):
            changes = client.state_changes()
            killed = time.perf_counter()
            await server.kill()  # the kernel closes the JVM's sockets
            async for state in changes:
                if state is aiocoord.ConnectionState.SUSPENDED:
                    suspended_ms.append((seen[state] - killed) * 1000)
                    break
            await server.start()
            serving = time.perf_counter()
            async with asyncio.timeout(30):
                async for state in changes:
                    if state is aiocoord.ConnectionState.RECONNECTED:
                        # It may come back before the launcher's own check passes: 0.
                        reconnected_ms.append(max(0.0, seen[state] - serving) * 1000)
                        break
            await changes.aclose()
            same_session = same_session and client.session_id == session
    return {
        "rounds": rounds,
        "kill_to_suspended_ms": {
            "p50": statistics.median(suspended_ms),
            "max": max(suspended_ms),
        },
        "serving_to_reconnected_ms": {
            "p50": statistics.median(reconnected_ms),
            "max": max(reconnected_ms),
        },
        "same_session_throughout": same_session,
    }


def main() -> None:
    result = asyncio.run(measure())
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{datetime.date.today().isoformat()}-recovery.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    down, up = result["kill_to_suspended_ms"], result["serving_to_reconnected_ms"]
    assert isinstance(down, dict) and isinstance(up, dict)
    print(
        f"recovery over {result['rounds']} server kills: SUSPENDED {down['p50']:.1f} ms "
        f"after the kill (max {down['max']:.1f}); RECONNECTED {up['p50']:.0f} ms after the "
        f"server serves again (max {up['max']:.0f}); same session: "
        f"{result['same_session_throughout']}; wrote {path}"
    )


if __name__ == "__main__":
    main()
