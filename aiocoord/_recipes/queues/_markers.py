"""At-least-once takes: an ephemeral marker ``<lock path>/<item name>`` holds an
item while its consumer works on it; the commit deletes item and marker in
one transaction, a release only the marker (the item goes back)."""

from __future__ import annotations

import contextlib
import functools
import uuid
from typing import Generic

from typing_extensions import TypeVar

from ... import _paths
from ..._exceptions import (
    ClientClosedError,
    ConnectionLossError,
    CorruptValueError,
    NoConnectionError,
    NodeExistsError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
    TakeLostError,
)
from ..._session import call_with_retry, delete_quietly, retry_on_connection_loss, run_cleanup
from ..._types import Stat
from .._kit import default_node_data
from ._config import QueueConfig
from ._cursor import Cursor, Diverted, Got, MarkerGone, lost_connection

__all__ = ["Markers"]

T = TypeVar("T", default=bytes)


class Markers(Generic[T]):
    """A queue's take markers: hold an item, then commit it or give it back."""

    def __init__(self, config: QueueConfig[T], cursor: Cursor) -> None:
        self._config = config
        self._cursor = cursor
        self._marker_data = default_node_data()

    async def mark(self, name: str) -> Got[T] | None:
        """Try to hold ``name``: create its marker, then read the item (one round
        trip). The item, or None if another consumer holds or took it."""
        config = self._config
        client = config.client
        cursor = self._cursor
        path = _paths.join(config.path, name)
        marker = _paths.join(config.lock_path, name)
        token = b"%s %s" % (self._marker_data, uuid.uuid4().hex.encode())
        owner = 0
        try:
            marked, read = await self._create_marker(marker, token, path)
            if marked is None:
                cursor.lost(name)
                return None
            owner = marked.ephemeral_owner
            if read is None:
                try:
                    read = await retry_on_connection_loss(
                        client, functools.partial(client.get, path)
                    )
                except NoNodeError:
                    read = NoNodeError(path)
            if isinstance(read, NoNodeError):
                # Taken by a get() consumer, or finished by a taker that held it
                # until just before our marker was made.
                await self.release(marker, owner)
                cursor.lost(name)
                return None
            data, _stat = read
            if client.session_id != owner:
                cursor.retry(name)  # the marker went with the session
                return None
            try:
                value = config.decode(path, data)
            except Diverted:
                await config.divert(path, marker)
                cursor.drop(name)
                raise
            except CorruptValueError:
                await self.release(marker, owner)
                cursor.drop(name)
                raise
        except SessionExpiredError:
            cursor.retry(name)  # the marker, if any, went with the session
            return None
        except (Diverted, CorruptValueError):
            raise
        except BaseException:
            cursor.drop(name)
            await run_cleanup(client, lambda: self.release(marker, owner or None, token))
            raise
        # Checked above, with no await since: the marker is ours, in this session.
        cursor.won(name)
        return Got(path, data, value, marker, owner, marked.czxid)

    async def _create_marker(
        self, marker: str, token: bytes, path: str
    ) -> tuple[Stat | None, tuple[bytes, Stat] | NoNodeError | None]:
        """Create our marker and read the item, in one round trip.

        Returns the marker's Stat (None if another consumer holds the item) and
        the item as read right after (None if that read was lost).
        """
        config = self._config
        client = config.client
        for _attempt in range(3):
            created, read = await (
                client.pipeline()
                .create(marker, token, ephemeral=True, acl=config.acl)
                .get(path)
                .execute()
            )
            if isinstance(created, NodeExistsError):
                return None, None
            if isinstance(created, NoNodeError):
                await retry_on_connection_loss(client, lambda: config.make_path(config.lock_path))
                continue
            if isinstance(created, ConnectionLossError) and not isinstance(
                created, NoConnectionError
            ):
                # Ours if it holds our token (every consumer of the item uses the
                # same marker name, so only the data tells).
                found = await self._find_marker(marker, token)
                if found is not None:
                    return found, None
                if created.sent:
                    return None, None  # someone else's marker, or none: move on
                continue
            if isinstance(created, Exception):
                raise created
            _created_path, stat = created
            if isinstance(read, NoNodeError) or not isinstance(read, Exception):
                return stat, read
            return stat, None
        raise NoNodeError(config.lock_path)

    async def _find_marker(self, marker: str, token: bytes) -> Stat | None:
        """Our marker's Stat, if it exists, holds our token and our session owns it."""
        config = self._config
        client = config.client
        try:
            data, stat = await retry_on_connection_loss(client, lambda: client.get(marker))
        except NoNodeError:
            return None
        if data == token and stat.ephemeral_owner == client.session_id:
            return stat
        return None

    async def release(self, marker: str, owner: int | None, token: bytes | None = None) -> None:
        """Delete our marker (the item goes back to the queue), if our session still owns it."""
        config = self._config
        client = config.client
        if owner is None:
            if token is None:
                return
            found = await self._find_marker(marker, token)
            if found is None:
                return
            owner = found.ephemeral_owner
        # Only in the session that owns it: markers of one item share a name, and
        # a delete that waited into a new session would remove the next taker's.
        with (
            contextlib.suppress(SessionExpiredError, ClientClosedError, NoConnectionError),
            client.only_in_session(owner),
        ):
            await delete_quietly(client, marker)

    async def commit(self, got: Got[T]) -> None:
        """Delete the item and its marker in one transaction: the work is done.

        TakeLostError if the item certainly went back (our marker is gone and
        the commit never applied); OutcomeUnknownError if a commit was sent, its
        reply lost, and the session ended before a retry could tell.
        """
        config = self._config
        client = config.client
        marker = got.marker
        assert marker is not None
        sent = False

        async def once() -> None:
            nonlocal sent
            # Checked before every try, not once: after a lost reply the retry may
            # run in a new session, where our marker no longer keeps other takers
            # off the item, so "the item is gone" would prove nothing.
            if client.session_id != got.owner:
                raise MarkerGone
            try:
                with client.only_in_session(got.owner):
                    await client.transaction().delete(got.path).delete(marker).commit()
            except NoNodeError as error:
                if error.op_index != 0:
                    raise TakeLostError(got.path, "its taken-marker was deleted") from error
                # The item is gone while our marker still kept takers off it: our
                # own commit whose reply was lost, or someone removed it (remove(),
                # move_aside(), a get() consumer).
                with client.only_in_session(got.owner):
                    await delete_quietly(client, marker)
            except SessionExpiredError as error:
                raise MarkerGone from error
            except ConnectionLossError as error:
                sent = sent or error.sent
                raise

        try:
            await call_with_retry(client.retry_policy, once, retry_if=lost_connection)
        except MarkerGone:
            if sent and not await self._still_there(got.path):
                # Our commit may have applied, or another taker's after our marker
                # went: nobody can tell which.
                raise OutcomeUnknownError(got.path) from None
            raise TakeLostError(got.path, "the session that took it ended; it went back") from None
        except ConnectionLossError as error:
            if sent:
                raise OutcomeUnknownError(got.path) from error
            raise

    async def _still_there(self, path: str) -> bool | None:
        """Whether the item exists (None if that cannot be learnt now)."""
        config = self._config
        client = config.client
        try:
            return await retry_on_connection_loss(client, lambda: client.exists(path)) is not None
        except (ConnectionLossError, SessionExpiredError, ClientClosedError):
            return None
