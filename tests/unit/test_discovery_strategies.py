"""Instance choice without a server: every strategy, and Curator's down-instance policy."""

from __future__ import annotations

import collections
import random

import pytest

from aiocoord import ProviderStrategy, ServiceInstance
from aiocoord._recipes.discovery._strategies import (
    Chooser,
    DownInstances,
    candidates_of,
    key_of,
)


def inst(instance_id: str, *, enabled: bool = True) -> ServiceInstance:
    return ServiceInstance(
        name="api", id=instance_id, address="h", enabled=enabled, registration_time=1
    )


A, B, C, D = (inst(x) for x in "abcd")
ALL = [A, B, C, D]


def chooser(strategy: ProviderStrategy, seed: int = 1) -> Chooser:
    return Chooser(strategy, random.Random(seed))


@pytest.mark.parametrize("strategy", list(ProviderStrategy))
def test_no_candidates_is_none_and_one_candidate_is_it(strategy: ProviderStrategy) -> None:
    c = chooser(strategy)
    assert c.pick([], {}) is None
    assert [c.pick([B], {}) for _ in range(5)] == [B] * 5


def test_round_robin_takes_each_in_turn_and_follows_a_changing_list() -> None:
    c = chooser(ProviderStrategy.ROUND_ROBIN)
    assert [c.pick(ALL, {}) for _ in range(6)] == [A, B, C, D, A, B]
    assert [c.pick([A, B], {}) for _ in range(2)] == [A, B]


def test_random_spreads_evenly() -> None:
    c = chooser(ProviderStrategy.RANDOM)
    counts = collections.Counter(c.pick(ALL, {}).id for _ in range(4000))  # type: ignore[union-attr]
    assert set(counts) == {"a", "b", "c", "d"}
    assert all(800 < n < 1200 for n in counts.values()), counts


def test_sticky_keeps_its_instance_until_it_goes() -> None:
    c = chooser(ProviderStrategy.STICKY)
    first = c.pick(ALL, {})
    assert first is not None
    assert {c.pick(ALL, {}) for _ in range(20)} == {first}
    # An updated form of the same instance (same name and id) is still it.
    moved = [ServiceInstance(name="api", id=x, address="h", port=1) for x in "abcd"]
    again = c.pick(moved, {})
    assert again is not None and again.id == first.id and again.port == 1
    rest = [i for i in ALL if i != first]
    second = c.pick(rest, {})
    assert second in rest
    assert {c.pick(ALL, {}) for _ in range(20)} == {second}  # stays on the new one


def test_sticky_providers_in_many_processes_spread_out() -> None:
    firsts = {chooser(ProviderStrategy.STICKY, seed).pick(ALL, {}) for seed in range(40)}
    assert len(firsts) == 4


def test_least_outstanding_takes_the_least_loaded_and_rotates_ties() -> None:
    c = chooser(ProviderStrategy.LEAST_OUTSTANDING)
    load = {key_of(A): 3, key_of(B): 1, key_of(C): 1, key_of(D): 2}
    assert [c.pick(ALL, load) for _ in range(4)] == [B, C, B, C]
    assert c.pick(ALL, {**load, key_of(D): 0}) == D


def test_power_of_two_choices_takes_the_less_loaded_of_two_distinct() -> None:
    c = chooser(ProviderStrategy.POWER_OF_TWO_CHOICES)
    load = {key_of(A): 100, key_of(B): 100, key_of(C): 100, key_of(D): 0}
    picks = collections.Counter(c.pick(ALL, load).id for _ in range(3000))  # type: ignore[union-attr]
    # D wins whenever it is drawn (half the pairs hold it); never the most loaded
    # twice in a row when a less loaded one was drawn.
    assert 1350 < picks["d"] < 1650, picks
    never = chooser(ProviderStrategy.POWER_OF_TWO_CHOICES)
    heavy = {key_of(A): 9, key_of(B): 0}
    assert {never.pick([A, B], heavy) for _ in range(50)} == {B}


def test_power_of_two_choices_balances_requests_that_stay_in_flight() -> None:
    c = chooser(ProviderStrategy.POWER_OF_TWO_CHOICES)
    load: dict[tuple[str, str], int] = {}
    for _ in range(400):
        chosen = c.pick(ALL, load)
        assert chosen is not None
        load[key_of(chosen)] = load.get(key_of(chosen), 0) + 1
    assert max(load.values()) - min(load.values()) <= 3, load


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_down_policy_is_curators_threshold_within_a_window_from_the_first_error() -> None:
    clock = Clock()
    down = DownInstances(timeout=30.0, error_threshold=2, clock=clock)
    down.note_error(A)
    assert not down.is_down(A) and down.errors(A) == 1
    clock.now += 10
    down.note_error(A)
    assert down.is_down(A) and not down.is_down(B)
    assert down.next_change() == pytest.approx(20.0)
    assert candidates_of(ALL, down) == [B, C, D]
    clock.now += 20  # 30 s after the first error: back, with a fresh count
    assert not down.is_down(A) and down.errors(A) == 0
    assert down.next_change() is None
    down.note_error(A)
    assert not down.is_down(A)


