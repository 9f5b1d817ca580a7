"""One queue's settings, checked once, and what every part of it does with its
nodes: make the queue and lock paths, turn items into node data and back, and
move an item aside (to a dead-letter path)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Generic, cast

from typing_extensions import TypeVar

from ... import _paths
from ..._checks import check_int, check_recipe_acl
from ..._exceptions import (
    ArgumentTypeError,
    CoordinationError,
    CorruptValueError,
    DataTooLargeError,
    InvalidArgumentError,
    InvalidPathError,
    NodeExistsError,
    NoNodeError,
)
from ..._session import Client, call_with_retry
from ..._types import ACL, Codec
from .._kit import recipe_path
from ._cursor import Diverted, unsent
from ._rules import LOCK_PATH_SUFFIX, ItemCodec, Layout, decode_item, unwrap_item, wrap_item

__all__ = ["QueueConfig"]

T = TypeVar("T", default=bytes)

log = logging.getLogger("aiocoord")


class QueueConfig(Generic[T]):
    """Where a queue lives, how its items are named and encoded, and its bounds:
    checked when the queue is made, shared by its producer and consumer."""

    def __init__(
        self,
        client: Client,
        path: str,
        layout: Layout,
        kind: str,
        *,
        codec: ItemCodec[T] | None,
        max_items: int | None,
        lock_path: str | None,
        dead_letter: str | None,
        acl: Sequence[ACL] | None,
    ) -> None:
        recipe_path(client, path, kind)
        self.kind = kind
        """What the queue is (``queue``, ``priority queue``, ...): for messages and telemetry."""
        chosen: object = Codec.BYTES if codec is None else codec
        if not (
            callable(getattr(chosen, "encode", None)) and callable(getattr(chosen, "decode", None))
        ):
            raise ArgumentTypeError(
                "codec", "an object with encode(value) and decode(data, path)", chosen, path
            )
        if max_items is not None:
            check_int(max_items, "max_items", path=path, minimum=1)
        lock_path = path + LOCK_PATH_SUFFIX if lock_path is None else lock_path
        recipe_path(client, lock_path, "queue's lock path")
        if dead_letter is not None:
            recipe_path(client, dead_letter, "dead-letter path")
        for other, what in ((lock_path, "lock_path"), (dead_letter, "dead_letter")):
            if other is not None and (other == path or other.startswith(path + "/")):
                raise InvalidArgumentError(
                    what, f"{other!r} cannot be the queue path or below it", path
                )
        self.acl = check_recipe_acl(acl, path)
        """The ACL of every node the queue makes (None: the client's default)."""
        self.client = client
        self.path = path
        self.layout = layout
        self.codec: ItemCodec[T] = cast("ItemCodec[T]", chosen)
        self.max_items = max_items
        self.lock_path = lock_path
        self.dead_letter = dead_letter

    async def make_path(self, path: str) -> None:
        """Create the queue path or the lock path as Curator does.

        Curator's DistributedQueue family (and any lock path) makes its own
        node once, when a queue starts, as a persistent node under container
        parents; were it a container, the server would sweep it away when
        empty, and a running Curator producer or consumer would fail or go
        deaf. SimpleDistributedQueue's path is a container.
        """
        client = self.client
        if not self.layout.envelope and path == self.path:
            await client.ensure_path(path, container=True, acl=self.acl)
            return
        await client.ensure_path(_paths.parent(path), container=True, acl=self.acl)
        with contextlib.suppress(NodeExistsError):
            await client.create(path, b"", acl=self.acl)

    # --- items and node data ----------------------------------------------------

    def encode_all(self, name: str, items: Iterable[T]) -> list[tuple[str, bytes]]:
        """``(name, data)`` for each of ``items`` (put_many's), all encoded before any is sent."""
        if isinstance(items, str | bytes | bytearray | memoryview) or not isinstance(
            items, Iterable
        ):
            raise ArgumentTypeError("items", "an iterable of items", items, self.path)
        return [(name, self.encode(item)) for item in items]

    def encode(self, item: T) -> bytes:
        """The node data of ``item``; refused (naming the queue) before anything is sent."""
        try:
            data = self.codec.encode(item)
        except ArgumentTypeError as error:  # from a ready-made codec: say which queue
            raise ArgumentTypeError("item", error.expected, item, self.path) from None
        except InvalidArgumentError as error:
            raise InvalidArgumentError("item", error.reason, self.path) from None
        except OverflowError as error:  # an int too wide for Codec.LONG or Codec.INT
            if isinstance(error, CoordinationError):
                raise
            raise InvalidArgumentError("item", str(error), self.path) from None
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ArgumentTypeError(f"what {self.codec!r} encoded", "bytes", data, self.path)
        data = bytes(data)
        if self.layout.envelope:
            data = wrap_item(data)
        limit = self.client.max_data_size
        if len(data) > limit:
            raise DataTooLargeError(self.path, len(data), limit)
        return data

    def read(self, path: str, data: bytes) -> T:
        """The item in ``data``; CorruptValueError naming ``path``."""
        raw = unwrap_item(data, path) if self.layout.envelope else data
        return decode_item(self.codec, raw, path)

    def decode(self, path: str, data: bytes) -> T:
        """The item in ``data``; CorruptValueError naming ``path`` (the item left
        in place), or Diverted if the queue has a dead-letter path for it."""
        try:
            return self.read(path, data)
        except CorruptValueError:
            if self.dead_letter is None:
                raise
        raise Diverted(path)

    # --- moving items aside ---------------------------------------------------------

    async def divert(self, path: str, marker: str | None = None) -> None:
        """Move an undecodable item to the dead-letter path (with our marker, if any)."""
        assert self.dead_letter is not None
        try:
            moved = await self.move_aside(path, self.dead_letter, marker)
        except NoNodeError:
            return  # someone else moved (or took) it first
        log.warning("queue %r: item %r could not be decoded; moved to %r", self.path, path, moved)

    async def move_aside(self, node: str, to_path: str, marker: str | None = None) -> str:
        """Move item ``node`` to ``to_path`` (the queue's ``move_aside``), deleting our
        take ``marker``, if any, in the same transaction."""
        client = self.client
        if not isinstance(node, str):
            raise ArgumentTypeError("node", "a str (an item's path or name)", node, self.path)
        name = node.rsplit("/", 1)[-1]
        path = node if node.startswith("/") else _paths.join(self.path, node)
        if _paths.parent(path) != self.path or not self.layout.is_item(name):
            raise InvalidPathError(node, f"not an item of the queue {self.path!r}")
        _paths.validate_path(path)
        recipe_path(client, to_path, "destination")
        target = _paths.join(to_path, name)

        async def once() -> str:
            data, stat = await client.get(path)
            for sequential in (False, True):
                transaction = client.transaction()
                transaction.create(
                    target + ("-" if sequential else ""),
                    data,
                    sequential=sequential,
                    acl=self.acl,
                )
                transaction.delete(path, version=stat.version)
                if marker is not None:
                    transaction.delete(marker)
                try:
                    results = await transaction.commit()
                except NodeExistsError:
                    continue
                except NoNodeError as error:
                    if error.op_index != 0:
                        raise
                    await client.ensure_path(to_path, container=True, acl=self.acl)
                    results = await transaction.commit()
                created = results[0]
                assert isinstance(created, str)
                return created
            raise NodeExistsError(target)

        result: str = await call_with_retry(client.retry_policy, once, retry_if=unsent)
        return result
