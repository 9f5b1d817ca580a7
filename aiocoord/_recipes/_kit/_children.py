"""Reading a node's children with their data: one listing, then one pipelined round
trip for every child's data.

Every ``participants()`` (and a few recipes' own reads) is this, under one rule
for each way it can go wrong:

- Connection loss is retried under the client's retry policy, the listing and
  the reads together (as every kit wait retries); session expiry and the rest
  are the caller's.
- A child deleted between the listing and its read is left out: it left, and
  the result is what the server held when each entry was read.
- Any other failed read (NoAuthError on a child, a connection cut mid-batch
  when the policy gives up) is raised, never dropped: an entry missing for
  another reason than leaving would be a lie about who is there.
- A missing parent is an empty listing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ... import _paths
from ..._exceptions import NoNodeError
from ..._session import Client, retry_on_connection_loss
from ..._types import Stat

__all__ = ["Child", "read_children", "read_children_and"]


@dataclass(frozen=True, slots=True)
class Child:
    """One child as :func:`read_children` read it."""

    name: str
    path: str
    data: bytes
    stat: Stat


Select = Callable[[list[str]], Sequence[str]]
"""Which of the listed names to read, in the order wanted (default: all, as listed)."""


async def read_children(
    client: Client,
    path: str,
    *,
    select: Select | None = None,
    listing: list[str] | None = None,
) -> list[Child]:
    """The children of ``path`` that ``select`` picks from the listing, in its
    order, each with its data and Stat (see the module for the rules).

    ``listing``: the names, if the caller already listed them (in the round
    trip that made its own node, say): the first try reads from it, a retry
    lists again.
    """
    found, _extra = await read_children_and(client, path, (), select=select, listing=listing)
    return found


async def read_children_and(
    client: Client,
    path: str,
    also: Sequence[str],
    *,
    select: Select | None = None,
    listing: list[str] | None = None,
) -> tuple[list[Child], list[tuple[bytes, Stat] | None]]:
    """:func:`read_children`, and the nodes ``also`` (full paths) read in the same
    round trip as the children: each one's ``(data, stat)``, or None if it does
    not exist."""
    given = listing

    async def read() -> tuple[list[Child], list[tuple[bytes, Stat] | None]]:
        nonlocal given
        names, given = given, None
        if names is None:
            try:
                names = await client.children(path)
            except NoNodeError:
                names = []
        chosen = list(names) if select is None else list(select(names))
        if not chosen and not also:
            return [], []
        pipeline = client.pipeline()
        for name in chosen:
            pipeline.get(_paths.join(path, name))
        for other in also:
            pipeline.get(other)
        results = await pipeline.execute()
        found: list[Child] = []
        for name, result in zip(chosen, results, strict=False):
            if isinstance(result, NoNodeError):
                continue  # it left between the listing and the read
            if isinstance(result, Exception):
                raise result
            data, stat = result
            found.append(Child(name, _paths.join(path, name), data, stat))
        extra: list[tuple[bytes, Stat] | None] = []
        for result in results[len(chosen) :]:
            if isinstance(result, NoNodeError):
                extra.append(None)
            elif isinstance(result, Exception):
                raise result
            else:
                extra.append((result[0], result[1]))
        return found, extra

    return await retry_on_connection_loss(client, read)
