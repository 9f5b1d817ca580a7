"""Connection fed bytes directly (no server, no socket): framing, reply matching,
events, errors and connection loss.

The tests play the server: a FakeTransport records what the connection writes,
and ``data_received`` gets hand-built frames, cut wherever a test likes. Frames
are encoded here from the protocol (not with the module's own encoders), so the
tests check the code against ZooKeeper's wire format.
(Refusing requests too large to send is covered by test_request_limit.py.)
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

import pytest

import aiocoord
from aiocoord import ConnectionLossError, SessionExpiredError, ZooKeeperError
from aiocoord._session import _zk
from aiocoord._session._connection import Connection, replies

# ZooKeeper's special xids.
XID_WATCH_EVENT = -1
XID_PING = -2
XID_AUTH = -4
XID_SET_WATCHES = -8

OP_GET_DATA = 4
OP_PING = 11

REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, err
STAT = struct.Struct("!qqqqiiiqiiq")
STAT_VALUES = (11, 12, 1000, 2000, 3, 0, 0, 0, 5, 0, 11)


# --- frames, as a server would send them ----------------------------------------


def framed(body: bytes) -> bytes:
    return struct.pack("!i", len(body)) + body


def reply(xid: int, body: bytes = b"", *, err: int = 0, zxid: int = 0) -> bytes:
    return framed(REPLY_HEADER.pack(xid, zxid, err) + body)


def connect_reply(session_id: int = 0x1234, timeout_ms: int = 10_000) -> bytes:
    password = bytes(range(16))
    body = struct.pack("!iiqi", 0, timeout_ms, session_id, len(password)) + password
    return framed(body + b"\x00")  # the read-only flag


def get_data_reply(xid: int, data: bytes, *, zxid: int = 0) -> bytes:
    return reply(xid, struct.pack("!i", len(data)) + data + STAT.pack(*STAT_VALUES), zxid=zxid)


def watch_event(event_type: int, path: str, *, state: int = 3) -> bytes:
    raw = path.encode()
    return reply(XID_WATCH_EVENT, struct.pack("!iii", event_type, state, len(raw)) + raw, zxid=-1)


def echo(path: str = "/p") -> _zk.Op:
    """A request whose reply decodes to its raw body."""
    return _zk.Op(OP_GET_DATA, struct.pack("!i", len(path)) + path.encode() + b"\x00", path, bytes)


def get_data(path: str) -> _zk.Op:
    return _zk.get_data_op(path, "/ns" + path, False)


def sent(frame: bytes) -> tuple[int, int]:
    """(xid, opcode) of a request frame the connection wrote."""
    size, xid, opcode = struct.unpack_from("!iii", frame)
    assert size == len(frame) - 4
    return xid, opcode


# --- the fake side of the socket ------------------------------------------------


class FakeTransport(asyncio.Transport):
    """Records writes; closing or aborting reports the loss to the protocol on the
    next loop iteration, as asyncio's transports do."""

    def __init__(self, protocol: Connection) -> None:
        super().__init__()
        self._protocol = protocol
        self.writes: list[bytes] = []
        self.wrote = asyncio.Event()
        self.aborted = False
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.wrote.set()

    def is_closing(self) -> bool:
        return self.aborted or self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 2181) if name == "peername" else default

    def abort(self) -> None:
        self._lose()
        self.aborted = True

    def close(self) -> None:
        self._lose()
        self.closed = True

    def _lose(self) -> None:
        if not self.is_closing():
            asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    async def wait_writes(self, count: int) -> list[bytes]:
        while len(self.writes) < count:
            self.wrote.clear()
            await self.wrote.wait()
        return self.writes


async def next_iteration() -> None:
    """Return once the callbacks already scheduled have run (asyncio runs them first
    in, first out): a deterministic step, not a wait."""
    step = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(step.set_result, None)
    await step


