"""A fenced partitioner: a set of items split among the members of a group, each
item owned by at most one member at a time, and by exactly one once things settle.

Layout, all directly under the partitioner's path (made as a container):

- ``member-<participant id>``: ephemeral, one per member, holding
  ``{"id": ..., "weight": ...}`` (JSON);
- ``claim-<item>``: ephemeral, the claim of an item, holding its owner's id.
  One name per item, so two live claims of one item cannot exist: a member
  claims an item by creating it, which fails while another claim stands;
- ``token-<item>``: persistent, its version bumped in the same transaction as
  every claim and every release of the item. A fence checks that version, so
  a transaction of a stale owner is refused once anyone claimed the item
  since (or it gave the item back); the claim's creation zxid is the item's
  fencing token.

Each member runs one loop (a background task of the client): read the group
(members, claims, items), wait until membership and the item set have been
quiet for ``settle`` seconds, compute the one assignment every member computes
(:func:`~._rules.assign`), give back what it should not own, claim what it
should own and nobody claims, and wait for the next change (a watch on the
path, another on the item node, reconnections). It keeps no state that could
wedge: every pass starts again from what the server says.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anyio

from ... import _paths, _telemetry
from ..._checks import check_recipe_acl, check_seconds, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    CoordinationError,
    CorruptValueError,
    InvalidArgumentError,
    InvalidPathError,
    MemberIdInUseError,
    NodeExistsError,
    NoNodeError,
    NotOwnerError,
    PartitionLostError,
    SessionExpiredError,
)
from ..._session import (
    Broadcast,
    ChangeStream,
    Client,
    ErrorPolicy,
    Fence,
    PersistentWatch,
    Transaction,
    check_error_policy,
    retry_on_connection_loss,
    run_cleanup,
)
from ..._types import ACL, Stat
from .._kit import (
    Foreign,
    KeptNode,
    KeptState,
    Lifecycle,
    LossMonitor,
    NotifyingHold,
    Participant,
    Phase,
    Pulse,
    Reconnects,
    Resource,
    generated_participant_id,
    read_children,
    read_children_and,
    recipe_path,
)
from ._rules import assign, parse_items

__all__ = ["Assignment", "PartitionItems", "Partitioner"]

log = logging.getLogger("aiocoord")

_MEMBER = "member-"
_CLAIM = "claim-"
_TOKEN = "token-"

_MAX_PAUSE = 2.0
"""Longest pause between passes after an unexpected error (seconds)."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one member owns, as :meth:`Partitioner.changes` reports it."""

    owned: frozenset[str]
    """The items this member owns now (empty while suspended or before its first claim)."""
    stable: bool
    """Whether the group has settled: membership and items quiet for ``settle``
    seconds, and every item claimed by the member the assignment names, as this
    member last read it."""
    generation: int
    """Counts this member's assignments: grows by one with each one reported."""


@dataclass(frozen=True, slots=True)
class PartitionItems:
    """Items read from a node that operators edit: ``PartitionItems.from_node("/cfg/shards")``.

    The node holds a JSON list of item names (``["a", "b", "c"]``); empty data or
    a missing node is no items. Every member watches it, and a change
    rebalances. Content that is not such a list makes :meth:`Partitioner.start`
    raise :class:`~aiocoord.CorruptValueError`; a bad edit later is logged and
    ignored (the members keep the last good set).
    """

    node: str
    """The node's path (in the client's namespace)."""

    @classmethod
    def from_node(cls, path: str) -> PartitionItems:
        """The item set kept in ``path``."""
        _paths.validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "the item set needs a node of its own, not the root")
        return cls(path)


@dataclass(frozen=True, slots=True)
class _Grant:
    """An item this member claimed: the token node's version after the claim, the
    claim's creation zxid (the fencing token), and the session that owns it."""

    version: int
    token: int
    session: int


class _Connection(NotifyingHold):
    """Our connection in one session, as the error policy judges it: lost (and
    reported to the partitioner at once) when it enters an error state."""

    def __init__(self, on_lost: Callable[[], None]) -> None:
        # No warning of its own: the partitioner warns of the items a loss takes.
        super().__init__(on_lost, warn=False)


