"""The pure queue rules behind every lock (no server)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord._recipes._kit._contenders import (
    LOCK_NAME,
    READ_LOCK_NAME,
    WRITE_LOCK_NAME,
    Decision,
    _Listing,
    mutex_rule,
    read_rule,
    sequence_key,
    sort_contenders,
)


def test_sorting_uses_the_sequence_after_the_lock_name() -> None:
    names = [
        "_c_bbb-lock-0000000003",
        "lock-0000000001",  # Curator without protection
        "_c_aaa-lock-0000000002",
    ]
    assert sort_contenders(names, (LOCK_NAME,)) == [names[1], names[2], names[0]]
    assert sequence_key("_c_x-lock-0000000042", (LOCK_NAME,)) == "0000000042"
    assert sequence_key("unrelated", (LOCK_NAME,)) == "unrelated"


def test_read_write_names_sort_together() -> None:
    names = ["_c_1-__READ__0000000002", "_c_2-__WRIT__0000000001", "_c_3-__READ__0000000000"]
    ordered = sort_contenders(names, (WRITE_LOCK_NAME, READ_LOCK_NAME))
    assert ordered == [names[2], names[1], names[0]]


def _names(*sequence: int, prefix: str = "_c_x-lock-") -> list[str]:
    return [f"{prefix}{n:010d}" for n in sequence]


def test_mutex_rule_first_holds_others_watch_their_predecessor() -> None:
    rule = mutex_rule()
    a, b, c = _names(1, 2, 3)
    shuffled = [c, a, b]  # the server lists children in no particular order
    assert rule(shuffled, a) == Decision(True)
    assert rule(shuffled, b) == Decision(False, a, blockers=1)
    assert rule(shuffled, c) == Decision(False, b, blockers=2)


def test_counting_rule_watches_max_leases_ahead() -> None:
    rule = mutex_rule(2)
    a, b, c, d = _names(1, 2, 3, 4)
    assert rule([d, c, b, a], b).holds
    assert rule([d, c, b, a], c) == Decision(False, a, blockers=1)
    assert rule([d, c, b, a], d) == Decision(False, b, blockers=2)
    with pytest.raises(ValueError):
        mutex_rule(0)


def test_readers_share_and_wait_only_for_writers_ahead() -> None:
    r, w = READ_LOCK_NAME, WRITE_LOCK_NAME
    order = [f"{r}1", f"{r}2", f"{w}3", f"{r}4", f"{w}5", f"{r}6"]
    rule = read_rule()
    assert rule(order, order[0]).holds and rule(order, order[1]).holds
    assert rule(order, order[3]) == Decision(False, f"{w}3", blockers=1)
    assert rule(order, order[5]) == Decision(False, f"{w}5", blockers=2)  # the nearest


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.data())
def test_at_most_one_writer_holds_and_never_with_a_reader(
    kinds: list[bool], data: st.DataObject
) -> None:
    """In any queue, holders are either one writer, or a run of readers at the front."""
    r, w = READ_LOCK_NAME, WRITE_LOCK_NAME
    order = [f"{w if is_writer else r}{i:010d}" for i, is_writer in enumerate(kinds)]
    write_rule = mutex_rule(1, (w, r))
    reads = read_rule()
    holders = [
        i for i, name in enumerate(order) if (write_rule if w in name else reads)(order, name).holds
    ]
    writers = [i for i in holders if w in order[i]]
    assert len(writers) <= 1
    if writers:
        assert holders == writers == [0]
    else:
        assert holders == list(range(len(holders)))  # a prefix of readers
    # Every waiter watches a node ahead of it.
    i = data.draw(st.integers(0, len(order) - 1))
    decision = (write_rule if w in order[i] else reads)(order, order[i])
    if not decision.holds:
        assert decision.watch in order[:i]
        # After the watched node goes, the others still block us unless it was the last.
        remaining = [n for n in order if n != decision.watch]
        after = (write_rule if w in order[i] else reads)(remaining, order[i])
        assert after.holds == (decision.blockers == 1)


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=40, unique=True),
    st.data(),
)
def test_a_shared_listing_decides_as_the_mutex_rule_does(sequence: list[int], data) -> None:
    """One client's contenders decide on one sorted listing (QueueView): the
    same decision, for every one of them, as the rule's pass over the names."""
    names = [f"_c_{n % 7}-lock-{n:010d}" for n in sequence]
    listing = _Listing(list(names), (LOCK_NAME,))
    rule = mutex_rule()
    me = data.draw(st.sampled_from(names))
    assert listing.first_in_line(me) == rule(names, me)
    assert listing.first_in_line("_c_9-lock-9999999999") is None


def _reference_mutex_rule(names: list[str], me: str) -> Decision:
    """The mutex rule as first written: every contender with a smaller key is
    ahead; watch the nearest by (key, name)."""
    mine = sequence_key(me, (LOCK_NAME,))
    ahead = [(sequence_key(n, (LOCK_NAME,)), n) for n in names]
    ahead = [(k, n) for k, n in ahead if k < mine]
    if not ahead:
        return Decision(True)
    return Decision(False, max(ahead)[1], len(ahead))


_QUEUE_NAMES = st.one_of(
    st.builds(lambda p, n: f"_c_{p}-lock-{n:010d}", st.integers(0, 3), st.integers(0, 50)),
    st.builds(lambda n: f"lock-{n:010d}", st.integers(0, 50)),  # Curator unprotected
    st.sampled_from(["stray", "lock-", "zzz", "_c_1-lock-"]),  # no or an empty sequence
)


@given(st.lists(_QUEUE_NAMES, min_size=1, max_size=30, unique=True), st.data())
def test_the_one_pass_mutex_rule_decides_as_the_reference(names: list[str], data) -> None:
    """The mutex's rule (one pass, run on every listing) matches the plain
    definition, ties between equal keys and names without a sequence included."""
    me = data.draw(st.sampled_from(names))
    assert mutex_rule()(names, me) == _reference_mutex_rule(names, me)
