"""Instance choice, pure: strategies and Curator's down-instance policy, no I/O.

A provider hands these the instances it may pick from (enabled, not down,
sorted by id) and the requests in flight on each; they answer one instance.
Everything here is deterministic given its random source and clock, so the
unit tests drive it without a server.
"""

from __future__ import annotations

import enum
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

    def pick(
        self, candidates: Sequence[ServiceInstance], outstanding: Mapping[Key, int]
    ) -> ServiceInstance | None:
        """One of ``candidates`` (None if there are none); ``outstanding`` counts the
        requests in flight per instance (missing: none)."""
        if not candidates:
            return None
        strategy = self.strategy
        if strategy is ProviderStrategy.ROUND_ROBIN:
            chosen = candidates[self._turn % len(candidates)]
            self._turn += 1
            return chosen
        if strategy is ProviderStrategy.RANDOM:
            return candidates[self.rng.randrange(len(candidates))]
        if strategy is ProviderStrategy.STICKY:
            for candidate in candidates:
                if key_of(candidate) == self._sticky:
                    return candidate
            chosen = candidates[self.rng.randrange(len(candidates))]
            self._sticky = key_of(chosen)
            return chosen
        if strategy is ProviderStrategy.POWER_OF_TWO_CHOICES:
            if len(candidates) == 1:
                return candidates[0]
            first, second = self.rng.sample(range(len(candidates)), 2)
            a, b = candidates[first], candidates[second]
            return b if outstanding.get(key_of(b), 0) < outstanding.get(key_of(a), 0) else a
        # LEAST_OUTSTANDING: the least loaded; among equals, each in turn.
        least = min(outstanding.get(key_of(c), 0) for c in candidates)
        tied = [c for c in candidates if outstanding.get(key_of(c), 0) == least]
        chosen = tied[self._turn % len(tied)]
        self._turn += 1
        return chosen


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

    def note_error(self, instance: ServiceInstance) -> None:
        self._purge()
        key = key_of(instance)
        since, count = self._errors.get(key, (self._clock(), 0))
        self._errors[key] = (since, count + 1)

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

    def _purge(self) -> None:
        now = self._clock()
        for key, (since, _count) in list(self._errors.items()):
            if now - since >= self.timeout:
                del self._errors[key]


def candidates_of(
    instances: Sequence[ServiceInstance], down: DownInstances
) -> list[ServiceInstance]:
    """What a provider may pick: enabled instances that are not down, in the given order."""
    return [i for i in instances if i.enabled and not down.is_down(i)]
