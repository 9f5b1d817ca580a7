"""``aiocoord inspect``: what is under a path, and what it means.

Each node's children are read with their data and Stat (one pipelined round
trip per node), and matched against the recipes' layouts (see
:mod:`._layouts`): a node that is a recipe's is summed up (holder and waiters,
leases, leader, members, items, value) and not descended into; any other node
is shown with its data, and its children below it.
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiocoord

from ._exit import CliError, ExitCode
from ._layouts import (
    BARRIER_MEMBER,
    COUNTER_QUEUE,
    CURATOR_QUEUE_ITEM,
    LATCH_NODE,
    LEADER_TAGGED,
    LEASE_NODE,
    LOCK_NODE,
    PARTITION_CLAIM,
    PARTITION_MEMBER,
    PARTITION_TOKEN,
    QUEUE_ITEM,
    QUEUE_TAKEN_SUFFIX,
    READY_NODE,
    RW_NODE,
    SEMAPHORE_CHILDREN,
    SEMAPHORE_LEASES,
    SEMAPHORE_LOCKS,
    sequence,
)
from ._leaders import LEADER_KINDS, read_leaders
from ._output import data_fields, data_text, session_hex, time_text, write_line
from ._session import Interrupts, bad_input, connected, make_client

__all__ = ["inspect_command", "inspect_path"]

Report = dict[str, Any]

_CONTAINER_OWNER = -(2**63)
"""A container node's ``ephemeral_owner`` (ZooKeeper marks node kinds there)."""
_TTL_MARK = 0xFF
"""The top byte of a TTL node's ``ephemeral_owner``."""
_MAX_NODES = 2000
"""Most nodes one ``inspect`` reads; the rest of the tree is left out (and said so)."""


@dataclass(frozen=True)
class _Child:
    name: str
    data: bytes
    stat: aiocoord.Stat

    @property
    def session(self) -> int:
        """The owning session of an ephemeral node, else 0."""
        owner = self.stat.ephemeral_owner
        return owner if owner > 0 else 0


def _node_kind(stat: aiocoord.Stat) -> str:
    owner = stat.ephemeral_owner
    if owner > 0:
        return "ephemeral"
    if owner == _CONTAINER_OWNER:
        return "container"
    if owner < 0 and (owner >> 56) & 0xFF == _TTL_MARK:
        return "ttl"
    return "persistent"


def _entry(child: _Child, *, id_data: bool = False) -> Report:
    """One contender, member or item: its node, session, creation time and data."""
    entry: Report = {"node": child.name}
    if child.session:
        entry["session"] = session_hex(child.session)
    entry["ctime"] = time_text(child.stat.ctime)
    entry["ctime_ms"] = child.stat.ctime
    entry |= data_fields(child.data)
    return entry


class _Reader:
    def __init__(self, client: aiocoord.Client) -> None:
        self.client = client
        self.budget = _MAX_NODES

    async def node(self, path: str) -> tuple[bytes, aiocoord.Stat, list[str]] | None:
        """The node's data, Stat and sorted child names; None if it does not exist."""
        get, listing = await self.client.pipeline().get(path).children(path).execute()
        if isinstance(get, aiocoord.NoNodeError):
            return None
        if isinstance(get, Exception):
            raise get
        if isinstance(listing, Exception):
            raise listing
        data, stat = get
        self.budget -= 1
        return data, stat, sorted(listing[0])

    async def children(self, path: str, names: list[str]) -> list[_Child]:
        """The named children's data and Stat (those deleted meanwhile left out)."""
        names = names[: max(0, self.budget)]
        self.budget -= len(names)
        if not names:
            return []
        pipeline = self.client.pipeline()
        for name in names:
            pipeline.get(_join(path, name))
        found: list[_Child] = []
        for name, result in zip(names, await pipeline.execute(), strict=True):
            if isinstance(result, aiocoord.NoNodeError):
                continue
            if isinstance(result, Exception):
                raise result
            data, stat = result
            found.append(_Child(name, data, stat))
        return found


def _join(path: str, name: str) -> str:
    return f"{path.rstrip('/')}/{name}"


def _all(children: list[_Child], test: Callable[[_Child], bool]) -> bool:
    return bool(children) and all(test(c) for c in children)


