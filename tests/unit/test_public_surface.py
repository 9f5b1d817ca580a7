"""Everything a user can reach says what it is: docstrings on the whole public
surface, and reprs that name the object instead of ``<... object at 0x...>``.

No server: recipes are built on a client that is never started (constructing
one sends nothing), so every repr here is the repr of an idle object.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable, Iterator

import pytest

import aiocoord
import aiocoord.testing
from aiocoord._session._watch import PersistentWatch, Watch, WatchKind, WatchRegistry

MODULES = (aiocoord, aiocoord.testing)


def _exported() -> Iterator[tuple[str, object]]:
    """``(qualified name, object)`` for every name in the modules' ``__all__``."""
    for module in MODULES:
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


def _public_classes() -> dict[str, type]:
    """Every exported class by its exported name (generic aliases unwrapped to
    their class)."""
    classes: dict[str, type] = {}
    for name, obj in _exported():
        cls = typing.get_origin(obj) or obj
        if inspect.isclass(cls):
            classes[name] = cls
    return classes


def _function_of(member: object) -> Callable[..., object] | None:
    """The function behind a class attribute: a method, property getter, static or class
    method; None for anything else (constants, enum members, fields)."""
    if isinstance(member, property):
        member = member.fget
    elif isinstance(member, staticmethod | classmethod):
        member = member.__func__
    return member if inspect.isfunction(member) else None


def _has_docstring(obj: object) -> bool:
    return bool((getattr(obj, "__doc__", None) or "").strip())


def _walk_docstrings() -> tuple[set[str], list[str]]:
    """(members checked, members missing a docstring), each named where it is defined.

    Classes are checked on their own docstring (``__doc__`` is not inherited), and
    so are public functions. Methods and properties are checked in every aiocoord
    class of a public class's MRO, so a method a private base provides (``_Atomic.get``
    for AtomicLong) counts, once, in the class that defines it. Names with a leading
    underscore are exempt, the async protocol dunders among them.
    """
    checked: set[str] = set()
    missing: list[str] = []
    seen_classes: set[type] = set()
    for name, obj in _exported():
        target = typing.get_origin(obj) or obj
        if not (inspect.isclass(target) or inspect.isfunction(target)):
            continue  # constants such as OPEN_ACL_UNSAFE
        checked.add(name)
        if not _has_docstring(target):
            missing.append(name)
        if not inspect.isclass(target):
            continue
        for base in target.__mro__:
            if not base.__module__.startswith("aiocoord") or base in seen_classes:
                continue
            seen_classes.add(base)
            for attr, member in vars(base).items():
                function = _function_of(member)
                if attr.startswith("_") or function is None:
                    continue
                where = f"{base.__module__}.{base.__qualname__}.{attr}"
                checked.add(where)
                if not _has_docstring(function):
                    missing.append(where)
    return checked, sorted(set(missing))


def test_every_public_class_method_and_property_has_a_docstring() -> None:
    _checked, missing = _walk_docstrings()
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


def test_the_docstring_walk_reaches_members_of_private_bases() -> None:
    checked, _missing = _walk_docstrings()
    for expected in (
        "aiocoord.Mutex.acquire",  # a public class's own method
        "aiocoord._recipes.counters._counter._Atomic.get",  # from AtomicLong's private base
        "aiocoord._recipes._kit._holding.Hold.wait_lost",  # from SemaphoreLease's base
        "aiocoord.Client.session_id",  # a property
        "aiocoord.testing._proxy.TcpProxy.held",  # the test kit's
        "aiocoord.NoNodeError",  # an exception class
        "aiocoord.connect",  # a function
    ):
        assert expected in checked


# --- reprs ----------------------------------------------------------------------------

Factory = Callable[[aiocoord.Client], object]

FENCE = aiocoord.Fence("/lock/_c_x-lock-0000000001", "/lock")

