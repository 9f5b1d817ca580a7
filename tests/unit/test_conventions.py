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

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
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
}
"""Public classes with a ``fence()`` that are not holders themselves, and why."""

CONTRACT: dict[str, Callable[[object], bool]] = {
    "is_held": lambda m: isinstance(m, property),
    "wait_lost": is_async_method,
    "fence": is_plain_method,
    "fencing_token": lambda m: isinstance(m, property),
    "transaction": is_plain_method,
}
"""The holder contract: each member and the kind it must be."""


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


def test_every_hold_scope_is_the_kits_one() -> None:
    """One hold scope: every hold() returns a HoldContext (a QueueTake is one)."""
    assert issubclass(aiocoord.QueueTake, aiocoord.HoldContext)
    for name, cls in HOLDERS.items():
        if name in NO_HOLD_METHOD:
            continue
        returns = typing.get_type_hints(member(cls, "hold"))["return"]
        assert (typing.get_origin(returns) or returns) is aiocoord.HoldContext, name


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


# --- the walk itself --------------------------------------------------------------------------


def test_the_walk_reaches_inherited_members_and_generic_aliases() -> None:
    classes = public_classes()
    assert classes["aiocoord.ChangeStream"] is aiocoord.ChangeStream
    members = dict(public_members(aiocoord.AtomicLong))
    assert "get" in members  # from a private base
