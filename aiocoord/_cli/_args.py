"""The command line's grammar (argparse): every command, its options, its help."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import aiocoord

from ._exit import ExitCode, exit_codes_text
from ._session import (
    DEFAULT_ZK,
    ENV_KERBEROS,
    ENV_KERBEROS_HOSTNAME,
    ENV_KERBEROS_PRINCIPAL,
    ENV_KERBEROS_SERVICE,
    ENV_SASL_PASSWORD,
    ENV_SASL_PASSWORD_FILE,
    ENV_SASL_USER,
    ENV_TLS_CA,
    ENV_ZK,
)

__all__ = ["Parser", "build_parser", "parse"]

Handler = Callable[..., Any]

_DESCRIPTION = """\
Distributed coordination on Apache ZooKeeper from the shell: run a command
under a lock or only while leader, count, queue, meet at a barrier, and see
what the recipes keep in ZooKeeper. Paths, layouts and bytes are Curator's:
Java services and these commands share them.

Start a local ZooKeeper in one terminal and take a lock in another:
  aiocoord server
  aiocoord lock /demo -- echo hi
"""

_CONNECTION_HELP = f"""\
Where: --zk, else ${ENV_ZK}, else {DEFAULT_ZK}. Paths are absolute znode paths
(under --namespace if given)."""


class Parser(argparse.ArgumentParser):
    """argparse, with a one-line error (and a pointer to --help) instead of the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _number(kind: str, convert: Callable[[str], Any], check: Callable[[Any], bool]) -> Any:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not check(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}")
        return value

    parse.__name__ = kind
    return parse


_seconds = _number("a number of seconds >= 0", float, lambda v: v >= 0 and math.isfinite(v))
_positive_seconds = _number("a number of seconds > 0", float, lambda v: v > 0 and math.isfinite(v))
_positive_number = _number("a number > 0", float, lambda v: v > 0 and math.isfinite(v))
_positive_int = _number("a whole number >= 1", int, lambda v: v >= 1)
_integer = _number("a whole number", int, lambda v: True)
_port = _number("a port number (0 picks a free one)", int, lambda v: 0 <= v < 65536)


def _common() -> Parser:
    """Options every command that talks to ZooKeeper takes."""
    common = Parser(add_help=False)
    zk = common.add_argument_group("ZooKeeper", _CONNECTION_HELP)
    zk.add_argument("--zk", metavar="HOSTS", help="connect string, e.g. h1:2181,h2:2181")
    zk.add_argument("--namespace", metavar="PATH", help="prefix every path with PATH (a chroot)")
    zk.add_argument(
        "--auth",
        metavar="USER:PASSWORD",
        action="append",
        help="authenticate with the digest scheme (may be repeated)",
    )
    zk.add_argument(
        "--connect-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=10.0,
        help="give up (exit 69) if no session is had within this (default 10)",
    )
    zk.add_argument(
        "--session-timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=10.0,
        help="how long the server keeps our session, and what we hold, after it last "
        "heard from us, e.g. once this process is killed (default 10)",
    )
    sasl = common.add_argument_group(
        "SASL (DIGEST-MD5, for an ensemble with SASL users)",
        f"The user: --sasl-user, else ${ENV_SASL_USER}; the password: the first line of "
        f"--sasl-password-file, else of ${ENV_SASL_PASSWORD_FILE}, else ${ENV_SASL_PASSWORD} "
        "(never on the command line, where other users can read it).",
    )
    sasl.add_argument("--sasl-user", metavar="NAME", help="authenticate as this SASL user")
    sasl.add_argument(
        "--sasl-password-file", metavar="FILE", help="read the SASL user's password from FILE"
    )
    krb = common.add_argument_group(
        "Kerberos (SASL GSSAPI; needs aiocoord[kerberos])",
        "The ticket comes from the ticket cache (kinit; $KRB5CCNAME) or a client keytab "
        "($KRB5_CLIENT_KTNAME). Each option also comes from the environment: "
        f"${ENV_KERBEROS}=1, ${ENV_KERBEROS_PRINCIPAL}, ${ENV_KERBEROS_SERVICE}, "
        f"${ENV_KERBEROS_HOSTNAME}. Not with --sasl-user.",
    )
    krb.add_argument("--kerberos", action="store_true", help="authenticate with Kerberos")
    krb.add_argument(
        "--principal", metavar="NAME", help="the client principal to use (default: the cache's)"
    )
    krb.add_argument(
        "--kerberos-service",
        metavar="NAME",
        help="the service of the server principal SERVICE/HOST (default zookeeper)",
    )
    krb.add_argument(
        "--kerberos-hostname",
        metavar="HOST",
        help="the server principal's HOST, for every server (default: the canonical "
        "name of the server reached)",
    )
    tls = common.add_argument_group("TLS (to a secureClientPort)")
    tls.add_argument("--tls", action="store_true", help="connect with TLS (system CAs or --tls-ca)")
    tls.add_argument(
        "--tls-ca", metavar="FILE", help=f"trust these CA certificates (PEM; else ${ENV_TLS_CA})"
    )
    tls.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM)")
    tls.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    tls.add_argument(
        "--tls-insecure",
        action="store_true",
        help="do not check the server's certificate (testing only)",
    )
    _add_output(common)
    return common