class Peer:
    """A Connection on a FakeTransport, with its callbacks recorded."""

    def __init__(self, max_request_size: int = _zk.JUTE_MAXBUFFER) -> None:
        self.events: list[bytes] = []
        self.closed_calls: list[Connection] = []
        self.log: list[tuple[str, int]] = []  # ("event", type) and ("reply", err), in order
        self.conn = Connection(self._on_event, self.closed_calls.append, max_request_size)
        self.transport = FakeTransport(self.conn)
        self.conn.connection_made(self.transport)

    def _on_event(self, frame: bytes) -> None:
        self.events.append(frame)
        self.log.append(("event", struct.unpack_from("!i", frame, REPLY_HEADER.size)[0]))

    def hook(self, name: str) -> Callable[[int], None]:
        return lambda err: self.log.append((name, err))

    def handshake(self) -> asyncio.Future[Any]:
        return self.conn.send_connect(0, 10_000, 0, bytes(16), False)

    async def connected(self) -> Peer:
        handshake = self.handshake()
        self.conn.data_received(connect_reply())
        assert (await handshake).session_id == 0x1234
        # Start the test in a new loop iteration, so that its first request is
        # written at once (see test_requests_of_one_loop_iteration_...).
        await next_iteration()
        return self

    def feed(self, data: bytes) -> None:
        self.conn.data_received(data)


async def connected_peer(max_request_size: int = _zk.JUTE_MAXBUFFER) -> Peer:
    return await Peer(max_request_size).connected()


# --- framing ---------------------------------------------------------------------


def _scripted_stream() -> tuple[bytes, list[int]]:
    """A handshake reply, then three replies, a watch event and a ping reply, and
    the offset at which each of those six frames ends."""
    frames = [
        connect_reply(),
        get_data_reply(1, b"hello", zxid=40),
        watch_event(3, "/ns/watched"),
        reply(XID_PING, zxid=40),
        reply(2, err=-101, zxid=41),
        get_data_reply(3, b"x" * 300, zxid=42),
    ]
    ends = []
    total = 0
    for frame in frames:
        total += len(frame)
        ends.append(total)
    return b"".join(frames), ends


async def _feed_in_pieces(cuts: list[int]) -> None:
    """Feed the scripted stream cut at ``cuts``; after each piece exactly the frames
    that are complete have taken effect, and at the end each took effect once."""
    stream, ends = _scripted_stream()
    peer = Peer()
    handshake = peer.handshake()
    # Requests may be pipelined behind the handshake.
    first = peer.conn.submit(get_data("/a"), peer.hook("reply 1"))
    second = peer.conn.submit(get_data("/missing"), peer.hook("reply 2"))
    third = peer.conn.submit(get_data("/big"), peer.hook("reply 3"))
    futures = [handshake, first, second, third]
    start = 0
    for cut in [*cuts, len(stream)]:
        peer.feed(stream[start:cut])
        start = cut
        complete = sum(1 for end in ends if end <= cut)
        # Frames 0, 1, 4, 5 resolve the handshake and the three requests.
        expected_done = [complete > 0, complete > 1, complete > 4, complete > 5]
        assert [f.done() for f in futures] == expected_done, cut
        assert len(peer.events) == (1 if complete > 2 else 0), cut

    assert handshake.result().session_id == 0x1234
    assert first.result()[0] == b"hello" and first.result()[1].version == 3
    with pytest.raises(aiocoord.NoNodeError) as info:
        second.result()
    assert info.value.path == "/missing"
    assert third.result()[0] == b"x" * 300
    assert peer.events == [stream[ends[1] + 4 : ends[2]]]  # the frame, without its length
    assert peer.log == [("reply 1", 0), ("event", 3), ("reply 2", -101), ("reply 3", 0)]
    assert peer.conn.in_flight == 0 and peer.conn.last_zxid == 42
    assert not peer.transport.is_closing() and peer.closed_calls == []


