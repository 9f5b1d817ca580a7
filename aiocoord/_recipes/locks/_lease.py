"""A try-lock that expires by itself: the ``SET key holder NX EX ttl`` pattern of
Redis or Tair, on ZooKeeper TTL nodes.

Each attempt creates a persistent sequential TTL node under the lease path;
the oldest live one is the holder. A node whose holder vanished stops being
renewed and is dead once its TTL has passed: later contenders see that from
the server's own timestamps and delete it (only if still unrenewed, by its
version), so expiry does not wait for the server's periodic sweep. Unique node
names mean a holder can never delete or renew somebody else's lease, even
after its own expired and the name was taken again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_flag, check_recipe_acl, check_text, check_timeout, check_ttl_ms
from ..._exceptions import (
    BadVersionError,
    CoordinationError,
    CorruptValueError,
    DataTooLargeError,
    HoldLostError,
    LeaseHeldError,
    LockLostError,
    NoConnectionError,
    NoNodeError,
    NotOwnerError,
    TTLNodesDisabledError,
    UnimplementedError,
)
from ..._session import (
    Client,
    Fence,
    OwnNode,
    Transaction,
    delete_quietly,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL, Codec, Stat
from .._kit import (
    Hold,
    HoldContext,
    end_record,
    generated_participant_id,
    read_children,
    recipe_path,
    sort_contenders,
    start_record,
)

__all__ = ["Lease"]

_NAME = "lease-"


@dataclass(frozen=True)
class _LeaseData(Codec[tuple[int, bytes]]):
    """A lease node's data, (TTL in milliseconds, holder): the TTL in ASCII digits,
    a newline, then the holder's bytes."""

    def encode(self, value: tuple[int, bytes]) -> bytes:
        ttl_ms, holder = value
        return b"%d\n" % ttl_ms + holder

    def decode(self, data: bytes, path: str) -> tuple[int, bytes]:
        head, sep, holder = data.partition(b"\n")
        # At most 13 digits: ZooKeeper's longest TTL (2**40 - 1 ms) has 13.
        if not (sep and head.isdigit() and len(head) <= 13):
            raise CorruptValueError(path, data, "a lease (TTL in milliseconds, newline, holder)")
        return int(head), holder


_DATA = _LeaseData()

log = logging.getLogger("aiocoord")


