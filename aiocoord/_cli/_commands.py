"""The commands that act on ZooKeeper: lock, revoke, elect, counter, barrier, queue, watch.

Each takes the parsed options and the signal router, builds its recipe objects
first (so bad input fails before anything is sent), then connects.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Coroutine
from typing import Any

import anyio

import aiocoord

from ._elect import observe_command
from ._exit import CliError, ExitCode
from ._inspect import inspect_path
from ._layouts import LOCK_MARKERS, RW_MARKERS, SEMAPHORE_CHILDREN
from ._output import data_fields, data_text, log, session_hex, write_line
from ._run import Finished, first_of, run_command, until_lost
from ._session import Interrupts, bad_input, connected, make_client

__all__ = [
    "barrier_command",
    "counter_command",
    "elect_command",
    "lock_command",
    "queue_command",
    "revoke_command",
    "watch_command",
]


# --- lock ---------------------------------------------------------------------------


async def _refuse_other_layout(client: aiocoord.Client, path: str, kind: str) -> None:
    """Refuse a path another kind of lock uses: a mutex and a read-write lock on one
    path would not exclude each other."""
    try:
        names = await client.children(path)
    except aiocoord.NoNodeError:
        return
    uses = {
        "mutex": any(m in n for n in names for m in LOCK_MARKERS),
        "read-write lock": any(m in n for n in names for m in RW_MARKERS),
        "semaphore": bool(SEMAPHORE_CHILDREN & set(names)),
    }
    others = [other for other, used in uses.items() if used and other != kind]
    if others:
        hint = {
            "mutex": "plain `lock`",
            "read-write lock": "--shared or --write",
            "semaphore": "--semaphore N",
        }[others[0]]
        raise CliError(
            ExitCode.FAILED,
            f"{path!r} is used as a {others[0]}, which a {kind} would not exclude "
            f"(use {hint}, or another path)",
        )


async def lock_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    path: str = args.path
    semaphore: aiocoord.Semaphore | None = None
    with bad_input():
        if args.semaphore is not None:
            kind = "semaphore"
            semaphore = aiocoord.Semaphore(client, path, args.semaphore)
        elif args.shared or args.write:
            kind = "read-write lock"
            both = aiocoord.ReadWriteLock(client, path, revocable=args.revocable)
            lock = both.read_lock if args.shared else both.write_lock
        else:
            kind = "mutex"
            lock = aiocoord.Mutex(client, path, revocable=args.revocable)
    async with connected(client, args):
        await _refuse_other_layout(client, path, kind)
        if semaphore is not None:
            return await _run_with_lease(client, semaphore, args, interrupts)
        return await _run_with_lock(client, lock, args, interrupts)


def _timed_out(what: str, timeout: float | None) -> CliError:
    return CliError(ExitCode.TIMEOUT, f"could not get {what} within {timeout:g} s")


async def _run_with_lock(
    client: aiocoord.Client, lock: aiocoord.Mutex, args: argparse.Namespace, interrupts: Interrupts
) -> int:
    finished: Finished | None = None
    entered = False
    what = f"the lock on {lock.path!r}"
    log.info("waiting for %s", what)
    try:
        async with lock.hold(cancel_on_loss=False, timeout=args.timeout):
            entered = True
            session = client.session_id
            log.info("holding %s (session %s, node %s)", what, session_hex(session), lock.node)
            node = lock.node

            def lost() -> Coroutine[Any, Any, str]:
                losing = until_lost(client, lock.wait_lost(), node, session)
                if not args.revocable:
                    return losing
                return first_of(losing, _revoked(lock.wait_revoked()))

            finished = await run_command(args.command, interrupts, lost=lost, grace=args.grace)
    except aiocoord.OperationTimeoutError as error:
        if entered:
            raise
        raise _timed_out(what, args.timeout) from error
    except aiocoord.LockLostError as error:
        if finished is not None and finished.lost is None:
            # The command had ended by itself before the loss was known.
            log.warning("%s after the command ended", error)
            return finished.status
        raise CliError(ExitCode.LOST, f"{error}; the command was stopped") from error
    assert finished is not None
    if finished.lost == _REVOKED:
        log.warning("%s was asked back; the command was stopped", what)
        return finished.status
    if finished.lost is not None:
        raise CliError(ExitCode.LOST, f"lost {what}: {finished.lost}; the command was stopped")
    return finished.status


_REVOKED = "asked back"
"""What stopping a command on a revocation request reports (not a loss)."""


async def _revoked(requested: Coroutine[Any, Any, object]) -> str:
    await requested
    return _REVOKED


async def revoke_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    path: str = args.path
    with bad_input():
        lock = aiocoord.Mutex(client, path)  # checks the path, sends nothing
    async with connected(client, args):
        report = await inspect_path(client, path, depth=0)
        if report is not None and report["kind"] == "node" and not report["num_children"]:
            raise CliError(ExitCode.FAILED, f"nobody holds {path!r}")
        if report is None or report["kind"] not in ("lock", "read-write lock"):
            found = "nothing" if report is None else f"a {report['kind']}"
            raise CliError(ExitCode.FAILED, f"no lock at {path!r} (found {found})")
        holders = [report["holder"]] if report["kind"] == "lock" else report["holders"]
        asked = 0
        for holder in holders:
            node = f"{path.rstrip('/')}/{holder['node']}"
            if await lock.request_revocation(node):
                write_line(node)
                asked += 1
    if not asked:
        raise CliError(ExitCode.FAILED, f"nobody holds {path!r}")
    return ExitCode.OK


async def _run_with_lease(
    client: aiocoord.Client,
    semaphore: aiocoord.Semaphore,
    args: argparse.Namespace,
    interrupts: Interrupts,
) -> int:
    what = f"a lease of {semaphore.path!r} (at most {semaphore.max_leases})"
    log.info("waiting for %s", what)
    try:
        leases = await semaphore.acquire(1, timeout=args.timeout)
    except aiocoord.OperationTimeoutError as error:
        raise _timed_out(what, args.timeout) from error
    lease = leases[0]
    try:
        session = client.session_id
        log.info("holding %s (session %s, node %s)", what, session_hex(session), lease.node)

        def lost() -> Coroutine[Any, Any, str]:
            return until_lost(client, lease.wait_lost(), lease.node, session)

        finished = await run_command(args.command, interrupts, lost=lost, grace=args.grace)
    finally:
        with anyio.CancelScope(shield=True):
            await lease.release()
    if finished.lost is not None:
        reason = lease.reason if lease.lost else finished.lost
        raise CliError(ExitCode.LOST, f"lost {what}: {reason}; the command was stopped")
    if lease.lost:
        log.warning("lost %s after the command ended: %s", what, lease.reason)
    return finished.status


# --- elect --------------------------------------------------------------------------


async def elect_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    if args.observe:
        return await observe_command(args, interrupts)
    client = make_client(args)
    with bad_input():
        election = aiocoord.LeaderElection(
            client, args.path, participant_id=args.id, priority=args.priority
        )
    async with connected(client, args):
        while True:
            finished: Finished | None = None
            entered = False
            log.info("waiting to lead %r", election.path)
            try:
                async with election.hold(timeout=args.timeout):
                    entered = True
                    log.info(
                        "leading %r (session %s)", election.path, session_hex(client.session_id)
                    )
                    # The term's own cancellation waits until the command is stopped.
                    with anyio.CancelScope(shield=True):
                        finished = await run_command(
                            args.command,
                            interrupts,
                            lost=lambda: _leadership_lost(election),
                            grace=args.grace,
                        )
            except aiocoord.OperationTimeoutError as error:
                if entered:
                    raise
                raise _timed_out(f"leadership of {election.path!r}", args.timeout) from error
            except aiocoord.LeadershipLostError as error:
                if finished is not None and finished.lost is None:
                    log.warning("%s after the command ended", error)
                elif not args.requeue or interrupts.stopping:
                    raise CliError(ExitCode.LOST, f"{error}; the command was stopped") from error
                else:
                    log.warning("%s; the command was stopped; queueing again", error)
                    continue
            assert finished is not None
            if not args.requeue or interrupts.stopping:
                return finished.status
            log.info("the command ended (status %d); queueing again", finished.status)


async def _leadership_lost(election: aiocoord.LeaderElection) -> str:
    await election.wait_lost()
    return "leadership was lost"


# --- counter ------------------------------------------------------------------------


async def counter_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        counter = aiocoord.AtomicLong(client, args.path)
        if args.action in ("add", "set"):
            aiocoord.Codec.LONG.encode(args.value)  # a number that does not fit: refused now
    async with connected(client, args):
        if args.action == "get":
            write_line(str((await counter.get()).post_value))
        elif args.action == "set":
            await counter.force_set(args.value)
            write_line(str(args.value))
        else:
            result = await counter.add(args.value, lower=args.lower, upper=args.upper)
            if not result.succeeded:
                if result.reason == "bound":
                    bounds = f"[{_bound(args.lower)}, {_bound(args.upper)}]"
                    raise CliError(
                        ExitCode.FAILED,
                        f"{args.path!r} holds {result.pre_value}; adding {args.value} would "
                        f"leave {bounds}: unchanged",
                    )
                raise CliError(
                    ExitCode.FAILED, f"{args.path!r}: gave up after contention; unchanged"
                )
            write_line(str(result.post_value))
    return ExitCode.OK


def _bound(value: int | None) -> str:
    return "none" if value is None else str(value)


# --- barrier ------------------------------------------------------------------------


async def barrier_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        barrier = aiocoord.DoubleBarrier(client, args.path, args.members)
    async with connected(client, args):
        log.info("entering %r (%d members)", barrier.path, barrier.members)
        if not await barrier.enter(timeout=args.timeout):
            raise _timed_out(f"{barrier.members} members into {barrier.path!r}", args.timeout)
        try:
            log.info("all %d members entered %r", barrier.members, barrier.path)
            finished = await run_command(args.command, interrupts)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await barrier.leave(timeout=0)
            raise
        log.info("leaving %r", barrier.path)
        if not await barrier.leave(timeout=args.timeout):
            raise _timed_out(f"every member out of {barrier.path!r}", args.timeout)
    return finished.status


# --- queue --------------------------------------------------------------------------


async def queue_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        queue: aiocoord.Queue[bytes] = aiocoord.Queue(client, args.path)
    if args.action == "put":
        item = sys.stdin.buffer.read() if args.item is None else args.item.encode()
        async with connected(client, args):
            await queue.put(item)
            log.info("put %d bytes into %r", len(item), queue.path)
        return ExitCode.OK
    async with connected(client, args):
        try:
            item = await queue.get(timeout=args.timeout)
        except aiocoord.QueueEmptyError as error:
            raise CliError(ExitCode.TIMEOUT, str(error)) from error
    sys.stdout.buffer.write(item if args.raw or item.endswith(b"\n") else item + b"\n")
    sys.stdout.flush()
    return ExitCode.OK


# --- watch --------------------------------------------------------------------------


async def watch_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        cache: aiocoord.NodeCache | aiocoord.TreeCache = (
            aiocoord.TreeCache(client, args.path)
            if args.recursive
            else aiocoord.NodeCache(client, args.path)
        )
    # The events are asked for before the start: the current nodes come first, as "created".
    async with connected(client, args), cache.events() as events:
        await cache.start()
        try:
            async for event in events:
                write_line(_event_line(event, as_json=args.json))
        finally:
            with anyio.CancelScope(shield=True):
                await cache.aclose()
    return ExitCode.OK


def _event_line(event: aiocoord.CacheEvent, *, as_json: bool) -> str:
    kind = event.type.value
    if event.snapshot is not None or event.stat is None:
        nodes = len(event.snapshot) if event.snapshot is not None else None
        if as_json:
            record: dict[str, Any] = {"event": kind, "path": event.path}
            if nodes is not None:
                record["nodes"] = nodes
            return json.dumps(record)
        return f"{kind} {event.path}" + (f" ({nodes} nodes)" if nodes is not None else "")
    stat = event.stat
    if as_json:
        record = {"event": kind, "path": event.path, "version": stat.version}
        record["mzxid"] = stat.mzxid
        record |= data_fields(event.data)
        return json.dumps(record)
    return f"{kind} {event.path} version {stat.version}: {data_text(event.data)}"
