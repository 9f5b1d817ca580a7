"""The seam to aiozk: request records, reply decoding, protocol extensions.

aiozk supplies ZooKeeper's jute records (``aiozk.protocol``). This module turns
them into typed requests (:class:`Op`) whose replies decode straight into
aiocoord's types, and adds the records aiozk lacks: TTL and container creates,
``SetWatches2`` and ``addWatch``. No other module imports aiozk.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiozk import protocol as zp
from aiozk.protocol.acl import ACL as _ZkACL
from aiozk.protocol.acl import ID as _ZkID
from aiozk.protocol.primitives import Int, Long, UString, Vector
from aiozk.protocol.request import Request

from .._exceptions import error_for_code
from .._types import ACL, EventType, Perm, Stat

# --- opcodes and special xids (ZooKeeper's ZooDefs.OpCode) -----------------

OP_CREATE: Final = 1
OP_DELETE: Final = 2
OP_EXISTS: Final = 3
OP_GET_DATA: Final = 4
OP_SET_DATA: Final = 5
OP_GET_ACL: Final = 6
OP_SET_ACL: Final = 7
OP_SYNC: Final = 9
OP_PING: Final = 11
OP_GET_CHILDREN2: Final = 12
OP_CHECK: Final = 13
OP_MULTI: Final = 14
OP_CREATE2: Final = 15
OP_CREATE_CONTAINER: Final = 19
OP_CREATE_TTL: Final = 21
OP_AUTH: Final = 100
OP_SASL: Final = 102
OP_SET_WATCHES: Final = 101
OP_SET_WATCHES2: Final = 105
OP_ADD_WATCH: Final = 106
OP_REMOVE_WATCHES: Final = 18
OP_CLOSE: Final = -11

_OPERATION_NAMES: Final = {
    OP_CREATE: "create",
    OP_DELETE: "delete",
    OP_EXISTS: "exists",
    OP_GET_DATA: "get_data",
    OP_SET_DATA: "set_data",
    OP_GET_ACL: "get_acl",
    OP_SET_ACL: "set_acl",
    OP_SYNC: "sync",
    OP_PING: "ping",
    OP_GET_CHILDREN2: "get_children",
    OP_CHECK: "check",
    OP_MULTI: "multi",
    OP_CREATE2: "create",
    OP_CREATE_CONTAINER: "create",
    OP_CREATE_TTL: "create",
    OP_SASL: "sasl",
    OP_SET_WATCHES: "set_watches",
    OP_SET_WATCHES2: "set_watches",
    OP_ADD_WATCH: "add_watch",
    OP_REMOVE_WATCHES: "remove_watches",
    OP_CLOSE: "close_session",
}


def operation_name(opcode: int) -> str:
    """A request's name for telemetry (``aiocoord.operation``): ZooKeeper's, in snake case."""
    return _OPERATION_NAMES.get(opcode, f"op_{opcode}")


XID_WATCH_EVENT: Final = -1
XID_PING: Final = -2
XID_AUTH: Final = -4
XID_SET_WATCHES: Final = -8

# Create modes (ZooKeeper's CreateMode flag values).
MODE_PERSISTENT: Final = 0
MODE_EPHEMERAL: Final = 1
MODE_SEQUENTIAL: Final = 2
MODE_CONTAINER: Final = 4
MODE_TTL: Final = 5
MODE_TTL_SEQUENTIAL: Final = 6

# addWatch modes.
ADD_WATCH_PERSISTENT: Final = 0
ADD_WATCH_PERSISTENT_RECURSIVE: Final = 1

NO_NODE_CODE: Final = -101

JUTE_MAXBUFFER: Final = 1024 * 1024 - 1
"""ZooKeeper's default ``jute.maxbuffer``: the largest request it accepts (see
:meth:`Connection.submit <aiocoord._session._connection.Connection.submit>`)."""

_INT = struct.Struct("!i")
_SIZE = _INT  # every frame starts with its length
_REPLY_HEADER = struct.Struct("!iqi")
_EVENT_HEAD = struct.Struct("!iii")
_MULTI_HEADER = struct.Struct("!i?i")
_STAT = struct.Struct("!qqqqiiiqiiq")

REPLY_HEADER = _REPLY_HEADER
SIZE = _SIZE


# --- records aiozk lacks ----------------------------------------------------


class _SetWatches2Request(Request):  # type: ignore[misc]
    opcode = OP_SET_WATCHES2
    parts = (
        ("relative_zxid", Long),
        ("data_watches", Vector.of(UString)),
        ("exist_watches", Vector.of(UString)),
        ("child_watches", Vector.of(UString)),
        ("persistent_watches", Vector.of(UString)),
        ("persistent_recursive_watches", Vector.of(UString)),
    )


class _AddWatchRequest(Request):  # type: ignore[misc]
    opcode = OP_ADD_WATCH
    parts = (("path", UString), ("mode", Int))


# --- typed requests ---------------------------------------------------------
#
# The requests every recipe sends in bulk (create, get, set, delete, exists,
# children) are encoded and decoded here directly with precompiled structs:
# aiozk's generic record machinery cost more CPU than everything else on a
# request's path. tests/unit/test_wire.py checks these bytes against aiozk's
# records, which remain the reference and serve the rarer requests.

_HEAD = struct.Struct("!iii")  # frame length, xid, opcode
_Q = struct.Struct("!q")


@dataclass(slots=True)
class Op:
    """One request ready to send: its body, and how to read its reply body."""

    opcode: int
    payload: bytes
    """The request record after the xid and opcode."""
    path: str | None
    """The caller's path (namespace removed), for error messages."""
    decode: Callable[[bytes], Any]

    def frame(self, xid: int) -> bytes:
        return _HEAD.pack(len(self.payload) + 8, xid, self.opcode) + self.payload


