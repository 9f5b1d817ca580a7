"""Instance choice, pure: strategies and Curator's down-instance policy, no I/O.

A provider hands these the instances it may pick from (enabled, not down,
sorted by id) and the requests in flight on each; they answer one instance.
Everything here is deterministic given its random source and clock, so the
unit tests drive it without a server.
"""

from __future__ import annotations

import enum
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ._instance import ServiceInstance

__all__ = ["Chooser", "DownInstances", "ProviderStrategy", "key_of"]

Key = tuple[str, str]
"""An instance's identity: ``(name, id)`` (its data may change, its identity not)."""


def key_of(instance: ServiceInstance) -> Key:
    return (instance.name, instance.id)


class ProviderStrategy(enum.Enum):
    """How a :class:`~aiocoord.ServiceProvider` picks an instance."""

    ROUND_ROBIN = "round_robin"
    """Each in turn (the default, as Curator's)."""
    RANDOM = "random"
    """Uniformly at random."""
    STICKY = "sticky"
    """The same instance while it stays available; a random one when it goes
    (random, not the first: providers in many processes then spread out)."""
    POWER_OF_TWO_CHOICES = "power_of_two_choices"
    """Two at random, and the one with fewer requests in flight through this
    provider (ties: the first drawn). Near least-outstanding balance without
    every client herding onto the same idle instance."""
    LEAST_OUTSTANDING = "least_outstanding"
    """The one with the fewest requests in flight through this provider; ties
    are taken in turn."""


@dataclass
class Chooser:
    """One provider's strategy and the state it keeps between picks."""

    strategy: ProviderStrategy
    rng: random.Random

    def __post_init__(self) -> None:
        self._turn = 0
        self._sticky: Key | None = None
        # What was derived from the last tuple of candidates handed in (kept while
        # the same tuple comes back): the sticky one's place, the least loaded ones.
        self._seen: Sequence[ServiceInstance] | None = None
        self._seen_load: int | None = None
        self._at = 0
        self._tied: tuple[ServiceInstance, ...] = ()

    def pick(
        self,
        candidates: Sequence[ServiceInstance],
        outstanding: Mapping[Key, int],
        *,
        load_version: int | None = None,
    ) -> ServiceInstance | None:
        """One of ``candidates`` (None if there are none); ``outstanding`` counts the
        requests in flight per instance (missing: none).

        A caller that hands the same tuple of candidates again may pass
        ``load_version``, a number that changes whenever ``outstanding`` does:
        what a strategy derives from them (the sticky instance's place, the
        least loaded) is then kept between picks instead of found again. A list,
        or no ``load_version``, is looked at afresh every time.
        """
        count = len(candidates)
        if not count:
            return None
        strategy = self.strategy
        if strategy is ProviderStrategy.ROUND_ROBIN:
            turn = self._turn
            self._turn = turn + 1
            return candidates[turn % count]
        if strategy is ProviderStrategy.RANDOM:
            return candidates[self.rng.randrange(count)]
        if strategy is ProviderStrategy.STICKY:
            if candidates is self._seen:  # the same tuple: the sticky one is where it was
                return candidates[self._at]
            return self._stick(candidates)
        if strategy is ProviderStrategy.POWER_OF_TWO_CHOICES:
            if count == 1:
                return candidates[0]
            # Two distinct places, uniformly (what sample(range(count), 2) draws).
            randrange = self.rng.randrange
            first = randrange(count)
            second = randrange(count - 1)
            if second >= first:
                second += 1
            a, b = candidates[first], candidates[second]
            if not outstanding:
                return a
            return b if outstanding.get(key_of(b), 0) < outstanding.get(key_of(a), 0) else a
        # LEAST_OUTSTANDING: the least loaded; among equals, each in turn.
        if (
            load_version is None
            or candidates is not self._seen
            or load_version != self._seen_load
            or type(candidates) is not tuple
        ):
            self._tied = _least_loaded(candidates, outstanding)
            if load_version is not None and type(candidates) is tuple:
                self._seen, self._seen_load = candidates, load_version
            else:
                self._seen = None
        tied = self._tied
        turn = self._turn
        self._turn = turn + 1
        return tied[turn % len(tied)]

    def _stick(self, candidates: Sequence[ServiceInstance]) -> ServiceInstance:
        """Find the sticky instance among ``candidates``, or stick to a random one."""
        index = next((i for i, c in enumerate(candidates) if key_of(c) == self._sticky), None)
        if index is None:
            index = self.rng.randrange(len(candidates))
            self._sticky = key_of(candidates[index])
        # Only a tuple is remembered: a list could change under the same identity.
        self._seen = candidates if type(candidates) is tuple else None
        self._at = index
        return candidates[index]


def _least_loaded(
    candidates: Sequence[ServiceInstance], outstanding: Mapping[Key, int]
) -> tuple[ServiceInstance, ...]:
    """The candidates with the fewest requests in flight, in their order."""
    if not outstanding:
        return tuple(candidates)
    loads = [outstanding.get(key_of(c), 0) for c in candidates]
    least = min(loads)
    return tuple(c for c, load in zip(candidates, loads, strict=True) if load == least)


class DownInstances:
    """Curator's DownInstancePolicy: an instance with ``error_threshold`` errors
    noted within ``timeout`` seconds of its first is out of rotation until that
    window ends; then its count starts again."""

    def __init__(
        self,
        *,
        timeout: float,
        error_threshold: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.error_threshold = error_threshold
        self._clock = clock
        self._errors: dict[Key, tuple[float, int]] = {}
        """Per instance: when its first error in the window was noted, and how many."""
        self.version = 0
        """Changes whenever an error is noted or a window ends: a provider that keeps
        its candidates builds them again then (and at :meth:`expiry`)."""

    def now(self) -> float:
        """The policy's clock."""
        return self._clock()

    def note_error(self, instance: ServiceInstance) -> None:
        self._purge()
        key = key_of(instance)
        since, count = self._errors.get(key, (self._clock(), 0))
        self._errors[key] = (since, count + 1)
        self.version += 1

    def is_down(self, instance: ServiceInstance) -> bool:
        self._purge()
        entry = self._errors.get(key_of(instance))
        return entry is not None and entry[1] >= self.error_threshold

    def errors(self, instance: ServiceInstance) -> int:
        """Errors noted for ``instance`` in its current window."""
        self._purge()
        entry = self._errors.get(key_of(instance))
        return 0 if entry is None else entry[1]

    def next_change(self) -> float | None:
        """Seconds until the next down instance comes back (None: none is down)."""
        self._purge()
        now = self._clock()
        ends = [
            since + self.timeout
            for since, count in self._errors.values()
            if count >= self.error_threshold
        ]
        return max(0.0, min(ends) - now) if ends else None

    def expiry(self) -> float:
        """When (on the clock) the first down instance comes back; infinity if none is down."""
        self._purge()
        threshold, timeout = self.error_threshold, self.timeout
        return min(
            (since + timeout for since, count in self._errors.values() if count >= threshold),
            default=math.inf,
        )

    def _purge(self) -> None:
        # One comparison for "the window ended" everywhere (here and a provider's
        # check against expiry()), so both agree to the last bit.
        now = self._clock()
        timeout = self.timeout
        for key, (since, _count) in list(self._errors.items()):
            if now >= since + timeout:
                del self._errors[key]
                self.version += 1


def candidates_of(
    instances: Sequence[ServiceInstance], down: DownInstances
) -> list[ServiceInstance]:
    """What a provider may pick: enabled instances that are not down, in the given order."""
    return [i for i in instances if i.enabled and not down.is_down(i)]
