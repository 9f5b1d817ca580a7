"""Service discovery on Curator's layout: register instances, list them, look one up.

The layout is Curator's (curator-x-discovery), node for node: an instance is
``<base>/<name>/<id>`` holding :meth:`ServiceInstance.to_json`; the name's node
is made as a container when missing (so the server sweeps an empty service
away). A DYNAMIC instance is an ephemeral node; STATIC and PERMANENT ones are
persistent.

A :class:`ServiceDiscovery` keeps what it registered, each instance's node a
:class:`~.._kit._kept.KeptNode`: after a reconnection it checks its nodes, and
after a session expiry it makes its DYNAMIC nodes again, with the data of the
last :meth:`~ServiceDiscovery.update`. One node per instance, whatever the
outages: a create whose reply was lost is found (an ephemeral node of our own
session, or a persistent node) and kept, not made twice.

As in Curator, the last registration of an id wins: a node of that id that
another session holds is deleted and made again as ours.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import _paths, _telemetry
from ..._checks import check_recipe_acl
from ..._exceptions import (
    ArgumentTypeError,
    CorruptValueError,
    DataTooLargeError,
    InvalidArgumentError,
    NoNodeError,
)
from ..._session import (
    Client,
    check_client,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL
from .._kit import Foreign, KeptNode, KeptState, Lifecycle, Resource, read_children
from ._cache import DEFAULT_MAX_BUFFER, ProviderCache, ServiceCache
from ._instance import ServiceInstance, ServiceType, check_node_name
from ._provider import DEFAULT_DOWN_TIMEOUT, DEFAULT_ERROR_THRESHOLD, ServiceProvider
from ._strategies import ProviderStrategy

__all__ = ["ServiceDiscovery"]

log = logging.getLogger("aiocoord")


@dataclass(eq=False)
class _Registration:
    """One instance this object registered: its latest form, and the node it keeps."""

    instance: ServiceInstance
    data: bytes
    path: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Serialises the writes to this instance's node (register, update, unregister)."""
    gone: bool = False
    """Unregistered: nothing may make its node again."""
    kept: KeptNode | None = None
    """The node, kept while registered (made by the first register)."""
    session: int = 0
    """The session our node was last made or found in (0: none yet)."""

    @property
    def ephemeral(self) -> bool:
        return self.instance.service_type is ServiceType.DYNAMIC


