"""Exit codes, in one place, and the mapping from errors to them.

A command run under ``lock``, ``elect`` or ``barrier`` passes its own exit
status through; the codes below are the CLI's own. They sit apart from the
small numbers commands usually return (sysexits.h numbering where one fits),
and ``128 + N`` means "ended by signal N", as shells report it.
"""

from __future__ import annotations

import enum
import ssl
import textwrap

import aiocoord

__all__ = ["EXIT_CODE_HELP", "CliError", "ExitCode", "error_to_exit", "exit_codes_text"]


class ExitCode(enum.IntEnum):
    """What the ``aiocoord`` command's exit status means (besides a command's own)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNAVAILABLE = 69
    INTERNAL = 70
    LOST = 71
    TIMEOUT = 75
    NO_PERMISSION = 77
    CANNOT_EXECUTE = 126
    NOT_FOUND = 127
    SIGNAL = 128


EXIT_CODE_HELP: dict[ExitCode, str] = {
    ExitCode.OK: "done (lock, elect, barrier: the command's own status passes through)",
    ExitCode.FAILED: "ZooKeeper refused the operation or it did not apply "
    "(a counter bound, a missing node, a path used by another kind of lock)",
    ExitCode.USAGE: "bad command line or input (option, path, number, file)",
    ExitCode.UNAVAILABLE: "ZooKeeper could not be reached (within --connect-timeout "
    "at start, or for a whole request timeout later); the server could not start; "
    "an optional package is missing (e.g. aiocoord[kerberos] for --kerberos)",
    ExitCode.INTERNAL: "an unexpected error (a bug: run with -vv and report it)",
    ExitCode.LOST: "the lock, lease or leadership was lost while the command ran "
    "(the command was stopped), or the session expired",
    ExitCode.TIMEOUT: "--timeout passed first (lock, leadership, barrier, queue item)",
    ExitCode.NO_PERMISSION: "authentication failed, or an ACL refused the operation",
    ExitCode.CANNOT_EXECUTE: "the command could not be executed",
    ExitCode.NOT_FOUND: "the command was not found",
    ExitCode.SIGNAL: "interrupted by signal N (130: SIGINT, 143: SIGTERM) before "
    "the command ran, or the command was killed by signal N",
}


def exit_codes_text() -> str:
    """The exit codes as a table for ``--help``."""
    rows = []
    for code, text in EXIT_CODE_HELP.items():
        number = "128+N" if code is ExitCode.SIGNAL else str(int(code))
        rows += textwrap.wrap(
            text, width=78, initial_indent=f"  {number:>5}  ", subsequent_indent=" " * 9
        )
    return "exit status:\n" + "\n".join(rows)


class CliError(Exception):
    """Ends the command with ``code`` and a one-line ``message`` on stderr."""

    def __init__(self, code: ExitCode | int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


def error_to_exit(error: BaseException) -> CliError:
    """The exit code and one-line message for an error a command ended with."""
    if isinstance(error, CliError):
        return error
    text = " ".join(str(error).split()) or type(error).__name__
    code: ExitCode
    if isinstance(error, aiocoord.SaslRequiredError):
        code = ExitCode.NO_PERMISSION
        text = (
            "the ensemble requires SASL authentication: give --sasl-user and "
            "--sasl-password-file, or --kerberos"
        )
    elif isinstance(error, aiocoord.MissingExtraError):
        code = ExitCode.UNAVAILABLE
    elif isinstance(error, aiocoord.AuthFailedError | aiocoord.NoAuthError):
        code = ExitCode.NO_PERMISSION
    elif isinstance(error, aiocoord.OwnershipError | aiocoord.BarrierBrokenError):
        code = ExitCode.LOST
    elif isinstance(error, aiocoord.SessionExpiredError):
        code = ExitCode.LOST
        text = f"the ZooKeeper session expired ({text})"
    elif isinstance(error, aiocoord.ConnectionLossError | aiocoord.ClientClosedError):
        code = ExitCode.UNAVAILABLE
    elif isinstance(error, aiocoord.OperationTimeoutError):
        code = ExitCode.TIMEOUT
    elif isinstance(error, aiocoord.InvalidPathError | aiocoord.InvalidConnectStringError):
        code = ExitCode.USAGE
    elif isinstance(error, aiocoord.ZooKeeperError | aiocoord.CorruptValueError):
        code = ExitCode.FAILED
    elif isinstance(error, aiocoord.CoordinationError) and isinstance(
        error, ValueError | TypeError | OverflowError
    ):
        code = ExitCode.USAGE  # input the library refused before sending anything
    elif isinstance(error, aiocoord.CoordinationError):
        code = ExitCode.FAILED
    elif isinstance(error, ssl.SSLError):
        code = ExitCode.UNAVAILABLE
    else:
        code = ExitCode.INTERNAL
        text = f"internal error: {type(error).__name__}: {text} (run with -vv for details)"
    return CliError(code, text)