REPRS: list[tuple[str, Factory, tuple[str, ...]]] = [
    # (the name the repr must show, how to build the object, other text it must show)
    ("Client", lambda client: client, ("new",)),
    ("Transaction", lambda client: client.transaction(), ("ops=0",)),
    (
        "Transaction",
        lambda client: client.transaction().create("/a").set("/b", b"x").guard(FENCE),
        ("ops=2", "guards=1"),
    ),
    ("Pipeline", lambda client: client.pipeline().get("/a").exists("/b"), ("ops=2",)),
    ("Mutex", lambda client: aiocoord.Mutex(client, "/lock"), ("'/lock'", "held=False")),
    ("HoldContext", lambda client: aiocoord.Mutex(client, "/lock").hold(), ("'/lock'",)),
    ("ReadWriteLock", lambda client: aiocoord.ReadWriteLock(client, "/rw"), ("'/rw'",)),
    ("ReadWriteLock.read_lock", lambda client: aiocoord.ReadWriteLock(client, "/rw").read_lock, ()),
    (
        "ReadWriteLock.write_lock",
        lambda client: aiocoord.ReadWriteLock(client, "/rw").write_lock,
        (),
    ),
    ("Semaphore", lambda client: aiocoord.Semaphore(client, "/sem", 3), ("'/sem'", "max_leases=3")),
    (
        "SemaphoreLease",
        lambda client: aiocoord.SemaphoreLease(
            aiocoord.Semaphore(client, "/sem", 3), "/sem/leases/lease-0000000001"
        ),
        ("lease-0000000001",),
    ),
    ("SemaphoreMutex", lambda client: aiocoord.SemaphoreMutex(client, "/smx"), ("'/smx'",)),
    ("HoldContext", lambda client: aiocoord.SemaphoreMutex(client, "/smx").hold(), ("'/smx'",)),
    (
        "MultiLock",
        lambda client: aiocoord.MultiLock(
            [aiocoord.Mutex(client, "/a"), aiocoord.SemaphoreMutex(client, "/b")]
        ),
        ("'/a'", "'/b'", "held=False"),
    ),
    (
        "Lease",
        lambda client: aiocoord.Lease(client, "/lease", 5.0, participant_id="worker-1"),
        ("worker-1",),
    ),
    (
        "HoldContext",
        lambda client: aiocoord.Lease(client, "/lease", 5.0, participant_id="w").hold(),
        ("'/lease'",),
    ),
    (
        "HoldContext",
        lambda client: aiocoord.LeaderElection(client, "/election", participant_id="me").hold(),
        ("'/election'", "inactive"),
    ),
    (
        "HoldContext",
        lambda client: aiocoord.LeaderLatch(client, "/latch", participant_id="me").hold(timeout=1),
        ("'/latch'",),
    ),
    ("AtomicLong", lambda client: aiocoord.AtomicLong(client, "/long"), ("'/long'",)),
    (
        "AtomicLong",
        lambda client: aiocoord.AtomicLong(
            client, "/long", promoted_to_lock=aiocoord.PromotedToLock("/long-lock")
        ),
        ("'/long-lock'",),
    ),
    ("AtomicInt", lambda client: aiocoord.AtomicInt(client, "/int"), ("'/int'",)),
    ("AtomicBytes", lambda client: aiocoord.AtomicBytes(client, "/bytes"), ("'/bytes'",)),
    ("SharedCount", lambda client: aiocoord.SharedCount(client, "/count", 7), ("not started",)),
    ("ChangeStream", lambda client: client.state_changes(), ("connection states", "pending=0")),
    (
        "ChangeStream",
        lambda client: aiocoord.SharedCount(client, "/count", 0).changes(),
        ("'/count'",),
    ),
    (
        "ChangeStream",
        lambda client: aiocoord.GroupMember(client, "/group", participant_id="a").changes(),
        ("'/group'",),
    ),
    ("TcpProxy", lambda client: aiocoord.testing.TcpProxy("127.0.0.1", 1), ("not started",)),
    ("Codec.LONG", lambda client: aiocoord.Codec.LONG, ()),
    ("Codec.INT", lambda client: aiocoord.Codec.INT, ()),
    ("Codec.BYTES", lambda client: aiocoord.Codec.BYTES, ()),
    ("Codec.UTF8", lambda client: aiocoord.Codec.UTF8, ()),
    ("Codec.JSON", lambda client: aiocoord.Codec.JSON, ()),
    ("Fence", lambda client: FENCE, ("'/lock'",)),
    ("Barrier", lambda client: aiocoord.Barrier(client, "/gate"), ("'/gate'",)),
    (
        "DoubleBarrier",
        lambda client: aiocoord.DoubleBarrier(client, "/race", 5),
        ("'/race'", "members=5", "outside"),
    ),
    (
        "DoubleBarrierEntry",
        lambda client: aiocoord.DoubleBarrier(client, "/race", 5).entered(timeout=2.0),
        ("'/race'", "timeout=2.0"),
    ),
    (
        "LeaderLatch",
        lambda client: aiocoord.LeaderLatch(client, "/latch", participant_id="me"),
        ("'/latch'", "'me'"),
    ),
    (
        "LeaderElection",
        lambda client: aiocoord.LeaderElection(client, "/election", participant_id="me"),
        ("'/election'", "'me'"),
    ),
    (
        "LeaderElectionGroup",
        lambda client: aiocoord.LeaderElectionGroup(client, ["/a", "/b"], participant_id="p"),
        ("'p'", "elections=2", "leading=0"),
    ),
    (
        "LeaderObserver",
        lambda client: aiocoord.LeaderObserver(client, "/election"),
        ("'/election'",),
    ),
    (
        "GroupMember",
        lambda client: aiocoord.GroupMember(
            client, "/group", participant_id="web-1", data=b"10.0.0.1"
        ),
        ("'/group/web-1'", "member=False"),
    ),
    (
        "Partitioner",
        lambda client: aiocoord.Partitioner(client, "/work", ["a"], participant_id="w-1"),
        ("'/work/member-w-1'", "new", "owned=0"),
    ),
    ("TreeCache", lambda client: aiocoord.TreeCache(client, "/config"), ("'/config'", "new")),
    (
        "ServiceDiscovery",
        lambda client: aiocoord.ServiceDiscovery(client, "/services"),
        ("'/services'", "new", "registered=0"),
    ),
    (
        "ServiceCache",
        lambda client: aiocoord.ServiceDiscovery(client, "/services").cache("api"),
        ("'/services/api'", "new", "instances=0"),
    ),
    (
        "ServiceProvider",
        lambda client: aiocoord.ServiceDiscovery(client, "/services").provider("api"),
        ("'/services/api'", "new", "round_robin", "in_flight=0"),
    ),
    (
        "DiscoveryTransport",
        lambda client: aiocoord.DiscoveryTransport(
            aiocoord.ServiceDiscovery(client, "/services").provider("api"), retries=1
        ),
        ("'/services/api'", "retries=1"),
    ),
    (
        "ServiceCacheEvent",
        lambda client: aiocoord.ServiceCacheEvent(aiocoord.ServiceCacheEventType.RESYNCED),
        ("RESYNCED",),
    ),
    ("ChildrenCache", lambda client: aiocoord.ChildrenCache(client, "/hosts"), ("'/hosts'",)),
    ("NodeCache", lambda client: aiocoord.NodeCache(client, "/flag"), ("'/flag'", "nodes=0")),
    (
        "ChangeStream",
        lambda client: aiocoord.TreeCache(client, "/config").events(max_buffer=5),
        ("'/config'", "pending=0/5", "dropped=0"),
    ),
    (
        "CacheEvent",
        lambda client: aiocoord.CacheEvent(aiocoord.CacheEventType.DELETED, "/config/a"),
        ("deleted", "'/config/a'"),
    ),
    ("Queue", lambda client: aiocoord.Queue(client, "/jobs"), ("'/jobs'", "Codec.BYTES")),
    (
        "PriorityQueue",
        lambda client: aiocoord.PriorityQueue(client, "/jobs", codec=aiocoord.Codec.JSON),
        ("'/jobs'", "Codec.JSON"),
    ),
    (
        "DelayQueue",
        lambda client: aiocoord.DelayQueue(client, "/later", max_items=5),
        ("'/later'", "max_items=5"),
    ),
    ("IdQueue", lambda client: aiocoord.IdQueue(client, "/byid"), ("'/byid'",)),
    ("QueueTake", lambda client: aiocoord.Queue(client, "/jobs").take(), ("'/jobs'", "waiting")),
    (
        "ShardedCounter",
        lambda client: aiocoord.ShardedCounter(client, "/tickets", upper=1000),
        ("'/tickets'", "shards=8", "bounds=[0, 1000]"),
    ),
    ("CounterShard", lambda client: aiocoord.CounterShard(2, 3, 10), ("index=2", "quota=10")),
]
"""Objects with a hand-written repr, or a dataclass repr that is part of their design
(the other dataclasses, named tuples and enums are left to the coverage test below)."""


