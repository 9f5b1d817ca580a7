"""Property tests (Hypothesis): path rules and every codec and node-data parser.

- Path validation agrees with ZooKeeper's own rule (``PathUtils.validatePath``,
  which looks at Java's UTF-16 units: written out below as the oracle) on any
  string, and refuses with InvalidPathError, never another exception.
- Valid paths round-trip through a client's namespace (in and out again).
- Every codec and parser round-trips what it encodes, and garbage bytes give
  either a value or CorruptValueError naming the node: never an untyped error.

Deterministic (``derandomize``) and quick: a modest number of examples each.
Semaphore lease nodes hold opaque data (no parser), so they have nothing here.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aiocoord import (
    OPEN_ACL_UNSAFE,
    ArgumentTypeError,
    Codec,
    CorruptValueError,
    InvalidArgumentError,
    InvalidPathError,
)
from aiocoord._paths import check_namespace, validate_path
from aiocoord._recipes._kit._contenders import LOCK_NAME, sequence_key
from aiocoord._recipes.locks._lease import _LeaseData
from aiocoord._recipes.queues._rules import (
    decode_item,
    delay_name,
    due_of,
    id_name,
    parse_id,
    priority_name,
    skip_after_loss,
    unwrap_item,
    without_sequence,
    wrap_item,
)
from aiocoord._session._requests import RequestBuilder

FUZZ = settings(max_examples=150, deadline=None, derandomize=True)
PATH = "/fuzz/node"

# Characters that matter to the rules, and any others.
TRICKY = st.sampled_from(
    [
        *("/", "/", "/", ".", ".", "a", "\x00", "\x1f", "\x7f", "\x9f", "\xa0", "\ud800"),
        *("\udfff", "\ue000", "\uf8ff", "\uf900", "\uffef", "\ufff0", "\uffff"),
        *("\U0001f600", "\U0010ffff"),
    ]
)
ANY_CHAR = st.characters(codec=None, categories=None) | TRICKY
SEGMENT = st.text(alphabet=st.sampled_from("ab.-_") | TRICKY | ANY_CHAR, max_size=4)
ABSOLUTE = st.lists(SEGMENT, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
PATHS = ABSOLUTE | ABSOLUTE | st.text(alphabet=ANY_CHAR, max_size=12)


def zookeeper_accepts(path: str, *, sequential: bool = False) -> bool:
    """ZooKeeper's ``PathUtils.validatePath`` (3.8), over Java's UTF-16 units."""
    if sequential:
        path += "1"
    raw = path.encode("utf-16-le", "surrogatepass")
    chars = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    slash, dot = ord("/"), ord(".")
    if not chars or chars[0] != slash:
        return False
    if len(chars) == 1:
        return True
    if chars[-1] == slash:
        return False
    last = slash
    for i in range(1, len(chars)):
        c = chars[i]
        ends_segment = i + 1 == len(chars) or chars[i + 1] == slash
        if c == 0 or (c == slash and last == slash):
            return False
        if c == dot and last == dot:
            if chars[i - 2] == slash and ends_segment:
                return False
        elif c == dot:
            if chars[i - 1] == slash and ends_segment:
                return False
        elif 0 < c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c <= 0xFFFF:
            return False
        last = c
    return True


def accepts(path: str, *, sequential: bool = False) -> bool:
    try:
        assert validate_path(path, sequential=sequential) == path
    except InvalidPathError as error:
        assert error.path == path and repr(path) in str(error)
        return False
    return True


@FUZZ
@given(PATHS, st.booleans())
def test_path_validation_agrees_with_zookeeper(path: str, sequential: bool) -> None:
    assert accepts(path, sequential=sequential) == zookeeper_accepts(path, sequential=sequential)


@FUZZ
@given(st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text(max_size=3))))
def test_a_path_that_is_not_a_str_is_an_argument_type_error(path: object) -> None:
    try:
        validate_path(path)
    except ArgumentTypeError:
        return
    raise AssertionError(f"{path!r} passed")


NAME_CHARS = st.characters(
    codec="utf-8",
    exclude_characters="/",
    exclude_categories=("Cs", "Co", "Cc"),
    max_codepoint=0xF7FF,
)
SEGMENTS = st.text(alphabet=NAME_CHARS, min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..") and zookeeper_accepts("/" + s)
)
VALID_PATHS = st.lists(SEGMENTS, max_size=4).map(lambda parts: "/" + "/".join(parts))


@FUZZ
@given(VALID_PATHS, st.none() | VALID_PATHS)
def test_valid_paths_round_trip_through_a_namespace(path: str, namespace: str | None) -> None:
    assert validate_path(path) == path
    builder = RequestBuilder(namespace, OPEN_ACL_UNSAFE, 1024)
    server = builder.server_path(path)
    assert zookeeper_accepts(server)
    assert builder.user_path(server) == path
    if namespace not in (None, "/"):
        assert server == namespace + ("" if path == "/" else path)


@FUZZ
@given(st.none() | PATHS)
def test_any_namespace_is_taken_or_refused_with_invalid_path_error(namespace: str | None) -> None:
    try:
        prefix = check_namespace(namespace)
    except InvalidPathError:
        return
    assert prefix == "" or (zookeeper_accepts(prefix) and not prefix.endswith("/"))


# --- codecs -----------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=NAME_CHARS | st.sampled_from("/\\\"'\n\x00")),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def decodes_or_refuses(decode: Any, data: bytes) -> object:
    """``decode(data, PATH)``: a value, or CorruptValueError naming PATH; nothing else."""
    try:
        return decode(data, PATH)
    except CorruptValueError as error:
        assert error.path == PATH and error.data == data and PATH in str(error)
        return None


@FUZZ
@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))
def test_integer_codecs_round_trip_curators_bytes(long: int, small: int) -> None:
    assert Codec.LONG.decode(Codec.LONG.encode(long), PATH) == long
    assert Codec.LONG.encode(long) == long.to_bytes(8, "big", signed=True)  # Curator's long
    assert Codec.INT.decode(Codec.INT.encode(small), PATH) == small


@FUZZ
@given(st.binary(max_size=64), st.text(alphabet=NAME_CHARS, max_size=20), JSON_VALUES)
def test_codecs_round_trip(data: bytes, text: str, value: Any) -> None:
    assert Codec.BYTES.decode(Codec.BYTES.encode(data), PATH) == data
    assert Codec.UTF8.decode(Codec.UTF8.encode(text), PATH) == text
    assert Codec.JSON.decode(Codec.JSON.encode(value), PATH) == json.loads(json.dumps(value))


GARBAGE = (
    st.binary(max_size=48)
    | st.sampled_from(
        [b"", b"\xff", b"NaN", b"[Infinity]", b"9" * 5000, b"[" * 5000, b"\xed\xa0\x80"]
    )
    | JSON_VALUES.map(lambda v: json.dumps(v).encode()[:-1])
)


@FUZZ
@given(GARBAGE)
def test_garbage_never_escapes_a_codec_untyped(data: bytes) -> None:
    for codec in (Codec.BYTES, Codec.UTF8, Codec.JSON, Codec.LONG, Codec.INT):
        decodes_or_refuses(codec.decode, data)
    value = decodes_or_refuses(Codec.LONG.decode, data)
    assert value is None or len(data) == 8


@FUZZ
@given(st.one_of(st.floats(), st.sets(st.integers(), max_size=2), st.binary(max_size=4)))
def test_json_refuses_what_is_not_json_with_a_typed_error(value: object) -> None:
    if isinstance(value, float) and math.isfinite(value):
        assert Codec.JSON.decode(Codec.JSON.encode(value), PATH) == value
        return
    try:
        Codec.JSON.encode(value)
    except (ArgumentTypeError, InvalidArgumentError):
        return
    raise AssertionError(f"{value!r} encoded")


# --- queues: the item envelope, item codecs, names ------------------------------------


@FUZZ
@given(st.binary(max_size=64))
def test_the_curator_item_envelope_round_trips(data: bytes) -> None:
    assert unwrap_item(wrap_item(data), PATH) == data


@FUZZ
@given(GARBAGE | st.binary(max_size=20).map(lambda b: wrap_item(b)[: len(b) // 2 + 3]))
def test_garbage_is_never_unwrapped_untyped(data: bytes) -> None:
    decodes_or_refuses(unwrap_item, data)


class _Exploding:
    """A user's codec whose decode fails with anything at all."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def encode(self, value: bytes) -> bytes:
        return value

    def decode(self, data: bytes, path: str) -> bytes:
        raise self.error


