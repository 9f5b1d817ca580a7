"""The partitioner's pure rules: who should own which item, and the item set's format.

Every member computes the same assignment from the same inputs (the members
with their weights, who owns what now, the items), so no member needs to tell
another what to do: each acts on its own share of the one answer.

The assignment is sticky. It starts from the current owners, keeps each
owner's items while it is within its quota, and moves only an owner's excess
and the unowned items. So when a member leaves only its items move, and when a
member joins only the items it takes move.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from fractions import Fraction

from ..._exceptions import CorruptValueError

__all__ = ["assign", "parse_items", "quotas"]


def quotas(weights: Mapping[str, float], counts: Mapping[str, int], items: int) -> dict[str, int]:
    """How many of ``items`` items each member should own: its share by weight,
    rounded down or up, the shares summing to ``items``.

    Each member gets the floor of its exact share; the items left over go one
    each to the members that already own more than their floor (so that
    nothing they hold has to move), then by the largest fraction of their
    share, then by id. Exact arithmetic (fractions), so every member computes
    the same numbers.
    """
    if not weights or items <= 0:
        return dict.fromkeys(weights, 0)
    total = sum(Fraction(w) for w in weights.values())
    exact = {m: Fraction(items) * Fraction(w) / total for m, w in weights.items()}
    floors = {m: int(share) for m, share in exact.items()}  # shares are >= 0: int() floors
    left = items - sum(floors.values())
    ranked = sorted(
        weights,
        key=lambda m: (counts.get(m, 0) <= floors[m], -(exact[m] - floors[m]), m),
    )
    for member in ranked[:left]:
        floors[member] += 1
    return floors


def assign(
    items: Iterable[str], weights: Mapping[str, float], owners: Mapping[str, str]
) -> dict[str, str]:
    """The target owner of every item: ``{item: member id}``.

    ``weights``: the live members and their weights. ``owners``: the current
    owner of each claimed item (claims by members not in ``weights`` count as
    unowned: they are about to go). An owner keeps its items, in item order,
    up to its quota; the rest, in item order, fill the members below their
    quota in id order. Empty without members.
    """
    ordered = sorted(set(items))
    if not weights:
        return {}
    counts: dict[str, int] = dict.fromkeys(weights, 0)
    for item in ordered:
        owner = owners.get(item)
        if owner in counts:
            counts[owner] += 1
    quota = quotas(weights, counts, len(ordered))
    kept = dict.fromkeys(weights, 0)
    target: dict[str, str] = {}
    for item in ordered:
        owner = owners.get(item)
        if owner is not None and owner in kept and kept[owner] < quota[owner]:
            target[item] = owner
            kept[owner] += 1
    # The rest go in contiguous runs, in item order, to the members below their
    # quota, in id order. A claim by its target owner (or a release of an
    # excess item) then leaves every other item's target where it was: the
    # members' answers agree at every step of getting there.
    pool = [item for item in ordered if item not in target]
    start = 0
    for member in sorted(weights):
        need = quota[member] - kept[member]
        for item in pool[start : start + need]:
            target[item] = member
        start += need
    return target


def parse_items(path: str, data: bytes) -> list[str]:
    """The item set an operator keeps in a node: a JSON list of strings
    (``["a", "b"]``); empty data is no items. CorruptValueError otherwise."""
    if not data.strip():
        return []
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise CorruptValueError(path, data, "a JSON list of item names") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CorruptValueError(path, data, "a JSON list of non-empty strings")
    return list(dict.fromkeys(value))