def _check_repr(text: str, name: str, fragments: tuple[str, ...]) -> None:
    assert " object at 0x" not in text, text
    assert name in text, text
    for fragment in fragments:
        assert fragment in text, (fragment, text)


@pytest.mark.parametrize(
    ("name", "make", "fragments"),
    REPRS,
    ids=[entry[0] for entry in REPRS],
)
def test_objects_print_readably(
    client: aiocoord.Client, name: str, make: Factory, fragments: tuple[str, ...]
) -> None:
    """Built outside any event loop and never started: a repr does no I/O and
    looks at no current task."""
    _check_repr(repr(make(client)), name, fragments)


async def test_watches_print_readably() -> None:
    registry = WatchRegistry()
    one_shot = Watch(registry, WatchKind.DATA, "/a", "/ns/a")
    persistent = PersistentWatch(
        registry, WatchKind.RECURSIVE, "/tree", "/ns/tree", lambda _watch: None
    )
    _check_repr(repr(one_shot), "Watch", ("'/a'", "pending"))
    _check_repr(repr(persistent), "PersistentWatch", ("'/tree'", "0 pending"))
    one_shot.cancel()
    await persistent.aclose()
    _check_repr(repr(one_shot), "Watch", ("done",))
    _check_repr(repr(persistent), "PersistentWatch", ("closed",))


