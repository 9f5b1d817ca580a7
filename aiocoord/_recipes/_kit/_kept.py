"""A node a recipe keeps for as long as it runs (Curator's ``PersistentNode``).

A group member's node, a partitioner's member node and a registered service
instance are the same thing: one node of ours, with our latest data, that must
be there while the recipe runs and gone once it stops. :class:`KeptNode` does
it once:

- **create**: missing parents are made as containers; a plain name that is
  taken is looked at, and the pure rule :func:`on_node_exists` says what to do
  with it (adopt ours, wait out an earlier session of ours, refuse or replace
  another's). A protected create (``protected=True``) carries a per-create
  marker instead, so a create whose reply was lost is found, not repeated.
- **keep**: a background task of the client watches the node and makes it
  again, with the latest :meth:`~KeptNode.set_data`, whenever it goes (deleted
  by someone else, or taken away with an expired session); with
  ``watch=False`` it looks again after every reconnection instead (what a
  service registration does, as Curator's ``ServiceDiscovery`` re-registers on
  reconnect).
- **leave**: :meth:`~KeptNode.aclose` deletes the node only if it is ours (our
  session's ephemeral node, or a persistent node holding our data), never
  another's.

The owning recipe learns of every change from :meth:`~KeptNode.changes` or
:meth:`~KeptNode.add_listener` (a :class:`KeptState`: the node's path, whether
it is believed to exist, its owner and its creation zxid).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections.abc import Callable, Sequence, Set
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import anyio

from ... import _paths
from ..._checks import check_bytes, check_flag, check_recipe_acl, check_seconds, check_timeout
from ..._exceptions import (
    ArgumentTypeError,
    BadVersionError,
    ClientClosedError,
    CoordinationError,
    DataTooLargeError,
    InvalidArgumentError,
    InvalidPathError,
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
    ErrorPolicy,
    OwnNode,
    check_client,
    check_error_policy,
    retry_on_connection_loss,
    run_cleanup,
    track_sends,
)
from ..._types import ACL, Stat
from ._lifecycle import Lifecycle, Phase
from ._waits import Gone, Reconnects, wait_gone, wait_out_session

__all__ = ["Foreign", "Found", "KeptNode", "KeptState", "is_ours", "on_node_exists"]

log = logging.getLogger("aiocoord")

_LOCAL_NODES = "aiocoord.kept-nodes"
"""Key of the client's recipe state holding the plain paths its refusing kept nodes keep."""

_MAX_PAUSE = 2.0
"""Longest pause between attempts to make the node again when the server refuses (seconds)."""


# --- the pure rules ------------------------------------------------------------


class Foreign(enum.Enum):
    """What a kept node does with a node at its path that another session holds."""

    REFUSE = "refuse"
    """Leave it alone and fail with the owner's in-use error (a group member's id)."""
    REPLACE = "replace"
    """Delete it and make ours: the last one to register wins (a service instance)."""


class Found(enum.Enum):
    """What to do with a node found at our path when our create said NodeExists."""

    ADOPT = "adopt"
    """It is ours (a create whose reply was lost made it): keep it, with our data."""
    WAIT_OUT = "wait_out"
    """Ours, but left by one of our earlier sessions, which the server has not
    expired yet: wait until it goes with that session, then create."""
    REPLACE = "replace"
    """Delete it (at the version seen) and create ours."""
    REFUSE = "refuse"
    """Another's: leave it and fail."""


def on_node_exists(
    owner: int, session: int, earlier: Set[int], *, ephemeral: bool, foreign: Foreign
) -> Found:
    """What a kept node does with the node found at its path.

    ``owner``: the found node's ephemeral owner (0: a persistent node);
    ``session``: the session the look was made in; ``earlier``: the sessions
    this kept node made or adopted its node in before; ``ephemeral``: whether
    we keep an ephemeral node. A persistent node has no owner to tell, so a
    persistent one we want is always adopted (as Curator's ``PersistentNode``
    does); a node of the wrong kind is never adopted. Under
    :attr:`Foreign.REPLACE` an earlier session's node is replaced at once
    rather than waited out: it is ours, and going anyway.
    """
    if owner != 0 and owner == session:
        # Ours in this very session: the right kind is adopted, the wrong one remade.
        return Found.ADOPT if ephemeral else Found.REPLACE
    if owner == 0 and not ephemeral:
        return Found.ADOPT
    if owner != 0 and owner in earlier:
        return Found.WAIT_OUT if foreign is Foreign.REFUSE else Found.REPLACE
    return Found.REFUSE if foreign is Foreign.REFUSE else Found.REPLACE