def test_errors_spread_wider_than_the_window_never_take_an_instance_down() -> None:
    clock = Clock()
    down = DownInstances(timeout=30.0, error_threshold=2, clock=clock)
    for _ in range(5):
        down.note_error(A)
        assert not down.is_down(A)
        clock.now += 30


def test_disabled_instances_are_never_candidates() -> None:
    down = DownInstances(timeout=30.0, error_threshold=2)
    assert candidates_of([A, inst("b", enabled=False), C], down) == [A, C]
    for strategy in ProviderStrategy:
        c = chooser(strategy)
        picks = {c.pick(candidates_of([inst("x", enabled=False), C], down), {}) for _ in range(9)}
        assert picks == {C}


# --- what a chooser keeps between picks of the same tuple (#26: a pick is cheap) ---


def test_sticky_keeps_its_place_in_the_same_tuple_and_looks_again_in_a_new_one() -> None:
    c = chooser(ProviderStrategy.STICKY)
    kept = (A, B, C, D)
    first = c.pick(kept, {})
    assert first is not None
    assert {c.pick(kept, {}) for _ in range(20)} == {first}
    # A new tuple (the view changed): the same instance, now elsewhere, is still it.
    shifted = (D, C, B, A)
    assert c.pick(shifted, {}) == first
    rest = tuple(i for i in kept if i != first)
    second = c.pick(rest, {})
    assert second in rest
    assert {c.pick(rest, {}) for _ in range(20)} == {second}


def test_least_outstanding_keeps_the_least_loaded_until_the_load_version_changes() -> None:
    c = chooser(ProviderStrategy.LEAST_OUTSTANDING)
    kept = (A, B, C, D)
    load = {key_of(A): 1, key_of(B): 0, key_of(C): 0, key_of(D): 1}
    assert [c.pick(kept, load, load_version=1) for _ in range(4)] == [B, C, B, C]
    load[key_of(B)] = 2  # in place: only the new version says so
    assert c.pick(kept, load, load_version=2) == C
    assert c.pick(kept, load, load_version=2) == C
    load[key_of(C)] = 3
    assert [c.pick(kept, load, load_version=3) for _ in range(2)] in ([A, D], [D, A])
    # A new tuple with the same version is looked at afresh.
    assert c.pick((B, C), load, load_version=3) == B
    # Without a version (or given a list) every pick looks afresh.
    load = {key_of(A): 5}
    assert {c.pick(kept, load) for _ in range(6)} == {B, C, D}
    assert {c.pick(list(kept), load, load_version=3) for _ in range(6)} == {B, C, D}


def test_power_of_two_choices_draws_every_ordered_pair_of_distinct_places() -> None:
    c = chooser(ProviderStrategy.POWER_OF_TWO_CHOICES)
    kept = (A, B, C)
    # With every instance equally loaded the first drawn wins: uniform over all.
    load = {key_of(A): 1, key_of(B): 1, key_of(C): 1}
    counts = collections.Counter(c.pick(kept, load).id for _ in range(3000))  # type: ignore[union-attr]
    assert all(850 < n < 1150 for n in counts.values()), counts
    # The most loaded of three is always drawn with a less loaded one: never picked.
    load[key_of(C)] = 9
    assert C not in {c.pick(kept, load) for _ in range(200)}


def test_down_policy_version_and_expiry_say_when_candidates_change() -> None:
    clock = Clock()
    down = DownInstances(timeout=30.0, error_threshold=2, clock=clock)
    assert down.expiry() == float("inf") and down.now() == 1000.0
    seen = down.version
    down.note_error(A)
    assert down.version != seen and down.expiry() == float("inf")  # not down yet
    clock.now += 5
    down.note_error(B)
    down.note_error(B)
    down.note_error(A)
    assert down.expiry() == 1030.0  # A's window, from its first error, ends first
    clock.now = 1030.0
    seen = down.version
    assert down.expiry() == 1035.0 and down.version != seen  # A's window ended
    assert candidates_of(ALL, down) == [A, C, D]
    clock.now = 1035.0
    assert candidates_of(ALL, down) == ALL and down.expiry() == float("inf")