# --- the recognisers: each returns a report, or None if the node is not its kind --------


def _election(path: str, children: list[_Child]) -> Report | None:
    """An aiocoord LeaderElection: a lock's layout whose nodes carry the leaders' tag
    (Curator's LeaderSelector has none: it shows as a lock). Who leads is read
    after the walk (:func:`._leaders.read_leaders`)."""
    lock = _lock(path, children)
    if lock is None or not any(LEADER_TAGGED.search(c.name) for c in children):
        return None
    queue = [lock["holder"], *lock["waiters"]]
    return {
        "path": path,
        "kind": "leader election",
        "layout": "LeaderElection (aiocoord)",
        "leader": queue[0],
        "participants": queue[1:],
    }


def _lock(path: str, children: list[_Child]) -> Report | None:
    if not _all(children, lambda c: bool(LOCK_NODE.match(c.name))):
        return None
    queue = sorted(children, key=lambda c: sequence(c.name))
    return {
        "path": path,
        "kind": "lock",
        "layout": "Mutex / LeaderElection (Curator InterProcessMutex / LeaderSelector)",
        "holder": _entry(queue[0]),
        "waiters": [_entry(c) for c in queue[1:]],
    }


def _rw_lock(path: str, children: list[_Child]) -> Report | None:
    if not _all(children, lambda c: bool(RW_NODE.match(c.name))):
        return None
    queue = sorted(children, key=lambda c: sequence(c.name))
    holders: list[Report] = []
    waiters: list[Report] = []
    for index, child in enumerate(queue):
        writer = "__WRIT__" in child.name
        entry = _entry(child) | {"mode": "write" if writer else "read"}
        # The first in line may write; readers hold until the first writer in line.
        if (writer and index == 0) or (not writer and not waiters and not _writer(holders)):
            holders.append(entry)
        else:
            waiters.append(entry)
    return {
        "path": path,
        "kind": "read-write lock",
        "layout": "ReadWriteLock (Curator InterProcessReadWriteLock)",
        "holders": holders,
        "waiters": waiters,
    }


def _writer(entries: list[Report]) -> bool:
    return any(e["mode"] == "write" for e in entries)


def _latch(path: str, children: list[_Child]) -> Report | None:
    if not _all(children, lambda c: bool(LATCH_NODE.match(c.name))):
        return None
    queue = sorted(children, key=lambda c: sequence(c.name))
    return {
        "path": path,
        "kind": "leader latch",
        "layout": "LeaderLatch (Curator LeaderLatch)",
        "leader": _entry(queue[0]),
        "participants": [_entry(c) for c in queue[1:]],
    }


def _double_barrier(path: str, children: list[_Child]) -> Report | None:
    members = [c for c in children if c.name != READY_NODE]
    if not _all(members, lambda c: bool(BARRIER_MEMBER.match(c.name)) and c.session > 0):
        return None
    return {
        "path": path,
        "kind": "double barrier",
        "layout": "DoubleBarrier (Curator DistributedDoubleBarrier)",
        "entered": len(members),
        "ready": len(members) < len(children),
        "members": [_entry(c) for c in sorted(members, key=lambda c: c.stat.czxid)],
    }


def _queue(path: str, children: list[_Child]) -> Report | None:
    fifo = _all(children, lambda c: bool(QUEUE_ITEM.match(c.name)))
    if not fifo and not _all(children, lambda c: bool(CURATOR_QUEUE_ITEM.match(c.name))):
        return None
    if path.endswith(QUEUE_TAKEN_SUFFIX) and _all(children, lambda c: c.session > 0):
        return {
            "path": path,
            "kind": "queue take markers",
            "layout": "Queue.take() markers (Curator DistributedQueue lockPath)",
            "taken": [_entry(c) for c in children],
        }
    ordered = sorted(children, key=lambda c: c.name)
    return {
        "path": path,
        "kind": "queue",
        "layout": "Queue (Curator SimpleDistributedQueue)"
        if fifo
        else "PriorityQueue / DelayQueue / IdQueue (Curator DistributedQueue family)",
        "depth": len(children),
        "head": _entry(ordered[0]),
    }


