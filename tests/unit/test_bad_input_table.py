"""Bad input, everywhere: every public constructor and method, fed what a new
user might get wrong, refuses it with a typed aiocoord error naming the path.

No server. The client is never started, so anything that tried to send would
fail with "client not started" (a RuntimeError) instead of the expected
error: a row passing proves its input was refused before anything was sent.
``tests/integration/test_bad_input.py`` replays this same table on a live
server and checks that nothing there changed.

Each row is a :class:`Case`: what to call, the error it must raise (always a
:class:`~aiocoord.CoordinationError`; the input errors are also TypeError or
ValueError), and the text its message must hold (the path, else the argument).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import aiocoord
from aiocoord import (
    ACL,
    OPEN_ACL_UNSAFE,
    ArgumentTypeError,
    AtomicBytes,
    AtomicInt,
    AtomicLong,
    Barrier,
    ChildrenCache,
    Codec,
    CounterOverflowError,
    DataTooLargeError,
    DelayQueue,
    DoubleBarrier,
    GroupMember,
    IdQueue,
    InvalidArgumentError,
    InvalidConnectStringError,
    InvalidPathError,
    LeaderElection,
    LeaderLatch,
    Lease,
    MultiLock,
    Mutex,
    NodeCache,
    Partitioner,
    PartitionItems,
    Perm,
    PriorityQueue,
    PromotedToLock,
    Queue,
    ReadWriteLock,
    Semaphore,
    SemaphoreMutex,
    SharedCount,
    TreeCache,
)
from aiocoord._paths import validate_path

LIMIT = 64
"""The unstarted client's ``max_data_size``: small, so oversized data is cheap."""

P = "/input"
"""The (valid) path of every row that is about another argument."""


@dataclass(frozen=True)
class Case:
    """One row: ``call(client)`` (a value or an awaitable) must raise ``error``,
    whose message holds every string of ``says``."""

    name: str
    call: Callable[[aiocoord.Client], Any]
    error: type[Exception]
    says: tuple[str, ...] = ()
    root: bool = False
    """Run on a client without a namespace (rows about the /zookeeper subtree)."""


def new_client(**options: Any) -> aiocoord.Client:
    """A client that is never started (the table's own, and the rows' about connect())."""
    options.setdefault("max_data_size", LIMIT)
    return aiocoord.connect("127.0.0.1:1", **options)


async def outcome(case: Case, client: aiocoord.Client) -> BaseException | None:
    """What ``case`` raised (None if nothing)."""
    try:
        result = case.call(client)
        if inspect.isawaitable(result):
            await result
    except Exception as error:
        return error
    return None


def verdict(case: Case, error: BaseException | None) -> str | None:
    """Why ``error`` is not what ``case`` asks for (None if it is)."""
    if error is None:
        return "nothing was raised"
    if not isinstance(error, case.error):
        return f"{type(error).__name__}: {error} (expected {case.error.__name__})"
    if not isinstance(error, aiocoord.CoordinationError):
        return f"{type(error).__name__} is not an aiocoord error"
    missing = [text for text in case.says if text not in str(error)]
    if missing:
        return f"{str(error)!r} does not name {missing}"
    return None


# --- paths ------------------------------------------------------------------------------

BAD_PATHS: list[tuple[str, object, type[Exception]]] = [
    ("empty", "", InvalidPathError),
    ("relative", "input", InvalidPathError),
    ("trailing slash", "/input/", InvalidPathError),
    ("double slash", "//input", InvalidPathError),
    ("inner double slash", "/a//b", InvalidPathError),
    ("dot segment", "/a/./b", InvalidPathError),
    ("dot-dot segment", "/a/../b", InvalidPathError),
    ("lone dot-dot", "/..", InvalidPathError),
    ("NUL", "/a\x00b", InvalidPathError),
    ("control character", "/a\x1fb", InvalidPathError),
    ("DEL", "/a\x7f", InvalidPathError),
    ("C1 control", "/a\x85", InvalidPathError),
    ("lone surrogate", "/a\ud800", InvalidPathError),
    ("private use", "/a\ue000", InvalidPathError),
    ("specials block", "/a\ufff0", InvalidPathError),
    ("outside the BMP (emoji)", "/a\U0001f600", InvalidPathError),
    ("outside the BMP (CJK ext. B)", "/\U00020000", InvalidPathError),
    ("None", None, ArgumentTypeError),
    ("bytes", b"/input", ArgumentTypeError),
    ("int", 5, ArgumentTypeError),
]

CLIENT_PATH_CALLS: dict[str, Callable[[aiocoord.Client, Any], Any]] = {
    "create": lambda c, p: c.create(p),
    "create(sequential)": lambda c, p: c.create(p, sequential=True),
    "create(protected)": lambda c, p: c.create(p, protected=True),
    "create_with_stat": lambda c, p: c.create_with_stat(p, make_parents=True),
    "get": lambda c, p: c.get(p),
    "set": lambda c, p: c.set(p, b""),
    "delete": lambda c, p: c.delete(p),
    "delete(recursive)": lambda c, p: c.delete(p, recursive=True),
    "exists": lambda c, p: c.exists(p),
    "children": lambda c, p: c.children(p),
    "children_with_stat": lambda c, p: c.children_with_stat(p),
    "sync": lambda c, p: c.sync(p),
    "get_acl": lambda c, p: c.get_acl(p),
    "set_acl": lambda c, p: c.set_acl(p, OPEN_ACL_UNSAFE),
    "ensure_path": lambda c, p: c.ensure_path(p),
    "delete_recursive": lambda c, p: c.delete_recursive(p),
    "watch_exists": lambda c, p: c.watch_exists(p),
    "watch_data": lambda c, p: c.watch_data(p),
    "watch_children": lambda c, p: c.watch_children(p),
    "add_watch": lambda c, p: c.add_watch(p, recursive=True),
    "wait_changed": lambda c, p: c.wait_changed(p),
    "data_changes": lambda c, p: anext(c.data_changes(p)),
    "children_changes": lambda c, p: anext(c.children_changes(p)),
    "find_protected": lambda c, p: c.find_protected(p, "_c_x-"),
    "transaction().create": lambda c, p: c.transaction().create(p),
    "transaction().check": lambda c, p: c.transaction().check(p),
    "pipeline().get": lambda c, p: c.pipeline().get(p),
}

