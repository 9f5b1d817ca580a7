"""The take loop every queue variant shares: list once (with a watch), try the
names in order until one is won, list again only when they run out, and wait
on the watch (and a delay queue's timer) while there is nothing to take.

The tasks using one queue object share its listing, its watch and a
read-ahead of the next item (:class:`Cursor`), so they never race each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Generic

import anyio
from typing_extensions import TypeVar

from ... import _paths, _telemetry
from ..._checks import check_timeout
from ..._exceptions import (
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    NoConnectionError,
    NoNodeError,
    OutcomeUnknownError,
    QueueEmptyError,
    SessionExpiredError,
)
from ..._session import (
    ErrorPolicy,
    Watch,
    call_with_retry,
    retry_on_connection_loss,
    run_cleanup,
)
from .._kit import Deadline, LossMonitor
from ._config import QueueConfig
from ._cursor import Cursor, Diverted, Got, consume, first_of, lost_connection, now_ms
from ._markers import Markers
from ._rules import without_sequence

__all__ = ["Consumer"]

T = TypeVar("T", default=bytes)

log = logging.getLogger("aiocoord")


class Consumer(Generic[T]):
    """A queue object's consuming side: gets (take and delete) and takes (mark,
    then commit or give back), for all of the object's tasks."""

    def __init__(self, config: QueueConfig[T], error_policy: ErrorPolicy) -> None:
        self.config = config
        self._cursor = Cursor()
        self._refilling: dict[bool, asyncio.Event] = {}
        """A listing under way, by mode (take or get): this object's other
        consumers wait for it instead of listing (and watching) too."""
        self.markers = Markers(config, self._cursor)
        self._tags = _telemetry.recipe_tags(
            config.client.telemetry,
            config.kind.replace(" ", "_"),
            config.path,
            config.client.namespace,
        )
        self.monitor = LossMonitor(
            config.client,
            error_policy,
            f"take from queue {config.path!r}",
            tags=self._tags,
            span_name="aiocoord.queue.take.hold",
            duration=None,
        )

    async def next(self, timeout: float | None, *, mark: bool) -> Got[T]:
        """The next item: taken (deleted), or with ``mark`` held by our marker.

        QueueEmptyError if ``timeout`` passed first (``0``: one look). Without a
        timeout, requests wait through outages of any length.
        """
        name = "aiocoord.queue.take" if mark else "aiocoord.queue.get"
        with _telemetry.span(name, self._tags, duration="aiocoord.queue.take.duration") as op:
            got = await self._next(timeout, mark=mark)
            op.outcome("taken")
            if op.recording:
                op.set("aiocoord.node", got.path)
            return got

    async def _next(self, timeout: float | None, *, mark: bool) -> Got[T]:
        config = self.config
        timeout = check_timeout(timeout, path=config.path)
        deadline = Deadline(timeout)
        cursor = self._cursor
        if config.layout.fresh:
            cursor.load(())  # a newer item may come first: start from a new listing
        overrides = (
            config.client.request_timeout(None) if deadline.at is None else contextlib.nullcontext()
        )
        with overrides:
            listed = False
            while True:
                name = cursor.next()
                if name is None:
                    if not await self._refill(deadline, first=not listed, mark=mark):
                        raise QueueEmptyError(config.path, timeout)
                    listed = True
                    continue
                try:
                    got = await (self.markers.mark(name) if mark else self._take(name))
                except Diverted:
                    continue
                if got is not None:
                    return got

    async def _refill(self, deadline: Deadline, *, first: bool, mark: bool) -> bool:
        """List the queue (with a watch) into the cursor, waiting while there is
        nothing to take; False once ``deadline`` passed with nothing.

        The consumers (tasks) of one queue object share this: one lists and
        waits, the others wait for it, so a new item wakes one listing per
        object, not one per task.
        """
        while True:
            leader = self._refilling.get(mark)
            if leader is None:
                break
            budget = deadline.first_look(self.config.client) if first else deadline.remaining()
            with anyio.move_on_after(budget) as scope:
                await leader.wait()
            if scope.cancelled_caught:
                return False
            if self._cursor.names:
                return True
            first = False  # the other one gave up (its own deadline): go on alone
        done = self._refilling[mark] = asyncio.Event()
        try:
            return await self._list_and_wait(deadline, first=first, mark=mark)
        finally:
            del self._refilling[mark]
            done.set()

    async def _list_and_wait(self, deadline: Deadline, *, first: bool, mark: bool) -> bool:
        """:meth:`_refill` for the consumer that lists.

        The first look always gets at least one session timeout (so ``timeout=0``
        looks once even when ZooKeeper is slow); later ones only what is left.
        """
        config = self.config
        client = config.client
        while True:
            budget = deadline.first_look(client) if first else deadline.remaining()
            first = False
            watches: list[Watch] = []
            try:
                ordered: list[str] = []
                with anyio.move_on_after(budget) as scope:
                    try:
                        ordered = await self._list(watches, mark=mark)
                    except SessionExpiredError:
                        continue  # the watches went with the session: list again
                if scope.cancelled_caught:
                    return False
                timer_rang = False
                while True:
                    ready, next_due = config.layout.split(ordered, now_ms())
                    # Names our own tasks are trying are not for this one.
                    fresh = [name for name in ready if name not in self._cursor.inflight]
                    if fresh:
                        self._cursor.load(fresh)
                        return True
                    wait = deadline.remaining()
                    if wait is not None and wait <= 0:
                        return False
                    if timer_rang:
                        break  # the wait used up the watches: list (and watch) again
                    if next_due is not None:
                        # A millisecond past the due time: a timer may fire a bit early.
                        until_due = max(0.0, next_due / 1000 - time.time()) + 0.001
                        wait = until_due if wait is None else min(wait, until_due)
                    with anyio.move_on_after(wait) as scope:
                        await first_of(watches)
                    if not scope.cancelled_caught:
                        break  # a change: list again (a wake is a hint, the listing the verdict)
                    # The due time (or the deadline) came and nothing changed: the
                    # listing still holds, so no need to ask again.
                    timer_rang = True
            finally:
                for watch in watches:
                    watch.cancel()

    async def _list(self, watches: list[Watch], *, mark: bool) -> list[str]:
        """The items, in order (with ``mark``, those no marker holds). The
        watches it sets go into ``watches``, for the caller to wait on and cancel."""
        config = self.config
        client = config.client
        while True:
            try:
                names, _stat, watch = await retry_on_connection_loss(
                    client, functools.partial(client.watch_children, config.path)
                )
                break
            except NoNodeError:
                # A consumer waits on the queue node, so make it (as Curator does).
                await retry_on_connection_loss(client, lambda: config.make_path(config.path))
        watches.append(watch)
        ordered = config.layout.order(names)
        if mark and ordered:
            # Items other consumers are working on: pass them over, and wake when
            # one is given back (its marker goes while the item stays).
            try:
                held, _stat, lock_watch = await retry_on_connection_loss(
                    client, functools.partial(client.watch_children, config.lock_path)
                )
            except NoNodeError:
                held = []
            else:
                watches.append(lock_watch)
            if held:
                taken = set(held)
                ordered = [name for name in ordered if name not in taken]
        return ordered

    async def _take(self, name: str) -> Got[T] | None:
        """Try to take ``name``: read it (unless it was read ahead), then delete
        it. The item, or None if another consumer got it first."""
        config = self.config
        client = config.client
        cursor = self._cursor
        path = _paths.join(config.path, name)
        try:
            ahead = cursor.ahead.pop(name, None)
            if ahead is None:
                try:
                    data, stat = await retry_on_connection_loss(
                        client, functools.partial(client.get, path)
                    )
                except NoNodeError:
                    cursor.lost(name)
                    return None
                version = stat.version
            else:
                data, version = ahead
            try:
                value = config.decode(path, data)
            except Diverted:
                await config.divert(path)
                cursor.drop(name)
                raise
            won = await self._delete_decisively(name, path, version, data)
        except SessionExpiredError:
            cursor.retry(name)  # nothing was taken: try it again in the new session
            return None
        except BaseException:
            cursor.drop(name)
            raise
        if not won:
            cursor.lost(name)
            return None
        cursor.won(name)
        return Got(path, data, value)

    async def _delete_decisively(self, name: str, path: str, version: int, data: bytes) -> bool:
        """Delete the item read at ``version``: True if this consumer took it.

        The delete runs in a task of its own, so its answer is known even if
        the caller is cancelled meanwhile; an item taken by a get that is being
        cancelled is put back at the tail of the queue (a cancelled get takes
        nothing). With the delete goes a read of the next name in line, so the
        next get needs one round trip, not two.
        """
        attempt = asyncio.ensure_future(self._delete(path, version, self._cursor.upcoming()))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(consume)

            async def give_back() -> None:
                try:
                    if await asyncio.shield(attempt):
                        await self._put_back(name, data)
                except CoordinationError as error:
                    log.warning(
                        "queue %r: a cancelled get could not put back %r (%r): item lost",
                        self.config.path,
                        path,
                        error,
                    )

            await run_cleanup(self.config.client, give_back)
            raise

    async def _delete(self, path: str, version: int, ahead: str | None) -> bool:
        config = self.config
        client = config.client
        cursor = self._cursor
        unsure = False

        async def send() -> None:
            nonlocal ahead
            if ahead is None:
                await client.delete(path, version=version)
                return
            name, ahead = ahead, None  # read ahead on the first try only
            deleted, read = await (
                client.pipeline()
                .delete(path, version=version)
                .get(_paths.join(config.path, name))
                .execute()
            )
            if isinstance(read, NoNodeError):
                cursor.gone(name)
            elif not isinstance(read, Exception):
                cursor.ahead[name] = (read[0], read[1].version)
            if isinstance(deleted, Exception):
                raise deleted

        async def once() -> bool:
            nonlocal unsure
            try:
                await send()
                return True
            except (NoNodeError, BadVersionError):
                if unsure:
                    # Our earlier delete may have been the one that went through:
                    # at most once, so the item is not reported.
                    log.warning(
                        "queue %r: the reply to deleting %r was lost and the item is gone; "
                        "it may have been taken by this consumer, but is not reported "
                        "(get() delivers at most once)",
                        config.path,
                        path,
                    )
                return False
            except ConnectionLossError as error:
                unsure = unsure or error.sent
                raise

        try:
            return await call_with_retry(
                client.retry_policy,
                once,
                retry_if=lambda e: lost_connection(e) or isinstance(e, SessionExpiredError),
            )
        except NoConnectionError:
            if unsure:
                raise OutcomeUnknownError(path) from None
            raise
        except ConnectionLossError as error:
            if unsure:
                raise OutcomeUnknownError(path) from error
            raise

    async def _put_back(self, name: str, data: bytes) -> None:
        """Give back an item a cancelled get had already taken: at the queue's
        tail, under the name it had (sequence aside). A lost reply is retried:
        an item put back twice is better than one lost."""
        config = self.config
        client = config.client
        target = _paths.join(config.path, without_sequence(name))

        async def once() -> None:
            try:
                await client.create(target, data, sequential=True, acl=config.acl)
            except NoNodeError:
                await config.make_path(config.path)
                await client.create(target, data, sequential=True, acl=config.acl)

        await call_with_retry(
            client.retry_policy,
            once,
            retry_if=lambda e: lost_connection(e) or isinstance(e, SessionExpiredError),
        )
        log.info("queue %r: a cancelled get put its item back as %s...", config.path, target)
