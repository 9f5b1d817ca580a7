"""Curator and aiocoord on the same znodes: they must exclude and count together.

The Java side is tests/interop/CuratorHarness.java (see _curator.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
from asyncio.subprocess import Process
from typing import Any

import pytest
from _curator import finish, read_line, start_curator, together

import aiocoord
from aiocoord import Mutex, NodeExistsError

pytestmark = pytest.mark.timeout(180)


async def test_the_curator_version_asked_for_is_the_one_run(curator_classpath: str) -> None:
    """``CURATOR_VERSION=5.7`` must run Curator 5.7.1 on ZooKeeper's 3.9 client, not the
    system's 5.4 that the Debian 13 jars' manifests also name."""
    java = shutil.which("java")
    assert java is not None
    proc = await asyncio.create_subprocess_exec(
        java, "-cp", curator_classpath, "CuratorHarness", "versions", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    lines = dict(line.split(" ", 1) for line in out.decode().splitlines())
    wanted = os.environ.get("CURATOR_VERSION")
    if wanted:
        assert f"curator-recipes-{wanted}" in lines["curator"], lines
        assert f"curator-framework-{wanted}" in lines["framework"], lines
    if wanted and wanted.startswith("5.7"):
        assert lines["zookeeper"].startswith("3.9"), lines


async def curator_mutex_loop(classpath: str, zookeeper: Any, iterations: int) -> Process:
    """A Curator process that takes InterProcessMutex ``/lock`` ``iterations`` times,
    each time creating ``/inside`` (which must not exist) and adding 1 to ``/counter``."""
    ns = zookeeper.namespace
    return await start_curator(
        classpath,
        "CuratorHarness",
        "mutex",
        zookeeper.connect_string,
        f"{ns}/lock",
        f"{ns}/inside",
        f"{ns}/counter",
        str(iterations),
    )


async def test_curator_and_aiocoord_exclude_each_other_on_one_mutex(
    curator_classpath: str, zookeeper, client_factory, children_of
) -> None:
    clients = [client_factory() for _ in range(2)]
    await asyncio.gather(*(c.start() for c in clients))
    await clients[0].create("/counter", struct.pack(">q", 0))
    iterations = 40
    javas = [await curator_mutex_loop(curator_classpath, zookeeper, iterations) for _ in range(2)]

    async def python_side(client: aiocoord.Client) -> None:
        lock = Mutex(client, "/lock")
        for _ in range(iterations):
            async with lock:
                try:
                    await client.create("/inside", ephemeral=True)
                except NodeExistsError:
                    pytest.fail("a Curator holder was inside while aiocoord held the lock")
                data, _stat = await client.get("/counter")
                await asyncio.sleep(0.001)
                await client.set("/counter", struct.pack(">q", struct.unpack(">q", data)[0] + 1))
                await client.delete("/inside")

    await together(*(python_side(c) for c in clients), *(finish(j) for j in javas))
    data, _ = await clients[0].get("/counter")
    # Every increment was a read-modify-write under the lock: none was lost.
    assert struct.unpack(">q", data)[0] == 4 * iterations
    assert await children_of(clients[0], "/lock") == []


async def test_curator_processes_are_served_between_aiocoord_local_hand_offs(
    curator_classpath: str, zookeeper, client_factory, children_of
) -> None:
    """Tasks passing one Mutex(local_handoff=3) among themselves still exclude Curator's
    InterProcessMutex, and Curator's processes get their turns (they all finish)."""
    client = client_factory()
    await client.start()
    await client.create("/counter", struct.pack(">q", 0))
    iterations = 30
    javas = [await curator_mutex_loop(curator_classpath, zookeeper, iterations) for _ in range(2)]
    lock = Mutex(client, "/lock", local_handoff=3)
    tokens: list[int] = []

    async def python_task() -> None:
        for _ in range(iterations):
            async with lock:
                try:
                    await client.create("/inside", ephemeral=True)
                except NodeExistsError:
                    pytest.fail("a Curator holder was inside while aiocoord held the lock")
                tokens.append(lock.fencing_token)
                data, _stat = await client.get("/counter")
                await client.set("/counter", struct.pack(">q", struct.unpack(">q", data)[0] + 1))
                await client.delete("/inside")

    await together(*(python_task() for _ in range(4)), *(finish(j) for j in javas))
    data, _ = await client.get("/counter")
    assert struct.unpack(">q", data)[0] == 6 * iterations
    assert tokens == sorted(set(tokens))
    assert await children_of(client, "/lock") == []


