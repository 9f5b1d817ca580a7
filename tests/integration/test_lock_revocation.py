"""Revocable locks (Curator's makeRevocable / Revoker): asking a holder to let go."""

from __future__ import annotations

import asyncio

import pytest

from aiocoord import (
    ArgumentTypeError,
    Client,
    InvalidArgumentError,
    InvalidPathError,
    Mutex,
    NotOwnerError,
    ReadWriteLock,
)
from aiocoord.testing import expire_session

pytestmark = pytest.mark.timeout(60)


class HeldElsewhere:
    """A task that takes ``lock``, reports it, and holds it until told to let go."""

    def __init__(self, lock: Mutex) -> None:
        self.lock = lock
        self.granted = asyncio.Event()
        self.let_go = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with self.lock:
            self.granted.set()
            await self.let_go.wait()

    async def finish(self) -> None:
        self.let_go.set()
        await self.task


async def queued(client: Client, lock: Mutex, count: int) -> list[str]:
    """The lock's queue, in order, once ``count`` contenders are in it (awaited on
    a watch; nobody leaves the queue meanwhile in these tests)."""
    changes = client.children_changes(lock.path)
    try:
        async for names in changes:
            if names is not None and len(names) >= count:
                break
    finally:
        await changes.aclose()
    return [participant.node for participant in await lock.participants()]


async def test_a_holder_hears_the_request_and_the_lock_passes_on_when_it_lets_go(started) -> None:
    a, b = await started(2)
    lock = Mutex(a, "/lock", revocable=True)
    other = Mutex(b, "/lock")
    await lock.acquire()
    assert not lock.revoke_requested
    assert await lock.wait_revoked(timeout=0) is False  # nobody asked yet
    waiting = HeldElsewhere(other)
    queue = await queued(b, other, 2)

    assert await other.request_revocation(queue[0]) is True
    assert await lock.wait_revoked(timeout=10) is True
    assert lock.revoke_requested
    assert lock.is_held  # a request, not a loss: letting go is the holder's call
    assert not waiting.granted.is_set()

    await lock.release()
    await waiting.granted.wait()
    assert not lock.revoke_requested  # the hold it was addressed to is over
    await waiting.finish()


async def test_a_request_made_while_queued_is_heard_on_taking_the_lock(started) -> None:
    a, b = await started(2)
    holder = Mutex(a, "/lock", revocable=True)
    waiter = Mutex(b, "/lock", revocable=True)
    await holder.acquire()
    granted = asyncio.Event()
    release = asyncio.Event()

    async def wait_then_hold() -> bool:
        async with waiter:
            granted.set()
            requested = waiter.revoke_requested  # acquire looked before returning
            await waiter.wait_revoked()  # so this returns at once
            await release.wait()
            return requested

    task = asyncio.create_task(wait_then_hold())
    queue = await queued(a, holder, 2)
    assert await holder.request_revocation(queue[1]) is True

    await holder.release()
    await granted.wait()
    release.set()
    assert await task is True
    assert not holder.revoke_requested


async def first_asked_back_then_second(client: Client, lock: Mutex, nodes: int) -> bool:
    """Two tasks share ``lock``: the first holds it until asked back (its node is
    the first of ``nodes`` in the queue), then the second takes it. Returns
    whether the second, on taking it, found a request addressed to it too."""
    first_holds = asyncio.Event()

    async def first() -> None:
        async with lock:
            first_holds.set()
            await lock.wait_revoked()

    async def second() -> bool:
        await first_holds.wait()
        async with lock:
            return lock.revoke_requested

    both = asyncio.gather(first(), second())
    await first_holds.wait()
    queue = await queued(client, lock, nodes)
    assert await lock.request_revocation(queue[0]) is True
    _first, heard = await both
    return heard


async def test_tasks_sharing_a_lock_object_hear_only_their_own_requests(started) -> None:
    (client,) = await started(1)
    lock = Mutex(client, "/lock", revocable=True)
    assert await first_asked_back_then_second(client, lock, 2) is False


async def test_a_read_write_lock_side_can_be_revoked(started) -> None:
    a, b = await started(2)
    rw = ReadWriteLock(a, "/rw", revocable=True)
    writer = ReadWriteLock(b, "/rw").write_lock
    await rw.read_lock.acquire()
    waiting = HeldElsewhere(writer)
    queue = await queued(b, writer, 2)
    assert await writer.request_revocation(queue[0]) is True
    await rw.read_lock.wait_revoked()
    await rw.read_lock.release()
    await waiting.granted.wait()
    await waiting.finish()


async def test_revocation_is_refused_where_it_cannot_apply(started) -> None:
    (client,) = await started(1)
    plain = Mutex(client, "/lock")
    revocable = Mutex(client, "/lock2", revocable=True)
    with pytest.raises(NotOwnerError):
        await revocable.wait_revoked()
    assert not revocable.revoke_requested
    async with plain:
        with pytest.raises(InvalidArgumentError, match="revocable"):
            await plain.wait_revoked()
        node = plain.node
    # Nothing is sent for a node of another lock or a malformed path.
    with pytest.raises(InvalidArgumentError, match="not a node of this lock"):
        await revocable.request_revocation(node)
    with pytest.raises(InvalidPathError):
        await plain.request_revocation("/lock/")
    with pytest.raises(ArgumentTypeError):
        await plain.request_revocation(42)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError):
        Mutex(client, "/lock", revocable="yes")  # type: ignore[arg-type]
    # A node that is gone: nothing to ask, and nothing is made.
    assert await plain.request_revocation(node) is False
    assert not await client.exists(node)


async def test_a_new_hold_after_a_session_expiry_hears_requests_again(started) -> None:
    a, b = await started(2)
    lock = Mutex(a, "/lock", revocable=True)
    other = Mutex(b, "/lock")
    await lock.acquire()
    old_node = lock.node
    await expire_session(a)
    assert not lock.is_held  # lost with its session; a request to it finds nothing
    assert await other.request_revocation(old_node) is False
    await lock.release()  # gives up the lost hold (its node went with the session)

    async with lock:
        (holder,) = await queued(b, other, 1)
        assert holder == lock.node != old_node
        assert await other.request_revocation(holder) is True
        await lock.wait_revoked()


async def test_with_local_handoff_every_hold_through_the_marked_node_hears_it(started) -> None:
    (client,) = await started(1)
    lock = Mutex(client, "/lock", revocable=True, local_handoff=4)
    # One node for both tasks: the second is granted on it with no server request.
    assert await first_asked_back_then_second(client, lock, 1) is True
