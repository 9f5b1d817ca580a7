"""The pure rules of the counter's combining queue (no server)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord import CorruptValueError
from aiocoord._recipes.counters._arith import Denied, Entry, grant_all
from aiocoord._recipes.counters._combining import (
    BATCHES_KEPT,
    RESULTS_KEPT,
    RESULTS_MAX,
    _Batch,
    _decode_request,
    _parse,
    _request_name,
    _State,
)
from aiocoord._session import protected_marker
from aiocoord._types import Stat

LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
BOUND = st.none() | LONG
ENTRY = st.tuples(LONG, BOUND, BOUND)
STAT = Stat(1, 1, 0, 0, 3, 0, 0, 0, 0, 0, 1)


def _node(entries: list[Entry], seq: int) -> tuple[str, bytes]:
    suffix, data = _request_name(entries)
    return f"{protected_marker()}{suffix}{seq:010d}", data


@given(st.lists(ENTRY, min_size=1, max_size=5), st.integers(0, 2**31 - 1))
def test_a_request_reads_back_from_its_name_or_its_data(entries: list[Entry], seq: int) -> None:
    name, data = _node(entries, seq)
    parsed_seq, add = _parse(name)
    assert parsed_seq == seq
    if len(entries) == 1:
        assert add == entries[0] and data == b""  # the listing alone carries it
    else:
        assert add is None and _decode_request("/r", data) == entries


@pytest.mark.parametrize(
    "name",
    [
        "lock-0000000001",  # another recipe's node
        "r1_n_n-0000000001",  # no protected marker
        f"{protected_marker()}r1_n_n-000000001x",  # no sequence
        f"{protected_marker()}q1_n_n-0000000001",  # not a request
        f"{protected_marker()}rx_n_n-0000000001",  # not a number
        f"{protected_marker()}rn_n_n-0000000001",  # no delta
        f"{protected_marker()}r1_2-0000000001",  # a part missing
    ],
)
def test_names_no_requester_makes_are_ignored(name: str) -> None:
    assert _parse(name) == (-1, None)


@pytest.mark.parametrize(
    "data", [b"", b"{", b"[[1]]", b'[["1", null, null]]', b"[[1, 2.5, null]]", b"[[true, 1, 2]]"]
)
def test_a_garbled_request_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(CorruptValueError, match="counter request"):
        _decode_request("/c/combining/x", data)


def test_the_queue_state_round_trips_and_starts_empty() -> None:
    batch = _Batch(40, 5, 3, (0, 1, 7), (1, 2, -1))
    state = _State(47, 7, 3, (batch,), 3)
    again = _State.decode("/c/combining", state.encode(), STAT)
    assert (again.upto, again.value, again.version, again.batches) == (47, 7, 3, (batch,))
    assert again.stat_version == STAT.version
    found = [_State.result("/c/combining", state.encode(), seq) for seq in (40, 41, 47, 42, 48)]
    assert [None if f is None else f.pre for _upto, f in found] == [5, 6, 8, None, None]
    assert {(f.value, f.version, f.size) for _upto, f in found if f is not None} == {(7, 3, 3)}
    assert {upto for upto, _f in found} == {47}
    empty = _State.decode("/c/combining", b"", STAT)
    assert (empty.upto, empty.batches) == (-1, ())


def test_consecutive_requests_with_equal_adds_are_stored_compactly() -> None:
    usual = _Batch(40, 5, 8, tuple(range(8)), (1,) * 8)
    following = _Batch(48, 13, 3, tuple(range(3)), (2,) * 3)
    gap = _Batch(60, 19, 3, (0, 2), (-1, 1))
    state = _State(62, 19, 3, (usual, following, gap), 3)
    assert b'"batches":[[40,5,8,8,1],[3,3,2],[60,19,3,[0,2],[-1,1]]]' in state.encode()
    decoded = _State.decode("/c/combining", state.encode(), STAT).batches
    assert decoded == (usual, following, gap)


@st.composite
def batch_runs(draw: st.DrawFn) -> tuple[_Batch, ...]:
    """Batches as combiners write them: each after the last, some with gaps."""
    batches = []
    first, start = draw(st.integers(0, 10**9)), draw(LONG)
    for _ in range(draw(st.integers(0, 6))):
        first += draw(st.sampled_from([0, 0, 1, 5]))
        gaps = draw(st.lists(st.sampled_from([0, 0, 0, 1, 3]), min_size=1, max_size=6))
        offsets = tuple(i + sum(gaps[: i + 1]) - gaps[0] for i in range(len(gaps)))
        added = tuple(draw(st.sampled_from([1, 1, -1, 0, 7])) for _ in offsets)
        batch = _Batch(first, start, len(offsets) + draw(st.integers(0, 2)), offsets, added)
        batches.append(batch)
        first, start = first + offsets[-1] + 1, start + sum(added)
    return tuple(batches)


@given(batch_runs())
def test_any_run_of_batches_round_trips(batches: tuple[_Batch, ...]) -> None:
    state = _State(5, 6, 7, batches, 3)
    assert _State.decode("/c/combining", state.encode(), STAT).batches == batches


@given(batch_runs(), st.integers(1, 40))
def test_a_decoded_state_grows_as_one_built_from_its_batches(
    batches: tuple[_Batch, ...], size: int
) -> None:
    """A combiner adds its batch to the state as read (batches kept as stored);
    the outcome is what the same batches, given whole, would make."""
    built = _State(5, 6, 7, batches, 3)
    decoded = _State.decode("/c/combining", built.encode(), STAT)
    first = max((b.first + b.offsets[-1] + 1 for b in batches), default=0)
    new = _Batch(first, 9, size, tuple(range(size)), (1,) * size)
    assert decoded.after(new, first + size - 1, 9 + size, 8).encode() == (
        built.after(new, first + size - 1, 9 + size, 8).encode()
    )


@given(batch_runs(), st.data())
def test_a_requester_finds_its_result_as_the_batch_that_applied_it_says(
    batches: tuple[_Batch, ...], data: st.DataObject
) -> None:
    """Each request's value before its adds: its batch's start plus the adds
    applied before it in that batch."""
    upto = max((b.first + b.offsets[-1] for b in batches), default=-1)
    encoded = _State(upto, 6, 7, batches, 3).encode()
    expected = {}
    for batch in batches:
        for index, offset in enumerate(batch.offsets):
            expected[batch.first + offset] = (batch.start + sum(batch.added[:index]), batch.size)
    seq = data.draw(st.sampled_from(sorted(expected)) if expected else st.integers(0, 9))
    seen_upto, found = _State.result("/c/combining", encoded, seq)
    assert seen_upto == upto
    if seq in expected:
        assert found is not None and (found.pre, found.size) == expected[seq]
        assert (found.value, found.version, found.alone) == (6, 7, False)
    else:
        assert found is None


def test_the_newest_batch_is_written_whole_and_read_first() -> None:
    older = _Batch(40, 5, 8, tuple(range(8)), (1,) * 8)
    newest = _Batch(48, 13, 3, tuple(range(3)), (2,) * 3)
    encoded = _State(50, 19, 3, (older, newest), 3).encode()
    assert b'"batches":[[40,5,8,8,1],[48,13,3,3,2]]' in encoded
    # Found in the newest batch: the older ones are not read (garbled here).
    garbled = encoded.replace(b"[40,5,8,8,1]", b'[40,5,"8",8,1]')
    _upto, found = _State.result("/c/combining", garbled, 49)
    assert found is not None and found.pre == 15
    with pytest.raises(CorruptValueError):
        _State.result("/c/combining", garbled, 41)  # in an older batch: the walk checks
    with pytest.raises(CorruptValueError):
        _State.decode("/c/combining", garbled, STAT)  # a combiner checks everything


def test_a_state_whose_newest_batch_is_short_is_still_read() -> None:
    """Combiners before the newest batch was written whole left it short."""
    data = b'{"upto":50,"value":19,"version":3,"batches":[[40,5,8,8,1],[3,3,2]]}'
    _upto, found = _State.result("/c/combining", data, 49)
    assert found is not None and (found.pre, found.size) == (15, 3)
    assert _State.decode("/c/combining", data, STAT).batches[-1] == _Batch(
        48, 13, 3, (0, 1, 2), (2, 2, 2)
    )


def _applied(sizes: list[int]) -> _State:
    """The state after batches of ``sizes`` requests (one add each), in order."""
    state = _State(-1, 0, 0, (), 0)
    first = 0
    for size in sizes:
        batch = _Batch(first, first, size, tuple(range(size)), (1,) * size)
        state = state.after(batch, first + size - 1, first + size, first)
        first += size
    return state


def _kept(state: _State) -> int:
    return sum(len(b.offsets) for b in state.batches)


def test_the_state_keeps_the_newest_results_within_its_budget() -> None:
    # Small batches: the last RESULTS_KEPT requests' results.
    state = _applied([1] * 300)
    assert _kept(state) == RESULTS_KEPT and state.batches[-1].first == 299
    # Big batches (32 processes queued): the last BATCHES_KEPT batches, so that a
    # requester stalled for as many combined writes still finds its result.
    state = _applied([25] * 40)
    assert len(state.batches) == BATCHES_KEPT and _kept(state) == 25 * BATCHES_KEPT
    assert len(state.encode()) < 4096
    # Never beyond RESULTS_MAX; the newest batch always stays.
    state = _applied([100] * 30)
    assert _kept(state) <= RESULTS_MAX and state.batches[-1].first == 2900
    huge = _Batch(5000, 0, 3000, tuple(range(3000)), (1,) * 3000)
    assert state.after(huge, 7999, 3000, 1).batches == (huge,)


@pytest.mark.parametrize(
    "data",
    [
        b"x",
        b"{}",
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, [0], ["a"]]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, [0, 1], [1]]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, -1, 1]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, 10000000000, 1]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, 2, [1]]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, 2, 1.5]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 1, 1]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, 0, 1], [1, 1, 1]]}',
        b'{"upto": true, "value": 2, "version": 3, "batches": []}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, [true], [1]]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1.5, 0, 1, 1, 1], [1, 1, 1]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, 1, 1, [[1]]]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [[1, 0, "1", 1, 1]]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": {"abcde": 1}}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": ["abcde"]}',
        b'{"upto": 1, "value": 2, "version": 3, "batches": [7]}',
        b"[1, 2, 3]",
    ],
)
def test_a_garbled_queue_state_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(CorruptValueError, match="combining state"):
        _State.decode("/c/combining", data, STAT)
    with pytest.raises(CorruptValueError, match="combining state"):
        _State.result("/c/combining", data, 1)  # a requester looking for its result


@given(
    st.recursive(
        st.integers() | st.booleans() | st.floats() | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=6),
        max_leaves=30,
    )
)
def test_any_json_in_the_batches_decodes_or_is_a_typed_error(batches: object) -> None:
    data = json.dumps({"upto": 1, "value": 2, "version": 3, "batches": batches}).encode()
    try:
        _upto, found = _State.result("/c/combining", data, 1)
    except CorruptValueError:
        with pytest.raises(CorruptValueError):
            _State.decode("/c/combining", data, STAT)
        return
    try:
        state = _State.decode("/c/combining", data, STAT)
    except CorruptValueError:
        # What a requester accepts, a combiner does; except that a result found
        # in the newest batch, written whole, is read without the others.
        assert found is not None
        assert (
            _State.result(
                "/c/combining",
                json.dumps(
                    {"upto": 1, "value": 2, "version": 3, "batches": [batches[-1]]}  # type: ignore[index]
                ).encode(),
                1,
            )[1]
            == found
        )
        return
    numbers = [state.upto, state.value, state.version]
    for batch in state.batches:
        numbers += [batch.first, batch.start, batch.size, *batch.offsets, *batch.added]
    assert all(type(n) is int for n in numbers)


@given(LONG, st.lists(ENTRY, max_size=8))
def test_grants_apply_in_order_and_never_leave_their_bounds(
    value: int, entries: list[Entry]
) -> None:
    grants, final = grant_all(value, entries)
    current = value
    for (delta, lower, upper), granted in zip(entries, grants, strict=True):
        if isinstance(granted, tuple):
            pre, post = granted
            assert pre == current and post == current + delta
            assert (lower is None or post >= lower) and (upper is None or post <= upper)
            current = post
        elif granted is Denied.BOUND:
            new = current + delta
            assert (lower is not None and new < lower) or (upper is not None and new > upper)
        else:
            assert not -(2**63) <= current + delta < 2**63
    assert final == current
    # The combiner and each requester compute the same grants from the same start.
    assert grant_all(value, entries) == (grants, final)