async def test_curator_and_aiocoord_count_together_exactly(
    curator_classpath: str, zookeeper, client_factory
) -> None:
    ns = zookeeper.namespace
    clients = [client_factory() for _ in range(2)]
    await asyncio.gather(*(c.start() for c in clients))
    iterations = 300
    javas = [
        await start_curator(
            curator_classpath,
            "CuratorHarness",
            "counter",
            zookeeper.connect_string,
            f"{ns}/count",
            str(iterations),
        )
        for _ in range(2)
    ]
    python_ok = 0

    async def python_side(client: aiocoord.Client) -> None:
        nonlocal python_ok
        counter = aiocoord.AtomicLong(client, "/count", retry=aiocoord.RetryNTimes(10_000, 0.001))
        for _ in range(iterations // 3):
            if (await counter.increment()).succeeded:
                python_ok += 1

    outputs = await together(
        *(finish(j) for j in javas), *(python_side(c) for c in clients for _ in range(3))
    )
    java_ok = sum(int(out.split("DONE ")[1].split()[0]) for out in outputs[:2])
    final = (await aiocoord.AtomicLong(clients[0], "/count").get()).post_value
    assert java_ok + python_ok == final
    assert python_ok == 2 * 3 * (iterations // 3)  # our retry budget was never exhausted


async def test_curator_writers_and_aiocoord_readers_and_writers_share_one_rw_lock(
    curator_classpath: str, zookeeper, client_factory
) -> None:
    ns = zookeeper.namespace
    clients = [client_factory() for _ in range(2)]
    await asyncio.gather(*(c.start() for c in clients))
    javas = [
        await start_curator(
            curator_classpath,
            "CuratorHarness",
            "writer",
            zookeeper.connect_string,
            f"{ns}/rw",
            f"{ns}/inside",
            "30",
        )
        for _ in range(2)
    ]
    reads = 0

    async def reader(client: aiocoord.Client) -> None:
        nonlocal reads
        lock = aiocoord.ReadWriteLock(client, "/rw").read_lock
        for _ in range(30):
            async with lock:
                assert await client.exists("/inside") is None, "a writer is inside"
                reads += 1

    async def writer(client: aiocoord.Client) -> None:
        lock = aiocoord.ReadWriteLock(client, "/rw").write_lock
        for _ in range(20):
            async with lock:
                await client.create("/inside", ephemeral=True)  # NodeExists: a Java writer
                await client.delete("/inside")

    await together(*(finish(j) for j in javas), *(reader(c) for c in clients), writer(clients[0]))
    assert reads == 60


async def test_curator_and_aiocoord_share_one_semaphore(
    curator_classpath: str, zookeeper, client_factory
) -> None:
    ns = zookeeper.namespace
    clients = [client_factory() for _ in range(2)]
    await asyncio.gather(*(c.start() for c in clients))
    await clients[0].ensure_path("/inside")
    javas = [
        await start_curator(
            curator_classpath,
            "CuratorHarness",
            "lease",
            zookeeper.connect_string,
            f"{ns}/sem",
            "2",
            f"{ns}/inside",
            "25",
        )
        for _ in range(2)
    ]

    async def python_side(client: aiocoord.Client) -> None:
        semaphore = aiocoord.Semaphore(client, "/sem", 2)
        for _ in range(25):
            async with semaphore:
                mine = await client.create("/inside/py-", ephemeral=True, sequential=True)
                assert len(await client.children("/inside")) <= 2, "more holders than leases"
                await client.delete(mine)

    await together(*(finish(j) for j in javas), *(python_side(c) for c in clients))


async def test_aiocoord_asks_a_curator_holder_to_let_go_and_then_holds(
    curator_classpath: str, zookeeper, client_factory
) -> None:
    client = client_factory()
    await client.start()
    java = await start_curator(
        curator_classpath,
        "CuratorHarness",
        "revocable-holder",
        zookeeper.connect_string,
        f"{zookeeper.namespace}/lock",
    )
    try:
        assert await read_line(java) == "HELD"
        lock = Mutex(client, "/lock")
        (holder,) = await lock.participants()
        assert await lock.request_revocation(holder) is True
        assert await read_line(java) == "REVOKED"  # Curator's listener heard it
        async with lock:  # served once the Curator holder let go
            assert lock.is_held
    finally:
        assert "DONE 1" in await finish(java)


async def test_curator_revoker_reaches_an_aiocoord_holder(
    curator_classpath: str, zookeeper, client_factory
) -> None:
    client = client_factory()
    await client.start()
    lock = Mutex(client, "/lock", revocable=True)
    async with lock:
        java = await start_curator(
            curator_classpath,
            "CuratorHarness",
            "revoke",
            zookeeper.connect_string,
            f"{zookeeper.namespace}{lock.node}",
        )
        try:
            await lock.wait_revoked()
        finally:
            assert "DONE 1" in await finish(java)
        assert lock.revoke_requested
