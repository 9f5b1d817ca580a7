"""A local view of one service's instances, kept current (Curator's ServiceCache).

Built on a :class:`~aiocoord.ChildrenCache` of ``<base>/<name>``: its one
persistent recursive watch, its batched reads and its repair after a
reconnection or a new session are this cache's too. A task reads the
children cache's events, in order, and turns each node into a
:class:`ServiceInstance`: the view here only ever follows what the children
cache saw, so once changes stop it equals the server.

A node that does not hold an instance (bytes Curator could not read either)
is left out of the view, with a warning in the log, until it holds one.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ... import _paths, _telemetry
from ..._checks import check_int
from ..._exceptions import ClientClosedError, CorruptValueError
from ..._session import ChangeStream, Client, check_client
from .._kit import Feed, Lifecycle, Phase, Resource
from ..caches import CacheEvent, CacheEventType, KeptChildrenCache
from ._instance import ServiceInstance, check_node_name

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "PROVIDER_KIND",
    "ProviderCache",
    "ServiceCache",
    "ServiceCacheEvent",
    "ServiceCacheEventType",
    "provider_tags",
]

log = logging.getLogger("aiocoord")

DEFAULT_MAX_BUFFER = 10_000
"""Events a cache's ``events()`` iterator holds before it overflows."""

PROVIDER_KIND = "service_provider"
"""The telemetry label of a ServiceProvider and of the cache it keeps."""

_INNER_BUFFER = 1_000_000
"""Bound on the children cache events our task has not read yet (it reads them at once)."""


class ServiceCacheEventType(enum.Enum):
    """What a :class:`ServiceCacheEvent` reports."""

    ADDED = "added"
    """An instance appeared (``instance``)."""
    UPDATED = "updated"
    """An instance's data changed (``instance``: its new form)."""
    REMOVED = "removed"
    """An instance went (``instance``: its last known form)."""
    INITIALIZED = "initialized"
    """The first complete view (``instances``): once per iterator."""
    RESYNCED = "resynced"
    """The view was repaired after a reconnection or a session expiry, or an
    iterator that overflowed starts again: ``instances`` is the whole view."""
    OVERFLOWED = "overflowed"
    """The iterator fell more than ``max_buffer`` events behind: its buffered events
    were dropped, and RESYNCED (with the view) comes next."""


@dataclass(frozen=True, slots=True)
class ServiceCacheEvent:
    """One change of a :class:`ServiceCache`'s view, or a mark in its history.

    ``instance`` is set for ADDED, UPDATED and REMOVED; ``instances`` (the whole
    view, sorted by id) for INITIALIZED and RESYNCED.
    """

    type: ServiceCacheEventType
    instance: ServiceInstance | None = None
    instances: tuple[ServiceInstance, ...] | None = None