def _add_output(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("output")
    out.add_argument(
        "-v", "--verbose", action="count", default=0, help="say more on stderr (-vv: debug log)"
    )
    out.add_argument("-q", "--quiet", action="store_true", help="errors only on stderr")


def _output_only() -> Parser:
    parent = Parser(add_help=False)
    _add_output(parent)
    return parent


def _epilog(examples: str) -> str:
    return f"examples:\n{examples}\n\n{exit_codes_text()}"


def _add_command_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "command",
        nargs="*",
        metavar="COMMAND",
        help="the command to run, after -- (its exit status passes through)",
    )
    parser.set_defaults(takes_command=True)


def _add_grace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--grace",
        metavar="SECONDS",
        type=_seconds,
        default=10.0,
        help="after a loss, how long the command has to exit after SIGTERM before "
        "SIGKILL (default 10)",
    )


def build_parser(handlers: dict[str, Handler]) -> tuple[Parser, dict[str, Parser]]:
    """The parser, and each command's own (for errors found after parsing)."""
    parser = Parser(
        prog="aiocoord",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_text(),
    )
    parser.add_argument("--version", action="version", version=f"aiocoord {aiocoord.__version__}")
    commands = parser.add_subparsers(dest="name", metavar="COMMAND", required=True)
    common = _common()
    made: dict[str, Parser] = {}

    def add(name: str, summary: str, examples: str, *, connects: bool = True) -> Parser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            parents=[common if connects else _output_only()],
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=_epilog(examples),
        )
        assert isinstance(sub, Parser)
        sub.set_defaults(handler=handlers[name], takes_command=False, interrupt_ok=False)
        made[name] = sub
        return sub

    server = add(
        "server",
        "run ZooKeeper (or an ensemble) in the foreground until Ctrl-C or SIGTERM",
        "  aiocoord server                      # 127.0.0.1:2181, data discarded on exit\n"
        "  aiocoord server --port 0             # any free port\n"
        "  aiocoord server --ensemble 3 --data-dir ./zk-data\n"
        "  aiocoord server --port 0 --tls       # also a TLS port; prints export lines\n"
        "  aiocoord server --sasl-user alice:secret   # SASL required of every client",
        connects=False,
    )
    server.add_argument("--ensemble", metavar="N", type=_positive_int, default=1)
    server.add_argument(
        "--port", metavar="N", type=_port, help="client port of a single server (default 2181)"
    )
    server.add_argument("--data-dir", metavar="DIR", help="keep ZooKeeper's data here")
    server.add_argument("--tls", action="store_true", help="also serve TLS (self-signed)")
    server.add_argument(
        "--sasl-user",
        metavar="NAME:PASSWORD",
        action="append",
        help="a DIGEST-MD5 user; with any, every client must authenticate with SASL "
        "(may be repeated; for trying it out: the password shows in the process list)",
    )
    server.set_defaults(interrupt_ok=True)

    lock = add(
        "lock",
        "run a command while holding a lock (a distributed flock)",
        "  aiocoord lock /locks/backup -- ./backup.sh\n"
        "  aiocoord lock /locks/backup --timeout 0 -- ./backup.sh   # skip if busy (exit 75)\n"
        "  aiocoord lock /locks/db --shared -- ./read-report.sh      # many readers...\n"
        "  aiocoord lock /locks/db --write -- ./migrate.sh           # ...or one writer\n"
        "  aiocoord lock /slots/gpu --semaphore 4 -- ./train.sh      # at most 4 at once\n"
        "  aiocoord lock /locks/report --revocable -- ./report.sh    # stops if asked\n\n"
        "The lock is released when the command ends or this process is interrupted\n"
        "(the signal goes to the command first). If the lock is lost while the\n"
        "command runs (the connection drops, the session expires, someone deletes\n"
        "the lock node), the command gets SIGTERM, then SIGKILL after --grace, and\n"
        "the exit status is 71. With --revocable, a request to give the lock back\n"
        "(`aiocoord revoke`, Curator's Revoker) stops the command the same way, and\n"
        "its own exit status passes through. If this process is killed outright,\n"
        "the command is killed with it (Linux) and the lock goes when the session\n"
        "times out.",
    )
    lock.add_argument("path", metavar="PATH")
    kind = lock.add_mutually_exclusive_group()
    kind.add_argument(
        "--shared", action="store_true", help="take the read side of a read-write lock"
    )
    kind.add_argument(
        "--write", action="store_true", help="take the write side of a read-write lock"
    )
    kind.add_argument(
        "--semaphore",
        metavar="N",
        type=_positive_int,
        help="take one of N leases of a semaphore",
    )
    lock.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        help="give up waiting after this (exit 75; 0: try once)",
    )
    lock.add_argument(
        "--revocable",
        action="store_true",
        help="stop the command when someone asks for the lock back (not with --semaphore)",
    )
    _add_grace(lock)
    _add_command_argument(lock)

    revoke = add(
        "revoke",
        "ask the holders of a lock to give it back (Curator's Revoker)",
        "  aiocoord revoke /locks/report\n\n"
        "Marks the node of every current holder of the lock (or read-write lock) at\n"
        "PATH, and prints it. Only a holder that listens acts on it: `aiocoord lock\n"
        "--revocable`, a Mutex(revocable=True), a Curator lock made revocable.\n"
        "Exit status 1 if there is no lock at PATH, or nobody holds it.",
    )
    revoke.add_argument("path", metavar="PATH")

    elect = add(
        "elect",
        "run a command only while leader",
        "  aiocoord elect /election/scheduler --id $(hostname) -- ./scheduler\n"
        "  aiocoord elect /election/scheduler --requeue -- ./run-once.sh\n"
        "  aiocoord elect --observe /election/scheduler\n\n"
        "Waits to lead, then runs the command; when the command ends, leadership\n"
        "passes to the next in line. If leadership is lost meanwhile, the command\n"
        "is stopped (SIGTERM, then SIGKILL after --grace; exit 71). With --requeue\n"
        "the participant queues again after each term, until interrupted.\n"
        "With --observe it takes no part: it prints the leader (id, fencing token,\n"
        "advertised data; or 'no leader') now and on every change, until interrupted.",
    )
    elect.add_argument("path", metavar="PATH")
    elect.add_argument(
        "--observe", action="store_true", help="print the leader on every change; take no part"
    )
    elect.add_argument("--json", action="store_true", help="--observe: one JSON object per line")
    elect.add_argument(
        "--priority",
        metavar="N",
        type=int,
        help="take over from a leader of lower priority (aiocoord participants only)",
    )
    elect.add_argument("--id", help="this participant's id (default host:pid:random hex)")
    elect.add_argument(
        "--requeue", action="store_true", help="after each term, queue again and run again"
    )
    elect.add_argument(
        "--timeout", metavar="SECONDS", type=_seconds, help="give up waiting to lead (exit 75)"
    )
    _add_grace(elect)
    _add_command_argument(elect)

    partition = add(
        "partition",
        "run a command with the items this member owns; run it again when they change",
        "  aiocoord partition /partitions/orders --items s0,s1,s2,s3 -- ./consume.sh\n"
        "  aiocoord partition /partitions/orders --items-node /config/shards -- ./consume.sh\n\n"
        "Joins a Partitioner at PATH and runs the command while this member owns\n"
        "items, with them in $AIOCOORD_ITEMS (comma-separated) and their fencing\n"
        "tokens in $AIOCOORD_FENCING_TOKENS (item=token,...). When the items change\n"
        "(a member joins or leaves, the connection drops, the item node is edited),\n"
        "the command gets SIGTERM (SIGKILL after --grace) and runs again with the new\n"
        "items; while the member owns nothing, nothing runs. When the command exits\n"
        "by itself, the member gives its items back and its status passes through.",
    )
    partition.add_argument("path", metavar="PATH")
    items = partition.add_mutually_exclusive_group(required=True)
    items.add_argument("--items", metavar="A,B,C", help="the items, comma-separated")
    items.add_argument(
        "--items-node",
        metavar="NODE",
        help="read the items from NODE (a JSON list of names; a change rebalances)",
    )
    partition.add_argument("--id", help="this member's id (default host:pid:random hex)")
    partition.add_argument(
        "--weight", metavar="W", type=_positive_number, default=1.0, help="its share (default 1)"
    )
    partition.add_argument(
        "--settle",
        metavar="SECONDS",
        type=_seconds,
        default=1.0,
        help="act once membership has been quiet this long (default 1)",
    )
    _add_grace(partition)
    _add_command_argument(partition)

    counter = add(
        "counter",
        "read or change a counter (Curator's DistributedAtomicLong bytes)",
        "  aiocoord counter get /counters/visits\n"
        "  aiocoord counter add /counters/visits 1\n"
        "  aiocoord counter add /stock/widgets -1 --lower 0   # never below 0 (else exit 1)\n"
        "  aiocoord counter set /counters/visits 0",
    )
    counter.add_argument("action", choices=["get", "add", "set"])
    counter.add_argument("path", metavar="PATH")
    counter.add_argument("value", metavar="N", type=_integer, nargs="?")
    counter.add_argument("--lower", metavar="L", type=_integer, help="add: keep the value >= L")
    counter.add_argument("--upper", metavar="U", type=_integer, help="add: keep the value <= U")

    barrier = add(
        "barrier",
        "run a command once N members have entered; leave together (a double barrier)",
        "  aiocoord barrier /barriers/batch --members 3 -- ./step.sh",
    )
    barrier.add_argument("path", metavar="PATH")
    barrier.add_argument("--members", metavar="N", type=_positive_int, required=True)
    barrier.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        help="give up entering, or leaving, after this (exit 75)",
    )
    _add_command_argument(barrier)

    queue = add(
        "queue",
        "put an item into, or get one from, a FIFO queue (Curator's SimpleDistributedQueue)",
        "  aiocoord queue put /queues/jobs 'resize photo-42'\n"
        "  tar c dir | aiocoord queue put /queues/blobs       # the item from stdin\n"
        "  aiocoord queue get /queues/jobs --timeout 5        # exit 75 if none came",
    )
    queue.add_argument("action", choices=["put", "get"])
    queue.add_argument("path", metavar="PATH")
    queue.add_argument("item", metavar="ITEM", nargs="?", help="put: the item (else stdin)")
    queue.add_argument(
        "--timeout", metavar="SECONDS", type=_seconds, help="get: wait at most this (exit 75)"
    )
    queue.add_argument(
        "--raw", action="store_true", help="get: write the item as is (no newline added)"
    )

    inspect = add(
        "inspect",
        "show what is under a path and what it means (locks, leases, leaders, ...)",
        "  aiocoord inspect /locks/backup          # holder and waiters\n"
        "  aiocoord inspect / --depth 2\n"
        "  aiocoord inspect /locks/backup --json",
    )
    inspect.add_argument("path", metavar="PATH")
    inspect.add_argument("--json", action="store_true", help="one JSON document")
    inspect.add_argument(
        "--depth",
        metavar="N",
        type=_integer,
        default=3,
        help="levels of plain nodes to descend (default 3)",
    )

    top = add(
        "top",
        "a live view of the locks, semaphores, elections, queues and counters under a path",
        "  aiocoord top /app                       # q quits; p k w d h sort; r reverses\n"
        "  aiocoord top / --once                   # one table, then exit\n"
        "  aiocoord top /app --once --json | jq '.recipes[] | select(.waiters > 0)'",
    )
    top.add_argument("path", metavar="PATH", nargs="?", default="/")
    top.add_argument("--once", action="store_true", help="print one table (or document) and exit")
    top.add_argument(
        "--json", action="store_true", help="JSON: one document (--once), else one per line"
    )
    top.add_argument(
        "--interval",
        metavar="SECONDS",
        type=_positive_seconds,
        default=1.0,
        help="seconds between refreshes (default 1)",
    )
    top.add_argument(
        "--depth",
        metavar="N",
        type=_integer,
        default=8,
        help="levels of plain nodes to descend looking for recipes (default 8)",
    )
    top.set_defaults(interrupt_ok=True)

    discover = add(
        "discover",
        "register a service instance, or list or watch them (Curator's service discovery)",
        "  aiocoord discover register api --address 10.0.0.7 --port 8080     # until Ctrl-C\n"
        "  aiocoord discover register api --address $(hostname) --port 8080 \\\n"
        '      --payload \'{"zone": "eu-1"}\' -- ./serve.sh   # while the command runs\n'
        "  aiocoord discover list                  # every service under --base\n"
        "  aiocoord discover list api --json\n"
        "  aiocoord discover watch api             # added, updated, removed, resynced\n\n"
        "Instances are Curator's (curator-x-discovery): <base>/<name>/<id> holding its\n"
        "JSON, so Java services using Curator's ServiceDiscovery on the same base path\n"
        "see these and the reverse. A registered instance stays while this process\n"
        "runs (a dynamic one comes back after a session expiry); it is unregistered\n"
        "when the command ends or this process is interrupted (a permanent one stays).",
    )
    discover.add_argument("action", choices=["register", "list", "watch"])
    discover.add_argument("service", metavar="NAME", nargs="?", help="the service's name")
    discover.add_argument(
        "--base",
        metavar="PATH",
        default="/services",
        help="the base path of the services (default /services)",
    )
    discover.add_argument("--address", metavar="HOST", help="register: the instance's address")
    discover.add_argument("--port", metavar="N", type=_port, help="register: its port")
    discover.add_argument("--ssl-port", metavar="N", type=_port, help="register: its TLS port")
    discover.add_argument("--id", help="register: the instance's id (default a random UUID)")
    discover.add_argument(
        "--payload", metavar="JSON", help="register: any JSON value (an object for Java's Map)"
    )
    discover.add_argument(
        "--type",
        choices=["dynamic", "static", "permanent"],
        default="dynamic",
        help="register: dynamic (ephemeral, the default), static or permanent (persistent)",
    )
    discover.add_argument(
        "--uri-spec", metavar="TEMPLATE", help="register: e.g. '{scheme}://{address}:{port}'"
    )
    discover.add_argument("--json", action="store_true", help="list, watch: JSON output")
    _add_command_argument(discover)
    discover.set_defaults(interrupt_ok=True, command_optional=True)

    watch = add(
        "watch",
        "print a node's changes (with --recursive, its subtree's) until interrupted",
        "  aiocoord watch /config/feature-flags\n"
        "  aiocoord watch /services --recursive --json | jq .",
    )
    watch.add_argument("path", metavar="PATH")
    watch.add_argument("--recursive", action="store_true", help="the whole subtree")
    watch.add_argument("--json", action="store_true", help="one JSON object per line")
    watch.set_defaults(interrupt_ok=True)
    return parser, made


