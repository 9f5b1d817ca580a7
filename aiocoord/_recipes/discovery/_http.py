"""An httpx transport that sends each request to an instance a ServiceProvider picks.

``httpx.AsyncClient(transport=DiscoveryTransport(provider))``: a request to
``http://orders/items/1`` goes to an instance of the provider's service, picked
for that request, and the client code stays plain httpx. What it does that a loop
around ``provider.pick()`` in application code tends to get wrong:

- The request counts as in flight (``provider.using()``) until its response is
  closed, body included, not only until the headers arrive: that is what
  POWER_OF_TWO_CHOICES and LEAST_OUTSTANDING balance on.
- A connection the instance refuses (``httpx.ConnectError``, ``ConnectTimeout``)
  is noted against it (``provider.note_error``) and the request is sent to
  another instance at once: nothing reached a server, so even a POST is safe
  to resend. Errors after the connection (a read timeout, a 503) are the
  caller's to judge, and are neither retried nor noted here.

httpx is an optional dependency (the ``httpx`` extra): this module imports it
when a transport is made, not when aiocoord is imported. The class derives from
``httpx.AsyncBaseTransport`` for type checkers only; at run time it is a plain
class with the same methods, which is all ``httpx.AsyncClient`` calls (deriving
at run time would import httpx with aiocoord, a cost every user would pay).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self

from ..._checks import check_int
from ..._exceptions import ArgumentTypeError, OperationTimeoutError
from ._instance import ServiceInstance
from ._provider import ServiceProvider

if TYPE_CHECKING:
    import httpx

    _Base = httpx.AsyncBaseTransport
else:
    _Base = object

__all__ = ["DiscoveryTransport"]

DEFAULT_RETRIES = 2
"""Other instances tried after a refused connection (each noted as an error)."""
_REPICKS = 8
"""Picks per attempt to find an instance this request has not tried yet (a strategy
such as STICKY keeps its choice: then the tried one is sent to again)."""


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ImportError("DiscoveryTransport needs httpx: pip install 'aiocoord[httpx]'") from None
    return httpx


class DiscoveryTransport(_Base):
    """An httpx transport over a :class:`~aiocoord.ServiceProvider`: each request goes
    to an instance the provider picks, and a refused connection is retried on another.

    ``httpx.AsyncClient(transport=DiscoveryTransport(provider))``, then requests to
    any URL (``http://orders/items/1``): its host names no machine, the provider
    does. The instance's URI is :meth:`~aiocoord.ServiceInstance.build_uri` when it
    has a ``uri_spec`` (``"{scheme}://{address}:{port}/v1"``: the request's path is
    appended to it), else the request's scheme with the instance's address and its
    ``port`` (``ssl_port`` for https). The Host header names the instance.

    The request counts as in flight through ``provider.using()`` until its
    response is closed. A connection refused or timed out (``httpx.ConnectError``,
    ``httpx.ConnectTimeout``) is noted with ``provider.note_error()`` and the
    request goes to another instance, up to ``retries`` more; the last such error
    is raised when none is left. With no instance to pick, a request waits for one
    up to its connect timeout, then raises ``httpx.ConnectError``.

    ``transport`` sends the rewritten requests (default: a new
    ``httpx.AsyncHTTPTransport()``); :meth:`aclose` closes it. The provider is the
    caller's to start and close. Needs httpx (the ``httpx`` extra).
    """

    def __init__(
        self,
        provider: ServiceProvider,
        *,
        retries: int = DEFAULT_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        lib = _httpx()
        if not isinstance(provider, ServiceProvider):
            raise ArgumentTypeError("provider", "a ServiceProvider", provider)
        check_int(retries, "retries", minimum=0)
        if transport is not None and not isinstance(transport, lib.AsyncBaseTransport):
            raise ArgumentTypeError("transport", "an httpx.AsyncBaseTransport or None", transport)
        self._httpx = lib
        self._provider = provider
        self._retries = retries
        self._inner: httpx.AsyncBaseTransport = (
            lib.AsyncHTTPTransport() if transport is None else transport
        )

    def __repr__(self) -> str:
        provider = getattr(self, "_provider", None)
        return f"<DiscoveryTransport {provider!r} retries={getattr(self, '_retries', '?')}>"

    @property
    def provider(self) -> ServiceProvider:
        """The provider that picks an instance for each request."""
        return self._provider

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to a picked instance (httpx calls this; see the class)."""
        lib = self._httpx
        logical = request.url
        timeouts = request.extensions.get("timeout") or {}
        tried: set[str] = set()
        last: Exception | None = None
        for _attempt in range(self._retries + 1):
            instance, scope = await self._enter(request, timeouts.get("connect"), tried)
            release = _Release(scope)
            try:
                request.url = _target(lib, logical, instance)
                request.headers["Host"] = request.url.netloc.decode("ascii")
                response = await self._inner.handle_async_request(request)
            except (lib.ConnectError, lib.ConnectTimeout) as error:
                await release()
                self._provider.note_error(instance)
                tried.add(instance.id)
                last = error
                continue
            except BaseException:
                await release()
                raise
            response.stream = _counted(lib)(response.stream, release)
            return response
        assert last is not None
        raise last

    async def _enter(
        self, request: httpx.Request, wait: float | None, tried: set[str]
    ) -> tuple[ServiceInstance, contextlib.AbstractAsyncContextManager[ServiceInstance]]:
        """An instance for ``request`` and the entered ``provider.using()`` scope that
        counts it in flight: one this request has not tried, if the strategy gives
        one within _REPICKS picks. With none to pick within ``wait`` seconds:
        httpx.ConnectError."""
        for repick in range(_REPICKS):
            scope = self._provider.using(timeout=wait)
            try:
                instance = await scope.__aenter__()
            except OperationTimeoutError:
                raise self._httpx.ConnectError(
                    f"no instance of {self._provider.cache.path!r} to send "
                    f"{request.method} {request.url} to",
                    request=request,
                ) from None
            if instance.id not in tried or repick == _REPICKS - 1:
                return instance, scope
            await scope.__aexit__(None, None, None)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the transport that sends the rewritten requests (not the provider)."""
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)


def _target(lib: Any, logical: httpx.URL, instance: ServiceInstance) -> httpx.URL:
    """Where ``logical`` goes on ``instance`` (``lib``: the httpx module)."""
    base: httpx.URL
    if instance.uri_spec is not None:
        base = lib.URL(instance.build_uri())
    else:
        https = logical.scheme == "https"
        port = instance.ssl_port if https else instance.port
        base = lib.URL(scheme=logical.scheme, host=instance.address or "", port=port)
    path = base.raw_path.rstrip(b"/").split(b"?", 1)[0] + logical.raw_path
    target: httpx.URL = base.copy_with(raw_path=path)
    return target


class _Release:
    """Ends a request's ``provider.using()`` scope, once."""

    def __init__(self, scope: contextlib.AbstractAsyncContextManager[ServiceInstance]) -> None:
        self._scope: contextlib.AbstractAsyncContextManager[ServiceInstance] | None = scope

    async def __call__(self) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            await scope.__aexit__(None, None, None)


@functools.cache
def _counted(lib: Any) -> Any:
    """The response stream wrapper (made once httpx is imported: httpx checks that a
    response's stream is an ``httpx.AsyncByteStream``)."""

    class CountedStream(lib.AsyncByteStream):  # type: ignore[misc]
        """A response body whose close ends the request's in-flight count."""

        def __init__(self, stream: Any, release: _Release) -> None:
            self._stream = stream
            self._release = release

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._stream:
                yield chunk

        async def aclose(self) -> None:
            try:
                await self._stream.aclose()
            finally:
                await self._release()

    return CountedStream