RECIPES: dict[str, Callable[..., Any]] = {
    "Mutex": lambda c, p, **kw: Mutex(c, p, **kw),
    "ReadWriteLock": lambda c, p, **kw: ReadWriteLock(c, p, **kw),
    "Semaphore": lambda c, p, **kw: Semaphore(c, p, 2, **kw),
    "SemaphoreMutex": lambda c, p, **kw: SemaphoreMutex(c, p, **kw),
    "Lease": lambda c, p, **kw: Lease(c, p, 5, participant_id="me", **kw),
    "AtomicLong": lambda c, p, **kw: AtomicLong(c, p, **kw),
    "AtomicInt": lambda c, p, **kw: AtomicInt(c, p, **kw),
    "AtomicBytes": lambda c, p, **kw: AtomicBytes(c, p, **kw),
    "SharedCount": lambda c, p, **kw: SharedCount(c, p, 0, **kw),
    "Barrier": lambda c, p, **kw: Barrier(c, p, **kw),
    "DoubleBarrier": lambda c, p, **kw: DoubleBarrier(c, p, 2, **kw),
    "LeaderLatch": lambda c, p, **kw: LeaderLatch(c, p, participant_id="me", **kw),
    "LeaderElection": lambda c, p, **kw: LeaderElection(c, p, participant_id="me", **kw),
    "GroupMember": lambda c, p, **kw: GroupMember(c, p, participant_id="me", **kw),
    "Partitioner": lambda c, p, **kw: Partitioner(c, p, ["a"], participant_id="me", **kw),
    "Queue": lambda c, p, **kw: Queue(c, p, **kw),
    "PriorityQueue": lambda c, p, **kw: PriorityQueue(c, p, **kw),
    "DelayQueue": lambda c, p, **kw: DelayQueue(c, p, **kw),
    "IdQueue": lambda c, p, **kw: IdQueue(c, p, **kw),
}
"""Every recipe that creates nodes, built on ``(client, path)``: each takes ``acl=``."""

CACHES: dict[str, Callable[..., Any]] = {
    "NodeCache": lambda c, p, **kw: NodeCache(c, p, **kw),
    "ChildrenCache": lambda c, p, **kw: ChildrenCache(c, p, **kw),
    "TreeCache": lambda c, p, **kw: TreeCache(c, p, **kw),
}
"""The caches create nothing: no ``acl=``, and the root and /zookeeper are theirs to watch."""


def sequential_ok(path: object) -> bool:
    """Whether ``path`` is valid once the server appends the counter ("/q/", "/..")."""
    try:
        validate_path(path, sequential=True)
    except (InvalidPathError, ArgumentTypeError):
        return False
    return True


