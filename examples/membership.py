"""Service discovery with GroupMember, on an embedded ZooKeeper (or AIOCOORD_ZK).

Three instances of an "api" service join the group ``/services/api``, one
client each (one per process, in real life), each publishing its address as
its member data. The first instance follows the group with ``changes()`` and
prints it as it grows, as an instance moves to a new address, as one leaves
cleanly, and as one crashes: its session ends, and its ephemeral node with it.
The group is also readable from Curator (``GroupMember.getCurrentMembers()``).

Run: python examples/membership.py

Expected output:

    api-1 sees: api-1=10.0.0.1:8080
    api-1 sees: api-1=10.0.0.1:8080 api-2=10.0.0.2:8080
    api-1 sees: api-1=10.0.0.1:8080 api-2=10.0.0.2:8080 api-3=10.0.0.3:8080
    api-1 sees: api-1=10.0.0.1:8080 api-2=10.0.0.2:9090 api-3=10.0.0.3:8080
    api-1 sees: api-1=10.0.0.1:8080 api-2=10.0.0.2:9090
    api-1 sees: api-1=10.0.0.1:8080
    api-3 left cleanly, then api-2 crashed: its node went with its session
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import aiocoord
from aiocoord import GroupMember
from aiocoord.testing import ZooKeeperServer

GROUP = "/services/api"


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


def show(members: list[aiocoord.Participant]) -> str:
    return " ".join(f"{member.id}={member.data.decode()}" for member in members)


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-membership-demo-{os.getpid()}"
        clients = [aiocoord.connect(hosts, namespace=namespace) for _ in range(3)]
        try:
            await asyncio.gather(*(c.start() for c in clients))
            api1 = GroupMember(clients[0], GROUP, participant_id="api-1", data=b"10.0.0.1:8080")
            api2 = GroupMember(clients[1], GROUP, participant_id="api-2", data=b"10.0.0.2:8080")
            api3 = GroupMember(clients[2], GROUP, participant_id="api-3", data=b"10.0.0.3:8080")
            await api1.start()
            async with contextlib.aclosing(api1.changes()) as changes:

                async def next_view() -> None:
                    # One change at a time, each seen before the next: so every
                    # step prints exactly one view (changes() coalesces bursts).
                    print(f"api-1 sees: {show(await anext(changes))}")

                await next_view()
                await api2.start()
                await next_view()
                await api3.start()
                await next_view()
                await api2.update(b"10.0.0.2:9090")  # moved: the group sees the new address
                await next_view()
                await api3.aclose()  # leaves cleanly: its node is deleted
                await next_view()
                await clients[1].aclose()  # api-2's process "crashes": its session ends
                await next_view()
            print("api-3 left cleanly, then api-2 crashed: its node went with its session")
            await api1.aclose()
        finally:
            for client in clients:
                await client.aclose()
        async with aiocoord.connect(hosts) as cleaner:
            await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
