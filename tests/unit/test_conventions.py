"""The API's conventions (docs/api.md, "Conventions"), checked over the whole public surface.

Each convention is one section below: a walk over the exported names, a list of
what breaks the convention, and a test that fails naming every offender. A new
public class or method is checked without being listed here; a deliberate
exception is listed, with its reason, next to the check it is exempt from.

To add a convention: write a ``_<convention>_violations()`` function that
returns the offenders as readable strings, and a test asserting it is empty
(``_assert_none``). The helpers at the top walk the surface once.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
)
from types import ModuleType

import aiocoord
import aiocoord._exceptions
import aiocoord.testing

MODULES: tuple[ModuleType, ...] = (aiocoord, aiocoord.testing)


# --- walking the public surface ----------------------------------------------------------


def exported() -> Iterator[tuple[str, object]]:
    """``(qualified name, object)`` for every name in the public modules' ``__all__``."""
    for module in MODULES:
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


@functools.cache
def public_classes() -> dict[str, type]:
    """Every exported class by its qualified exported name (generic aliases unwrapped)."""
    classes: dict[str, type] = {}
    for name, obj in exported():
        cls = typing.get_origin(obj) or obj
        if inspect.isclass(cls):
            classes[name] = cls
    return classes


def public_members(cls: type) -> Iterator[tuple[str, object]]:
    """``(name, raw class attribute)`` for every public member of ``cls``, inherited ones
    included (found along the MRO, as attribute lookup finds them)."""
    seen: set[str] = set()
    for base in cls.__mro__:
        if base is object:
            continue
        for name, member in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield name, member


def member(cls: type, name: str) -> object:
    """The raw attribute ``name`` of ``cls`` as found along the MRO (a property, a
    function, a staticmethod ...), or None."""
    for base in cls.__mro__:
        if name in vars(base):
            return vars(base)[name]
    return None


def is_async_method(obj: object) -> bool:
    return inspect.iscoroutinefunction(obj)


def is_plain_method(obj: object) -> bool:
    return inspect.isfunction(obj) and not inspect.iscoroutinefunction(obj)


def _assert_none(violations: list[str], convention: str) -> None:
    assert not violations, f"{len(violations)} break the convention {convention!r}:\n" + "\n".join(
        violations
    )


# --- 1. closing: an async close is aclose() ---------------------------------------------------


def closing_violations() -> list[str]:
    """Public classes with an ``async def close``: the async spelling is ``aclose()``
    (``close()`` may exist only as a plain synchronous method)."""
    found = []
    for name, cls in public_classes().items():
        close = member(cls, "close")
        if close is not None and not is_plain_method(close):
            found.append(f"{name}.close is {type(close).__name__}, not a plain method")
        aclose = member(cls, "aclose")
        if aclose is not None and not is_async_method(aclose):
            found.append(f"{name}.aclose is not an async def")
    return found


def test_an_async_close_is_aclose_everywhere() -> None:
    _assert_none(closing_violations(), "an async close is aclose()")


# --- 2. holders: one contract -------------------------------------------------------------

_CLIENT = aiocoord.connect("127.0.0.1:1")
"""Never started: constructing recipes on it sends nothing."""

HOLDERS: dict[str, type] = {
    "Mutex": aiocoord.Mutex,
    "ReadWriteLock.read_lock": type(aiocoord.ReadWriteLock(_CLIENT, "/rw").read_lock),
    "ReadWriteLock.write_lock": type(aiocoord.ReadWriteLock(_CLIENT, "/rw").write_lock),
    "SemaphoreMutex": aiocoord.SemaphoreMutex,
    "MultiLock": aiocoord.MultiLock,
    "SemaphoreLease": aiocoord.SemaphoreLease,
    "Lease": aiocoord.Lease,
    "LeaderLatch": aiocoord.LeaderLatch,
    "LeaderElection": aiocoord.LeaderElection,
    "QueueTake": aiocoord.QueueTake,
}
"""Every holder, by the name the docs give it."""