def path_cases() -> Iterator[Case]:
    for label, bad, error in BAD_PATHS:
        says = (repr(bad),) if isinstance(bad, str) else ("path",)
        for method, call in CLIENT_PATH_CALLS.items():
            if method == "create(sequential)" and sequential_ok(bad):
                continue  # the server appends the counter: a valid sequential create
            yield Case(
                f"client.{method} {label}", lambda c, call=call, bad=bad: call(c, bad), error, says
            )
        for kind, make in {**RECIPES, **CACHES}.items():
            yield Case(f"{kind} {label}", lambda c, make=make, bad=bad: make(c, bad), error, says)
    for kind, make in RECIPES.items():
        yield Case(
            f"{kind} at the root", lambda c, make=make: make(c, "/"), InvalidPathError, ("root",)
        )
        for reserved in ("/zookeeper", "/zookeeper/quota/app"):
            yield Case(
                f"{kind} in {reserved}",
                lambda c, make=make, reserved=reserved: make(c, reserved),
                InvalidPathError,
                ("/zookeeper",),
                root=True,
            )
    yield Case(
        "client.delete_recursive the root",
        lambda c: c.delete_recursive("/"),
        InvalidPathError,
        ("root",),
    )
    yield Case("client.create the root", lambda c: c.create("/"), InvalidPathError, ("root",))
    yield Case(
        "Queue.move_aside to a bad path",
        lambda c: Queue(c, P).move_aside("qn-0000000000", "rel"),
        InvalidPathError,
        ("'rel'",),
    )
    yield Case(
        "Queue.move_aside a node that is not an item",
        lambda c: Queue(c, P).move_aside("/elsewhere/qn-0000000000", "/dead"),
        InvalidPathError,
        ("/elsewhere",),
    )
    yield Case(
        "Queue.move_aside(None)",
        lambda c: Queue(c, P).move_aside(None, "/dead"),
        ArgumentTypeError,
        (P,),
    )
    yield Case(
        "Queue(lock_path=relative)",
        lambda c: Queue(c, P, lock_path="x"),
        InvalidPathError,
        ("'x'",),
    )
    yield Case(
        "Queue(dead_letter=root)",
        lambda c: Queue(c, P, dead_letter="/"),
        InvalidPathError,
        ("root",),
    )
    yield Case(
        "Queue(lock_path under the queue)",
        lambda c: Queue(c, P, lock_path=P + "/t"),
        InvalidArgumentError,
        ("lock_path", P),
    )
    yield Case(
        "PromotedToLock(lock_path=relative)",
        lambda c: AtomicLong(c, P, promoted_to_lock=PromotedToLock("lock")),
        InvalidPathError,
        ("'lock'",),
    )
    for name, make, error, fragments in (
        (
            "participant_id=''",
            lambda c: Partitioner(c, P, [], participant_id=""),
            InvalidPathError,
            (P,),
        ),
        (
            "participant_id='a/b'",
            lambda c: Partitioner(c, P, [], participant_id="a/b"),
            InvalidPathError,
            (P,),
        ),
        ("items='abc'", lambda c: Partitioner(c, P, "abc"), ArgumentTypeError, ("items", P)),
        ("items=['']", lambda c: Partitioner(c, P, [""]), InvalidPathError, (P,)),
        ("items=['a/b']", lambda c: Partitioner(c, P, ["a/b"]), InvalidPathError, (P,)),
        ("items=[5]", lambda c: Partitioner(c, P, [5]), ArgumentTypeError, ("item", P)),
        (
            "weight=0",
            lambda c: Partitioner(c, P, [], weight=0),
            InvalidArgumentError,
            ("weight", P),
        ),
        (
            "weight=nan",
            lambda c: Partitioner(c, P, [], weight=float("nan")),
            InvalidArgumentError,
            ("weight", P),
        ),
        (
            "weight='1'",
            lambda c: Partitioner(c, P, [], weight="1"),
            ArgumentTypeError,
            ("weight", P),
        ),
        (
            "settle=-1",
            lambda c: Partitioner(c, P, [], settle=-1),
            InvalidArgumentError,
            ("settle", P),
        ),
    ):
        yield Case(f"Partitioner({name})", make, error, fragments)
    yield Case(
        "PartitionItems.from_node(relative)",
        lambda c: PartitionItems.from_node("items"),
        InvalidPathError,
        ("'items'",),
    )
    yield Case(
        "GroupMember(participant_id='')",
        lambda c: GroupMember(c, P, participant_id=""),
        InvalidPathError,
        (P,),
    )
    yield Case(
        "GroupMember(participant_id='a/b')",
        lambda c: GroupMember(c, P, participant_id="a/b"),
        InvalidPathError,
        (P,),
    )
    yield Case(
        "GroupMember(participant_id='..')",
        lambda c: GroupMember(c, P, participant_id=".."),
        InvalidPathError,
        (P,),
    )
    yield Case(
        "GroupMember(participant_id=emoji)",
        lambda c: GroupMember(c, P, participant_id="\U0001f600"),
        InvalidPathError,
        (P,),
    )
    yield Case(
        "GroupMember(participant_id=5)",
        lambda c: GroupMember(c, P, participant_id=5),
        ArgumentTypeError,
        ("participant_id", P),
    )
    yield Case(
        "NodeCache.get(relative)", lambda c: NodeCache(c, P).get("x"), InvalidPathError, ("'x'",)
    )
    yield Case(
        "TreeCache.children(5)", lambda c: TreeCache(c, P).children(5), ArgumentTypeError, ("path",)
    )
    # A path the cache does not follow is refused: answering None or [] would
    # read as "missing", and hide a typo.
    yield Case(
        "TreeCache.get(outside)",
        lambda c: TreeCache(c, P).get("/elsewhere"),
        InvalidArgumentError,
        ("'/elsewhere'", "outside"),
    )
    yield Case(
        "TreeCache.children(sibling with the same prefix)",
        lambda c: TreeCache(c, P).children(P + "s"),
        InvalidArgumentError,
        (repr(P + "s"), "outside"),
    )
    yield Case(
        "NodeCache.get(child)",
        lambda c: NodeCache(c, P).get(P + "/child"),
        InvalidArgumentError,
        (repr(P + "/child"), "deeper"),
    )
    yield Case(
        "ChildrenCache.children(grandchild)",
        lambda c: ChildrenCache(c, P).children(P + "/a/b"),
        InvalidArgumentError,
        (repr(P + "/a/b"), "deeper"),
    )
    yield Case(
        "IdQueue.put(id=emoji)",
        lambda c: IdQueue(c, P).put(b"x", "\U0001f600"),
        InvalidPathError,
        (),
    )


# --- the client argument, ACLs, data --------------------------------------------------

BAD_ACLS: list[tuple[str, object, type[Exception], str]] = [
    ("a str", "x", ArgumentTypeError, "acl"),
    ("one ACL, not a sequence", ACL(Perm.ALL, "world", "anyone"), ArgumentTypeError, "acl"),
    ("plain tuples", [(31, "world", "anyone")], ArgumentTypeError, "acl[0]"),
    ("empty", [], InvalidArgumentError, "acl"),
    ("perms as str", [ACL("all", "world", "anyone")], ArgumentTypeError, "acl[0].perms"),  # type: ignore[arg-type]
    ("perms out of range", [ACL(64, "world", "anyone")], InvalidArgumentError, "acl[0].perms"),  # type: ignore[arg-type]
    ("scheme not a str", [ACL(Perm.ALL, None, "anyone")], ArgumentTypeError, "acl[0].scheme"),  # type: ignore[arg-type]
]


