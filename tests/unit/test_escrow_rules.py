"""The sharded counter's pure rules: splitting the range, granting in order, moving room."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord._recipes.counters._escrow import Move, grant, initial_shards, plan_moves, split


def test_split_is_even_with_the_larger_parts_first() -> None:
    assert split(10, 4) == [3, 3, 2, 2]
    assert split(3, 5) == [1, 1, 1, 0, 0]
    assert split(0, 3) == [0, 0, 0]
    assert split(7, 1) == [7]


def test_a_new_counter_fits_every_count_in_its_quota() -> None:
    assert initial_shards(4, 0, 10, 0) == [(0, 3), (0, 3), (0, 2), (0, 2)]
    assert initial_shards(4, 0, 10, 10) == [(3, 3), (3, 3), (2, 2), (2, 2)]
    # The total is lower + counts; quotas span upper - lower.
    shards = initial_shards(3, -5, 5, 1)
    assert -5 + sum(count for count, _ in shards) == 1
    assert sum(quota for _, quota in shards) == 10


@given(
    parts=st.integers(1, 20),
    lower=st.integers(-1000, 1000),
    span=st.integers(0, 2000),
    data=st.data(),
)
def test_new_counters_hold_their_initial_value_within_quotas(
    parts: int, lower: int, span: int, data: st.DataObject
) -> None:
    initial = data.draw(st.integers(lower, lower + span))
    shards = initial_shards(parts, lower, lower + span, initial)
    assert len(shards) == parts
    assert all(0 <= count <= quota for count, quota in shards)
    assert sum(quota for _, quota in shards) == span
    assert lower + sum(count for count, _ in shards) == initial


def test_grants_follow_arrival_order_and_skip_what_does_not_fit() -> None:
    assert grant(8, [1, 1, 1], 0, 10) == [9, 10, None]
    assert grant(1, [-1, -1, 1, -1], 0, 10) == [0, None, 1, 0]
    assert grant(5, [10, 2], 0, 10) == [None, 7]  # a big refusal leaves room for a small one
    assert grant(0, [0], 0, 0) == [0]


def test_no_move_when_the_home_shard_has_the_room() -> None:
    assert plan_moves([(0, 10), (0, 10)], 0, [1, 1]) == []
    assert plan_moves([(5, 10), (0, 10)], 0, [-3]) == []


def test_an_empty_shard_takes_room_from_the_richest() -> None:
    shards = [(5, 5), (0, 1), (0, 20), (0, 3)]
    moves = plan_moves(shards, 0, [1])
    assert moves is not None
    # The richest gives what the home shard needs now, and half of its room.
    assert moves == [Move(donor=2, count=0, room=11)]


def test_a_shard_without_count_takes_count_for_a_decrement() -> None:
    shards = [(0, 2), (9, 10), (1, 1)]
    moves = plan_moves(shards, 0, [-1])
    assert moves is not None
    assert all(move.room == 0 for move in moves)
    assert sum(move.count for move in moves) >= 1
    assert moves[0].donor == 1  # the one with the most count


def test_no_plan_when_the_total_has_no_room() -> None:
    assert plan_moves([(5, 5), (3, 3)], 0, [1]) is None
    assert plan_moves([(0, 5), (0, 3)], 1, [-1]) is None
    assert plan_moves([(4, 5), (3, 3)], 1, [1, 1]) is None  # room for one, not two


def test_a_batch_plans_for_its_highest_point_not_only_its_end() -> None:
    # +2 then -2: the net change is 0, but the shard must hold the +2 on the way.
    moves = plan_moves([(0, 0), (0, 4)], 0, [2, -2])
    assert moves is not None
    assert sum(move.room for move in moves) >= 2


def _apply(
    shards: list[tuple[int, int]], home: int, moves: list[Move], net: int
) -> list[tuple[int, int]]:
    after = list(shards)
    for move in moves:
        count, quota = after[move.donor]
        after[move.donor] = (count - move.count, quota - move.count - move.room)
    count, quota = after[home]
    moved_count = sum(m.count for m in moves)
    moved_quota = sum(m.count + m.room for m in moves)
    after[home] = (count + moved_count + net, quota + moved_quota)
    return after


shard_lists = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 50)).map(lambda t: (min(t), max(t))),
    min_size=1,
    max_size=8,
)


@given(shards=shard_lists, data=st.data())
def test_moves_keep_every_invariant(shards: list[tuple[int, int]], data: st.DataObject) -> None:
    """Whatever the shards and the batch: a plan exists exactly when the total allows
    every prefix of the batch, and applying it keeps each shard within its quota
    (the home shard at every step of the batch), the sum of quotas and the total."""
    home = data.draw(st.integers(0, len(shards) - 1))
    deltas = data.draw(st.lists(st.integers(-30, 30), max_size=6))
    total = sum(count for count, _ in shards)
    span = sum(quota for _, quota in shards)
    prefixes = list(itertools.accumulate(deltas))
    allowed = all(0 <= total + p <= span for p in prefixes)
    moves = plan_moves(shards, home, deltas)
    assert (moves is not None) == allowed
    if moves is None:
        return
    assert all(m.donor != home and m.count >= 0 and m.room >= 0 for m in moves)
    assert len({m.donor for m in moves}) == len(moves)
    net = sum(deltas)
    after = _apply(shards, home, moves, net)
    assert sum(quota for _, quota in after) == span
    assert sum(count for count, _ in after) == total + net
    assert all(0 <= count <= quota for count, quota in after)
    start, quota = after[home][0] - net, after[home][1]
    assert all(0 <= start + p <= quota for p in prefixes)


@pytest.mark.parametrize("n", [2, 8, 16])
def test_a_home_shard_that_keeps_selling_needs_few_moves(n: int) -> None:
    """Selling everything one at a time from one shard moves room rarely, not once per sale."""
    shards = initial_shards(n, 0, 1000, 0)
    home, moves_made = 0, 0
    for _ in range(1000):
        moves = plan_moves(shards, home, [1])
        assert moves is not None
        moves_made += bool(moves)
        shards = _apply(shards, home, moves, 1)
    assert plan_moves(shards, home, [1]) is None
    assert moves_made < 100
