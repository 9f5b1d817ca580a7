"""``aiocoord discover``: register a service instance, list instances, watch a service.

Curator's layout and JSON (curator-x-discovery): what ``register`` makes, a
Java ``ServiceDiscovery`` on the same base path lists, and the reverse.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import aiocoord

from ._exit import CliError, ExitCode
from ._output import log, write_line
from ._run import run_command
from ._session import Interrupts, bad_input, connected, make_client

__all__ = ["DEFAULT_BASE", "discover_command"]

DEFAULT_BASE = "/services"
"""Where services are registered unless ``--base`` says otherwise."""

_TYPES = {
    "dynamic": aiocoord.ServiceType.DYNAMIC,
    "static": aiocoord.ServiceType.STATIC,
    "permanent": aiocoord.ServiceType.PERMANENT,
}
"""``--type``: how the instance's node lives (ephemeral, or persistent)."""


async def discover_command(args: argparse.Namespace, interrupts: Interrupts) -> int:
    client = make_client(args)
    with bad_input():
        discovery = aiocoord.ServiceDiscovery(client, args.base)
        if args.service is not None:
            discovery.path_of(args.service)  # a name that is no node name: refused now
        instance = _instance(args) if args.action == "register" else None
    if instance is not None:
        return await _register(client, discovery, instance, args, interrupts)
    if args.action == "list":
        async with connected(client, args):
            return await _list(discovery, args)
    async with connected(client, args):
        return await _watch(discovery, args)


def _instance(args: argparse.Namespace) -> aiocoord.ServiceInstance:
    payload = None
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except ValueError as error:
            raise CliError(ExitCode.USAGE, f"--payload is not JSON: {error}") from error
    fields: dict[str, Any] = {
        "name": args.service,
        "address": args.address,
        "port": args.port,
        "ssl_port": args.ssl_port,
        "payload": payload,
        "service_type": _TYPES[args.type],
        "uri_spec": args.uri_spec,
    }
    if args.id is not None:
        fields["id"] = args.id
    return aiocoord.ServiceInstance(**fields)


# --- register -----------------------------------------------------------------------


async def _register(
    client: aiocoord.Client,
    discovery: aiocoord.ServiceDiscovery,
    instance: aiocoord.ServiceInstance,
    args: argparse.Namespace,
    interrupts: Interrupts,
) -> int:
    async with connected(client, args), discovery:
        with bad_input():  # the JSON over the size limit, found before sending
            await discovery.register(instance)
        node = discovery.path_of(instance.name, instance.id)
        log.info("registered %s (%s)", node, instance.service_type.value.lower())
        write_line(node)
        if args.command:
            finished = await run_command(args.command, interrupts)
            log.info("the command ended (status %d); unregistering %s", finished.status, node)
            return finished.status
        # Registered until interrupted; leaving (exit status 0) unregisters.
        await asyncio.Event().wait()
    raise AssertionError("not reached")


# --- list ---------------------------------------------------------------------------


async def _list(discovery: aiocoord.ServiceDiscovery, args: argparse.Namespace) -> int:
    names = [args.service] if args.service is not None else await discovery.names()
    services = {name: await discovery.instances(name) for name in names}
    if args.json:
        write_line(
            json.dumps(
                {
                    "base": discovery.path,
                    "services": {
                        name: [json.loads(i.to_json()) for i in found]
                        for name, found in services.items()
                    },
                }
            )
        )
        return ExitCode.OK
    rows = [
        [
            name,
            i.id,
            i.address or "-",
            _port(i.port),
            _port(i.ssl_port),
            i.service_type.value.lower(),
            "yes" if i.enabled else "no",
            "-" if i.payload is None else json.dumps(i.payload, ensure_ascii=False),
        ]
        for name, found in services.items()
        for i in found
    ]
    head = ["NAME", "ID", "ADDRESS", "PORT", "SSL", "TYPE", "ENABLED", "PAYLOAD"]
    for line in _table(head, rows):
        write_line(line)
    if not rows:
        where = args.service if args.service is not None else discovery.path
        write_line(f"(no instances of {where})" if args.service else f"(no services under {where})")
    return ExitCode.OK


def _port(port: int | None) -> str:
    return "-" if port is None else str(port)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[c]) for row in [head, *rows]) for c in range(len(head))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [head, *rows]
    ]


# --- watch --------------------------------------------------------------------------


async def _watch(discovery: aiocoord.ServiceDiscovery, args: argparse.Namespace) -> int:
    cache = discovery.cache(args.service)
    # Asked for before the start: the instances there now come first, as "added".
    async with cache.events() as events, cache:
        async for event in events:
            write_line(_event_line(event, as_json=args.json))
    return ExitCode.OK


def _event_line(event: aiocoord.ServiceCacheEvent, *, as_json: bool) -> str:
    kind = event.type.value
    if event.instance is None:
        count = None if event.instances is None else len(event.instances)
        if as_json:
            return json.dumps({"event": kind} | ({} if count is None else {"instances": count}))
        return kind + ("" if count is None else f" ({count} instances)")
    instance = event.instance
    if as_json:
        return json.dumps({"event": kind, "instance": json.loads(instance.to_json())})
    where = instance.address or "-"
    if instance.port is not None:
        where += f":{instance.port}"
    state = "" if instance.enabled else " (disabled)"
    return f"{kind} {instance.name}/{instance.id} {where}{state}"
