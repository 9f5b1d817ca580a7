"""Who is there: the one type every recipe's ``participants()`` returns."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Participant"]


@dataclass(frozen=True, slots=True)
class Participant:
    """One participant of a recipe, as its ``participants()`` lists it (and
    ``leader()`` names the leader), in the recipe's order.

    Locks, semaphores and elections list their queue in order; a group lists
    its members by id.
    """

    id: str | None
    """The participant's id where the recipe names participants (an election's
    ``participant_id``, a group member's id); None where it does not (a lock's or
    a semaphore's contenders, known only by their node and data)."""
    node: str
    """The participant's node (full path, without the client's namespace)."""
    data: bytes
    """What the participant's node holds (for an election, its id as UTF-8)."""
    holds: bool
    """Whether it holds what the recipe grants, as the listing shows it: the lock,
    a lease, leadership; True for every member of a group."""
    fencing_token: int | None = None
    """For a leader (an election's ``leader()``, ``leader_changes()``): its fencing
    token, the leader node's creation zxid, which grows with every new term;
    None elsewhere."""