def argument_cases() -> Iterator[Case]:
    for kind, make in {**RECIPES, **CACHES}.items():
        for client in (None, "127.0.0.1:2181"):
            yield Case(
                f"{kind}(client={client!r})",
                lambda c, make=make, client=client: make(client, P),
                ArgumentTypeError,
                ("client", P),
            )
    for label, acl, error, says in BAD_ACLS:
        for kind, make in RECIPES.items():
            yield Case(
                f"{kind}(acl={label})",
                lambda c, make=make, acl=acl: make(c, P, acl=acl),
                error,
                (says, P),
            )
        yield Case(
            f"client.create(acl={label})", lambda c, acl=acl: c.create(P, acl=acl), error, (says, P)
        )
        yield Case(
            f"client.ensure_path(acl={label})",
            lambda c, acl=acl: c.ensure_path(P, acl=acl),
            error,
            (says, P),
        )
        yield Case(
            f"client.set_acl({label})", lambda c, acl=acl: c.set_acl(P, acl), error, (says, P)
        )
        yield Case(
            f"transaction().create(acl={label})",
            lambda c, acl=acl: c.transaction().create(P, acl=acl),
            error,
            (says, P),
        )
        yield Case(
            f"connect(default_acl={label})",
            lambda c, acl=acl: new_client(default_acl=acl),
            error,
            ("default_acl",),
        )
    for kind in ("Mutex", "ReadWriteLock", "Semaphore", "SemaphoreMutex", "DoubleBarrier"):
        make = RECIPES[kind]
        # bytes(5) would be five zero bytes: never a converter.
        yield Case(
            f"{kind}(data=5)",
            lambda c, make=make: make(c, P, data=5),
            ArgumentTypeError,
            ("data", P),
        )
        yield Case(
            f"{kind}(data=str)",
            lambda c, make=make: make(c, P, data="x"),
            ArgumentTypeError,
            ("data", P),
        )
    for kind in (
        "Mutex",
        "ReadWriteLock",
        "Semaphore",
        "SemaphoreMutex",
        "LeaderLatch",
        "LeaderElection",
        "Queue",
    ):
        make = RECIPES[kind]
        yield Case(
            f"{kind}(error_policy='x')",
            lambda c, make=make: make(c, P, error_policy="x"),
            ArgumentTypeError,
            ("error_policy", P),
        )
    yield Case(
        "client.create(data=str)", lambda c: c.create(P, "text"), ArgumentTypeError, ("data", P)
    )
    yield Case("client.create(data=5)", lambda c: c.create(P, 5), ArgumentTypeError, ("data", P))
    yield Case("client.set(data=None)", lambda c: c.set(P, None), ArgumentTypeError, ("data", P))
    yield Case(
        "client.create oversized",
        lambda c: c.create(P, b"x" * (LIMIT + 1)),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "client.set oversized", lambda c: c.set(P, b"x" * (LIMIT + 1)), DataTooLargeError, (P,)
    )
    yield Case(
        "pipeline().set oversized",
        lambda c: c.pipeline().set(P, b"x" * (LIMIT + 1)),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "GroupMember oversized data",
        lambda c: GroupMember(c, P, participant_id="me", data=b"x" * (LIMIT + 1)),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "GroupMember(data=5)",
        lambda c: GroupMember(c, P, participant_id="me", data=5),
        ArgumentTypeError,
        ("data", P),
    )
    yield Case(
        "GroupMember.update(5)",
        lambda c: GroupMember(c, P, participant_id="me").update(5),
        ArgumentTypeError,
        ("data", P),
    )
    yield Case(
        "Lease oversized holder",
        lambda c: Lease(c, P, 5, participant_id="x" * LIMIT),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "Lease(participant_id=5)",
        lambda c: Lease(c, P, 5, participant_id=5),
        ArgumentTypeError,
        ("participant_id", P),
    )
    yield Case(
        "Lease(participant_id=lone surrogate)",
        lambda c: Lease(c, P, 5, participant_id="\udc00"),
        InvalidArgumentError,
        ("participant_id", P),
    )
    yield Case(
        "LeaderLatch(participant_id=5)",
        lambda c: LeaderLatch(c, P, participant_id=5),
        ArgumentTypeError,
        ("participant_id", P),
    )
    yield Case(
        "LeaderElection(participant_id=lone surrogate)",
        lambda c: LeaderElection(c, P, participant_id="\ud800"),
        InvalidArgumentError,
        ("participant_id", P, "UTF-8"),
    )
    yield Case(
        "Queue oversized item",
        lambda c: Queue(c, P).put(b"x" * (LIMIT + 1)),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "PriorityQueue item oversized by its envelope",
        lambda c: PriorityQueue(c, P).put(b"x" * (LIMIT - 5)),
        DataTooLargeError,
        (P,),
    )
    yield Case(
        "Queue.put(str) with the bytes codec",
        lambda c: Queue(c, P).put("text"),
        ArgumentTypeError,
        ("item", P),
    )
    yield Case(
        "Queue(codec=UTF8).put(bytes)",
        lambda c: Queue(c, P, codec=Codec.UTF8).put(b"x"),
        ArgumentTypeError,
        ("item", P),
    )
    yield Case(
        "Queue(codec=UTF8).put(lone surrogate)",
        lambda c: Queue(c, P, codec=Codec.UTF8).put("\ud800"),
        InvalidArgumentError,
        ("item", P),
    )
    yield Case(
        "Queue(codec=JSON).put(NaN)",
        lambda c: Queue(c, P, codec=Codec.JSON).put(math.nan),
        InvalidArgumentError,
        ("item", P, "JSON"),
    )
    yield Case(
        "Queue(codec=JSON).put(a set)",
        lambda c: Queue(c, P, codec=Codec.JSON).put({1}),
        ArgumentTypeError,
        ("item", P, "JSON"),
    )
    yield Case(
        "Queue(codec=LONG).put(2**64)",
        lambda c: Queue(c, P, codec=Codec.LONG).put(2**64),
        InvalidArgumentError,
        ("item", P, "64 bits"),
    )
    yield Case(
        "Queue(codec=object())",
        lambda c: Queue(c, P, codec=object()),
        ArgumentTypeError,
        ("codec", P),
    )
    yield from sweep_cases()
    yield Case("MultiLock([None])", lambda c: MultiLock([None]), ArgumentTypeError, ("locks[0]",))
    yield Case("MultiLock([])", lambda c: MultiLock([]), InvalidArgumentError, ("locks",))
    yield Case("MultiLock('ab')", lambda c: MultiLock("ab"), ArgumentTypeError, ("locks",))
    yield Case(
        "transaction().guard('x')",
        lambda c: c.transaction().guard("x"),
        ArgumentTypeError,
        ("fence",),
    )
    yield Case(
        "client.create(ephemeral='yes')",
        lambda c: c.create(P, ephemeral="yes"),
        ArgumentTypeError,
        ("ephemeral", P),
    )
    yield Case(
        "client.create(make_parents=1)",
        lambda c: c.create(P, make_parents=1),
        ArgumentTypeError,
        ("make_parents", P),
    )
    yield Case(
        "client.delete(recursive='yes')",
        lambda c: c.delete(P, recursive="yes"),
        ArgumentTypeError,
        ("recursive", P),
    )
    yield Case(
        "client.create(ephemeral and container)",
        lambda c: c.create(P, ephemeral=True, container=True),
        InvalidArgumentError,
        (P,),
    )
    yield Case(
        "client.create(container and sequential)",
        lambda c: c.create(P, container=True, sequential=True),
        InvalidArgumentError,
        (P,),
    )
    yield Case(
        "client.delete(recursive, version)",
        lambda c: c.delete(P, version=1, recursive=True),
        InvalidArgumentError,
        ("version", P),
    )
    for version in ("1", 1.0, -2, 2**31, None):
        yield Case(
            f"client.set(version={version!r})",
            lambda c, version=version: c.set(P, b"", version=version),
            ArgumentTypeError if not isinstance(version, int) else InvalidArgumentError,
            ("version", P),
        )
        yield Case(
            f"client.delete(version={version!r})",
            lambda c, version=version: c.delete(P, version=version),
            ArgumentTypeError if not isinstance(version, int) else InvalidArgumentError,
            ("version", P),
        )


