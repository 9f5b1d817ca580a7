"""A repr never fails, also for an object whose constructor refused its argument
half-way: tracebacks, debuggers and loggers show such objects (``self`` in the
failing frame), and a repr that raises there hides the first error behind a second."""

from __future__ import annotations

import types

import pytest

from aiocoord import ArgumentTypeError, CoordinationError, InvalidArgumentError, MultiLock


def _self_in(traceback: types.TracebackType | None, cls: type) -> object:
    """The half-built ``cls`` object in the frames of ``traceback``."""
    while traceback is not None:
        candidate = traceback.tb_frame.f_locals.get("self")
        if isinstance(candidate, cls):
            return candidate
        traceback = traceback.tb_next
    raise AssertionError(f"no {cls.__name__} in the traceback")


@pytest.mark.parametrize(
    ("locks", "error"),
    [([None], ArgumentTypeError), ([], InvalidArgumentError), ("ab", ArgumentTypeError)],
)
def test_a_multilock_refused_by_its_constructor_still_has_a_repr(
    locks: object, error: type[CoordinationError]
) -> None:
    with pytest.raises(error) as info:
        MultiLock(locks)  # type: ignore[arg-type]
    half_built = _self_in(info.tb, MultiLock)
    assert repr(half_built).startswith("<MultiLock ")


def test_a_multilock_repr_survives_a_lock_whose_path_raises() -> None:
    class Odd:
        async def acquire(self, timeout: float | None = None) -> bool:
            return True

        async def release(self) -> None:
            pass

        def fence(self) -> object:
            return None

        async def wait_lost(self, *, timeout: float | None = None) -> bool:
            return False

        def transaction(self) -> object:
            return None

        @property
        def path(self) -> str:
            raise RuntimeError("no path")

    assert repr(MultiLock([Odd()])) == "<MultiLock ['Odd'] held=False>"  # type: ignore[list-item]
    assert repr(MultiLock.__new__(MultiLock)) == "<MultiLock [] held=False>"