def _ttl_lease(path: str, children: list[_Child]) -> Report | None:
    if not _all(children, lambda c: bool(LEASE_NODE.match(c.name)) and c.session == 0):
        return None
    now_ms = int(time.time() * 1000)
    holder: Report | None = None
    contenders: list[Report] = []
    for child in sorted(children, key=lambda c: sequence(c.name)):
        ttl_text, _sep, who = child.data.partition(b"\n")
        ttl_ms = int(ttl_text) if ttl_text.isdigit() else 0
        entry = _entry(child) | data_fields(who)
        entry |= {"ttl_ms": ttl_ms, "renewed": time_text(child.stat.mtime)}
        entry["lapsed"] = bool(ttl_ms) and child.stat.mtime + ttl_ms <= now_ms
        if holder is None and not entry["lapsed"]:
            holder = entry
        else:
            contenders.append(entry)
    return {
        "path": path,
        "kind": "lease",
        "layout": "Lease (TTL nodes)",
        "holder": holder,
        "others": contenders,
    }


def _group(path: str, children: list[_Child]) -> Report | None:
    if not _all(children, lambda c: c.session > 0):
        return None
    return {
        "path": path,
        "kind": "group",
        "layout": "GroupMember (Curator GroupMember)",
        "members": [
            {"id": c.name, "session": session_hex(c.session)} | data_fields(c.data)
            for c in children
        ],
    }


def _service(path: str, children: list[_Child]) -> Report | None:
    """Curator's service discovery: each child an instance of the service the node names."""
    name = path.rsplit("/", 1)[1]
    instances = []
    for child in children:
        try:
            instance = aiocoord.ServiceInstance.from_json(child.data)
        except aiocoord.CorruptValueError:
            return None
        if instance.name != name or instance.id != child.name:
            return None
        entry: Report = {
            "id": instance.id,
            "address": instance.address,
            "port": instance.port,
            "ssl_port": instance.ssl_port,
            "type": instance.service_type.value.lower(),
            "enabled": instance.enabled,
        }
        if child.session:
            entry["session"] = session_hex(child.session)
        instances.append(entry)
    if not instances:
        return None
    return {
        "path": path,
        "kind": "service",
        "layout": "ServiceDiscovery (Curator curator-x-discovery)",
        "instances": instances,
    }


def _partitioner(path: str, children: list[_Child]) -> Report | None:
    """A Partitioner: member, claim and token nodes side by side."""
    prefixes = (PARTITION_MEMBER, PARTITION_CLAIM, PARTITION_TOKEN)
    if not _all(children, lambda c: c.name.startswith(prefixes)):
        return None
    members: dict[str, Report] = {}
    claims: dict[str, _Child] = {}
    tokens: dict[str, _Child] = {}
    for child in children:
        if child.name.startswith(PARTITION_MEMBER):
            try:
                weight = json.loads(child.data)["weight"]
            except (ValueError, TypeError, KeyError):
                return None  # not a partitioner's member
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                return None
            member_id = child.name[len(PARTITION_MEMBER) :]
            members[member_id] = {"id": member_id, "weight": weight, "items": []}
            if child.session:
                members[member_id]["session"] = session_hex(child.session)
        elif child.name.startswith(PARTITION_CLAIM):
            claims[child.name[len(PARTITION_CLAIM) :]] = child
        else:
            tokens[child.name[len(PARTITION_TOKEN) :]] = child
    if not members and not tokens:
        return None
    items: list[Report] = []
    for item in sorted(set(claims) | set(tokens)):
        claim, token = claims.get(item), tokens.get(item)
        entry: Report = {"item": item}
        if claim is not None:
            owner = claim.data.decode("utf-8", "replace")
            entry["owner"] = owner
            entry["fencing_token"] = claim.stat.czxid
            if claim.session:
                entry["session"] = session_hex(claim.session)
            if owner in members:
                members[owner]["items"].append(item)
        else:
            entry["owner"] = None
        # Every claim and release of the item bumps its token node's version.
        entry["generation"] = token.stat.version if token is not None else 0
        items.append(entry)
    return {
        "path": path,
        "kind": "partitioner",
        "layout": "Partitioner (member-, claim-, token- nodes)",
        "members": [members[m] for m in sorted(members)],
        "items": items,
        "generation": sum(entry["generation"] for entry in items),
    }