def sweep_cases() -> Iterator[Case]:
    """Found by trying every public API as a new user would, beyond the issue's list."""
    for items in (5, b"abc", "abc"):
        yield Case(
            f"Queue.put_many({items!r})",
            lambda c, i=items: Queue(c, P).put_many(i),
            ArgumentTypeError,
            ("items", P),
        )
        yield Case(
            f"PriorityQueue.put_many({items!r})",
            lambda c, i=items: PriorityQueue(c, P).put_many(i),
            ArgumentTypeError,
            ("items", P),
        )
    yield Case(
        "ACL.digest(5, 'pw')",
        lambda c: aiocoord.ACL.digest(5, "pw"),
        ArgumentTypeError,
        ("username",),
    )
    yield Case(
        "ACL.digest('a:b', 'pw')",
        lambda c: aiocoord.ACL.digest("a:b", "pw"),
        InvalidArgumentError,
        ("username",),
    )
    yield Case(
        "digest_id('me', lone surrogate)",
        lambda c: aiocoord.digest_id("me", "\udc00"),
        InvalidArgumentError,
        ("password",),
    )
    yield Case("RetryNTimes('3')", lambda c: aiocoord.RetryNTimes("3"), ArgumentTypeError, ("n",))
    yield Case(
        "RetryNTimes(3, sleep=-1)",
        lambda c: aiocoord.RetryNTimes(3, -1),
        InvalidArgumentError,
        ("sleep",),
    )
    yield Case(
        "ExponentialBackoff(base_sleep=nan)",
        lambda c: aiocoord.ExponentialBackoff(math.nan),
        InvalidArgumentError,
        ("base_sleep",),
    )
    yield Case(
        "BoundedExponentialBackoff(max_retries=-1)",
        lambda c: aiocoord.BoundedExponentialBackoff(max_retries=-1),
        InvalidArgumentError,
        ("max_retries",),
    )
    yield Case(
        "RetryUntilElapsed(max_elapsed=nan)",
        lambda c: aiocoord.RetryUntilElapsed(math.nan),
        InvalidArgumentError,
        ("max_elapsed",),
    )
    yield Case(
        "RetryForever(sleep='x')",
        lambda c: aiocoord.RetryForever("x"),
        ArgumentTypeError,
        ("sleep",),
    )
    yield Case(
        "client.add_listener(5)", lambda c: c.add_listener(5), ArgumentTypeError, ("callback",)
    )
    yield Case(
        "SharedCount.add_listener(5)",
        lambda c: SharedCount(c, P, 0).add_listener(5),
        ArgumentTypeError,
        ("callback",),
    )
    yield Case(
        "TreeCache.add_listener(5)",
        lambda c: TreeCache(c, P).add_listener(5),
        ArgumentTypeError,
        ("callback", P),
    )
    yield Case("client.retry(5)", lambda c: c.retry(5), ArgumentTypeError, ("operation",))
    yield Case(
        "client.find_protected(marker=5)",
        lambda c: c.find_protected(P, 5),
        ArgumentTypeError,
        ("marker", P),
    )
    yield Case(
        "LeaderElection.run(5)", lambda c: LeaderElection(c, P).run(5), ArgumentTypeError, ("fn", P)
    )
    yield Case(
        "LeaderElection.run(requeue='yes')",
        lambda c: LeaderElection(c, P).run(c.sync, requeue="yes"),
        ArgumentTypeError,
        ("requeue", P),
    )
    yield Case(
        "Queue.take(cancel_on_loss='no')",
        lambda c: Queue(c, P).take(cancel_on_loss="no"),
        ArgumentTypeError,
        ("cancel_on_loss", P),
    )
    yield Case(
        "AtomicLong.add(raise_on_bound='yes')",
        lambda c: AtomicLong(c, P).add(1, raise_on_bound="yes"),
        ArgumentTypeError,
        ("raise_on_bound", P),
    )


