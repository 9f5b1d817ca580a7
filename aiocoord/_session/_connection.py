"""One TCP (or TLS) connection to one ZooKeeper server.

An :class:`asyncio.BufferedProtocol` rather than streams: the socket is read
into one preallocated buffer, frames are cut out of it in one pass per read,
and requests sent close together leave in one ``write``. Nothing here retries
or reconnects: when the socket closes, every request in flight fails with a
ConnectionLossError that says it was sent, and the session manager decides
what happens next.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

from .. import _telemetry
from .._exceptions import (
    SASL_REQUIRED_CODE,
    SESSION_EXPIRED_CODE,
    UNKNOWN_SESSION_CODE,
    ConnectionLossError,
    DataTooLargeError,
    error_for_code,
)
from . import _zk

__all__ = ["Connection", "SendRecord", "open_connection", "replies", "track_sends"]

log = logging.getLogger("aiocoord.connection")

ReplyHook = Callable[[int], None]
EventHandler = Callable[[bytes], None]
ClosedHandler = Callable[["Connection"], None]


class SendRecord:
    """Whether any request was written to a server within a :func:`track_sends` block."""

    __slots__ = ("_outer", "sent")

    def __init__(self, outer: SendRecord | None) -> None:
        self._outer = outer
        self.sent = False
        """True once a request left for the server (it may have been applied)."""

    def mark(self) -> None:
        record: SendRecord | None = self
        while record is not None and not record.sent:
            record.sent = True
            record = record._outer


_sends: contextvars.ContextVar[SendRecord | None] = contextvars.ContextVar(
    "aiocoord_sends", default=None
)


class _TrackSends:
    """The ``with`` block of :func:`track_sends` (a class: it is entered on every
    protected create, where a generator's machinery cost more than the block)."""

    __slots__ = ("_token",)

    def __init__(self) -> None:
        self._token: contextvars.Token[SendRecord | None] | None = None

    def __enter__(self) -> SendRecord:
        if self._token is not None:  # as a generator-based one, it is not reentrant
            raise RuntimeError("this scope is already entered")
        record = SendRecord(_sends.get())
        self._token = _sends.set(record)
        return record

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None
        _sends.reset(self._token)
        self._token = None


def track_sends() -> contextlib.AbstractContextManager[SendRecord]:
    """Record whether the block (this task, and tasks it starts) wrote any request.

    A recipe cut off while it waited for a connection sent nothing, so it has
    nothing to look for on the server: its cleanup needs no round trip (which
    would wait for the server to come back).
    """
    return _TrackSends()


def _mark_sent() -> None:
    record = _sends.get()
    if record is not None:
        record.mark()


_READ_SIZE = 64 * 1024
"""The receive buffer's usual size; it grows for a larger frame.

Read with ``recv_into``: asyncio's plain ``Protocol`` path calls
``recv(256 KiB)``, which allocates (and returns to the system) a 256 KiB
buffer on every read, about 15 µs of CPU per reply here, more than
everything else a reply costs."""
_READ_MIN = 4096
"""Less free room than this at the buffer's end: move the unparsed bytes to the front first."""


class _ProtocolViolation(Exception):
    """The server sent something no request asked for."""


_Pending = tuple[_zk.Op, "asyncio.Future[Any]", ReplyHook | None, float]
"""A request awaiting its reply: the op, its future, its reply hook, and when it
was sent for the request-latency histogram (0: not timed). A tuple, not a class:
one is made per request, and a class's ``__init__`` is a Python call each."""


class Connection(asyncio.BufferedProtocol):
    """Framing, request/reply matching and the session handshake for one socket."""

    def __init__(
        self,
        on_event: EventHandler,
        on_closed: ClosedHandler,
        max_request_size: int = _zk.JUTE_MAXBUFFER,
        *,
        timed: bool = False,
        on_session_ended: ClosedHandler | None = None,
        on_sasl_required: ClosedHandler | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._timed = timed
        """Time each request for ``aiocoord.request.duration`` (Telemetry(request_metrics=True))."""
        self._on_event = on_event
        self._on_closed = on_closed
        self._on_session_ended = on_session_ended
        """Called when a reply says the session has ended though the socket is open."""
        self._on_sasl_required = on_sasl_required
        """Called when a reply says the server requires SASL (it closes the socket next)."""
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray(_READ_SIZE)
        self._start = 0  # unparsed bytes are self._buffer[self._start : self._end]
        self._end = 0
        self._pending: dict[int, _Pending] = {}
        self._special: dict[int, deque[asyncio.Future[int]]] = {
            _zk.XID_AUTH: deque(),
            _zk.XID_SET_WATCHES: deque(),
        }
        self._next_xid = 1
        self._outbox: list[bytes] = []
        self._flush_scheduled = False
        self._wrote = False
        """A frame was written at once since the last reply or flush: the next
        ones wait for the flush (see :meth:`_send`)."""
        self._handshake: asyncio.Future[_zk.ConnectReply] = self._loop.create_future()
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self.last_recv = time.monotonic()
        self.last_send = self.last_recv
        self.last_zxid = 0
        self.peer: tuple[str, int] = ("", 0)
        self._max_frame = max_request_size + 4

    @property
    def max_request_size(self) -> int:
        """The server's ``jute.maxbuffer``: requests longer than this are refused
        without being sent (see :meth:`submit`)."""
        return self._max_frame - 4

    @max_request_size.setter
    def max_request_size(self, value: int) -> None:
        self._max_frame = value + 4

    # --- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always a subclass of asyncio.Transport:
        # uvloop's is not (an isinstance check refused every uvloop connection).
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        pending, self._pending = self._pending, {}
        for item in pending.values():
            if not item[1].done():
                item[1].set_exception(ConnectionLossError(sent=True))
        for queue in self._special.values():
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_exception(ConnectionLossError(sent=True))
        if not self._handshake.done():
            self._handshake.set_exception(ConnectionLossError("closed during handshake"))
            self._handshake.exception()
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_closed(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        buffer = self._buffer
        if len(buffer) - self._end < _READ_MIN:
            start, end = self._start, self._end
            pending = end - start
            need = _READ_MIN + pending
            if pending >= 4:
                # A frame larger than the buffer: room for all of it, but
                # growing by doubling at most, so that a corrupt length does
                # not allocate gigabytes before its bytes arrive.
                frame = 4 + _zk.SIZE.unpack_from(buffer, start)[0]
                need = max(need, min(frame, 2 * len(buffer)))
            if need > len(buffer):
                grown = bytearray(need)
                grown[:pending] = buffer[start:end]
                self._buffer = buffer = grown
            else:  # room enough once the parsed bytes before ``start`` are dropped
                buffer[:pending] = buffer[start:end]
            self._start, self._end = 0, pending
        return memoryview(buffer)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_recv = time.monotonic()
        # The tasks these replies wake run in a later loop iteration: the
        # first of them may write at once again.
        self._wrote = False
        self._end += nbytes
        self._parse()

    def data_received(self, data: bytes) -> None:
        """Take ``data`` as if read from the socket (asyncio calls the buffered
        methods; this is for a caller holding bytes, as tests do)."""
        view = memoryview(data)
        while view:
            room = self.get_buffer(len(view))
            count = min(len(room), len(view))
            room[:count] = view[:count]
            room.release()
            view = view[count:]
            self.buffer_updated(count)
            if self._transport is None or self._transport.is_closing():
                return

    def _parse(self) -> None:
        buffer = self._buffer
        end = self._end
        offset = self._start
        try:
            while end - offset >= 4:
                (size,) = _zk.SIZE.unpack_from(buffer, offset)
                if size < 0:
                    raise ValueError(f"negative frame length {size}")
                stop = offset + 4 + size
                if stop > end:
                    break
                frame = bytes(buffer[offset + 4 : stop])
                offset = stop
                if self._handshake.done():
                    self._dispatch(frame)
                elif len(frame) == _zk.REPLY_HEADER.size:
                    # A bare reply header (a ConnectResponse has at least 20 bytes): the
                    # server refused the session, e.g. NOTREADONLY from a read-only
                    # server that runs without localSessionsEnabled.
                    _xid, _zxid, err = _zk.REPLY_HEADER.unpack_from(frame, 0)
                    refusal = error_for_code(err) if err else None
                    self._handshake.set_exception(
                        ConnectionLossError(f"server refused the session: {refusal!r}")
                    )
                    self.abort()
                    break
                else:
                    self._handshake.set_result(_zk.parse_connect_reply(frame))
        except _ProtocolViolation as violation:
            # The Java client gives up on such a connection too; the session
            # task reconnects, and requests in flight fail as connection loss.
            log.warning("%s:%s sent %s; dropping the connection", *self.peer, violation)
            self.abort()
        except Exception:
            log.exception("malformed frame from %s:%s; dropping the connection", *self.peer)
            self.abort()
        finally:
            if offset == end:  # all parsed: start over at the front
                self._start = self._end = 0
                if len(buffer) > _READ_SIZE:  # grown for a large reply
                    self._buffer = bytearray(_READ_SIZE)
            else:
                self._start = offset

    # --- replies ------------------------------------------------------------

    def _dispatch(self, frame: bytes) -> None:
        xid, zxid, err = _zk.REPLY_HEADER.unpack_from(frame, 0)
        if zxid > 0:
            self.last_zxid = zxid
        if xid == _zk.XID_WATCH_EVENT:
            self._on_event(frame)
            return
        if xid == _zk.XID_PING:
            return
        special = self._special.get(xid)
        if special is not None:
            waiter = special.popleft()
            if not waiter.done():
                waiter.set_result(err)
            return
        item = self._pending.pop(xid, None)
        if item is None:
            raise _ProtocolViolation(f"a reply for xid {xid} (error {err}), which is no request's")
        op, future, hook, sent_at = item
        if sent_at:
            _telemetry.request_done(
                op.opcode, _zk.operation_name, not err, time.perf_counter() - sent_at
            )
        if future.done():  # the caller gave up waiting
            if err:
                self._check_session(err)
            return
        if hook is not None:
            hook(err)
        if err:
            future.set_exception(error_for_code(err, op.path))
            self._check_session(err)
        else:
            try:
                future.set_result(op.decode(frame[_zk.REPLY_HEADER.size :]))
            except Exception as error:
                future.set_exception(error)

    def _check_session(self, err: int) -> None:
        # A server closes the socket when it ends a session, as a rule. After a
        # leader failover, a follower was seen to keep one open for a session
        # the new leader had expired: it served reads, and every write came
        # back SESSIONEXPIRED, for as long as the socket lasted (20 s and more).
        if err in (SESSION_EXPIRED_CODE, UNKNOWN_SESSION_CODE) and self._on_session_ended:
            self._on_session_ended(self)
        elif err == SASL_REQUIRED_CODE and self._on_sasl_required:
            self._on_sasl_required(self)

    # --- sending --------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def _send(self, frame: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ConnectionLossError("connection is closed", sent=False)
        if not self._wrote and not self._outbox:
            # The first request since the last reply (or flush) leaves at once:
            # no added latency. Later ones are gathered and written together
            # at the start of the next loop iteration (fewer system calls when
            # pipelining). No flush is scheduled for a lone request: a
            # callback per request cost a loop iteration (an epoll_wait) each.
            transport.write(frame)
            self.last_send = time.monotonic()
            self._wrote = True
            return
        self._outbox.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._wrote = False
        outbox, self._outbox = self._outbox, []
        if self._transport is not None and outbox:
            self._transport.write(b"".join(outbox) if len(outbox) > 1 else outbox[0])
            self.last_send = time.monotonic()

    # How ZooKeeper judges a request's size (measured against Debian's ZooKeeper
    # 3.8.0, NIO and Netty connection factories alike): it reads the 4-byte
    # length prefix of each packet and, if that value is greater than
    # jute.maxbuffer, logs "Len error ... length is greater than jute.maxbuffer"
    # and closes the connection without a reply. The prefix counts everything
    # after itself: xid (4) + opcode (4) + the request record (path, data, ACLs,
    # flags...), i.e. len(op.payload) + 8; the frame on the wire is 4 bytes more.
    # With the default jute.maxbuffer = 1048575 (1 MiB - 1), a prefix of 1048575
    # (frame of 1048579 bytes) is accepted and 1048576 refused, for create,
    # setData and multi alike, whatever the path's length. A multi is judged as
    # one packet, however its bytes are spread over its operations (four creates
    # of ~262 kB each: refused at 1048576 too). With -Djute.maxbuffer=20000 the
    # same rule held (20000 accepted, 20001 refused). The client sees such a
    # refusal as a plain connection loss, so requests are checked here first:
    # limit + 4 (``_max_frame``) against the length of the frame just built. A
    # refused request is not written, leaves the connection alone and, not being
    # a connection loss, is never retried.

    def submit(self, op: _zk.Op, hook: ReplyHook | None = None) -> asyncio.Future[Any]:
        """Send ``op``; the future resolves with its decoded reply or its error.

        ``hook`` runs with the reply's error code before the future resolves
        and before any later frame is read: the place to register a watch.

        Raises DataTooLargeError, sending nothing, if the request is longer than
        :attr:`max_request_size` (the server would drop the connection).
        """
        xid = self._next_xid
        frame = op.frame(xid)
        if len(frame) > self._max_frame:  # an int comparison: the length is at hand
            raise self._too_large(op, len(frame) - 4)
        self._next_xid = xid + 1 if xid < 0x7FFFFFFF else 1
        self._send(frame)
        record = _sends.get()
        if record is not None:  # _mark_sent(), inline: this runs for every request
            record.mark()
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[xid] = (op, future, hook, time.perf_counter() if self._timed else 0.0)
        return future

    def submit_all(self, ops: Sequence[_zk.Op]) -> list[asyncio.Future[Any]]:
        """Send several requests in one write (a pipeline); one future each.

        If any request is too large (see :meth:`submit`), DataTooLargeError is
        raised and none is sent.
        """
        first = self._next_xid
        limit = self._max_frame
        frames = []
        for offset, op in enumerate(ops):
            frame = op.frame((first + offset - 1) % 0x7FFFFFFF + 1)
            if len(frame) > limit:
                raise self._too_large(op, len(frame) - 4)
            frames.append(frame)
        self._send(b"".join(frames))  # raises before anything is registered
        _mark_sent()
        self._next_xid = (first + len(ops) - 1) % 0x7FFFFFFF + 1
        futures: list[asyncio.Future[Any]] = []
        for offset, op in enumerate(ops):
            future: asyncio.Future[Any] = self._loop.create_future()
            self._pending[(first + offset - 1) % 0x7FFFFFFF + 1] = (
                op,
                future,
                None,
                time.perf_counter() if self._timed else 0.0,
            )
            futures.append(future)
        return futures

    def _too_large(self, op: _zk.Op, size: int) -> DataTooLargeError:
        return DataTooLargeError(op.path, size, self.max_request_size, request=True)

    def send_special(self, xid: int, frame: bytes) -> asyncio.Future[int]:
        """Send an auth or set-watches frame; the future gets the reply's error code."""
        self._send(frame)
        waiter: asyncio.Future[int] = self._loop.create_future()
        self._special[xid].append(waiter)
        return waiter

    def send_ping(self) -> None:
        self._send(_zk.ping_frame())

    def send_connect(
        self, last_zxid: int, timeout_ms: int, session_id: int, password: bytes, read_only: bool
    ) -> asyncio.Future[_zk.ConnectReply]:
        """Send the session handshake; requests may be pipelined right behind it."""
        self.last_zxid = last_zxid
        self._send(_zk.connect_frame(last_zxid, timeout_ms, session_id, password, read_only))
        return self._handshake

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        if self._transport is not None:
            self._flush()
            self._transport.close()

    @property
    def in_flight(self) -> int:
        return len(self._pending)


async def replies(futures: Sequence[asyncio.Future[Any]]) -> list[Any]:
    """Each request's result, or its error as a value, once every reply is in.

    Not ``asyncio.gather(..., return_exceptions=True)``: on Python 3.11, a
    gather cancelled after its last future had failed raises a CancelledError
    without the canceller's message. anyio's cancel scopes tell their own
    cancellation by that message, so a deadline (``move_on_after``) that fired
    then let the error escape as a cancellation nobody asked for. Here the
    caller's own cancellation is what propagates; the requests are abandoned.

    Nor ``asyncio.wait``: its completion callbacks take a pass of the event
    loop of their own before the caller wakes. ZooKeeper answers a session's
    requests in the order they were sent, and a lost connection fails all in
    flight at once, so the last request's reply is normally the last to come:
    awaiting it alone wakes the caller with the reply.
    """
    if not futures:
        return []
    last = futures[-1]
    try:
        # (Not contextlib.suppress: two more Python calls on every pipeline.)
        try:
            await last
        except Exception as error:  # an error reply: read below, as a value
            # Its traceback holds this frame, which holds the future that holds
            # it: without this, a cycle for every pipeline whose last reply failed.
            error.__traceback__ = None
        for future in futures:
            if not future.done():  # replies out of order
                await asyncio.wait(futures)
                break
    except asyncio.CancelledError:
        for future in futures:
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: a failure nobody waits for is no news
            future.cancel()
        raise
    return [
        asyncio.CancelledError() if f.cancelled() else (f.exception() or f.result())
        for f in futures
    ]


async def open_connection(
    host: str,
    port: int,
    on_event: EventHandler,
    on_closed: ClosedHandler,
    ssl_context: ssl.SSLContext | None,
    *,
    timed: bool = False,
    on_session_ended: ClosedHandler | None = None,
    on_sasl_required: ClosedHandler | None = None,
) -> Connection:
    loop = asyncio.get_running_loop()
    _transport, protocol = await loop.create_connection(
        lambda: Connection(
            on_event,
            on_closed,
            timed=timed,
            on_session_ended=on_session_ended,
            on_sasl_required=on_sasl_required,
        ),
        host,
        port,
        ssl=ssl_context,
    )
    return protocol
