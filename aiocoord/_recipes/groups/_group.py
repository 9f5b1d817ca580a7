"""Group membership (Curator's GroupMember, node for node).

Each member keeps one ephemeral node, ``<group path>/<member id>``, holding its
data; the group is the children of the group path. Missing ancestors are made
as containers, so the server sweeps an empty group away. Curator's members and
ours share a group: same names, same data, same node kinds.

A member's node lives as long as its session, and the member makes it again
(from a background task) whenever it went without the member leaving: after a
session expiry, or a delete by someone else. A member id is one node name, so
one session at a time can hold it: a member never takes over a node another
session holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_bytes, check_recipe_acl, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    ClientClosedError,
    CoordinationError,
    DataTooLargeError,
    InvalidPathError,
    MemberIdInUseError,
    NodeExistsError,
    NoNodeError,
    SessionError,
    SessionExpiredError,
)
from ..._session import (
    Broadcast,
    ChangeStream,
    Client,
    ConnectionState,
    retry_on_connection_loss,
    run_cleanup,
    track_sends,
)
from ..._types import ACL, Stat, WatchEvent
from .._kit._args import generated_participant_id, recipe_path
from .._kit._children import read_children
from .._kit._follow import Rereads, follow_subtree
from .._kit._lifecycle import Lifecycle, Phase, Resource
from .._kit._participants import Participant
from .._kit._pulse import Pulse
from .._kit._waits import wait_gone, wait_out_session

__all__ = ["GroupMember"]


class _EarlierSession(Exception):
    """Our node is there, owned by one of this member's earlier sessions."""

    def __init__(self, owner: int) -> None:
        super().__init__(owner)
        self.owner = owner


log = logging.getLogger("aiocoord")

_LOCAL_MEMBERS = "aiocoord.group-members"
"""Key of the client's recipe state holding the nodes its running members keep."""

_MAX_PAUSE = 2.0
"""Longest pause between attempts to re-create our node when the server refuses (seconds)."""


def _member_id(path: str, member_id: object) -> str:
    """``member_id`` if it can be a child node's name under ``path``, else raise."""
    if not isinstance(member_id, str):
        raise ArgumentTypeError("participant_id", "str", member_id, path)
    node = f"{path}/{member_id}"
    if not member_id:
        raise InvalidPathError(node, "the member id is empty")
    if "/" in member_id:
        raise InvalidPathError(node, "a member id is one node name: it cannot hold '/'")
    if member_id in (".", ".."):
        raise InvalidPathError(node, f"{member_id!r} cannot be a member id")
    _paths.validate_path(node)  # the code points ZooKeeper refuses
    return member_id


