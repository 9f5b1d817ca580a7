"""The partitioner under chaos: where it lives, what the controller reads at the end,
and its invariants (the workers' side is in ``_partition_worker.py``).

Each worker keeps one Partitioner per client (standard and session error
policy) for the whole run, and one more joins and leaves again and again.
Every member writes, for each item it owns, ``begin``/``end`` to the fenced
store with the item's fencing token, then a ZooKeeper transaction guarded by
the item's fence that sets the item's data node to that token.

The invariants:

- ``partition.store``: the store's accepted writes for one item never
  interleave between two grants (so two owners never worked on it at once);
- ``partition.told``: a member the store turned away was told it lost the item;
- ``partition.fenced``: ZooKeeper applied an item's fenced writes in token
  order: once an item was granted again, the former owner's fenced
  transactions were refused (no item ever had two live claims that could write);
- ``partition.owned``: once the nemesis stopped, every item is claimed on the
  server by exactly one member still running, and each member's ``owned`` is
  what the server says it claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import TYPE_CHECKING

from ._history import History, HistoryWriter
from ._layout import ROOT

if TYPE_CHECKING:
    import aiocoord

    from ._checks import Verdict

__all__ = [
    "PARTITIONS",
    "PARTITION_DATA",
    "PARTITION_ITEMS",
    "PARTITION_SETTLE",
    "partition_fenced",
    "partition_owned",
    "read_partitions",
    "server_view",
    "store_resource",
]

PARTITIONS = f"{ROOT}/partitions"
PARTITION_DATA = f"{ROOT}/partition-data"
"""``<PARTITION_DATA>/<item>``: what an item's owner writes, under the item's fence."""
PARTITION_ITEMS = tuple(f"p{n}" for n in range(6))
PARTITION_SETTLE = 0.5


def store_resource(item: str) -> str:
    """The fenced store's resource an item's owner writes to."""
    return f"partition-{item}"


async def server_view(client: aiocoord.Client) -> tuple[set[str], dict[str, str]]:
    """The member ids and the claims (``{item: owner id}``) as the server holds them now."""
    import aiocoord

    members: set[str] = set()
    claims: dict[str, str] = {}
    try:
        await client.sync(PARTITIONS)
        names = await client.children(PARTITIONS)
    except aiocoord.NoNodeError:
        return members, claims
    for name in sorted(names):
        if name.startswith("member-"):
            members.add(name[len("member-") :])
        elif name.startswith("claim-"):
            with contextlib.suppress(aiocoord.NoNodeError):
                data, _stat = await client.get(f"{PARTITIONS}/{name}")
                claims[name[len("claim-") :]] = data.decode(errors="replace")
    return members, claims


async def read_partitions(client: aiocoord.Client, history: HistoryWriter) -> None:
    """The claims as the server holds them at the end: ``{item: owner id}``."""
    import aiocoord

    try:
        async with asyncio.timeout(20):
            _members, claims = await server_view(client)
    except (TimeoutError, aiocoord.CoordinationError) as error:
        history.write({"type": "final", "what": "partitions", "error": repr(error)})
        return
    history.write({"type": "final", "what": "partitions", "claims": claims})


def partition_fenced(history: History, verdict: Verdict) -> None:
    """Per item, the fenced writes ZooKeeper applied, in the order it applied them
    (their zxids), carry tokens that never go down (a refused one was refused because
    the item had moved on: a later grant, a release, or the session's end); and
    each grant's token is one member's alone."""
    applied: dict[str, list[tuple[int, int, str]]] = {}
    grantees: dict[tuple[str, int], set[str]] = {}
    refused = 0
    for op in history.of("partition", "write"):
        if op.get("token") is not None:
            key = (str(op.args.get("item")), int(op.get("token")))
            grantees.setdefault(key, set()).add(str(op.args.get("member")))
        fenced = op.get("fenced")
        if fenced == "applied":
            item = str(op.args.get("item"))
            applied.setdefault(item, []).append((int(op.get("zxid")), int(op.get("token")), op.id))
        elif fenced == "refused":
            refused += 1
    checked = 0
    for item, writes in sorted(applied.items()):
        writes.sort()
        checked += len(writes)
        for (zxid_a, token_a, op_a), (zxid_b, token_b, op_b) in itertools.pairwise(writes):
            if token_b < token_a:
                verdict.problem(
                    f"{item}: {op_b} (token {token_b}) was applied at zxid {zxid_b:#x}, after "
                    f"{op_a} (token {token_a}) at {zxid_a:#x}: a stale owner's write got through"
                )
    for (item, token), members in sorted(grantees.items()):
        if len(members) > 1:
            verdict.problem(f"{item}: token {token} used by several members: {sorted(members)}")
    verdict.checked = checked
    verdict.counts = {"fenced writes applied": checked, "refused (item moved on)": refused}


def partition_owned(history: History, verdict: Verdict) -> None:
    """Once the workers stopped, every item is claimed on the server, each by a member
    still running, and each running member owns exactly what the server says it claims."""
    records = history.final("partitions")
    if not records or records[0].get("claims") is None:
        error = records[0].get("error") if records else "not read"
        verdict.problem(f"the claims were not read from the server at the end: {error}")
        return
    server: dict[str, str] = dict(records[0]["claims"])
    believed: dict[str, set[str]] = {}
    unstable: list[str] = []
    for record in history.final("partition-owned"):
        for member, state in dict(record.get("members") or {}).items():
            believed[member] = set(state.get("owned") or ())
            if not state.get("stable"):
                unstable.append(member)
    for member in unstable:
        verdict.problem(f"{member} did not reach a stable assignment after the nemesis stopped")
    for item in PARTITION_ITEMS:
        if item not in server:
            verdict.problem(f"{item} is claimed by nobody at the end")
        elif server[item] not in believed:
            verdict.problem(f"{item} is claimed by {server[item]}, which is not a running member")
    for member, owned in sorted(believed.items()):
        on_server = {item for item, owner in server.items() if owner == member}
        if owned != on_server:
            verdict.problem(
                f"{member} believes it owns {sorted(owned)}; the server says {sorted(on_server)}"
            )
    verdict.checked = len(server) + len(believed)
    verdict.counts = {
        "items claimed": len(server),
        "members running": len(believed),
        "joins": sum(1 for o in history.of("partition", "join") if o.status == "ok"),
        "leaves": sum(1 for o in history.of("partition", "leave") if o.status == "ok"),
    }