def is_ours(owner: int, session: int, *, ephemeral: bool, same_data: bool) -> bool:
    """Whether a node found at our path is ours to delete (or to write): for an
    ephemeral one, owned by our current ``session``; for a persistent one (which
    names no owner), persistent and holding the data we last gave it."""
    if ephemeral:
        return owner != 0 and owner == session
    return owner == 0 and same_data


# --- the kept node ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeptState:
    """Where a kept node stands, as :meth:`KeptNode.changes` reports it."""

    path: str | None
    """The node's path once made (with its marker and sequence suffix, if any); None before."""
    created: bool
    """Whether the node is believed to exist (see :attr:`KeptNode.created`)."""
    session: int
    """The session that owns the node (ephemeral), or in which it was last made or
    found (persistent); 0 before."""
    czxid: int
    """The node's creation zxid: a new value means the node was made again."""
    failed: bool = False
    """Whether the keeping stopped for good: another session took our path
    (:attr:`KeptNode.failure` says why)."""


class _Refused(Exception):
    """Another session holds our path (and the policy is to refuse)."""


class _EarlierSession(Exception):
    """Our path is held by one of this kept node's earlier sessions."""

    def __init__(self, owner: int) -> None:
        super().__init__(owner)
        self.owner = owner


def _node_exists(path: str) -> Exception:
    return NodeExistsError(path)


