"""A service instance, and its JSON form: Curator's ``JsonInstanceSerializer``, byte for byte.

What Curator 5 (curator-x-discovery) writes, checked against its jar:

- One JSON object, no spaces, fields in this order: ``name``, ``id``,
  ``address``, ``port``, ``sslPort``, ``payload``, ``registrationTimeUTC``,
  ``serviceType``, ``uriSpec``, ``enabled``. Curator's default serializer
  (``new JsonInstanceSerializer<>(cls)``) leaves ``enabled`` out; the full
  one writes it. We always write it (so a draining instance is seen as one),
  and every Curator 5 reader ignores what it does not know.
- The payload carries Jackson's type marker (``@JsonTypeInfo(use=CLASS)``):
  an object gets an ``"@class"`` property first (``java.util.LinkedHashMap``
  for a plain map), an array is wrapped as ``["java.util.ArrayList", [...]]``
  (a bare array is refused by Curator's reader), and so is a Java ``Long``
  (``["java.lang.Long", 5]``); strings, booleans, doubles and ints are bare.
  Reading strips the marker into :attr:`ServiceInstance.payload_type`, and
  writing puts it back, so an instance read from Java and updated here keeps
  its payload class.
- ``uriSpec`` is ``{"parts": [{"value": ..., "variable": ...}]}``, the parsed
  form of a template such as ``{scheme}://{address}:{port}``.

Fields a newer Curator adds are kept (:attr:`ServiceInstance.extra`) and
written back after the known ones, so an update from here does not drop them.
"""

from __future__ import annotations

import enum
import json
import math
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ... import _paths
from ..._exceptions import (
    ArgumentTypeError,
    CorruptValueError,
    InvalidArgumentError,
    InvalidPathError,
)

__all__ = ["ServiceInstance", "ServiceType", "check_node_name", "parse_uri_spec"]

_MAP_CLASS = "java.util.LinkedHashMap"
"""The Jackson type a plain JSON object payload is written with (what Curator writes for a Map)."""
_LIST_CLASS = "java.util.ArrayList"
"""The Jackson type a JSON array payload is wrapped with."""
_TYPE_KEY = "@class"
"""Jackson's type property (``JsonTypeInfo.Id.CLASS``)."""
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
"""A Java class name as Jackson writes it: dotted identifiers (inner classes use ``$``)."""

_KNOWN = (
    "name",
    "id",
    "address",
    "port",
    "sslPort",
    "payload",
    "registrationTimeUTC",
    "serviceType",
    "uriSpec",
    "enabled",
)
"""The fields Curator writes, in its order."""

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class ServiceType(enum.Enum):
    """How an instance's node lives (Curator's ``ServiceType``)."""

    DYNAMIC = "DYNAMIC"
    """An ephemeral node: it goes with the registrant's session, and the
    registrant makes it again after a session expiry. The default."""
    STATIC = "STATIC"
    """A persistent node, deleted when its registrant unregisters it or closes."""
    PERMANENT = "PERMANENT"
    """A persistent node that outlives its registrant: only an explicit
    ``unregister()`` deletes it."""
    DYNAMIC_SEQUENTIAL = "DYNAMIC_SEQUENTIAL"
    """Curator's ephemeral sequential kind: read and listed, not registered from here."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _new_id() -> str:
    return str(uuid.uuid4())


def check_node_name(value: object, what: str, where: str) -> str:
    """``value`` if it can be one node's name (a service name, an instance id)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(what, "a str", value, where)
    node = f"{where.rstrip('/')}/{value}"
    if not value:
        raise InvalidPathError(node, f"the {what} is empty")
    if "/" in value:
        raise InvalidPathError(node, f"a {what} is one node name: it cannot hold '/'")
    if value in (".", ".."):
        raise InvalidPathError(node, f"{value!r} cannot be a {what}")
    _paths.validate_path(node)  # the code points ZooKeeper refuses
    return value


