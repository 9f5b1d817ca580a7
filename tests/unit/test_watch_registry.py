"""WatchRegistry and Watch on their own (no server): which local watches an event
fires, and how waiters are resolved, cancelled and failed."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from aiocoord import ClientClosedError, SessionExpiredError
from aiocoord._session._watch import PersistentWatch, Watch, WatchKind, WatchRegistry
from aiocoord._types import EventType, WatchEvent

DATA, EXIST, CHILD = WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD
ONE_SHOT = (DATA, EXIST, CHILD)
"""The kinds of one-shot watch (:class:`Watch`); persistent ones have their own tests below."""

# ZooKeeper's client rules (ZKWatchManager.materialize), written out here rather
# than read from the module so that the test checks the code against them.
FIRED_BY = {
    EventType.CREATED: {DATA, EXIST},
    EventType.CHANGED: {DATA, EXIST},
    EventType.DELETED: {DATA, EXIST, CHILD},
    EventType.CHILD: {CHILD},
}


def watch(registry: WatchRegistry, kind: WatchKind, path: str, server_path: str = "") -> Watch:
    """A registered watch on ``path`` (its server path is ``/ns`` + path unless given)."""
    made = Watch(registry, kind, path, server_path or f"/ns{path}")
    registry.add(made)
    return made


def result(w: Watch) -> WatchEvent:
    assert w.done()
    return w._future.result()


@pytest.mark.parametrize("event_type", list(EventType), ids=lambda t: t.name)
async def test_an_event_fires_exactly_the_kinds_zookeeper_fires(event_type: EventType) -> None:
    registry = WatchRegistry()
    watches = {kind: watch(registry, kind, "/node") for kind in ONE_SHOT}

    registry.fire(event_type, "/ns/node", "/node")

    fired = {kind for kind, w in watches.items() if w.done()}
    assert fired == FIRED_BY[event_type]
    for kind in fired:
        assert result(watches[kind]) == WatchEvent(event_type, "/node")
    unfired = set(ONE_SHOT) - fired
    assert len(registry) == len(unfired)
    for kind in ONE_SHOT:
        assert registry.paths(kind) == (["/ns/node"] if kind in unfired else [])


async def test_every_waiter_on_a_path_gets_the_same_event() -> None:
    registry = WatchRegistry()
    waiters = [watch(registry, DATA, "/shared") for _ in range(3)]
    assert len(registry) == 3 and registry.paths(DATA) == ["/ns/shared"]

    async def wait(w: Watch) -> WatchEvent:
        return await w

    tasks = [asyncio.create_task(wait(w)) for w in waiters]
    registry.fire(EventType.CHANGED, "/ns/shared", "/shared")
    assert await asyncio.gather(*tasks) == [WatchEvent(EventType.CHANGED, "/shared")] * 3
    assert len(registry) == 0 and registry.paths(DATA) == []


async def test_events_match_the_exact_server_path_only() -> None:
    registry = WatchRegistry()
    parent = watch(registry, CHILD, "/a")
    child = watch(registry, DATA, "/a/b")
    sibling = watch(registry, DATA, "/ab")

    registry.fire(EventType.CHANGED, "/ns/a/b", "/a/b")

    assert result(child) == WatchEvent(EventType.CHANGED, "/a/b")
    assert not parent.done() and not sibling.done()
    assert sorted(registry.paths(CHILD) + registry.paths(DATA)) == ["/ns/a", "/ns/ab"]


async def test_a_create_or_delete_also_fires_a_child_watch_on_the_parent() -> None:
    # The server's own child event may not come: a recursive watch on the
    # parent replaces a child watch there on servers before 3.9 (ZOOKEEPER-4466).
    registry = WatchRegistry()
    parent = watch(registry, CHILD, "/a")
    grandparent = watch(registry, CHILD, "/", server_path="/ns")
    sibling = watch(registry, CHILD, "/ab")

    registry.fire(EventType.DELETED, "/ns/a/b", "/a/b")

    assert result(parent) == WatchEvent(EventType.CHILD, "/a")
    assert not grandparent.done() and not sibling.done()
    registry.fire(EventType.CREATED, "/ns/a", "/a")
    assert result(grandparent) == WatchEvent(EventType.CHILD, "/")


async def test_the_event_carries_the_users_path_not_the_servers() -> None:
    registry = WatchRegistry()
    w = watch(registry, EXIST, "/job", server_path="/app/tenant/job")
    registry.fire(EventType.CREATED, "/app/tenant/job", "/job")
    assert result(w) == WatchEvent(EventType.CREATED, "/job")


async def test_a_watch_fires_once_and_a_later_watch_waits_for_the_next_event() -> None:
    registry = WatchRegistry()
    first = watch(registry, DATA, "/n")
    registry.fire(EventType.CHANGED, "/ns/n", "/n")
    second = watch(registry, DATA, "/n")
    assert not second.done() and len(registry) == 1

    registry.fire(EventType.DELETED, "/ns/n", "/n")

    assert result(first) == WatchEvent(EventType.CHANGED, "/n")
    assert result(second) == WatchEvent(EventType.DELETED, "/n")
    assert len(registry) == 0


async def test_cancel_detaches_the_watch_and_leaves_other_waiters() -> None:
    registry = WatchRegistry()
    leaving = watch(registry, CHILD, "/q")
    staying = watch(registry, CHILD, "/q")

    leaving.cancel()

    assert len(registry) == 1 and list(registry) == [staying]
    with pytest.raises(asyncio.CancelledError):
        await leaving
    registry.fire(EventType.CHILD, "/ns/q", "/q")
    assert result(staying) == WatchEvent(EventType.CHILD, "/q")
    assert leaving._future.cancelled()  # the event did not reach it


async def test_cancel_of_the_last_waiter_forgets_the_path() -> None:
    registry = WatchRegistry()
    w = watch(registry, EXIST, "/gone")
    w.cancel()
    w.cancel()  # idempotent
    assert len(registry) == 0 and registry.paths(EXIST) == []
    registry.fire(EventType.CREATED, "/ns/gone", "/gone")  # fires into nothing


async def test_leaving_async_with_detaches_the_watch_also_on_an_error() -> None:
    registry = WatchRegistry()
    fired = watch(registry, DATA, "/w")
    async with fired as entered:
        assert entered is fired
        registry.fire(EventType.CHANGED, "/ns/w", "/w")
    assert result(fired) == WatchEvent(EventType.CHANGED, "/w")  # a fired watch keeps its event

    pending = watch(registry, DATA, "/w")
    with pytest.raises(KeyError):
        async with pending:
            raise KeyError("in the block")
    assert pending._future.cancelled() and len(registry) == 0


async def test_cancelling_the_task_awaiting_a_watch_detaches_it() -> None:
    registry = WatchRegistry()
    w = watch(registry, DATA, "/t")
    waiting = asyncio.Event()

    async def wait() -> WatchEvent:
        waiting.set()
        return await w

    task = asyncio.create_task(wait())
    await waiting.wait()  # the task is now suspended on the watch
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert w.done() and len(registry) == 0 and registry.paths(DATA) == []


async def test_fail_all_fails_every_pending_watch_and_empties_the_registry() -> None:
    registry = WatchRegistry()
    pending = [watch(registry, kind, f"/{kind.value}") for kind in ONE_SHOT]
    pending.append(watch(registry, DATA, "/data"))
    cancelled = watch(registry, CHILD, "/cancelled")
    cancelled.cancel()
    error = SessionExpiredError("session expired")

    registry.fail_all(error)

    assert len(registry) == 0 and list(registry) == []
    assert all(registry.paths(kind) == [] for kind in ONE_SHOT)
    for w in pending:
        with pytest.raises(SessionExpiredError) as info:
            await w
        assert info.value is error
    assert cancelled._future.cancelled()


async def test_a_watch_failed_by_fail_all_that_nobody_awaits_is_not_reported() -> None:
    """fail_all marks each exception retrieved: a watch the session took away, that no
    task awaits, must not make asyncio log "exception was never retrieved"."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        registry = WatchRegistry()
        watch(registry, DATA, "/orphan")
        registry.fail_all(ClientClosedError("client closed"))
        # The control: an unretrieved exception on a plain future is reported.
        control = loop.create_future()
        control.set_exception(ClientClosedError("never retrieved"))
        del control
        await asyncio.sleep(0)  # run the done callbacks already scheduled (no waiting)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert [c["message"] for c in reported] == ["Future exception was never retrieved"]
    assert "never retrieved" in str(reported[0]["exception"])