async def test_reprs_still_work_once_the_client_is_closed(client: aiocoord.Client) -> None:
    objects = [make(client) for _name, make, _fragments in REPRS]
    changes = client.state_changes()
    await client.aclose()
    _check_repr(repr(client), "Client", ("closed",))
    _check_repr(repr(changes), "ChangeStream", ("ended",))
    for (name, _make, _fragments), obj in zip(REPRS, objects, strict=True):
        _check_repr(repr(obj), name, ())


# Public classes not built above, and why their instances print well anyway.
ABSTRACT = {
    "aiocoord.Lockable": "a Protocol: instances are the locks above",
    "aiocoord.ACLProvider": "a Protocol: instances are the callers' own functions",
    "aiocoord.SaslMechanism": "a Protocol: SaslDigest, SaslKerberos or the caller's own",
    "aiocoord.SaslExchange": "a Protocol: made by a SaslMechanism for each connection",
    "aiocoord.ItemCodec": "a Protocol: instances are Codec members or the caller's own",
    "aiocoord.RetryPolicy": "a base class: the policies are dataclasses",
    "aiocoord.ErrorPolicy": "a base class: the policies are dataclasses",
}
LAUNCHERS = {
    "aiocoord.testing.ZooKeeperServer": "launches a JVM: has its own repr",
    "aiocoord.testing.ZooKeeperEnsemble": "launches JVMs: has its own repr",
    "aiocoord.testing.KerberosKDC": "launches krb5kdc: has its own repr",
}
BUILT_BY_THE_CLIENT = {"Watch", "PersistentWatch"}
"""Checked by :func:`test_watches_print_readably`."""


def _generated_repr(cls: type) -> bool:
    """Whether Python writes the class's repr: dataclasses, named tuples, enums,
    exceptions, typed dicts."""
    return dataclasses.is_dataclass(cls) or issubclass(
        cls, tuple | dict | enum.Enum | BaseException
    )


def test_every_public_class_has_a_readable_repr_or_is_checked_above() -> None:
    covered = {name.split(".")[0] for name, _make, _fragments in REPRS} | BUILT_BY_THE_CLIENT
    unchecked = []
    for name, cls in _public_classes().items():
        if name in ABSTRACT or _generated_repr(cls):
            continue
        if name in LAUNCHERS:
            assert "__repr__" in vars(cls), name
            continue
        if cls.__name__ not in covered:
            unchecked.append(name)
    assert not unchecked, f"public classes with no repr check: {unchecked}"