@dataclass(frozen=True, slots=True)
class _Claim:
    owner: str
    session: int
    czxid: int


@dataclass(frozen=True, slots=True)
class _Member:
    weight: float
    session: int
    data: bytes


@dataclass(frozen=True, slots=True)
class _Snapshot:
    members: dict[str, _Member]
    claims: dict[str, _Claim]
    items: tuple[str, ...]


def _check_name(path: str, prefix: str, name: object, what: str) -> str:
    """``name`` if ``<path>/<prefix><name>`` is a valid node, else raise."""
    if not isinstance(name, str):
        raise ArgumentTypeError(what, "str", name, path)
    if not name:
        raise InvalidPathError(f"{path}/{prefix}", f"an empty {what}")
    if "/" in name:
        raise InvalidPathError(f"{path}/{prefix}{name}", f"a {what} cannot hold '/'")
    _paths.validate_path(f"{path}/{prefix}{name}")
    return name


def _check_weight(weight: object, path: str) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ArgumentTypeError("weight", "a number", weight, path)
    value = float(weight)
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError("weight", f"must be a finite number > 0, not {weight}", path)
    return value


def _member_weight(data: bytes) -> float | None:
    """A member node's weight, None if its data is not a member's."""
    try:
        value = json.loads(data)
        weight = value["weight"]
    except (ValueError, TypeError, KeyError):
        return None
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        return None
    weight = float(weight)
    return weight if math.isfinite(weight) and weight > 0 else None


