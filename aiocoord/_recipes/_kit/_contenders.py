"""The queue of contenders under a lock path, and the pure rules that read it.

Every contender is a protected, ephemeral, sequential node under the lock path
(``_c_<uuid>-lock-0000000042``, as Curator names them, so Curator and aiocoord
processes queue together). Contenders are ordered by the sequence suffix that
follows the lock name. A *rule* looks at the ordered names and one contender's
place and says whether it holds, and if not, which single node it must watch:
a release wakes one waiter, never a herd.

The rules are pure functions, tested without a server. :class:`Contender` runs
the loop around them: create, list, decide, watch, repeat.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ... import _paths
from ..._checks import check_int
from ..._exceptions import (
    ClientClosedError,
    NoNodeError,
    SessionExpiredError,
)
from ..._session import (
    Client,
    OwnNode,
    delete_quietly,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL
from ._waits import Deadline, Gone, wait_change

__all__ = [
    "LOCK_NAME",
    "READ_LOCK_NAME",
    "WRITE_LOCK_NAME",
    "Contender",
    "Decision",
    "Rule",
    "mutex_rule",
    "read_rule",
    "sequence_key",
    "sort_contenders",
]

LOCK_NAME = "lock-"
"""Curator's InterProcessMutex node name."""
READ_LOCK_NAME = "__READ__"
WRITE_LOCK_NAME = "__WRIT__"
"""Curator's InterProcessReadWriteLock node names."""


# --- pure rules -------------------------------------------------------------


def sequence_key(name: str, lock_names: Sequence[str]) -> str:
    """What a contender sorts by: the text after the last occurrence of its lock name.

    Names without any lock name sort by their whole text (Curator does the same).
    """
    for lock_name in lock_names:
        index = name.rfind(lock_name)
        if index >= 0:
            return name[index + len(lock_name) :]
    return name


def sort_contenders(names: Sequence[str], lock_names: Sequence[str]) -> list[str]:
    return sorted(names, key=lambda n: sequence_key(n, lock_names))


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a contender holds; if not, the one node it waits on.

    ``blockers`` counts the contenders ahead that stand in the way. When it is
    1, the watched node is the last of them: its deletion means we hold, with
    no need to list the queue again (nobody can queue ahead of us later, since
    sequence numbers only grow).
    """

    holds: bool
    watch: str | None = None
    blockers: int = 0


Rule = Callable[[Sequence[str], str], Decision]
"""``rule(names, my_name) -> Decision``; ``names`` in any order, ours among them.