# --- numbers: counts, sizes, values ---------------------------------------------------


def number_cases() -> Iterator[Case]:
    for bound, error in (
        (-1, InvalidArgumentError),
        (65536, InvalidArgumentError),
        (2.0, ArgumentTypeError),
        ("3", ArgumentTypeError),
        (True, ArgumentTypeError),
    ):
        yield Case(
            f"Mutex(local_handoff={bound!r})",
            lambda c, n=bound: Mutex(c, P, local_handoff=n),
            error,
            ("local_handoff", P),
        )
    for count, error in (
        (0, InvalidArgumentError),
        (-1, InvalidArgumentError),
        (1.5, ArgumentTypeError),
        ("2", ArgumentTypeError),
        (True, ArgumentTypeError),
    ):
        yield Case(
            f"Semaphore(max_leases={count!r})",
            lambda c, n=count: Semaphore(c, P, n),
            error,
            ("max_leases", P),
        )
        yield Case(
            f"DoubleBarrier(members={count!r})",
            lambda c, n=count: DoubleBarrier(c, P, n),
            error,
            ("members", P),
        )
        yield Case(
            f"Queue(max_items={count!r})",
            lambda c, n=count: Queue(c, P, max_items=n),
            error,
            ("max_items", P),
        )
        yield Case(
            f"TreeCache(max_buffer={count!r})",
            lambda c, n=count: TreeCache(c, P, max_buffer=n),
            error,
            ("max_buffer", P),
        )
        yield Case(
            f"Semaphore.acquire(n={count!r})",
            lambda c, n=count: Semaphore(c, P, 2).acquire(n),
            error,
            ("n", P),
        )
        yield Case(
            f"connect(max_data_size={count!r})",
            lambda c, n=count: new_client(max_data_size=n),
            error,
            ("max_data_size",),
        )
    yield Case(
        "Semaphore.acquire(n > max_leases)",
        lambda c: Semaphore(c, P, 2).acquire(3),
        InvalidArgumentError,
        ("n", P),
    )
    yield Case(
        "TreeCache(max_depth=-1)",
        lambda c: TreeCache(c, P, max_depth=-1),
        InvalidArgumentError,
        ("max_depth", P),
    )
    yield Case(
        "ChildrenCache(max_cached_data=-1)",
        lambda c: ChildrenCache(c, P, max_cached_data=-1),
        InvalidArgumentError,
        ("max_cached_data", P),
    )
    yield Case(
        "TreeCache.events(max_buffer=0)",
        lambda c: TreeCache(c, P).events(max_buffer=0),
        InvalidArgumentError,
        ("max_buffer", P),
    )
    yield Case(
        "client.max_data_size = 0",
        lambda c: setattr(c, "max_data_size", 0),
        InvalidArgumentError,
        ("max_data_size",),
    )
    for method in ("compare_and_set", "set", "force_set", "initialize"):
        for kind, value, error in (
            ("AtomicLong", 1.5, ArgumentTypeError),
            ("AtomicLong", "1", ArgumentTypeError),
            ("AtomicLong", 2**63, CounterOverflowError),
            ("AtomicInt", 2**31, CounterOverflowError),
            ("AtomicBytes", 5, ArgumentTypeError),
            ("AtomicBytes", "text", ArgumentTypeError),
        ):

            def call(
                c: aiocoord.Client, method: str = method, kind: str = kind, value: object = value
            ) -> Any:
                counter = RECIPES[kind](c, P)
                if method == "compare_and_set":
                    return counter.compare_and_set(b"" if kind == "AtomicBytes" else 0, value)
                return getattr(counter, method)(value)

            yield Case(f"{kind}.{method}({value!r})", call, error, (P,))
    yield Case(
        "AtomicLong.compare_and_set(expected=1.5)",
        lambda c: AtomicLong(c, P).compare_and_set(1.5, 1),
        ArgumentTypeError,
        (P,),
    )
    yield Case(
        "AtomicBytes.update(5)",
        lambda c: AtomicBytes(c, P).update(5),
        ArgumentTypeError,
        ("function", P),
    )
    for delta, error in (
        (1.5, ArgumentTypeError),
        ("1", ArgumentTypeError),
        (None, ArgumentTypeError),
        (True, ArgumentTypeError),
        (2**63, CounterOverflowError),
    ):
        yield Case(
            f"AtomicLong.add({delta!r})", lambda c, d=delta: AtomicLong(c, P).add(d), error, (P,)
        )
        yield Case(
            f"AtomicInt.subtract({delta!r})",
            lambda c, d=delta: AtomicInt(c, P).subtract(d),
            error,
            (P,),
        )
    yield Case(
        "AtomicLong.add(lower='0')",
        lambda c: AtomicLong(c, P).add(1, lower="0"),
        ArgumentTypeError,
        ("lower", P),
    )
    yield Case(
        "AtomicLong.add(lower > upper)",
        lambda c: AtomicLong(c, P).add(1, lower=5, upper=1),
        InvalidArgumentError,
        ("lower", P),
    )
    yield Case(
        "AtomicLong(coalesce='yes')",
        lambda c: AtomicLong(c, P, coalesce="yes"),
        ArgumentTypeError,
        ("coalesce", P),
    )
    yield Case(
        "AtomicLong(retry='fast')",
        lambda c: AtomicLong(c, P, retry="fast"),
        ArgumentTypeError,
        ("retry", P),
    )
    yield Case(
        "AtomicLong(promoted_to_lock='/l')",
        lambda c: AtomicLong(c, P, promoted_to_lock="/l"),
        ArgumentTypeError,
        ("promoted_to_lock", P),
    )
    yield Case(
        "SharedCount(seed=1.5)", lambda c: SharedCount(c, P, 1.5), ArgumentTypeError, ("count", P)
    )
    yield Case(
        "SharedCount(seed=2**31)", lambda c: SharedCount(c, P, 2**31), CounterOverflowError, (P,)
    )
    yield Case(
        "SharedCount.set_count('1')",
        lambda c: SharedCount(c, P, 0).set_count("1"),
        ArgumentTypeError,
        ("count", P),
    )
    yield Case(
        "SharedCount.try_set_count(previous=(0, 0))",
        lambda c: SharedCount(c, P, 0).try_set_count((0, 0), 1),
        ArgumentTypeError,
        ("previous", P),
    )
    for priority, error in (
        (1.5, ArgumentTypeError),
        (2**31, InvalidArgumentError),
        (-(2**31) - 1, InvalidArgumentError),
    ):
        yield Case(
            f"PriorityQueue.put(priority={priority!r})",
            lambda c, p=priority: PriorityQueue(c, P).put(b"x", p),
            error,
            ("priority",),
        )
    for item_id, error in (("", InvalidArgumentError), (5, ArgumentTypeError)):
        yield Case(
            f"IdQueue.put(id={item_id!r})",
            lambda c, i=item_id: IdQueue(c, P).put(b"x", i),
            error,
            ("item id",),
        )
        yield Case(
            f"IdQueue.remove({item_id!r})",
            lambda c, i=item_id: IdQueue(c, P).remove(i),
            error,
            ("item id",),
        )