NO_HOLD_METHOD = {
    "QueueTake": "it is the block itself: async with queue.take() as item",
}
"""Holders without ``hold()``, and why: where a block makes no sense, or is the holder."""

HOLD_WITHOUT_TIMEOUT = {
    "Lease": "never waits for another holder: taking it is one try",
    "SemaphoreLease": "already granted: its block only keeps it",
}
"""Holders whose ``hold()`` takes no ``timeout``, and why."""

NOT_HOLDERS = {
    "aiocoord.Lockable": "a Protocol: what MultiLock needs of the locks it takes",
    "aiocoord.Partitioner": "holds many items at once: fence(item) and fencing_tokens[item]",
}
"""Public classes with a ``fence()`` that are not holders themselves, and why."""

CONTRACT: dict[str, Callable[[object], bool]] = {
    "is_held": lambda m: isinstance(m, property),
    "wait_lost": lambda m: is_async_method(m) and _timeout_answers_a_bool(m),
    "fence": is_plain_method,
    "fencing_token": lambda m: isinstance(m, property),
    "transaction": is_plain_method,
}
"""The holder contract: each member and the kind it must be."""


def _timeout_answers_a_bool(function: object) -> bool:
    """``function`` takes ``timeout=None`` keyword-only and answers a bool (did it happen)."""
    timeout = _keyword(function, "timeout")
    returns = typing.get_type_hints(function).get("return")  # type: ignore[arg-type]
    return timeout is not None and timeout.default is None and returns is bool


def _keyword(function: object, name: str) -> inspect.Parameter | None:
    assert callable(function)
    parameter = inspect.signature(function).parameters.get(name)
    return parameter if parameter is not None and parameter.kind is parameter.KEYWORD_ONLY else None


def holder_violations() -> list[str]:
    found = []
    for name, cls in HOLDERS.items():
        for attr, right_kind in CONTRACT.items():
            if not right_kind(member(cls, attr)):
                found.append(f"{name}.{attr} is missing or not the right kind")
        hold = member(cls, "hold")
        if name in NO_HOLD_METHOD:
            continue
        if not is_plain_method(hold):
            found.append(f"{name}.hold is missing or not a plain method")
            continue
        cancel = _keyword(hold, "cancel_on_loss")
        if cancel is None or cancel.default is not True:
            found.append(f"{name}.hold has no keyword-only cancel_on_loss=True")
        timeout = _keyword(hold, "timeout")
        if name not in HOLD_WITHOUT_TIMEOUT and (timeout is None or timeout.default is not None):
            found.append(f"{name}.hold has no keyword-only timeout=None")
    return found


def test_every_holder_has_the_whole_contract() -> None:
    _assert_none(holder_violations(), "every holder has the holder contract")


def test_every_class_with_a_fence_is_checked_as_a_holder() -> None:
    """A new holder (anything handing out a fence) joins HOLDERS, and so the check."""
    checked = set(HOLDERS.values())
    unchecked = [
        name
        for name, cls in public_classes().items()
        if callable(member(cls, "fence")) and cls not in checked and name not in NOT_HOLDERS
    ]
    assert unchecked == [], f"holders not in HOLDERS: {unchecked}"


def test_a_non_holder_with_fences_has_its_tokens_as_a_property() -> None:
    """A holder's ``fencing_token`` is a property; a class that fences many things
    (fence(item)) has their tokens as one read-only mapping property, not a method."""
    for name in NOT_HOLDERS:
        cls = public_classes()[name]
        if not callable(member(cls, "fence")) or name == "aiocoord.Lockable":
            continue
        assert member(cls, "fencing_token") is None, f"{name}.fencing_token"
        assert isinstance(member(cls, "fencing_tokens"), property), f"{name}.fencing_tokens"


