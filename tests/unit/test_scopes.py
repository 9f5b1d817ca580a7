"""The session's ``with`` scopes: the session pin, the request timeout, send tracking."""

from __future__ import annotations

import asyncio

import pytest

from aiocoord._session import _connection, _engine


def test_the_session_pin_holds_in_its_block_and_is_restored_after() -> None:
    assert _engine._pinned.get() is None
    with _engine.only_in_session(7):
        assert _engine._pinned.get() == 7
        with _engine.only_in_session(9):
            assert _engine._pinned.get() == 9
        assert _engine._pinned.get() == 7
    assert _engine._pinned.get() is None


def test_a_scope_is_restored_when_its_block_raises() -> None:
    with pytest.raises(KeyError), _engine.request_timeout(2.5):
        assert _engine._override.get() == 2.5
        raise KeyError
    assert _engine._override.get(None) is None


def test_a_scope_object_is_not_reentrant_but_may_be_used_again() -> None:
    scope = _engine.only_in_session(3)
    with scope:
        with pytest.raises(RuntimeError), scope:
            pass
        assert _engine._pinned.get() == 3
    assert _engine._pinned.get() is None
    with scope:
        assert _engine._pinned.get() == 3
    assert _engine._pinned.get() is None


async def test_send_tracking_marks_its_block_and_the_blocks_around_it() -> None:
    with _connection.track_sends() as outer:
        with _connection.track_sends() as inner:
            assert not inner.sent
            _connection._mark_sent()
        assert inner.sent and outer.sent

    async def send() -> None:
        await asyncio.sleep(0)
        _connection._mark_sent()

    with _connection.track_sends() as fresh:
        # A task started in the block sends in a copy of its context: it counts.
        await asyncio.create_task(send())
    assert fresh.sent
    assert _connection._sends.get() is None
