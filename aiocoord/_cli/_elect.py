"""``aiocoord elect --observe PATH``: print who leads an election, on every change."""

from __future__ import annotations

import argparse
import json

import aiocoord

from ._exit import ExitCode
from ._output import data_fields, data_text, write_line
from ._session import Interrupts, bad_input, connected, make_client

__all__ = ["leader_line", "observe_command"]


def leader_line(leader: aiocoord.Participant | None, *, as_json: bool) -> str:
    """One line for one leader (or none): ``leader <id> token <n>: <data>``."""
    if as_json:
        if leader is None:
            return json.dumps({"leader": None})
        record = {"leader": leader.id, "node": leader.node, "token": leader.fencing_token}
        return json.dumps(record | data_fields(leader.data))
    if leader is None:
        return "no leader"
    return f"leader {leader.id} token {leader.fencing_token}: {data_text(leader.data)}"


async def observe_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    """Follow the election at ``args.path`` without taking part, until interrupted."""
    client = make_client(args)
    with bad_input():
        observer = aiocoord.LeaderObserver(client, args.path)
    async with connected(client, args), observer.changes() as changes:
        async for leader in changes:
            write_line(leader_line(leader, as_json=args.json))
    return ExitCode.OK
