"""``aiocoord top``'s rows and hand-off counting, from inspect reports (no server)."""

from __future__ import annotations

from aiocoord._cli._top import HANDOFF_WINDOW, Row, Tracker, render, rows_of


def _lock(path: str, holder: str, waiters: int) -> dict[str, object]:
    entry = {"node": holder, "session": "0x1", "data": holder}
    return {"path": path, "kind": "lock", "holder": entry, "waiters": [entry] * waiters}


def test_rows_flatten_the_tree_and_skip_plain_nodes() -> None:
    report = {
        "path": "/",
        "kind": "node",
        "children": [
            _lock("/a", "n1", 2),
            {"path": "/q", "kind": "queue", "depth": 4, "head": {}},
            {"path": "/c", "kind": "counter", "value": 9},
            {"path": "/plain", "kind": "node", "children": []},
        ],
    }
    rows = rows_of(report)
    assert [(r.path, r.kind, r.waiters, r.depth, r.value) for r in rows] == [
        ("/a", "lock", 2, None, None),
        ("/q", "queue", 0, 4, None),
        ("/c", "counter", 0, None, 9),
    ]
    assert rows[0].holders == ["n1"]


def test_a_change_of_holder_counts_as_a_hand_off_for_a_minute() -> None:
    tracker = Tracker()
    first = rows_of(_lock("/a", "n1", 1))
    tracker.update(first, 100.0)
    assert first[0].handoffs == 0  # nothing to compare with yet
    second = rows_of(_lock("/a", "n2", 0))
    tracker.update(second, 101.0)
    assert (second[0].handoffs, second[0].last_handoff) == (1, 101.0)
    same = rows_of(_lock("/a", "n2", 0))
    tracker.update(same, 102.0)
    assert same[0].handoffs == 1
    later = rows_of(_lock("/a", "n2", 0))
    tracker.update(later, 101.0 + HANDOFF_WINDOW + 1)
    assert later[0].handoffs == 0


def test_the_table_sorts_and_fits_the_width() -> None:
    rows = [Row("/b", "lock", waiters=1), Row("/a", "lock", waiters=3)]
    lines = render(rows, width=60, header="top", sort="waiters", reverse=True)
    assert [line.split()[1] for line in lines[3:]] == ["/a", "/b"]
    assert all(len(line) <= 60 for line in lines)


def _partitioner(owners: dict[str, str | None]) -> dict[str, object]:
    members: dict[str, list[str]] = {}
    for item, owner in owners.items():
        if owner is not None:
            members.setdefault(owner, []).append(item)
    return {
        "path": "/work",
        "kind": "partitioner",
        "members": [{"id": m, "weight": 1.0, "items": items} for m, items in members.items()],
        "items": [{"item": i, "owner": o, "generation": 1} for i, o in owners.items()],
        "generation": len(owners),
    }


def test_a_partitioner_row_counts_unclaimed_items_and_each_item_that_moves() -> None:
    tracker = Tracker()
    first = rows_of(_partitioner({"a": "one", "b": "one", "c": None}))
    tracker.update(first, 100.0)
    [row] = first
    assert (row.kind, row.holders, row.waiters, row.depth, row.value) == (
        "partition",
        ["one (a b)"],
        1,
        1,
        3,
    )
    moved = rows_of(_partitioner({"a": "one", "b": "two", "c": "two"}))
    tracker.update(moved, 101.0)
    assert moved[0].handoffs == 2  # b moved, c was claimed
    assert moved[0].holders == ["one (a)", "two (b c)"]


def test_a_service_row_lists_instances_and_counts_the_enabled() -> None:
    instances = [
        {"id": "i-1", "enabled": True},
        {"id": "i-2", "enabled": False},
    ]
    [row] = rows_of({"path": "/s/api", "kind": "service", "instances": instances})
    assert (row.kind, row.holders, row.depth, row.value) == (
        "service",
        ["i-1", "i-2 (disabled)"],
        2,
        1,
    )


def _election(leader: str | None, candidates: list[str], token: int | None) -> dict[str, object]:
    def entry(name: str) -> dict[str, str]:
        return {"node": f"_c_x-aio-lock-{name}", "session": "0x1", "data": name}

    return {
        "path": "/e",
        "kind": "leader election",
        "leader": entry(leader) if leader is not None else None,
        "participants": [entry(c) for c in candidates],
        "fencing_token": token,
    }


def test_an_election_row_names_its_leader_its_queue_and_its_token() -> None:
    [row] = rows_of(_election("a", ["b", "c"], 4294967301))
    assert (row.kind, row.holders, row.queue, row.waiters, row.value) == (
        "election",
        ["a"],
        ["b", "c"],
        2,
        4294967301,
    )
    assert row.as_json()["queue"] == ["b", "c"]
    line = render([row], width=120, header="top")[3]
    assert line.split()[2:] == ["2", "-", "4294967301", "0", "a;", "next:", "b,", "c"]


def test_an_election_being_handed_over_has_no_leader_and_a_new_one_is_a_hand_off() -> None:
    tracker = Tracker()
    before = rows_of(_election("a", ["b"], 10))
    tracker.update(before, 100.0)
    [transit] = rows_of(_election(None, ["a", "b"], None))
    assert (transit.holders, transit.queue, transit.value) == ([], ["a", "b"], None)
    assert render([transit], width=120, header="top")[3].split()[-4:] == ["-;", "next:", "a,", "b"]
    tracker.update([transit], 101.0)
    after = rows_of(_election("b", ["a"], 12))
    tracker.update(after, 102.0)
    assert after[0].handoffs == 1  # a to b, through nobody