# --- seconds: timeouts, TTLs, delays ----------------------------------------------------

BAD_TIMEOUTS: list[tuple[object, type[Exception]]] = [
    (math.nan, InvalidArgumentError),
    (-1, InvalidArgumentError),
    (-math.inf, InvalidArgumentError),
    ("5", ArgumentTypeError),
    (True, ArgumentTypeError),
]

TIMEOUT_CALLS: dict[str, Callable[[aiocoord.Client, Any], Any]] = {
    "Mutex.acquire": lambda c, t: Mutex(c, P).acquire(timeout=t),
    "Mutex.hold": lambda c, t: Mutex(c, P).hold(timeout=t),
    "ReadWriteLock.read_lock.acquire": lambda c, t: ReadWriteLock(c, P).read_lock.acquire(
        timeout=t
    ),
    "Semaphore.acquire": lambda c, t: Semaphore(c, P, 2).acquire(1, timeout=t),
    "SemaphoreMutex.acquire": lambda c, t: SemaphoreMutex(c, P).acquire(timeout=t),
    "SemaphoreMutex.hold": lambda c, t: SemaphoreMutex(c, P).hold(timeout=t),
    "MultiLock.acquire": lambda c, t: MultiLock([Mutex(c, P)]).acquire(timeout=t),
    "Barrier.wait_on_barrier": lambda c, t: Barrier(c, P).wait_on_barrier(timeout=t),
    "DoubleBarrier.enter": lambda c, t: DoubleBarrier(c, P, 2).enter(timeout=t),
    "DoubleBarrier.leave": lambda c, t: DoubleBarrier(c, P, 2).leave(timeout=t),
    "LeaderLatch.wait_leader": lambda c, t: LeaderLatch(c, P).wait_leader(timeout=t),
    "LeaderElection.hold": lambda c, t: LeaderElection(c, P).hold(timeout=t),
    "Queue.get": lambda c, t: Queue(c, P).get(timeout=t),
    "Queue.take": lambda c, t: Queue(c, P).take(timeout=t),
    "Queue.put": lambda c, t: Queue(c, P, max_items=1).put(b"x", timeout=t),
    "PromotedToLock(max_lock_time)": lambda c, t: AtomicLong(
        c, P, promoted_to_lock=PromotedToLock("/l", t)
    ),
    "client.wait_connected": lambda c, t: c.wait_connected(timeout=t),
    "client.request_timeout": lambda c, t: c.request_timeout(t),
}

BAD_TTLS: list[tuple[object, type[Exception]]] = [
    (0, InvalidArgumentError),
    (-1, InvalidArgumentError),
    (math.nan, InvalidArgumentError),
    (math.inf, InvalidArgumentError),
    (1e30, InvalidArgumentError),  # beyond ZooKeeper's 2**40 - 1 ms
    (1e-9, InvalidArgumentError),  # below ZooKeeper's resolution: 1 ms
    (0.0009, InvalidArgumentError),
    ("5", ArgumentTypeError),
]


