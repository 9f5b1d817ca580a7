"""Putting items in a queue: each put sent once, all or none, waiting for room
under ``max_items`` on a children watch."""

from __future__ import annotations

import contextlib
import functools
from typing import Generic

import anyio
from typing_extensions import TypeVar

from ... import _paths, _telemetry
from ..._checks import check_timeout
from ..._exceptions import (
    ConnectionLossError,
    InvalidArgumentError,
    NoConnectionError,
    NoNodeError,
    OutcomeUnknownError,
    SessionExpiredError,
)
from ..._session import Watch, call_with_retry, retry_on_connection_loss
from .._kit import Deadline
from ._config import QueueConfig
from ._cursor import unsent

__all__ = ["Producer"]

T = TypeVar("T", default=bytes)


class Producer(Generic[T]):
    """A queue's producing side: creates encoded items (see :class:`QueueConfig`)."""

    def __init__(self, config: QueueConfig[T]) -> None:
        self._config = config
        self._tags = _telemetry.recipe_tags(
            config.client.telemetry,
            config.kind.replace(" ", "_"),
            config.path,
            config.client.namespace,
        )

    async def put(self, entries: list[tuple[str, bytes]], timeout: float | None) -> bool:
        """Create ``(name, data)`` items, all or none; False if ``timeout`` passed
        while the queue was full (nothing was put)."""
        with _telemetry.span("aiocoord.queue.put", self._tags) as op:
            op.set("aiocoord.items", len(entries))
            done = await self._put(entries, timeout)
            op.outcome("put" if done else "timeout")
            return done

    async def _put(self, entries: list[tuple[str, bytes]], timeout: float | None) -> bool:
        config = self._config
        timeout = check_timeout(timeout, path=config.path)
        if not entries:
            return True
        if config.max_items is not None:
            if len(entries) > config.max_items:
                raise InvalidArgumentError(
                    "items",
                    f"{len(entries)} items can never fit (max_items={config.max_items})",
                    config.path,
                )
            if not await self._wait_for_room(len(entries), Deadline(timeout)):
                return False
        await self._create(entries)
        return True

    async def _create(self, entries: list[tuple[str, bytes]]) -> None:
        config = self._config
        client = config.client
        paths = [(_paths.join(config.path, name), data) for name, data in entries]

        async def send() -> None:
            if len(paths) == 1:
                path, data = paths[0]
                await client.create(path, data, sequential=True, acl=config.acl)
                return
            transaction = client.transaction()
            for path, data in paths:
                transaction.create(path, data, sequential=True, acl=config.acl)
            await transaction.commit()

        async def once() -> None:
            try:
                await send()
            except NoNodeError:
                # The queue node is missing (a container the server swept away).
                await retry_on_connection_loss(client, lambda: config.make_path(config.path))
                await send()

        try:
            await call_with_retry(client.retry_policy, once, retry_if=unsent)
        except NoConnectionError:
            raise
        except ConnectionLossError as error:
            if error.sent:
                # The create reached the server or not: nobody can tell, since a
                # consumer may already have taken the item. Never sent twice.
                raise OutcomeUnknownError(config.path) from error
            raise

    async def _wait_for_room(self, count: int, deadline: Deadline) -> bool:
        """Wait (on a children watch) until ``count`` more items fit under
        ``max_items``; False if ``deadline`` passed first."""
        config = self._config
        client = config.client
        assert config.max_items is not None
        first = True
        while True:
            # The first look is always had.
            budget = deadline.first_look(client) if first else deadline.remaining()
            first = False
            watch: Watch | None = None
            with anyio.move_on_after(budget) as scope:
                try:
                    names, _stat, watch = await retry_on_connection_loss(
                        client, functools.partial(client.watch_children, config.path)
                    )
                except NoNodeError:
                    return True  # no queue node yet: empty
                except SessionExpiredError:
                    continue
            if scope.cancelled_caught:
                return False
            assert watch is not None
            async with watch:
                if sum(map(config.layout.is_item, names)) + count <= config.max_items:
                    return True
                with anyio.move_on_after(deadline.remaining()) as scope:
                    with contextlib.suppress(SessionExpiredError):
                        await watch
                if scope.cancelled_caught:
                    return False
