"""The leader recipes' pure rules (#29): node names, the election record, and who
is to lead once hand-overs and priorities count."""

from __future__ import annotations

from aiocoord._recipes._kit._contenders import sequence_key
from aiocoord._recipes.leaders._common import (
    Record,
    designated,
    is_ours,
    leader_from,
    node_name,
    priority_of,
)

P = "_c_6e76b11a-f9ba-4ad1-bcc5-0068d18544d2-"


def name(seq: int, priority: int | None = None, *, ours: bool = True, lock: str = "latch-") -> str:
    middle = node_name(lock, priority) if ours else lock
    return f"{P}{middle}{seq:010d}"


def test_node_names_keep_curators_sort_key_and_carry_the_priority() -> None:
    assert node_name("latch-", None) == "aio-latch-"
    assert node_name("lock-", -3) == "aio.-3-lock-"
    for priority in (None, 0, 7, -3):
        for lock in ("latch-", "lock-"):
            n = name(42, priority, lock=lock)
            assert sequence_key(n, (lock,)) == "0000000042"
            assert is_ours(n) and priority_of(n) == priority
    curator = name(1, ours=False)
    assert not is_ours(curator) and priority_of(curator) is None


def test_the_record_round_trips_and_foreign_data_is_no_record() -> None:
    for record in (Record(), Record("n", b"\x00data\n"), Record(to="t"), Record("n", b"")):
        assert Record.decode(record.encode()) == record
    for raw in (None, b"", b"hello", b"{not json\n", b'{"kind":"other"}\n'):
        assert Record.decode(raw) is None


def test_the_head_leads_unless_a_hand_over_or_a_higher_priority_says_otherwise() -> None:
    a, b, c = name(1), name(2), name(3)
    assert designated([], None) is None and leader_from([], None) is None
    assert designated([a, b, c], None) == a
    assert designated([a, b, c], Record(to=c)) == c
    assert designated([a, b], Record(to=c)) == a  # the target left: ignored
    high = name(4, 5)
    assert designated([a, b, high], None) == high
    assert designated([name(1, 5), name(2, 5)], None) == name(1, 5)  # ties: the earliest
    assert designated([name(1, -1), b], None) == name(1, -1)  # None is below every int
    assert designated([a, high], Record(to=b)) == high  # b is not queued
    assert designated([a, b, high], Record(to=b)) == b  # a hand-over comes first


def test_an_observer_sees_no_leader_while_ours_gives_way_but_a_curator_head_leads() -> None:
    a, c = name(1), name(3)
    assert leader_from([a, c], Record(to=c)) is None  # a is about to queue again
    assert leader_from([c, a], Record(to=c)) == c
    curator = name(1, ours=False)
    assert leader_from([curator, c], Record(to=c)) == curator  # Curator ignores the record
    assert leader_from([curator, name(2, 9)], None) == curator
