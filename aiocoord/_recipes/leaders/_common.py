"""What the leader recipes share: node names, the election record, and the pure
rule that says who leads once hand-overs and priorities are counted.

Curator's participants (LeaderLatch, LeaderSelector) know one rule: the lowest
sequence number leads, and each node's data is its participant id. aiocoord
keeps both, and adds two things Curator never looks at:

- **A tag in our node names.** ``_c_<uuid>-aio-latch-<seq>`` (or
  ``aio.<priority>-`` with a priority): Curator sorts by the text after the
  last ``latch-``/``lock-`` and ignores the rest, so the queue is the same to
  both; the tag tells our participants (and observers) which nodes follow the
  rules below, and carries the priority, which never changes for a node.
- **The election record**, in the election node's own data (the parent of the
  queue). Curator neither reads nor writes it, and it goes with the node when
  the last participant leaves (a container). It holds what the current leader
  proclaims and, during a hand-over, the node leadership is passed to. Only a
  leader writes it, always in a transaction guarded by its own node.

The rule (:func:`designated`): the node a hand-over names, while it is queued;
else the highest priority (no priority is lowest), the earliest among equals.
An aiocoord participant that reaches the head of the queue leads only if it
is the designated node; otherwise it queues again, at the back (it never
led: no moment with two leaders). A Curator participant at the head simply
leads. Every leader's node was created before any later leader's, so the
fencing token (the leader node's creation zxid) still grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..._checks import check_text
from ..._exceptions import (
    ArgumentTypeError,
    ClientClosedError,
    ConnectionLossError,
    InvalidArgumentError,
    LeadershipLostError,
    NoNodeError,
    SessionExpiredError,
)
from ..._session import Client, ErrorPolicy, check_error_policy, retry_on_connection_loss
from .._kit import (
    LOCK_NAME,
    Hold,
    Participant,
    generated_participant_id,
    read_children,
    recipe_path,
    sequence_key,
    wait_gone,
)

__all__ = [
    "LATCH_NAME",
    "LOCK_NAMES",
    "Record",
    "check_arguments",
    "check_priority",
    "contenders",
    "designated",
    "end_term",
    "give_up",
    "gives_way",
    "hand_over_target",
    "is_ours",
    "leader_from",
    "node_gone",
    "node_name",
    "participants",
    "priority_contender",
    "priority_of",
    "read_queue",
    "settle",
    "stop",
    "target_node",
]

LATCH_NAME = "latch-"
"""Curator's LeaderLatch node name."""
LOCK_NAMES = (LATCH_NAME, LOCK_NAME)
"""What a queue of either recipe sorts by (neither name contains the other)."""

_TAG = "aio"
_TAGGED = re.compile(r"(?:^|-)aio(?:\.(-?\d+))?-(?:latch|lock)-\d+$")
"""Our participants' names: ``..-aio-latch-<seq>``, ``..-aio.<priority>-lock-<seq>``."""


def node_name(lock_name: str, priority: int | None) -> str:
    """The name our node is created with (after the protection marker, before the
    sequence number)."""
    tag = _TAG if priority is None else f"{_TAG}.{priority}"
    return f"{tag}-{lock_name}"


def is_ours(name: str) -> bool:
    """Whether ``name`` is an aiocoord participant's (one that follows the hand-over rule)."""
    return _TAGGED.search(name) is not None


def priority_of(name: str) -> int | None:
    """The priority in a participant's node name (None: none, or not ours)."""
    match = _TAGGED.search(name)
    if match is None or match.group(1) is None:
        return None
    return int(match.group(1))


def check_priority(priority: object, path: str) -> int | None:
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ArgumentTypeError("priority", "an int or None", priority, path)
    return priority


# --- the election record --------------------------------------------------------------------

_RECORD_KIND = "aiocoord-leader"


@dataclass(frozen=True, slots=True)
class Record:
    """The election node's data, as aiocoord writes it: a one-line JSON header,
    then the proclaimed data (raw bytes)."""

    leader: str | None = None
    """The node (name) whose term proclaimed :attr:`data`."""
    data: bytes | None = None
    """What that leader proclaims (None: nothing proclaimed)."""
    to: str | None = None
    """During a hand-over: the node (name) that is to lead next."""

    def encode(self) -> bytes:
        header = {"kind": _RECORD_KIND, "v": 1, "leader": self.leader, "to": self.to}
        if self.data is not None:
            header["data"] = True
        line = json.dumps(header, separators=(",", ":")).encode()
        return line + b"\n" + (self.data or b"")

    @staticmethod
    def decode(raw: bytes | None) -> Record | None:
        """The record in ``raw``; None for anything else (empty, or not ours)."""
        if not raw or not raw.startswith(b"{"):
            return None
        line, _, rest = raw.partition(b"\n")
        try:
            header: Any = json.loads(line)
        except ValueError:
            return None
        if not isinstance(header, dict) or header.get("kind") != _RECORD_KIND:
            return None
        leader, to = header.get("leader"), header.get("to")
        return Record(
            leader if isinstance(leader, str) else None,
            rest if header.get("data") else None,
            to if isinstance(to, str) else None,
        )


