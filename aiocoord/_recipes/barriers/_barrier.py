"""Barriers: Barrier and DoubleBarrier (Curator's DistributedBarrier and
DistributedDoubleBarrier, node for node, so Java and Python processes meet at
one barrier).

:class:`Barrier` is one persistent node: while it exists, waiters wait; its
deletion lets them all through.

:class:`DoubleBarrier` gathers ``members`` participants, lets them through
together, and releases them again once every one of them has left. Under its
path each participant has an ephemeral node named by a random UUID; whoever
first counts ``members`` of them creates the persistent node ``ready``, which
tells everyone (Curator waits on it) that the barrier is full. Leaving follows
Curator's protocol: with the participant nodes sorted (``ready`` aside), the
lowest watches the highest and deletes itself last, once it is alone; every
other one deletes itself and watches the lowest. Whoever is done deletes
``ready``.

The decisions are pure functions (:func:`enter_decision`,
:func:`leave_decision`), tested without a server; the classes run the loops
around them: read with a watch, decide, wait, and read again after every wake
(a wake is a hint, never a verdict).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_bytes, check_int, check_recipe_acl, check_timeout
from ..._exceptions import (
    BadVersionError,
    BarrierBrokenError,
    ClientClosedError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from ..._session import (
    Client,
    OwnNode,
    Watch,
    delete_quietly,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL, EventType, Stat
from .._kit import Deadline, default_node_data, recipe_path, wait_gone

__all__ = [
    "READY_NODE",
    "Barrier",
    "DoubleBarrier",
    "DoubleBarrierEntry",
    "EnterDecision",
    "LeaveDecision",
    "enter_decision",
    "leave_decision",
]

log = logging.getLogger("aiocoord")

READY_NODE = "ready"
"""Curator's DistributedDoubleBarrier marker: the barrier filled up."""


# --- pure rules -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnterDecision:
    """What a participant makes of one listing of the barrier's children.

    ``entered`` counts the participant nodes (``ready`` aside). ``passed``: the
    barrier is full, go through. ``create_ready``: we are the one who saw it
    fill up, so create ``ready`` for the others (Curator's participants wait
    on that node alone).
    """

    entered: int
    passed: bool
    create_ready: bool = False


def enter_decision(children: Collection[str], members: int) -> EnterDecision:
    """Pass once ``members`` participants are there, or once someone saw them there.

    ``ready`` exists only if a participant counted ``members`` nodes, so it lets
    us through even if some have already left again (fast participants may
    finish before a slow one looks).
    """
    ready = READY_NODE in children
    entered = len(children) - ready
    if ready:
        return EnterDecision(entered, True)
    if entered >= members:
        return EnterDecision(entered, True, create_ready=True)
    return EnterDecision(entered, False)


@dataclass(frozen=True, slots=True)
class LeaveDecision:
    """What a leaving participant does after one listing.

    ``done``: everyone has left (after deleting our node, if ``delete_me``).
    Otherwise delete our node if ``delete_me``, and wait for ``watch`` (a
    participant node's name) to go.
    """

    done: bool
    delete_me: bool = False
    watch: str | None = None


def leave_decision(children: Collection[str], me: str) -> LeaveDecision:
    """Curator's leave protocol, seen from participant ``me``.

    Participants sorted by name, ``ready`` aside: the lowest stays, watching
    the highest, until it is alone, then deletes itself and is done; any other
    deletes itself and watches the lowest. ``me`` missing from ``children``
    means we have already deleted our node (the caller checks that it was us).

    One difference from Curator: a participant that deleted itself is done
    only when no participant node of its round is left, not when the lowest
    one is the last: the lowest may not have started leaving yet. Its round is
    over once ``ready`` is gone (the round's last leaver deletes it after
    seeing no node left), so nodes listed without ``ready`` belong to the next
    round: a late entrant that sat our round out may already be back, and
    waiting for it would hold this leave until the next round leaves.
    """
    participants = sorted(name for name in children if name != READY_NODE)
    if not participants:
        return LeaveDecision(True)
    lowest = participants[0]
    if me not in participants:
        if READY_NODE not in children:
            return LeaveDecision(True)
        return LeaveDecision(False, watch=lowest)
    if len(participants) == 1:
        return LeaveDecision(True, delete_me=True)
    if me == lowest:
        return LeaveDecision(False, watch=participants[-1])
    return LeaveDecision(False, delete_me=True, watch=lowest)


