"""The kit's waits (deadline, a node going away, re-reading after a reconnection),
on a fake client: what each answers, and when."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

import pytest

from aiocoord import ConnectionState, EventType, RetryNTimes, SessionExpiredError, Stat
from aiocoord._recipes._kit._waits import Deadline, Gone, Reconnects, wait_change, wait_gone
from aiocoord._types import WatchEvent

SESSION = 7


def stat(owner: int = SESSION) -> Stat:
    return Stat(1, 1, 0, 0, 0, 0, 0, owner, 0, 0, 1)


class FakeWatch:
    def __init__(self) -> None:
        self.future: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()
        self.cancelled = False

    def __await__(self) -> Generator[Any, None, WatchEvent]:
        return self.future.__await__()

    def cancel(self) -> None:
        self.cancelled = True

    async def __aenter__(self) -> FakeWatch:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.cancel()


class FakeClient:
    """Answers each watch_exists with the next Stat (or None) it was given."""

    retry_policy = RetryNTimes(0, 0)
    session_timeout = 0.05

    def __init__(self, *stats: Stat | None) -> None:
        self.session_id = SESSION
        self.stats = list(stats)
        self.watches: list[FakeWatch] = []
        self.armed = asyncio.Event()
        self.listeners: list[Callable[[ConnectionState], object]] = []

    async def watch_exists(self, path: str) -> tuple[Stat | None, FakeWatch]:
        watch = FakeWatch()
        self.watches.append(watch)
        self.armed.set()
        return self.stats.pop(0), watch

    async def next_watch(self) -> FakeWatch:
        await self.armed.wait()
        self.armed.clear()
        return self.watches[-1]

    def add_listener(self, callback: Callable[[ConnectionState], object]) -> None:
        self.listeners.append(callback)

    def remove_listener(self, callback: Callable[[ConnectionState], object]) -> None:
        if callback in self.listeners:
            self.listeners.remove(callback)

    def tell(self, state: ConnectionState) -> None:
        for callback in list(self.listeners):
            callback(state)


def event(kind: EventType) -> WatchEvent:
    return WatchEvent(kind, "/n")


async def test_a_deadline_counts_down_and_the_first_look_gets_a_session_timeout() -> None:
    never = Deadline(None)
    assert never.remaining() is None and never.first_look(FakeClient()) is None  # type: ignore[arg-type]
    assert not never.passed
    now = Deadline(0)
    assert now.passed and now.remaining() == 0.0
    assert now.first_look(FakeClient()) == FakeClient.session_timeout  # type: ignore[arg-type]
    later = Deadline(60)
    remaining = later.remaining()
    assert not later.passed and remaining is not None and 59 < remaining <= 60
    assert Deadline(-1).passed  # a negative timeout is "now", never an error here


async def test_wait_change_answers_at_once_for_a_node_already_gone_or_as_good_as_gone() -> None:
    client: Any = FakeClient(None, stat(owner=0), stat())
    assert await wait_change(client, "/n") is Gone.DELETED
    assert await wait_change(client, "/n", gone_if=lambda s: s.ephemeral_owner == 0) is Gone.DELETED
    client.session_id = SESSION + 1
    assert await wait_change(client, "/n", session=SESSION) is Gone.SESSION_ENDED
    assert all(watch.cancelled for watch in client.watches)


@pytest.mark.parametrize(
    ("kind", "gone"), [(EventType.DELETED, Gone.DELETED), (EventType.CHANGED, None)]
)
async def test_wait_change_waits_for_one_event(kind: EventType, gone: Gone | None) -> None:
    client: Any = FakeClient(stat())
    waiting = asyncio.create_task(wait_change(client, "/n"))
    (await client.next_watch()).future.set_result(event(kind))
    assert await waiting is gone


async def test_wait_gone_waits_through_changes_until_the_node_goes() -> None:
    client: Any = FakeClient(stat(), stat())
    waiting = asyncio.create_task(wait_gone(client, "/n"))
    (await client.next_watch()).future.set_result(event(EventType.CHANGED))
    (await client.next_watch()).future.set_result(event(EventType.DELETED))
    assert await waiting is Gone.DELETED
    assert len(client.watches) == 2


async def test_wait_gone_ends_with_its_session_or_looks_again_without_one() -> None:
    client: Any = FakeClient(stat(), stat(), None)
    mine = asyncio.create_task(wait_gone(client, "/n", session=SESSION))
    (await client.next_watch()).future.set_exception(SessionExpiredError())
    assert await mine is Gone.SESSION_EXPIRED
    theirs = asyncio.create_task(wait_gone(client, "/n"))
    (await client.next_watch()).future.set_exception(SessionExpiredError())
    assert await theirs is Gone.DELETED  # looked again in the new session: gone


async def test_wait_gone_gives_up_at_its_deadline() -> None:
    client: Any = FakeClient(stat())
    assert await wait_gone(client, "/n", deadline=Deadline(0)) is None
    assert client.watches[0].cancelled


async def test_reconnects_calls_back_once_per_reconnection_after_a_disconnection() -> None:
    client = FakeClient()
    calls: list[str] = []
    reconnects = Reconnects(
        client,  # type: ignore[arg-type]
        lambda: calls.append("reread"),
        on_lost=lambda: calls.append("lost"),
    )
    reconnects.listen()
    client.tell(ConnectionState.CONNECTED)  # nothing was missed
    client.tell(ConnectionState.SUSPENDED)
    assert reconnects.interrupted
    client.tell(ConnectionState.RECONNECTED)
    client.tell(ConnectionState.SUSPENDED)
    client.tell(ConnectionState.LOST)
    client.tell(ConnectionState.CONNECTED)
    assert calls == ["reread", "lost", "reread"]
    reconnects.stop()
    reconnects.stop()
    assert client.listeners == []


class PinnedClient(FakeClient):
    """Refuses every look at once, unsent and without yielding, as a client does for
    requests pinned (``only_in_session``) to a session that has ended; or, with
    ``expire``, has the session expire under the first look."""

    def __init__(self, *stats: Stat | None, expire: bool = False) -> None:
        super().__init__(*stats)
        self.expire = expire
        self.looks = 0

    async def watch_exists(self, path: str) -> tuple[Stat | None, FakeWatch]:
        self.looks += 1
        if self.looks > 100:
            raise AssertionError("wait_gone looks again and again without yielding")
        if self.expire and self.looks == 1:
            self.session_id = 0  # LOST: the client's session is gone
            raise SessionExpiredError("ZooKeeper session expired")
        if not self.expire:
            raise SessionExpiredError("the session these requests belong to has ended")
        return await super().watch_exists(path)

    async def wait_connected(self) -> None:
        await asyncio.sleep(0)
        self.session_id = SESSION + 1


async def test_wait_gone_under_a_pin_to_an_ended_session_raises_instead_of_spinning() -> None:
    """Chaos (the short run, and seed 5 on 3.8): a Partitioner waiting out its own
    earlier session's node inside its round, pinned to the round's session, spun
    on the refusals once that session ended, and froze the whole worker."""
    client = PinnedClient(stat(owner=SESSION - 1))
    with pytest.raises(SessionExpiredError):
        await wait_gone(client, "/n", gone_if=lambda s: s.ephemeral_owner != SESSION - 1)  # type: ignore[arg-type]
    assert client.looks == 1


async def test_wait_gone_without_a_pin_waits_for_the_new_session_and_looks_again() -> None:
    client = PinnedClient(None, expire=True)
    assert await wait_gone(client, "/n") is Gone.DELETED  # type: ignore[arg-type]
    assert (client.looks, client.session_id) == (2, SESSION + 1)