def _record_payload(record: Any) -> bytes:
    body: bytes = record.serialize(0)
    return body[8:]  # aiozk writes xid and opcode first


@functools.lru_cache(maxsize=1024)
def _string(value: str) -> bytes:
    # Cached: a recipe sends the same few paths over and over (a counter's
    # queue, its state, a lock's parent), and a hit costs no Python call.
    raw = value.encode()
    return _INT.pack(len(raw)) + raw


def _buffer(value: bytes) -> bytes:
    return _INT.pack(len(value)) + value


_acl_cache: dict[tuple[ACL, ...], bytes] = {}


def _acls(acls: Sequence[ACL]) -> bytes:
    key = tuple(acls)
    cached = _acl_cache.get(key)
    if cached is None:
        parts = [_INT.pack(len(key))]
        for acl in key:
            parts += [_INT.pack(int(acl.perms)), _string(acl.scheme), _string(acl.id)]
        cached = b"".join(parts)
        if len(_acl_cache) < 256:
            _acl_cache[key] = cached
    return cached


def _stat_from_part(part: Any) -> Stat:
    return Stat(
        part.created_zxid,
        part.last_modified_zxid,
        part.created,
        part.modified,
        part.version,
        part.child_version,
        part.acl_version,
        part.ephemeral_owner,
        part.data_length,
        part.num_children,
        part.last_modified_children,
    )


def _zk_acls(acls: Sequence[ACL]) -> list[Any]:
    return [_ZkACL(perms=int(a.perms), id=_ZkID(scheme=a.scheme, id=a.id)) for a in acls]


def _read_string(body: bytes, offset: int) -> tuple[str, int]:
    (size,) = _INT.unpack_from(body, offset)
    offset += 4
    return body[offset : offset + size].decode(), offset + size


def _read_stat(body: bytes, offset: int) -> tuple[Stat, int]:
    return _make_stat(_STAT.unpack_from(body, offset)), offset + _STAT.size


# tuple.__new__ straight, not Stat._make: a Python call less for every reply
# (the struct always unpacks the eleven fields).
_make_stat = functools.partial(tuple.__new__, Stat)


def _none(_body: bytes) -> None:
    return None


def _decode_stat(body: bytes) -> Stat:
    return _make_stat(_STAT.unpack_from(body, 0))


def _decode_create2(body: bytes) -> tuple[str, Stat]:
    path, offset = _read_string(body, 0)
    return path, _make_stat(_STAT.unpack_from(body, offset))


def _decode_get_data(body: bytes) -> tuple[bytes, Stat]:
    (size,) = _INT.unpack_from(body, 0)
    if size < 0:
        return b"", _make_stat(_STAT.unpack_from(body, 4))
    return body[4 : 4 + size], _make_stat(_STAT.unpack_from(body, 4 + size))


def _decode_children2(body: bytes) -> tuple[list[str], Stat]:
    unpack = _INT.unpack_from  # a lock waiter decodes the whole queue on every look
    (count,) = unpack(body, 0)
    offset = 4
    names: list[str] = []
    append = names.append
    for _ in range(max(count, 0)):
        (size,) = unpack(body, offset)
        start = offset + 4
        offset = start + size
        append(body[start:offset].decode())
    return names, _make_stat(_STAT.unpack_from(body, offset))


def _decode_sync(body: bytes) -> str:
    return _read_string(body, 0)[0]


def _decode_get_acl(body: bytes) -> tuple[list[ACL], Stat]:
    reply = zp.GetACLResponse.deserialize(body)
    acls = [ACL(Perm(a.perms), a.id.scheme, a.id.id) for a in reply.acl]
    return acls, _stat_from_part(reply.stat)