def parse(handlers: dict[str, Handler], argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; the command to run (lock, elect, barrier) is everything after ``--``.

    (argparse would also drop a later ``--`` from the command's own arguments.)
    """
    parser, commands = build_parser(handlers)
    argv = list(argv)
    head, command = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :])
        if "--" in argv
        else (
            argv,
            None,
        )
    )
    args = parser.parse_args(head)
    sub = commands[args.name]
    if args.takes_command:
        if command is not None:
            if args.command:
                sub.error(f"unexpected {' '.join(args.command)!r} before --")
            args.command = command
        optional = getattr(args, "command_optional", False) or getattr(args, "observe", False)
        if not args.command and not optional:
            sub.error("which command should run? Give it after --")
    elif command is not None:
        args = parser.parse_args(argv)
    if args.name == "counter":
        if args.action == "get" and args.value is not None:
            sub.error("counter get takes no N")
        if args.action != "get" and args.value is None:
            sub.error(f"counter {args.action} needs N")
        if args.action != "add" and (args.lower is not None or args.upper is not None):
            sub.error("--lower and --upper go with counter add")
    if args.name == "elect" and args.observe:
        if args.command or args.priority is not None or args.requeue:
            sub.error("--observe takes no part: no command, --priority or --requeue")
        args.interrupt_ok = True
    if args.name == "lock" and args.revocable and args.semaphore is not None:
        sub.error("--revocable goes with a lock, not --semaphore")
    if args.name == "queue":
        if args.action == "get" and args.item is not None:
            sub.error("queue get takes no ITEM")
        if args.action == "put" and args.timeout is not None:
            sub.error("--timeout goes with queue get")
    if args.name == "discover":
        _check_discover(args, sub)
    args.verbosity = -1 if args.quiet else args.verbose
    return args


_REGISTER_ONLY = ("address", "port", "ssl_port", "id", "payload", "uri_spec")


def _check_discover(args: argparse.Namespace, sub: Parser) -> None:
    if args.action == "register":
        if args.service is None or args.address is None:
            sub.error("discover register needs NAME and --address")
    else:
        if args.action == "watch" and args.service is None:
            sub.error("discover watch needs NAME")
        given = [f"--{o.replace('_', '-')}" for o in _REGISTER_ONLY if getattr(args, o)]
        if given or args.type != "dynamic":
            sub.error(f"{(given or ['--type'])[0]} goes with discover register")
        if args.command:
            sub.error("only discover register runs a command")