def _check_port(value: object, what: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(what, "an int or None", value, where)
    if not 0 <= value <= 65535:
        raise InvalidArgumentError(what, f"a port is 0..65535, not {value}", where)
    return value


def _check_json(value: object, what: str, where: str, depth: int = 0) -> None:
    """Refuse what JSON cannot carry, or would carry changed: non-str keys (json
    turns ``1`` into ``"1"``), NaN and infinities, sets and other objects."""
    if depth > 200:
        raise InvalidArgumentError(what, "nested too deeply (or it contains itself)", where)
    if value is None or isinstance(value, str | bool):
        return
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidArgumentError(what, f"{value} does not fit a Java long", where)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(what, f"{value} has no JSON form", where)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json(item, what, where, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgumentTypeError(f"{what} key", "a str", key, where)
            _check_json(item, what, where, depth + 1)
        return
    raise ArgumentTypeError(
        what, "a JSON value (dict, list, str, int, float, bool or None)", value, where
    )


# --- URI templates (Curator's UriSpec) -----------------------------------------------------


def parse_uri_spec(template: str, where: str = "uri_spec") -> list[tuple[str, bool]]:
    """A template's parts, ``(value, is_variable)``, by Curator's rules: ``{name}`` is
    a variable, text between is literal; ``{`` inside a variable, a ``}`` without
    its ``{`` and a ``{`` never closed are refused (Curator refuses them too)."""
    parts: list[tuple[str, bool]] = []
    literal: list[str] = []
    variable: list[str] | None = None
    for char in template:
        if char == "{":
            if variable is not None:
                raise InvalidArgumentError(
                    "uri_spec", f"'{{' inside a variable in {template!r}", where
                )
            if literal:
                parts.append(("".join(literal), False))
                literal = []
            variable = []
        elif char == "}":
            if variable is None:
                raise InvalidArgumentError(
                    "uri_spec", f"'}}' without its '{{' in {template!r}", where
                )
            parts.append(("".join(variable), True))
            variable = None
        elif variable is not None:
            variable.append(char)
        else:
            literal.append(char)
    if variable is not None:
        raise InvalidArgumentError("uri_spec", f"a variable is not closed in {template!r}", where)
    if literal:
        parts.append(("".join(literal), False))
    return parts


_BRACES = {"{": "{[}", "}": "{]}"}


def _template(parts: list[tuple[str, bool]]) -> str:
    """Parts back as a template; literal braces become Curator's ``{[}`` / ``{]}``."""
    out = []
    for value, variable in parts:
        if variable:
            out.append("{" + value + "}")
        else:
            out.append("".join(_BRACES.get(char, char) for char in value))
    return "".join(out)


def _text(value: object) -> str:
    """A value as Java's ``String.valueOf`` shows it (None: empty, as Curator's build)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- the instance ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInstance:
    """One instance of a service, as Curator's ``ServiceInstance`` (an immutable value).

    ``ServiceInstance(name="api", address="10.0.0.7", port=8080)`` is instance
    ``id`` (a random UUID unless given, as Curator's builder) of service ``name``,
    stored at ``<base>/<name>/<id>``. ``payload`` is any JSON value (a dict is
    what a Java ``JsonInstanceSerializer<Map>`` reads); ``registration_time`` is
    milliseconds since the epoch (UTC), now unless given; ``uri_spec`` a
    Curator URI template (``"{scheme}://{address}:{port}"``, see
    :meth:`build_uri`). ``enabled=False`` keeps the instance listed but out of
    every provider's choice (draining).

    ``payload_type`` is the Java class Curator's Jackson marker names for the
    payload (``"@class"``), None for the default (a map or list); ``extra``
    holds JSON fields this version does not know. Both are kept from what was
    read, so updating an instance a newer or a Java registrant wrote keeps them.

    Every field is checked here, before anything is sent: an ``id`` or
    ``name`` that is not one valid node name (``InvalidPathError``), a port
    outside 0..65535 or a payload JSON cannot carry unchanged (NaN, a
    non-str key: ``InvalidArgumentError`` / ``ArgumentTypeError``).
    Use :func:`dataclasses.replace` to derive a changed instance.
    """

    name: str
    id: str = field(default_factory=_new_id)
    address: str | None
    port: int | None = None
    ssl_port: int | None = None
    payload: Any = None
    registration_time: int = field(default_factory=_now_ms)
    service_type: ServiceType = ServiceType.DYNAMIC
    uri_spec: str | None = None
    enabled: bool = True
    payload_type: str | None = field(default=None, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        name = check_node_name(self.name, "service name", "/")
        where = f"/{name}/{self.id}" if isinstance(self.id, str) else f"/{name}"
        check_node_name(self.id, "instance id", f"/{name}")
        if self.address is not None and not isinstance(self.address, str):
            raise ArgumentTypeError("address", "a str or None", self.address, where)
        _check_port(self.port, "port", where)
        _check_port(self.ssl_port, "ssl_port", where)
        _check_json(self.payload, "payload", where)
        if isinstance(self.payload, tuple):
            object.__setattr__(self, "payload", list(self.payload))
        if isinstance(self.payload, dict) and _TYPE_KEY in self.payload:
            raise InvalidArgumentError(
                "payload", f"{_TYPE_KEY!r} is Jackson's type marker: give it as payload_type", where
            )
        rt = self.registration_time
        if isinstance(rt, bool) or not isinstance(rt, int):
            raise ArgumentTypeError("registration_time", "an int (ms since the epoch)", rt, where)
        if not _INT64[0] <= rt <= _INT64[1]:
            raise InvalidArgumentError("registration_time", f"{rt} does not fit a long", where)
        if not isinstance(self.service_type, ServiceType):
            raise ArgumentTypeError("service_type", "a ServiceType", self.service_type, where)
        if self.uri_spec is not None:
            if not isinstance(self.uri_spec, str):
                raise ArgumentTypeError("uri_spec", "a str or None", self.uri_spec, where)
            parse_uri_spec(self.uri_spec, where)
        if not isinstance(self.enabled, bool):
            raise ArgumentTypeError("enabled", "a bool", self.enabled, where)
        if self.payload_type is not None:
            if not isinstance(self.payload_type, str):
                raise ArgumentTypeError("payload_type", "a str or None", self.payload_type, where)
            if not _JAVA_CLASS.fullmatch(self.payload_type):
                raise InvalidArgumentError(
                    "payload_type", f"{self.payload_type!r} is not a Java class name", where
                )
        if not isinstance(self.extra, Mapping):
            raise ArgumentTypeError("extra", "a mapping", self.extra, where)
        for key, value in self.extra.items():
            if not isinstance(key, str):
                raise ArgumentTypeError("extra key", "a str", key, where)
            if key in _KNOWN:
                raise InvalidArgumentError("extra", f"{key!r} is a known field", where)
            _check_json(value, f"extra[{key!r}]", where)

    def __hash__(self) -> int:
        # The payload may be a dict: hash what names the instance.
        return hash((self.name, self.id))

    # --- URIs ----------------------------------------------------------------------------

    def build_uri(self, variables: Mapping[str, object] | None = None) -> str:
        """:attr:`uri_spec` with its variables filled in (Curator's ``buildUriSpec``).

        ``{scheme}`` is ``https`` when :attr:`ssl_port` is set, else ``http``;
        ``{name}``, ``{id}``, ``{address}``, ``{port}``, ``{ssl-port}``,
        ``{registration-time-utc}`` and ``{service-type}`` (lower case) are the
        instance's; ``{[}`` and ``{]}`` are literal braces. ``variables`` add to
        these or replace them. A missing value (a port of None) or an unknown
        variable is empty. No ``uri_spec``: an empty string.
        """
        if self.uri_spec is None:
            return ""
        values: dict[str, object] = {
            "[": "{",
            "]": "}",
            "scheme": "https" if self.ssl_port is not None else "http",
            "name": self.name,
            "id": self.id,
            "address": self.address,
            "port": self.port,
            "ssl-port": self.ssl_port,
            "registration-time-utc": self.registration_time,
            "service-type": self.service_type.value.lower(),
        }
        if variables is not None:
            values.update(variables)
        return "".join(
            _text(values.get(value)) if variable else value
            for value, variable in parse_uri_spec(self.uri_spec)
        )

    # --- JSON ----------------------------------------------------------------------------

    def to_json(self) -> bytes:
        """The instance as Curator's ``JsonInstanceSerializer`` writes it (UTF-8)."""
        document: dict[str, Any] = {
            "name": self.name,
            "id": self.id,
            "address": self.address,
            "port": self.port,
            "sslPort": self.ssl_port,
            "payload": _typed_payload(self.payload, self.payload_type),
            "registrationTimeUTC": self.registration_time,
            "serviceType": self.service_type.value,
            "uriSpec": None
            if self.uri_spec is None
            else {
                "parts": [
                    {"value": value, "variable": variable}
                    for value, variable in parse_uri_spec(self.uri_spec)
                ]
            },
            "enabled": self.enabled,
        }
        document.update(self.extra)
        return json.dumps(
            document, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, *, path: str = "") -> ServiceInstance:
        """An instance from what Curator (or :meth:`to_json`) wrote.

        Lenient as Curator's reader: unknown fields are kept in :attr:`extra`,
        missing ones take Curator's defaults (``enabled`` true, no ports). Only
        bytes that are not a JSON object with a string ``name`` and ``id`` raise
        :class:`~aiocoord.CorruptValueError` (``path`` names the node in it).
        Values Curator accepts but this class would refuse (a port out of range)
        are kept as they are.
        """
        expected = "a service instance (Curator's JSON)"
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise CorruptValueError(path, bytes(data), expected) from None
        if not isinstance(document, dict):
            raise CorruptValueError(path, bytes(data), expected)
        name, id_ = document.get("name"), document.get("id")
        if not isinstance(name, str) or not isinstance(id_, str):
            raise CorruptValueError(path, bytes(data), expected + " with a name and an id")
        try:
            service_type = ServiceType(document.get("serviceType") or "DYNAMIC")
        except ValueError:
            raise CorruptValueError(path, bytes(data), expected + " of a known type") from None
        payload, payload_type = _untyped_payload(document.get("payload"))
        instance = object.__new__(cls)
        values = {
            "name": name,
            "id": id_,
            "address": _str_or_none(document.get("address")),
            "port": _int_or_none(document.get("port")),
            "ssl_port": _int_or_none(document.get("sslPort")),
            "payload": payload,
            "registration_time": _int_or_none(document.get("registrationTimeUTC")) or 0,
            "service_type": service_type,
            "uri_spec": _read_uri_spec(document.get("uriSpec")),
            "enabled": document.get("enabled") is not False,
            "payload_type": payload_type,
            "extra": {k: v for k, v in document.items() if k not in _KNOWN},
        }
        for key, value in values.items():
            object.__setattr__(instance, key, value)
        return instance


def _typed_payload(payload: Any, payload_type: str | None) -> Any:
    """The payload with Jackson's type marker, as Curator's reader wants it."""
    if isinstance(payload, dict):
        return {_TYPE_KEY: payload_type or _MAP_CLASS, **payload}
    if isinstance(payload, list | tuple):
        return [payload_type or _LIST_CLASS, list(payload)]
    if payload is not None and payload_type is not None:
        return [payload_type, payload]  # a Long (or another boxed scalar) read from Java
    return payload


def _untyped_payload(payload: Any) -> tuple[Any, str | None]:
    """The payload without Jackson's type marker, and the class it named."""
    if isinstance(payload, dict):
        marker = payload.get(_TYPE_KEY)
        if isinstance(marker, str):
            return {k: v for k, v in payload.items() if k != _TYPE_KEY}, _none_if_default(marker)
        return payload, None
    if (
        isinstance(payload, list)
        and len(payload) == 2
        and isinstance(payload[0], str)
        and _JAVA_CLASS.fullmatch(payload[0])
    ):
        return payload[1], _none_if_default(payload[0])
    return payload, None


def _none_if_default(java_class: str) -> str | None:
    return None if java_class in (_MAP_CLASS, _LIST_CLASS) else java_class


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_uri_spec(value: object) -> str | None:
    if not isinstance(value, dict):
        return None
    parts = value.get("parts")
    if not isinstance(parts, list):
        return None
    return _template(
        [
            (str(part.get("value") or ""), part.get("variable") is True)
            for part in parts
            if isinstance(part, dict)
        ]
    )
