"""The partitioner's pure rules: balance, weights, stickiness, determinism, the item format."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord import CorruptValueError
from aiocoord._recipes.partitions._rules import assign, parse_items, quotas

ITEMS = [f"i{n:02}" for n in range(10)]


def counts(target: dict[str, str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for owner in target.values():
        found[owner] = found.get(owner, 0) + 1
    return found


def test_from_nothing_items_are_split_within_one() -> None:
    target = assign(ITEMS, {"a": 1, "b": 1, "c": 1}, {})
    assert set(target) == set(ITEMS)
    assert sorted(counts(target).values()) == [3, 3, 4]


def test_weights_set_the_shares() -> None:
    target = assign([f"x{n}" for n in range(8)], {"light": 1, "heavy": 3}, {})
    assert counts(target) == {"light": 2, "heavy": 6}


def test_a_leave_moves_only_the_leavers_items() -> None:
    before = assign(ITEMS, {"a": 1, "b": 1, "c": 1}, {})
    owners = {item: owner for item, owner in before.items() if owner != "c"}
    after = assign(ITEMS, {"a": 1, "b": 1}, owners)
    moved = {item for item in ITEMS if before[item] != after[item]}
    assert moved == {item for item, owner in before.items() if owner == "c"}


def test_a_join_moves_only_what_the_joiner_takes() -> None:
    before = assign(ITEMS, {"a": 1, "b": 1}, {})
    after = assign(ITEMS, {"a": 1, "b": 1, "c": 1}, before)
    moved = {item for item in ITEMS if before[item] != after[item]}
    assert moved == {item for item, owner in after.items() if owner == "c"}
    assert len(moved) == 3


def test_claims_by_non_members_count_as_unowned() -> None:
    target = assign(["a", "b"], {"m": 1}, {"a": "gone"})
    assert target == {"a": "m", "b": "m"}


def test_no_members_no_assignment() -> None:
    assert assign(ITEMS, {}, {}) == {}
    assert quotas({"a": 1}, {}, 0) == {"a": 0}


def test_the_extra_item_stays_with_an_owner_that_already_has_it() -> None:
    """3 items over 2 members: the one holding 2 keeps both (nothing moves)."""
    assert quotas({"a": 1, "b": 1}, {"a": 0, "b": 2}, 3) == {"a": 1, "b": 2}
    assert quotas({"a": 1, "b": 1}, {"a": 0, "b": 0}, 3) == {"a": 2, "b": 1}


members_st = st.dictionaries(
    st.sampled_from("abcdefg"), st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0]), min_size=1
)


@given(members=members_st, n=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_any_assignment_is_complete_balanced_sticky_and_a_fixed_point(
    members: dict[str, float], n: int, seed: int
) -> None:
    items = [f"i{k}" for k in range(n)]
    rng = random.Random(seed)
    owners = {item: rng.choice([*members, "stranger"]) for item in items if rng.random() < 0.7}
    target = assign(items, members, owners)
    assert set(target) == set(items)
    total = sum(members.values())
    for member, count in counts(target).items():
        assert abs(count - n * members[member] / total) < 1 + 1e-9
    # Sticky: an owner within its quota keeps everything it had.
    quota = quotas(members, {m: 0 for m in members}, n)
    for item, owner in owners.items():
        if owner in members and sum(1 for o in owners.values() if o == owner) <= quota[owner] - 1:
            assert target[item] == owner
    # Acting on it changes nothing: the members agree on where they end.
    assert assign(items, members, target) == target
    # Given back first, claimed second: the answer stays the same at each step.
    kept = {item: owner for item, owner in owners.items() if target.get(item) == owner}
    assert assign(items, members, kept) == target
    # ... and while the claims come in, in any order.
    partial = dict(kept)
    for item in rng.sample(sorted(target), len(target)):
        partial[item] = target[item]
        assert assign(items, members, partial) == target


def test_parse_items_reads_a_json_list() -> None:
    assert parse_items("/n", b'["a", "b", "a"]') == ["a", "b"]
    assert parse_items("/n", b"") == []
    for bad in (b"nope", b'{"a": 1}', b'["a", 1]', b'[""]', b"\xff"):
        with pytest.raises(CorruptValueError):
            parse_items("/n", bad)


@given(k=st.integers(2, 7), n=st.integers(0, 50), leaver=st.integers(0, 6))
def test_with_equal_weights_a_leave_or_a_join_moves_only_the_members_items(
    k: int, n: int, leaver: int
) -> None:
    items = [f"i{j}" for j in range(n)]
    members = {f"m{i}": 1.0 for i in range(k)}
    before = assign(items, members, {})
    gone = f"m{leaver % k}"
    rest = {m: w for m, w in members.items() if m != gone}
    after = assign(items, rest, {i: o for i, o in before.items() if o != gone})
    assert {i for i in items if before[i] != after[i]} == {i for i in items if before[i] == gone}
    joined = assign(items, {**members, "new": 1.0}, before)
    assert {i for i in items if before[i] != joined[i]} == {i for i in items if joined[i] == "new"}