class Partitioner(Resource):
    """One member of a group that splits ``items`` among its members.

    ``async with Partitioner(client, "/jobs/shards", ["s0", "s1", "s2"]) as part:``
    joins; :attr:`owned` is what this member owns now, :meth:`changes` (or
    :meth:`add_listener`) reports every change of it, :meth:`wait_stable`
    waits until the group has settled. Leaving the block gives every item
    back (their claims deleted) before it returns.

    - **Exclusive.** An item's claim is one ephemeral node, and a member claims
      an item only once the previous claim is gone, so an item never has two
      live claims. A member whose session is lost, or (under ``error_policy``,
      default the client's; the standard one) whose connection is suspended,
      drops :attr:`owned` to empty at once; after reconnecting in the same
      session it finds its claims again (same tokens). :meth:`fence` guards a
      transaction so that ZooKeeper refuses it once the item has moved on;
      :attr:`fencing_tokens` are for stores outside ZooKeeper.
    - **Balanced and sticky.** Every member computes the same assignment:
      each item's current owner keeps it while within its quota (the items
      split by ``weight``, to within one item), and only the excess and the
      unowned items move. When a member leaves only its items move; when one
      joins only what it takes moves.
    - **Settled.** A member acts once membership and the item set have been
      quiet for ``settle`` seconds, so a burst of joins moves items once.

    ``items``: a sequence of item names (each one node name), or
    :class:`PartitionItems` naming a node operators edit. ``participant_id``
    names this member (one node name; None: a generated id), ``weight`` its
    share (> 0), ``acl`` the ACL of its nodes and of the missing path made for
    them (default: the client's ``default_acl``).

    ``start()`` makes this member's node and returns without waiting for items
    (see :meth:`wait_stable`): CorruptValueError if the item node holds no item
    list, MemberIdInUseError if another session (or another partitioner of this
    client) uses this member's id; a failed start may be tried again.
    ``aclose()`` gives every item back (claims deleted) and deletes the member's
    node, then the other members take over its items; :attr:`owned` is empty
    from the moment it is called, and :meth:`changes` iterators end.
    """

    def __init__(
        self,
        client: Client,
        path: str,
        items: Sequence[str] | PartitionItems,
        *,
        participant_id: str | None = None,
        settle: float = 1.0,
        weight: float = 1.0,
        acl: Sequence[ACL] | None = None,
        error_policy: ErrorPolicy | None = None,
    ) -> None:
        recipe_path(client, path, "partitioner")
        self._client = client
        self._path = path
        self._acl = check_recipe_acl(acl, path)
        policy = check_error_policy(error_policy, path) or client.error_policy
        self._settle = check_seconds(settle, "settle", path=path)
        self._weight = _check_weight(weight, path)
        if participant_id is None:
            participant_id = generated_participant_id()
        self._id = _check_name(path, _MEMBER, participant_id, "participant_id")
        self._member_node = f"{path}/{_MEMBER}{participant_id}"
        self._items_node: str | None = None
        self._items: tuple[str, ...] = ()
        if isinstance(items, PartitionItems):
            self._items_node = items.node
        elif isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise ArgumentTypeError(
                "items", "a sequence of item names or a PartitionItems", items, path
            )
        else:
            self._items = tuple(dict.fromkeys(self._checked_item(item) for item in items))
        self._life = Lifecycle(f"partitioner {self._member_node!r}", self._open, self._shut)
        super().__init__(self._life)
        self._broadcast: Broadcast[Assignment] = Broadcast(f"assignment of {self._member_node!r}")
        self._assignment = Assignment(frozenset(), False, 0)
        self._grants: dict[str, _Grant] = {}
        self._attempted: set[str] = set()
        """Items whose claim was sent and not confirmed: looked for when leaving."""
        self._suspended = False
        self._monitor = LossMonitor(client, policy, f"partitioner {self._member_node!r}")
        self._connection: _Connection | None = None
        """Lost (and then replaced) when the connection enters a state the error
        policy calls an error: what this member owns goes with it."""
        self._reconnects = Reconnects(client, self._on_reconnected, on_lost=self._on_lost)
        self._member: KeptNode | None = None
        """Our member node, kept from :meth:`start` to :meth:`aclose`."""
        self._stable = False
        self._failure: BaseException | None = None
        self._runner: asyncio.Task[Any] | None = None
        self._wake = asyncio.Event()
        self._round_expired = False
        self._signal = Pulse()
        self._signature: object = None
        self._changed_at = 0.0
        self._bad_items: bytes | None = None
        self._sessions: set[int] = set()
        """Every session this member has taken part in: a node of an earlier one is
        ours, on its way out, not another member's (shared with our kept member node)."""
        self._tags = _telemetry.recipe_tags(client.telemetry, "partitioner", path, client.namespace)
        self._holds: dict[str, _telemetry.HoldRecord] = {}
        """Each granted item's hold span and timer (telemetry on)."""
        self._counted_owned = 0
        """What ``aiocoord.partition.items.owned`` has been told this member owns."""

    def _checked_item(self, item: object) -> str:
        return _check_name(self._path, _CLAIM, item, "item")

    def __repr__(self) -> str:
        state = "failed" if self._failure is not None else self._life.phase.value
        return (
            f"<Partitioner {self._member_node!r} {state} owned={len(self._assignment.owned)} "
            f"stable={self._assignment.stable}>"
        )

    # --- local state --------------------------------------------------------------------

    @property
    def participant_id(self) -> str:
        """This member's id (``<host>:<pid>:<random hex>`` unless one was given)."""
        return self._id

    @property
    def path(self) -> str:
        """The partitioner's path, under which members, claims and tokens live."""
        return self._path

    @property
    def weight(self) -> float:
        """This member's weight: its share of the items is weight / total weight."""
        return self._weight

    @property
    def owned(self) -> frozenset[str]:
        """The items this member owns now (local state, no I/O)."""
        return self._assignment.owned

    @property
    def assignment(self) -> Assignment:
        """This member's current assignment, as :meth:`changes` last reported it."""
        return self._assignment

    def fence(self, item: str) -> Fence:
        """A :class:`~aiocoord.Fence` for ``item``: a transaction guarded by it applies only
        while this member still owns the item, else it raises
        :class:`~aiocoord.PartitionLostError`. NotOwnerError if not owned now."""
        grant = self._grant(item)
        return Fence(
            f"{self._path}/{_TOKEN}{item}",
            f"{self._path}/{_CLAIM}{item}",
            version=grant.version,
            lost_error=PartitionLostError,
            session_id=grant.session,
        )

    @property
    def fencing_tokens(self) -> Mapping[str, int]:
        """The fencing token of each item owned now (local state, no I/O): an int that
        grows with every grant of the item (its claim's creation zxid), for stores
        outside ZooKeeper. A read-only snapshot; ``fencing_tokens[item]`` raises
        KeyError for an item not owned."""
        owned = self._assignment.owned
        return MappingProxyType(
            {item: grant.token for item, grant in self._grants.items() if item in owned}
        )

    def transaction(self, item: str) -> Transaction:
        """A transaction already guarded by :meth:`fence` of ``item``."""
        return self._client.transaction().guard(self.fence(item))

    def _grant(self, item: str) -> _Grant:
        grant = self._grants.get(item)
        if grant is None or item not in self._assignment.owned:
            raise NotOwnerError(f"{item!r} is not owned by partitioner {self._member_node!r}")
        return grant

    # --- the assignment, reported ---------------------------------------------------------

    def _publish(self) -> None:
        owned = frozenset() if self._suspended else frozenset(self._grants)
        stable = self._stable and not self._suspended and self._failure is None
        current = self._assignment
        if owned == current.owned and stable == current.stable:
            return
        if len(owned) != self._counted_owned:
            _telemetry.add(
                "aiocoord.partition.items.owned",
                len(owned) - self._counted_owned,
                self._tags.metric_attributes,
            )
            self._counted_owned = len(owned)
        self._assignment = Assignment(owned, stable, current.generation + 1)
        self._broadcast.publish(self._assignment)
        self._changed()

    def _changed(self) -> None:
        self._signal.fire()

    def _start_holds(self) -> None:
        """Start a hold record for each grant that has none (telemetry on)."""
        for item, grant in self._grants.items():
            if item not in self._holds:
                tags = self._tags
                attributes = {**tags.span_attributes, "aiocoord.item": item}
                record = _telemetry.start_hold(
                    "aiocoord.partition.hold",
                    _telemetry.Tags(tags.kind, tags.path, attributes, tags.metric_attributes),
                    token=grant.token,
                    duration="aiocoord.lock.hold.duration",
                )
                if record is None:
                    return  # telemetry is off
                self._holds[item] = record

    def _end_hold(self, item: str, lost: str | None) -> None:
        """End ``item``'s hold record: given back (``lost`` None) or lost, and why."""
        record = self._holds.pop(item, None)
        if record is not None:
            if lost is not None:
                record.lost(lost)
            record.end("released" if lost is None else "lost")

    def _drop_grants(self, lost: str | None) -> None:
        """Forget every grant: given back (``lost`` None) or lost, and why."""
        for item in list(self._holds):
            self._end_hold(item, lost)
        self._grants.clear()

    def changes(self) -> ChangeStream[Assignment]:
        """The assignment now, then every change of it (owned items or stability), in
        order, none dropped. Ends once the partitioner is closed."""
        return self._broadcast.subscribe(first=[self._assignment])

    def add_listener(self, callback: Callable[[Assignment], object]) -> None:
        """Call ``callback(assignment)`` on every change, as :meth:`changes` yields it
        (from the task that noticed it: it must not block; its errors are logged)."""
        self._broadcast.add_listener(callback, self._path)

    def remove_listener(self, callback: Callable[[Assignment], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._broadcast.remove_listener(callback)

    async def wait_stable(self, *, timeout: float | None = None) -> bool:
        """Wait until the group has settled (see :attr:`Assignment.stable`); False if
        ``timeout`` passed first. RuntimeError before :meth:`start`,
        RecipeClosedError once closed, MemberIdInUseError if another session took
        this member's id."""
        seconds = check_timeout(timeout, path=self._path)
        with anyio.move_on_after(seconds):
            while True:
                if self._failure is not None:
                    raise self._failure
                self._life.check_open()
                if self._life.phase is Phase.NEW:
                    raise RuntimeError(f"partitioner {self._member_node!r} is new: start() it")
                if self._assignment.stable:
                    return True
                await self._signal.wait()
        return False

    async def participants(self) -> list[Participant]:
        """Every member, sorted by id: ``data`` is its node's data, ``holds`` whether it
        owns at least one item now (as the claims on the server say)."""

        def members_then_claims(names: list[str]) -> list[str]:
            members = sorted(n for n in names if n.startswith(_MEMBER))
            return members + [n for n in names if n.startswith(_CLAIM)]

        found = await read_children(self._client, self._path, select=members_then_claims)
        holders = {c.stat.ephemeral_owner for c in found if c.name.startswith(_CLAIM)}
        return [
            Participant(c.name[len(_MEMBER) :], c.path, c.data, c.stat.ephemeral_owner in holders)
            for c in found
            if c.name.startswith(_MEMBER)
        ]

    # --- joining and leaving ----------------------------------------------------------------

    async def _open(self) -> None:
        client = self._client
        self._failure = None
        # A kept node closes for good: each start keeps our node with a new one.
        member = self._member = self._member_keeper()
        try:
            if self._items_node is not None:
                self._items = tuple(await self._read_items_strictly())
            self._reconnects.listen()
            self._sessions.add(client.session_id)
            await member.start()
            self._runner = client.start_background(
                self._run(), name=f"aiocoord-partitioner {self._member_node}"
            )
        except BaseException:
            self._reconnects.stop()
            await member.aclose()  # a start that failed undid itself; one that ended, here
            raise

    def _member_keeper(self) -> KeptNode:
        """Our member node, ``member-<id>`` holding our id and weight."""
        data = json.dumps({"id": self._id, "weight": self._weight}).encode()
        member = KeptNode(
            self._client,
            self._member_node,
            data,
            acl=self._acl,
            foreign=Foreign.REFUSE,
            in_use=MemberIdInUseError,
            what=f"partitioner {self._member_node!r}",
        )
        member.sessions = self._sessions
        member.add_listener(self._on_member)
        return member

    def _on_member(self, state: KeptState) -> None:
        """Our member node came, went or was taken: read the group again."""
        self._wake.set()

    async def _read_items_strictly(self) -> list[str]:
        assert self._items_node is not None
        client = self._client
        try:
            data, _stat = await retry_on_connection_loss(
                client, lambda: client.get(self._items_node or "/")
            )
        except NoNodeError:
            return []
        return self._parse_items(data)

    def _parse_items(self, data: bytes) -> list[str]:
        node = self._items_node or self._path
        items = parse_items(node, data)
        try:
            for item in items:
                self._checked_item(item)
        except (InvalidPathError, ArgumentTypeError):
            raise CorruptValueError(node, data, "a list of valid item names") from None
        return items

    async def _shut(self, started: bool) -> None:
        client = self._client
        if started:
            self._reconnects.stop()
            runner, self._runner = self._runner, None
            # Stop working on the items before they are given back.
            self._suspended = True
            self._publish()
            if runner is not None:
                runner.cancel()
                await asyncio.wait([runner])
            await run_cleanup(client, self._leave)
        elif self._member is not None:
            await self._member.aclose()
        connection, self._connection = self._connection, None
        if connection is not None:
            self._monitor.discard(connection)
        self._drop_grants(None)
        self._attempted.clear()
        self._stable = False
        self._publish()
        self._broadcast.close()
        self._changed()

    async def _leave(self) -> None:
        """Give back every claim of the current session, then delete our member node
        (a claim counts only while its owner is a member: never the other way round)."""
        client = self._client
        session = client.session_id
        candidates = sorted(set(self._grants) | self._attempted)
        grants = dict(self._grants)
        self._drop_grants(None)
        with client.only_in_session(session):
            if candidates:
                stats = await retry_on_connection_loss(
                    client, lambda: self._claim_stats(candidates)
                )
                mine = [i for i, s in zip(candidates, stats, strict=True) if s == session]
                await asyncio.gather(*(self._give_back(i, grants.get(i)) for i in mine))
            self._attempted.clear()
        if self._member is not None:
            await self._member.aclose()  # deletes our member node, if it is ours

    async def _claim_stats(self, items: list[str]) -> list[int]:
        """The owning session of each item's claim if it is this member's (0 if the
        claim is gone or another member's)."""
        pipeline = self._client.pipeline()
        for item in items:
            pipeline.get(f"{self._path}/{_CLAIM}{item}")
        owners = []
        for result in await pipeline.execute():
            if isinstance(result, NoNodeError):
                owners.append(0)
            elif isinstance(result, Exception):
                raise result
            else:
                data, stat = result
                owners.append(stat.ephemeral_owner if data == self._id.encode() else 0)
        return owners

    async def _give_back(self, item: str, grant: _Grant | None) -> None:
        """Delete our claim of ``item``, bumping its token node so that our fence fails."""
        client = self._client
        version = -1 if grant is None else grant.version

        async def release() -> None:
            with contextlib.suppress(NoNodeError, BadVersionError):
                await (
                    client.transaction()
                    .delete(f"{self._path}/{_CLAIM}{item}")
                    .set(f"{self._path}/{_TOKEN}{item}", b"", version=version)
                    .commit()
                )

        await retry_on_connection_loss(client, release)

    # --- connection states ---------------------------------------------------------------

    def _on_lost(self) -> None:
        """The session is lost: every claim went with it."""
        if self._grants:
            log.warning(
                "partitioner %r: the session expired; items %s are no longer ours",
                self._member_node,
                sorted(self._grants),
            )
        self._drop_grants("the session expired")
        self._stable = False
        self._publish()

    def _on_suspended(self) -> None:
        """The connection entered a state the error policy calls an error: own nothing
        until a read after it shows our claims still stand."""
        self._suspended = True
        self._publish()

    def _on_reconnected(self) -> None:
        self._wake.set()  # the watches missed what happened meanwhile: read again

    def _connection_hold(self, session: int) -> _Connection:
        """The hold that stands for our connection in ``session``: a new one once the
        last was lost (lost at once if the connection is in an error state now)."""
        connection = self._connection
        if connection is None or connection.lost or connection.session_id != session:
            old, connection = connection, _Connection(self._on_suspended)
            self._connection = connection
            self._monitor.add(connection, session)
            if old is not None:
                self._monitor.discard(old)  # after the add: the monitor keeps listening
        return connection

    # --- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        """Take part until closed: one round per session, whatever goes wrong."""
        client = self._client
        failures = 0
        while True:
            try:
                await self._round()
            except ClientClosedError:
                return
            except MemberIdInUseError as error:
                log.warning("partitioner %r stops: %s", self._member_node, error)
                self._failure = error
                self._drop_grants("another session took the member id")
                self._publish()
                self._changed()
                return
            except SessionExpiredError:
                self._drop_grants("the session expired")
                self._stable = False
                self._publish()
            except ConnectionLossError:
                try:
                    await client.wait_connected()
                except ClientClosedError:
                    return
            except CoordinationError as error:
                failures += 1
                log.warning(
                    "partitioner %r: %r; trying again", self._member_node, error, exc_info=False
                )
                await anyio.sleep(min(0.05 * 2**failures, _MAX_PAUSE))
            else:  # pragma: no cover - a round only ends by an error
                return

    async def _round(self) -> None:
        """Take part in one session: watch, join, and reconcile until the session ends."""
        client = self._client
        await client.wait_connected()
        session = client.session_id
        self._sessions.add(session)
        self._round_expired = False
        watches: list[PersistentWatch] = []
        pumps: list[asyncio.Task[Any]] = []
        try:
            with client.only_in_session(session):
                for node in (self._path, self._items_node):
                    if node is not None:
                        watch = await retry_on_connection_loss(
                            client, functools.partial(client.add_watch, node)
                        )
                        watches.append(watch)
                        pumps.append(
                            client.start_background(
                                self._pump(watch), name=f"aiocoord-partitioner-watch {node}"
                            )
                        )
                await self._reconcile(session)
        finally:
            for pump in pumps:
                pump.cancel()
            if pumps:
                await asyncio.wait(pumps)
            for watch in watches:
                await watch.aclose()

    async def _pump(self, watch: PersistentWatch) -> None:
        """Wake the loop on every event of ``watch``; flag the end of its session."""
        try:
            async for _event in watch:
                self._wake.set()
        except SessionExpiredError:
            self._round_expired = True
        finally:
            self._wake.set()

    async def _reconcile(self, session: int) -> None:
        client = self._client
        while True:
            if self._round_expired or client.session_id != session:
                raise SessionExpiredError("the session changed")
            self._wake.clear()
            assert self._member is not None
            self._member.check_failure()  # MemberIdInUseError: another session took our id
            connection = self._connection_hold(session)
            try:
                snapshot = await self._read()
                if not self._is_member(snapshot, session):
                    # Our member node is being made (or made again): its keeper wakes
                    # us; read again after a session timeout at the latest all the same.
                    self._stable = False
                    self._publish()
                    await self._wait(client.session_timeout)
                    continue
                self._check_grants(snapshot, session)
                if not connection.lost:
                    self._suspended = False  # no error state since before the read
                delay = self._settling(snapshot)
                if delay > 0:
                    self._stable = False
                    self._publish()
                    await self._wait(delay)
                    continue
                target = assign(
                    snapshot.items,
                    {m: v.weight for m, v in snapshot.members.items()},
                    self._owners(snapshot),
                )
                if await self._act(snapshot, target, session):
                    self._publish()
                    continue  # read what our writes did
            except ConnectionLossError:
                self._stable = False
                self._publish()
                await client.wait_connected()
                continue
            self._stable = self._complete(snapshot, target)
            self._publish()
            await self._wait(None)

    async def _wait(self, seconds: float | None) -> None:
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    def _settling(self, snapshot: _Snapshot) -> float:
        """Seconds until membership and items have been quiet for ``settle``."""
        signature = (
            tuple(sorted((m, v.weight) for m, v in snapshot.members.items())),
            snapshot.items,
        )
        now = time.monotonic()
        if signature != self._signature:
            self._signature = signature
            self._changed_at = now
        return self._changed_at + self._settle - now

    def _is_member(self, snapshot: _Snapshot, session: int) -> bool:
        """Whether our member node, made in ``session``, is in the snapshot (another
        session's node at our id is our kept node's concern: it waits or fails)."""
        found = snapshot.members.get(self._id)
        return found is not None and found.session == session

    @staticmethod
    def _owners(snapshot: _Snapshot) -> dict[str, str]:
        """Who owns each item: a claim counts if its owner is a member in the same session."""
        owners = {}
        for item, claim in snapshot.claims.items():
            member = snapshot.members.get(claim.owner)
            if member is not None and member.session == claim.session:
                owners[item] = claim.owner
        return owners

    @staticmethod
    def _complete(snapshot: _Snapshot, target: dict[str, str]) -> bool:
        """Whether the claims on the server are exactly the target assignment."""
        if set(snapshot.claims) != set(target):
            return False
        members = snapshot.members
        return all(
            claim.owner == target[item]
            and claim.owner in members
            and members[claim.owner].session == claim.session
            for item, claim in snapshot.claims.items()
        )

    def _ours(self, claim: _Claim, session: int) -> bool:
        """Whether a claim is this member's: its id, in its session (other
        partitioners on the same client share the session)."""
        return claim.owner == self._id and claim.session == session

    def _check_grants(self, snapshot: _Snapshot, session: int) -> None:
        """Drop grants the server no longer backs (a claim deleted by someone else)."""
        for item, grant in list(self._grants.items()):
            claim = snapshot.claims.get(item)
            if claim is None or not self._ours(claim, session) or claim.czxid != grant.token:
                log.warning("partitioner %r: lost item %r", self._member_node, item)
                del self._grants[item]
                self._end_hold(item, "its claim is gone")

    async def _act(self, snapshot: _Snapshot, target: dict[str, str], session: int) -> bool:
        """Adopt, give back and claim what the target says; whether anything was written
        or found to adopt."""
        mine = {item for item, owner in target.items() if owner == self._id}
        adopt = [
            item
            for item, claim in snapshot.claims.items()
            if self._ours(claim, session) and item not in self._grants
        ]
        unclaimed = sorted(item for item in mine if item not in snapshot.claims)
        if not (adopt or unclaimed or any(item not in mine for item in self._grants)):
            return False
        try:
            with _telemetry.span("aiocoord.partition.rebalance", self._tags) as op:
                for item in adopt:
                    stat = await self._client.exists(f"{self._path}/{_TOKEN}{item}")
                    czxid = snapshot.claims[item].czxid
                    version = -1 if stat is None else stat.version
                    self._grants[item] = _Grant(version, czxid, session)
                    self._attempted.discard(item)
                release = [item for item in self._grants if item not in mine]
                grants = {item: self._grants.pop(item) for item in release}
                for item in release:
                    self._end_hold(item, None)
                if release:
                    self._publish()  # owned shrinks before the items are given back
                await asyncio.gather(
                    *(self._give_back(item, grant) for item, grant in grants.items()),
                    *(self._claim(item, session) for item in unclaimed),
                )
                gained = sum(item in self._grants for item in unclaimed)
                self._publish()
                # Claims that failed were taken by another member meanwhile.
                op.outcome("rebalanced" if gained == len(unclaimed) else "contended")
                if op.recording:
                    op.set("aiocoord.generation", self._assignment.generation)
                    op.set("aiocoord.items_gained", gained)
                    op.set("aiocoord.items_adopted", len(adopt))
                    op.set("aiocoord.items_released", len(release))
                    op.set("aiocoord.items_owned", len(self._assignment.owned))
        finally:
            self._start_holds()  # not inside the rebalance: the holds outlive it
        return True

    async def _claim(self, item: str, session: int) -> None:
        """Claim ``item`` and bump its token node, in one transaction."""
        client = self._client
        claim = f"{self._path}/{_CLAIM}{item}"
        token = f"{self._path}/{_TOKEN}{item}"
        self._attempted.add(item)
        for _attempt in range(3):
            try:
                results = await (
                    client.transaction()
                    .create(claim, self._id.encode(), ephemeral=True, acl=self._acl)
                    .set(token, b"", version=-1)
                    .commit()
                )
            except NodeExistsError:
                self._attempted.discard(item)
                return  # claimed by another meanwhile: the next read says by whom
            except NoNodeError as error:
                if error.op_index != 1:
                    self._attempted.discard(item)
                    return
                with contextlib.suppress(NodeExistsError):
                    await client.create(token, b"", acl=self._acl)
                continue
            stat = results[1]
            assert not isinstance(stat, str) and stat is not None
            self._grants[item] = _Grant(stat.version, stat.mzxid, session)
            self._attempted.discard(item)
            return

    async def _read(self) -> _Snapshot:
        """Members, claims and items, as the server holds them now (two round trips)."""

        def members_and_claims(names: list[str]) -> list[str]:
            return [n for n in names if n.startswith((_MEMBER, _CLAIM))]

        items_node = () if self._items_node is None else (self._items_node,)
        found, also = await read_children_and(
            self._client, self._path, items_node, select=members_and_claims
        )
        found_members: dict[str, _Member] = {}
        found_claims: dict[str, _Claim] = {}
        for child in found:
            name, data, stat = child.name, child.data, child.stat
            if name.startswith(_MEMBER):
                weight = _member_weight(data)
                if weight is not None:
                    found_members[name[len(_MEMBER) :]] = _Member(
                        weight, stat.ephemeral_owner, data
                    )
            else:
                owner = data.decode("utf-8", "replace")
                found_claims[name[len(_CLAIM) :]] = _Claim(owner, stat.ephemeral_owner, stat.czxid)
        if also:
            self._items = tuple(self._items_from(also[0]))
        return _Snapshot(found_members, found_claims, self._items)

    def _items_from(self, result: tuple[bytes, Stat] | None) -> list[str]:
        """The item set from the item node's read (None: no node); the last good
        one if it is bad."""
        if result is None:
            return []
        data = result[0]
        try:
            items = self._parse_items(data)
        except CorruptValueError as error:
            if data != self._bad_items:
                log.warning("partitioner %r: %s; keeping the last good items", self._path, error)
                self._bad_items = data
            return list(self._items)
        self._bad_items = None
        return items
