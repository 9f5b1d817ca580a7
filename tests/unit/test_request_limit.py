"""The request size check at the connection, without a server."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

import aiocoord
from aiocoord import ACL, DataTooLargeError, Perm
from aiocoord._session import _zk
from aiocoord._session._connection import Connection
from aiocoord._session._retry import is_retryable

ACLS = [ACL(Perm.ALL, "world", "anyone")]


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def open_fake(limit: int) -> tuple[Connection, RecordingTransport]:
    conn = Connection(lambda frame: None, lambda conn: None, max_request_size=limit)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def create(path: str, data_len: int) -> _zk.Op:
    return _zk.create_op(
        path,
        path,
        bytes(data_len),
        ACLS,
        ephemeral=False,
        sequential=False,
        container=False,
        ttl_ms=None,
    )


def sized_create(path: str, prefix_value: int) -> _zk.Op:
    """A create whose frame's length prefix says exactly ``prefix_value``."""
    overhead = len(create(path, 0).frame(1)) - 4
    op = create(path, prefix_value - overhead)
    assert struct.unpack_from("!i", op.frame(1))[0] == prefix_value
    return op


async def test_a_request_at_the_limit_is_sent_one_byte_more_is_refused_unsent() -> None:
    conn, transport = open_fake(5000)
    with pytest.raises(DataTooLargeError) as info:
        conn.submit(sized_create("/big", 5001))
    error = info.value
    assert (error.path, error.size, error.limit, error.request) == ("/big", 5001, 5000, True)
    assert str(error).startswith("request for '/big' of 5001 bytes exceeds the server's limit")
    assert transport.written == [] and conn.in_flight == 0
    future = conn.submit(sized_create("/fits", 5000))
    assert conn.in_flight == 1 and len(transport.written) == 1
    frame = transport.written[0]
    (size, xid) = struct.unpack_from("!ii", frame)
    assert size == 5000 == len(frame) - 4
    assert xid == 1  # the refused request took no xid
    future.cancel()
    conn.close()


async def test_a_pipeline_with_one_request_too_large_sends_none() -> None:
    conn, transport = open_fake(5000)
    ops = [create("/a", 10), sized_create("/b", 5001), create("/c", 10)]
    with pytest.raises(DataTooLargeError) as info:
        conn.submit_all(ops)
    assert info.value.path == "/b" and info.value.size == 5001
    assert transport.written == [] and conn.in_flight == 0
    futures = conn.submit_all([create("/a", 10), sized_create("/b", 5000)])
    assert len(futures) == 2 and conn.in_flight == 2
    assert struct.unpack_from("!ii", transport.written[0]) == (
        len(create("/a", 10).frame(1)) - 4,
        1,
    )
    for future in futures:
        future.cancel()
    conn.close()


async def test_a_transaction_is_judged_as_one_request() -> None:
    conn, transport = open_fake(5000)
    ops = [create("/a", 2000), create("/b", 2000), create("/c", 2000)]
    assert all(len(op.payload) + 8 <= 5000 for op in ops)
    with pytest.raises(DataTooLargeError) as info:
        conn.submit(_zk.multi_op(ops))
    assert info.value.path is None and info.value.size > 5000
    assert str(info.value).startswith(f"request of {info.value.size} bytes exceeds")
    assert transport.written == [] and conn.in_flight == 0


async def test_the_default_limit_is_the_servers_default_jute_maxbuffer(
    client: aiocoord.Client,
) -> None:
    conn = Connection(lambda frame: None, lambda conn: None)
    transport = RecordingTransport()
    conn.connection_made(transport)
    assert conn.max_request_size == 1024 * 1024 - 1 == _zk.JUTE_MAXBUFFER
    with pytest.raises(DataTooLargeError):
        conn.submit(sized_create("/big", 1024 * 1024))
    conn.submit(sized_create("/fits", 1024 * 1024 - 1)).cancel()
    assert len(transport.written[0]) == 1024 * 1024 + 3  # the 4-byte prefix, then the rest
    conn.close()
    assert client.max_data_size == 1024 * 1024 - 1
    client.max_data_size = 10  # not connected: applies to the next connection
    assert client.max_data_size == 10
    with pytest.raises(DataTooLargeError) as info:
        await client.set("/a", b"x" * 11)
    assert not info.value.request


def test_the_data_message_is_unchanged() -> None:
    error = DataTooLargeError("/a", 11, 10)
    assert str(error) == "data for '/a' is 11 bytes, over the limit of 10"
    assert (error.path, error.size, error.limit, error.request) == ("/a", 11, 10, False)
    assert isinstance(error, ValueError) and isinstance(error, aiocoord.CoordinationError)
    assert not isinstance(error, aiocoord.SessionError)  # never retried
    assert not is_retryable(error)


def test_set_watches_frames_fit_a_small_limit() -> None:
    limit = 2000
    paths = [f"/watched/{i:04d}" for i in range(600)]
    frames = _zk.set_watches_frames(
        123, paths, paths[:100], paths[:50], paths[:10], paths[:5], max_bytes=limit - 64
    )
    assert len(frames) > 1
    for frame in frames:
        assert struct.unpack_from("!i", frame)[0] <= limit