class Lease:
    """A non-blocking lock held for ``ttl`` seconds at a time.

    ``try_acquire()`` returns at once: True if this object now holds the lease
    (or already did), False if someone else does. The holder extends it with
    ``renew()`` before ``ttl`` runs out; if it does not (it crashed, hung or
    was cut off), the lease lapses and others may take it. ``participant_id``
    names the holder: a new ``Lease`` with the same id (a restarted process)
    takes over a lease that id still has. Without one, the id is generated
    (``<host>:<pid>:<random hex>``), unique to this object: nobody takes over.

    The server needs TTL nodes enabled (``zookeeper.extendedTypesEnabled``).
    ``acl`` (default: the client's ``default_acl``) is the ACL of the lease
    nodes and of the missing parents made for them. A child of the lease path
    that is not a lease (another program's node) makes :meth:`try_acquire`
    raise CorruptValueError naming it; it is left in place.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        ttl: float,
        *,
        participant_id: str | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "lease")
        self._ttl_ms = check_ttl_ms(ttl, path=path)
        self._client = client
        self.path = path
        self.ttl = float(ttl)
        if participant_id is None:
            participant_id = generated_participant_id()
        self._holder = check_text(participant_id, "participant_id", path=path)
        self.participant_id = participant_id
        """Who holds the lease through this object, stored in its node as UTF-8."""
        self._acl = check_recipe_acl(acl, path)
        """The ACL of our lease nodes and the parents made for them (None: the client's)."""
        self._data = _DATA.encode((self._ttl_ms, self._holder))
        if len(self._data) > client.max_data_size:
            raise DataTooLargeError(path, len(self._data), client.max_data_size)
        self._node: str | None = None
        self._version = 0
        self._czxid = 0
        """Our lease node's creation zxid: the fencing token."""
        self._valid_until = 0.0
        self._changed = asyncio.Event()
        """Set when the lease is taken, renewed, lost or released."""
        self._tags = _telemetry.recipe_tags(client.telemetry, "lease", path, client.namespace)
        self._recorded: Hold | None = None
        """The hold whose telemetry record (span and timer) runs while held."""

    def __repr__(self) -> str:
        return f"<Lease {self.path!r} id={self.participant_id!r} held={self.is_held}>"

    @property
    def is_held(self) -> bool:
        """True if this object holds the lease and its TTL has not run out (local clock,
        counted from when the last create or renew was sent: never optimistic)."""
        return self._node is not None and time.monotonic() < self._valid_until

    @property
    def node(self) -> str | None:
        """This object's lease node; None when it has none (never taken, released, or
        found lapsed by :meth:`renew`)."""
        return self._node

    @property
    def remaining(self) -> float:
        """Seconds until the lease lapses unless renewed (0 if not held)."""
        return max(0.0, self._valid_until - time.monotonic()) if self._node else 0.0

    async def try_acquire(self) -> bool:
        """Take the lease if it is free (or already ours); never waits for a holder."""
        if self._node is not None:
            try:
                await self.renew()
                return True
            except LockLostError:
                pass
        with _telemetry.span("aiocoord.lock.acquire", self._tags, duration=_telemetry.WAIT) as op:
            won = await self._try_acquire()
            op.outcome("acquired" if won else "busy")
            if won:
                op.set("aiocoord.fencing_token", self._czxid)
                self._recorded = hold = Hold()
                start_record(
                    hold,
                    "aiocoord.lock.hold",
                    self._tags,
                    token=self._czxid,
                    duration="aiocoord.lock.hold.duration",
                )
        return won

    def _end_record(self, outcome: str) -> None:
        hold, self._recorded = self._recorded, None
        if hold is not None:
            if outcome == "lost" and hold.record is not None:
                hold.record.lost("the lease lapsed")
            end_record(hold, outcome)

    async def _try_acquire(self) -> bool:
        own = OwnNode(
            self._client,
            self.path,
            _NAME,
            self._data,
            ttl=self.ttl,
            sequential=True,
            acl=self._acl,
        )
        sent_at = time.monotonic()
        try:
            names = await own.create(list_children=True)
        except UnimplementedError as error:
            raise TTLNodesDisabledError(self.path) from error
        except BaseException:
            await own.delete()  # a TTL node outlives the session: find it by its marker
            raise
        assert own.path is not None and own.stat is not None
        mine, stat = own.path, own.stat
        try:
            won, adopt = await self._settle(_paths.basename(mine), stat, names)
        except BaseException:
            await self._discard(mine)
            raise
        if adopt is not None:
            await self._discard(mine)
            self._node, self._version, self._czxid = adopt
            try:
                await self.renew()
            except LockLostError:
                return False
            return True
        if not won:
            await self._discard(mine)
            return False
        self._node, self._version, self._czxid = mine, stat.version, stat.czxid
        self._valid_until = sent_at + self.ttl
        self._changed.set()
        return True

    async def _settle(
        self, mine: str, my_stat: Stat, names: list[str] | None
    ) -> tuple[bool, tuple[str, int, int] | None]:
        """Decide who holds: (we won, or the node of ours to adopt)."""
        client = self._client

        def ahead_of_mine(listed: list[str]) -> list[str]:
            ordered = sort_contenders(listed, (_NAME,))
            return ordered[: ordered.index(mine)] if mine in ordered else ordered

        ahead = await read_children(client, self.path, select=ahead_of_mine, listing=names)
        now = my_stat.ctime  # the server's clock, just now
        for child in ahead:
            data, stat, path = child.data, child.stat, child.path
            # A node that is not a lease (written by another program) is not
            # judged, nor deleted: CorruptValueError names it, for whoever
            # put it there to remove it.
            ttl_ms, holder = _DATA.decode(data, path)
            if stat.mtime + ttl_ms <= now:
                # Lapsed: remove it, unless its holder renewed it meanwhile (then
                # the version no longer matches and the lease stands).
                try:
                    await client.delete(path, version=stat.version)
                except NoNodeError:
                    pass  # someone else removed it first
                except BadVersionError:
                    return False, None
                continue
            if holder == self._holder:
                return False, (path, stat.version, stat.czxid)
            return False, None
        return True, None

    async def _discard(self, node: str) -> None:
        await run_cleanup(self._client, lambda: delete_quietly(self._client, node))

    def fence(self) -> Fence:
        """Proof of holding for a transaction to require (``txn.guard(lease.fence())``).

        The transaction applies only while our lease node exists. A lapsed
        lease's node lasts until a contender or the server's sweep removes it,
        so a fence cannot see a lapse before that: renew well within the TTL.
        NotOwnerError if the lease is not held.
        """
        node = self._node
        if node is None:
            raise NotOwnerError(f"lease {self.path!r} is not held")
        return Fence(node, self.path)

    @property
    def fencing_token(self) -> int:
        """A number that grows with every grant of this lease: our lease node's
        creation zxid (a restarted holder that takes its own lease back keeps its
        token). Hand it to the resource the lease guards, which refuses a smaller
        token than it has seen. NotOwnerError if the lease is not held."""
        if not self.is_held:
            raise NotOwnerError(f"lease {self.path!r} is not held")
        return self._czxid

    def transaction(self) -> Transaction:
        """A transaction that applies only while our lease node exists; otherwise
        ``commit()`` applies nothing and raises LockLostError (a lapse counts only
        once the node is removed: see :meth:`fence`)."""
        return self._client.transaction().guard(self.fence())

    async def wait_lost(self, *, timeout: float | None = None) -> bool:
        """Wait until the lease is no longer held (released, or lapsed unrenewed):
        True; False if ``timeout`` passed first.

        Renewals push the moment back. NotOwnerError if it is not held now.
        """
        seconds = check_timeout(timeout, path=self.path)
        if not self.is_held:
            raise NotOwnerError(f"lease {self.path!r} is not held")
        with anyio.move_on_after(seconds):
            while self.is_held:
                self._changed.clear()
                with anyio.move_on_after(self._valid_until - time.monotonic()):
                    await self._changed.wait()
            return True
        return False

    def hold(self, *, cancel_on_loss: bool = True, keep_alive: bool = True) -> HoldContext[Lease]:
        """``async with lease.hold():`` take the lease (LeaseHeldError if another
        holder has it), run the block, release it.

        With ``keep_alive`` the lease is renewed every third of its TTL while
        the block runs. If it lapses anyway (renewals failed: ZooKeeper out of
        reach, or the lease taken over), the block is cancelled with
        ``cancel_on_loss`` and leaving it raises LockLostError either way.
        The lease never waits for another holder, so there is no ``timeout``.
        """
        holding = _LeaseHolding(self, check_flag(keep_alive, "keep_alive", path=self.path))
        return HoldContext(holding, cancel_on_loss=cancel_on_loss)

    async def _keep(self, keep_alive: bool) -> None:
        """Return once the lease is no longer held, renewing it meanwhile if asked."""
        while self.is_held:
            remaining = self._valid_until - time.monotonic()
            if not keep_alive:
                await self.wait_lost()
                return
            await anyio.sleep(min(self.ttl / 3, remaining))
            # A renewal that cannot finish before the lease lapses is too late.
            with anyio.move_on_after(max(0.0, self._valid_until - time.monotonic())):
                try:
                    await self.renew()
                except LockLostError:
                    return
                except CoordinationError as error:
                    log.info("lease %r: renewal failed (%r); trying again", self.path, error)

    async def renew(self) -> None:
        """Restart the TTL; LockLostError if the lease lapsed and is gone or taken."""
        node = self._node
        if node is None:
            raise NotOwnerError(f"lease {self.path!r} is not held")
        sent_at = time.monotonic()
        try:
            stat = await retry_on_connection_loss(
                self._client, lambda: self._client.set(node, self._data, version=self._version)
            )
        except (NoNodeError, BadVersionError) as error:
            self._node = None
            self._changed.set()
            self._end_record("lost")
            raise LockLostError(self.path, "the lease lapsed") from error
        self._version = stat.version
        self._valid_until = sent_at + self.ttl
        self._changed.set()

    async def release(self) -> None:
        """Give the lease up now (deleting only our own node, only if unrenewed by others)."""
        node = self._node
        if node is None:
            return
        self._node = None
        self._changed.set()
        self._end_record("released")
        # Unreachable ZooKeeper (NoConnectionError): the node lapses by its TTL.
        with contextlib.suppress(NoNodeError, BadVersionError, NoConnectionError):
            await retry_on_connection_loss(
                self._client, lambda: self._client.delete(node, version=self._version)
            )

    async def __aenter__(self) -> Lease:
        if not await self.try_acquire():
            raise LeaseHeldError(self.path)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


class _LeaseHolding:
    """A Lease's side of :class:`HoldContext`: a background task keeps the lease
    (renewing it with ``keep_alive``) and marks the hold lost once it lapses."""

    def __init__(self, lease: Lease, keep_alive: bool) -> None:
        self._lease = lease
        self._keep_alive = keep_alive
        self._keeper: asyncio.Task[Any] | None = None
        self.path = lease.path

    async def take_hold(self) -> tuple[Lease, Hold]:
        lease = self._lease
        if not await lease.try_acquire():
            raise LeaseHeldError(lease.path)
        hold = Hold()
        hold.subject = f"lease {lease.path!r}"
        hold.session_id = lease._client.session_id
        self._keeper = lease._client.start_background(
            self._watch(hold), name=f"aiocoord-lease-keeper {lease.path}"
        )
        return lease, hold

    async def _watch(self, hold: Hold) -> None:
        await self._lease._keep(self._keep_alive)
        hold.mark_lost("it lapsed unrenewed")

    async def end_hold(self, hold: Hold, *, completed: bool) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        if not self._lease.is_held:
            hold.mark_lost("it lapsed unrenewed")
        await self._lease.release()

    def lost_error(self, reason: str) -> HoldLostError:
        return LockLostError(self.path, reason)