def create_op(
    user_path: str,
    server_path: str,
    data: bytes,
    acls: Sequence[ACL],
    *,
    ephemeral: bool,
    sequential: bool,
    container: bool,
    ttl_ms: int | None,
) -> Op:
    """A create that answers with the new path and its Stat (``create2`` and kin)."""
    body = _string(server_path) + _buffer(data) + _acls(acls)
    if container:
        return Op(OP_CREATE_CONTAINER, body + _INT.pack(MODE_CONTAINER), user_path, _decode_create2)
    if ttl_ms is not None:
        mode = MODE_TTL_SEQUENTIAL if sequential else MODE_TTL
        payload = body + _INT.pack(mode) + _Q.pack(ttl_ms)
        return Op(OP_CREATE_TTL, payload, user_path, _decode_create2)
    flags = (MODE_EPHEMERAL if ephemeral else 0) | (MODE_SEQUENTIAL if sequential else 0)
    return Op(OP_CREATE2, body + _INT.pack(flags), user_path, _decode_create2)


def delete_op(user_path: str, server_path: str, version: int) -> Op:
    return Op(OP_DELETE, _string(server_path) + _INT.pack(version), user_path, _none)


_FLAG = (b"\x00", b"\x01")


def exists_op(user_path: str, server_path: str, watch: bool) -> Op:
    return Op(OP_EXISTS, _string(server_path) + _FLAG[watch], user_path, _decode_stat)


def get_data_op(user_path: str, server_path: str, watch: bool) -> Op:
    return Op(OP_GET_DATA, _string(server_path) + _FLAG[watch], user_path, _decode_get_data)


def set_data_op(user_path: str, server_path: str, data: bytes, version: int) -> Op:
    payload = _string(server_path) + _buffer(data) + _INT.pack(version)
    return Op(OP_SET_DATA, payload, user_path, _decode_stat)


def children_op(user_path: str, server_path: str, watch: bool) -> Op:
    payload = _string(server_path) + _FLAG[watch]
    return Op(OP_GET_CHILDREN2, payload, user_path, _decode_children2)


def sync_op(user_path: str, server_path: str) -> Op:
    return Op(OP_SYNC, _string(server_path), user_path, _decode_sync)


def check_op(user_path: str, server_path: str, version: int) -> Op:
    return Op(OP_CHECK, _string(server_path) + _INT.pack(version), user_path, _none)


def get_acl_op(user_path: str, server_path: str) -> Op:
    record = zp.GetACLRequest(path=server_path)
    return Op(OP_GET_ACL, _record_payload(record), user_path, _decode_get_acl)


def set_acl_op(user_path: str, server_path: str, acls: Sequence[ACL], version: int) -> Op:
    record = zp.SetACLRequest(path=server_path, acl=_zk_acls(acls), version=version)
    return Op(OP_SET_ACL, _record_payload(record), user_path, _decode_stat)


def close_op() -> Op:
    return Op(OP_CLOSE, b"", None, _none)


def add_watch_op(user_path: str, server_path: str, recursive: bool) -> Op:
    mode = ADD_WATCH_PERSISTENT_RECURSIVE if recursive else ADD_WATCH_PERSISTENT
    record = _AddWatchRequest(path=server_path, mode=mode)
    return Op(OP_ADD_WATCH, _record_payload(record), user_path, _none)


WATCHER_TYPE_ANY: Final = 3
WATCHER_TYPE_PERSISTENT: Final = 4
"""Servers before 3.9 refuse this type (a marshalling error): only ANY removes there."""
WATCHER_TYPE_PERSISTENT_RECURSIVE: Final = 5


def remove_watches_op(user_path: str, server_path: str, watcher_type: int) -> Op:
    """Remove this connection's watches of ``watcher_type`` on a path."""
    payload = _string(server_path) + _INT.pack(watcher_type)
    return Op(OP_REMOVE_WATCHES, payload, user_path, _none)


# --- multi ------------------------------------------------------------------

MultiResult = str | tuple[str, Stat] | Stat | None