async def test_a_stream_split_at_every_byte_is_parsed_once() -> None:
    stream, _ends = _scripted_stream()
    for cut in range(1, len(stream)):
        await _feed_in_pieces([cut])


async def test_a_stream_fed_one_byte_at_a_time_is_parsed_once() -> None:
    stream, _ends = _scripted_stream()
    await _feed_in_pieces(list(range(1, len(stream))))


async def test_a_stream_split_twice_inside_each_frame_is_parsed_once() -> None:
    _stream, ends = _scripted_stream()
    starts = [0, *ends[:-1]]
    for start, end in zip(starts, ends, strict=True):
        # Cut inside the length prefix, inside the header, and one byte before the end.
        await _feed_in_pieces([start + 2, start + 9, end - 1])


async def test_several_frames_in_one_chunk_are_dispatched_in_order() -> None:
    peer = await connected_peer()
    futures = [peer.conn.submit(echo(f"/{i}"), peer.hook(f"reply {i}")) for i in range(3)]
    peer.feed(
        reply(1, b"one")
        + watch_event(4, "/ns/parent")
        + reply(2, b"two")
        + reply(XID_PING)
        + watch_event(2, "/ns/gone")
        + reply(3, b"three")
    )
    assert peer.log == [
        ("reply 0", 0),
        ("event", 4),
        ("reply 1", 0),
        ("event", 2),
        ("reply 2", 0),
    ]
    assert [await f for f in futures] == [b"one", b"two", b"three"]


async def test_a_large_reply_arriving_in_pieces_is_assembled() -> None:
    """The request limit applies to what is sent: a reply may be larger (as
    getChildren on a node with very many children can be)."""
    peer = await connected_peer(max_request_size=1000)
    future = peer.conn.submit(echo())
    body = bytes(range(256)) * 4096  # 1 MiB
    stream = reply(1, body)
    for start in range(0, len(stream), 65536):
        assert not future.done()
        peer.feed(stream[start : start + 65536])
    assert await future == body
    assert not peer.transport.is_closing()


def _read_as_asyncio_does(peer: Peer, stream: bytes, chunk: int) -> None:
    """Feed ``stream`` through get_buffer/buffer_updated, at most ``chunk`` bytes
    a read, as asyncio's selector transport does for a BufferedProtocol."""
    offset = 0
    while offset < len(stream):
        room = peer.conn.get_buffer(-1)
        count = min(len(room), chunk, len(stream) - offset)
        assert count > 0
        room[:count] = stream[offset : offset + count]
        offset += count
        peer.conn.buffer_updated(count)  # ``room`` still alive, as in asyncio


@pytest.mark.parametrize("chunk", [7, 4096, 65536, 300_000])
async def test_replies_larger_than_the_read_buffer_are_assembled(chunk: int) -> None:
    """The receive buffer (64 KiB) grows for a larger frame, keeps frames read
    after it intact, and shrinks back once everything is parsed."""
    peer = await connected_peer()
    sizes = [10, 200_000, 5, 70_000, 1_000_000, 3]
    futures = [peer.conn.submit(get_data(f"/{i}")) for i in range(len(sizes))]
    stream = b"".join(
        get_data_reply(xid, bytes([xid]) * size) for xid, size in enumerate(sizes, start=1)
    )
    _read_as_asyncio_does(peer, stream, chunk)
    for xid, (future, size) in enumerate(zip(futures, sizes, strict=True), start=1):
        data, _stat = await future
        assert data == bytes([xid]) * size
    assert len(peer.conn.get_buffer(-1)) == 64 * 1024
    assert not peer.transport.is_closing()


async def test_a_huge_announced_length_grows_the_buffer_only_as_bytes_arrive() -> None:
    peer = await connected_peer()
    future = peer.conn.submit(echo())
    header = struct.pack("!i", 2**31 - 1) + REPLY_HEADER.pack(1, 0, 0)
    _read_as_asyncio_does(peer, header + bytes(200_000), 65536)
    assert len(peer.conn.get_buffer(-1)) < 1024 * 1024
    assert not future.done() and not peer.transport.is_closing()
    future.cancel()