class _LateForRound(Exception):
    """Our node was made after the ``ready`` of a round that is still under way."""

    def __init__(self, ready_czxid: int) -> None:
        super().__init__(ready_czxid)
        self.ready_czxid = ready_czxid


# --- Barrier ----------------------------------------------------------------


class Barrier:
    """A gate at ``path`` (Curator's DistributedBarrier): closed while the node exists.

    One process calls :meth:`set_barrier`; any number wait in
    :meth:`wait_on_barrier` until someone calls :meth:`remove_barrier`.
    Waiting costs one exists-watch per wake, and rides out dropped
    connections and even a lost session (the node is looked at again).

    ``acl`` (default: the client's ``default_acl``) is the ACL of the barrier
    node and of the missing parents :meth:`set_barrier` makes.
    """

    def __init__(self, client: Client, path: str, *, acl: Sequence[ACL] | None = None) -> None:
        recipe_path(client, path, "barrier")
        self._client = client
        self.path = path
        self._acl = check_recipe_acl(acl, path)
        self._tags = _telemetry.recipe_tags(client.telemetry, "barrier", path, client.namespace)

    def __repr__(self) -> str:
        return f"<Barrier {self.path!r}>"

    async def set_barrier(self) -> None:
        """Close the gate: create the node (and missing parents, as containers).

        Setting a barrier that is already set does nothing.
        """
        client = self._client

        async def create() -> None:
            with contextlib.suppress(NodeExistsError):
                await client.create(self.path, container_parents=True, acl=self._acl)

        await retry_on_connection_loss(client, create)

    async def remove_barrier(self) -> None:
        """Open the gate: delete the node; every waiter goes through. Already open is fine."""
        await delete_quietly(self._client, self.path)

    async def wait_on_barrier(self, *, timeout: float | None = None) -> bool:
        """Wait until the barrier is removed (True at once if it is not set).

        False if ``timeout`` seconds passed first; ``timeout=0`` looks once.
        An enclosing deadline (``asyncio.timeout``, ``anyio.fail_after``)
        cancels the wait as usual. A dropped connection is ridden out (the
        watch survives the reconnection); after a lost session the node is
        looked at again, so a removal the session missed is not missed here.
        """
        deadline = Deadline(check_timeout(timeout, path=self.path))
        with _telemetry.span("aiocoord.barrier.wait", self._tags) as op:
            opened = await wait_gone(self._client, self.path, deadline=deadline) is not None
            op.outcome("passed" if opened else "timeout")
            return opened


# --- DoubleBarrier ----------------------------------------------------------


async def _delete_later(client: Client, node: str) -> None:
    """Delete ``node`` once ZooKeeper is back; done if the session ends first
    (the ephemeral node goes with it)."""
    with (
        client.request_timeout(None),
        contextlib.suppress(SessionExpiredError, ClientClosedError, ConnectionLossError),
    ):
        await delete_quietly(client, node)


