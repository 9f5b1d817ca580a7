"""The ``aiocoord`` command (layer 4): coordination from the shell, on the public API only.

``main()`` parses the command line, runs one command on an asyncio loop, and
turns whatever it ended with into an exit status and at most one line on
stderr (see :class:`~aiocoord._cli._exit.ExitCode`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from ._args import Handler, parse
from ._commands import (
    barrier_command,
    counter_command,
    elect_command,
    lock_command,
    queue_command,
    revoke_command,
    watch_command,
)
from ._discover import discover_command
from ._exit import CliError, ExitCode, error_to_exit
from ._inspect import inspect_command
from ._output import configure_logging, log, restore_logging
from ._partition import partition_command
from ._server import server_command
from ._session import Interrupts
from ._top import top_command

__all__ = ["ExitCode", "main"]

HANDLERS: dict[str, Handler] = {
    "server": server_command,
    "lock": lock_command,
    "elect": elect_command,
    "partition": partition_command,
    "counter": counter_command,
    "barrier": barrier_command,
    "queue": queue_command,
    "inspect": inspect_command,
    "top": top_command,
    "revoke": revoke_command,
    "watch": watch_command,
    "discover": discover_command,
}


async def _run(args: argparse.Namespace) -> int:
    interrupts = Interrupts()
    task = asyncio.current_task()
    assert task is not None
    interrupts.install(task)
    try:
        status: int = await args.handler(args, interrupts)
        return status
    except asyncio.CancelledError:
        signum = interrupts.signum
        if signum is None:
            raise
        task.uncancel()
        if args.interrupt_ok:
            return ExitCode.OK
        raise CliError(ExitCode.SIGNAL + signum, f"interrupted (signal {signum})") from None
    finally:
        interrupts.uninstall()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``aiocoord`` command line; return its exit status."""
    try:
        args = parse(HANDLERS, sys.argv[1:] if argv is None else argv)
    except SystemExit as exit_:  # --help, --version, or a usage error (already printed)
        return exit_.code if isinstance(exit_.code, int) else ExitCode.USAGE
    configure_logging(args.verbosity)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:  # before the loop took over the signal
        return ExitCode.SIGNAL + 2
    except Exception as error:
        failure = error_to_exit(error)
        if args.verbosity >= 2 or failure.code == ExitCode.INTERNAL:
            log.debug("the command failed", exc_info=error)
        if args.verbosity >= 0 or failure.code < ExitCode.SIGNAL:
            sys.stderr.write(f"aiocoord {args.name}: {failure.message}\n")
        return failure.code
    finally:
        restore_logging()