Rules make one pass over the names (no sort): a waiter re-reads the whole queue
each time it wakes, so this is the cost that grows with the queue.
"""


def _ahead(names: Sequence[str], me: str, lock_names: Sequence[str]) -> list[tuple[str, str]]:
    mine = sequence_key(me, lock_names)
    keyed = ((sequence_key(n, lock_names), n) for n in names)
    return [(k, n) for k, n in keyed if k < mine]


def mutex_rule(max_leases: int = 1, lock_names: Sequence[str] = (LOCK_NAME,)) -> Rule:
    """The first ``max_leases`` contenders hold; any other watches the one
    ``max_leases`` places ahead of it."""
    check_int(max_leases, "max_leases", minimum=1)
    names_ = tuple(lock_names)

    def rule(names: Sequence[str], me: str) -> Decision:
        ahead = _ahead(names, me, names_)
        if len(ahead) < max_leases:
            return Decision(True)
        # The contender max_leases places ahead.
        watch = heapq.nlargest(max_leases, ahead)[-1][1]
        return Decision(False, watch, len(ahead) - max_leases + 1)

    if max_leases == 1 and len(names_) == 1:
        return _first_in_line_rule(names_[0])
    return rule


def _first_in_line_rule(lock_name: str) -> Rule:
    """The mutex rule for one lock name, in one pass with nothing allocated per
    name: a waiter runs it on every listing of the queue (the same decisions as
    the general rule, which picks the nearest by (key, name))."""
    width = len(lock_name)

    def rule(names: Sequence[str], me: str) -> Decision:
        index = me.rfind(lock_name)
        mine = me[index + width :] if index >= 0 else me
        count = 0
        nearest_key = ""
        nearest: str | None = None
        for name in names:
            index = name.rfind(lock_name)
            key = name[index + width :] if index >= 0 else name
            if key < mine:
                count += 1
                if nearest is None or key > nearest_key or (key == nearest_key and name > nearest):
                    nearest_key, nearest = key, name
        if nearest is None:
            return Decision(True)
        return Decision(False, nearest, count)

    return rule


def read_rule(lock_names: Sequence[str] = (WRITE_LOCK_NAME, READ_LOCK_NAME)) -> Rule:
    """A reader holds unless a writer is queued ahead of it; then it watches the
    nearest such writer (readers never wait for readers, and a queued writer
    blocks later readers, so writers do not starve)."""
    names_ = tuple(lock_names)

    def rule(names: Sequence[str], me: str) -> Decision:
        writers = [kn for kn in _ahead(names, me, names_) if WRITE_LOCK_NAME in kn[1]]
        if not writers:
            return Decision(True)
        return Decision(False, max(writers)[1], len(writers))

    return rule


# --- what one client knows about one queue ------------------------------------------


class _Listing:
    """One listing of the queue, shared by the contenders of one client that
    asked for it; sorted once, on first use."""

    __slots__ = ("_index", "_lock_names", "_ordered", "names")

    def __init__(self, names: list[str], lock_names: Sequence[str]) -> None:
        self.names = names
        self._lock_names = lock_names
        self._ordered: list[str] | None = None
        self._index: dict[str, int] = {}

    def _sort(self) -> list[str]:
        if self._ordered is None:
            self._ordered = sort_contenders(self.names, self._lock_names)
            self._index = {name: i for i, name in enumerate(self._ordered)}
        return self._ordered

    def first_in_line(self, me: str) -> Decision | None:
        """The mutex rule's decision for ``me`` in O(1) (after one sort); None if
        ``me`` is not in this listing."""
        ordered = self._sort()
        place = self._index.get(me)
        if place is None:
            return None
        if place == 0:
            return Decision(True)
        return Decision(False, ordered[place - 1], place)

    def ahead_of(self, name: str) -> str | None:
        """The contender just ahead of ``name`` in this listing (None: none, or
        ``name`` is not listed)."""
        ordered = self._sort()
        place = self._index.get(name)
        return ordered[place - 1] if place else None


class QueueView:
    """What one client knows about the queue under one path, shared by all its
    contenders there (``Client.recipe_state``), so that neither queueing nor a
    hand-off among them costs a listing per contender.

    - Contenders queueing at the same time share listings: any listing asked
      for after our create was answered shows our node and everything ahead
      of it, which is all a decision needs.
    - A mutex holder that lets go marks its node *released*. Its successor
      on this client, woken by the deletion, then holds without listing the
      queue: nothing was ahead of a holder, and nothing can queue ahead later.
    """

    RELEASED_KEPT = 4096
    """How many released holders' names are remembered (older ones: the successor lists)."""

    def __init__(self, client: Client, path: str, lock_names: Sequence[str]) -> None:
        self._client = client
        self._path = path
        self._lock_names = lock_names
        self.entering = 0
        """Contenders between their create and their first listing."""
        self._next: asyncio.Future[_Listing] | None = None
        self._in_flight = False
        self._released: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.own: set[str] = set()
        """The names of this client's contenders now in the queue."""

    def mark_released(self, node: str) -> None:
        """``node`` held the mutex and is about to be deleted by its holder."""
        self._released[node] = None
        if len(self._released) > self.RELEASED_KEPT:
            self._released.popitem(last=False)

    def was_released(self, node: str) -> bool:
        """Whether ``node`` was deleted as a mutex holder (forgotten once asked)."""
        if node not in self._released:
            return False
        del self._released[node]
        return True

    async def listing(self) -> _Listing:
        """A listing asked for after this call: joined by every contender that
        calls while it is not yet sent (one object, sorted once for all)."""
        future = self._next
        if future is None:
            future = self._next = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            if not self._in_flight:
                self._send()
        return await asyncio.shield(future)

    def _send(self) -> None:
        future, self._next = self._next, None
        assert future is not None
        self._in_flight = True
        try:
            self._client.start_background(
                self._list(future), name=f"aiocoord-queue-listing {self._path}"
            )
        except RuntimeError as error:  # the client is closing
            self._in_flight = False
            future.set_exception(error)

    async def _list(self, future: asyncio.Future[_Listing]) -> None:
        try:
            names = await self._client.children(self._path)
        except BaseException as error:
            # Never a CancelledError: that would cancel every asker's task.
            closed = ClientClosedError("the client closed")
            future.set_exception(error if isinstance(error, Exception) else closed)
            if not isinstance(error, Exception):
                raise
        else:
            future.set_result(_Listing(names, self._lock_names))
        finally:
            self._in_flight = False
            if self._next is not None:
                self._send()  # asked for while this one was out


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a shared future's error as seen (each asker handles it its own way)."""
    if not future.cancelled():
        future.exception()


