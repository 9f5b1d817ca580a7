"""OpenTelemetry traces and metrics, when the API is installed (the ``otel`` extra).

The rest of the package sees only this module's small API: :func:`span` (a
context manager around one operation), :func:`start_hold` (a span and a timer
for something held across calls), :func:`record` and :func:`add` (instruments
by name), :func:`recipe_tags` (one recipe object's attributes, built once).

Without ``opentelemetry-api`` every entry point returns at its first line (a
shared do-nothing object), so the library runs as it does without telemetry.
With the API, tracer and meter come from the *global* providers, as the
OpenTelemetry guidance asks of libraries: an application that configures an
SDK sees everything, one that does not pays the API's no-op cost. Spans that
no SDK records are not made current, which keeps that cost down (measured in
bench/telemetry_noop.py).

Attribute sets of metrics stay small on purpose (a recipe kind, an optional
name the user gives through :class:`Telemetry`, the path only on request):
spans, one per operation, always carry the path.
"""

from __future__ import annotations

import contextvars
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Final, Protocol

from . import _paths
from ._exceptions import ArgumentTypeError

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # the otel extra is not installed: everything below is a no-op
    AVAILABLE = False
else:
    AVAILABLE = True

__all__ = [
    "AVAILABLE",
    "HoldRecord",
    "SpanScope",
    "Tags",
    "Telemetry",
    "add",
    "detached_context",
    "recipe_tags",
    "record",
    "session_state",
    "span",
    "start_hold",
    "times_requests",
    "track_cache",
    "track_session",
]

LIBRARY: Final = "aiocoord"

# Attribute keys (docs/observability.md has the table).
PATH: Final = "aiocoord.path"
RECIPE: Final = "aiocoord.recipe"
NAME: Final = "aiocoord.name"
OUTCOME: Final = "aiocoord.outcome"
OPERATION: Final = "aiocoord.operation"

_SECONDS_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Histogram bounds for durations in seconds (the SDK's defaults suit milliseconds)."""


# --- what the user configures ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Telemetry:
    """How a client's recipes label their OpenTelemetry metrics
    (``connect(..., telemetry=Telemetry(...))``; see docs/observability.md).

    Metrics carry the recipe kind (``aiocoord.recipe``: ``mutex``, ``queue``,
    ...) and, where ``names`` gives one, a name (``aiocoord.name``): the
    value of the longest path prefix in ``names`` that contains the recipe's
    path, so ``{"/orders": "orders"}`` names every recipe under ``/orders``.
    ``paths=True`` adds the znode path (``aiocoord.path``) to metrics as well:
    exact, but one time series per path, which a service with many lock paths
    may not want. Spans carry the path either way. Paths are the client's
    (within its namespace).

    ``request_metrics=True`` times every ZooKeeper request the client sends
    (``aiocoord.request.duration``, by operation and outcome). Off by default:
    with an SDK each request's measurement costs about what a span does, a
    lock grant makes three requests, and the recipes' own histograms already
    time what their callers wait for (docs/observability.md, "What it costs").
    """

    paths: bool = False
    names: Mapping[str, str] = field(default_factory=dict)
    request_metrics: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.paths, bool):
            raise ArgumentTypeError("paths", "a bool", self.paths)
        if not isinstance(self.request_metrics, bool):
            raise ArgumentTypeError("request_metrics", "a bool", self.request_metrics)
        if not isinstance(self.names, Mapping):
            raise ArgumentTypeError("names", "a mapping of path prefix to name", self.names)
        names: dict[str, str] = {}
        for prefix, name in self.names.items():
            if not isinstance(name, str):
                raise ArgumentTypeError("names", "a mapping of path prefix to name", name)
            names[_paths.validate_path(prefix)] = name
        object.__setattr__(self, "names", MappingProxyType(names))

    def name_for(self, path: str) -> str | None:
        """The name ``names`` gives ``path`` (its longest listed prefix), if any."""
        probe = path
        while True:
            name = self.names.get(probe)
            if name is not None:
                return name
            if probe == "/":
                return None
            probe = probe.rpartition("/")[0] or "/"


DEFAULT: Final = Telemetry()


