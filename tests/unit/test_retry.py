"""Retry policies and the retry loop."""

from __future__ import annotations

import pytest

from aiocoord import (
    BadVersionError,
    BoundedExponentialBackoff,
    ClientClosedError,
    ConnectionLossError,
    ExponentialBackoff,
    NoNodeError,
    RetryForever,
    RetryNTimes,
    RetryUntilElapsed,
    SessionExpiredError,
)
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
