"""The queues' pure rules, without a server: Curator's names and envelope, the order
each variant takes items in, and the skip-ahead rule that keeps consumers apart."""

from __future__ import annotations

import random
import struct

import pytest

import aiocoord
from aiocoord import Codec, CorruptValueError, InvalidPathError, QueueEmptyError
from aiocoord._recipes.queues._cursor import Cursor
from aiocoord._recipes.queues._rules import (
    DELAY_LAYOUT,
    FIFO_LAYOUT,
    ID_LAYOUT,
    PRIORITY_LAYOUT,
    delay_name,
    due_of,
    fix_id,
    id_name,
    parse_id,
    priority_name,
    skip_after_loss,
    unwrap_item,
    without_sequence,
    wrap_item,
)


def seq(n: int) -> str:
    return f"{n:010d}"


# --- names ---------------------------------------------------------------------------------


def test_priority_names_are_curators() -> None:
    # Curator's priorityToString: "1" for >= 0, "0" below, then the int as 8 hex digits.
    assert priority_name(0) == "queue-100000000"
    assert priority_name(255) == "queue-1000000FF"
    assert priority_name(-1) == "queue-0FFFFFFFF"
    assert priority_name(-(2**31)) == "queue-080000000"
    assert priority_name(2**31 - 1) == "queue-17FFFFFFF"


def test_priority_names_sort_lowest_first_then_by_sequence() -> None:
    priorities = [7, -(2**31), 0, -1, 2**31 - 1, 1, -5, 0, 7]
    names = [priority_name(p) + seq(i) for i, p in enumerate(priorities)]
    taken = PRIORITY_LAYOUT.order(random.Random(1).sample(names, len(names)))
    expected = sorted(range(len(priorities)), key=lambda i: (priorities[i], i))
    assert taken == [names[i] for i in expected]


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1])
def test_a_priority_outside_32_bits_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="32 bits"):
        priority_name(bad)


@pytest.mark.parametrize("bad", [1.5, True, "1", None])
def test_a_priority_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError):
        priority_name(bad)  # type: ignore[arg-type]


def test_delay_names_carry_the_due_time_as_curator_reads_it() -> None:
    assert delay_name(0x18C5A0B1C2D) == "queue-|18C5A0B1C2D|"
    assert delay_name(5) == "queue-|00000005|"
    assert due_of("queue-|18C5A0B1C2D|0000000003") == 0x18C5A0B1C2D
    # Curator reads 0 (due at once) from a name without a due time.
    for name in ("queue-0000000001", "queue-|zz|0000000001", "|ab|0000000001", "queue-||1"):
        assert due_of(name) == 0, name
    with pytest.raises(ValueError):
        delay_name(-1)


def test_delay_items_are_ready_in_due_order_and_say_when_the_next_is_due() -> None:
    names = ["queue-|000003E8|0000000000", "queue-|000001F4|0000000001"]
    names += ["queue-|000001F4|0000000002", "queue-|000007D0|0000000003", "foreign"]
    ready, next_due = DELAY_LAYOUT.ready(names, now_ms=1000)
    assert ready == [
        "queue-|000001F4|0000000001",
        "queue-|000001F4|0000000002",
        "queue-|000003E8|0000000000",
    ]
    assert next_due == 2000
    assert DELAY_LAYOUT.ready(names, now_ms=499) == ([], 500)
    assert DELAY_LAYOUT.ready(names, now_ms=5000)[1] is None


def test_id_names_are_curators_with_slashes_and_bars_replaced() -> None:
    assert fix_id("tenant/a|b") == "tenant_a_b"
    assert id_name("job-7") == "queue-|job-7|"
    assert parse_id("queue-|job-7|0000000004") == ("job-7", "queue-0000000004")
    assert parse_id("queue-0000000004") is None
    with pytest.raises(ValueError, match="empty"):
        id_name("")
    with pytest.raises(TypeError):
        id_name(7)  # type: ignore[arg-type]
    with pytest.raises(InvalidPathError):
        id_name("bad\x00id")


def test_id_items_are_taken_by_sequence_whatever_their_id() -> None:
    names = [f"queue-|{item_id}|{seq(i)}" for i, item_id in enumerate(["z", "a", "m", "a"])]
    assert ID_LAYOUT.order(reversed(names)) == names


def test_fifo_takes_qn_names_in_order_and_ignores_foreign_children() -> None:
    names = ["qn-0000000010", "qn-0000000002", "lock-0000000001", "_c_x-qn-0000000000"]
    assert FIFO_LAYOUT.order(names) == ["qn-0000000002", "qn-0000000010"]
    assert FIFO_LAYOUT.is_item("qn-0000000002") and not FIFO_LAYOUT.is_item("queue-1")


def test_a_name_less_its_sequence_is_the_name_it_was_created_with() -> None:
    assert without_sequence("qn-0000000042") == "qn-"
    assert without_sequence("queue-|job|0000000042") == "queue-|job|"
    assert without_sequence("odd") == "odd"


# --- Curator's envelope --------------------------------------------------------------------


