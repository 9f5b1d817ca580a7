"""Requests at and over the server's size limit (``jute.maxbuffer``, the client's
``max_data_size``).

ZooKeeper reads each request's 4-byte length prefix and drops the connection,
without a reply, when that value (xid, opcode and the whole record after it:
path, data, ACLs, every operation of a multi) is greater than jute.maxbuffer.
The client must refuse such a request itself, with DataTooLargeError, and send
nothing: a dropped connection would make every holder of a lock on the client
think it lost it. The sizes below are computed here from the jute encoding,
independently of the client's own encoder, so that the boundary is checked
against what the server really accepts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from _waiting import settle

import aiocoord
from aiocoord import ConnectionState, DataTooLargeError

LIMIT = 1024 * 1024 - 1
"""The client's default max_data_size: the test server's (default) jute.maxbuffer."""

_HEADER = 8  # xid, opcode
_OPEN_ACL = 4 + 4 + (4 + len("world")) + (4 + len("anyone"))  # vector of one ACL
_MULTI_HEADER = 4 + 1 + 4  # type, done, err


def _server_path(client: aiocoord.Client, path: str) -> str:
    return (client.namespace or "") + path


def _create_record(client: aiocoord.Client, path: str, data_len: int) -> int:
    """CreateRequest (create2): path, data, ACL vector, flags."""
    return 4 + len(_server_path(client, path).encode()) + 4 + data_len + _OPEN_ACL + 4


def create_size(client: aiocoord.Client, path: str, data_len: int) -> int:
    """What the length prefix of a create of ``path`` with ``data_len`` bytes says."""
    return _HEADER + _create_record(client, path, data_len)


def set_size(client: aiocoord.Client, path: str, data_len: int) -> int:
    """SetDataRequest: path, data, version."""
    return _HEADER + 4 + len(_server_path(client, path).encode()) + 4 + data_len + 4


def multi_create_size(client: aiocoord.Client, creates: list[tuple[str, int]]) -> int:
    """A multi of creates: each behind a multi header, then the closing header."""
    body = sum(_MULTI_HEADER + _create_record(client, p, n) for p, n in creates)
    return _HEADER + body + _MULTI_HEADER


async def assert_connection_untouched(client: aiocoord.Client, log: Any, session_id: int) -> None:
    """Nothing reached the server: after another round trip (applied after anything
    sent before it), the client is still CONNECTED, never was SUSPENDED, same session."""
    await client.sync("/")
    assert await client.exists("/") is not None
    assert client.state is ConnectionState.CONNECTED
    assert log.states == []
    assert client.session_id == session_id


def refused(info: pytest.ExceptionInfo[DataTooLargeError], size: int, path: str | None) -> None:
    error = info.value
    assert error.request and error.size == size and error.limit == LIMIT
    assert error.path == path
    assert f"request{'' if path is None else f' for {path!r}'} of {size} bytes" in str(error)
    assert f"exceeds the server's limit of {LIMIT}" in str(error)
    assert not isinstance(error, aiocoord.ConnectionLossError)


async def test_largest_create_and_set_pass_and_one_byte_more_is_refused(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    assert coord.max_data_size == LIMIT
    log = state_log(coord)
    session = coord.session_id
    path = "/edge"
    fits = LIMIT - create_size(coord, path, 0)
    assert create_size(coord, path, fits) == LIMIT
    # The biggest create the client lets through is one the server accepts.
    await coord.create(path, b"\x01" * fits)
    data, stat = await coord.get(path)
    assert stat.data_length == fits and data == b"\x01" * fits

    # One byte more: data well under max_data_size, request one byte over it.
    with pytest.raises(DataTooLargeError) as info:
        await coord.create("/egde", bytes(fits + 1))
    refused(info, LIMIT + 1, "/egde")
    await assert_connection_untouched(coord, log, session)
    assert await coord.exists("/egde") is None

    # The same boundary for setData (a shorter record: more room for data).
    fits_set = LIMIT - set_size(coord, path, 0)
    assert fits_set > fits
    stat = await coord.set(path, b"\x02" * fits_set)
    assert stat.version == 1 and stat.data_length == fits_set
    with pytest.raises(DataTooLargeError) as info:
        await coord.set(path, bytes(fits_set + 1))
    refused(info, LIMIT + 1, path)
    await assert_connection_untouched(coord, log, session)
    data, stat = await coord.get(path)
    assert stat.version == 1 and data == b"\x02" * fits_set


async def test_long_path_with_data_of_max_data_size_is_refused_before_sending(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    log = state_log(coord)
    session = coord.session_id
    path = "/" + "long-name-" * 50
    with pytest.raises(DataTooLargeError) as info:
        await coord.create(path, bytes(LIMIT))
    refused(info, create_size(coord, path, LIMIT), path)
    # Data of max_data_size passes the data check but never fits a request.
    await coord.create(path, b"small")
    with pytest.raises(DataTooLargeError) as info:
        await coord.set(path, bytes(LIMIT))
    refused(info, set_size(coord, path, LIMIT), path)
    # Protected creates and the makers of parents are refused as well, not retried.
    with pytest.raises(DataTooLargeError):
        await coord.create(path + "/p-", bytes(LIMIT), protected=True, sequential=True)
    with pytest.raises(DataTooLargeError):
        await coord.create("/a/b" + path, bytes(LIMIT - 100), make_parents=True)
    # Data over the limit still gets the plain data message.
    with pytest.raises(DataTooLargeError) as info:
        await coord.create("/over", bytes(LIMIT + 1))
    assert not info.value.request and info.value.size == LIMIT + 1
    assert str(info.value) == f"data for '/over' is {LIMIT + 1} bytes, over the limit of {LIMIT}"
    await assert_connection_untouched(coord, log, session)
    assert (await coord.get(path))[0] == b"small"
    assert await coord.children(path) == []
    assert await coord.exists("/a") is None and await coord.exists("/over") is None


async def test_transaction_over_the_limit_is_refused_and_nothing_is_applied(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    log = state_log(coord)
    session = coord.session_id
    await coord.create("/tx", b"0")
    # Every operation is small enough alone; together they are not.
    txn = (
        coord.transaction()
        .create("/tx/a", bytes(400_000))
        .create("/tx/b", bytes(400_000))
        .set("/tx", bytes(400_000))
    )
    with pytest.raises(DataTooLargeError) as info:
        await txn.commit()
    assert info.value.request and info.value.path is None and info.value.size > LIMIT
    await assert_connection_untouched(coord, log, session)
    assert await coord.children("/tx") == []
    assert (await coord.get("/tx"))[0] == b"0"

    # Exactly at the limit the server takes it; one byte more, the client refuses it.
    first = 500_000
    base = multi_create_size(coord, [("/tx/c", first), ("/tx/d", 0)])
    last = LIMIT - base
    with pytest.raises(DataTooLargeError) as info:
        await (
            coord.transaction()
            .create("/tx/c", bytes(first))
            .create("/tx/d", bytes(last + 1))
            .commit()
        )
    refused(info, LIMIT + 1, None)
    await assert_connection_untouched(coord, log, session)
    assert await coord.children("/tx") == []
    results = await (
        coord.transaction().create("/tx/c", bytes(first)).create("/tx/d", bytes(last)).commit()
    )
    assert results == ["/tx/c", "/tx/d"]
    assert (await coord.exists("/tx/d")).data_length == last  # type: ignore[union-attr]


async def test_pipeline_with_one_oversize_request_sends_none_of_them(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    log = state_log(coord)
    session = coord.session_id
    pipeline = (
        coord.pipeline()
        .create("/p1", b"x")
        .set("/p1", bytes(LIMIT))  # passes the data check; the request is too large
        .create("/p2")
        .children("/")
    )
    with pytest.raises(DataTooLargeError) as info:
        await pipeline.execute()
    refused(info, set_size(coord, "/p1", LIMIT), "/p1")
    await assert_connection_untouched(coord, log, session)
    assert await coord.exists("/p1") is None and await coord.exists("/p2") is None


async def test_oversize_mutex_data_fails_fast_and_other_locks_are_not_lost(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    held = aiocoord.Mutex(coord, "/locks/a")
    assert await held.acquire()
    log = state_log(coord)
    session = coord.session_id
    lost = asyncio.create_task(held.wait_lost())
    try:
        for path in ("/locks/a", "/locks/b"):
            big = aiocoord.Mutex(coord, path, data=bytes(1024 * 1024 - 10))
            started = asyncio.get_running_loop().time()
            async with asyncio.timeout(10):
                with pytest.raises(DataTooLargeError) as info:
                    await big.acquire()
            assert asyncio.get_running_loop().time() - started < 5
            assert info.value.request and info.value.size > LIMIT
            assert not big.is_held
        await assert_connection_untouched(coord, log, session)
        await settle(coord)  # a loss, had there been one, would be reported by now
        assert not lost.done()
        assert held.is_held
        participants = await held.participants()
        assert len(participants) == 1
        assert await coord.exists("/locks/b") is None or await coord.children("/locks/b") == []
    finally:
        lost.cancel()
        await asyncio.gather(lost, return_exceptions=True)
        await held.release()


async def test_a_lower_max_data_size_set_while_connected_applies_at_once(
    coord: aiocoord.Client, state_log: Callable[[aiocoord.Client], Any]
) -> None:
    log = state_log(coord)
    session = coord.session_id
    coord.max_data_size = 1000
    try:
        fits = 1000 - create_size(coord, "/small", 0)
        await coord.create("/small", bytes(fits))
        with pytest.raises(DataTooLargeError) as info:
            await coord.create("/smoll", bytes(fits + 1))
        assert info.value.request and (info.value.size, info.value.limit) == (1001, 1000)
        with pytest.raises(DataTooLargeError) as info:
            await coord.transaction().create("/t1", bytes(900)).create("/t2").commit()
        assert info.value.request and info.value.path is None
    finally:
        coord.max_data_size = LIMIT
    await coord.create("/smoll", bytes(fits + 1))
    await assert_connection_untouched(coord, log, session)