def seconds_cases() -> Iterator[Case]:
    for method, call in TIMEOUT_CALLS.items():
        for value, error in BAD_TIMEOUTS:
            # A MultiLock has no path of its own: its message names the argument.
            says = ("timeout",) if method.startswith(("client.", "MultiLock")) else ("time", P)
            yield Case(
                f"{method}(timeout={value!r})",
                lambda c, call=call, v=value: call(c, v),
                error,
                says,
            )
    for value, error in BAD_TTLS:
        yield Case(
            f"client.create(ttl={value!r})",
            lambda c, v=value: c.create(P, ttl=v),
            error,
            ("ttl", P),
        )
        yield Case(
            f"Lease(ttl={value!r})",
            lambda c, v=value: Lease(c, P, v, participant_id="me"),
            error,
            ("ttl", P),
        )
    for value, error in [*BAD_TIMEOUTS, (math.inf, InvalidArgumentError)]:
        yield Case(
            f"DelayQueue.put(delay={value!r})",
            lambda c, v=value: DelayQueue(c, P).put(b"x", delay=v),
            error,
            ("delay",),
        )
        yield Case(
            f"DelayQueue.put(at={value!r})",
            lambda c, v=value: DelayQueue(c, P).put(b"x", at=v),
            error,
            ("at",),
        )
    yield Case(
        "DelayQueue.put(delay=1e300)",
        lambda c: DelayQueue(c, P).put(b"x", delay=1e300),
        InvalidArgumentError,
        ("due time",),
    )
    yield Case(
        "DelayQueue.put(delay and at)",
        lambda c: DelayQueue(c, P).put(b"x", delay=1, at=1),
        InvalidArgumentError,
        ("not both",),
    )
    for value, error in (
        (0, InvalidArgumentError),
        (math.nan, InvalidArgumentError),
        ("1", ArgumentTypeError),
    ):
        yield Case(
            f"client.start(timeout={value!r})",
            lambda c, v=value: new_client().start(timeout=v),
            error,
            ("timeout",),
        )


# --- connect() ---------------------------------------------------------------------------


def connect_cases() -> Iterator[Case]:
    bad_hosts: list[object] = [
        [("127.0.0.1", 99999)],
        [("127.0.0.1", 0)],
        [("127.0.0.1", "2181")],
        [("", 2181)],
        "127.0.0.1:99999",
        "127.0.0.1:port",
        "127.0.0.1:\u00b2",
        "",
        5,
        [5],
        "127.0.0.1:2181/chroot",
    ]
    for hosts in bad_hosts:
        yield Case(
            f"connect({hosts!r})",
            lambda c, h=hosts: aiocoord.connect(h),
            InvalidConnectStringError,
            (),
        )
    options: list[tuple[str, object, type[Exception]]] = [
        ("error_policy", "x", ArgumentTypeError),
        ("namespace", 5, ArgumentTypeError),
        ("namespace", "/\U0001f600", InvalidPathError),
        ("namespace", "/app/", InvalidPathError),
        ("namespace", "/zookeeper", InvalidPathError),
        ("namespace", "zookeeper/app", InvalidPathError),
        ("session_timeout", math.nan, InvalidArgumentError),
        ("session_timeout", 0, InvalidArgumentError),
        ("session_timeout", -1, InvalidArgumentError),
        ("session_timeout", math.inf, InvalidArgumentError),
        ("session_timeout", 1e10, InvalidArgumentError),
        ("session_timeout", "5", ArgumentTypeError),
        ("connect_timeout", 0, InvalidArgumentError),
        ("request_timeout", -1, InvalidArgumentError),
        ("request_timeout", math.nan, InvalidArgumentError),
        ("start_timeout", 0, InvalidArgumentError),
        ("retry", "fast", ArgumentTypeError),
        ("auth", "digest:me", ArgumentTypeError),
        ("auth", [("digest",)], ArgumentTypeError),
        ("auth", [("digest", 5)], ArgumentTypeError),
        ("auth", [("", "me:pw")], InvalidArgumentError),
        ("read_only", "yes", ArgumentTypeError),
        ("ssl_context", "tls", ArgumentTypeError),
    ]
    for option, value, error in options:
        says = (option,)
        yield Case(
            f"connect({option}={value!r})",
            lambda c, o=option, v=value: new_client(**{o: v}),
            error,
            says,
        )


CASES: list[Case] = [
    *path_cases(),
    *argument_cases(),
    *number_cases(),
    *seconds_cases(),
    *connect_cases(),
]


def test_the_table_has_no_duplicate_rows() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]


@pytest.fixture
def client() -> aiocoord.Client:
    return new_client(namespace="/ns")


@pytest.fixture
def root_client() -> aiocoord.Client:
    return new_client()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_bad_input_gets_a_typed_error_naming_it(
    case: Case, client: aiocoord.Client, root_client: aiocoord.Client
) -> None:
    error = await outcome(case, root_client if case.root else client)
    assert verdict(case, error) is None, verdict(case, error)


def test_every_recipe_that_creates_nodes_takes_an_acl() -> None:
    """``acl=`` on every constructor in RECIPES (the caches create nothing)."""
    client = new_client()
    for kind, make in RECIPES.items():
        acl = [aiocoord.ACL.digest("me", "pw")]
        made = make(client, P, acl=acl)
        assert made is not None, kind
    for make in CACHES.values():
        with pytest.raises(TypeError):
            make(client, P, acl=OPEN_ACL_UNSAFE)
