"""The aiozk seam: framing, reply decoding, error mapping (no server)."""

from __future__ import annotations

import struct

import pytest

from aiocoord import (
    ACL,
    BadVersionError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    Perm,
    SessionExpiredError,
    Stat,
    ZooKeeperError,
)
from aiocoord._exceptions import error_for_code
from aiocoord._session import _zk


def test_request_frames_carry_length_xid_and_opcode() -> None:
    frame = _zk.get_data_op("/a", "/ns/a", True).frame(7)
    (size, xid, opcode) = struct.unpack_from("!iii", frame)
    assert size == len(frame) - 4 and xid == 7 and opcode == _zk.OP_GET_DATA
    # path (length-prefixed UTF-8) then the watch flag
    assert frame[12:] == struct.pack("!i", 5) + b"/ns/a" + b"\x01"


def test_ttl_and_container_creates_use_their_own_opcodes() -> None:
    acl = [ACL(Perm.ALL, "world", "anyone")]
    ttl = _zk.create_op(
        "/t", "/t", b"", acl, ephemeral=False, sequential=True, container=False, ttl_ms=1500
    ).frame(1)
    assert struct.unpack_from("!i", ttl, 8)[0] == _zk.OP_CREATE_TTL
    flags, ttl_ms = struct.unpack_from("!iq", ttl, len(ttl) - 12)
    assert (flags, ttl_ms) == (_zk.MODE_TTL_SEQUENTIAL, 1500)
    box = _zk.create_op(
        "/b", "/b", b"", acl, ephemeral=False, sequential=False, container=True, ttl_ms=None
    ).frame(1)
    assert struct.unpack_from("!i", box, 8)[0] == _zk.OP_CREATE_CONTAINER
    assert struct.unpack_from("!i", box, len(box) - 4)[0] == _zk.MODE_CONTAINER


def _stat_bytes(version: int) -> bytes:
    return struct.pack("!qqqqiiiqiiq", 1, 2, 3, 4, version, 5, 6, 0, 7, 8, 9)


def test_stat_decodes_into_named_fields() -> None:
    stat = _zk.set_data_op("/a", "/a", b"", -1).decode(_stat_bytes(3))
    assert stat == Stat(1, 2, 3, 4, 3, 5, 6, 0, 7, 8, 9)
    assert not stat.is_ephemeral


def _header(op_type: int, done: bool, err: int) -> bytes:
    return struct.pack("!i?i", op_type, done, err)


def test_multi_reply_decodes_each_result() -> None:
    ops = [
        _zk.create_op(
            "/a", "/a", b"", [], ephemeral=False, sequential=False, container=False, ttl_ms=None
        ),
        _zk.set_data_op("/a", "/a", b"", -1),
        _zk.check_op("/a", "/a", 1),
    ]
    body = (
        _header(_zk.OP_CREATE2, False, 0)
        + struct.pack("!i", 2)
        + b"/a"
        + _stat_bytes(0)
        + _header(_zk.OP_SET_DATA, False, 0)
        + _stat_bytes(1)
        + _header(_zk.OP_CHECK, False, 0)
        + _header(-1, True, -1)
    )
    results = _zk.multi_op(ops).decode(body)
    assert results[0] == ("/a", Stat(1, 2, 3, 4, 0, 5, 6, 0, 7, 8, 9))
    assert isinstance(results[1], Stat) and results[1].version == 1
    assert results[2] is None


def test_failed_multi_raises_the_real_cause_with_its_index() -> None:
    ops = [_zk.delete_op(p, p, -1) for p in ("/a", "/b", "/c")]
    body = (
        _header(-1, False, 0)
        + struct.pack("!i", 0)  # rolled back
        + _header(-1, False, 0)
        + struct.pack("!i", BadVersionError.code)
        + _header(-1, False, 0)
        + struct.pack("!i", -2)  # never tried
        + _header(-1, True, -1)
    )
    with pytest.raises(BadVersionError) as info:
        _zk.multi_op(ops).decode(body)
    assert info.value.op_index == 1 and info.value.path == "/b"


def test_connect_reply_reads_the_read_only_flag() -> None:
    body = struct.pack("!iiqi", 0, 4000, 0x1234, 16) + b"p" * 16
    assert _zk.parse_connect_reply(body + b"\x01").read_only
    reply = _zk.parse_connect_reply(body)
    assert (reply.timeout_ms, reply.session_id, reply.password, reply.read_only) == (
        4000,
        0x1234,
        b"p" * 16,
        False,
    )


def test_set_watches_splits_large_sets() -> None:
    paths = [f"/node-{i:06d}" for i in range(30_000)]
    frames = _zk.set_watches_frames(5, paths, [], [], max_bytes=64 * 1024)
    assert len(frames) > 1
    assert all(len(f) < 70 * 1024 for f in frames)
    assert all(struct.unpack_from("!i", f, 4)[0] == _zk.XID_SET_WATCHES for f in frames)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (-101, NoNodeError),
        (-110, NodeExistsError),
        (-103, BadVersionError),
        (-4, ConnectionLossError),
        (-112, SessionExpiredError),
    ],
)
def test_error_codes_map_to_classes(code: int, cls: type[Exception]) -> None:
    assert isinstance(error_for_code(code, "/p"), cls)


def test_unknown_error_code_keeps_its_number() -> None:
    error = error_for_code(-999, "/p")
    assert isinstance(error, ZooKeeperError) and error.code == -999 and "-999" in str(error)