class DoubleBarrier:
    """``members`` participants enter together and leave together
    (Curator's DistributedDoubleBarrier).

    One object is one participant (make one per participant, sharing a client
    or not)::

        async with barrier.enter():   # waits until `members` have entered
            ...                       # everyone is in here together
        # here every participant has left

    or, as Curator has it, ``await barrier.enter(timeout=t)`` and
    ``await barrier.leave(timeout=t)``, each True once done and False if
    ``timeout`` passed first.

    Failures: a timed-out, cancelled or failed enter or leave deletes our node
    before returning (shielded; if ZooKeeper is out of reach, as soon as it is
    back, in the background), so nobody counts a participant that gave up.
    Waiting rides out dropped connections; if our session is lost while our
    node should exist, BarrierBrokenError (the others may count it as gone).
    A participant whose session ends, or whose client closes, counts as gone:
    the others' enter stops counting it, and their leave sees it as left.

    Rounds follow one another: a participant arriving after the round under
    way filled waits, without a node, for it to end, then fills the next
    (Curator's would pass with the round inside).

    ``acl`` (default: the client's ``default_acl``) is the ACL of every node
    the barrier makes: participants, ``ready``, and missing parents.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        members: int,
        *,
        data: bytes | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "double barrier")
        self.members = check_int(members, "members", path=path, minimum=1)
        self._client = client
        self.path = path
        self._tags = _telemetry.recipe_tags(
            client.telemetry, "double_barrier", path, client.namespace
        )
        self._data = default_node_data() if data is None else check_bytes(data, "data", path=path)
        self._acl = check_recipe_acl(acl, path)
        self._ready = _paths.join(path, READY_NODE)
        self._node: str | None = None
        self._owner = 0
        """The session that owns our node."""
        self._czxid = 0
        """The zxid that made our node: a ``ready`` older than it is another round's."""
        self._entered = False
        self._busy: str | None = None

    def __repr__(self) -> str:
        state = self._busy or ("entered" if self._entered else "outside")
        return f"<DoubleBarrier {self.path!r} members={self.members} {state}>"

    @property
    def is_entered(self) -> bool:
        """True from a successful enter until this participant leaves (or gives up)."""
        return self._entered

    @property
    def node(self) -> str | None:
        """This participant's node (``<path>/<uuid>``) while it has one, else None."""
        return self._node

    async def enter(self, *, timeout: float | None = None) -> bool:
        """Enter: wait until ``members`` participants have entered: True; False if
        ``timeout`` passed first (``timeout=0`` looks once), as Curator's
        ``enter(time, unit)``. For a block between entering and leaving, use
        :meth:`entered`. Entering again before leaving is a RuntimeError.

        An enter that gives up deletes its node before it returns when
        ZooKeeper is reachable; while the client is disconnected the delete
        waits for the connection (or the session's expiry), and until then the
        other participants still count this one.
        """
        return await self._enter(check_timeout(timeout, path=self.path))

    def entered(self, *, timeout: float | None = None) -> DoubleBarrierEntry:
        """``async with barrier.entered(timeout=t):`` enter, run the block, leave: a
        context manager, so it raises OperationTimeoutError where :meth:`enter` and
        :meth:`leave` answer False (see :class:`DoubleBarrierEntry`)."""
        return DoubleBarrierEntry(self, timeout=check_timeout(timeout, path=self.path))

    async def leave(self, *, timeout: float | None = None) -> bool:
        """Leave: delete our node and wait until every participant has left.

        True once all have; False if ``timeout`` passed first (our node is
        deleted then too: we are out, without waiting for the others).
        BarrierBrokenError if our session was lost before our node was
        deleted; RuntimeError if this participant has not entered.
        """
        timeout = check_timeout(timeout, path=self.path)
        if not self._entered:
            raise RuntimeError(f"this participant has not entered the barrier {self.path!r}")
        self._start("leaving")
        try:
            with _telemetry.span("aiocoord.barrier.leave", self._tags) as op:
                left = await self._guarded(self._leave_phase(Deadline(timeout)), "leaving")
                op.outcome("left" if left else "timeout")
            if not left:
                await self._discard()
            self._node = None
            self._entered = False
            return left
        finally:
            self._busy = None

    def _start(self, doing: str) -> None:
        if self._busy is not None:
            raise RuntimeError(
                f"this participant is already {self._busy} the barrier {self.path!r}: "
                "one DoubleBarrier object is one participant"
            )
        self._busy = doing

    async def _enter(self, timeout: float | None) -> bool:
        if self._entered:
            raise RuntimeError(
                f"this participant already entered the barrier {self.path!r}: leave it first "
                "(one DoubleBarrier object is one participant)"
            )
        self._start("entering")
        try:
            with _telemetry.span("aiocoord.barrier.enter", self._tags) as op:
                op.set("aiocoord.members", self.members)
                entered = await self._guarded(self._enter_phase(Deadline(timeout)), "entering")
                op.outcome("entered" if entered else "timeout")
            if not entered:
                await self._discard()
            self._entered = entered
            return entered
        finally:
            self._busy = None

    async def _guarded(self, phase: Coroutine[Any, Any, bool], doing: str) -> bool:
        """Run an enter or leave phase; on any way out but a result, delete our node."""
        try:
            return await phase
        except SessionExpiredError as error:
            await self._discard()
            raise BarrierBrokenError(
                self.path, f"the session owning our node was lost while {doing}"
            ) from error
        except BaseException:
            await self._discard()
            raise

    async def _discard(self) -> None:
        """Delete our node (if any): now if ZooKeeper is reachable (shielded and
        time-bounded), else in the background once it is back.

        A delete begun while connected can still fail to land: the connection
        drops under it and does not come back within the request timeout
        (NoConnectionError, which the cleanup swallows), the retries run out,
        or the cleanup's bound passes. The session may well survive that, and
        with it our node, which the others would count for as long as the
        session lives: such a delete is handed to the background too."""
        node, self._node = self._node, None
        self._entered = False
        if node is None:
            return
        client = self._client
        if client.connected:
            settled = False

            async def delete() -> None:
                nonlocal settled
                try:
                    await delete_quietly(client, node)
                except (ConnectionLossError, asyncio.CancelledError):
                    raise  # not sent, or not known to have landed: left unsettled
                except BaseException:
                    settled = True  # refused for good (or the session took the node)
                    raise
                settled = True

            try:
                await run_cleanup(client, delete)
            except ConnectionLossError:
                pass  # the retries ran out: the background delete below takes over
            finally:
                if not settled:
                    self._delete_later(node)
        else:
            self._delete_later(node)

    def _delete_later(self, node: str) -> None:
        client = self._client
        if not client.closed:
            client.start_background(
                _delete_later(client, node), name=f"aiocoord-barrier-cleanup {node}"
            )

    # --- the phases -------------------------------------------------------------

    def _check(self, names: Collection[str], me: str) -> None:
        """BarrierBrokenError unless ``names`` was read in the session that owns our
        node, and shows it. No await between this and the decision it guards."""
        if self._client.session_id != self._owner:
            raise BarrierBrokenError(self.path, "the session owning our node was lost")
        if me not in names:
            raise BarrierBrokenError(self.path, f"our node {me!r} was deleted by someone else")

    async def _list(self) -> list[str]:
        client = self._client
        try:
            return await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            raise BarrierBrokenError(self.path, "the barrier's node was deleted") from None

    async def _create_and_list(self, node: str) -> tuple[Stat, list[str] | None]:
        """Create our node and list the barrier in one round trip: the listing
        follows the create, so it shows our node and every one made before it.
        The listing is None if it could not be had that way."""
        own = OwnNode(
            self._client,
            self.path,
            _paths.basename(node),  # a fresh UUID: its own marker
            self._data,
            protected=False,
            ephemeral=True,
            acl=self._acl,
        )
        names = await own.create(list_children=True)
        assert own.stat is not None
        return own.stat, names

    async def _look(self, node: str, names: list[str] | None = None) -> tuple[bool, Watch | None]:
        """One look at the barrier: (passed, the watch on ``ready`` to wait on if not).

        The participant whose create came last (the highest zxid) always sees
        every node created before it, even through a lagging server (a reply
        follows the client's own writes), so whoever completes the barrier
        sees it full and creates ``ready``. Any listing that shows it full
        passes; otherwise ``ready`` is watched after the listing (a creation
        in between is seen by the watch's read).
        """
        client = self._client
        if names is not None and await self._decide(node, names):
            return True, None
        stat, watch = await retry_on_connection_loss(
            client, functools.partial(client.watch_exists, self._ready)
        )
        try:
            # The watch may come from a new session (ours expired after the
            # listing): waiting on it would wait for a barrier we are not in.
            self._check_owner()
            # With ``ready`` there, the listing tells whether its round is ours.
            if (stat is not None or names is None) and await self._decide(node, await self._list()):
                watch.cancel()
                return True, None
        except BaseException:
            watch.cancel()
            raise
        return False, watch

    async def _decide(self, node: str, names: list[str]) -> bool:
        """Pass (creating ``ready`` if we saw the barrier fill) or not, on ``names``.

        _LateForRound if ``ready`` belongs to a round that filled before our
        node was made.
        """
        self._check(names, _paths.basename(node))
        if READY_NODE in names:
            ready = await self._live_ready(names)
            if ready is not None:
                if ready.czxid < self._czxid:
                    raise _LateForRound(ready.czxid)
                return True
            names = [name for name in names if name != READY_NODE]
        decision = enter_decision(names, self.members)
        if decision.create_ready:
            await self._create_ready(node)
        return decision.passed

    async def _live_ready(self, names: list[str]) -> Stat | None:
        """The ``ready`` node of a round still under way; None if there is none
        (gone, or left by a round that is over, which is deleted here).

        ``ready`` is made after every node of its round, and its round's last
        leaver deletes it; while any of that round is still here (a slow
        participant that has yet to look, or one still inside), some node is
        older than it. When none is, the round ended without leaving (its
        participants crashed or their sessions ended): passing on its ``ready``
        would let the next round through before it is full. Curator's
        participants do pass on it.
        """
        client = self._client
        others = [name for name in names if name != READY_NODE]
        pipeline = client.pipeline().exists(self._ready)
        for name in others:
            pipeline.exists(_paths.join(self.path, name))
        ready, *stats = await retry_on_connection_loss(client, pipeline.execute)
        if not isinstance(ready, Stat):
            return None  # gone meanwhile: the listing minus ready is the truth
        if any(isinstance(stat, Stat) and stat.czxid < ready.czxid for stat in stats):
            return ready
        with contextlib.suppress(NoNodeError, BadVersionError):
            await retry_on_connection_loss(
                client, lambda: client.delete(self._ready, version=ready.version)
            )
        log.info("double barrier %r: removed a ready node its round left behind", self.path)
        return None

    async def _enter_phase(self, deadline: Deadline) -> bool:
        while True:
            # A fresh name per node: one an earlier attempt could not delete
            # (ZooKeeper out of reach) is never mistaken for this one.
            node = self._node = _paths.join(self.path, str(uuid.uuid4()))
            self._owner = self._czxid = 0
            try:
                return await self._enter_round(node, deadline)
            except _LateForRound as late:
                if not await self._sit_out(node, late.ready_czxid, deadline):
                    return False

    async def _sit_out(self, node: str, ready_czxid: int, deadline: Deadline) -> bool:
        """Wait, without a node, for the round that filled before our node was
        made to end; False if the deadline passed first.

        Keeping our node would make that round's leavers (Curator's too) wait
        for us, while we wait for them to go: we take it away and come back
        once the round's ``ready`` is gone. Someone in the next round may have
        counted our node in the moment before we took it away; for them we are
        like a participant that gave up after being counted.
        """
        client = self._client
        with contextlib.suppress(SessionExpiredError):
            await delete_quietly(client, node)
        self._node = None
        while True:
            try:
                with anyio.move_on_after(deadline.remaining()) as scope:
                    try:
                        names, _stat, watch = await retry_on_connection_loss(
                            client, functools.partial(client.watch_children, self.path)
                        )
                    except NoNodeError:
                        return True  # the container went with the round's last node
                    async with watch:
                        if READY_NODE not in names:
                            return True
                        # Watching the children, not just ``ready``: if the round's
                        # participants all die, only a look at them removes its ready.
                        ready = await self._live_ready(names)
                        if ready is None or ready.czxid != ready_czxid:
                            return True
                        await watch
                if scope.cancelled_caught:
                    return False
            except SessionExpiredError:
                continue  # we have no node to lose: look again in the new session

    async def _enter_round(self, node: str, deadline: Deadline) -> bool:
        client = self._client
        watch: Watch | None = None
        try:
            with anyio.move_on_after(deadline.first_look(client)) as scope:
                stat, names = await self._create_and_list(node)
                self._owner, self._czxid = stat.ephemeral_owner, stat.czxid
                passed, watch = await self._look(node, names)
            if scope.cancelled_caught:
                return False
            while not passed:
                assert watch is not None
                # Curator's waiters wait for `ready` alone, and so do we: its
                # creation is the verdict (no request needed to pass, so a
                # release wakes every waiter at the cost of one notification).
                # Any other wake is only a hint: look again (curator#1290).
                with anyio.move_on_after(deadline.remaining()) as scope:
                    event = await watch
                if scope.cancelled_caught:
                    return False
                watch.cancel()
                watch = None
                if event.type is EventType.CREATED:
                    self._check_owner()
                    return True
                with anyio.move_on_after(deadline.remaining()) as scope:
                    passed, watch = await self._look(node)
                if scope.cancelled_caught:
                    return False
            return True
        finally:
            if watch is not None:
                watch.cancel()

    def _check_owner(self) -> None:
        """BarrierBrokenError unless the client is still in the session owning our node."""
        if self._client.session_id != self._owner:
            raise BarrierBrokenError(self.path, "the session owning our node was lost")

    async def _create_ready(self, node: str) -> None:
        """Create ``ready``, only while our node stands: a create that a retry
        delays past our leaving must not open the next round early."""
        client = self._client

        async def create() -> None:
            try:
                await client.transaction().check(node).create(self._ready, acl=self._acl).commit()
            except NodeExistsError:
                pass  # someone else saw it full first
            except NoNodeError:
                raise BarrierBrokenError(self.path, "our node was deleted") from None

        await retry_on_connection_loss(client, create)

    async def _children(self) -> list[str]:
        client = self._client
        try:
            return await retry_on_connection_loss(client, lambda: client.children(self.path))
        except NoNodeError:
            return []  # the (container) path went with its last child

    async def _leave_phase(self, deadline: Deadline) -> bool:
        """Curator's leave loop. The timeout bounds the looking and the waiting;
        once everyone has left, finishing up (our node if we are last, then
        ``ready``) is not cut short."""
        client = self._client
        node = self._node
        assert node is not None
        me = _paths.basename(node)
        deleted = False
        budget = deadline.first_look(client)
        while True:
            try:
                with anyio.move_on_after(budget) as scope:
                    names = await self._children()
                if scope.cancelled_caught:
                    return False
                budget = deadline.remaining()
                if not deleted:
                    self._check(names, me)
                decision = leave_decision(names, me)
                if decision.done:
                    if decision.delete_me:
                        await delete_quietly(client, node)
                        self._node = None
                    break
                assert decision.watch is not None
                watched = _paths.join(self.path, decision.watch)
                with anyio.move_on_after(budget) as scope:
                    stat, watch = await retry_on_connection_loss(
                        client, functools.partial(client.watch_exists, watched)
                    )
                    async with watch:
                        if decision.delete_me and not deleted:
                            # Watch first, then delete (as Curator does): the
                            # lowest may be waiting for exactly this deletion.
                            await delete_quietly(client, node)
                            deleted = True
                            self._node = None
                        if stat is not None:
                            await watch
                if scope.cancelled_caught:
                    return False
            except SessionExpiredError:
                if not deleted:
                    raise
                # Our node is gone already, by our own hand: a lost session
                # changes nothing for us. Look again in the new one.
                budget = deadline.remaining()
        with contextlib.suppress(SessionExpiredError):
            await delete_quietly(client, self._ready)
        return True


