"""Running the user's command: while a lock, a lease or leadership is held, or inside a
barrier; stopping it when what it runs under is lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiocoord

from .._process import dying_with_parent
from ._exit import CliError, ExitCode
from ._session import Interrupts

__all__ = ["Finished", "exit_status", "first_of", "node_gone", "run_command", "until_lost"]


@dataclass(frozen=True)
class Finished:
    """How the command ended."""

    status: int
    """Its exit status as a shell reports it (``128 + N`` if signal N ended it)."""
    lost: str | None = None
    """Why what it ran under was lost, if it was: the command was then stopped."""


def exit_status(returncode: int) -> int:
    """A process's return code as a shell's exit status."""
    return ExitCode.SIGNAL - returncode if returncode < 0 else returncode


async def _start(
    command: Sequence[str], env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """Start the command; it dies with the CLI (Linux): killed with SIGKILL, the CLI
    cannot stop it, and it must not run on unguarded."""
    try:
        return await asyncio.create_subprocess_exec(*dying_with_parent(command, env), env=env)
    except FileNotFoundError as error:
        raise CliError(ExitCode.NOT_FOUND, f"{command[0]}: command not found") from error
    except OSError as error:
        reason = error.strerror or str(error)
        raise CliError(ExitCode.CANNOT_EXECUTE, f"{command[0]}: {reason}") from error


async def _stop(
    proc: asyncio.subprocess.Process, waiter: asyncio.Future[int], grace: float
) -> None:
    """SIGTERM, then SIGKILL if the command is still running after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(asyncio.shield(waiter), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await waiter


async def run_command(
    command: Sequence[str],
    interrupts: Interrupts,
    *,
    lost: Callable[[], Coroutine[Any, Any, str]] | None = None,
    grace: float = 10.0,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run ``command`` (stdin, stdout and stderr passed through) until it exits, or
    until the coroutine ``lost()`` makes returns a reason: then stop it (see
    :func:`_stop`). ``lost`` is called in the caller's task once the command runs.

    ``env``: the command's environment (default: ours).
    Signals the CLI receives meanwhile go to the command (see :class:`Interrupts`).
    If this is cancelled, the command is killed before the cancellation goes on.
    """
    proc = await _start(command, env)
    interrupts.child = proc
    waiter = asyncio.ensure_future(proc.wait())
    watcher = asyncio.ensure_future(lost()) if lost is not None else None
    try:
        await asyncio.wait(
            {waiter} | ({watcher} if watcher else set()), return_when="FIRST_COMPLETED"
        )
        if waiter.done() or watcher is None:
            return Finished(exit_status(await waiter))
        try:
            reason = watcher.result()
        except Exception as error:  # watching failed: the hold cannot be vouched for
            reason = f"watching it failed ({error!r})"
        await _stop(proc, waiter, grace)
        return Finished(exit_status(await waiter), reason)
    finally:
        interrupts.child = None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait([watcher]))
        if proc.returncode is None:
            # Cancelled: the command must not outlive what it ran under.
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(waiter)


async def node_gone(client: aiocoord.Client, node: str, session_id: int) -> str:
    """Return once our ``node`` (owned by session ``session_id``) is gone, saying why.

    The library learns of a lost session or a suspended connection by itself;
    this also catches another client deleting the node.
    """
    while True:
        try:
            stat, watch = await client.watch_exists(node)
        except aiocoord.SessionExpiredError:
            return "the session expired"
        except aiocoord.ConnectionLossError:
            await client.wait_connected()
            continue
        try:
            if client.session_id != session_id:
                return "the session that owned its node ended"
            if stat is None:
                return f"its node {node!r} was deleted"
            try:
                event = await watch
            except aiocoord.SessionExpiredError:
                return "the session expired"
            if event.type is aiocoord.EventType.DELETED:
                return f"its node {node!r} was deleted"
        finally:
            watch.cancel()


async def until_lost(
    client: aiocoord.Client, wait_lost: Coroutine[Any, Any, object], node: str, session_id: int
) -> str:
    """Whichever comes first: the library's loss (``wait_lost``) or our node going."""

    async def reported() -> str:
        await wait_lost
        state = client.state
        return f"the connection was {state.value}" if state is not None else "the session ended"

    return await first_of(node_gone(client, node, session_id), reported())


async def first_of(*coroutines: Coroutine[Any, Any, str]) -> str:
    """The result of whichever finishes first (the earliest given, if several have);
    the others are cancelled and awaited before this returns."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(t for t in tasks if t.done()).result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
