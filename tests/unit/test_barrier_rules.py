"""The pure rules behind DoubleBarrier, and what the barriers check before any I/O
(no server: the client is never started)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiocoord
from aiocoord._recipes.barriers._barrier import (
    READY_NODE,
    EnterDecision,
    LeaveDecision,
    enter_decision,
    leave_decision,
)

# --- enter ----------------------------------------------------------------------------


def test_enter_waits_until_members_participants_are_there() -> None:
    assert enter_decision([], 3) == EnterDecision(0, False)
    assert enter_decision(["a", "b"], 3) == EnterDecision(2, False)
    assert enter_decision(["a", "b", "c"], 3) == EnterDecision(3, True, create_ready=True)
    assert enter_decision(["a", "b", "c", "d"], 3) == EnterDecision(4, True, create_ready=True)


def test_ready_is_not_a_participant_but_lets_everyone_through() -> None:
    # Somebody counted `members` nodes and said so: the fast ones may have left since.
    assert enter_decision([READY_NODE, "a"], 3) == EnterDecision(1, True)
    assert enter_decision([READY_NODE], 1) == EnterDecision(0, True)
    # ready alone never makes up a missing participant's count.
    assert not enter_decision(["a", "b"], 3).passed


def test_one_member_passes_alone() -> None:
    assert enter_decision(["a"], 1) == EnterDecision(1, True, create_ready=True)


# --- leave ----------------------------------------------------------------------------


def test_alone_deletes_itself_and_is_done() -> None:
    assert leave_decision(["a", READY_NODE], "a") == LeaveDecision(True, delete_me=True)


def test_the_lowest_watches_the_highest_and_stays() -> None:
    assert leave_decision(["c", "a", "b", READY_NODE], "a") == LeaveDecision(False, watch="c")


def test_the_others_delete_themselves_and_watch_the_lowest() -> None:
    assert leave_decision(["c", "a", "b"], "b") == LeaveDecision(False, True, "a")
    assert leave_decision(["c", "a", "b"], "c") == LeaveDecision(False, True, "a")


def test_after_deleting_itself_a_participant_waits_until_nobody_is_left() -> None:
    # Curator would be done here (only the lowest is left); the lowest may not
    # even have started leaving, so we wait for it.
    assert leave_decision(["a", READY_NODE], "b") == LeaveDecision(False, watch="a")
    assert leave_decision([READY_NODE], "b") == LeaveDecision(True)
    assert leave_decision([], "b") == LeaveDecision(True)


def test_after_deleting_itself_nodes_listed_without_ready_are_the_next_round() -> None:
    # Our round's last leaver deleted ready once it saw no node left: "a" and
    # "c" came after (a late entrant back from sitting our round out). Waiting
    # for them would hold our leave until the next round leaves (CI saw it).
    assert leave_decision(["a", "c"], "b") == LeaveDecision(True)


def test_names_sort_as_curator_sorts_them() -> None:
    # Curator sorts the UUID names as Java strings: plain code point order for them.
    names = [str(uuid.uuid4()) for _ in range(20)]
    lowest = min(names)
    for name in names:
        decision = leave_decision(names, name)
        assert decision.watch == (max(names) if name == lowest else lowest)


# --- the leave protocol, run over every interleaving ----------------------------------


class _Participant:
    def __init__(self, name: str, curator: bool) -> None:
        self.name = name
        self.curator = curator
        self.started = False
        self.deleted = False
        self.watching: str | None = None
        self.done = False


def _curator_step(nodes: set[str], p: _Participant) -> tuple[bool, bool, str | None]:
    """Curator 5.4's internalLeave, one pass: (done, delete ours, watch)."""
    participants = sorted(n for n in nodes if n != READY_NODE)
    if not participants:
        return True, False, None
    if len(participants) == 1:
        return True, not p.deleted, None
    if participants[0] == p.name:
        return False, False, participants[-1]
    return False, not p.deleted, participants[0]


def _step(nodes: set[str], p: _Participant) -> None:
    """One look and decision by ``p``, applied to ``nodes``."""
    if p.curator:
        done, delete_me, watch = _curator_step(nodes, p)
    else:
        decision = leave_decision(nodes, p.name)
        done, delete_me, watch = decision.done, decision.delete_me, decision.watch
    if delete_me:
        nodes.discard(p.name)
        p.deleted = True
    if done:
        p.done = True
    p.watching = watch


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 6),
    curators=st.integers(0, 6),
    choices=st.lists(st.integers(0, 1000), max_size=200),
    spurious=st.lists(st.booleans(), max_size=200),
)
def test_leave_protocol_ends_together_in_any_interleaving(
    size: int, curators: int, choices: list[int], spurious: list[bool]
) -> None:
    """Participants (some following Curator's rule) start leaving in any order and
    wake up in any order, sometimes for nothing: all of them finish, and none of
    ours finishes while a participant node is left."""
    people = [_Participant(str(uuid.uuid4()), curator=i < curators) for i in range(size)]
    nodes = {p.name for p in people} | {READY_NODE}
    wakes = iter(spurious)
    for choice in [*choices, *range(10 * size * size)]:
        runnable = [
            p
            for p in people
            if not p.done
            and (
                not p.started
                or p.watching not in nodes  # its watch fired
                or next(wakes, False)  # a spurious wake: a reconnection, a leftover watch
            )
        ]
        if not runnable:
            break
        p = runnable[choice % len(runnable)]
        p.started = True
        _step(nodes, p)
        if p.done and not p.curator:
            assert not nodes - {READY_NODE}, "returned from leave before everyone left"
    assert all(p.done for p in people), "a participant was left waiting"
    assert not nodes - {READY_NODE}


# --- input checks ---------------------------------------------------------------------


@pytest.mark.parametrize("members", [True, 2.0, "3", None])
def test_members_must_be_an_int(client: aiocoord.Client, members: object) -> None:
    with pytest.raises(TypeError):
        aiocoord.DoubleBarrier(client, "/b", members)  # type: ignore[arg-type]


@pytest.mark.parametrize("members", [0, -1])
def test_members_must_be_at_least_one(client: aiocoord.Client, members: int) -> None:
    with pytest.raises(ValueError, match="members"):
        aiocoord.DoubleBarrier(client, "/b", members)


@pytest.mark.parametrize("kind", [aiocoord.Barrier, aiocoord.DoubleBarrier])
def test_paths_are_checked_before_anything_is_sent(client: aiocoord.Client, kind: type) -> None:
    args = (2,) if kind is aiocoord.DoubleBarrier else ()
    with pytest.raises(aiocoord.InvalidPathError):
        kind(client, "no-slash", *args)
    with pytest.raises(ValueError, match="root"):
        kind(client, "/", *args)


async def test_leaving_without_entering_is_an_error(client: aiocoord.Client) -> None:
    barrier = aiocoord.DoubleBarrier(client, "/b", 2)
    with pytest.raises(RuntimeError, match="not entered"):
        await barrier.leave()


def test_barriers_print_readably(client: aiocoord.Client) -> None:
    assert repr(aiocoord.Barrier(client, "/gate")) == "<Barrier '/gate'>"
    barrier = aiocoord.DoubleBarrier(client, "/race", 5)
    assert repr(barrier) == "<DoubleBarrier '/race' members=5 outside>"
    assert not barrier.is_entered and barrier.node is None
    assert (
        repr(barrier.entered(timeout=2.5)) == "<DoubleBarrierEntry '/race' members=5 timeout=2.5>"
    )