class KeptNode:
    """One node of ours, kept with our latest data while this object runs.

    ``async with KeptNode(client, "/services/api/host-1", b"10.0.0.1"):``
    keeps that ephemeral node until the block ends: made again (from a
    background task of the client) after a session expiry or a delete by
    someone else, with the data of the last :meth:`set_data`; deleted by
    :meth:`aclose`, if it is ours.

    - ``ephemeral`` (default) or persistent; ``ttl`` (seconds, persistent
      only) makes a TTL node; ``sequential`` lets the server append a counter
      (the node's :attr:`path` then changes each time it is made);
      ``protected`` puts a per-create marker in the name so that a create whose
      reply was lost is found, not made twice.
    - A plain name found taken: ours (a lost reply) is adopted; one left by an
      earlier session of ours is waited out until the server expires that
      session; another's is refused (``foreign=Foreign.REFUSE``: :meth:`start`
      raises ``in_use(path)``, default NodeExistsError, and if it happens
      while re-creating, the keeping stops and :meth:`wait_created` raises it)
      or replaced (``Foreign.REPLACE``).
    - ``error_policy``: the connection states in which :attr:`created` is
      False although the node may still stand (None: only a lost session).
    - ``delete_on_close``: whether :meth:`aclose` deletes our node (may be
      changed before closing).
    """

    def __init__(
        self,
        client: Client,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = True,
        sequential: bool = False,
        protected: bool = False,
        ttl: float | None = None,
        acl: Sequence[ACL] | None = None,
        foreign: Foreign = Foreign.REFUSE,
        watch: bool = True,
        delete_on_close: bool = True,
        error_policy: ErrorPolicy | None = None,
        in_use: Callable[[str], Exception] = _node_exists,
        what: str | None = None,
    ) -> None:
        check_client(client, path)
        for flag, name in (
            (ephemeral, "ephemeral"),
            (sequential, "sequential"),
            (protected, "protected"),
            (watch, "watch"),
            (delete_on_close, "delete_on_close"),
        ):
            check_flag(flag, name, path=path)
        _paths.validate_path(path, sequential=sequential)
        if path == "/":
            raise InvalidPathError(path, "a kept node needs a path of its own, not the root")
        if not isinstance(foreign, Foreign):
            raise ArgumentTypeError("foreign", "an aiocoord Foreign policy", foreign, path)
        self._ttl = None if ttl is None else check_seconds(ttl, "ttl", path=path, positive=True)
        if self._ttl is not None and ephemeral:
            raise InvalidArgumentError("ttl", "a TTL node is persistent: not ephemeral", path)
        self._client = client
        self._target = path
        self._acl = check_recipe_acl(acl, path)
        self._ephemeral = ephemeral
        self._sequential = sequential
        self._protected = protected
        self._foreign = foreign
        self._watch = watch
        self.delete_on_close = delete_on_close
        """Whether :meth:`aclose` deletes our node."""
        self.deleted = False
        """Whether :meth:`aclose` deleted our node (False: it was gone, or not ours)."""
        self._policy = check_error_policy(error_policy, path)
        self._in_use = in_use
        self._what = what or f"kept node {path!r}"
        self._data = self._checked(data)
        self._life = Lifecycle(self._what, self._open, self._shut)
        self._broadcast: Broadcast[KeptState] = Broadcast(self._what)
        self._path: str | None = None
        self._own: OwnNode | None = None
        """The protected create behind the current node (protected nodes only)."""
        self._session = 0
        self._czxid = 0
        self.sessions: set[int] = set()
        """Every session our node was made or adopted in: a node of an earlier one is
        ours, on its way out with that session, not another's."""
        self._present = False
        """Whether the node is believed to stand (made, not known gone)."""
        self._suspended = False
        """Whether the connection is in a state the error policy calls an error."""
        self._failure: BaseException | None = None
        self._refused = False
        """Whether the failure is that another session took our path."""
        self._keeper: asyncio.Task[Any] | None = None
        self._writing = asyncio.Lock()
        """Serialises our writes to the node (create, adopt, set_data)."""
        self._signal = asyncio.Event()
        """Set (and replaced) whenever the state, the failure or the phase changes."""
        self._recheck = asyncio.Event()
        self._reconnects = Reconnects(client, self._recheck.set)
        self._state = KeptState(None, False, 0, 0)
        self._local = False
        """Whether our path is entered in the client's set of refusing kept nodes."""

    def __repr__(self) -> str:
        state = "failed" if self._failure is not None else self._life.phase.value
        return f"<KeptNode {self._path or self._target!r} {state} created={self.created}>"

    # --- local state ---------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The node's path once made (for a protected or sequential node, with its
        marker and suffix); None before."""
        return self._path

    @property
    def data(self) -> bytes:
        """The data the node holds (or will hold when made again): the last given."""
        return self._data

    @property
    def created(self) -> bool:
        """Whether the node is believed to exist: made, not known to be gone, and the
        connection in no state the error policy calls an error. It stays True
        while the connection is down if the policy allows (the session, and the
        node, may live on)."""
        return self._present and not self._suspended

    @property
    def state(self) -> KeptState:
        """The node's path, whether it is believed to exist, its owner and creation zxid."""
        return self._state

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped the keeping (another session took our path), if any."""
        return self._failure

    def _checked(self, data: object) -> bytes:
        value = check_bytes(data, "node data", path=self._target)
        limit = self._client.max_data_size
        if len(value) > limit:
            raise DataTooLargeError(self._target, len(value), limit)
        return value

    def _publish(self) -> None:
        state = KeptState(
            self._path, self.created, self._session, self._czxid, self._failure is not None
        )
        if state == self._state:
            return
        self._state = state
        self._changed()
        self._broadcast.publish(state)

    def _changed(self) -> None:
        signal, self._signal = self._signal, asyncio.Event()
        signal.set()

    def _set_present(self, value: bool) -> None:
        self._present = value
        self._publish()

    # --- changes -------------------------------------------------------------------

    def changes(self) -> ChangeStream[KeptState]:
        """The state now, then every change of it, in order; ends once closed."""
        return self._broadcast.subscribe(first=[self._state])

    def add_listener(self, callback: Callable[[KeptState], object]) -> None:
        """Call ``callback(state)`` on every change, from the task that made it (it must
        not block; its errors are logged)."""
        self._broadcast.add_listener(callback, self._target)

    def remove_listener(self, callback: Callable[[KeptState], object]) -> None:
        """Stop calling ``callback``; one that is not registered is ignored."""
        self._broadcast.remove_listener(callback)

    # --- starting and closing --------------------------------------------------------

    async def start(self) -> None:
        """Make the node (or adopt it), then keep it.

        Raises ``in_use(path)``, having made nothing, if another session holds
        the path and the policy refuses (or another refusing kept node of this
        client keeps it). Waits while one of our earlier sessions still holds
        it. On any error or cancellation a node this made is deleted, and
        ``start()`` may be tried again. RuntimeError if already started,
        RecipeClosedError once closed.
        """
        await self._life.start()

    async def aclose(self) -> None:
        """Stop keeping the node, then (``delete_on_close``) delete it if it is ours.

        Shielded and time-bounded; idempotent; fine before :meth:`start`.
        Streams from :meth:`changes` end.
        """
        await self._life.aclose()

    async def __aenter__(self) -> KeptNode:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _plain(self) -> bool:
        """Whether the node's name is ours alone to look for (no marker, no suffix)."""
        return not (self._protected or self._sequential)

    async def _open(self) -> None:
        client = self._client
        if self._plain() and self._foreign is Foreign.REFUSE:
            local = client.recipe_state(_LOCAL_NODES, set[str])
            if self._target in local:
                # Our session owns that node, so it would pass for ours: refuse it here.
                raise self._in_use(self._target)
            local.add(self._target)
            self._local = True
        self._failure = None
        self._refused = False
        self._suspended = False
        client.add_listener(self._on_state)
        self._reconnects.listen()
        with track_sends() as sends:
            try:
                await self._make()
                self._keeper = client.start_background(
                    self._keep(), name=f"aiocoord-kept-node {self._target}", on_error=self._fail
                )
            except BaseException as error:
                client.remove_listener(self._on_state)
                self._reconnects.stop()
                self._unlist()
                self._set_present(False)
                # A create that never left the client made nothing to look for.
                if sends.sent and not isinstance(error, _Refused):
                    await run_cleanup(client, self._delete_own)
                if isinstance(error, _Refused):
                    raise self._in_use(self._target) from None
                raise

    def _unlist(self) -> None:
        if self._local:
            self._local = False
            self._client.recipe_state(_LOCAL_NODES, set[str]).discard(self._target)

    async def _shut(self, started: bool) -> None:
        client = self._client
        if started:
            client.remove_listener(self._on_state)
            self._reconnects.stop()
            keeper, self._keeper = self._keeper, None
            try:
                await run_cleanup(client, lambda: self._leave(keeper))
            finally:
                self._unlist()
        self._present = False
        self._publish()
        self._changed()  # waiters see the close
        self._broadcast.close()

    async def _leave(self, keeper: asyncio.Task[Any] | None) -> None:
        if keeper is not None:
            keeper.cancel()
            await asyncio.wait([keeper])  # unlike awaiting it, never swallows our own cancellation
        if self.delete_on_close:
            await self._delete_own()

    def _on_state(self, state: ConnectionState) -> None:
        if state is ConnectionState.LOST and self._ephemeral:
            self._present = False  # the node went with the session
        policy = self._policy
        if policy is not None and policy.is_error_state(state):
            self._suspended = True
        elif state.is_connected:
            self._suspended = False
        self._publish()

    # --- making the node ---------------------------------------------------------------

    async def _make(self) -> None:
        """Create our node or adopt it; _Refused if another session holds it.

        A node of one of our earlier sessions is waited out: the client declared
        that session lost on its own, but the server keeps it (and our node) until
        it expires it there, up to a session timeout later (longer if a leader
        change restarted its clock). It goes with that session; then we create.
        """
        while True:
            try:
                async with self._writing:
                    stat = await retry_on_connection_loss(self._client, self._attempt)
            except SessionExpiredError:
                continue  # nothing was made in the new session: try there
            except _EarlierSession as earlier:
                log.info(
                    "%s: our node is still held by our earlier session 0x%x; "
                    "waiting for the server to expire it",
                    self._what,
                    earlier.owner,
                )
                await wait_out_session(self._client, self._target, earlier.owner)
                continue
            if stat is not None:
                self._session = stat.ephemeral_owner or self._client.session_id
                self._czxid = stat.czxid
                if self._ephemeral:
                    self.sessions.add(self._session)
                self._set_present(True)
                return

    async def _attempt(self) -> Stat | None:
        """One attempt: our node's Stat, made or adopted in the current session; None
        to look again (the session changed, or a node vanished, mid-way)."""
        client = self._client
        session = client.session_id
        options: dict[str, Any] = {"ephemeral": self._ephemeral, "acl": self._acl}
        if self._sequential:
            options["sequential"] = True
        if self._ttl is not None:
            options["ttl"] = self._ttl
        if self._protected:
            parent, name = self._target.rsplit("/", 1)
            own = OwnNode(client, parent or "/", name, self._data, **options)
            await own.create()
            self._own = own
            assert own.path is not None and own.stat is not None
            self._path, stat = own.path, own.stat
        else:
            try:
                self._path, stat = await client.create_with_stat(
                    self._target, self._data, container_parents=True, **options
                )
            except NoNodeError:
                return None  # the parent's container was swept away between its create and ours
            except NodeExistsError:
                return await self._found(session)
        if self._ephemeral and client.session_id != stat.ephemeral_owner:
            return None  # made in a session that has ended since: it is gone
        return stat

    async def _found(self, session: int) -> Stat | None:
        """Our plain path is taken: adopt, wait out, replace or refuse (see
        :func:`on_node_exists`)."""
        client = self._client
        path = self._target
        try:
            data, found = await client.get(path)
        except NoNodeError:
            return None
        # Only a reply from a session that did not change under it tells who owns it.
        if client.session_id != session:
            return None
        action = on_node_exists(
            found.ephemeral_owner,
            session,
            self.sessions,
            ephemeral=self._ephemeral,
            foreign=self._foreign,
        )
        try:
            if action is Found.REFUSE:
                raise _Refused from None
            if action is Found.WAIT_OUT:
                raise _EarlierSession(found.ephemeral_owner) from None
            if action is Found.REPLACE:
                await client.delete(path, version=found.version)
                return None
            # Ours already (a create whose reply was lost made it): publish our data.
            self._path = path
            if data == self._data:
                return found
            return await client.set(path, self._data, version=found.version)
        except (BadVersionError, NoNodeError):
            return None

    async def _delete_own(self) -> None:
        """Delete our node if it is ours (see :func:`is_ours`); never another's."""
        own, self._own = self._own, None
        if self._protected:
            if own is not None:
                await own.delete()
                self.deleted = True
            return
        path = self._path or self._target
        client = self._client
        while True:
            session = client.session_id
            if self._ephemeral:
                stat = await retry_on_connection_loss(client, lambda: client.exists(path))
                data = self._data
            else:
                try:
                    data, stat = await retry_on_connection_loss(client, lambda: client.get(path))
                except NoNodeError:
                    return
            if client.session_id != session:
                continue
            if stat is None or not is_ours(
                stat.ephemeral_owner,
                session,
                ephemeral=self._ephemeral,
                same_data=data == self._data,
            ):
                return
            # Ours only while our session lasts: a delete that waited into another
            # session could remove a node someone else made there meanwhile.
            pinned = client.only_in_session(session) if self._ephemeral else nullcontext()
            try:
                with pinned:
                    await retry_on_connection_loss(
                        client, functools.partial(client.delete, path, version=stat.version)
                    )
                self.deleted = True
                return
            except NoNodeError:
                return
            except BadVersionError:
                continue  # data set meanwhile: look again

    # --- keeping it ----------------------------------------------------------------------

    async def _keep(self) -> None:
        """Make the node again whenever it goes; until closed or another takes the path."""
        try:
            while True:
                if self._watch:
                    gone = await self._wait_gone()
                else:
                    await self._recheck.wait()
                    gone = None
                self._recheck.clear()
                if self._life.closed:
                    return
                if gone is not None and (self._ephemeral or gone is Gone.DELETED):
                    self._set_present(False)
                    log.info("%s: our node is gone (%s); creating it again", self._what, gone.value)
                await self._remake()
        except ClientClosedError:
            self._set_present(False)
        except _Refused:
            self._refused = True
            self._fail(self._in_use(self._path or self._target))

    async def _wait_gone(self) -> Gone | None:
        """Return once our node is gone (deleted, or taken away with our session), or
        our session ended. Outages of any length are ridden out: the node may live on."""
        session = self._session
        ephemeral = self._ephemeral
        path = self._path or self._target

        def not_ours(stat: Stat) -> bool:
            return stat.ephemeral_owner != session if ephemeral else stat.ephemeral_owner != 0

        return await wait_gone(
            self._client, path, session=session, gone_if=not_ours, outlast_outages=True
        )

    async def _remake(self) -> None:
        """Make the node again, through outages; _Refused if another took the path."""
        failures = 0
        was = self._czxid
        while True:
            try:
                if not (self._present and await self._refresh()):
                    await self._make()
                if self._czxid != was:
                    log.info("%s: our node is back", self._what)
                return
            except (_Refused, ClientClosedError):
                raise
            except SessionError:
                await self._client.wait_connected()
            except CoordinationError as error:
                failures += 1
                log.warning("%s: making our node failed (%r); trying again", self._what, error)
                await anyio.sleep(min(0.05 * 2**failures, _MAX_PAUSE))

    async def _refresh(self) -> bool:
        """A persistent node believed to stand, looked at again (after our session
        ended): whether it still does, now holding our data."""
        if self._ephemeral or self._path is None:
            return False
        client = self._client
        path = self._path
        async with self._writing:
            while True:
                try:
                    data, stat = await retry_on_connection_loss(client, lambda: client.get(path))
                except NoNodeError:
                    return False
                if stat.ephemeral_owner != 0:
                    return False
                if data != self._data:
                    try:
                        stat = await retry_on_connection_loss(
                            client,
                            functools.partial(client.set, path, self._data, version=stat.version),
                        )
                    except (NoNodeError, BadVersionError):
                        continue
                self._session = client.session_id
                self._czxid = stat.czxid
                self._publish()
                return True

    def _fail(self, error: BaseException) -> None:
        log.warning("%s: no longer kept (%s); it stays out until closed", self._what, error)
        self._failure = error
        self._present = False
        self._publish()
        self._changed()

    def check_failure(self) -> None:
        """Raise the error that stopped the keeping, if any (the in-use error afresh
        each time: no growing traceback)."""
        if self._refused:
            raise self._in_use(self._path or self._target)
        if self._failure is not None:
            raise self._failure

    # --- our data ------------------------------------------------------------------------

    async def set_data(self, data: bytes) -> None:
        """Publish ``data`` in our node from now on (also when it is made again).

        Before :meth:`start` it only sets what ``start()`` will publish. While
        our node is gone (being made again) the new data goes with the
        re-creation; without ``watch``, a node found gone is made again here.
        Raises the in-use error if another session took our path;
        RecipeClosedError once closed; NoConnectionError if ZooKeeper could
        not be reached in time (the data is kept, but only a re-creation or
        another call publishes it then).
        """
        value = self._checked(data)
        self._life.check_open()
        self._data = value
        self.check_failure()
        if self._life.phase is Phase.NEW:
            return
        async with self._writing:
            try:
                written = await self._write_data()
            except SessionExpiredError:
                written = False
        if not written and not self._watch:
            try:
                await self._make()
            except _Refused:
                raise self._in_use(self._target) from None

    async def _write_data(self) -> bool:
        """Write our data into our node; False if it is not there (or not ours)."""
        client = self._client
        path = self._path or self._target
        while True:
            session = client.session_id
            stat = await retry_on_connection_loss(client, lambda: client.exists(path))
            if client.session_id != session:
                continue
            if stat is None or not is_ours(
                stat.ephemeral_owner, session, ephemeral=self._ephemeral, same_data=True
            ):
                return False  # gone: made again with this data
            try:
                await retry_on_connection_loss(
                    client, functools.partial(client.set, path, self._data, version=stat.version)
                )
                return True
            except NoNodeError:
                return False
            except BadVersionError:
                continue  # set by someone else meanwhile: look again

    async def wait_created(self, *, timeout: float | None = None) -> bool:
        """Wait until the node is believed to exist (at once if it is); False if
        ``timeout`` passed first.

        Raises the in-use error if another session took our path (it will not be
        made again), RuntimeError before :meth:`start`, RecipeClosedError once
        closed.
        """
        seconds = check_timeout(timeout, path=self._target)
        with anyio.move_on_after(seconds):
            while True:
                self.check_failure()
                self._life.check_open()
                if self._life.phase is Phase.NEW:
                    raise RuntimeError(f"{self._what} is new: start() it first")
                if self.created:
                    return True
                await self._signal.wait()
        return False