def multi_op(ops: Sequence[Op]) -> Op:
    """A transaction; its reply decodes to per-operation results or raises.

    A failed transaction raises the first real error (its ``op_index`` set);
    the other operations report "rolled back" or "runtime inconsistency".
    """
    parts = []
    for op in ops:
        parts += [_MULTI_HEADER.pack(op.opcode, False, -1), op.payload]
    parts.append(_MULTI_HEADER.pack(-1, True, -1))
    paths = [op.path for op in ops]

    def decode(body: bytes) -> list[MultiResult]:
        results: list[MultiResult] = []
        failure: Exception | None = None
        offset = 0
        index = 0
        while True:
            op_type, done, _err = _MULTI_HEADER.unpack_from(body, offset)
            offset += _MULTI_HEADER.size
            if done:
                break
            if op_type == -1:
                (code,) = _INT.unpack_from(body, offset)
                offset += 4
                # 0 marks an operation rolled back, -2 one never tried: both are
                # consequences. The real cause is the one other code.
                if code not in (0, -2) and failure is None:
                    failure = error_for_code(code, paths[index], op_index=index)
                results.append(None)
            elif op_type == OP_CREATE:
                path, offset = _read_string(body, offset)
                results.append(path)
            elif op_type in (OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL):
                path, offset = _read_string(body, offset)
                stat, offset = _read_stat(body, offset)
                results.append((path, stat))
            elif op_type == OP_SET_DATA:
                stat, offset = _read_stat(body, offset)
                results.append(stat)
            else:  # delete, check: no body
                results.append(None)
            index += 1
        if failure is not None:
            raise failure
        return results

    return Op(OP_MULTI, b"".join(parts), None, decode)


# --- session records ----------------------------------------------------------


def connect_frame(
    last_zxid: int, timeout_ms: int, session_id: int, password: bytes, read_only: bool
) -> bytes:
    record = zp.ConnectRequest(
        protocol_version=0,
        last_seen_zxid=last_zxid,
        timeout=timeout_ms,
        session_id=session_id,
        password=password,
        read_only=read_only,
    )
    body: bytes = record.serialize()
    return _SIZE.pack(len(body)) + body


@dataclass(frozen=True, slots=True)
class ConnectReply:
    timeout_ms: int
    session_id: int
    password: bytes
    read_only: bool


def parse_connect_reply(body: bytes) -> ConnectReply:
    reply, offset = zp.ConnectResponse.parse(body, 0)
    # Servers since 3.4 append a read-only flag that aiozk's record omits.
    read_only = len(body) > offset and body[offset] != 0
    return ConnectReply(reply.timeout, reply.session_id, reply.password or b"", read_only)


def ping_frame() -> bytes:
    body: bytes = zp.PingRequest().serialize(XID_PING)
    return _SIZE.pack(len(body)) + body


def _decode_sasl(body: bytes) -> bytes:
    # SetSASLResponse{token}: a buffer, -1 long for a null token.
    (size,) = _INT.unpack_from(body, 0)
    return b"" if size < 0 else body[4 : 4 + size]


def sasl_op(token: bytes) -> Op:
    """GetSASLRequest{token} (opcode 102): one SASL token; the reply is the server's."""
    return Op(OP_SASL, _buffer(token), None, _decode_sasl)


def auth_frame(scheme: str, credential: bytes) -> bytes:
    body: bytes = zp.AuthRequest(type=0, scheme=scheme, auth=credential).serialize(XID_AUTH)
    return _SIZE.pack(len(body)) + body


def set_watches_frames(
    relative_zxid: int,
    data: Sequence[str],
    exist: Sequence[str],
    child: Sequence[str],
    persistent: Sequence[str] = (),
    recursive: Sequence[str] = (),
    *,
    max_bytes: int = 128 * 1024,
) -> list[bytes]:
    """SetWatches records re-arming the given paths, split to stay under ``max_bytes``.

    The server re-registers each watch and fires it at once when the node
    changed after ``relative_zxid``: nothing that happened during the outage
    is missed. ``SetWatches2`` is used only when persistent watches exist, so
    servers before 3.6 keep working.
    """
    groups: list[list[list[str]]] = []
    current: list[list[str]] = [[], [], [], [], []]
    size = 0
    for kind, paths in enumerate((data, exist, child, persistent, recursive)):
        for path in paths:
            cost = len(path.encode()) + 4
            if size + cost > max_bytes and size:
                groups.append(current)
                current = [[], [], [], [], []]
                size = 0
            current[kind].append(path)
            size += cost
    if size:
        groups.append(current)
    frames = []
    for d, e, c, p, r in groups:
        if p or r:
            record: Any = _SetWatches2Request(
                relative_zxid=relative_zxid,
                data_watches=d,
                exist_watches=e,
                child_watches=c,
                persistent_watches=p,
                persistent_recursive_watches=r,
            )
        else:
            record = zp.SetWatchesRequest(
                relative_zxid=relative_zxid, data_watches=d, exist_watches=e, child_watches=c
            )
        body: bytes = record.serialize(XID_SET_WATCHES)
        frames.append(_SIZE.pack(len(body)) + body)
    return frames


def parse_event(body: bytes, offset: int) -> tuple[EventType | None, int, str]:
    """(event type or None for a session event, keeper state, server path)."""
    event_type, state, size = _EVENT_HEAD.unpack_from(body, offset)
    start = offset + _EVENT_HEAD.size
    path = body[start : start + size].decode() if size > 0 else ""
    try:
        kind: EventType | None = EventType(event_type)
    except ValueError:
        kind = None
    return kind, state, path
