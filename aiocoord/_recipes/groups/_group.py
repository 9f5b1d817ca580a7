"""Group membership (Curator's GroupMember, node for node).

Each member keeps one ephemeral node, ``<group path>/<member id>``, holding its
data; the group is the children of the group path. Missing ancestors are made
as containers, so the server sweeps an empty group away. Curator's members and
ours share a group: same names, same data, same node kinds.

The member's node is a :class:`~.._kit._kept.KeptNode` (Curator builds its
GroupMember from one ``PersistentNode`` too): it lives as long as its session,
and is made again (from a background task) whenever it went without the
member leaving: after a session expiry, or a delete by someone else. A member
id is one node name, so one session at a time can hold it: a member never
takes over a node another session holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from ... import _paths, _telemetry
from ..._checks import check_bytes, check_recipe_acl
from ..._exceptions import (
    ArgumentTypeError,
    DataTooLargeError,
    InvalidPathError,
    MemberIdInUseError,
)
from ..._session import (
    Broadcast,
    ChangeStream,
    Client,
    ErrorPolicy,
    check_error_policy,
)
from ..._types import ACL, WatchEvent
from .._kit import (
    Foreign,
    KeptNode,
    KeptState,
    Lifecycle,
    Participant,
    Phase,
    Rereads,
    Resource,
    follow_subtree,
    generated_participant_id,
    read_children,
    recipe_path,
)

__all__ = ["GroupMember"]


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
    exist. The node is never taken from another live session: if the id is
    held by one, :meth:`start` raises :class:`MemberIdInUseError`; if another
    session takes the id while ours is being re-created, the member stops
    (``is_member`` stays False), logs a warning, and :meth:`wait_member` and
    :meth:`changes` raise that error. Our node still held by one of our own
    earlier sessions (the client gave it up before the server expired it) is
    not another's: the member waits for it to go with that session, then
    makes it again. Leaving (:meth:`aclose`) deletes the node.

    ``acl`` (default: the client's ``default_acl``) is the ACL of our node and
    of the missing group path and parents made for it. ``error_policy`` says
    in which connection states ``is_member`` is False although the node may
    still stand; None (the default) counts only a lost session, since the node
    lives as long as its session (pass ``aiocoord.StandardErrorPolicy()`` to
    count a suspended connection out too).

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
        error_policy: ErrorPolicy | None = None,
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
        what = f"group member {self._node!r}"
        self._kept = KeptNode(
            client,
            self._node,
            self._data,
            acl=self._acl,
            foreign=Foreign.REFUSE,
            error_policy=check_error_policy(error_policy, path),
            in_use=MemberIdInUseError,
            what=what,
        )
        self._kept.add_listener(self._on_kept)
        self._czxid = 0
        """The creation zxid of our node as last made: a new one is a rejoin."""
        self._life = Lifecycle(what, self._open, self._shut)
        super().__init__(self._life)
        self._listeners: Broadcast[list[Participant]] = Broadcast(f"members of {path!r}")
        self._follower: asyncio.Task[Any] | None = None
        """The task feeding the listeners from one :meth:`changes` stream."""
        self._observers: set[Rereads] = set()
        tags = _telemetry.recipe_tags(client.telemetry, "group_member", path, client.namespace)
        span_attributes = {**tags.span_attributes, "aiocoord.participant_id": participant_id}
        self._tags = _telemetry.Tags(tags.kind, tags.path, span_attributes, tags.metric_attributes)

    def __repr__(self) -> str:
        state = "failed" if self._kept.failure is not None else self._life.phase.value
        return f"<GroupMember {self._node!r} {state} member={self.is_member}>"

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
        is reported lost (or the connection enters a state ``error_policy``
        calls an error) or the node deleted until it is made again, and for
        good once another session took our id.
        """
        return self._kept.created

    def _checked(self, data: object) -> bytes:
        value = check_bytes(data, "member data", path=self._node)
        limit = self._client.max_data_size
        if len(value) > limit:
            raise DataTooLargeError(self._node, len(value), limit)
        return value

    def _on_kept(self, state: KeptState) -> None:
        """Our node's state changed: count a rejoin, wake the followers."""
        if state.created:
            if self._czxid and state.czxid != self._czxid:
                _telemetry.add("aiocoord.group.rejoins", 1, self._tags.metric_attributes)
            self._czxid = state.czxid
        for observer in list(self._observers):
            observer.wake()

    # --- joining and leaving --------------------------------------------------------------

    async def _open(self) -> None:
        """The opening (see :class:`Lifecycle`): make our node, start keeping it."""
        with _telemetry.span("aiocoord.group.join", self._tags) as op:
            await self._kept.start()
            op.outcome("joined")

    async def _shut(self, started: bool) -> None:
        """The closing (see :class:`Lifecycle`): stop keeping our node, delete it."""
        if started:
            with _telemetry.span("aiocoord.group.leave", self._tags) as op:
                await self._kept.aclose()
                op.outcome("left")
        else:
            await self._kept.aclose()
        for observer in list(self._observers):
            observer.wake()  # changes() iterators see the close

    def _check_failure(self) -> None:
        self._kept.check_failure()

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
            await self._kept.set_data(value)  # no I/O: what start() will publish
            return
        with _telemetry.span("aiocoord.group.update", self._tags) as op:
            await self._kept.set_data(value)
            op.outcome("updated")

    async def wait_member(self, *, timeout: float | None = None) -> bool:
        """Wait until our node is believed to exist (at once if it is): True; False
        if ``timeout`` passed first.

        For after an outage: returns once the node is back. Raises
        MemberIdInUseError if another session took our id (we will not be a
        member again), RuntimeError if the member is not started,
        RecipeClosedError once it is closed.
        """
        self._check_failure()
        self._life.check_open()
        return await self._kept.wait_created(timeout=timeout)

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
