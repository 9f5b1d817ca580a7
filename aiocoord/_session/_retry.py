"""Retry policies: how often and how long to retry an operation cut by the connection.

A policy only answers "may attempt N+1 happen, and after what pause?". The loop
that uses it (:func:`call_with_retry`) retries session-level failures
(connection loss, session expiry) and nothing else: a NoNode or BadVersion is an
answer, not an accident.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from .. import _telemetry
from .._checks import check_int, check_seconds
from .._exceptions import ClientClosedError, ConnectionLossError, NoConnectionError, SessionError

__all__ = [
    "BoundedExponentialBackoff",
    "ExponentialBackoff",
    "RetryForever",
    "RetryNTimes",
    "RetryPolicy",
    "RetryUntilElapsed",
    "call_with_retry",
    "is_retryable",
]

log = logging.getLogger("aiocoord")

T = TypeVar("T")


class RetryPolicy:
    """Base class: ``delay(attempt, elapsed)`` returns the pause before the next try or None."""

    def delay(self, attempt: int, elapsed: float) -> float | None:
        """``attempt`` counts the failures so far (1 after the first); ``elapsed`` is seconds."""
        raise NotImplementedError


@dataclass(frozen=True)
class ExponentialBackoff(RetryPolicy):
    """Up to ``max_retries`` retries, each pause a random multiple of ``base_sleep``
    that doubles in range with every attempt (Curator's ExponentialBackoffRetry)."""

    base_sleep: float = 0.01
    max_retries: int = 10
    max_sleep: float = 10.0

    def __post_init__(self) -> None:
        check_seconds(self.base_sleep, "base_sleep")
        check_int(self.max_retries, "max_retries", minimum=0)
        check_seconds(self.max_sleep, "max_sleep")

    def delay(self, attempt: int, elapsed: float) -> float | None:
        """A random multiple of ``base_sleep``, up to ``2**attempt`` of it and at most
        ``max_sleep``; None after ``max_retries``. The randomness spreads competing
        retriers apart."""
        if attempt > self.max_retries:
            return None
        factor = random.randint(1, 1 << min(attempt, 30))
        return min(self.base_sleep * factor, self.max_sleep)


@dataclass(frozen=True)
class BoundedExponentialBackoff(ExponentialBackoff):
    """Exponential backoff whose pauses never exceed ``max_sleep`` (required here)."""

    base_sleep: float = 0.01
    max_sleep: float = 1.0
    max_retries: int = 10


@dataclass(frozen=True)
class RetryNTimes(RetryPolicy):
    """Retry ``n`` times with a fixed pause."""

    n: int
    sleep: float = 0.01

    def __post_init__(self) -> None:
        check_int(self.n, "n", minimum=0)
        check_seconds(self.sleep, "sleep")

    def delay(self, attempt: int, elapsed: float) -> float | None:
        """``sleep`` for each of the first ``n`` retries, then None."""
        return self.sleep if attempt <= self.n else None


@dataclass(frozen=True)
class RetryUntilElapsed(RetryPolicy):
    """Retry with a fixed pause until ``max_elapsed`` seconds have passed since the first try."""

    max_elapsed: float
    sleep: float = 0.01

    def __post_init__(self) -> None:
        check_seconds(self.max_elapsed, "max_elapsed", allow_inf=True)
        check_seconds(self.sleep, "sleep")

    def delay(self, attempt: int, elapsed: float) -> float | None:
        """``sleep``, or None once the next try would start after ``max_elapsed``."""
        if elapsed + self.sleep > self.max_elapsed:
            return None
        return self.sleep


@dataclass(frozen=True)
class RetryForever(RetryPolicy):
    """Retry without end (bound it with the caller's deadline)."""

    sleep: float = 0.01

    def __post_init__(self) -> None:
        check_seconds(self.sleep, "sleep")

    def delay(self, attempt: int, elapsed: float) -> float | None:
        """Always ``sleep``: it never gives up."""
        return self.sleep


def is_retryable(error: BaseException) -> bool:
    """Connection loss and session expiry are retried; a closed client is not, nor a
    request that found no connection for its whole timeout (waiting again would
    multiply the bound the caller set)."""
    return isinstance(error, SessionError) and not isinstance(
        error, ClientClosedError | NoConnectionError
    )


async def call_with_retry(
    policy: RetryPolicy,
    operation: Callable[[], Awaitable[T]],
    *,
    retry_if: Callable[[BaseException], bool] = is_retryable,
    failed: Exception | None = None,
    started: float | None = None,
) -> T:
    """Run ``operation`` until it succeeds, fails for good, or ``policy`` gives up.

    The last error is re-raised when the policy gives up. The caller's own
    deadline (``anyio.fail_after``) bounds the whole loop, pauses included.
    ``failed``: the error of a first attempt the caller made itself, begun at
    ``started`` (``time.monotonic()``): counted as if made here.
    """
    start = time.monotonic() if started is None else started
    attempt = 0
    while True:
        try:
            if failed is not None:
                error, failed = failed, None
                raise error
            return await operation()
        except Exception as error:
            if not retry_if(error):
                raise
            attempt += 1
            pause = policy.delay(attempt, time.monotonic() - start)
            if pause is None:
                raise
            if isinstance(error, ConnectionLossError) and not error.sent:
                # The request never left: nothing to be unsure about, retry at once.
                pause = 0.0
            log.debug("retry %d after %r, in %.3f s", attempt, error, pause)
            _telemetry.add("aiocoord.retries", 1)
        await anyio.sleep(pause)
