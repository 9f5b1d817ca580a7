"""ServiceInstance: its checks, its URI templates, and its JSON against what Curator writes.

The expected bytes below were written by Curator 5.4's ``JsonInstanceSerializer``
(Debian's libcurator-discovery-java), in its full mode (``new
JsonInstanceSerializer<>(cls, false)``, which writes ``enabled``) and its
default one (which leaves it out).
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from aiocoord import (
    ArgumentTypeError,
    CorruptValueError,
    InvalidArgumentError,
    InvalidPathError,
    ServiceInstance,
    ServiceType,
)

URI_PARTS = (
    '{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},'
    '{"value":"address","variable":true},{"value":":","variable":false},'
    '{"value":"port","variable":true}]}'
)


def curator(payload: str, *, enabled: bool | None = True, uri: str = URI_PARTS) -> bytes:
    """The instance every test below uses, as Curator wrote it with ``payload``."""
    tail = "" if enabled is None else f',"enabled":{"true" if enabled else "false"}'
    return (
        '{"name":"api","id":"i-1","address":"10.0.0.7","port":8080,"sslPort":null,'
        f'"payload":{payload},"registrationTimeUTC":1795626267753,"serviceType":"DYNAMIC",'
        f'"uriSpec":{uri}{tail}}}'
    ).encode()


def make(**changes: object) -> ServiceInstance:
    fields: dict[str, object] = {
        "name": "api",
        "id": "i-1",
        "address": "10.0.0.7",
        "port": 8080,
        "registration_time": 1795626267753,
        "uri_spec": "{scheme}://{address}:{port}",
    }
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


# --- JSON, byte for byte ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "written"),
    [
        (
            {"zone": "eu-1", "w": 3, "nested": {"k": 1}, "list": [1, "x"]},
            '{"@class":"java.util.LinkedHashMap","zone":"eu-1","w":3,'
            '"nested":{"k":1},"list":[1,"x"]}',
        ),
        ("str", '"str"'),
        (5, "5"),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ([1, 2], '["java.util.ArrayList",[1,2]]'),
        ("héllo\n\x01/", '"héllo\\n\\u0001/"'),
    ],
)
def test_what_we_write_is_what_curator_writes(payload: object, written: str) -> None:
    instance = make(payload=payload)
    assert instance.to_json() == curator(written)
    assert ServiceInstance.from_json(curator(written)) == instance


def test_a_java_long_keeps_its_type_through_a_round_trip() -> None:
    read = ServiceInstance.from_json(curator('["java.lang.Long",5]'))
    assert read.payload == 5 and read.payload_type == "java.lang.Long"
    assert read.to_json() == curator('["java.lang.Long",5]')


def test_a_java_payload_class_survives_an_update() -> None:
    data = curator('{"@class":"com.example.InstanceDetails","description":"x"}')
    read = ServiceInstance.from_json(data)
    assert read.payload == {"description": "x"}
    assert read.payload_type == "com.example.InstanceDetails"
    changed = dataclasses.replace(read, port=9090)
    assert json.loads(changed.to_json())["payload"] == {
        "@class": "com.example.InstanceDetails",
        "description": "x",
    }


def test_curators_default_form_without_enabled_reads_as_enabled() -> None:
    read = ServiceInstance.from_json(curator("null", enabled=None))
    assert read.enabled is True
    assert read == make()


def test_unknown_fields_are_kept_and_written_back() -> None:
    data = curator("null")[:-1] + b',"weight":7,"meta":{"a":[1]}}'
    read = ServiceInstance.from_json(data)
    assert read.extra == {"weight": 7, "meta": {"a": [1]}}
    assert read.to_json() == data


def test_missing_fields_take_curators_defaults() -> None:
    read = ServiceInstance.from_json(b'{"name":"api","id":"x"}')
    assert (read.address, read.port, read.ssl_port, read.payload) == (None, None, None, None)
    assert read.registration_time == 0
    assert read.service_type is ServiceType.DYNAMIC
    assert read.enabled and read.uri_spec is None


def test_a_plain_json_object_payload_without_a_marker_is_read() -> None:
    read = ServiceInstance.from_json(curator('{"a":1}'))
    assert read.payload == {"a": 1} and read.payload_type is None


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[]", b'{"name":"api"}', b'{"name":1,"id":"x"}', b"\xff\xfe"],
)
def test_bytes_that_are_not_an_instance_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptValueError, match="/s/api/x"):
        ServiceInstance.from_json(data, path="/s/api/x")


def test_an_unknown_service_type_is_corrupt() -> None:
    with pytest.raises(CorruptValueError):
        ServiceInstance.from_json(b'{"name":"a","id":"b","serviceType":"FLOATING"}')


def test_every_service_type_is_curators() -> None:
    assert [t.value for t in ServiceType] == [
        "DYNAMIC",
        "STATIC",
        "PERMANENT",
        "DYNAMIC_SEQUENTIAL",
    ]


# --- URI templates (Curator's UriSpec) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "built"),
    [
        ("{scheme}://{address}:{port}", "http://h:80"),
        ("a{b}c{b}", "ac"),
        ("{}", ""),
        ("x{[}y{]}z", "x{y}z"),
        ("", ""),
        ("{ssl-port}{scheme}{name}", "httpapi"),
        ("{registration-time-utc}-{service-type}-{id}", "5-static-i-1"),
    ],
)
def test_build_uri_is_curators(template: str, built: str) -> None:
    instance = ServiceInstance(
        name="api",
        id="i-1",
        address="h",
        port=80,
        uri_spec=template,
        registration_time=5,
        service_type=ServiceType.STATIC,
    )
    assert instance.build_uri() == built


def test_build_uri_with_ssl_and_variables() -> None:
    instance = make(ssl_port=8443, uri_spec="{scheme}://{address}:{ssl-port}/{path}")
    assert instance.build_uri() == "https://10.0.0.7:8443/"
    assert instance.build_uri({"path": "v1", "address": "x"}) == "https://x:8443/v1"
    assert make(uri_spec=None).build_uri() == ""


def test_a_uri_spec_with_literal_braces_reads_back_to_the_same_parts() -> None:
    parts = '{"parts":[{"value":"a{b}","variable":false},{"value":"port","variable":true}]}'
    read = ServiceInstance.from_json(curator("null", uri=parts))
    assert read.uri_spec == "a{[}b{]}{port}"
    assert read.build_uri() == "a{b}8080"


@pytest.mark.parametrize("template", ["a}b", "{{x}}", "{a{b}c}", "x{"])
def test_a_template_curator_refuses_is_refused(template: str) -> None:
    with pytest.raises(InvalidArgumentError, match="uri_spec"):
        make(uri_spec=template)


# --- checks ------------------------------------------------------------------------------


def test_defaults_are_curators() -> None:
    instance = ServiceInstance(name="api", address="h")
    assert len(instance.id) == 36  # a UUID, as Curator's builder makes
    assert instance.service_type is ServiceType.DYNAMIC and instance.enabled
    assert instance.registration_time > 1_700_000_000_000  # milliseconds, now
    assert ServiceInstance(name="api", address="h").id != instance.id


@pytest.mark.parametrize("bad", ["a/b", "", ".", "..", "x\x00", "\U0001f600"])
@pytest.mark.parametrize("field", ["id", "name"])
def test_a_name_or_id_that_is_not_one_node_name_is_refused(field: str, bad: str) -> None:
    with pytest.raises(InvalidPathError):
        make(**{field: bad})


@pytest.mark.parametrize("port", [-1, 65536, 2**40])
@pytest.mark.parametrize("field", ["port", "ssl_port"])
def test_a_port_out_of_range_is_refused(field: str, port: int) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        make(**{field: port})


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"port": "80"}, ArgumentTypeError),
        ({"port": True}, ArgumentTypeError),
        ({"address": 5}, ArgumentTypeError),
        ({"name": None}, ArgumentTypeError),
        ({"payload": {1, 2}}, ArgumentTypeError),
        ({"payload": object()}, ArgumentTypeError),
        ({"payload": {1: "a"}}, ArgumentTypeError),
        ({"payload": math.nan}, InvalidArgumentError),
        ({"payload": [math.inf]}, InvalidArgumentError),
        ({"payload": 2**64}, InvalidArgumentError),
        ({"payload": {"@class": "x.Y"}}, InvalidArgumentError),
        ({"service_type": "DYNAMIC"}, ArgumentTypeError),
        ({"enabled": 1}, ArgumentTypeError),
        ({"registration_time": 1.5}, ArgumentTypeError),
        ({"payload_type": "not a class"}, InvalidArgumentError),
        ({"extra": {"port": 1}}, InvalidArgumentError),
    ],
)
def test_wrong_types_and_values_are_typed_errors(
    changes: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        make(**changes)


def test_a_payload_that_contains_itself_is_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidArgumentError):
        make(payload=loop)


def test_instances_are_values_hashable_by_name_and_id() -> None:
    a, b = make(payload={"x": 1}), make(payload={"x": 1})
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert make(port=1) != a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.port = 2  # type: ignore[misc]


def test_a_tuple_payload_is_a_list() -> None:
    assert make(payload=(1, 2)).payload == [1, 2]
