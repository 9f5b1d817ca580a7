"""OwnNode's delete outlasts its bound: if ZooKeeper cannot be reached in time, the
node is deleted in the background once it can (Curator's guaranteed delete).

A server that applied our create and then went away lets our session reconnect
when it is back, so an ephemeral node would stand again, and a persistent one
always would. No server here: a stand-in client that is unreachable until told.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiocoord._exceptions import NoConnectionError
from aiocoord._session import OwnNode, RetryNTimes
from aiocoord._types import Stat

SESSION = 0x51


def stat(owner: int) -> Stat:
    return Stat(1, 1, 0, 0, 0, 0, 0, owner, 0, 0, 1)


class Unreachable:
    """Enough of a client for OwnNode.delete: unreachable until ``back`` is set."""

    session_timeout = 0.01
    retry_policy = RetryNTimes(0, 0.0)

    def __init__(self) -> None:
        self.session_id = SESSION
        self.back = asyncio.Event()
        self.deleted: list[str] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        if not self.back.is_set():
            raise NoConnectionError(0.01)
        self.deleted.append(path)

    async def wait_connected(self, *, timeout: float | None = None) -> bool:
        await self.back.wait()
        return True

    def start_background(self, coro: Any, *, name: str, on_error: Any = None) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.append(task)
        return task


def made(client: Unreachable, *, ephemeral: bool) -> OwnNode:
    own = OwnNode(client, "/p", "lock-", ephemeral=ephemeral)  # type: ignore[arg-type]
    own.path, own.stat = "/p/node", stat(SESSION if ephemeral else 0)
    return own


async def test_a_delete_that_could_not_reach_zookeeper_is_finished_once_it_can() -> None:
    client = Unreachable()
    await made(client, ephemeral=True).delete()  # returns: the bound is for the caller
    assert client.deleted == [] and len(client.tasks) == 1
    client.back.set()  # the same session comes back, our node with it
    await asyncio.wait_for(client.tasks[0], 5)
    assert client.deleted == ["/p/node"]


async def test_an_ephemeral_node_whose_session_ended_is_left_to_the_server() -> None:
    client = Unreachable()
    await made(client, ephemeral=True).delete()
    client.session_id = SESSION + 1  # back in a new session: the node went with the old one
    client.back.set()
    await asyncio.wait_for(client.tasks[0], 5)
    assert client.deleted == []


async def test_a_persistent_node_is_deleted_in_any_session() -> None:
    client = Unreachable()
    await made(client, ephemeral=False).delete()
    client.session_id = SESSION + 1
    client.back.set()
    await asyncio.wait_for(client.tasks[0], 5)
    assert client.deleted == ["/p/node"]


async def test_a_delete_that_succeeds_leaves_nothing_running() -> None:
    client = Unreachable()
    client.back.set()
    await made(client, ephemeral=True).delete()
    assert client.deleted == ["/p/node"] and client.tasks == []