class ServiceCache(Resource):
    """The instances of one service, kept current on one watch (Curator's ServiceCache).

    Made by :meth:`ServiceDiscovery.cache` (or as ``ServiceCache(client, path,
    name)``, ``path`` being the discovery's): ``async with discovery.cache("api")
    as cache:`` builds the view and keeps it until the block ends;
    :meth:`instances` and :meth:`instance` read it without a round trip, and
    ``async for event in cache.events():`` follows it (ADDED, UPDATED, REMOVED,
    and RESYNCED after a reconnection or a session expiry). Every instance is
    listed, also disabled ones (a provider skips those).

    Events for one instance come in the order the server applied its changes
    (a burst may be read once: intermediate versions can be skipped, never the
    last one). After a reconnection or a new session the view is checked
    against the server and repaired, then RESYNCED.

    ``start()`` returns once the view is built (a service with no node yet is
    an empty view); a failed start raises the error of the first read and
    closes the cache. ``aclose()`` stops following the server: :meth:`events`
    iterators end after what they buffered, and the view stays readable.
    """

    _kind = "service_cache"
    """This cache's telemetry label (a provider's reports as the provider)."""

    def __init__(
        self,
        client: Client,
        path: str,
        name: str,
        *,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> None:
        check_client(client, path)
        _paths.validate_path(path)
        self._name = check_node_name(name, "service name", path)
        self._path = _paths.join(path, name)
        check_int(max_buffer, "max_buffer", path=self._path, minimum=1)
        self._client = client
        self._tags = _telemetry.recipe_tags(
            client.telemetry, self._kind, self._path, client.namespace
        )
        self._inner = KeptChildrenCache(
            client, self._path, max_buffer=_INNER_BUFFER, tags=self._tags
        )
        self._view: dict[str, ServiceInstance] = {}
        self._version = 0
        """Changes with every change of the view (each ADDED, UPDATED, REMOVED)."""
        self._corrupt: set[str] = set()
        """Node names whose data is not an instance (warned about once each)."""
        self._task: asyncio.Task[Any] | None = None
        self._life = Lifecycle(
            f"service cache {self._path!r}", self._open, self._shut, restartable=False
        )
        super().__init__(self._life)
        self._feed: Feed[ServiceCacheEvent] = Feed(
            self._life,
            f"instances of {self._path!r}",
            self._path,
            max_buffer=max_buffer,
            initialized_mark=lambda: self._mark(ServiceCacheEventType.INITIALIZED),
            overflow=(
                lambda: ServiceCacheEvent(ServiceCacheEventType.OVERFLOWED),
                lambda: self._mark(ServiceCacheEventType.RESYNCED),
            ),
        )

    def __repr__(self) -> str:
        life = getattr(self, "_life", None)
        state = "new" if life is None else life.phase.value
        feed = getattr(self, "_feed", None)
        if life is not None and life.phase is Phase.STARTED and feed and feed.failure is not None:
            state = "failed"
        return (
            f"<ServiceCache {getattr(self, '_path', '?')!r} {state} "
            f"instances={len(getattr(self, '_view', ()))}>"
        )

    # --- local reads -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The service's name."""
        return self._name

    @property
    def path(self) -> str:
        """The service's node, ``<base>/<name>``, whose children are the instances."""
        return self._path

    @property
    def initialized(self) -> bool:
        """Whether the first complete view has been built."""
        return self._feed.initialized

    def instances(self) -> list[ServiceInstance]:
        """Every instance in the view now, sorted by id (disabled ones included)."""
        return [self._view[key] for key in sorted(self._view)]

    @property
    def version(self) -> int:
        """A number that changes whenever the view does: what is derived from
        :meth:`instances` stays good while it stays the same."""
        return self._version

    def instance(self, instance_id: str) -> ServiceInstance | None:
        """The instance with that id in the view, or None."""
        return self._view.get(instance_id)

    def snapshot(self) -> Mapping[str, ServiceInstance]:
        """The view now: a read-only mapping of id to instance, which later changes
        do not touch."""
        return types.MappingProxyType(dict(self._view))

    # --- consumers -------------------------------------------------------------------------

    def events(self, *, max_buffer: int | None = None) -> ChangeStream[ServiceCacheEvent]:
        """Every event from now on, as a :class:`~aiocoord.ChangeStream` holding at
        most ``max_buffer`` events (default: the cache's ``max_buffer``).

        Made before the view is complete, it sees ADDED for each instance added
        from then on, then INITIALIZED; made later, it starts with INITIALIZED.
        Either way that event holds the whole view at that moment. A consumer
        that falls behind reads OVERFLOWED, then RESYNCED with the view, then
        the events from there on. Iteration ends when the cache closes, or
        raises the error it stopped on.
        """
        return self._feed.events(max_buffer)

    def add_listener(self, callback: Callable[[ServiceCacheEvent], object]) -> None:
        """Call ``callback(event)`` for every event from now on, in order, from the
        cache's task (a callback must not block; its errors are logged)."""
        self._feed.add_listener(callback)

    def remove_listener(self, callback: Callable[[ServiceCacheEvent], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._feed.remove_listener(callback)

    def _mark(self, kind: ServiceCacheEventType) -> ServiceCacheEvent:
        return ServiceCacheEvent(kind, instances=tuple(self.instances()))

    # --- life cycle ------------------------------------------------------------------------

    async def wait_initialized(self, *, timeout: float | None = None) -> bool:
        """Wait until the first complete view is built (at once if it is): True;
        False if ``timeout`` passed first. Raises the error the cache stopped on,
        ClientClosedError if its client closed first, RecipeClosedError if it
        was closed first."""
        return await self._feed.wait_initialized(timeout=timeout)

    async def _open(self) -> None:
        with _telemetry.span("aiocoord.cache.build", self._tags) as op:
            await self._open_and_build()
            op.outcome("built")
            op.set("aiocoord.nodes", len(self._view))
        view = self._view
        _telemetry.track_cache(self, self._tags, lambda: len(view))

    async def _open_and_build(self) -> None:
        inner = self._inner
        stream = inner.events()  # before the start: every node's CREATED, then INITIALIZED
        self._task = self._client.start_background(
            self._follow(stream), name=f"aiocoord-service-cache {self._path}"
        )
        try:
            await inner.start()
            await self.wait_initialized()
        except BaseException:
            await self._halt()
            raise

    async def _shut(self, started: bool) -> None:
        await self._halt()
        self._finish(None)

    async def _halt(self) -> None:
        _telemetry.track_cache(self, self._tags, tracked=False)
        await self._inner.aclose()
        task, self._task = self._task, None
        if task is not None:
            # The children cache's close ends our stream: the task finishes on its own.
            await asyncio.wait([task])

    def _finish(self, failure: BaseException | None) -> None:
        _telemetry.track_cache(self, self._tags, tracked=False)
        self._feed.stop(failure)

    async def _follow(self, stream: ChangeStream[CacheEvent]) -> None:
        """Turn the children cache's events into ours, in order, until it ends."""
        failure: BaseException | None = None
        try:
            async with stream:
                async for event in stream:
                    self._apply(event)
        except ClientClosedError:
            pass
        except Exception as error:
            failure = error
        finally:
            self._finish(failure)

    def _apply(self, event: CacheEvent) -> None:
        kind = event.type
        if kind in (CacheEventType.INITIALIZED, CacheEventType.RESYNCED):
            # A whole view: after an overflow of our own reading, what we missed
            # shows as the difference.
            fresh: dict[str, ServiceInstance] = {}
            for path, (data, _stat) in (event.snapshot or {}).items():
                if path != self._path and data is not None:
                    instance = self._parse(path, data)
                    if instance is not None:
                        fresh[_paths.basename(path)] = instance
            for key in sorted(set(self._view) - set(fresh)):
                self._publish(ServiceCacheEventType.REMOVED, self._view.pop(key))
            for key in sorted(fresh):
                if key not in self._view:
                    self._view[key] = fresh[key]
                    self._publish(ServiceCacheEventType.ADDED, fresh[key])
                elif self._view[key] != fresh[key]:
                    self._view[key] = fresh[key]
                    self._publish(ServiceCacheEventType.UPDATED, fresh[key])
            if kind is CacheEventType.INITIALIZED:
                self._feed.built()
            else:
                self._feed.publish(self._mark(ServiceCacheEventType.RESYNCED))
            return
        if kind is CacheEventType.OVERFLOWED or event.path == self._path:
            return  # the service's own node: its instances' events tell the story
        key = _paths.basename(event.path)
        if kind is CacheEventType.DELETED:
            self._corrupt.discard(key)
            gone = self._view.pop(key, None)
            if gone is not None:
                self._publish(ServiceCacheEventType.REMOVED, gone)
            return
        instance = None if event.data is None else self._parse(event.path, event.data)
        old = self._view.get(key)
        if instance is None:
            if old is not None:
                del self._view[key]
                self._publish(ServiceCacheEventType.REMOVED, old)
            return
        self._view[key] = instance
        if old is None:
            self._publish(ServiceCacheEventType.ADDED, instance)
        elif old != instance:
            self._publish(ServiceCacheEventType.UPDATED, instance)

    def _parse(self, path: str, data: bytes) -> ServiceInstance | None:
        key = _paths.basename(path)
        try:
            instance = ServiceInstance.from_json(data, path=path)
        except CorruptValueError as error:
            if key not in self._corrupt:
                self._corrupt.add(key)
                log.warning("service cache %r: leaving out %r: %s", self._path, path, error)
            return None
        self._corrupt.discard(key)
        return instance

    def _publish(self, kind: ServiceCacheEventType, instance: ServiceInstance) -> None:
        # Every change of the view is published here, right after it is made.
        self._version += 1
        self._feed.publish(ServiceCacheEvent(kind, instance))


class ProviderCache(ServiceCache):
    """A ServiceProvider's own cache (made by ``ServiceDiscovery.provider()``): it
    reports as the provider, one recipe."""

    _kind = PROVIDER_KIND


def provider_tags(cache: ServiceCache) -> _telemetry.Tags:
    """The telemetry labels of a ServiceProvider picking from ``cache``."""
    client = cache._client
    return _telemetry.recipe_tags(client.telemetry, PROVIDER_KIND, cache.path, client.namespace)