async def test_len_counts_waiters_and_paths_lists_each_path_once_per_kind() -> None:
    registry = WatchRegistry()
    assert len(registry) == 0 and all(registry.paths(k) == [] for k in ONE_SHOT)
    watch(registry, DATA, "/x")
    watch(registry, DATA, "/x")
    watch(registry, DATA, "/y")
    watch(registry, EXIST, "/x")
    watch(registry, CHILD, "/z")

    assert len(registry) == 5
    assert sorted(registry.paths(DATA)) == ["/ns/x", "/ns/y"]
    assert registry.paths(EXIST) == ["/ns/x"]
    assert registry.paths(CHILD) == ["/ns/z"]
    assert sorted((w.kind.value, w.path) for w in registry) == [
        ("child", "/z"),
        ("data", "/x"),
        ("data", "/x"),
        ("data", "/y"),
        ("exist", "/x"),
    ]
    registry.fire(EventType.CHANGED, "/ns/x", "/x")  # DATA and EXIST on /x
    assert len(registry) == 2
    assert registry.paths(DATA) == ["/ns/y"] and registry.paths(EXIST) == []
    for w in list(registry):
        w.cancel()


def persistent(registry: WatchRegistry, kind: WatchKind, path: str) -> PersistentWatch:
    made = PersistentWatch(registry, kind, path, f"/ns{path}", registry.discard_persistent)
    registry.add_persistent(made)
    return made


