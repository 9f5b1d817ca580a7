"""A session and a watch, end to end, on an embedded ZooKeeper.

Starts a local ZooKeeper (or uses AIOCOORD_ZK), connects two clients, shows a
watch firing, then injects two faults and prints the connection states the
client reports: a dropped connection (SUSPENDED -> RECONNECTED, same session)
and an expired session (LOST -> CONNECTED, new session, ephemeral node gone).

Run: make demo   (or: python examples/session_demo.py)

Expected output with AIOCOORD_ZK set (run alone, the first line says where the
embedded ZooKeeper runs, and a line before "done" says it stopped). A ``...``
within a line stands for what varies: the address, the session ids, the
process id in the namespace; a ``...`` line, for the states of a reconnection
the client may try while the server is still closing the session:

    using ZooKeeper at ... (AIOCOORD_ZK)
    connected: session 0x..., timeout 10 s, namespace /aiocoord-demo-...
    read /config = b'v1' and set a watch on it
    watch fired: CHANGED /config; now b'v2'
    created ephemeral /alive; dropping the client's connection...
      [state] SUSPENDED
      [state] RECONNECTED
    same session after reconnect: True; /alive exists: True
    expiring the session on the server...
      [state] SUSPENDED
    ...
      [state] LOST
      [state] CONNECTED
    new session 0x...; /alive exists: False
    done
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator

import aiocoord
from aiocoord.testing import ZooKeeperServer, drop_connection, expire_session


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    external = os.environ.get("AIOCOORD_ZK")
    if external:
        print(f"using ZooKeeper at {external} (AIOCOORD_ZK)")
        yield external
        return
    started = time.monotonic()
    async with ZooKeeperServer() as server:
        print(
            f"embedded ZooKeeper serving on {server.connect_string} "
            f"(pid {server.pid}, up in {time.monotonic() - started:.1f} s)"
        )
        yield server.connect_string
    print("embedded ZooKeeper stopped")


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-demo-{os.getpid()}"
        async with (
            aiocoord.connect(hosts, namespace=namespace) as client,
            aiocoord.connect(hosts, namespace=namespace) as other,
        ):
            client.add_listener(lambda state: print(f"  [state] {state.name}"))
            print(
                f"connected: session 0x{client.session_id:x}, "
                f"timeout {client.session_timeout:g} s, namespace {namespace}"
            )

            await client.create("/config", b"v1")
            data, _stat, watch = await client.watch_data("/config")
            print(f"read /config = {data!r} and set a watch on it")
            await other.set("/config", b"v2")
            event = await watch
            print(
                f"watch fired: {event.type.name} {event.path}; "
                f"now {(await client.get('/config'))[0]!r}"
            )

            await client.create("/alive", ephemeral=True)
            print("created ephemeral /alive; dropping the client's connection...")
            session = client.session_id
            drop_connection(client)
            await client.wait_connected(timeout=10)
            print(
                f"same session after reconnect: {client.session_id == session}; "
                f"/alive exists: {await client.exists('/alive') is not None}"
            )

            print("expiring the session on the server...")
            # The server drops the connection at once; the client may reconnect
            # (RECONNECTED) before the session is gone, and be dropped again.
            await expire_session(client)
            print(
                f"new session 0x{client.session_id:x}; "
                f"/alive exists: {await client.exists('/alive') is not None}"
            )

            await other.delete_recursive("/config")
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)
    print("done")


if __name__ == "__main__":
    asyncio.run(main())