# -5 to -10 once made the bytes up to the end of the buffer pass for a reply (the
# length was used as a slice bound) before the connection dropped.
@pytest.mark.parametrize("length", [-1, -4, -5, -10, -(2**31)])
async def test_a_negative_length_prefix_drops_the_connection_dispatching_nothing(
    length: int, caplog: pytest.LogCaptureFixture
) -> None:
    peer = await connected_peer()
    future = peer.conn.submit(echo())
    with caplog.at_level(logging.ERROR, logger="aiocoord.connection"):
        peer.feed(struct.pack("!i", length) + REPLY_HEADER.pack(1, 0, 0) + b"abcdef")
    assert peer.transport.aborted
    assert not future.done(), "bytes after a bad length prefix were taken for a reply"
    await peer.conn.closed
    with pytest.raises(ConnectionLossError):
        await future


# --- replies -----------------------------------------------------------------------


async def test_replies_resolve_their_requests_in_the_order_sent() -> None:
    peer = await connected_peer()
    futures = [*peer.conn.submit_all([echo("/a"), echo("/b")]), peer.conn.submit(echo("/c"))]
    writes = await peer.transport.wait_writes(3)  # the handshake, the pipeline, then /c
    assert writes[1:] == [echo("/a").frame(1) + echo("/b").frame(2), echo("/c").frame(3)]
    assert peer.conn.in_flight == 3

    peer.feed(reply(1, b"for a") + reply(2, b"for b") + reply(3, b"for c"))

    assert [await f for f in futures] == [b"for a", b"for b", b"for c"]
    assert peer.conn.in_flight == 0


async def test_replies_out_of_order_are_still_matched_by_xid() -> None:
    """ZooKeeper answers a connection's requests in order; the connection does not
    check that (the Java client drops the connection on an out-of-order xid), it
    matches each reply to its request by xid."""
    peer = await connected_peer()
    futures = [peer.conn.submit(echo(p)) for p in ("/a", "/b", "/c")]
    peer.feed(reply(3, b"c") + reply(1, b"a") + reply(2, b"b"))
    assert [await f for f in futures] == [b"a", b"b", b"c"]
    assert not peer.transport.is_closing()


