"""ChangeStream and Broadcast, the one stream machinery: buffering, ending, overflow."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiocoord import ChangeStream
from aiocoord._session import Broadcast, end_stream


async def read_all(stream: ChangeStream[int]) -> list[int]:
    return [value async for value in stream]


async def test_values_wait_in_order_until_read_and_the_end_comes_after_them() -> None:
    hub: Broadcast[int] = Broadcast("numbers")
    stream = hub.subscribe()
    for value in (1, 2, 3):
        hub.publish(value)
    assert stream.pending == 3
    hub.close()
    assert await read_all(stream) == [1, 2, 3]


async def test_an_error_the_source_ended_with_is_raised_once_after_the_buffered_values() -> None:
    hub: Broadcast[int] = Broadcast()
    stream = hub.subscribe()
    hub.publish(1)
    hub.close(ValueError("boom"))
    assert await anext(stream) == 1
    with pytest.raises(ValueError, match="boom"):
        await anext(stream)
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_a_stream_made_after_the_close_ends_the_same_way_after_its_first_values() -> None:
    hub: Broadcast[int] = Broadcast()
    hub.close(KeyError("gone"))
    stream = hub.subscribe(first=[7])
    assert await anext(stream) == 7
    with pytest.raises(KeyError):
        await anext(stream)


async def test_aclose_and_async_with_stop_listening_but_keep_what_was_buffered() -> None:
    hub: Broadcast[int] = Broadcast()
    async with hub.subscribe() as stream:
        hub.publish(1)
    hub.publish(2)  # after the block: not seen
    assert stream.ended
    assert await read_all(stream) == [1]
    await stream.aclose()  # idempotent


async def test_a_bounded_stream_that_falls_behind_reads_the_overflow_items_made_when_read() -> None:
    hub: Broadcast[int] = Broadcast()
    made: list[str] = []

    def marker() -> int:
        made.append("marker")
        return -1

    def resync() -> int:
        made.append("resync")
        return 100

    stream = hub.subscribe(max_buffer=2, overflow=(marker, resync))
    for value in (1, 2, 3):  # the third overflows: all three are dropped
        hub.publish(value)
    assert stream.dropped == 3 and stream.pending == 0
    assert "overflowed" in repr(stream)
    assert await anext(stream) == -1
    hub.publish(4)  # before the resync is read: covered by it
    assert made == ["marker"]
    assert await anext(stream) == 100 and made == ["marker", "resync"]
    hub.publish(5)
    assert await anext(stream) == 5
    assert stream.dropped == 4


async def test_listeners_are_called_in_order_and_a_failing_one_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub: Broadcast[int] = Broadcast()
    seen: list[int] = []

    def fail(_value: int) -> None:
        raise RuntimeError("listener bug")

    hub.add_listener(fail)
    hub.add_listener(seen.append)
    assert hub.has_listeners
    hub.publish(1)
    hub.remove_listener(fail)
    hub.remove_listener(fail)  # not registered: ignored
    hub.publish(2)
    assert seen == [1, 2]
    assert "listener" in caplog.text and "failed" in caplog.text
    with pytest.raises(TypeError, match="callback"):
        hub.add_listener(42)  # type: ignore[arg-type]


async def test_a_stream_read_from_a_source_closes_the_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    stream: ChangeStream[int] = ChangeStream(source=source())
    assert await anext(stream) == 1
    await stream.aclose()
    assert closed == [True]
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_end_stream_ends_a_stream_no_broadcast_feeds() -> None:
    stream: ChangeStream[int] = ChangeStream(name="mine")
    end_stream(stream)
    assert await read_all(stream) == []
    assert "mine" in repr(stream) and "ended" in repr(stream)
