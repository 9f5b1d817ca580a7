"""Mutex and ReadWriteLock against a real server: exclusion, order, reentrancy,
cancellation, fencing, loss."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from _exclusion import Exclusion
from _waiting import acquiring, written

import aiocoord
from aiocoord import (
    ConnectionState,
    DeadlockError,
    LockLostError,
    Mutex,
    NotOwnerError,
    ReadWriteLock,
    SessionErrorPolicy,
)
from aiocoord.testing import TcpProxy, ZooKeeperServer, drop_connection, expire_session

pytestmark = pytest.mark.timeout(120)


async def take_and_release(lock: Mutex) -> int:
    """Acquire and release in one task (locks belong to tasks); return the fencing token."""
    async with lock:
        return lock.fencing_token


async def test_mutual_exclusion_across_clients_and_tasks(started, children_of) -> None:
    clients = await started(4)
    exclusion = Exclusion()

    async def worker(client: aiocoord.Client) -> None:
        lock = Mutex(client, "/lock")
        for _ in range(5):
            async with lock:
                with exclusion.hold(client):
                    await asyncio.sleep(0)  # let anyone who wrongly thinks they hold it in
                    await asyncio.sleep(0)

    await asyncio.gather(*(worker(c) for c in clients for _ in range(3)))
    exclusion.assert_kept(entries=4 * 3 * 5)
    assert await children_of(clients[0], "/lock") == []


async def test_waiters_are_served_in_the_order_they_queued(started, children_reach) -> None:
    clients = await started(5)
    holder = Mutex(clients[0], "/fifo")
    await holder.acquire()
    order: list[int] = []

    async def wait_turn(i: int) -> None:
        lock = Mutex(clients[i], "/fifo")
        async with lock:
            order.append(i)

    tasks = []
    for i in (3, 1, 4, 2):
        tasks.append(asyncio.create_task(wait_turn(i)))
        # Queue them one by one: wait until this one's node is there.
        await children_reach(clients[0], "/fifo", len(tasks) + 1)
    await holder.release()
    await asyncio.gather(*tasks)
    assert order == [3, 1, 4, 2]


async def test_reentrant_for_the_owning_task_only(coord: aiocoord.Client) -> None:
    lock = Mutex(coord, "/re")
    assert await lock.acquire()
    assert await lock.acquire()
    assert lock.hold_count == 2 and lock.is_held and lock.is_owned_by_current_task()
    node = lock.node

    async def other_task() -> tuple[bool, bool]:
        # Same process, same object, another task: it must wait like anyone.
        return lock.is_owned_by_current_task(), await lock.acquire(timeout=0.2)

    owned, got = await asyncio.create_task(other_task())
    assert not owned and not got
    await lock.release()
    assert lock.is_held and lock.node == node
    assert len(await lock.participants()) == 1
    await lock.release()
    assert not lock.is_held
    assert await lock.participants() == []


async def test_release_by_a_task_that_does_not_hold_it_is_refused(coord: aiocoord.Client) -> None:
    lock = Mutex(coord, "/owner")
    with pytest.raises(NotOwnerError):
        await lock.release()
    await lock.acquire()

    async def intruder() -> None:
        await lock.release()

    with pytest.raises(NotOwnerError, match="/owner"):
        await asyncio.create_task(intruder())
    assert lock.is_held
    await lock.release()


async def test_timeout_returns_false_and_leaves_no_node(started) -> None:
    a, b = await started(2)
    held = Mutex(a, "/t")
    await held.acquire()
    assert not await Mutex(b, "/t").acquire(timeout=0.1)
    assert [p.node for p in await held.participants()] == [held.node]
    await held.release()


async def test_cancellation_at_every_await_point_leaves_no_node(started, children_of) -> None:
    a, b = await started(2)
    held = Mutex(a, "/cancel")
    await held.acquire()
    # Cancel the waiter after 0, 1, 2, ... loop iterations: this lands the
    # cancellation on each await of the acquire path in turn (before the
    # create is sent, while it is in flight, while listing, while watching).
    for steps in range(12):
        waiter = acquiring(Mutex(b, "/cancel"))
        for _ in range(steps):
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert [p.node for p in await held.participants()] == [held.node], steps
    await held.release()
    assert await children_of(a, "/cancel") == []


async def test_enclosing_deadline_is_honoured(started) -> None:
    a, b = await started(2)
    held = Mutex(a, "/deadline")
    await held.acquire()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await Mutex(b, "/deadline").acquire()
    assert len(await held.participants()) == 1
    await held.release()


async def test_fencing_tokens_strictly_increase(started) -> None:
    clients = await started(3)
    tokens: list[int] = []
    for round_ in range(3):
        for client in clients:
            lock = Mutex(client, "/fence")
            async with lock:
                tokens.append(lock.fencing_token)
        if round_ == 1:
            # Even when the (container) lock path is recreated, tokens keep growing.
            await clients[0].delete_recursive("/fence")
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


async def test_fenced_transaction_applies_only_while_held(coord: aiocoord.Client) -> None:
    await coord.create("/resource", b"0")
    lock = Mutex(coord, "/fenced")
    async with lock:
        results = await lock.transaction().set("/resource", b"1").commit()
        assert isinstance(results[0], aiocoord.Stat)
        txn = lock.transaction().set("/resource", b"2")
        await coord.delete(lock.node)  # someone took the lock away
        with pytest.raises(LockLostError):
            await txn.commit()
    assert (await coord.get("/resource"))[0] == b"1"


async def test_participants_lists_contenders_in_order_with_their_data(
    started, children_reach
) -> None:
    a, b = await started(2)
    first = Mutex(a, "/who", data=b"first")
    await first.acquire()
    waiting = asyncio.create_task(take_and_release(Mutex(b, "/who", data=b"second")))
    await children_reach(a, "/who", 2)
    people = await first.participants()
    assert [(p.data, p.holds, p.id) for p in people] == [
        (b"first", True, None),
        (b"second", False, None),
    ]
    assert people[0].node == first.node
    await first.release()
    assert await waiting
    default = Mutex(a, "/who-default")
    async with default:
        assert (await default.participants())[0].data.endswith(b"%d" % __import__("os").getpid())


async def test_read_write_participants_hold_as_the_rules_say(started, children_reach) -> None:
    a, b = await started(2)
    readers = [ReadWriteLock(a, "/rw-who").read_lock for _ in range(2)]
    for reader in readers:
        await reader.acquire()  # each its own object: both hold at once
    writer = asyncio.create_task(take_and_release(ReadWriteLock(b, "/rw-who").write_lock))
    await children_reach(a, "/rw-who", 3)
    late = asyncio.create_task(take_and_release(ReadWriteLock(b, "/rw-who").read_lock))
    await children_reach(a, "/rw-who", 4)
    lock = ReadWriteLock(a, "/rw-who")
    assert [p.holds for p in await lock.participants()] == [True, True, False, False]
    for reader in readers:
        await reader.release()
    assert await writer and await late


async def test_expired_holder_is_told_and_the_next_waiter_gets_the_lock(
    started,
) -> None:
    a, b = await started(2)
    holder = Mutex(a, "/expire")
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    async def hold_forever() -> None:
        async with holder.hold(cancel_on_loss=True):
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    body = asyncio.create_task(hold_forever())
    await entered.wait()
    waiter = Mutex(b, "/expire")

    next_up = asyncio.create_task(take_and_release(waiter))
    await expire_session(a)
    with pytest.raises(LockLostError):
        await body
    assert cancelled.is_set() and not holder.is_held
    assert await asyncio.wait_for(next_up, 10) > 0


async def test_plain_async_with_raises_lock_lost_on_exit(coord: aiocoord.Client) -> None:
    lock = Mutex(coord, "/lost-exit")
    with pytest.raises(LockLostError):
        async with lock:
            await expire_session(coord)
            assert not lock.is_held
    assert not lock.is_held


async def test_wait_lost_completes_on_suspension_under_the_standard_policy(
    private_zookeeper: ZooKeeperServer, children_of
) -> None:
    async with aiocoord.connect(private_zookeeper.connect_string) as client:
        lock = Mutex(client, "/std")
        await lock.acquire()
        lost = asyncio.create_task(lock.wait_lost())
        drop_connection(client)
        await asyncio.wait_for(lost, 5)
        assert not lock.is_held
        await client.wait_connected(timeout=5)
        await lock.release()  # deletes the node once the session is back
        assert await children_of(client, "/std") == []


async def test_holder_rides_out_a_server_restart_under_the_session_policy(
    private_zookeeper: ZooKeeperServer, state_log, children_reach
) -> None:
    async with (
        aiocoord.connect(
            private_zookeeper.connect_string, error_policy=SessionErrorPolicy()
        ) as holder_client,
        aiocoord.connect(private_zookeeper.connect_string) as waiter_client,
    ):
        log = state_log(holder_client)
        lock = Mutex(holder_client, "/restart")
        await lock.acquire()
        waiter = Mutex(waiter_client, "/restart")
        queued = asyncio.create_task(take_and_release(waiter))
        await children_reach(holder_client, "/restart", 2)
        await private_zookeeper.stop()
        await log.wait_for(ConnectionState.SUSPENDED)
        await private_zookeeper.start()
        await log.wait_for(ConnectionState.RECONNECTED)
        assert lock.is_held and not queued.done()
        await lock.release()
        assert await asyncio.wait_for(queued, 10) > 0  # the waiter's watch survived the restart


async def test_read_write_lock_shares_reads_and_excludes_writes(
    started,
) -> None:
    clients = await started(4)
    exclusion = Exclusion()
    shared = asyncio.Event()

    async def reader(client: aiocoord.Client) -> None:
        lock = ReadWriteLock(client, "/rw").read_lock
        for i in range(4):
            async with lock:
                with exclusion.hold(client, shared=True):
                    if i == 0:
                        await shared.wait()  # the first reads meet, before any writer queues
                    await asyncio.sleep(0.005)  # time for a wrongly admitted writer to come in

    async def writer(client: aiocoord.Client) -> None:
        lock = ReadWriteLock(client, "/rw").write_lock
        for _ in range(4):
            async with lock:
                with exclusion.hold(client):
                    await asyncio.sleep(0.002)

    readers = [asyncio.create_task(reader(c)) for c in clients for _ in range(2)]
    await exclusion.wait_inside(2)  # reads really are shared
    shared.set()
    await asyncio.gather(*readers, writer(clients[0]), writer(clients[1]))
    exclusion.assert_kept(entries=8 * 4 + 2 * 4)


async def test_waiting_writer_holds_back_later_readers(started, children_reach) -> None:
    a, b, c = await started(3)
    first_reader = ReadWriteLock(a, "/fair").read_lock
    await first_reader.acquire()
    writer = ReadWriteLock(b, "/fair").write_lock

    async def write() -> None:
        async with writer:
            pass

    writer_task = asyncio.create_task(write())
    rw_c = ReadWriteLock(c, "/fair")
    await children_reach(c, "/fair", 2)
    # A reader arriving after the waiting writer must not jump ahead of it.
    assert not await rw_c.read_lock.acquire(timeout=0.2)
    await first_reader.release()
    await asyncio.wait_for(writer_task, 5)


async def test_writer_may_downgrade_but_not_upgrade(coord: aiocoord.Client, children_of) -> None:
    rw = ReadWriteLock(coord, "/grade")
    await rw.write_lock.acquire()
    assert await rw.read_lock.acquire(timeout=1)  # writer may read
    await rw.write_lock.release()  # downgraded: now only a reader
    assert rw.read_lock.is_held and not rw.write_lock.is_held
    with pytest.raises(DeadlockError):
        await rw.write_lock.acquire()
    await rw.read_lock.release()
    assert await children_of(coord, "/grade") == []


async def test_a_waiter_whose_create_reply_was_lost_leaves_no_orphan(
    private_zookeeper: ZooKeeperServer, state_log, children_of, children_reach
) -> None:
    async with (
        aiocoord.connect(private_zookeeper.connect_string) as holder_client,
        aiocoord.connect(private_zookeeper.connect_string) as waiter_client,
    ):
        log = state_log(waiter_client)
        holder = Mutex(holder_client, "/orphan")
        await holder.acquire()
        private_zookeeper.pause()
        try:
            waiter = asyncio.create_task(take_and_release(Mutex(waiter_client, "/orphan")))
            await written(waiter_client)  # its create (and listing) left
            drop_connection(waiter_client)  # the replies are lost with the connection
        finally:
            private_zookeeper.resume()
        await log.wait_for(ConnectionState.RECONNECTED)
        await children_reach(holder_client, "/orphan", 2)
        await holder.release()
        assert await asyncio.wait_for(waiter, 20) > 0
        # Whether the lost create was found or made again, nothing is left.
        assert await children_of(holder_client, "/orphan") == []


async def test_release_survives_a_dropped_connection(
    private_zookeeper: ZooKeeperServer, children_of
) -> None:
    async with aiocoord.connect(
        private_zookeeper.connect_string, error_policy=SessionErrorPolicy()
    ) as client:
        lock = Mutex(client, "/release")
        await lock.acquire()

        async def cut_the_connection() -> None:
            try:
                await written(client)  # the delete is in flight
                drop_connection(client)  # ...and its reply is lost
            finally:
                private_zookeeper.resume()

        private_zookeeper.pause()
        saboteur = asyncio.create_task(cut_the_connection())
        async with asyncio.timeout(20):
            await lock.release()  # the owning task releases; it must ride out the cut
        await saboteur
        assert not lock.is_held
        assert await children_of(client, "/release") == []


async def test_anyio_deadlines_are_honoured(started) -> None:
    a, b = await started(2)
    held = Mutex(a, "/anyio")
    await held.acquire()
    with anyio.move_on_after(0.2) as scope:
        await Mutex(b, "/anyio").acquire()
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.2):
            await Mutex(b, "/anyio").acquire()
    assert len(await held.participants()) == 1
    await held.release()


async def test_a_task_that_ends_holding_a_lock_after_its_client_closed_is_no_error(
    client_factory,
) -> None:
    """The node went with the session: nothing to release, nothing to log."""
    client = client_factory()
    await client.start()
    lock = Mutex(client, "/closed-orphan")
    holding, finish = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        await lock.acquire()
        holding.set()
        await finish.wait()

    task = asyncio.create_task(hold())
    await holding.wait()
    await client.aclose()
    finish.set()
    await task
    await asyncio.sleep(0)  # the task's done callbacks run
    assert not lock.is_held


async def test_a_release_outlives_more_cancellations_while_zookeeper_is_away(
    zookeeper, started, children_of, state_log
) -> None:
    """A TaskGroup, a timeout and a second Ctrl-C can each cancel a task that is
    already releasing. The delete must still go out once ZooKeeper is back: else the
    dead holder's node blocks every other contender for as long as its session lives."""
    host, port = zookeeper.connect_string.rsplit(":", 1)
    (other,) = await started(1)
    async with TcpProxy(host, int(port)) as proxy:
        client = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)
        async with client:
            log = state_log(client)
            held = asyncio.Event()
            deleting = asyncio.Event()
            real_delete = client.delete

            async def delete(path: str, **kwargs: object) -> None:
                deleting.set()
                await real_delete(path, **kwargs)  # type: ignore[arg-type]

            client.delete = delete  # type: ignore[method-assign]

            async def hold() -> None:
                async with Mutex(client, "/twice"):
                    held.set()
                    await asyncio.Event().wait()

            holder = asyncio.create_task(hold())
            await held.wait()
            proxy.refuse()
            proxy.cut()
            await log.wait_for(ConnectionState.SUSPENDED)
            holder.cancel()  # the block ends; the release's delete waits for ZooKeeper
            await deleting.wait()
            for _ in range(2):  # and more cancellations, however they interleave
                holder.cancel()
                for _ in range(3):
                    await asyncio.sleep(0)
            proxy.refuse(False)
            with pytest.raises(asyncio.CancelledError):
                await holder
            assert await children_of(other, "/twice") == []
            again = Mutex(other, "/twice")
            with anyio.fail_after(5):
                assert await again.acquire()
            await again.release()


