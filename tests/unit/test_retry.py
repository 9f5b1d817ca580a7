"""Retry policies and the retry loop."""

from __future__ import annotations

import pytest

from aiocoord import (
    BadVersionError,
    BoundedExponentialBackoff,
    ClientClosedError,
    ConnectionLossError,
    ExponentialBackoff,
    NoConnectionError,
    NoNodeError,
    RetryForever,
    RetryNTimes,
    RetryPolicy,
    RetryUntilElapsed,
    SessionExpiredError,
)
from aiocoord._session._nodes import retry_on_connection_loss
from aiocoord._session._retry import call_with_retry, is_retryable


def test_exponential_backoff_grows_and_stops() -> None:
    policy = ExponentialBackoff(base_sleep=0.01, max_retries=3, max_sleep=1.0)
    for attempt in (1, 2, 3):
        pause = policy.delay(attempt, 0.0)
        assert pause is not None and 0.01 <= pause <= 0.01 * 2**attempt
    assert policy.delay(4, 0.0) is None


def test_bounded_backoff_never_exceeds_its_bound() -> None:
    policy = BoundedExponentialBackoff(base_sleep=0.5, max_sleep=0.7, max_retries=20)
    assert all((policy.delay(a, 0.0) or 0) <= 0.7 for a in range(1, 21))


def test_fixed_policies() -> None:
    assert RetryNTimes(2, 0.1).delay(2, 0) == 0.1 and RetryNTimes(2, 0.1).delay(3, 0) is None
    assert RetryUntilElapsed(1.0, 0.1).delay(50, 0.5) == 0.1
    assert RetryUntilElapsed(1.0, 0.1).delay(1, 0.95) is None
    assert RetryForever(0.2).delay(10**6, 10**6) == 0.2


def test_only_session_errors_are_retryable() -> None:
    assert is_retryable(ConnectionLossError())
    assert is_retryable(SessionExpiredError())
    assert not is_retryable(ClientClosedError())
    assert not is_retryable(NoNodeError("/a"))
    assert not is_retryable(BadVersionError("/a"))


async def test_retry_loop_retries_until_success() -> None:
    outcomes: list[Exception | str] = [ConnectionLossError(sent=True), SessionExpiredError(), "ok"]

    async def op() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    assert await call_with_retry(RetryNTimes(5, 0.0), op) == "ok"


class _Raising:
    """An operation that raises the next of ``errors`` on each call (the last one
    from then on), counting its calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = errors
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        raise self.errors[min(self.calls, len(self.errors)) - 1]


class _Client:
    """What retry_on_connection_loss needs of a client: its retry policy."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.retry_policy = policy


async def _retry(loop: str, policy: RetryPolicy, op: _Raising) -> None:
    if loop == "call_with_retry":
        await call_with_retry(policy, op)
    else:
        # It makes the first attempt outside the retry loop (one coroutine
        # level fewer per reply), which still counts as the policy's first.
        await retry_on_connection_loss(_Client(policy), op)  # type: ignore[arg-type]


@pytest.mark.parametrize("loop", ["call_with_retry", "retry_on_connection_loss"])
async def test_a_retry_loop_makes_the_policys_attempts_then_raises_the_last_error(
    loop: str,
) -> None:
    op = _Raising(ConnectionLossError(sent=True))
    with pytest.raises(ConnectionLossError):
        await _retry(loop, RetryNTimes(2, 0.0), op)
    assert op.calls == 3


@pytest.mark.parametrize("loop", ["call_with_retry", "retry_on_connection_loss"])
async def test_a_retry_loop_does_not_retry_answers(loop: str) -> None:
    op = _Raising(NoNodeError("/x"))
    with pytest.raises(NoNodeError):
        await _retry(loop, RetryForever(0.0), op)
    assert op.calls == 1


async def test_retry_on_connection_loss_does_not_wait_again_for_a_connection() -> None:
    op = _Raising(NoConnectionError(waited=0.0))
    with pytest.raises(NoConnectionError):
        await _retry("retry_on_connection_loss", RetryNTimes(5, 0.0), op)
    assert op.calls == 1


async def test_retry_loop_counts_a_first_failure_made_by_its_caller() -> None:
    calls = 0

    async def op() -> str:
        nonlocal calls
        calls += 1
        return "ok"

    failed = ConnectionLossError(sent=True)
    # RetryNTimes(1): the caller's failure, then one more try, which succeeds.
    assert await call_with_retry(RetryNTimes(1, 0.0), op, failed=failed) == "ok"
    # RetryNTimes(0): the caller's failure was the only try allowed.
    with pytest.raises(ConnectionLossError) as caught:
        await call_with_retry(RetryNTimes(0, 0.0), op, failed=failed)
    assert caught.value is failed
    assert calls == 1