# Services before groups: a service's DYNAMIC instances are ephemeral nodes too; the
# partitioner before both (its member and claim nodes are ephemeral).
_RECOGNISERS = (
    _election,
    _lock,
    _rw_lock,
    _latch,
    _double_barrier,
    _queue,
    _ttl_lease,
    _partitioner,
    _service,
    _group,
)


def _value(path: str, data: bytes) -> Report | None:
    """A node holding a number in a counter's encoding (childless, or with only an
    AtomicLong's combining queue below it)."""
    if len(data) == 8:
        value = struct.unpack(">q", data)[0]
        return {"path": path, "kind": "counter", "layout": "AtomicLong (8 bytes)", "value": value}
    if len(data) == 4:
        value = struct.unpack(">i", data)[0]
        layout = "AtomicInt / SharedCount (4 bytes)"
        return {"path": path, "kind": "int", "layout": layout, "value": value}
    return None


# --- the walk ---------------------------------------------------------------------------


async def _semaphore(reader: _Reader, path: str, names: list[str]) -> Report:
    leases_path, locks_path = _join(path, SEMAPHORE_LEASES), _join(path, SEMAPHORE_LOCKS)
    leases: list[_Child] = []
    waiters: list[_Child] = []
    for sub, into in ((leases_path, leases), (locks_path, waiters)):
        if sub.rsplit("/", 1)[1] in names:
            node = await reader.node(sub)
            if node is not None:
                into.extend(await reader.children(sub, node[2]))
    return {
        "path": path,
        "kind": "semaphore",
        "layout": "Semaphore (Curator InterProcessSemaphoreV2; the limit is not stored)",
        "leases": [_entry(c) for c in sorted(leases, key=lambda c: sequence(c.name))],
        "waiters": [_entry(c) for c in sorted(waiters, key=lambda c: sequence(c.name))],
    }


async def _inspect(reader: _Reader, path: str, depth: int) -> Report | None:
    node = await reader.node(path)
    if node is None:
        return None
    data, stat, names = node
    if SEMAPHORE_LEASES in names and set(names) <= SEMAPHORE_CHILDREN:
        return await _semaphore(reader, path, names)
    children = await reader.children(path, names)
    if not names or names == [COUNTER_QUEUE]:
        value = _value(path, data)
        if value is not None:
            if children:  # a counter whose adds have queued: how many wait now
                value["queued"] = children[0].stat.num_children
            return value
    if children:
        for recognise in _RECOGNISERS:
            recognised = recognise(path, children)
            if recognised is not None:
                return recognised
    report: Report = {"path": path, "kind": "node", "node_kind": _node_kind(stat)}
    report |= data_fields(data)
    report |= {"version": stat.version, "num_children": stat.num_children}
    if stat.ephemeral_owner > 0:
        report["session"] = session_hex(stat.ephemeral_owner)
    if depth <= 0 or reader.budget <= 0:
        report["children_not_shown"] = len(names)
        return report
    below: list[Report] = []
    for child in children:
        sub = await _inspect(reader, _join(path, child.name), depth - 1)
        if sub is not None:
            below.append(sub)
    report["children"] = below
    if len(children) < len(names):
        report["children_not_shown"] = len(names) - len(children)
    return report


async def inspect_path(client: aiocoord.Client, path: str, depth: int = 3) -> Report | None:
    """What is at ``path`` (None if nothing): a report as ``inspect --json`` prints it."""
    report = await _inspect(_Reader(client), path, depth)
    if report is not None:
        await read_leaders(client, report)
    return report


async def inspect_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        aiocoord.NodeCache(client, args.path)  # checks the path, sends nothing
    async with connected(client, args):
        report = await inspect_path(client, args.path, args.depth)
    if report is None:
        raise CliError(ExitCode.FAILED, f"no node at {args.path!r}")
    if args.json:
        write_line(json.dumps(report, indent=2))
    else:
        for line in _render(report, 0):
            write_line(line)
    return ExitCode.OK


# --- text -------------------------------------------------------------------------------


def _who(entry: Report) -> str:
    parts = []
    if "session" in entry:
        parts.append(f"session {entry['session']}")
    parts.append(f"since {entry['ctime']}")
    if "data" in entry:
        parts.append(data_text(None if entry["data"] is None else entry["data"].encode()))
    else:
        parts.append(f"({len(entry.get('data_base64', ''))} base64 chars)")
    parts.append(f"node {entry['node']}")
    return "  ".join(parts)


