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


async def test_retry_loop_gives_up_with_the_last_error() -> None:
    calls = 0

    async def op() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionLossError(sent=True)

    with pytest.raises(ConnectionLossError):
        await call_with_retry(RetryNTimes(2, 0.0), op)
    assert calls == 3


async def test_retry_loop_does_not_retry_answers() -> None:
    calls = 0

    async def op() -> None:
        nonlocal calls
        calls += 1
        raise NoNodeError("/x")

    with pytest.raises(NoNodeError):
        await call_with_retry(RetryForever(0.0), op)
    assert calls == 1


class _Policy:
    """What retry_on_connection_loss needs of a client: its retry policy."""

    def __init__(self, policy: RetryNTimes) -> None:
        self.retry_policy = policy


async def test_retry_on_connection_loss_makes_the_policys_attempts_and_no_more() -> None:
    # The first attempt is made outside the retry loop (one coroutine level
    # fewer per reply), and still counts as the policy's first.
    calls = 0

    async def op() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionLossError(sent=True)

    with pytest.raises(ConnectionLossError):
        await retry_on_connection_loss(_Policy(RetryNTimes(2, 0.0)), op)  # type: ignore[arg-type]
    assert calls == 3


async def test_retry_on_connection_loss_passes_other_errors_at_once() -> None:
    calls = 0

    async def op() -> None:
        nonlocal calls
        calls += 1
        raise (NoConnectionError(waited=0.0) if calls == 1 else NoNodeError("/x"))

    with pytest.raises(NoConnectionError):
        await retry_on_connection_loss(_Policy(RetryNTimes(5, 0.0)), op)  # type: ignore[arg-type]
    with pytest.raises(NoNodeError):
        await retry_on_connection_loss(_Policy(RetryNTimes(5, 0.0)), op)  # type: ignore[arg-type]
    assert calls == 2


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