class Tags:
    """One recipe object's attributes, built once: for its spans (always the path)
    and for its metrics (low cardinality, see :class:`Telemetry`)."""

    __slots__ = (
        "_with_outcome",
        "kind",
        "metric_attributes",
        "metric_key",
        "path",
        "span_attributes",
    )

    def __init__(self, kind: str, path: str, span: dict[str, Any], metric: dict[str, Any]):
        self.kind = kind
        self.path = path
        self.span_attributes = span
        self.metric_attributes = metric
        self.metric_key = tuple(sorted(metric.items()))
        """The metric attributes, hashable (for the gauges this module keeps)."""
        self._with_outcome: dict[str, dict[str, Any]] = {}

    def metric_with_outcome(self, outcome: str) -> dict[str, Any]:
        """The metric attributes plus ``aiocoord.outcome`` (cached: a few outcomes each)."""
        attributes = self._with_outcome.get(outcome)
        if attributes is None:
            attributes = self._with_outcome[outcome] = {**self.metric_attributes, OUTCOME: outcome}
        return attributes


def recipe_tags(settings: Telemetry, kind: str, path: str, namespace: str | None = None) -> Tags:
    """The attributes of one recipe object of ``kind`` at ``path`` on a client with
    these settings; the span's path is the server's (namespace included)."""
    server_path = path if not namespace else (namespace + path if path != "/" else namespace)
    metric: dict[str, Any] = {RECIPE: kind}
    name = settings.name_for(path)
    if name is not None:
        metric[NAME] = name
    if settings.paths:
        metric[PATH] = server_path
    return Tags(kind, server_path, {**metric, PATH: server_path}, metric)


# --- spans ------------------------------------------------------------------------------------


class SpanScope:
    """``with span(...) as scope:`` one operation; the base class does nothing (no API)."""

    __slots__ = ()

    def __enter__(self) -> SpanScope:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    @property
    def recording(self) -> bool:
        """Whether anything reads what is set here (skip costly attributes if not)."""
        return False

    def set(self, key: str, value: Any) -> None:
        """Set one attribute on the span."""

    def outcome(self, value: str) -> None:
        """How the operation ended (``aiocoord.outcome``); an exception sets its own."""

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        """Add an event to the span."""


_NULL_SCOPE: Final = SpanScope()


def _outcome_of(exc_type: type[BaseException]) -> str:
    if issubclass(exc_type, TimeoutError):
        return "timeout"
    if issubclass(exc_type, BaseException) and exc_type.__name__ == "CancelledError":
        return "cancelled"
    return "error"


if AVAILABLE:

    class _Scope(SpanScope):
        __slots__ = (
            "_attributes",
            "_duration",
            "_name",
            "_outcome",
            "_outer",
            "_span",
            "_started",
            "_tags",
            "_token",
            "_tracing",
        )

        def __init__(
            self, name: str, tags: Tags | None, duration: str | None, tracing: bool
        ) -> None:
            self._tracing = tracing
            self._name = name
            self._tags = tags
            self._duration = duration
            self._outcome: str | None = None
            self._span: Any = None
            self._token: Any = None  # opentelemetry's opaque context token
            self._outer: contextvars.Token[Any] | None = None
            self._started = 0.0
            # What the block sets, given to the span in one call when it ends: the
            # SDK takes a lock and checks the span per call (measured: set one by
            # one, four attributes cost the SDK a third more).
            self._attributes: dict[str, Any] = {}

        def __enter__(self) -> SpanScope:
            tags = self._tags
            if self._tracing:
                attributes = tags.span_attributes if tags is not None else None
                span = self._span = _tracer().start_span(self._name, attributes=attributes)
            else:  # metrics only: no span to make
                span = self._span = otel_trace.INVALID_SPAN
            # A span no SDK records (an invalid context) has nothing to give its
            # children: the caller's span stays current, at no attach cost.
            if span.get_span_context().is_valid:
                if self._duration == WAIT:
                    # A hold granted in this acquire starts beside it, not in it.
                    self._outer = _HOLD_PARENT.set(otel_context.get_current())
                self._token = otel_context.attach(otel_trace.set_span_in_context(span))
            if self._duration is not None and tags is not None:
                if self._duration == WAIT:
                    _queued[tags.metric_key] = _queued.get(tags.metric_key, 0) + 1
                self._started = time.perf_counter()
            return self

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            tb: TracebackType | None,
        ) -> None:
            span = self._span
            attributes = self._attributes
            try:
                if exc_type is not None:
                    outcome = _outcome_of(exc_type)
                    if self._outcome is None:
                        self._outcome = outcome
                    if outcome == "error":
                        attributes["error.type"] = exc_type.__qualname__
                        if exc is not None:
                            span.record_exception(exc)
                        span.set_status(Status(StatusCode.ERROR, str(exc)))
                outcome = self._outcome or "ok"
                attributes[OUTCOME] = outcome
                tags = self._tags
                if self._started and tags is not None:
                    assert self._duration is not None
                    elapsed = time.perf_counter() - self._started
                    if self._duration == WAIT:
                        attributes["aiocoord.wait_ms"] = round(elapsed * 1000, 3)
                        _queued[tags.metric_key] -= 1
                    _instrument(self._duration).record(elapsed, tags.metric_with_outcome(outcome))
                if span.is_recording():
                    span.set_attributes(attributes)
            finally:
                if self._token is not None:
                    otel_context.detach(self._token)
                if self._outer is not None:
                    _HOLD_PARENT.reset(self._outer)
                span.end()

        @property
        def recording(self) -> bool:
            return bool(self._span is not None and self._span.is_recording())

        def set(self, key: str, value: Any) -> None:
            self._attributes[key] = value

        def outcome(self, value: str) -> None:
            self._outcome = value

        def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
            self._span.add_event(name, attributes)


