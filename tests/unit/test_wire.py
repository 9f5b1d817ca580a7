"""The aiozk seam: framing, reply decoding, error mapping (no server)."""

from __future__ import annotations

import struct

import pytest
from aiozk import protocol as zp
from aiozk.protocol.acl import ACL as ZkACL
from aiozk.protocol.acl import ID as ZkID
from aiozk.protocol.stat import Stat as ZkStat

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
        (-12, SessionExpiredError),  # UNKNOWNSESSION: the session was just closed
    ],
)
def test_error_codes_map_to_classes(code: int, cls: type[Exception]) -> None:
    assert isinstance(error_for_code(code, "/p"), cls)


def test_unknown_error_code_keeps_its_number() -> None:
    error = error_for_code(-999, "/p")
    assert isinstance(error, ZooKeeperError) and error.code == -999 and "-999" in str(error)


# --- the hand-written hot path must match aiozk's records byte for byte ---------


OPEN = [ACL(Perm.ALL, "world", "anyone")]
DIGEST = [ACL(Perm.READ | Perm.WRITE, "digest", "u:abc="), ACL(Perm.ADMIN, "auth", "")]


def _zk_acl(acls: list[ACL]) -> list[ZkACL]:
    return [ZkACL(perms=int(a.perms), id=ZkID(scheme=a.scheme, id=a.id)) for a in acls]


@pytest.mark.parametrize("path", ["/a", "/ünï/cødé", "/x/" + "y" * 300])
@pytest.mark.parametrize("data", [b"", b"\x00\x01", b"z" * 5000])
def test_data_requests_match_aiozk(path: str, data: bytes) -> None:
    pairs = [
        (_zk.set_data_op(path, path, data, 7), zp.SetDataRequest(path=path, data=data, version=7)),
        (_zk.delete_op(path, path, -1), zp.DeleteRequest(path=path, version=-1)),
        (_zk.check_op(path, path, 3), zp.CheckVersionRequest(path=path, version=3)),
        (_zk.sync_op(path, path), zp.SyncRequest(path=path)),
    ]
    for watch in (False, True):
        pairs += [
            (_zk.get_data_op(path, path, watch), zp.GetDataRequest(path=path, watch=watch)),
            (_zk.exists_op(path, path, watch), zp.ExistsRequest(path=path, watch=watch)),
            (_zk.children_op(path, path, watch), zp.GetChildren2Request(path=path, watch=watch)),
        ]
    for acls in (OPEN, DIGEST):
        for flags, (eph, seq) in enumerate(
            [(False, False), (True, False), (False, True), (True, True)]
        ):
            ours = _zk.create_op(
                path, path, data, acls, ephemeral=eph, sequential=seq, container=False, ttl_ms=None
            )
            theirs = zp.Create2Request(path=path, data=data, acl=_zk_acl(acls), flags=flags)
            pairs.append((ours, theirs))
    for ours, theirs in pairs:
        assert ours.frame(42)[4:] == theirs.serialize(42), theirs


def test_multi_request_matches_aiozk() -> None:
    ours = _zk.multi_op(
        [
            _zk.create_op(
                "/a",
                "/a",
                b"d",
                OPEN,
                ephemeral=True,
                sequential=False,
                container=False,
                ttl_ms=None,
            ),
            _zk.set_data_op("/b", "/b", b"e", 2),
            _zk.check_op("/c", "/c", 1),
            _zk.delete_op("/d", "/d", -1),
        ]
    )
    theirs = zp.TransactionRequest()
    theirs.add(zp.Create2Request(path="/a", data=b"d", acl=_zk_acl(OPEN), flags=1))
    theirs.add(zp.SetDataRequest(path="/b", data=b"e", version=2))
    theirs.add(zp.CheckVersionRequest(path="/c", version=1))
    theirs.add(zp.DeleteRequest(path="/d", version=-1))
    assert ours.frame(9)[4:] == theirs.serialize(9)


def _render(part: object) -> bytes:
    fmt, values = part.render()  # type: ignore[attr-defined]
    return struct.pack("!" + fmt, *values)


ZK_STAT = ZkStat(
    created_zxid=1,
    last_modified_zxid=2,
    created=3,
    modified=4,
    version=5,
    child_version=6,
    acl_version=7,
    ephemeral_owner=8,
    data_length=9,
    num_children=10,
    last_modified_children=11,
)
STAT = Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)


@pytest.mark.parametrize("data", [b"", b"v" * 1000, None])
def test_replies_decode_like_aiozk(data: bytes | None) -> None:
    get = _render(zp.GetDataResponse(data=data, stat=ZK_STAT))
    assert _zk.get_data_op("/a", "/a", False).decode(get) == (data or b"", STAT)
    assert _zk.exists_op("/a", "/a", False).decode(_render(zp.ExistsResponse(stat=ZK_STAT))) == STAT
    created = _render(zp.Create2Response(path="/ü/n-0000000001", stat=ZK_STAT))
    op = _zk.create_op(
        "/a", "/a", b"", OPEN, ephemeral=False, sequential=False, container=False, ttl_ms=None
    )
    assert op.decode(created) == ("/ü/n-0000000001", STAT)
    kids = _render(zp.GetChildren2Response(children=["a", "bé", "c" * 200], stat=ZK_STAT))
    assert _zk.children_op("/a", "/a", False).decode(kids) == (["a", "bé", "c" * 200], STAT)
    assert _zk.children_op("/a", "/a", False).decode(
        _render(zp.GetChildren2Response(children=[], stat=ZK_STAT))
    ) == ([], STAT)