def queue_view(client: Client, path: str, lock_names: Sequence[str]) -> QueueView:
    """The client's view of the mutex queue under ``path``."""
    return client.recipe_state(
        ("aiocoord.contenders", path, tuple(lock_names)),
        lambda: QueueView(client, path, lock_names),
    )


# --- the loop ---------------------------------------------------------------


class _NodeVanished(Exception):
    """Our own contender node is gone (session lost or deleted by someone else)."""


class Contender:
    """One place in the queue under ``path``: create it, wait for it to hold, delete it.

    Every decision to hold is made on a reply from the session that owns our
    node, checked when the decision is made: a reply that arrived in a newer
    session (after the old one, and our node with it, expired) proves nothing
    about our place in the queue.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        lock_name: str,
        lock_names: Sequence[str],
        rule: Rule,
        data: bytes,
        *,
        fixed_suffix: str | None = None,
        last_blocker_shortcut: bool = True,
        acl: Sequence[ACL] | None = None,
        mutex: bool = False,
    ) -> None:
        self._client = client
        self._acl = acl
        """For our node and the parents made for it (None: the client's default)."""
        self._path = path
        self._lock_name = lock_name
        self._lock_names = tuple(lock_names)
        self._rule = rule
        self._data = data
        self._fixed_suffix = fixed_suffix
        # Trusting "the last blocker is gone, so we hold" needs a queue nobody
        # can join ahead of us: false where a read lock's downgrade node may.
        self._shortcut = last_blocker_shortcut
        # A mutex's queue (one holder, nobody queues ahead later) is shared
        # with the client's other contenders there: see QueueView.
        self._view = (
            queue_view(client, path, self._lock_names) if mutex and last_blocker_shortcut else None
        )
        self._holding = False
        self._own: OwnNode | None = None
        self.node: str | None = None
        """Full path of our node, once created."""
        self.czxid = 0
        """zxid of our node's creation: the fencing token."""
        self.session_id = 0
        """The session that owns our node (its ephemeral owner)."""
        self._listing: list[str] | _Listing | None = None
        self.position: int | None = None
        """How many contenders stood in our way at our first look (0: we held at
        once); None before it. For telemetry (``aiocoord.queue_position``)."""

    async def acquire(self, *, timeout: float | None = None) -> bool:
        """Queue up and wait until the rule says we hold; False if ``timeout`` passed.

        ``timeout`` bounds the waiting, not the first look: the node is always
        created and the queue read once (so ``timeout=0`` tries exactly once),
        and that look gives up after one session timeout if ZooKeeper cannot be
        reached. On timeout, cancellation or error our node is deleted before
        returning, also when its create was still in flight: it is found by its
        marker.
        """
        deadline = Deadline(timeout)
        try:
            held = await self._acquire(deadline)
        except BaseException:
            await self.abandon()
            raise
        if not held:
            await self.abandon()
        self._holding = held
        return held

    async def _acquire(self, deadline: Deadline) -> bool:
        while True:
            try:
                if deadline.at is None:
                    await self._enter_queue()
                    return await self._wait_turn(deadline)
                # The first look may outlast a short timeout (see acquire()).
                with anyio.move_on_after(deadline.first_look(self._client)) as scope:
                    await self._enter_queue()
                    holds = await self._wait_turn(deadline, look_only=True)
                if scope.cancelled_caught:
                    return False
                if holds or deadline.passed:
                    return holds
                return await self._wait_turn(deadline)
            except (SessionExpiredError, _NodeVanished):
                # The session took our node with it: queue again, at the back.
                await self.abandon()
                if deadline.passed:
                    return False

    async def _enter_queue(self) -> None:
        name = self._lock_name
        if self._fixed_suffix is not None:
            name += self._fixed_suffix
        self._own = own = OwnNode(
            self._client,
            self._path,
            name,
            self._data,
            ephemeral=True,
            sequential=self._fixed_suffix is None,
            acl=self._acl,
        )
        self.node = None
        self._holding = False
        self.position = None
        view = self._view
        if view is None or view.entering == 0:
            # Create and list in one round trip: the listing is applied after
            # the create, so it contains our node and everything queued before it.
            if view is not None:
                view.entering += 1
            try:
                self._listing = await own.create(list_children=True)
            finally:
                if view is not None:
                    view.entering -= 1
        else:
            # Others of this client are queueing: share one listing with them,
            # rather than each reading the whole queue.
            view.entering += 1
            try:
                await own.create()
                with contextlib.suppress(Exception):  # else _wait_turn lists on its own
                    self._listing = await view.listing()
            finally:
                view.entering -= 1
        assert own.path is not None and own.stat is not None
        self.node = own.path
        if view is not None:
            view.own.add(_paths.basename(own.path))
        self.czxid = own.stat.czxid
        self.session_id = own.stat.ephemeral_owner

    async def queue(self) -> None:
        """Create our node at the back of the queue, without waiting for a turn.

        For recipes that keep their place across several waits (a leader
        latch); :meth:`acquire` does the whole wait. If this raises, the node
        may still have been made: :meth:`abandon` finds and deletes it.
        """
        await self._enter_queue()

    async def wait_turn(self) -> bool:
        """Wait until our node (made by :meth:`queue`) holds: True. False if it
        is gone (its session ended, or someone deleted it): :meth:`abandon` it
        and queue again.

        May be called again on the same node, after a connection blip, to read
        the queue afresh. Waiting rides out SUSPENDED as :meth:`acquire` does.
        """
        try:
            return await self._wait_turn(Deadline(None))
        except (SessionExpiredError, _NodeVanished):
            return False

    def _check_session(self) -> None:
        """Raise _NodeVanished unless the client is still in the session owning our node.

        Called after every await whose result feeds a decision, with no await
        between the check and the decision: a reply read here was produced by
        the server within our session, so our node was alive when it was made.
        """
        if self._client.session_id != self.session_id:
            raise _NodeVanished

    async def _wait_turn(self, deadline: Deadline, *, look_only: bool = False) -> bool:
        """Wait until we hold (True), or until ``deadline`` passes (False).

        With ``look_only``, decide on one listing and never wait.
        """
        client = self._client
        assert self.node is not None
        me = _paths.basename(self.node)
        names, self._listing = self._listing, None
        while True:
            if names is None:
                try:
                    names = await retry_on_connection_loss(
                        client, lambda: client.children(self._path)
                    )
                except NoNodeError:
                    raise _NodeVanished from None
            self._check_session()
            view = self._view
            if view is not None and not isinstance(names, _Listing):
                names = _Listing(names, self._lock_names)
            decision = self._decide(names, me)
            if self.position is None:
                self.position = decision.blockers
            if decision.holds:
                return True
            if look_only:
                self._listing = names  # the wait that follows starts from this look
                return False
            assert decision.watch is not None
            watched = decision.watch
            if view is not None and decision.blockers >= 2 and watched not in view.own:
                # Two or more ahead, the one just ahead of another client: watch
                # the one ahead of it, and list again once that one goes. By then
                # the one just ahead is (or was) first, so its deletion alone
                # proves we hold, and the listing was off the hand-off's path.
                assert isinstance(names, _Listing)
                watched = names.ahead_of(decision.watch) or watched
            names = None  # a long queue's listing must not live on while we wait
            path = f"{self._path}/{watched}"
            if deadline.at is None:
                gone = await wait_change(client, path, session=self.session_id)
            else:
                if deadline.passed:
                    return False
                with anyio.move_on_after(deadline.remaining()) as scope:
                    gone = await wait_change(client, path, session=self.session_id)
                if scope.cancelled_caught:
                    return False
            if gone is Gone.SESSION_ENDED:
                raise _NodeVanished  # the watch belongs to another session
            self._check_session()
            if watched != decision.watch:
                continue  # list again: the one just ahead of us may now be first
            deleted = gone is not None
            if deleted and decision.blockers == 1 and self._shortcut:
                return True
            if deleted and self._view is not None and self._view.was_released(decision.watch):
                return True  # the one ahead of us held: nobody else is left ahead

    def _decide(self, names: list[str] | _Listing, me: str) -> Decision:
        """The rule's decision for ``me``; _NodeVanished if our node is not listed."""
        if isinstance(names, _Listing):
            if self._view is not None:
                decision = names.first_in_line(me)
                if decision is None:
                    raise _NodeVanished
                return decision
            names = names.names
        if me not in names:
            raise _NodeVanished
        return self._rule(names, me)

    async def abandon(self) -> None:
        """Delete our node (or the one a lost create left), shielded and time-bounded."""
        own, self._own = self._own, None
        self._forget_own()
        self.node = None
        self._holding = False
        if own is not None:
            await own.delete()

    def _forget_own(self) -> None:
        if self._view is not None and self.node is not None:
            self._view.own.discard(_paths.basename(self.node))

    async def release(self) -> None:
        """Give up our place (held or not): delete the node, surviving connection loss.

        Returns once the node is gone: deleted, or taken away with the session.
        """
        node = self.node
        if node is None:
            return
        if self._holding and self._view is not None:
            self._view.mark_released(_paths.basename(node))
        self._forget_own()
        self._holding = False
        await self._delete(node)
        self.node = None
        self._own = None

    async def _delete(self, node: str) -> None:
        """Delete ``node`` to the end, whatever cancels the caller meanwhile, as
        :func:`run_cleanup` does.

        While connected, the delete goes out from the calling task, shielded,
        rather than from a task of its own: on every hand-off that is a loop
        pass sooner out (and one sooner back), in the critical path of whoever
        waits on this node. Only a delete cut short (a native cancellation, a
        dropped connection, an expired session) is finished the cleanup's way:
        deleting again is harmless, since a node already gone counts as deleted.
        """
        client = self._client
        if client.connected:
            cut: BaseException
            with anyio.CancelScope(shield=True):
                try:
                    await client.delete(node)
                    return
                except NoNodeError:
                    return
                except BaseException as error:
                    cut = error
            await run_cleanup(client, lambda: delete_quietly(client, node), must_finish=True)
            if not isinstance(cut, Exception):
                raise cut  # a cancellation (or an interrupt) that came meanwhile
            return
        await run_cleanup(client, lambda: delete_quietly(client, node), must_finish=True)