_HOLD_PARENT: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "aiocoord_hold_parent", default=None
)
"""The caller's context while an acquire span is current: the parent of its hold."""

WAIT: Final = "aiocoord.lock.wait.duration"
"""The holders' wait histogram: spans timed by it also count as queued contenders."""


def span(name: str, tags: Tags | None = None, *, duration: str | None = None) -> SpanScope:
    """A span named ``name`` under the caller's current span, with ``tags``'s span
    attributes; current for the block (so the caller's own spans nest under it).

    ``duration``: a histogram (see INSTRUMENTS) that gets the block's time, with
    ``tags``'s metric attributes and the outcome; :data:`WAIT` also counts the
    block in ``aiocoord.contenders.queued`` while it runs.
    """
    if not AVAILABLE:
        return _NULL_SCOPE
    tracing = _tracing()
    if not tracing and (duration is None or not _metering()):
        return _NULL_SCOPE  # nobody configured an SDK: the API's no-ops, skipped
    return _Scope(name, tags, duration, tracing)


# Whether the application set a tracer / meter provider, asked before every
# operation: with none set, the API's no-ops are skipped altogether. A provider,
# once set, stays (the API refuses to replace it), so a yes is kept. A no is
# read from the API's own global (None until a provider is set), a dictionary
# lookup where the public getter also reads the environment each time; where
# that global is missing (another API version) or the environment names a
# provider, the public getter decides.
_UNKNOWN: Final = object()
_ENVIRONMENT_PROVIDERS: Final = bool(
    {"OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"} & os.environ.keys()
)
_set = {"tracing": False, "metering": False}


def _tracing() -> bool:
    if _set["tracing"]:
        return True
    if not _ENVIRONMENT_PROVIDERS and getattr(otel_trace, "_TRACER_PROVIDER", _UNKNOWN) is None:
        return False
    if isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider):
        return False
    _set["tracing"] = True
    return True


