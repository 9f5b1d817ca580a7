"""The public surface is deliberate: this test changes when it does."""

from __future__ import annotations

import inspect
import pickle

import pytest

import aiocoord
import aiocoord.testing
from aiocoord._exceptions import error_for_code


def test_every_exported_name_exists_and_says_it_is_public() -> None:
    for module in (aiocoord, aiocoord.testing):
        for name in module.__all__:
            assert hasattr(module, name), name
        public = {n for n in vars(module) if n[0] not in "_@"} - {"testing"}
        assert public <= set(module.__all__) | {"annotations"}, public - set(module.__all__)


def test_errors_share_one_root() -> None:
    for name in aiocoord.__all__:
        obj = getattr(aiocoord, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, aiocoord.CoordinationError), name
            assert name.endswith("Error")


def test_aiozk_does_not_leak_into_the_public_surface() -> None:
    for name in aiocoord.__all__:
        module = getattr(getattr(aiocoord, name), "__module__", "") or ""
        assert not module.startswith("aiozk"), name


def test_public_classes_and_functions_say_they_live_in_aiocoord() -> None:
    for name in aiocoord.__all__:
        obj = getattr(aiocoord, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__ == "aiocoord", name
            assert pickle.loads(pickle.dumps(obj)) is obj, name


def test_moved_errors_keep_their_place_in_the_hierarchy() -> None:
    unknown = aiocoord.OutcomeUnknownError("/c")
    assert isinstance(unknown, aiocoord.ConnectionLossError) and unknown.sent
    assert str(unknown) == "write to '/c' may or may not have been applied"
    assert issubclass(aiocoord.CounterOverflowError, OverflowError)
    bound = aiocoord.BoundExceededError("/c", 0, -1, 0, None)
    assert str(bound) == "'/c': 0 - 1 leaves [0, +inf]"
    assert (bound.path, bound.value, bound.delta) == ("/c", 0, -1)


def test_every_kind_of_lost_hold_is_one_catchable_family() -> None:
    for error in (
        aiocoord.LockLostError("/lock", "the session was lost"),
        aiocoord.LeadershipLostError("/election", "its node was deleted"),
        aiocoord.TakeLostError("/jobs/qn-0000000001", "the session ended"),
    ):
        assert isinstance(error, aiocoord.HoldLostError)
        assert isinstance(error, aiocoord.OwnershipError)
        assert error.path in str(error) and error.reason in str(error)
    assert not issubclass(aiocoord.NotOwnerError, aiocoord.HoldLostError)
    assert str(aiocoord.LockLostError("/l", "gone")) == "lost the lock on '/l': gone"
    assert str(aiocoord.TakeLostError("/q/i", "gone")) == "lost the take of '/q/i': gone"


def test_atomic_failures_equal_their_documented_strings() -> None:
    assert list(aiocoord.AtomicFailure) == ["contention", "bound", "mismatch"]
    assert aiocoord.AtomicFailure("bound") is aiocoord.AtomicFailure.BOUND


@pytest.mark.parametrize(
    "error",
    [
        aiocoord.NoNodeError("/a"),
        aiocoord.LockLostError("/lock", "its node is gone"),
        aiocoord.LeaseHeldError("/lease"),
        aiocoord.DataTooLargeError("/big", 10, 5),
        aiocoord.CorruptValueError("/c", b"\x01", "a count"),
        aiocoord.BoundExceededError("/b", 5, 1, 0, 5),
        aiocoord.OutcomeUnknownError("/o"),
        aiocoord.ConnectionLossError("gone", sent=True),
        aiocoord.InvalidPathError("bad", "no leading slash"),
        aiocoord.LeadershipLostError("/election", "the connection was SUSPENDED"),
        aiocoord.TakeLostError("/jobs/qn-0000000001", "the session ended"),
        aiocoord.HoldLostError("/held"),
        aiocoord.MemberIdInUseError("/group/a"),
        aiocoord.BarrierBrokenError("/barrier", "our node is gone"),
        aiocoord.QueueEmptyError("/jobs", 2.5),
        aiocoord.ArgumentTypeError("acl", "a sequence of aiocoord.ACL entries", "x", "/lock"),
        aiocoord.InvalidArgumentError("timeout", "NaN is not a number of seconds", "/lock"),
        aiocoord.TLSCertificateError("127.0.0.1:2281", "self-signed certificate"),
        aiocoord.AuthFailedError(scheme="digest"),
        aiocoord.AuthFailedError(mechanism="DIGEST-MD5", reason="refused"),
        aiocoord.SaslRequiredError("/a"),
        aiocoord.ThrottledError("/a"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_survive_pickling_with_message_and_attributes(error: Exception) -> None:
    """Errors cross process boundaries (multiprocessing, task queues) intact."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)


# ZooKeeper's KeeperException.Code, 3.8 and 3.9 alike, for the codes a reply can carry
# that have an error of their own (CONNECTIONLOSS, SESSIONEXPIRED and UNKNOWNSESSION map
# to the session errors).
SERVER_CODES = {
    -13: aiocoord.NewConfigNoQuorumError,
    -14: aiocoord.ReconfigInProgressError,
    -115: aiocoord.AuthFailedError,
    -120: aiocoord.EphemeralOnLocalSessionError,
    -121: aiocoord.NoWatcherError,
    -122: aiocoord.ServerRequestTimeoutError,
    -123: aiocoord.ReconfigDisabledError,
    -124: aiocoord.SaslRequiredError,
    -125: aiocoord.QuotaExceededError,
    -127: aiocoord.ThrottledError,
}


@pytest.mark.parametrize(("code", "cls"), SERVER_CODES.items(), ids=str)
def test_newer_server_codes_have_typed_errors(code: int, cls: type[Exception]) -> None:
    error = error_for_code(code, "/p")
    assert type(error) is cls
    assert isinstance(error, aiocoord.ZooKeeperError) and error.code == code
    assert error.path == "/p"
    assert cls.__name__ in aiocoord.__all__