LOSES_TO_CONNECTION_STATES = (
    aiocoord.Mutex,
    aiocoord.ReadWriteLock,
    aiocoord.Semaphore,
    aiocoord.SemaphoreMutex,
    aiocoord.LeaderLatch,
    aiocoord.LeaderElection,
    aiocoord.LeaderElectionGroup,
    aiocoord.Queue,
    aiocoord.Partitioner,
    aiocoord.GroupMember,
)
"""Recipes whose hold, leadership, take, items or membership a connection state can end."""


def test_what_a_connection_state_can_end_takes_a_keyword_error_policy() -> None:
    missing = []
    for cls in LOSES_TO_CONNECTION_STATES:
        parameter = _keyword(cls.__init__, "error_policy")
        if parameter is None or parameter.default is not None:
            missing.append(cls.__name__)
    assert missing == [], f"no keyword-only error_policy=None: {missing}"


def test_every_hold_scope_is_the_kits_one() -> None:
    """One hold scope: every hold() returns a HoldContext (a QueueTake is one)."""
    assert issubclass(aiocoord.QueueTake, aiocoord.HoldContext)
    for name, cls in HOLDERS.items():
        if name in NO_HOLD_METHOD:
            continue
        returns = typing.get_type_hints(member(cls, "hold"))["return"]
        assert (typing.get_origin(returns) or returns) is aiocoord.HoldContext, name


# --- 3. timeouts: keyword-only ----------------------------------------------------------------


def callables() -> Iterator[tuple[str, Callable[..., object]]]:
    """``(name, function)`` for every exported function and every public method,
    ``__init__`` included, of every exported class (exceptions aside: their
    constructors are the library's own business)."""
    for name, obj in exported():
        if inspect.isfunction(obj):
            yield name, obj
    for name, cls in public_classes().items():
        if issubclass(cls, BaseException):
            continue
        init = member(cls, "__init__")
        if inspect.isfunction(init) and init.__module__.startswith("aiocoord"):
            yield f"{name}.__init__", init
        for attr, raw in public_members(cls):
            function = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            if inspect.isfunction(function):
                yield f"{name}.{attr}", function


def parameters(function: Callable[..., object]) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())


def positional_timeouts() -> list[str]:
    """Parameters named ``timeout`` (or ``*_timeout``) that can be passed by position."""
    return [
        f"{name}({p.name})"
        for name, function in callables()
        for p in parameters(function)
        if (p.name == "timeout" or p.name.endswith("_timeout")) and p.kind is not p.KEYWORD_ONLY
    ]


def test_timeout_is_keyword_only_everywhere() -> None:
    _assert_none(positional_timeouts(), "timeout is keyword-only")


# --- 4. node data and identity: one spelling each ------------------------------------------


def recipe_constructors() -> Iterator[tuple[str, list[inspect.Parameter]]]:
    """The constructors that take a client first: the recipes'."""
    for name, function in callables():
        if name.endswith(".__init__"):
            params = parameters(function)[1:]
            if params and params[0].name == "client":
                yield name.removesuffix(".__init__"), params


OTHER_SPELLINGS = {
    "member_id": "participant_id",
    "holder": "participant_id",
    "holder_id": "participant_id",
    "identifier": "participant_id",
    "identity": "participant_id",
    "node_data": "data",
    "payload": "data",
}
"""Names a recipe constructor must not use for node data or identity: what to say instead."""


def data_and_identity_violations() -> list[str]:
    found = []
    for name, params in recipe_constructors():
        for p in params:
            if p.name in OTHER_SPELLINGS:
                found.append(f"{name}({p.name}): spell it {OTHER_SPELLINGS[p.name]}")
            expected = {"data": "bytes | None", "participant_id": "str | None"}.get(p.name)
            if expected is None:
                continue
            if p.kind is not p.KEYWORD_ONLY or p.default is not None:
                found.append(f"{name}({p.name}): keyword-only, default None")
            if str(p.annotation).replace("'", "") != expected:
                found.append(f"{name}({p.name}): annotated {p.annotation}, not {expected}")
    return found