def _render(report: Report, level: int) -> list[str]:
    pad = "  " * level
    kind = report["kind"]
    head = f"{pad}{report['path']}: {kind}"
    if kind == "node":
        head = f"{pad}{report['path']}  ({report['node_kind']}, version {report['version']}"
        head += f", {report['num_children']} children)"
        if report.get("data") or "data_base64" in report:
            shown = report.get("data")
            head += f"  {data_text(shown.encode()) if shown is not None else '(binary)'}"
        if "session" in report:
            head += f"  session {report['session']}"
        lines = [head]
        for child in report.get("children", []):
            lines += _render(child, level + 1)
        if report.get("children_not_shown"):
            lines.append(f"{pad}  ... {report['children_not_shown']} more not shown")
        return lines
    lines = [f"{head}  [{report['layout']}]"]
    more = pad + "  "

    def rows(label: str, entries: list[Report]) -> None:
        for entry in entries:
            mode = f" ({entry['mode']})" if "mode" in entry else ""
            lines.append(f"{more}{label + mode:<13}{_who(entry)}")

    if kind == "lock":
        rows("holder", [report["holder"]])
        rows("waiting", report["waiters"])
    elif kind == "read-write lock":
        rows("holder", report["holders"])
        rows("waiting", report["waiters"])
    elif kind == "semaphore":
        lines[0] += f"  {len(report['leases'])} leases, {len(report['waiters'])} waiting"
        rows("lease", report["leases"])
        rows("waiting", report["waiters"])
    elif kind in LEADER_KINDS:
        if report.get("fencing_token") is not None:
            lines[0] += f"  fencing token {report['fencing_token']}"
        if report["leader"] is None:
            lines.append(f"{more}{'leader':<13}none now (being handed over)")
        else:
            rows("leader", [report["leader"]])
        rows("candidate", report["participants"])
    elif kind == "double barrier":
        state = "full (ready)" if report["ready"] else "filling"
        lines[0] += f"  {report['entered']} entered, {state}"
        rows("member", report["members"])
    elif kind == "queue":
        lines[0] += f"  {report['depth']} items"
        rows("head", [report["head"]])
    elif kind == "queue take markers":
        rows("taken", report["taken"])
    elif kind == "lease":
        if report["holder"] is not None:
            rows("holder", [report["holder"]])
        rows("other", report["others"])
    elif kind == "group":
        lines[0] += f"  {len(report['members'])} members"
        for member in report["members"]:
            shown = member.get("data")
            text = data_text(shown.encode()) if shown is not None else "(binary)"
            lines.append(f"{more}member {member['id']}  session {member['session']}  {text}")
    elif kind == "service":
        lines[0] += f"  {len(report['instances'])} instances"
        for instance in report["instances"]:
            where = instance["address"] or "-"
            if instance["port"] is not None:
                where += f":{instance['port']}"
            line = f"{more}instance {instance['id']}  {where}  {instance['type']}"
            if not instance["enabled"]:
                line += "  disabled"
            if "session" in instance:
                line += f"  session {instance['session']}"
            lines.append(line)
    elif kind == "partitioner":
        claimed = sum(1 for item in report["items"] if item["owner"] is not None)
        lines[0] += (
            f"  {len(report['members'])} members, {claimed} of {len(report['items'])} items"
            f" claimed, generation {report['generation']}"
        )
        for member in report["members"]:
            owned = " ".join(member["items"]) or "-"
            line = f"{more}member {member['id']}  weight {member['weight']:g}  items {owned}"
            if "session" in member:
                line += f"  session {member['session']}"
            lines.append(line)
        for item in report["items"]:
            if item["owner"] is None:
                lines.append(
                    f"{more}item {item['item']}  unclaimed  generation {item['generation']}"
                )
                continue
            line = f"{more}item {item['item']}  owner {item['owner']}"
            line += f"  token {item['fencing_token']}  generation {item['generation']}"
            lines.append(line)
    elif kind in ("counter", "int"):
        lines[0] += f"  value {report['value']}"
    return lines