async def test_a_pipeline_waits_for_every_reply_whatever_their_order() -> None:
    """A pipeline's caller waits on its last request, which ZooKeeper answers
    last; replies in another order must not end the wait early."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in range(3)]
    waiting = asyncio.create_task(replies(futures))
    futures[2].set_result("c")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiting.done()
    futures[0].set_exception(aiocoord.NoNodeError("/a"))
    futures[1].set_result("b")
    a, b, c = await waiting
    assert isinstance(a, aiocoord.NoNodeError) and (b, c) == ("b", "c")


async def test_a_cancelled_pipeline_abandons_its_requests() -> None:
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in range(2)]
    futures[0].set_exception(aiocoord.NoNodeError("/a"))  # answered, never read
    waiting = asyncio.create_task(replies(futures))
    await asyncio.sleep(0)
    waiting.cancel("deadline")
    with pytest.raises(asyncio.CancelledError, match="deadline"):
        await waiting
    assert futures[1].cancelled()


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (-101, aiocoord.NoNodeError),
        (-102, aiocoord.NoAuthError),
        (-103, aiocoord.BadVersionError),
        (-110, aiocoord.NodeExistsError),
        (-111, aiocoord.NotEmptyError),
        (-119, aiocoord.NotReadOnlyError),
        (-6, aiocoord.UnimplementedError),
    ],
)
async def test_an_error_code_reply_raises_its_exception_with_the_request_path(
    code: int, error_type: type[ZooKeeperError]
) -> None:
    peer = await connected_peer()
    future = peer.conn.submit(get_data("/node"))
    peer.feed(reply(1, err=code))
    with pytest.raises(error_type) as info:
        await future
    assert type(info.value) is error_type
    assert info.value.code == code and info.value.path == "/node"
    assert not peer.transport.is_closing()


async def test_session_codes_in_a_reply_map_to_session_errors() -> None:
    peer = await connected_peer()
    lost, expired, unknown = (peer.conn.submit(get_data(p)) for p in ("/a", "/b", "/c"))
    peer.feed(reply(1, err=-4) + reply(2, err=-112) + reply(3, err=-999))
    with pytest.raises(ConnectionLossError) as loss:
        await lost
    assert loss.value.sent  # the server had the request
    with pytest.raises(SessionExpiredError):
        await expired
    with pytest.raises(ZooKeeperError) as other:
        await unknown
    assert other.value.code == -999 and "-999" in str(other.value)
    assert not peer.transport.is_closing()


async def test_the_reply_hook_runs_before_the_future_resolves_and_the_next_frame() -> None:
    peer = await connected_peer()
    seen: list[tuple[int, bool, int]] = []
    future = peer.conn.submit(
        get_data("/w"), lambda err: seen.append((err, future.done(), len(peer.events)))
    )
    peer.feed(reply(1, err=-101) + watch_event(1, "/ns/w"))
    assert seen == [(-101, False, 0)]  # the watch can be registered before its event
    assert len(peer.events) == 1
    with pytest.raises(aiocoord.NoNodeError):
        await future


async def test_a_reply_the_caller_gave_up_on_is_dropped_without_its_hook() -> None:
    peer = await connected_peer()
    abandoned = peer.conn.submit(echo("/a"), peer.hook("abandoned"))
    wanted = peer.conn.submit(echo("/b"), peer.hook("wanted"))
    abandoned.cancel()
    assert peer.conn.in_flight == 2  # its xid stays reserved until the reply comes
    peer.feed(reply(1, b"late") + reply(2, b"b"))
    assert await wanted == b"b"
    assert peer.log == [("wanted", 0)]
    assert peer.conn.in_flight == 0 and not peer.transport.is_closing()


async def test_a_reply_that_fails_to_decode_fails_only_its_request() -> None:
    def refuse(_body: bytes) -> None:
        raise ValueError("undecodable")

    peer = await connected_peer()
    bad = peer.conn.submit(_zk.Op(OP_GET_DATA, b"", "/bad", refuse))
    good = peer.conn.submit(echo())
    peer.feed(reply(1, b"??") + reply(2, b"fine"))
    with pytest.raises(ValueError, match="undecodable"):
        await bad
    assert await good == b"fine"
    assert not peer.transport.is_closing()


async def test_a_reply_for_an_unknown_xid_drops_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing after it can be trusted: the frames behind it are not read, and every
    request in flight fails as sent (its outcome unknown)."""
    peer = await connected_peer()
    future = peer.conn.submit(echo())
    with caplog.at_level(logging.WARNING, logger="aiocoord.connection"):
        peer.feed(reply(99, b"stray") + reply(1, b"valid, but behind the stray one"))
    assert peer.transport.aborted
    records = [r for r in caplog.records if r.name == "aiocoord.connection"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (
            logging.WARNING,
            "127.0.0.1:2181 sent a reply for xid 99 (error 0), which is no request's;"
            " dropping the connection",
        )
    ]
    assert not future.done()
    await peer.conn.closed
    with pytest.raises(ConnectionLossError) as info:
        await future
    assert info.value.sent
    assert peer.closed_calls == [peer.conn]


# --- events, pings, special requests ------------------------------------------------


async def test_a_watch_event_goes_to_the_event_callback_and_resolves_no_request() -> None:
    peer = await connected_peer()
    future = peer.conn.submit(echo())
    event = watch_event(2, "/ns/deleted")
    peer.feed(event)
    assert peer.events == [event[4:]]
    assert _zk.parse_event(peer.events[0], REPLY_HEADER.size) == (
        aiocoord.EventType.DELETED,
        3,
        "/ns/deleted",
    )
    assert not future.done() and peer.conn.in_flight == 1
    assert peer.conn.last_zxid == 0  # an event's zxid (-1) is not a position
    future.cancel()


