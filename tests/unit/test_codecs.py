"""Codecs: round trips, Curator's byte layouts, refusals before anything is sent."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord import Codec, CoordinationError, CorruptValueError
from aiocoord._recipes.locks._lease import _DATA as LEASE_DATA

PATH = "/some/node"

CODECS = [Codec.BYTES, Codec.UTF8, Codec.JSON, Codec.LONG, Codec.INT]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_is_curators_8_byte_big_endian(value: int) -> None:
    data = Codec.LONG.encode(value)
    assert data == struct.pack(">q", value)
    assert Codec.LONG.decode(data, PATH) == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_int_is_curators_4_byte_big_endian(value: int) -> None:
    data = Codec.INT.encode(value)
    assert data == struct.pack(">i", value)
    assert Codec.INT.decode(data, PATH) == value


@given(st.binary())
def test_bytes_round_trip(value: bytes) -> None:
    assert Codec.BYTES.decode(Codec.BYTES.encode(value), PATH) == value


@given(st.text())
def test_text_round_trips(value: str) -> None:
    assert Codec.UTF8.decode(Codec.UTF8.encode(value), PATH) == value


@given(json_values)
def test_json_round_trips(value: Any) -> None:
    assert Codec.JSON.decode(Codec.JSON.encode(value), PATH) == value


@pytest.mark.parametrize(
    ("codec", "value", "data"),
    [
        (Codec.LONG, 0, b"\x00" * 8),
        (Codec.LONG, 1, b"\x00" * 7 + b"\x01"),
        (Codec.LONG, -1, b"\xff" * 8),
        (Codec.LONG, 2**63 - 1, b"\x7f" + b"\xff" * 7),
        (Codec.LONG, -(2**63), b"\x80" + b"\x00" * 7),
        (Codec.INT, 1, b"\x00\x00\x00\x01"),
        (Codec.INT, -1, b"\xff" * 4),
        (Codec.INT, 2**31 - 1, b"\x7f\xff\xff\xff"),
        (Codec.INT, -(2**31), b"\x80\x00\x00\x00"),
        (Codec.BYTES, b"\x00raw\n", b"\x00raw\n"),
        (Codec.BYTES, b"", b""),
        (Codec.UTF8, "h\u00e9llo", b"h\xc3\xa9llo"),
        (Codec.UTF8, "", b""),
        (Codec.JSON, {"a": [1, 2.5, None, True, "\u00e9"]}, b'{"a":[1,2.5,null,true,"\xc3\xa9"]}'),
        (Codec.JSON, "x", b'"x"'),
    ],
)
def test_byte_layouts(codec: Codec[Any], value: object, data: bytes) -> None:
    assert codec.encode(value) == data
    assert codec.decode(data, PATH) == value


def test_bytes_takes_any_bytes_like_value() -> None:
    for value in (bytearray(b"ab"), memoryview(b"ab")):
        encoded = Codec.BYTES.encode(value)  # type: ignore[arg-type]
        assert type(encoded) is bytes and encoded == b"ab"


@pytest.mark.parametrize(
    ("codec", "data"),
    [
        # The counters read an empty node as zero: their rule, not the codec's.
        (Codec.LONG, b""),
        (Codec.LONG, b"\x00" * 4),
        (Codec.LONG, b"\x00" * 9),
        (Codec.INT, b""),
        (Codec.INT, b"abc"),
        (Codec.INT, b"\x00" * 8),
        (Codec.UTF8, b"\xff"),
        (Codec.UTF8, b"caf\xc3"),
        (Codec.JSON, b""),
        (Codec.JSON, b"{"),
        (Codec.JSON, b"1 2"),
        (Codec.JSON, b"NaN"),
        (Codec.JSON, b"[-Infinity]"),
        (Codec.JSON, b'"\xff"'),
        (Codec.JSON, b"[" * 100_000),
    ],
)
def test_bad_bytes_are_a_corrupt_value_naming_the_node(codec: Codec[Any], data: bytes) -> None:
    with pytest.raises(CorruptValueError, match="/some/node") as info:
        codec.decode(data, PATH)
    assert (info.value.path, info.value.data) == (PATH, data)


circular: list[object] = []
circular.append(circular)


@pytest.mark.parametrize(
    ("codec", "value", "error"),
    [
        (Codec.LONG, 1.0, TypeError),
        (Codec.LONG, True, TypeError),
        (Codec.LONG, "1", TypeError),
        (Codec.LONG, None, TypeError),
        (Codec.INT, 1.5, TypeError),
        (Codec.INT, False, TypeError),
        (Codec.BYTES, "text", TypeError),
        (Codec.BYTES, 3, TypeError),
        (Codec.BYTES, None, TypeError),
        (Codec.UTF8, b"bytes", TypeError),
        (Codec.UTF8, 3, TypeError),
        (Codec.UTF8, "\ud800", ValueError),
        (Codec.JSON, {1, 2}, TypeError),
        (Codec.JSON, b"x", TypeError),
        (Codec.JSON, float("nan"), ValueError),
        (Codec.JSON, [float("inf")], ValueError),
        (Codec.JSON, circular, ValueError),
    ],
)
def test_values_a_codec_cannot_hold_are_refused(
    codec: Codec[Any], value: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        codec.encode(value)


@pytest.mark.parametrize(
    ("codec", "value", "bits"),
    [
        (Codec.LONG, 2**63, 64),
        (Codec.LONG, -(2**63) - 1, 64),
        (Codec.INT, 2**31, 32),
        (Codec.INT, -(2**31) - 1, 32),
    ],
)
def test_integers_too_wide_overflow(codec: Codec[int], value: int, bits: int) -> None:
    with pytest.raises(OverflowError, match=f"{value} does not fit in {bits} bits") as info:
        codec.encode(value)
    # A plain OverflowError: the recipes decide what it means to them.
    assert not isinstance(info.value, CoordinationError)


def test_codecs_are_frozen_and_the_base_is_abstract() -> None:
    for codec in CODECS:
        with pytest.raises(dataclasses.FrozenInstanceError):
            codec.name = "x"  # type: ignore[attr-defined]
        assert hash(codec) == hash(codec)
    with pytest.raises(TypeError):
        Codec()  # type: ignore[abstract]


def test_a_codec_of_your_own() -> None:
    class Flag(Codec[bool]):
        def encode(self, value: bool) -> bytes:
            return b"1" if value else b"0"

        def decode(self, data: bytes, path: str) -> bool:
            if data not in (b"0", b"1"):
                raise CorruptValueError(path, data, "a flag")
            return data == b"1"

    flag = Flag()
    assert flag.decode(flag.encode(True), PATH) is True
    with pytest.raises(CorruptValueError, match="not a flag"):
        flag.decode(b"2", PATH)


def test_lease_data_keeps_the_ttl_and_the_holder() -> None:
    assert LEASE_DATA.encode((30_000, b"svc-1")) == b"30000\nsvc-1"
    assert LEASE_DATA.decode(b"30000\nsvc-1", PATH) == (30_000, b"svc-1")
    assert LEASE_DATA.decode(b"5\na\nb", PATH) == (5, b"a\nb")
    for data in (b"svc-1", b"\nsvc-1", b"-5\nsvc-1", b"1.5\nsvc-1"):
        with pytest.raises(CorruptValueError, match="/some/node"):
            LEASE_DATA.decode(data, PATH)