def test_node_data_and_identity_have_one_spelling() -> None:
    _assert_none(data_and_identity_violations(), "data= and participant_id=, keyword-only")


def acl_constructor_violations() -> list[str]:
    """Every ``ACL`` class method builds one entry the same way: the id's parts
    first, then ``perms`` defaulting to ``Perm.ALL``, then keyword-only options."""
    found = []
    for name, member in vars(aiocoord.ACL).items():
        if not isinstance(member, classmethod):
            continue
        params = list(inspect.signature(getattr(aiocoord.ACL, name)).parameters.values())
        positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        if not positional or positional[-1].name != "perms":
            found.append(f"ACL.{name}: perms is not the last positional parameter")
        elif positional[-1].default is not aiocoord.Perm.ALL:
            found.append(f"ACL.{name}: perms does not default to Perm.ALL")
        if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
            found.append(f"ACL.{name}: takes *args or **kwargs")
    return found


def test_acl_entries_are_made_one_way_for_every_scheme() -> None:
    assert len([m for m in vars(aiocoord.ACL).values() if isinstance(m, classmethod)]) >= 7
    _assert_none(acl_constructor_violations(), "ACL constructors: (id parts, perms=Perm.ALL)")


# --- 5. options: explicit keywords on every constructor ----------------------------------


def constructors_with_var_keywords() -> list[str]:
    found = []
    for name, function in callables():
        constructor = name.endswith(".__init__") or name == "aiocoord.connect"
        if constructor and any(p.kind is p.VAR_KEYWORD for p in parameters(function)):
            found.append(name)
    return found


def test_no_constructor_takes_var_keywords() -> None:
    _assert_none(constructors_with_var_keywords(), "explicit keyword options, no **options")


# --- 6. streams: one ChangeStream, and listeners beside it -----------------------------------

_ASYNC_ITERATORS = (AsyncIterator, AsyncGenerator, AsyncIterable)


def returned_type(function: Callable[..., object]) -> object:
    try:
        return typing.get_type_hints(function).get("return")
    except NameError:  # an annotation only a type checker can resolve
        return inspect.signature(function).return_annotation


def returns_a_stream(function: Callable[..., object]) -> bool | None:
    """True if ``function`` returns a ChangeStream, False if it returns another
    async iterator, None if neither."""
    returned = returned_type(function)
    if isinstance(returned, str):
        if "ChangeStream" in returned or "PersistentWatch" in returned:
            return True
        return False if any(t.__name__ in returned for t in _ASYNC_ITERATORS) else None
    origin = typing.get_origin(returned) or returned
    if inspect.isclass(origin):
        if issubclass(origin, aiocoord.ChangeStream):
            return True
        if issubclass(origin, _ASYNC_ITERATORS) or hasattr(origin, "__anext__"):
            return False
    return None


def stream_violations() -> list[str]:
    found = []
    for name, function in callables():
        if name.rsplit(".", 1)[-1].startswith("_"):
            continue  # __init__: a constructor is no stream method
        if returns_a_stream(function) is False:
            found.append(f"{name} returns {returned_type(function)}, not a ChangeStream")
    return found


def test_every_stream_is_a_change_stream() -> None:
    _assert_none(stream_violations(), "one change-stream shape: ChangeStream")


def missing_listeners() -> list[str]:
    """Classes with a method returning a stream but no add_listener/remove_listener."""
    found = []
    for name, cls in public_classes().items():
        if issubclass(cls, aiocoord.ChangeStream):
            continue  # a stream itself
        streams = [
            attr
            for attr, raw in public_members(cls)
            if inspect.isfunction(raw) and returns_a_stream(raw)
        ]
        if streams and not all(
            inspect.isfunction(member(cls, m)) for m in ("add_listener", "remove_listener")
        ):
            found.append(f"{name} ({', '.join(streams)})")
    return found


def test_every_class_with_a_stream_has_listeners() -> None:
    _assert_none(missing_listeners(), "add_listener/remove_listener beside every stream")