@FUZZ
@given(
    GARBAGE,
    st.sampled_from([ValueError("x"), KeyError("k"), UnicodeDecodeError("utf-8", b"", 0, 1, "r")]),
)
def test_an_item_codec_that_fails_is_reported_as_corrupt(data: bytes, error: Exception) -> None:
    for codec in (Codec.BYTES, Codec.UTF8, Codec.JSON, _Exploding(error)):
        decodes_or_refuses(lambda d, p, codec=codec: decode_item(codec, d, p), data)


@FUZZ
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**53),
    st.text(alphabet=NAME_CHARS, min_size=1, max_size=8),
    st.integers(0, 9_999_999_999),
)
def test_queue_item_names_round_trip(priority: int, due: int, item_id: str, seq: int) -> None:
    suffix = f"{seq:010d}"
    assert due_of(delay_name(due) + suffix) == due
    assert without_sequence(delay_name(due) + suffix) == delay_name(due)
    parsed = parse_id(id_name(item_id) + suffix)
    assert parsed is not None and parsed[0] == item_id.replace("|", "_").replace("/", "_")
    # Names sort as Curator's priority order: the priority, then the sequence.
    low, high = sorted([priority, random.Random(priority).randint(-(2**31), 2**31 - 1)])
    assert (priority_name(low) + suffix <= priority_name(high) + suffix) or low == high


@FUZZ
@given(st.text(alphabet=ANY_CHAR, max_size=30), st.integers(-5, 70), st.integers(-5, 300))
def test_name_parsers_never_raise(name: str, losses: int, remaining: int) -> None:
    due_of(name)
    parse_id(name)
    without_sequence(name)
    sequence_key(name, (LOCK_NAME,))
    skip = skip_after_loss(losses, remaining, random.Random(0))
    assert 0 <= skip <= max(remaining, 0)


# --- leases ---------------------------------------------------------------------------

LEASE = _LeaseData()


@FUZZ
@given(st.integers(1, 2**40 - 1), st.binary(max_size=40))
def test_lease_data_round_trips(ttl_ms: int, holder: bytes) -> None:
    assert LEASE.decode(LEASE.encode((ttl_ms, holder)), PATH) == (ttl_ms, holder)


@FUZZ
@given(GARBAGE | st.binary(max_size=8).map(lambda b: b"9" * 40 + b"\n" + b))
def test_garbage_lease_data_is_corrupt_not_a_crash(data: bytes) -> None:
    value = decodes_or_refuses(LEASE.decode, data)
    if value is not None:
        ttl_ms, holder = value  # type: ignore[misc]
        assert LEASE.encode((ttl_ms, holder)).endswith(b"\n" + holder)