def _metering() -> bool:
    if _set["metering"]:
        return True
    internal = sys.modules.get("opentelemetry.metrics._internal")
    if not _ENVIRONMENT_PROVIDERS and getattr(internal, "_METER_PROVIDER", _UNKNOWN) is None:
        return False
    # The API names no public class for its proxy: told by name (if a later API
    # renames it, everything is recorded, into no-ops until a provider is set).
    if type(otel_metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        return False
    _set["metering"] = True
    return True


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the caller's current span (if any records)."""
    if not AVAILABLE:
        return
    current = otel_trace.get_current_span()
    if current.is_recording():
        current.add_event(name, attributes)


def detached_context() -> contextvars.Context | None:
    """A context for a background task that belongs to no caller's span (None: the
    default copy will do, telemetry being off).

    A task copies its creator's context: a watcher started inside a user's
    request would otherwise parent its spans, long after, to that request.
    """
    if not AVAILABLE or not _tracing():
        return None  # no span can be current: the default copy carries none
    context = contextvars.copy_context()
    context.run(otel_context.attach, otel_context.Context())
    return context


class HoldRecord:
    """Something held across calls (a lock from acquire to release): its span, not
    current for anyone, and its timer; ended once, by :meth:`end`."""

    __slots__ = ("_duration", "_ended", "_span", "_started", "_tags")

    def __init__(self, tags: Tags, span: Any, duration: str | None) -> None:
        self._tags = tags
        self._span = span
        self._duration = duration
        self._started = time.perf_counter()
        self._ended = False

    def lost(self, reason: str) -> None:
        """The hold was lost (not given up): an event, and the lost-holds counter."""
        if self._ended:
            return
        if self._span is not None:
            self._span.add_event("aiocoord.hold.lost", {"aiocoord.reason": reason})
        add("aiocoord.holds.lost", 1, self._tags.metric_attributes)

    def given_up(self, reason: str, attributes: Mapping[str, str | bool] | None = None) -> None:
        """The holder ended the hold on purpose (a leader's resign or hand-over):
        an event saying how, with ``attributes``; no loss, so the lost-holds
        counter does not move."""
        if self._ended or self._span is None:
            return
        self._span.add_event(
            "aiocoord.hold.given_up", {"aiocoord.reason": reason, **(attributes or {})}
        )

    def end(self, outcome: str) -> None:
        """The hold is over (``released`` or ``lost``): record its time, end its span."""
        if self._ended:
            return
        self._ended = True
        if self._duration is not None:
            record(
                self._duration,
                time.perf_counter() - self._started,
                self._tags.metric_with_outcome(outcome),
            )
        if self._span is not None:
            self._span.set_attribute(OUTCOME, outcome)
            self._span.end()


def start_hold(
    name: str, tags: Tags | None, *, token: int | None = None, duration: str | None = None
) -> HoldRecord | None:
    """Start timing a hold of ``tags``'s recipe (None when telemetry is off).

    Its span, ``name``, starts under the caller's current span but is never
    made current: the hold outlives the call that took it. ``duration``: the
    histogram that gets the hold's time when it ends.
    """
    if not AVAILABLE or tags is None:
        return None
    if not _tracing():
        if duration is None or not _metering():
            return None
        return HoldRecord(tags, None, duration)
    attributes = dict(tags.span_attributes)
    if token is not None:
        attributes["aiocoord.fencing_token"] = token
    span = _tracer().start_span(name, context=_HOLD_PARENT.get(), attributes=attributes)
    return HoldRecord(tags, span if span.get_span_context().is_valid else None, duration)


# --- metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    kind: str  # histogram, counter, updown
    unit: str
    description: str


INSTRUMENTS: Final[dict[str, _Spec]] = {
    "aiocoord.lock.wait.duration": _Spec(
        "histogram", "s", "How long an acquire waited (locks, semaphores, leases, leaders)"
    ),
    "aiocoord.lock.hold.duration": _Spec(
        "histogram", "s", "How long a hold lasted, from its grant to its release or loss"
    ),
    "aiocoord.request.duration": _Spec(
        "histogram", "s", "ZooKeeper request latency, from sending to the reply"
    ),
    "aiocoord.counter.add.duration": _Spec("histogram", "s", "How long a counter add took"),
    "aiocoord.queue.take.duration": _Spec(
        "histogram", "s", "How long a queue get or take waited for an item"
    ),
    "aiocoord.session.reconnects": _Spec(
        "counter", "{reconnect}", "Connections regained within the same session"
    ),
    "aiocoord.session.expirations": _Spec("counter", "{session}", "Sessions lost"),
    "aiocoord.retries": _Spec("counter", "{retry}", "Requests retried after a connection loss"),
    "aiocoord.holds.lost": _Spec(
        "counter", "{hold}", "Holds lost (not given up): a session state or a deleted node"
    ),
    "aiocoord.counter.combined_batches": _Spec(
        "counter", "{batch}", "Counter adds of several callers written as one"
    ),
    "aiocoord.discovery.reregistrations": _Spec(
        "counter", "{instance}", "Service instances registered again in a new session"
    ),
    "aiocoord.discovery.picks": _Spec(
        "counter", "{pick}", "Instances picked by service providers (or none to pick)"
    ),
    "aiocoord.discovery.errors": _Spec(
        "counter", "{error}", "Errors noted against service instances by providers"
    ),
    "aiocoord.partition.items.owned": _Spec(
        "updown", "{item}", "Items the partitioners of this process own"
    ),
    "aiocoord.group.rejoins": _Spec(
        "counter", "{member}", "Group member nodes made again after they went"
    ),
    "aiocoord.leader.terms.held": _Spec(
        "updown", "{term}", "Leadership terms the participants of this process hold now"
    ),
    "aiocoord.leader.changes": _Spec(
        "counter", "{change}", "Leader changes seen by leader observe() streams and listeners"
    ),
    "aiocoord.leader.balance.handovers": _Spec(
        "counter", "{term}", "Terms a LeaderElectionGroup handed over to spread leadership"
    ),
}


class _Meter:
    """The instruments, made on first use from the global meter (a proxy until the
    application sets a provider, which then takes over)."""

    def __init__(self) -> None:
        meter = otel_metrics.get_meter(LIBRARY, _version())
        self.instruments: dict[str, Any] = {}
        for name, spec in INSTRUMENTS.items():
            if spec.kind == "histogram":
                instrument: Any = meter.create_histogram(
                    name,
                    unit=spec.unit,
                    description=spec.description,
                    explicit_bucket_boundaries_advisory=list(_SECONDS_BUCKETS),
                )
            elif spec.kind == "counter":
                instrument = meter.create_counter(
                    name, unit=spec.unit, description=spec.description
                )
            else:
                instrument = meter.create_up_down_counter(
                    name, unit=spec.unit, description=spec.description
                )
            self.instruments[name] = instrument
        meter.create_observable_up_down_counter(
            "aiocoord.requests.outstanding",
            [_observe_sessions("outstanding_requests")],
            unit="{request}",
            description="Requests sent and not yet answered",
        )
        meter.create_observable_up_down_counter(
            "aiocoord.watches.active",
            [_observe_sessions("active_watches")],
            unit="{watch}",
            description="Watches set and not yet fired or removed",
        )
        meter.create_observable_up_down_counter(
            "aiocoord.contenders.queued",
            [_observe_queued],
            unit="{contender}",
            description="Acquires of this process waiting in a queue",
        )
        meter.create_observable_up_down_counter(
            "aiocoord.cache.size",
            [_observe_caches],
            unit="{node}",
            description="Nodes a cache holds",
        )


_meter: _Meter | None = None
_tracer_: Any = None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(LIBRARY)
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def _tracer() -> Any:
    global _tracer_
    if _tracer_ is None:
        _tracer_ = otel_trace.get_tracer(LIBRARY, _version())
    return _tracer_


def _instrument(name: str) -> Any:
    global _meter
    if _meter is None:
        _meter = _Meter()
    return _meter.instruments[name]


def record(name: str, value: float, attributes: Mapping[str, Any] | None = None) -> None:
    """Record ``value`` in the histogram ``name`` (see INSTRUMENTS)."""
    if AVAILABLE and _metering():
        _instrument(name).record(value, attributes)


def add(name: str, amount: int, attributes: Mapping[str, Any] | None = None) -> None:
    """Add ``amount`` to the counter or up-down counter ``name``."""
    if AVAILABLE and _metering():
        _instrument(name).add(amount, attributes)


_REQUEST_ATTRIBUTES: dict[tuple[int, bool], dict[str, str]] = {}


def times_requests(settings: Telemetry | None) -> bool:
    """Whether a client with these settings times its requests for :func:`request_done`
    (``Telemetry(request_metrics=True)`` and the API installed)."""
    return AVAILABLE and settings is not None and settings.request_metrics


def request_done(opcode: int, operation: Callable[[int], str], ok: bool, seconds: float) -> None:
    """One request's reply came back after ``seconds`` (called only by a client that
    :func:`times_requests`)."""
    if not _metering():
        return
    key = (opcode, ok)
    attributes = _REQUEST_ATTRIBUTES.get(key)
    if attributes is None:
        attributes = _REQUEST_ATTRIBUTES[key] = {
            OPERATION: operation(opcode),
            OUTCOME: "ok" if ok else "error",
        }
    _instrument("aiocoord.request.duration").record(seconds, attributes)


# --- what is observed, not counted ---------------------------------------------------------


class SessionGauges(Protocol):
    def outstanding_requests(self) -> int: ...
    def active_watches(self) -> int: ...


_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
_caches: weakref.WeakKeyDictionary[Any, tuple[Tags, Callable[[], int]]] = (
    weakref.WeakKeyDictionary()
)


def track_session(session: SessionGauges, *, tracked: bool = True) -> None:
    """Count ``session``'s requests and watches in the gauges (until untracked or gone)."""
    if not AVAILABLE:
        return
    if tracked:
        _sessions.add(session)
        if _meter is None:
            _instrument("aiocoord.retries")  # the gauges' callbacks are registered with them
    else:
        _sessions.discard(session)


def track_cache(
    cache: object, tags: Tags, size: Callable[[], int] | None = None, *, tracked: bool = True
) -> None:
    """Count ``size()`` in ``aiocoord.cache.size`` while ``cache`` runs (``size`` must
    not refer to ``cache``, which would then never be collected)."""
    if not AVAILABLE:
        return
    if tracked:
        assert size is not None
        _caches[cache] = (tags, size)
        if _meter is None:
            _instrument("aiocoord.retries")
    else:
        _caches.pop(cache, None)


def _observe_sessions(method: str) -> Callable[[Any], Iterable[Any]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        total = sum(getattr(session, method)() for session in list(_sessions))
        return [Observation(total)]

    return observe


_queued: dict[tuple[tuple[str, Any], ...], int] = {}
"""Acquires waiting now, by metric attributes: counted here (two dict updates per
acquire) and observed at collection, rather than two SDK records per acquire."""


def _observe_queued(options: CallbackOptions) -> Iterable[Observation]:
    return [Observation(count, dict(key)) for key, count in list(_queued.items())]


def _observe_caches(options: CallbackOptions) -> Iterable[Observation]:
    totals: dict[tuple[tuple[str, Any], ...], int] = {}
    for tags, size in list(_caches.values()):
        key = tuple(sorted(tags.metric_attributes.items()))
        totals[key] = totals.get(key, 0) + size()
    return [Observation(total, dict(key)) for key, total in totals.items()]


# --- the session's states ---------------------------------------------------------------


class SessionTrace:
    """One client's session in spans: ``aiocoord.session.disconnected`` runs from a
    SUSPENDED to the next session (a root span: no caller waits on it), with
    events for each state on the way; counters for reconnects and expiries."""

    __slots__ = ("_outage",)

    def __init__(self) -> None:
        self._outage: Any = None

    def state(self, state: str, session_id: int, server: str | None) -> None:
        if not AVAILABLE:
            return
        attributes: dict[str, Any] = {"aiocoord.session_id": f"0x{session_id:x}"}
        if server:
            attributes["server.address"] = server
        if state == "SUSPENDED":
            if self._outage is None:
                span = _tracer().start_span(
                    "aiocoord.session.disconnected",
                    context=otel_context.Context(),
                    attributes=attributes,
                )
                self._outage = span if span.get_span_context().is_valid else False
        elif state == "LOST":
            add("aiocoord.session.expirations", 1)
        elif state == "RECONNECTED":
            add("aiocoord.session.reconnects", 1)
        outage = self._outage
        if outage:
            outage.add_event(f"aiocoord.session.{state.lower()}", attributes)
        if state in {"CONNECTED", "RECONNECTED", "READ_ONLY"} and outage is not None:
            if outage:
                outage.set_attribute(OUTCOME, state.lower())
                outage.end()
            self._outage = None


def session_state(trace: SessionTrace, state: str, session_id: int, server: str | None) -> None:
    """Report a session's state transition (see :class:`SessionTrace`)."""
    if AVAILABLE:
        trace.state(state, session_id, server)