class ServiceDiscovery(Resource):
    """Registers service instances under ``path`` and finds them (Curator's
    ``ServiceDiscovery``, same layout and JSON: Java and Python services find
    each other).

    ``async with ServiceDiscovery(client, "/services") as discovery:`` then
    ``await discovery.register(ServiceInstance(name="api", address=host,
    port=8080))``. The instances it registers are kept while it runs: DYNAMIC
    ones are made again after a session expiry (with their latest data), and
    every one is checked after a reconnection. :meth:`aclose` unregisters the
    DYNAMIC and STATIC instances it registered; PERMANENT ones stay (Curator
    5.4 deletes those too on close: CURATOR-94). ``instance``, if given, is
    registered by :meth:`start`, as Curator's ``thisInstance``.

    :meth:`names`, :meth:`instances` and :meth:`instance` read the server at
    each call, also before :meth:`start` and after :meth:`aclose`;
    :meth:`cache` keeps a local view of one service, and :meth:`provider`
    picks instances from one.

    ``acl`` (default: the client's ``default_acl``) is the ACL of the instance
    nodes and of the missing parents made for them.

    ``start()`` registers ``instance``, if given, and starts keeping
    registrations; a failed start leaves nothing registered and may be tried
    again. :meth:`aclose` closes the caches and providers made from this
    object before it unregisters.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        instance: ServiceInstance | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        check_client(client, path)
        _paths.validate_path(path)
        if path != "/":
            _paths.check_unreserved(path, (client.namespace or "") + path, "service discovery")
        self._client = client
        self._base = path
        self._acl = check_recipe_acl(acl, path)
        if instance is not None:
            self._checked(instance)
        self._first = instance
        self._registered: dict[tuple[str, str], _Registration] = {}
        self._life = Lifecycle(f"service discovery {path!r}", self._open, self._shut)
        super().__init__(self._life)
        self._running = False
        """Between the start of :meth:`start` and the close: registering is allowed."""
        self._closables: weakref.WeakSet[Any] = weakref.WeakSet()
        """Caches and providers made by :meth:`cache` and :meth:`provider`, closed with us."""
        self._tags = _telemetry.recipe_tags(
            client.telemetry, "service_discovery", path, client.namespace
        )

    def __repr__(self) -> str:
        return (
            f"<ServiceDiscovery {getattr(self, '_base', '?')!r} "
            f"{self._life.phase.value if hasattr(self, '_life') else 'new'} "
            f"registered={len(getattr(self, '_registered', ()))}>"
        )

    # --- local state ------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The client the instances are registered through."""
        return self._client

    @property
    def path(self) -> str:
        """The node whose children are the services."""
        return self._base

    @property
    def registered(self) -> list[ServiceInstance]:
        """The instances this object registered and keeps, in their latest form
        (local state: no round trip)."""
        return [r.instance for r in self._registered.values() if not r.gone]

    def path_of(self, name: str, instance_id: str | None = None) -> str:
        """The node of a service (``<base>/<name>``) or of one instance of it."""
        check_node_name(name, "service name", self._base)
        path = _paths.join(self._base, name)
        if instance_id is None:
            return path
        check_node_name(instance_id, "instance id", path)
        return _paths.join(path, instance_id)

    def _checked(self, instance: object) -> tuple[str, bytes]:
        """Refuse what cannot be registered, before anything is sent; the path and data."""
        if not isinstance(instance, ServiceInstance):
            raise ArgumentTypeError("instance", "a ServiceInstance", instance, self._base)
        path = self.path_of(instance.name, instance.id)
        if instance.service_type is ServiceType.DYNAMIC_SEQUENTIAL:
            raise InvalidArgumentError(
                "service_type",
                "DYNAMIC_SEQUENTIAL instances are read and listed, not registered: "
                "their node name is not their id (use DYNAMIC)",
                path,
            )
        data = instance.to_json()
        limit = self._client.max_data_size
        if len(data) > limit:
            raise DataTooLargeError(path, len(data), limit)
        return path, data

    def _span(self, name: str, path: str, instance: ServiceInstance) -> _telemetry.SpanScope:
        """The span of one register, update or unregister of ``instance`` (at ``path``)."""
        client = self._client
        tags = _telemetry.recipe_tags(client.telemetry, "service_discovery", path, client.namespace)
        attributes = {
            **tags.span_attributes,
            "aiocoord.service": instance.name,
            "aiocoord.instance_id": instance.id,
        }
        return _telemetry.span(
            name, _telemetry.Tags(tags.kind, tags.path, attributes, tags.metric_attributes)
        )

    # --- life cycle ---------------------------------------------------------------------------

    async def _open(self) -> None:
        self._running = True
        try:
            if self._first is not None:
                await self._register(self._first)
        except BaseException:
            self._running = False
            raise

    async def _shut(self, started: bool) -> None:
        self._running = False
        for closable in list(self._closables):
            await closable.aclose()
        self._closables.clear()
        leaving = [r for r in self._registered.values() if not r.gone]
        self._registered.clear()
        for registration in leaving:
            registration.gone = True
        owned = [r for r in leaving if r.instance.service_type is not ServiceType.PERMANENT]
        for registration in leaving:
            if registration.kept is not None and registration not in owned:
                await registration.kept.aclose()  # PERMANENT: kept no more, left in place
        if owned:
            await run_cleanup(self._client, lambda: self._delete_all(owned))

    async def _delete_all(self, registrations: list[_Registration]) -> None:
        """Unregister what a close leaves behind: one unregister span each."""
        for registration in registrations:
            name = "aiocoord.discovery.unregister"
            with self._span(name, registration.path, registration.instance) as op:
                async with registration.lock:
                    kept = registration.kept
                    if kept is not None:
                        await kept.aclose()
                op.outcome("unregistered" if kept is not None and kept.deleted else "absent")

    def _check_started(self) -> None:
        self._life.check_open()
        if not self._running:
            raise RuntimeError(f"{self!r} is not started: start it (or use async with) first")

    # --- registering ---------------------------------------------------------------------

    async def register(self, instance: ServiceInstance) -> None:
        """Register ``instance`` at ``<base>/<name>/<id>`` and keep it until
        :meth:`unregister` or :meth:`aclose`.

        Missing parents are made as containers. Registering an id again (here,
        or one another registrant holds) replaces its node with this instance,
        as Curator does. Refused before anything is sent: an instance whose JSON
        is larger than the client's ``max_data_size`` (DataTooLargeError), a
        DYNAMIC_SEQUENTIAL one (InvalidArgumentError). A register that fails or
        is cancelled leaves no node of its own behind. RuntimeError before
        :meth:`start`.
        """
        self._checked(instance)
        self._check_started()
        await self._register(instance)

    async def _register(self, instance: ServiceInstance) -> None:
        path, data = self._checked(instance)
        key = (instance.name, instance.id)
        with self._span("aiocoord.discovery.register", path, instance) as op:
            while True:
                registration = self._registered.get(key)
                fresh = registration is None or registration.gone
                if registration is None or registration.gone:
                    registration = _Registration(instance, data, path)
                    self._registered[key] = registration
                async with registration.lock:
                    if registration.gone:
                        continue  # a register we waited for failed, or an unregister came
                    await self._write(key, registration, instance, data, fresh=fresh)
                    op.outcome("registered")
                    return

    def _kept_node(self, registration: _Registration) -> KeptNode:
        """The kept node of a registration, in its instance's current kind."""
        kind = registration.instance.service_type
        kept = KeptNode(
            self._client,
            registration.path,
            registration.data,
            ephemeral=kind is ServiceType.DYNAMIC,
            acl=self._acl,
            # The last registration of an id wins, as in Curator; a watch on the
            # node would fight another registrant's for it, so look after reconnects.
            foreign=Foreign.REPLACE,
            watch=False,
            delete_on_close=kind is not ServiceType.PERMANENT,
            what=f"service instance {registration.path!r}",
        )
        kept.add_listener(functools.partial(self._on_kept, registration))
        return kept

    def _on_kept(self, registration: _Registration, state: KeptState) -> None:
        if not state.created:
            return
        if (
            registration.ephemeral
            and registration.session
            and state.session != registration.session
        ):
            # Made again in a new session (the old one expired with the node).
            _telemetry.add("aiocoord.discovery.reregistrations", 1, self._tags.metric_attributes)
        registration.session = state.session

    async def _write(
        self,
        key: tuple[str, str],
        registration: _Registration,
        instance: ServiceInstance,
        data: bytes,
        *,
        fresh: bool,
    ) -> bool:
        """Make the registration's node hold ``instance`` (under its lock); whether it
        was made (rather than rewritten in place). A fresh one that fails or is
        cancelled is forgotten, and what it made deleted."""
        try:
            made: bool = await self._rewrite(registration, instance, data)
            self._life.check_open()
            return made
        except BaseException:
            if not fresh and not self._life.closed:
                raise  # still registered: kept as it is, and checked after outages
            if self._registered.get(key) is registration:
                del self._registered[key]
            registration.gone = True
            if registration.kept is not None:
                await registration.kept.aclose()  # deletes what it made, if anything
            raise

    async def _rewrite(
        self, registration: _Registration, instance: ServiceInstance, data: bytes
    ) -> bool:
        """Publish ``instance`` in the registration's node, remaking the node if its
        kind changed; whether the node was made (rather than rewritten in place)."""
        same_kind = (instance.service_type is ServiceType.DYNAMIC) == registration.ephemeral
        registration.instance, registration.data = instance, data
        kept = registration.kept
        if kept is not None and same_kind:
            before = kept.state.czxid
            await kept.set_data(data)  # made again here if it was found gone
            return kept.state.czxid != before
        if kept is not None:
            # Another kind of node (ephemeral or not): ours goes, the new kind is made.
            kept.delete_on_close = True
            await kept.aclose()
        registration.kept = None  # until it stands: a start that fails undoes itself
        kept = self._kept_node(registration)
        await kept.start()
        registration.kept = kept
        return True

    async def update(self, instance: ServiceInstance) -> None:
        """Replace the data of an instance this object registered (same name and
        id): the node is rewritten, and this form is the one made again after a
        session expiry. InvalidArgumentError if it is not registered here; the
        same checks as :meth:`register` otherwise."""
        path, data = self._checked(instance)
        self._check_started()
        registration = self._registered.get((instance.name, instance.id))
        if registration is None or registration.gone:
            raise InvalidArgumentError(
                "instance", "it is not registered by this ServiceDiscovery: register() it", path
            )
        with self._span("aiocoord.discovery.update", path, instance) as op:
            async with registration.lock:
                if registration.gone:
                    raise InvalidArgumentError("instance", "it was unregistered meanwhile", path)
                made = await self._rewrite(registration, instance, data)
                op.outcome("registered" if made else "updated")  # made again, or rewritten

    async def unregister(self, instance: ServiceInstance) -> None:
        """Delete the instance's node (``<base>/<name>/<id>``), whoever registered
        it, and stop keeping it if this object did. A missing node is no error."""
        if not isinstance(instance, ServiceInstance):
            raise ArgumentTypeError("instance", "a ServiceInstance", instance, self._base)
        path = self.path_of(instance.name, instance.id)
        self._life.check_open()
        client = self._client
        with self._span("aiocoord.discovery.unregister", path, instance) as op:
            registration = self._registered.pop((instance.name, instance.id), None)
            if registration is not None:
                registration.gone = True
                async with registration.lock:  # a write under way ends first; none starts after
                    kept = registration.kept
                    if kept is not None:
                        kept.delete_on_close = False  # deleted below, whoever holds it
                        await kept.aclose()
            try:
                await retry_on_connection_loss(client, lambda: client.delete(path))
            except NoNodeError:
                op.outcome("absent")
            else:
                op.outcome("unregistered")

    # --- reading ------------------------------------------------------------------------------

    async def names(self) -> list[str]:
        """The services under the base path (its children), sorted."""
        client = self._client
        try:
            return sorted(
                await retry_on_connection_loss(client, lambda: client.children(self._base))
            )
        except NoNodeError:
            return []

    async def instances(self, name: str) -> list[ServiceInstance]:
        """The instances of service ``name``, sorted by id (one round trip for
        their data). A node that does not hold an instance is left out, with a
        warning in the log."""
        found = []
        for child in await read_children(self._client, self.path_of(name)):
            try:
                found.append(ServiceInstance.from_json(child.data, path=child.path))
            except CorruptValueError as error:
                log.warning("service discovery: skipping %r: %s", child.path, error)
        return sorted(found, key=lambda instance: instance.id)

    async def instance(self, name: str, instance_id: str) -> ServiceInstance | None:
        """Instance ``instance_id`` of service ``name``, or None if there is none.
        CorruptValueError if its node does not hold an instance."""
        path = self.path_of(name, instance_id)
        client = self._client
        try:
            data, _stat = await retry_on_connection_loss(client, lambda: client.get(path))
        except NoNodeError:
            return None
        return ServiceInstance.from_json(data, path=path)

    # --- caches and providers ---------------------------------------------------------------

    def cache(self, name: str, *, max_buffer: int | None = None) -> ServiceCache:
        """A :class:`ServiceCache` of service ``name``, to start (``async with``);
        this object's :meth:`aclose` closes it if it is still open. ``max_buffer``
        bounds each of its ``events()`` iterators (default 10,000)."""
        self._life.check_open()
        limit = DEFAULT_MAX_BUFFER if max_buffer is None else max_buffer
        cache = ServiceCache(self._client, self._base, name, max_buffer=limit)
        self._closables.add(cache)
        return cache

    def provider(
        self,
        name: str,
        *,
        strategy: ProviderStrategy = ProviderStrategy.ROUND_ROBIN,
        error_threshold: int = DEFAULT_ERROR_THRESHOLD,
        down_timeout: float = DEFAULT_DOWN_TIMEOUT,
    ) -> ServiceProvider:
        """A :class:`ServiceProvider` of service ``name`` on a cache of its own, to
        start (``async with``); this object's :meth:`aclose` closes it if still
        open. ``strategy`` picks among the enabled instances that are not down;
        one is down after ``error_threshold`` errors noted within
        ``down_timeout`` seconds of its first (Curator's DownInstancePolicy)."""
        self._life.check_open()
        provider = ServiceProvider(
            ProviderCache(self._client, self._base, name),
            strategy=strategy,
            error_threshold=error_threshold,
            down_timeout=down_timeout,
        )
        self._closables.add(provider)
        return provider