async def test_a_ping_is_sent_with_its_xid_and_its_reply_resolves_nothing() -> None:
    peer = await connected_peer()
    future = peer.conn.submit(echo())
    writes = await peer.transport.wait_writes(2)
    peer.conn.send_ping()
    writes = await peer.transport.wait_writes(3)
    assert sent(writes[2]) == (XID_PING, OP_PING)

    peer.feed(reply(XID_PING, zxid=7))

    assert not future.done() and peer.conn.in_flight == 1
    assert peer.events == [] and not peer.transport.is_closing()
    assert peer.conn.last_zxid == 7
    peer.feed(reply(1, b"after the ping"))
    assert await future == b"after the ping"


async def test_auth_and_set_watches_replies_resolve_their_waiters_first_in_first_out() -> None:
    peer = await connected_peer()
    first_auth = peer.conn.send_special(XID_AUTH, _zk.auth_frame("digest", b"u:p"))
    second_auth = peer.conn.send_special(XID_AUTH, _zk.auth_frame("digest", b"u:q"))
    set_watches = peer.conn.send_special(
        XID_SET_WATCHES, _zk.set_watches_frames(5, ["/ns/a"], [], [])[0]
    )
    peer.feed(reply(XID_SET_WATCHES) + reply(XID_AUTH, err=-115) + reply(XID_AUTH))
    assert [await first_auth, await second_auth, await set_watches] == [-115, 0, 0]
    assert peer.conn.in_flight == 0 and not peer.transport.is_closing()


async def test_the_last_zxid_follows_replies() -> None:
    peer = await connected_peer()
    futures = [peer.conn.submit(echo()) for _ in range(3)]
    peer.feed(reply(1, zxid=100) + reply(2, zxid=0) + reply(3, err=-101, zxid=120))
    assert peer.conn.last_zxid == 120
    await futures[0]
    await futures[1]
    with pytest.raises(aiocoord.NoNodeError):
        await futures[2]


# --- the handshake --------------------------------------------------------------------


async def test_a_bare_reply_header_during_the_handshake_is_a_refusal() -> None:
    peer = Peer()
    handshake = peer.handshake()
    peer.feed(reply(0, err=-119))  # NOTREADONLY, from a read-only server
    assert peer.transport.aborted
    with pytest.raises(ConnectionLossError, match="server refused the session: NotReadOnly"):
        await handshake
    await peer.conn.closed


async def test_a_connection_lost_during_the_handshake_fails_it() -> None:
    peer = Peer()
    handshake = peer.handshake()
    peer.conn.connection_lost(None)
    with pytest.raises(ConnectionLossError, match="closed during handshake"):
        await handshake
    assert peer.closed_calls == [peer.conn]


# --- sending ----------------------------------------------------------------------------


async def test_requests_of_one_loop_iteration_after_the_first_leave_in_one_write() -> None:
    peer = await connected_peer()
    futures = [peer.conn.submit(echo(f"/{i}")) for i in range(3)]
    writes = await peer.transport.wait_writes(2)
    assert len(writes) == 2 and sent(writes[1]) == (1, OP_GET_DATA)  # the first at once
    writes = await peer.transport.wait_writes(3)
    assert writes[2] == echo("/1").frame(2) + echo("/2").frame(3)  # the rest together
    for future in futures:
        future.cancel()