class GroupMember(Resource):
    """Membership of one group: our own node in it, and a view of everyone's.

    ``async with GroupMember(client, "/services/api", participant_id="host-1",
    data=b"10.0.0.1:80"):`` keeps the ephemeral node ``/services/api/host-1``
    holding that data (empty without ``data``) until the block ends.
    :meth:`participants` reads the whole group, :meth:`changes` follows it.

    While a member is running, its node is re-created (in a background task of
    the client) whenever it goes: after the session expired, or when another
    client deleted it. ``is_member`` says whether the node is believed to
    exist (it stays True while the connection is down but the session may
    live on). The node is never taken from another live session: if the id is
    held by one, :meth:`start` raises :class:`MemberIdInUseError`; if another
    session takes the id while ours is being re-created, the member stops
    (``is_member`` stays False), logs a warning, and :meth:`wait_member` and
    :meth:`changes` raise that error. Our node still held by one of our own
    earlier sessions (the client gave it up before the server expired it) is
    not another's: the member waits for it to go with that session, then
    makes it again. Leaving (:meth:`aclose`) deletes the node.

    ``acl`` (default: the client's ``default_acl``) is the ACL of our node and
    of the missing group path and parents made for it.

    ``start()`` creates our node (or adopts it, if our own session already has
    it); MemberIdInUseError, having created nothing, if another session holds
    the id (its node is left alone) or another running member of this client
    does. A failed start may be tried again. ``aclose()`` stops keeping the
    node, deletes it, and ends ``changes()`` iterators.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        *,
        participant_id: str | None = None,
        data: bytes | None = None,
        acl: Sequence[ACL] | None = None,
    ) -> None:
        recipe_path(client, path, "group")
        self._acl = check_recipe_acl(acl, path)
        """The ACL of our node and of the missing parents made for it."""
        self._client = client
        self._group = path
        if participant_id is None:
            participant_id = generated_participant_id()
        self._id = _member_id(path, participant_id)
        self._node = f"{path}/{participant_id}"
        self._data = b"" if data is None else self._checked(data)
        self._life = Lifecycle(f"group member {self._node!r}", self._open, self._shut)
        super().__init__(self._life)
        self._listeners: Broadcast[list[Participant]] = Broadcast(f"members of {path!r}")
        self._follower: asyncio.Task[Any] | None = None
        """The task feeding the listeners from one :meth:`changes` stream."""
        self._session = 0
        """The session that owns our node, once created."""
        self._sessions: set[int] = set()
        """Every session our node was made or adopted in: a node of an earlier one is
        ours, on its way out with that session, not another member's."""
        self._is_member = False
        self._failure: BaseException | None = None
        self._keeper: asyncio.Task[Any] | None = None
        self._writing = asyncio.Lock()
        """Serialises our writes to the node (create, adopt, update)."""
        self._signal = Pulse()
        """Fired whenever ``is_member``, the failure or the phase changes."""
        self._observers: set[Rereads] = set()
        tags = _telemetry.recipe_tags(client.telemetry, "group_member", path, client.namespace)
        span_attributes = {**tags.span_attributes, "aiocoord.participant_id": participant_id}
        self._tags = _telemetry.Tags(tags.kind, tags.path, span_attributes, tags.metric_attributes)

    def __repr__(self) -> str:
        state = "failed" if self._failure is not None else self._life.phase.value
        return f"<GroupMember {self._node!r} {state} member={self._is_member}>"

    # --- local state ----------------------------------------------------------------

    @property
    def participant_id(self) -> str:
        """Our id in the group: the name of our node (``<host>:<pid>:<random hex>``
        unless one was given)."""
        return self._id

    @property
    def path(self) -> str:
        """Our node: ``<group path>/<member id>``."""
        return self._node

    @property
    def group_path(self) -> str:
        """The group's path, whose children are the members."""
        return self._group

    @property
    def data(self) -> bytes:
        """The data we publish in our node (as last given; :meth:`update` changes it)."""
        return self._data

    @property
    def is_member(self) -> bool:
        """Whether our node is believed to exist: created, and not known to be gone.

        False before :meth:`start`, after :meth:`aclose`, from when the session
        is reported lost or the node deleted until it is made again, and for
        good once another session took our id.
        """
        return self._is_member

    def _checked(self, data: object) -> bytes:
        value = check_bytes(data, "member data", path=self._node)
        limit = self._client.max_data_size
        if len(value) > limit:
            raise DataTooLargeError(self._node, len(value), limit)
        return value

    def _changed(self) -> None:
        self._signal.fire()
        for observer in list(self._observers):
            observer.wake()

    def _set_member(self, value: bool) -> None:
        if self._is_member != value:
            self._is_member = value
            self._changed()

    # --- joining and leaving --------------------------------------------------------------

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`): make our node, start keeping it."""
        client = self._client
        local = client.recipe_state(_LOCAL_MEMBERS, set[str])
        if self._node in local:
            # Our session owns that node, so it would pass for ours: refuse it here.
            raise MemberIdInUseError(self._node)
        local.add(self._node)
        self._failure = None
        client.add_listener(self._on_state)
        with track_sends() as sends, _telemetry.span("aiocoord.group.join", self._tags) as op:
            try:
                await self._join()
                op.outcome("joined")
                self._keeper = client.start_background(
                    self._keep(), name=f"aiocoord-group-member {self._node}", on_error=self._fail
                )
            except BaseException as error:
                client.remove_listener(self._on_state)
                local.discard(self._node)
                self._set_member(False)
                # A create that never left the client made nothing to look for.
                if sends.sent and not isinstance(error, MemberIdInUseError):
                    await self._delete_own()
                raise

    async def _shut(self, started: bool) -> None:
        """The closing (see :class:`Lifecycle`): stop the keeper, delete our node."""
        client = self._client
        if started:
            client.remove_listener(self._on_state)
            keeper, self._keeper = self._keeper, None
            try:
                with _telemetry.span("aiocoord.group.leave", self._tags) as op:
                    await run_cleanup(client, lambda: self._leave(keeper))
                    op.outcome("left")
            finally:
                client.recipe_state(_LOCAL_MEMBERS, set[str]).discard(self._node)
        self._is_member = False
        self._changed()  # waiters and changes() iterators see the close

    async def _leave(self, keeper: asyncio.Task[Any] | None) -> None:
        if keeper is not None:
            keeper.cancel()
            await asyncio.wait([keeper])  # unlike awaiting it, never swallows our own cancellation
        await self._delete_own()

    def _on_state(self, state: ConnectionState) -> None:
        if state is ConnectionState.LOST:
            self._set_member(False)  # the node went with the session

    async def _join(self) -> None:
        """Create our node or adopt it; MemberIdInUseError if another session has it.

        A node of one of our earlier sessions is waited out: the client declared
        that session lost on its own, but the server keeps it (and our node) until
        it expires it there, up to a session timeout later (longer if a leader
        change restarted its clock). It goes with that session; then we join.
        """
        while True:
            try:
                async with self._writing:
                    stat = await retry_on_connection_loss(self._client, self._create_or_adopt)
            except SessionExpiredError:
                continue  # nothing was made in the new session: try there
            except _EarlierSession as earlier:
                log.info(
                    "group member %r: our node is still held by our earlier session "
                    "0x%x; waiting for the server to expire it",
                    self._node,
                    earlier.owner,
                )
                await wait_out_session(self._client, self._node, earlier.owner)
                continue
            if stat is not None:
                self._session = stat.ephemeral_owner
                self._sessions.add(self._session)
                self._set_member(True)
                return

    async def _create_or_adopt(self) -> Stat | None:
        """One attempt: our node's Stat, made or adopted in the current session; None
        to look again (the session changed, or a node vanished, mid-way)."""
        client = self._client
        session = client.session_id
        try:
            _path, stat = await client.create_with_stat(
                self._node, self._data, ephemeral=True, container_parents=True, acl=self._acl
            )
        except NoNodeError:
            return None  # the group's container was swept away between its create and ours
        except NodeExistsError:
            found = await client.exists(self._node)
            # Only a reply from a session that did not change under it tells who owns it.
            if found is None or client.session_id != session:
                return None
            if found.ephemeral_owner != session:
                if found.ephemeral_owner in self._sessions:
                    raise _EarlierSession(found.ephemeral_owner) from None
                raise MemberIdInUseError(self._node) from None
            # Ours already: a create whose reply was lost made it. Publish our data.
            try:
                stat = await client.set(self._node, self._data, version=found.version)
            except (BadVersionError, NoNodeError):
                return None
        if client.session_id != stat.ephemeral_owner:
            return None  # made in a session that has ended since: it is gone
        return stat

    async def _delete_own(self) -> None:
        """Delete our node if our current session owns it; never another session's."""
        client = self._client
        node = self._node

        async def delete() -> None:
            while True:
                session = client.session_id
                stat = await retry_on_connection_loss(client, lambda: client.exists(node))
                if client.session_id != session:
                    continue
                if stat is None or stat.ephemeral_owner != session:
                    return
                try:
                    await retry_on_connection_loss(
                        client, functools.partial(client.delete, node, version=stat.version)
                    )
                    return
                except NoNodeError:
                    return
                except BadVersionError:
                    continue  # data set meanwhile: look again

        await run_cleanup(client, delete)

    # --- keeping our node -----------------------------------------------------------------

    async def _keep(self) -> None:
        """Watch our node; make it again whenever it goes; until closed or the id is taken."""
        try:
            while True:
                await self._wait_gone()
                self._set_member(False)
                if self._life.closed:
                    return
                log.info("group member %r: our node is gone; creating it again", self._node)
                await self._rejoin()
        except ClientClosedError:
            self._set_member(False)
        except MemberIdInUseError as error:
            self._fail(error)

    def _check_failure(self) -> None:
        failure = self._failure
        if isinstance(failure, MemberIdInUseError):
            raise MemberIdInUseError(self._node)  # a fresh one each time: no growing traceback
        if failure is not None:
            raise failure

    def _fail(self, error: BaseException) -> None:
        log.warning(
            "group member %r: no longer a member (%s); it stays out until closed",
            self._node,
            error,
        )
        self._failure = error
        self._is_member = False
        self._changed()

    async def _wait_gone(self) -> None:
        """Return once our node is gone: deleted, or taken away with our session.

        Outages of any length are ridden out: our node may live on in the session.
        """
        session = self._session
        await wait_gone(
            self._client,
            self._node,
            session=session,
            gone_if=lambda stat: stat.ephemeral_owner != session,
            outlast_outages=True,
        )

    async def _rejoin(self) -> None:
        """Make our node again, through outages; MemberIdInUseError if the id was taken."""
        failures = 0
        while True:
            try:
                await self._join()
                log.info("group member %r: our node is back", self._node)
                _telemetry.add("aiocoord.group.rejoins", 1, self._tags.metric_attributes)
                return
            except (MemberIdInUseError, ClientClosedError):
                raise
            except SessionError:
                await self._client.wait_connected()
            except CoordinationError as error:
                failures += 1
                log.warning(
                    "group member %r: creating our node failed (%r); trying again",
                    self._node,
                    error,
                )
                await anyio.sleep(min(0.05 * 2**failures, _MAX_PAUSE))

    # --- our data -------------------------------------------------------------------------

    async def update(self, data: bytes) -> None:
        """Publish ``data`` in our node from now on (also when it is made again).

        Before :meth:`start` it only sets what ``start()`` will publish.
        While our node is gone (being re-created) the new data goes with the
        re-creation. MemberIdInUseError if another session took our id;
        RecipeClosedError once closed; NoConnectionError if ZooKeeper could not be
        reached in time (the data is kept, but only a re-creation or another
        call publishes it then).
        """
        value = self._checked(data)
        self._life.check_open()
        self._data = value
        self._check_failure()
        if self._life.phase is Phase.NEW:
            return
        # If our node went with the session, the keeper makes it again, with this data.
        with _telemetry.span("aiocoord.group.update", self._tags) as op:
            async with self._writing:
                with contextlib.suppress(SessionExpiredError):
                    await self._write_data()
            op.outcome("updated")

    async def _write_data(self) -> None:
        client = self._client
        while True:
            session = client.session_id
            stat = await retry_on_connection_loss(client, lambda: client.exists(self._node))
            if client.session_id != session:
                continue
            if stat is None or stat.ephemeral_owner != session:
                return  # gone: the keeper makes it again, with this data
            try:
                await retry_on_connection_loss(
                    client,
                    functools.partial(client.set, self._node, self._data, version=stat.version),
                )
                return
            except NoNodeError:
                return
            except BadVersionError:
                continue  # set by someone else meanwhile: look again

    async def wait_member(self, *, timeout: float | None = None) -> bool:
        """Wait until our node is believed to exist (at once if it is): True; False
        if ``timeout`` passed first.

        For after an outage: returns once the node is back. Raises
        MemberIdInUseError if another session took our id (we will not be a
        member again), RuntimeError if the member is not started,
        RecipeClosedError once it is closed.
        """
        seconds = check_timeout(timeout, path=self._node)
        with anyio.move_on_after(seconds):
            while True:
                self._check_failure()
                self._life.check_open()
                if self._life.phase is Phase.NEW:
                    raise RuntimeError(f"group member {self._node!r} is new: start() it first")
                if self._is_member:
                    return True
                await self._signal.wait()
        return False

    # --- the group ------------------------------------------------------------------------

    async def participants(self) -> list[Participant]:
        """Every member of the group, sorted by id, with its data (``holds`` is True
        for each: a listed member holds its membership); this member always among
        them (as Curator's ``getCurrentMembers``).

        One listing of the group, then every member's data read in one round
        trip: a member that left between the two is simply absent. Not a
        snapshot of one instant, but each entry is what the server held when
        it was read. This member's own id is there even when its node is not
        (before :meth:`start`, while its node is being made again), with the
        data it publishes; after :meth:`aclose` it has left, and is listed
        only if its node is (another session's). Connection loss is retried
        under the client's policy; any other failed read raises.
        """
        children = await read_children(self._client, self._group, select=sorted)
        found = [Participant(c.name, c.path, c.data, True) for c in children]
        if self._life.closed or any(p.id == self._id for p in found):
            return found
        found.append(Participant(self._id, self._node, self._data, True))
        return sorted(found, key=lambda p: p.id or "")

    def changes(self) -> ChangeStream[list[Participant]]:
        """The group now, and again after every change, as :meth:`participants` reads it.

        ``async for members in member.changes():`` yields a fresh list
        first, then one each time a member joins, leaves or updates its data,
        and after every reconnection and new session (the group is read
        again, so nothing changed during an outage is missed). A burst of
        changes is read once, and a snapshot equal to the last one yielded is
        skipped: intermediate states may be missed, never the latest one.

        One persistent recursive watch on the group path serves an iterator,
        removed when it ends (``aclose()``, or ``async with member.changes() as
        changes:`` to remove it when the block ends). Works before
        :meth:`start`; ends once the member is closed or the client closes;
        raises MemberIdInUseError when another session takes our id. Outages
        are ridden out, however long.
        """
        return ChangeStream(source=self._changes(), name=f"members of {self._group!r}")

    def add_listener(self, callback: Callable[[list[Participant]], object]) -> None:
        """Call ``callback(participants)`` with the group now and after every change,
        as :meth:`changes` yields it, from a task of the client (a callback must
        not block; its errors are logged), until removed or the member closes."""
        self._listeners.add_listener(callback, self._node)
        if self._follower is None or self._follower.done():
            self._follower = self._client.start_background(
                self._follow(), name=f"aiocoord-group-listeners {self._node}"
            )

    def remove_listener(self, callback: Callable[[list[Participant]], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._listeners.remove_listener(callback)
        if not self._listeners.has_listeners and self._follower is not None:
            self._follower.cancel()  # its stream removes its watch as it ends
            self._follower = None

    async def _follow(self) -> None:
        """Feed the listeners from one :meth:`changes` stream, while there are any."""
        async with self.changes() as changes:
            async for participants in changes:
                self._listeners.publish(participants)

    def _changes(self) -> AsyncGenerator[list[Participant], None]:
        def still_wanted() -> bool:
            self._check_failure()
            return not self._life.closed

        return follow_subtree(
            self._client,
            self._group,
            self.participants,
            relevant=self._about_a_member,
            still_wanted=still_wanted,
            followers=self._observers,
        )

    def _about_a_member(self, event: WatchEvent) -> bool:
        """Whether ``event`` may change the group: on the group node or a member
        node, not deeper (a recursive watch also sees those)."""
        return event.path == self._group or _paths.parent(event.path) == self._group