def test_the_envelope_is_curators_item_serializer_format() -> None:
    # ItemSerializer: int version 65537, byte 1, int length, the bytes, byte 2.
    assert wrap_item(b"abc") == struct.pack(">iBi", 65537, 1, 3) + b"abc" + b"\x02"
    assert unwrap_item(wrap_item(b"abc"), "/q/n") == b"abc"
    assert unwrap_item(wrap_item(b""), "/q/n") == b""
    assert unwrap_item(wrap_item(b"x") + b"trailing", "/q/n") == b"x"  # as Curator


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"abc",
        struct.pack(">iBi", 65536, 1, 1) + b"x\x02",  # another version
        struct.pack(">iBi", 65537, 1, 5) + b"x\x02",  # cut short
        struct.pack(">iBi", 65537, 2, 0) + b"\x02",  # no item at all
        wrap_item(b"a")[:-1] + struct.pack(">Bi", 1, 1) + b"b\x02",  # two items (putMulti)
        struct.pack(">iBi", 65537, 1, -1) + b"\x02",
    ],
)
def test_anything_else_is_a_corrupt_value_naming_the_node(data: bytes) -> None:
    with pytest.raises(CorruptValueError, match="/q/queue-0000000001") as raised:
        unwrap_item(data, "/q/queue-0000000001")
    assert raised.value.path == "/q/queue-0000000001"


# --- the skip-ahead rule --------------------------------------------------------------------


def test_a_consumer_that_never_loses_never_skips() -> None:
    rng = random.Random(0)
    assert all(skip_after_loss(0, 100, rng) == 0 for _ in range(100))
    assert skip_after_loss(5, 0, rng) == 0


def test_the_skip_window_doubles_with_each_loss_up_to_256() -> None:
    rng = random.Random(0)
    for losses, window in [(1, 4), (2, 8), (3, 16), (7, 256), (30, 256)]:
        skips = {skip_after_loss(losses, 10_000, rng) for _ in range(5000)}
        assert max(skips) == window - 1 and min(skips) == 0, (losses, window)
    assert max(skip_after_loss(9, 3, rng) for _ in range(1000)) == 3  # never past the end


def _drain(consumers: int, items: int, seed: int) -> float:
    """Lockstep simulation: every round, each consumer tries the next name of its own
    listing of the queue; of those trying one name, one wins. Tries per item."""
    rng = random.Random(seed)
    left = set(range(items))
    cursors = []
    for _ in range(consumers):
        cursor = Cursor()
        cursor.rng = random.Random(rng.random())
        cursors.append(cursor)
    tries = 0
    while left:
        claimed: set[str] = set()
        for cursor in cursors:
            name = cursor.next()
            if name is None:
                cursor.load(seq(i) for i in sorted(left))  # list again
                continue
            tries += 1
            if int(name) in left and name not in claimed:
                claimed.add(name)
                cursor.won(name)
            else:
                cursor.lost(name)
        left -= {int(n) for n in claimed}
    return tries / items


def test_consumers_that_lost_together_spread_out_instead_of_colliding() -> None:
    """8 consumers starting together on one listing of 1,000 items: going on with
    the next name after a loss alone would cost 8 tries per item."""
    assert _drain(1, 1000, 0) == 1.0
    per_item = sum(_drain(8, 1000, seed) for seed in range(5)) / 5
    assert per_item < 2.0, per_item


# --- construction and the errors it raises ----------------------------------------------------


def test_constructors_check_their_input_before_any_io(client: aiocoord.Client) -> None:
    with pytest.raises(InvalidPathError):
        aiocoord.Queue(client, "jobs")
    with pytest.raises(ValueError):
        aiocoord.PriorityQueue(client, "/")
    with pytest.raises(ValueError, match="max_items"):
        aiocoord.DelayQueue(client, "/d", max_items=0)
    with pytest.raises(TypeError, match="max_items"):
        aiocoord.Queue(client, "/q", max_items=True)
    with pytest.raises(ValueError, match="lock_path"):
        aiocoord.Queue(client, "/q", lock_path="/q")
    with pytest.raises(ValueError, match="dead_letter"):
        aiocoord.Queue(client, "/q", dead_letter="/q/dead")
    with pytest.raises(TypeError, match="codec"):
        aiocoord.IdQueue(client, "/q", codec=b"not a codec")  # type: ignore[call-overload]
    queue = aiocoord.Queue(client, "/jobs", codec=Codec.UTF8, max_items=3)
    assert queue.lock_path == "/jobs-taken" and queue.dead_letter is None
    assert aiocoord.Queue(client, "/jobs", lock_path="/locks/jobs").lock_path == "/locks/jobs"


async def test_items_that_cannot_be_sent_are_refused_before_any_io(
    client: aiocoord.Client,
) -> None:
    with pytest.raises(TypeError):
        await aiocoord.Queue(client, "/q", codec=Codec.UTF8).put(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(aiocoord.DataTooLargeError, match="'/q'"):
        await aiocoord.Queue(client, "/q").put(b"x" * (client.max_data_size + 1))
    with pytest.raises(ValueError):
        await aiocoord.DelayQueue(client, "/q").put(b"x", delay=-1.0)
    with pytest.raises(ValueError, match="not both"):
        await aiocoord.DelayQueue(client, "/q").put(b"x", delay=1.0, at=5.0)
    with pytest.raises(ValueError, match="32 bits"):
        await aiocoord.PriorityQueue(client, "/q").put_many([b"x"], 2**40)
    with pytest.raises(ValueError, match="can never fit"):
        await aiocoord.Queue(client, "/q", max_items=1).put_many([b"a", b"b"])
    assert not client.connected


def test_queue_empty_is_a_timeout_naming_the_queue() -> None:
    now = QueueEmptyError("/jobs")
    later = QueueEmptyError("/jobs", 2.5)
    assert str(now) == "queue '/jobs' had no item now"
    assert str(later) == "queue '/jobs' had no item within 2.5 s"
    assert isinstance(later, aiocoord.OperationTimeoutError) and isinstance(later, TimeoutError)
    assert (later.path, later.timeout) == ("/jobs", 2.5)