def test_the_change_stream_is_an_async_iterator_and_context_manager_with_aclose() -> None:
    stream = aiocoord.ChangeStream
    for name in ("__aiter__", "__anext__", "aclose", "__aenter__", "__aexit__"):
        assert callable(getattr(stream, name, None)), name
    assert is_async_method(stream.aclose)


# --- 7. who is there: one Participant -------------------------------------------------------

OTHER_WHO_NAMES = {"members", "lease_nodes", "candidates", "contenders", "holders"}
"""Method names a "who is there" method must not have: it is ``participants()``."""


def who_is_there_violations() -> list[str]:
    found = []
    for name, cls in public_classes().items():
        for attr, raw in public_members(cls):
            if not inspect.isfunction(raw):
                continue
            if attr in OTHER_WHO_NAMES:
                found.append(f"{name}.{attr}: call it participants()")
            if attr == "participants" or (attr == "leader" and member(cls, "participants")):
                returned = returned_type(raw)
                wanted = (
                    list[aiocoord.Participant]
                    if attr == "participants"
                    else aiocoord.Participant | None
                )
                if returned != wanted:
                    found.append(f"{name}.{attr} returns {returned}, not {wanted}")
    return found


def test_who_is_there_is_one_participant_type() -> None:
    _assert_none(who_is_there_violations(), "participants() -> list[Participant]")
    assert dataclasses.is_dataclass(aiocoord.Participant)
    assert aiocoord.Participant.__dataclass_params__.frozen  # type: ignore[attr-defined]


# --- 8. errors: all exported, no aliases ------------------------------------------------------


def unexported_errors() -> list[str]:
    """Exception classes defined in ``aiocoord._exceptions`` that ``aiocoord`` does not
    export under their own name."""
    found = []
    for name, obj in vars(aiocoord._exceptions).items():
        if name.startswith("_") or not (inspect.isclass(obj) and issubclass(obj, BaseException)):
            continue
        if obj.__module__ not in ("aiocoord", "aiocoord._exceptions"):
            continue  # imported there, not defined there
        if getattr(aiocoord, name, None) is not obj or name not in aiocoord.__all__:
            found.append(name)
    return found


def test_every_error_the_library_defines_is_exported() -> None:
    _assert_none(unexported_errors(), "every error is exported from aiocoord")


def test_the_errors_module_lists_every_error_it_defines() -> None:
    defined = {
        name
        for name, obj in vars(aiocoord._exceptions).items()
        if not name.startswith("_") and inspect.isclass(obj) and issubclass(obj, BaseException)
    }
    assert defined <= set(aiocoord._exceptions.__all__), defined - set(aiocoord._exceptions.__all__)


def aliases() -> list[str]:
    """Objects exported under more than one public name."""
    names: dict[int, list[str]] = {}
    for name, obj in exported():
        if inspect.isclass(obj) or inspect.isfunction(obj):
            names.setdefault(id(obj), []).append(name)
    return [" = ".join(group) for group in names.values() if len(group) > 1]


def test_no_object_has_two_public_names() -> None:
    _assert_none(aliases(), "no public aliases")


def test_lost_holds_share_one_base() -> None:
    for error in (aiocoord.LockLostError, aiocoord.LeadershipLostError, aiocoord.TakeLostError):
        assert issubclass(error, aiocoord.HoldLostError), error
    assert issubclass(aiocoord.HoldLostError, aiocoord.OwnershipError)


# --- 9. try_ answers a bool; wait_ takes a timeout ------------------------------------------