def designated(ordered: Sequence[str], record: Record | None) -> str | None:
    """The node that is to lead, by aiocoord's rule (see the module docstring);
    ``ordered`` is the queue in order. None for an empty queue."""
    if not ordered:
        return None
    if record is not None and record.to is not None and record.to in ordered:
        return record.to
    best, best_priority = ordered[0], priority_of(ordered[0])
    for name in ordered[1:]:
        priority = priority_of(name)
        if priority is not None and (best_priority is None or priority > best_priority):
            best, best_priority = name, priority
    return best


def leader_from(ordered: Sequence[str], record: Record | None) -> str | None:
    """Who leads now, by the queue: its head, unless the head is ours and is to
    give way (it is about to queue again: leadership is in transit, None)."""
    if not ordered:
        return None
    head = ordered[0]
    if is_ours(head) and designated(ordered, record) != head:
        return None
    return head


def contenders(names: Sequence[str]) -> list[str]:
    """The participants' names among ``names`` (a latch's or an election's), in queue order."""
    found = [n for n in names if any(lock in n for lock in LOCK_NAMES)]
    return sorted(found, key=lambda n: sequence_key(n, LOCK_NAMES))


async def read_queue(client: Client, path: str) -> tuple[list[str], Record | None]:
    """The queue in order and the election record, in one round trip ([] and None
    if the election node does not exist)."""

    async def read() -> tuple[list[str], Record | None]:
        pipeline = client.pipeline()
        pipeline.children(path)
        pipeline.get(path)
        listing, node = await pipeline.execute()
        if isinstance(listing, NoNodeError):
            return [], None
        if isinstance(listing, Exception):
            raise listing
        names, _stat = listing
        if isinstance(node, Exception):
            if isinstance(node, NoNodeError):
                return [], None
            raise node
        return contenders(names), Record.decode(node[0])

    return await retry_on_connection_loss(client, read)


async def gives_way(client: Client, path: str, node: str, session_id: int) -> bool:
    """Our ``node`` (of session ``session_id``) heads the queue: whether the rule
    says another is to lead (see the module docstring), so that we queue again.

    Otherwise a term starts, with nothing proclaimed: a record that names our
    node (a hand-over to us, or what an earlier term of this same node
    proclaimed: a latch's node outlives a term lost to a suspended connection)
    or a hand-over to a participant gone since is cleared first. Raises
    SessionExpiredError if the session owning ``node`` ended, NoNodeError if
    ``node`` is gone, and ConnectionLossError as it comes.
    """
    me = node.rsplit("/", 1)[1]
    ordered, record = await read_queue(client, path)
    if client.session_id != session_id:
        raise SessionExpiredError(f"{path!r}: the session of our node ended")
    if designated(ordered, record) != me:
        return True
    if record is not None and (record.to is not None or record.leader == me):
        await client.transaction().check(node).set(path, Record().encode()).commit()
    return False


# --- shared by the recipes ------------------------------------------------------------------


async def participants(client: Client, path: str, lock_name: str) -> list[Participant]:
    """The participants under ``path`` in queue order (their data read in one
    round trip); the leader's entry has its fencing token."""

    def queued(names: list[str]) -> list[str]:
        return sorted(
            (n for n in names if lock_name in n), key=lambda n: sequence_key(n, (lock_name,))
        )

    found = await read_children(client, path, select=queued)
    # Java decodes with replacement too: both sides show the same id.
    return [
        Participant(
            child.data.decode("utf-8", errors="replace"),
            child.path,
            child.data,
            place == 0,
            child.stat.czxid if place == 0 else None,
        )
        for place, child in enumerate(found)
    ]


def check_arguments(
    client: Client,
    path: str,
    participant_id: str | None,
    error_policy: ErrorPolicy | None,
    what: str,
) -> tuple[str, bytes]:
    """Validate a recipe's arguments (before any I/O): the participant id (a
    generated one for None) and its bytes, what our node holds."""
    recipe_path(client, path, what)
    check_error_policy(error_policy, path)
    if participant_id is None:
        participant_id = generated_participant_id()
    return participant_id, check_text(participant_id, "participant_id", path=path)