async def test_after_a_reply_the_next_request_is_written_at_once() -> None:
    """A lone request schedules no flush (a loop iteration per request): after a
    reply, the next request leaves at once, even in the same iteration; one more
    before the next reply waits for the flush, and the order holds."""
    peer = await connected_peer()
    first = peer.conn.submit(echo("/1"))
    assert peer.transport.writes[1:] == [echo("/1").frame(1)]
    peer.feed(reply(1, b"one"))
    second = peer.conn.submit(echo("/2"))
    assert peer.transport.writes[2:] == [echo("/2").frame(2)]  # written at once
    third = peer.conn.submit(echo("/3"))
    fourth = peer.conn.submit(echo("/4"))
    assert len(peer.transport.writes) == 3  # queued behind /2 until the flush
    writes = await peer.transport.wait_writes(4)
    assert writes[3] == echo("/3").frame(3) + echo("/4").frame(4)
    peer.feed(reply(2, b"two") + reply(3, b"three") + reply(4, b"four"))
    assert [await f for f in (first, second, third, fourth)] == [b"one", b"two", b"three", b"four"]


async def test_a_request_in_a_later_iteration_still_leaves_in_order() -> None:
    """Without a reply in between, a later request waits for one flush, never
    overtaking one written before it."""
    peer = await connected_peer()
    first = peer.conn.submit(echo("/1"))
    await next_iteration()
    await next_iteration()
    second = peer.conn.submit(echo("/2"))
    writes = await peer.transport.wait_writes(3)
    assert writes[1:] == [echo("/1").frame(1), echo("/2").frame(2)]
    for future in (first, second):
        future.cancel()


async def test_close_flushes_queued_requests_before_closing() -> None:
    peer = await connected_peer()
    peer.conn.submit(echo("/a"))
    peer.conn.submit(echo("/b"))
    peer.conn.close()
    assert peer.transport.writes[-2:] == [echo("/a").frame(1), echo("/b").frame(2)]
    assert peer.transport.closed
    await peer.conn.closed


# --- connection loss ----------------------------------------------------------------------


async def test_connection_lost_fails_every_request_in_flight_as_sent() -> None:
    peer = await connected_peer()
    requests = [peer.conn.submit(echo()), *peer.conn.submit_all([echo(), echo()])]
    auth = peer.conn.send_special(XID_AUTH, _zk.auth_frame("digest", b"u:p"))
    await peer.transport.wait_writes(3)  # everything has been written
    peer.feed(reply(1, b"answered"))

    peer.conn.connection_lost(ConnectionResetError())

    assert await requests[0] == b"answered"
    for waiter in [*requests[1:], auth]:
        with pytest.raises(ConnectionLossError) as info:
            await waiter
        assert info.value.sent
    assert peer.conn.in_flight == 0
    assert peer.conn.closed.done() and peer.closed_calls == [peer.conn]


async def test_a_request_after_the_connection_closed_is_refused_unsent() -> None:
    peer = await connected_peer()
    peer.transport.abort()  # closing: the loss is not reported yet
    with pytest.raises(ConnectionLossError) as info:
        peer.conn.submit(echo())
    assert not info.value.sent
    await peer.conn.closed
    assert not peer.conn.is_open
    for attempt in (
        lambda: peer.conn.submit(echo()),
        lambda: peer.conn.submit_all([echo(), echo()]),
        lambda: peer.conn.send_ping(),
    ):
        with pytest.raises(ConnectionLossError) as info:
            attempt()
        assert not info.value.sent
    assert peer.conn.in_flight == 0
    assert len(peer.transport.writes) == 1  # only the handshake


async def test_a_request_still_queued_when_the_connection_drops_is_reported_as_sent() -> None:
    """The second request of a loop iteration waits for that iteration's end to be
    written. If the loss is reported first, it was never written, yet it fails as
    sent: the safe side (the caller treats its outcome as unknown)."""
    peer = await connected_peer()
    written = peer.conn.submit(echo("/written"))
    queued = peer.conn.submit(echo("/queued"))
    peer.conn.connection_lost(None)
    for future in (written, queued):
        with pytest.raises(ConnectionLossError) as info:
            await future
        assert info.value.sent
    assert peer.transport.writes[1:] == [echo("/written").frame(1)]