def method_name(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def try_violations() -> list[str]:
    """``try_<verb>()`` answers "did it happen": a bool. What answers more (leases, a
    counter's AtomicValue) is no ``try_`` method (``Semaphore.acquire(n, timeout=0)``,
    ``AtomicLong.set()``)."""
    return [
        f"{name} returns {returned_type(function)}"
        for name, function in callables()
        if method_name(name).startswith("try_") and returned_type(function) is not bool
    ]


def test_every_try_method_answers_a_bool() -> None:
    _assert_none(try_violations(), "try_<verb>() returns a bool")


def wait_violations() -> list[str]:
    """``wait_<condition>()`` waits, and takes a keyword-only ``timeout``; a name that
    waits without saying for what (``wait_for_*``) is the old spelling."""
    found = []
    for name, function in callables():
        short = method_name(name)
        if not short.startswith("wait_"):
            continue
        if short.startswith("wait_for_"):
            found.append(f"{name}: say the condition, wait_<condition>()")
        if not is_async_method(function):
            found.append(f"{name} is not an async def")
        if _keyword(function, "timeout") is None:
            found.append(f"{name} has no keyword-only timeout")
    return found


def test_every_wait_is_async_and_takes_a_timeout() -> None:
    _assert_none(wait_violations(), "wait_<condition>(*, timeout=...)")


# --- 10. streams and listeners: which verb means what ----------------------------------------

STREAM_VERBS = {
    "changes": "the object's own state, now and after every change",
    "events": "a view's events (a cache's, a service cache's)",
    "add_watch": "ZooKeeper's own name for a persistent watch (Client)",
}
"""What a stream-returning method may be called; ``<what>_changes()`` follows
something else the object can see (``Client.state_changes()``, ``data_changes(path)``,
``children_changes(path)``, a leader's ``leader_changes()``)."""

LISTENED_STREAM = {"aiocoord.Client": "state_changes"}
"""Classes whose listeners follow another stream than ``changes()``/``events()``, and
which: a client's listeners hear connection states, as kazoo's do."""


def stream_verb_violations() -> list[str]:
    found = []
    for name, cls in public_classes().items():
        for attr, raw in public_members(cls):
            if not (inspect.isfunction(raw) and returns_a_stream(raw)):
                continue
            if attr not in STREAM_VERBS and not attr.endswith("_changes"):
                found.append(f"{name}.{attr}: changes(), events() or <what>_changes()")
    return found


def test_every_stream_method_has_one_of_the_verbs() -> None:
    _assert_none(stream_verb_violations(), "changes() / events() / <what>_changes()")


def _stream_item(function: object) -> object:
    returned = returned_type(function)  # type: ignore[arg-type]
    args = typing.get_args(returned)
    return args[0] if args else None


def listener_pairing_violations() -> list[str]:
    """``add_listener(callback)`` is called with what the class's own stream yields:
    ``changes()``, else ``events()`` (a view's), else the one named in LISTENED_STREAM."""
    found = []
    for name, cls in public_classes().items():
        add = member(cls, "add_listener")
        if not inspect.isfunction(add):
            continue
        stream_name = LISTENED_STREAM.get(name) or next(
            (verb for verb in ("changes", "events") if inspect.isfunction(member(cls, verb))),
            None,
        )
        if stream_name is None:
            found.append(f"{name} has listeners but no changes() or events()")
            continue
        callback = typing.get_type_hints(add).get("callback")
        heard = typing.get_args(callback)[0] if callback is not None else None
        yielded = _stream_item(member(cls, stream_name))
        if heard != [yielded]:
            found.append(f"{name}: listeners hear {heard}, {stream_name}() yields {yielded}")
    return found


def test_listeners_hear_what_the_own_stream_yields() -> None:
    _assert_none(listener_pairing_violations(), "add_listener mirrors changes()/events()")


# --- 11. constructors: the client first, then the path ---------------------------------------

OTHER_SECOND_PARAMETERS = {
    "aiocoord.LeaderElectionGroup": "paths: one election per path",
}
"""Recipes whose second parameter is not ``path``, and why."""


def constructor_order_violations() -> list[str]:
    found = []
    for name, function in callables():
        if not name.endswith(".__init__"):
            continue
        owner = name.removesuffix(".__init__")
        names = [p.name for p in parameters(function)[1:]]
        if "client" in names and names[0] != "client":
            found.append(f"{owner}: the client comes first")
        first = names[:1] == ["client"] and owner not in OTHER_SECOND_PARAMETERS
        if first and names[1:2] != ["path"]:
            found.append(f"{owner}({', '.join(names[:2])}): then the path, as path")
    return found


def test_recipes_take_the_client_then_the_path() -> None:
    _assert_none(constructor_order_violations(), "Recipe(client, path, ...)")


# --- 12. public signatures name public types -------------------------------------------------

MADE_BY_THE_LIBRARY = {
    "aiocoord.Watch": "client.watch_*()",
    "aiocoord.PersistentWatch": "client.add_watch()",
    "aiocoord.Transaction": "client.transaction(), a holder's transaction()",
    "aiocoord.Pipeline": "client.pipeline()",
    "aiocoord.HoldContext": "a holder's hold()",
    "aiocoord.QueueTake": "a queue's take()",
}
"""Classes a caller is handed and never builds, and what hands them out: their
constructors are the library's own, so they may take its private parts."""


def _hint_namespace() -> dict[str, object]:
    names: dict[str, object] = {name: getattr(aiocoord, name) for name in aiocoord.__all__}
    try:
        import httpx  # the discovery transport's types, for those who use it

        names["httpx"] = httpx
    except ImportError:  # pragma: no cover - httpx is a test dependency
        pass
    return names


def _private_types(annotation: object, public: set[int]) -> Iterator[str]:
    """The aiocoord types ``annotation`` names that are not exported."""
    if isinstance(annotation, typing.TypeVar) or annotation is None:
        return
    origin = typing.get_origin(annotation)
    for candidate in (origin, annotation) if origin is not None else (annotation,):
        module = getattr(candidate, "__module__", "") or ""
        if inspect.isclass(candidate) and module.startswith("aiocoord"):
            if id(candidate) not in public:
                yield f"{module}.{candidate.__qualname__}"
            break
    for arg in typing.get_args(annotation):
        if not isinstance(arg, list | tuple):
            yield from _private_types(arg, public)
        else:
            for item in arg:
                yield from _private_types(item, public)


def private_type_violations() -> list[str]:
    """Public functions, methods and properties whose annotations name a type a
    caller cannot import (a private class, a Protocol of the library's own)."""
    public = {id(obj) for _name, obj in exported()}
    namespace = _hint_namespace()
    found = []
    signatures: list[tuple[str, object]] = list(callables())
    for name, cls in public_classes().items():
        for attr, raw in public_members(cls):
            if isinstance(raw, property) and raw.fget is not None:
                signatures.append((f"{name}.{attr}", raw.fget))
    for name, function in signatures:
        if name.removesuffix(".__init__") in MADE_BY_THE_LIBRARY:
            continue
        hints = typing.get_type_hints(function, localns=namespace)
        for parameter, annotation in hints.items():
            for private in _private_types(annotation, public):
                found.append(f"{name}({parameter}): {private}")
    return found


def test_no_public_signature_names_a_private_type() -> None:
    _assert_none(private_type_violations(), "public signatures name exported types")


def test_the_read_write_sides_are_mutexes_to_a_caller() -> None:
    """Their classes are private: a caller names them ``Mutex``, which they are."""
    lock = aiocoord.ReadWriteLock(_CLIENT, "/rw")
    hints = typing.get_type_hints(aiocoord.ReadWriteLock.__init__)
    assert isinstance(lock.read_lock, aiocoord.Mutex), hints
    assert isinstance(lock.write_lock, aiocoord.Mutex)


# --- 13. no public **kwargs --------------------------------------------------------------------

VAR_KEYWORDS = {
    "aiocoord.Client.create": "CreateOptions, one option set for every create",
    "aiocoord.Client.create_with_stat": "CreateOptions, as create()",
    "aiocoord.Transaction.create": "CreateOptions, as Client.create()",
    "aiocoord.Pipeline.create": "CreateOptions, as Client.create()",
    "aiocoord.Client.retry": "forwards the caller's own arguments to the caller's function",
}
"""Public callables that take ``**kwargs``, and why: a public TypedDict that is the
only spelling of its options, or arguments that are the caller's, not ours."""


def var_keyword_violations() -> list[str]:
    return [
        name
        for name, function in callables()
        if any(p.kind is p.VAR_KEYWORD for p in parameters(function)) and name not in VAR_KEYWORDS
    ]


def test_no_public_callable_takes_var_keywords() -> None:
    _assert_none(var_keyword_violations(), "explicit keyword parameters, no **kwargs")


# --- 14. the atomics' options ---------------------------------------------------------------

ATOMIC_ONLY_OPTIONS = {
    "AtomicLong": {
        "coalesce": "shares writes of concurrent adds: sums of 64-bit deltas",
        "combine": "queues adds in <path>/combining, applied as one 64-bit sum",
    },
}
"""Options only some atomics take, and why: coalescing and combining merge adds into
one sum; AtomicBytes applies functions, which do not merge, and AtomicInt is
Curator's 32-bit counter, kept as plain compare-and-set (AtomicLong is the fast one)."""


def test_the_atomics_take_the_same_options_but_the_listed_ones() -> None:
    atomics = {cls.__name__: cls for cls in (aiocoord.AtomicLong, aiocoord.AtomicInt)}
    atomics["AtomicBytes"] = aiocoord.AtomicBytes
    options = {
        name: {p.name for p in parameters(cls.__init__)[3:]} for name, cls in atomics.items()
    }
    extra = {name: set(ATOMIC_ONLY_OPTIONS.get(name, {})) for name in atomics}
    shared = {name: found - extra[name] for name, found in options.items()}
    assert len({frozenset(found) for found in shared.values()}) == 1, shared
    assert all(extra[name] <= options[name] for name in atomics), options


# --- 15. one signature where two recipes do one thing --------------------------------------

SAME_SIGNATURES = [
    ("LeaderLatch", "LeaderElection", "__init__"),
    ("LeaderLatch", "LeaderElection", "hand_over"),
    ("LeaderLatch", "LeaderElection", "resign"),
    ("LeaderLatch", "LeaderElection", "hold"),
]
"""Members two recipes share: the same parameters (the leaders share one base)."""


def test_the_leaders_share_their_signatures() -> None:
    for first, second, attr in SAME_SIGNATURES:
        a = inspect.signature(member(getattr(aiocoord, first), attr))  # type: ignore[arg-type]
        b = inspect.signature(member(getattr(aiocoord, second), attr))  # type: ignore[arg-type]
        assert list(a.parameters) == list(b.parameters), (first, second, attr)


SCOPED_AWAITABLES = {
    "aiocoord.Watch": "awaiting it waits for its one event; `async with` only bounds its "
    "life (cancelled on exit): two operations, not one answered two ways",
}


def test_no_public_class_is_a_hand_written_coroutine() -> None:
    """An awaitable that is also a context manager answers one way when awaited and
    another in ``async with``: a method is an ``async def`` or returns a context
    manager, never both (``DoubleBarrier.enter()`` and ``entered()``)."""
    found = [
        name
        for name, cls in public_classes().items()
        if name not in SCOPED_AWAITABLES
        and (
            issubclass(cls, Coroutine)
            or (
                callable(getattr(cls, "__await__", None))
                and callable(getattr(cls, "__aenter__", None))
            )
        )
    ]
    assert found == []
    assert returned_type(aiocoord.DoubleBarrier.enter) is bool


# --- the walk itself --------------------------------------------------------------------------


def test_the_walk_reaches_inherited_members_and_generic_aliases() -> None:
    classes = public_classes()
    assert classes["aiocoord.ChangeStream"] is aiocoord.ChangeStream
    members = dict(public_members(aiocoord.AtomicLong))
    assert "get" in members  # from a private base
