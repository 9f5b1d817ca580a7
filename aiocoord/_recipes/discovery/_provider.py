"""Picking an instance of a service: a strategy over a service cache (Curator's ServiceProvider).

The choice itself is pure (:mod:`._strategies`); this module keeps what it
needs: the cache's view, the requests in flight through :meth:`using`, and
the errors noted against each instance. The candidates are kept as a tuple
between picks and built again only when one of those changes (or a down
instance's time is up): a pick is then a few comparisons and the strategy's
step (#26).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import AsyncIterator

import anyio

from ... import _telemetry
from ..._checks import check_int, check_seconds, check_timeout
from ..._exceptions import ArgumentTypeError, OperationTimeoutError
from .._kit import Deadline, Lifecycle, Phase, Pulse, Resource
from ._cache import ServiceCache, ServiceCacheEvent, provider_tags
from ._instance import ServiceInstance
from ._strategies import Chooser, DownInstances, Key, ProviderStrategy, candidates_of, key_of

__all__ = ["ServiceProvider"]

DEFAULT_ERROR_THRESHOLD = 2
"""Errors that take an instance out of rotation (Curator's DownInstancePolicy default)."""
DEFAULT_DOWN_TIMEOUT = 30.0
"""Seconds an instance stays out of rotation, counted from its first error (Curator's)."""

_REPORT_EVERY = 256
"""Picks counted locally before they are added to ``aiocoord.discovery.picks``: a pick
costs a few hundred nanoseconds, an ``add`` to the API (even with no SDK) as much."""


class ServiceProvider(Resource):
    """Picks instances of one service (Curator's ServiceProvider), from a
    :class:`ServiceCache` it starts and closes with itself.

    Made by :meth:`ServiceDiscovery.provider`: ``async with
    discovery.provider("api", strategy=ProviderStrategy.LEAST_OUTSTANDING) as
    provider:``, then ``async with provider.using() as instance:`` around each
    request sent to ``instance``. :meth:`pick` only picks (no request is
    counted); :meth:`using` picks, counts the request as in flight until its
    block ends (what POWER_OF_TWO_CHOICES and LEAST_OUTSTANDING balance on),
    and waits for an instance if there is none.

    Disabled instances (``enabled=False``) are never picked, and neither is an
    instance with ``error_threshold`` errors noted (:meth:`note_error`) within
    ``down_timeout`` seconds of its first: Curator's DownInstancePolicy (2
    errors, 30 s). In-flight counts are this provider's own: other clients'
    requests are not seen.

    ``start()`` starts the cache: picks may begin once its view is built.
    ``aclose()`` closes it, and waiting :meth:`using` calls raise
    RecipeClosedError. A provider starts once.
    """

    def __init__(
        self,
        cache: ServiceCache,
        *,
        strategy: ProviderStrategy = ProviderStrategy.ROUND_ROBIN,
        error_threshold: int = DEFAULT_ERROR_THRESHOLD,
        down_timeout: float = DEFAULT_DOWN_TIMEOUT,
    ) -> None:
        if not isinstance(cache, ServiceCache):
            raise ArgumentTypeError("cache", "a ServiceCache", cache)
        path = cache.path
        if not isinstance(strategy, ProviderStrategy):
            raise ArgumentTypeError("strategy", "a ProviderStrategy", strategy, path)
        check_int(error_threshold, "error_threshold", path=path, minimum=1)
        seconds = check_seconds(down_timeout, "down_timeout", path=path)
        self._cache = cache
        self._chooser = Chooser(strategy, random.Random())
        self._down = DownInstances(timeout=seconds, error_threshold=error_threshold)
        self._outstanding: dict[Key, int] = {}
        self._load_version = 0
        """Changes with every change of ``_outstanding``."""
        # The candidates, kept between picks: built again when the cache's view
        # changes (its version), when an error is noted or a window ends (the down
        # policy's version), or once the first down instance's time is up.
        self._candidates: tuple[ServiceInstance, ...] = ()
        self._built_from: tuple[int, int] | None = None
        self._valid_until = math.inf
        self._changed = Pulse()
        self._life = Lifecycle(
            f"service provider {path!r}", self._open, self._shut, restartable=False
        )
        super().__init__(self._life)
        self._tags = provider_tags(cache)
        # Picks are counted here and added to the counter in batches (see _REPORT_EVERY):
        # when candidates are rebuilt, a using() block ends, an error is noted, at close.
        self._picked = 0
        self._missed = 0

    def __repr__(self) -> str:
        cache = getattr(self, "_cache", None)
        life = getattr(self, "_life", None)
        chooser = getattr(self, "_chooser", None)
        return (
            f"<ServiceProvider {'?' if cache is None else cache.path!r} "
            f"{'new' if life is None else life.phase.value} "
            f"strategy={'?' if chooser is None else chooser.strategy.value} "
            f"in_flight={sum(getattr(self, '_outstanding', {}).values())}>"
        )

    # --- local state ---------------------------------------------------------------------

    @property
    def cache(self) -> ServiceCache:
        """The service cache this provider picks from (started and closed with it)."""
        return self._cache

    @property
    def strategy(self) -> ProviderStrategy:
        """How instances are picked."""
        return self._chooser.strategy

    def instances(self) -> list[ServiceInstance]:
        """The instances a pick may return now: enabled and not down, sorted by id."""
        return list(self._current())

    def pick(self) -> ServiceInstance | None:
        """An instance picked by the strategy, or None if none may be picked now (or
        the provider is not started). Counts no request: see :meth:`using`."""
        chosen = self._chooser.pick(
            self._current(), self._outstanding, load_version=self._load_version
        )
        if chosen is None:
            self._missed += 1
        else:
            picked = self._picked = self._picked + 1
            if picked >= _REPORT_EVERY:
                self._report_picks()
        return chosen

    def _report_picks(self) -> None:
        """Add the picks counted since the last report to ``aiocoord.discovery.picks``."""
        picked, missed, self._picked, self._missed = self._picked, self._missed, 0, 0
        if picked:
            _telemetry.add(
                "aiocoord.discovery.picks", picked, self._tags.metric_with_outcome("picked")
            )
        if missed:
            _telemetry.add(
                "aiocoord.discovery.picks", missed, self._tags.metric_with_outcome("none")
            )

    def _current(self) -> tuple[ServiceInstance, ...]:
        """The candidates now: the kept tuple, built again only if it may be stale."""
        down = self._down
        if (self._cache.version, down.version) != self._built_from or (
            self._valid_until != math.inf and down.now() >= self._valid_until
        ):
            self._report_picks()
            self._candidates = tuple(candidates_of(self._cache.instances(), down))
            self._valid_until = down.expiry()
            # Read after building: building purges ended windows (a new version).
            self._built_from = (self._cache.version, down.version)
        return self._candidates

    def outstanding(self, instance: ServiceInstance) -> int:
        """Requests in flight to ``instance`` through this provider's :meth:`using`."""
        return self._outstanding.get(key_of(instance), 0)

    def note_error(self, instance: ServiceInstance) -> None:
        """Count an error against ``instance`` (a connect error, a 503 ...): after
        ``error_threshold`` of them within ``down_timeout`` seconds of the first,
        it is not picked until that time has passed."""
        if not isinstance(instance, ServiceInstance):
            raise ArgumentTypeError("instance", "a ServiceInstance", instance, self._cache.path)
        self._down.note_error(instance)
        self._report_picks()
        outcome = "down" if self._down.is_down(instance) else "noted"
        _telemetry.add("aiocoord.discovery.errors", 1, self._tags.metric_with_outcome(outcome))

    def errors(self, instance: ServiceInstance) -> int:
        """Errors noted against ``instance`` in its current window (0 once it ended)."""
        return self._down.errors(instance)

    # --- picking for a request -----------------------------------------------------------

    def using(
        self, *, timeout: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[ServiceInstance]:
        """``async with provider.using() as instance:`` picks an instance and counts a
        request in flight to it until the block ends.

        With no instance to pick, waits for one (one registered, enabled, or
        back from being down); raises :class:`~aiocoord.OperationTimeoutError`
        if ``timeout`` passes first (``timeout=0``: only what is there now),
        RecipeClosedError if the provider closes meanwhile, RuntimeError
        before :meth:`start`. An error in the block is not noted by itself:
        call :meth:`note_error` for the ones that say the instance is bad.
        """
        seconds = check_timeout(timeout, path=self._cache.path)
        return self._using(seconds)

    @contextlib.asynccontextmanager
    async def _using(self, timeout: float | None) -> AsyncIterator[ServiceInstance]:
        chosen = await self._wait_pick(timeout)
        key = key_of(chosen)
        self._outstanding[key] = self._outstanding.get(key, 0) + 1
        self._load_version += 1
        try:
            yield chosen
        finally:
            self._report_picks()
            left = self._outstanding[key] - 1
            self._load_version += 1
            if left:
                self._outstanding[key] = left
            else:
                del self._outstanding[key]

    async def _wait_pick(self, timeout: float | None) -> ServiceInstance:
        if self._life.phase is Phase.NEW:
            raise RuntimeError(f"{self!r} is not started: start it (or use async with) first")
        deadline = Deadline(timeout)
        while True:
            self._life.check_open()
            chosen = self.pick()
            if chosen is not None:
                return chosen
            if deadline.passed:
                raise OperationTimeoutError(
                    f"no instance of {self._cache.path!r} to pick within {timeout:g} s"
                )
            waits = [w for w in (deadline.remaining(), self._down.next_change()) if w is not None]
            with anyio.move_on_after(min(waits) if waits else None):
                await self._changed.wait()

    def _on_event(self, _event: ServiceCacheEvent) -> None:
        self._changed.fire()

    # --- life cycle ----------------------------------------------------------------------

    async def _open(self) -> None:
        self._cache.add_listener(self._on_event)
        try:
            await self._cache.start()
        except BaseException:
            self._cache.remove_listener(self._on_event)
            raise

    async def _shut(self, started: bool) -> None:
        self._report_picks()
        self._cache.remove_listener(self._on_event)
        await self._cache.aclose()
        self._changed.fire()