async def test_a_persistent_watch_gets_every_event_on_its_path_only() -> None:
    registry = WatchRegistry()
    node = persistent(registry, WatchKind.PERSISTENT, "/p")
    for event_type in EventType:
        registry.fire(event_type, "/ns/p", "/p")
    registry.fire(EventType.CREATED, "/ns/p/child", "/p/child")
    assert [await anext(node) for _ in EventType] == [WatchEvent(t, "/p") for t in EventType]
    assert node.pending == 0
    assert registry.paths(WatchKind.PERSISTENT) == ["/ns/p"]


async def test_a_recursive_watch_gets_its_subtree_without_child_events() -> None:
    registry = WatchRegistry()
    tree = persistent(registry, WatchKind.RECURSIVE, "/t")
    registry.fire(EventType.CREATED, "/ns/t/a/b", "/t/a/b")
    registry.fire(EventType.CHILD, "/ns/t/a", "/t/a")
    registry.fire(EventType.CHANGED, "/ns/t", "/t")
    registry.fire(EventType.DELETED, "/ns/tx", "/tx")  # a sibling sharing a prefix
    assert [await anext(tree), await anext(tree)] == [
        WatchEvent(EventType.CREATED, "/t/a/b"),
        WatchEvent(EventType.CHANGED, "/t"),
    ]
    assert tree.pending == 0


async def test_closing_a_persistent_watch_tells_whether_it_was_the_last_on_its_path() -> None:
    registry = WatchRegistry()
    first = persistent(registry, WatchKind.PERSISTENT, "/p")
    second = persistent(registry, WatchKind.PERSISTENT, "/p")
    assert not registry.discard_persistent(first)
    assert registry.discard_persistent(second)
    assert not registry.discard_persistent(second)
    assert len(registry) == 0 and not registry.watching("/ns/p")


async def test_fail_all_ends_persistent_watches_with_the_error() -> None:
    registry = WatchRegistry()
    watch = persistent(registry, WatchKind.RECURSIVE, "/t")
    registry.fire(EventType.CREATED, "/ns/t", "/t")
    registry.fail_all(SessionExpiredError("gone"))
    assert await anext(watch) == WatchEvent(EventType.CREATED, "/t")  # queued events first
    with pytest.raises(SessionExpiredError):
        await anext(watch)
    assert len(registry) == 0