async def node_gone(client: Client, node: str, session_id: int) -> str:
    """Wait until our ``node`` (owned by session ``session_id``) is gone; say why.

    Rides out SUSPENDED (the watch survives a reconnection to the same session)
    and outages of any length.
    """
    try:
        gone = await wait_gone(client, node, session=session_id, outlast_outages=True)
    except ClientClosedError:
        return "the client was closed"
    assert gone is not None  # no deadline
    return gone.value


async def stop(task: asyncio.Task[Any] | None) -> asyncio.CancelledError | None:
    """Cancel ``task`` and wait for it to end, even if the caller is cancelled
    meanwhile: that cancellation is returned, for the caller to raise once its
    own cleanup is done (a native ``Task.cancel()`` goes through anyio shields)."""
    if task is None:
        return None
    task.cancel()
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError as error:
        # The task ends at its next step, with nothing awaited by it left behind.
        return error
    return None


# --- ending a term early ----------------------------------------------------------------------


async def give_up(client: Client, path: str, node: str, to: str | None) -> None:
    """Delete our leader ``node``; with ``to`` (a node name), name it in the
    election record in the same transaction, so the participants ahead of it give
    way. Nothing happens if our node is already gone, or goes with its session
    meanwhile."""
    transaction = client.transaction().check(node)
    if to is not None:
        transaction.set(path, Record(to=to).encode())
    transaction.delete(node)
    # A retry after a lost reply finds our node gone: the first try applied. A
    # session that ended meanwhile took our node (ephemeral) with it, and wrote
    # no record: whoever heads the queue leads, by the usual rule.
    with contextlib.suppress(NoNodeError, SessionExpiredError):
        await retry_on_connection_loss(client, transaction.commit)


def end_term(
    client: Client, path: str, node: str, hold: Hold, reason: str, to: str | None
) -> asyncio.Task[None]:
    """End a term early: mark it lost (its body is cancelled through the usual loss
    path, with ``reason``), then give the node up in a task of the client that
    nothing cancels but the client's close (so a body that ends its own term,
    and is cancelled by doing so, still gets the node deleted)."""
    hold.mark_lost(reason, warn=False)  # first: stop acting as leader, then let go
    return client.start_background(
        give_up(client, path, node, to), name=f"aiocoord-leader-give-up {node}"
    )


async def settle(task: asyncio.Future[None] | None) -> None:
    """Wait until an :func:`end_term` task (or a term's given-up future) is done,
    without cancelling it if the caller is cancelled; a task's errors are the
    client's background runner's to log."""
    if task is not None and not task.done():
        await asyncio.wait([task])


def target_node(found: Sequence[Participant], to: str, me: str | None, path: str) -> str:
    """The node of participant ``to`` in ``found`` (the earliest, if it has several)."""
    for participant in found:
        if participant.id == to and participant.node != me:
            return participant.node.rsplit("/", 1)[1]
    raise InvalidArgumentError("to", f"participant {to!r} is not queued (to lead next)", path)


async def hand_over_target(
    client: Client, path: str, lock_name: str, to: str, me: str | None
) -> str:
    """Before a hand-over from our node ``me``: the node (name) of participant
    ``to``, read from the queue (InvalidArgumentError if it is not queued).
    LeadershipLostError if our session ends during the read: the term is over."""
    try:
        found = await participants(client, path, lock_name)
    except SessionExpiredError as error:
        raise LeadershipLostError(path, "its session ended while handing over") from error
    return target_node(found, to, me, path)


async def priority_contender(client: Client, path: str, me: str) -> tuple[str, str] | None:
    """While we lead: wait until a participant with a higher priority than ours
    queues; its node name and id. None if that cannot be followed (the session
    ended: the term is lost anyway)."""
    while True:
        try:
            names, _stat, watch = await retry_on_connection_loss(
                client, lambda: client.watch_children(path)
            )
        except (NoNodeError, SessionExpiredError, ClientClosedError):
            return None
        except ConnectionLossError:
            await client.wait_connected()
            continue
        async with watch:
            ordered = contenders(names)
            if me not in ordered:
                return None
            best = designated(ordered, None)
            if best is not None and best != me:
                try:
                    data, _ = await retry_on_connection_loss(
                        client, functools.partial(client.get, f"{path}/{best}")
                    )
                except NoNodeError:
                    continue  # it left already: look again
                return best, data.decode("utf-8", errors="replace")
            try:
                await watch
            except (SessionExpiredError, ClientClosedError):
                return None
            except ConnectionLossError:
                await client.wait_connected()
