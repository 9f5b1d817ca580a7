"""The command line's grammar, exit codes and error mapping (no server needed)."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

import aiocoord
from aiocoord._cli import HANDLERS, main
from aiocoord._cli._args import parse
from aiocoord._cli._exit import EXIT_CODE_HELP, ExitCode, error_to_exit
from aiocoord._cli._output import data_fields, data_text
from aiocoord._cli._session import _sasl

CLI_DIR = Path(__file__).resolve().parents[2] / "aiocoord" / "_cli"


def test_the_command_is_everything_after_the_first_double_dash() -> None:
    args = parse(HANDLERS, ["lock", "/a", "--timeout", "2", "--", "git", "diff", "--", "x"])
    assert args.command == ["git", "diff", "--", "x"]
    assert (args.path, args.timeout) == ("/a", 2.0)
    # Without "--", trailing words are the command (options of its own need "--").
    assert parse(HANDLERS, ["elect", "/e", "echo", "hi"]).command == ["echo", "hi"]


def test_a_double_dash_elsewhere_means_what_argparse_says() -> None:
    args = parse(HANDLERS, ["queue", "put", "/q", "--", "-starts-with-a-dash"])
    assert args.item == "-starts-with-a-dash"


def test_options_may_follow_the_path() -> None:
    args = parse(HANDLERS, ["counter", "add", "/c", "-5", "--lower", "0", "-vv"])
    assert (args.value, args.lower, args.verbosity) == (-5, 0, 2)
    assert parse(HANDLERS, ["inspect", "/", "-q"]).verbosity == -1


@pytest.mark.parametrize(
    "argv",
    [
        ["lock", "/a"],
        ["lock", "/a", "echo", "--", "hi"],
        ["lock", "/a", "--semaphore", "0", "--", "true"],
        ["lock", "/a", "--shared", "--write", "--", "true"],
        ["lock", "/a", "--timeout", "-1", "--", "true"],
        ["counter", "get", "/c", "5"],
        ["counter", "set", "/c"],
        ["counter", "set", "/c", "1", "--upper", "3"],
        ["queue", "get", "/q", "item"],
        ["barrier", "/b", "--", "true"],
        ["server", "--port", "70000"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], capsys) -> None:
    assert main(argv) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err


def test_input_the_library_refuses_is_a_usage_error_before_connecting(capsys) -> None:
    # Port 1: nothing listens; the error must come before any attempt.
    assert main(["lock", "no-slash", "--zk", "127.0.0.1:1", "--", "true"]) == ExitCode.USAGE
    assert "invalid znode path" in capsys.readouterr().err
    assert main(["counter", "set", "/c", str(2**63), "--zk", "127.0.0.1:1"]) == ExitCode.USAGE
    assert main(["inspect", "/a", "--zk", "host:port"]) == ExitCode.USAGE


@pytest.mark.parametrize("command", sorted(HANDLERS))
def test_every_commands_help_has_examples_and_the_exit_codes(command: str, capsys) -> None:
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "exit status:" in text
    for code in (69, 71, 75):
        assert f"  {code}  " in text


def test_exit_codes_are_distinct_and_each_is_documented() -> None:
    values = [int(code) for code in ExitCode]
    assert len(values) == len(set(values))
    assert set(EXIT_CODE_HELP) == set(ExitCode)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (aiocoord.AuthFailedError(), ExitCode.NO_PERMISSION),
        (aiocoord.AuthFailedError(mechanism="DIGEST-MD5"), ExitCode.NO_PERMISSION),
        (aiocoord.SaslRequiredError("/a"), ExitCode.NO_PERMISSION),
        (aiocoord.NoAuthError("/a"), ExitCode.NO_PERMISSION),
        (aiocoord.LockLostError("/a", "why"), ExitCode.LOST),
        (aiocoord.LeadershipLostError("/a", "why"), ExitCode.LOST),
        (aiocoord.SessionExpiredError("gone"), ExitCode.LOST),
        (aiocoord.NoConnectionError(10.0), ExitCode.UNAVAILABLE),
        (aiocoord.OperationTimeoutError("slow"), ExitCode.TIMEOUT),
        (aiocoord.QueueEmptyError("/q", 1.0), ExitCode.TIMEOUT),
        (aiocoord.InvalidPathError("a", "no slash"), ExitCode.USAGE),
        (aiocoord.NoNodeError("/a"), ExitCode.FAILED),
        (aiocoord.CorruptValueError("/a", b"xyz", "a long"), ExitCode.FAILED),
        (
            aiocoord.MissingExtraError("no", extra="kerberos", package="gssapi"),
            ExitCode.UNAVAILABLE,
        ),
        (RuntimeError("boom"), ExitCode.INTERNAL),
    ],
)
def test_errors_map_to_their_documented_exit_code(error: Exception, code: ExitCode) -> None:
    failure = error_to_exit(error)
    assert failure.code == code
    assert "\n" not in failure.message


def test_node_data_is_shown_as_text_or_hex() -> None:
    assert data_text(b"host:12") == '"host:12"'
    assert data_text(b"\x00\x01") == "0x0001 (2 bytes)"
    assert data_text(b"") == '""'
    assert data_fields(b"ok") == {"data": "ok"}
    assert data_fields(b"\xff") == {"data_base64": "/w=="}


def test_the_cli_uses_only_the_public_api() -> None:
    """Layer 4 imports ``aiocoord`` and ``aiocoord.testing``, never their private modules."""
    offenders = []
    for path in CLI_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.startswith("aiocoord") and name not in ("aiocoord", "aiocoord.testing"):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No AIOCOORD_ variable from the caller's environment; set them on the result."""
    for name in [n for n in os.environ if n.startswith("AIOCOORD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def _sasl_of(argv: list[str], monkeypatch: pytest.MonkeyPatch, **env: str) -> object:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        return _sasl(parse(HANDLERS, ["counter", "get", "/c", *argv]))
    finally:
        for name in env:
            monkeypatch.delenv(name)


def test_kerberos_options_and_their_environment_make_a_sasl_kerberos(
    clean_env: pytest.MonkeyPatch,
) -> None:
    monkeypatch = clean_env
    assert _sasl_of(["--kerberos"], monkeypatch) == aiocoord.SaslKerberos()
    flags = ["--kerberos", "--principal", "alice@R", "--kerberos-service", "zk"]
    flags += ["--kerberos-hostname", "zk.example"]
    expected = aiocoord.SaslKerberos(principal="alice@R", service="zk", hostname="zk.example")
    assert _sasl_of(flags, monkeypatch) == expected
    env = {
        "AIOCOORD_KERBEROS": "1",
        "AIOCOORD_KERBEROS_PRINCIPAL": "alice@R",
        "AIOCOORD_KERBEROS_SERVICE": "zk",
        "AIOCOORD_KERBEROS_HOSTNAME": "zk.example",
    }
    assert _sasl_of([], monkeypatch, **env) == expected
    # A flag beats its variable; a flag choosing a mechanism beats the other's variable.
    assert _sasl_of(["--principal", "bob@R"], monkeypatch, **env) == aiocoord.SaslKerberos(
        principal="bob@R", service="zk", hostname="zk.example"
    )
    assert _sasl_of(["--kerberos"], monkeypatch, AIOCOORD_SASL_USER="alice") == (
        aiocoord.SaslKerberos()
    )
    assert _sasl_of([], monkeypatch, AIOCOORD_KERBEROS="0") is None
    # Without Kerberos asked for, its variables alone do nothing (as a password alone).
    assert _sasl_of([], monkeypatch, AIOCOORD_KERBEROS_PRINCIPAL="alice@R") is None


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--kerberos", "--sasl-user", "alice"], {}, "--kerberos and --sasl-user"),
        ([], {"AIOCOORD_KERBEROS": "1", "AIOCOORD_SASL_USER": "alice"}, "exclude each other"),
        ([], {"AIOCOORD_KERBEROS": "maybe"}, "takes 1 or 0"),
        (["--principal", "alice"], {}, "--principal needs --kerberos"),
        (["--kerberos-hostname", "h"], {}, "--kerberos-hostname needs --kerberos"),
        (["--kerberos", "--sasl-password-file", "/pw"], {}, "goes with --sasl-user"),
        (["--kerberos", "--principal", " "], {}, "principal"),
        (["--kerberos", "--kerberos-service", "zk/x"], {}, "service"),
    ],
)
def test_bad_kerberos_options_are_usage_errors_before_connecting(
    argv: list[str], env: dict[str, str], says: str, clean_env: pytest.MonkeyPatch, capsys
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert main(["counter", "get", "/c", "--zk", "127.0.0.1:1", *argv]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_kerberos_without_the_extra_names_it_and_exits_unavailable(
    clean_env: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch = clean_env
    for name in [n for n in sys.modules if n == "gssapi" or n.startswith("gssapi.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    argv = ["counter", "get", "/c", "--zk", "127.0.0.1:1", "--kerberos"]
    assert main(argv) == ExitCode.UNAVAILABLE
    err = capsys.readouterr().err
    assert "pip install 'aiocoord[kerberos]'" in err and len(err.strip().splitlines()) == 1