async def test_a_release_cancelled_with_its_delete_in_flight_still_frees_the_lock(
    zookeeper, started, children_of
) -> None:
    """A connected release sends its delete from the releasing task itself (#30):
    cancelled (more than once) while that delete is out, it still ends with the
    node gone, then raises CancelledError; the next contender gets the lock."""
    host, port = zookeeper.connect_string.rsplit(":", 1)
    (other,) = await started(1)
    async with TcpProxy(host, int(port)) as proxy:
        client = aiocoord.connect(proxy.connect_string, namespace=zookeeper.namespace)
        async with client:
            lock = Mutex(client, "/in-flight")
            held, leave = asyncio.Event(), asyncio.Event()

            async def hold() -> None:
                async with lock:
                    held.set()
                    await leave.wait()

            holder = asyncio.create_task(hold())
            await held.wait()
            proxy.hold()
            leave.set()
            await written(client)  # the delete is out, its reply held back
            for _ in range(2):
                holder.cancel()
                for _ in range(3):
                    await asyncio.sleep(0)
            assert not holder.done()  # still finishing the delete
            proxy.release()
            with pytest.raises(asyncio.CancelledError):
                await holder
            assert not lock.is_held
            assert await children_of(other, "/in-flight") == []
            again = Mutex(other, "/in-flight")
            with anyio.fail_after(5):
                assert await again.acquire()
            await again.release()
