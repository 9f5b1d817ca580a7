"""``aiocoord partition``: run a command with the items this member owns, and run it
again (stopped first) whenever they change."""

from __future__ import annotations

import argparse
import asyncio
import os

import aiocoord

from ._output import log
from ._run import run_command
from ._session import Interrupts, bad_input, connected, make_client

__all__ = ["ENV_ITEMS", "ENV_TOKENS", "partition_command"]

ENV_ITEMS = "AIOCOORD_ITEMS"
"""The owned items, comma-separated, in the command's environment."""
ENV_TOKENS = "AIOCOORD_FENCING_TOKENS"
"""``item=token`` for each owned item, comma-separated: for stores that check tokens."""


def _items(args: argparse.Namespace) -> list[str] | aiocoord.PartitionItems:
    if args.items_node is not None:
        return aiocoord.PartitionItems.from_node(args.items_node)
    return [item for item in args.items.split(",") if item]


async def partition_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        part = aiocoord.Partitioner(
            client,
            args.path,
            _items(args),
            participant_id=args.id,
            settle=args.settle,
            weight=args.weight,
        )
    changed = asyncio.Event()
    part.add_listener(lambda _assignment: changed.set())
    async with connected(client, args), part:
        log.info("member %r of %r", part.participant_id, args.path)
        while True:
            # Stopping on a change is immediate (an item may be gone), but a
            # start waits for a settled assignment: on the way there the member
            # may own a part of its share (an item released, its replacement
            # not yet claimed), and each such step would restart the command.
            owned = part.owned
            if not owned or not part.assignment.stable:
                changed.clear()
                await changed.wait()
                continue
            tokens = dict(sorted(part.fencing_tokens.items()))
            env = dict(os.environ)
            env[ENV_ITEMS] = ",".join(tokens)
            env[ENV_TOKENS] = ",".join(f"{item}={token}" for item, token in tokens.items())
            log.info("running the command with %s", ",".join(tokens))

            async def moved(owned: frozenset[str] = owned) -> str:
                while part.owned == owned:
                    changed.clear()
                    await changed.wait()
                now = ",".join(sorted(part.owned)) or "nothing"
                return f"the items changed (now {now})"

            finished = await run_command(
                args.command, interrupts, lost=moved, grace=args.grace, env=env
            )
            if finished.lost is None:
                return finished.status  # it ended by itself: leave, with its status
            log.info("%s: the command was stopped (status %d)", finished.lost, finished.status)