class DoubleBarrierEntry:
    """What :meth:`DoubleBarrier.entered` returns: ``async with entry as barrier:``
    enters (OperationTimeoutError if the timeout passes first), runs the block,
    then leaves and waits until every participant has left (the same timeout,
    again OperationTimeoutError). If the block raises (or is cancelled), our
    node is deleted at once and the block's exception propagates without waiting
    for the others: they see us as gone and are not held up. It may be entered
    again once its block is over.
    """

    __slots__ = ("_barrier", "_timeout")

    def __init__(self, barrier: DoubleBarrier, *, timeout: float | None) -> None:
        self._barrier = barrier
        self._timeout = timeout

    def __repr__(self) -> str:
        barrier = self._barrier
        return (
            f"<DoubleBarrierEntry {barrier.path!r} members={barrier.members} "
            f"timeout={self._timeout}>"
        )

    async def __aenter__(self) -> DoubleBarrier:
        barrier = self._barrier
        if not await barrier._enter(self._timeout):
            raise OperationTimeoutError(
                f"{barrier.members} participants did not enter {barrier.path!r} "
                f"within {self._timeout} s"
            )
        return barrier

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        barrier = self._barrier
        if not barrier.is_entered:
            return  # left inside the block already
        if exc_type is not None:
            await barrier._discard()
            return
        if not await barrier.leave(timeout=self._timeout):
            raise OperationTimeoutError(
                f"not every participant left {barrier.path!r} within {self._timeout} s"
            )
