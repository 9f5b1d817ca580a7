"""The fenced store: the resource every holder of a lock, lease or leadership writes to.

A holder writes ``begin`` and then ``end`` with its fencing token (its lock
node's creation zxid); the store turns away a write from a holder that has been
superseded, and records every answer. The rules, per kind of resource:

- ``exclusive`` (Mutex, LeaderElection): a write whose token is lower than the
  highest the store has accepted for the resource is rejected. That is the
  classic fencing rule: once a newer holder has written, an older one, however
  long it was paused, is turned away.
- ``rw`` (ReadWriteLock): a writer's write is rejected below the highest token
  accepted from anyone, a reader's below the highest accepted from a writer.
  Readers share; a writer excludes everyone.
- ``semaphore``: at most ``limit`` holders may be inside (``begin`` accepted, no
  ``end`` yet). A ``begin`` that would make one too many makes the store look in
  ZooKeeper (through the controller's own session, after a ``sync``) which of the
  holders inside, and the newcomer, still have their lease node: a holder whose
  node is gone has lost its lease and is turned away (a newcomer's ``begin`` is
  rejected; a holder inside is evicted, and its later writes are rejected). If
  all of them still have theirs, the semaphore granted one lease too many: the ``begin`` is
  accepted and recorded with ``over_limit``, which the checks count as a violation.

Every holder whose write is rejected must then learn from the recipe that it
lost what it held: that is one of the invariants checked afterwards.

The controller serves the store on 127.0.0.1 (one JSON object per line each way);
workers use :class:`StoreClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FencedStore", "StoreClient", "StoreServer", "StoreUnavailableError"]

Kind = Literal["exclusive", "rw", "semaphore"]
Record = dict[str, Any]
Validator = Callable[[list[tuple[int, str]]], Awaitable[set[int] | None]]
"""Given (token, lease node) pairs, the tokens whose lease node still exists with
that creation zxid; None if ZooKeeper could not tell."""
REQUEST_TIMEOUT = 10.0
"""Seconds a worker waits for the store's answer (the controller answers at once)."""


@dataclass(slots=True)
class _Resource:
    kind: Kind
    limit: int = 1
    highest: int = -1
    """The highest token accepted (from anyone)."""
    highest_write: int = -1
    """``rw``: the highest token accepted from a writer."""
    inside: dict[int, str] = field(default_factory=dict)
    """``semaphore``: token -> lease node, for holders inside (``begin`` accepted, no ``end``)."""
    evicted: set[int] = field(default_factory=set)


class FencedStore:
    """The store's rules: :meth:`write` answers one request and records it.

    Requests are answered one at a time, in arrival order (a semaphore's may
    wait for ZooKeeper, through ``validate``).
    """

    def __init__(self, record: Callable[[Record], None]) -> None:
        self._record = record
        self._resources: dict[str, _Resource] = {}
        self._serial = 0
        self._lock = asyncio.Lock()
        self.validate: Validator | None = None

    async def write(self, request: Record) -> Record:
        """Answer ``request`` (``resource``, ``kind``, ``token``, ``action``, ``holder``,
        ``op``; ``mode`` for ``rw``; ``limit`` and ``node`` for ``semaphore``):
        ``{"ok": bool, "reason": str}``."""
        name = str(request["resource"])
        kind: Kind = request["kind"]
        token = int(request["token"])
        action = str(request["action"])
        if kind not in ("exclusive", "rw", "semaphore") or action not in ("begin", "end"):
            raise ValueError(f"bad request {request!r}")
        async with self._lock:
            resource = self._resources.setdefault(
                name, _Resource(kind, int(request.get("limit") or 1))
            )
            if resource.kind != kind:
                raise ValueError(f"{name!r} is a {resource.kind} resource, not {kind}")
            extra: Record = {}
            if kind == "exclusive":
                reason = self._exclusive(resource, token)
            elif kind == "rw":
                reason = self._rw(resource, token, request.get("mode") == "write")
            else:
                node = str(request.get("node") or "")
                reason, extra = await self._semaphore(resource, token, action, node)
            accepted = reason == ""
            self._serial += 1
            self._record(
                {
                    "type": "store",
                    "serial": self._serial,
                    "resource": name,
                    "kind": kind,
                    "mode": request.get("mode"),
                    "token": token,
                    "holder": request.get("holder"),
                    "op": request.get("op"),
                    "action": action,
                    "accepted": accepted,
                    "reason": reason,
                    **extra,
                }
            )
        return {"ok": accepted, "reason": reason}

    @staticmethod
    def _exclusive(resource: _Resource, token: int) -> str:
        if token < resource.highest:
            return f"token {token} is below the highest accepted, {resource.highest}"
        resource.highest = token
        return ""

    @staticmethod
    def _rw(resource: _Resource, token: int, write: bool) -> str:
        floor = resource.highest if write else resource.highest_write
        if token < floor:
            side = "accepted" if write else "accepted from a writer"
            return f"token {token} is below the highest {side}, {floor}"
        resource.highest = max(resource.highest, token)
        if write:
            resource.highest_write = max(resource.highest_write, token)
        return ""

    async def _semaphore(
        self, resource: _Resource, token: int, action: str, node: str
    ) -> tuple[str, Record]:
        if token in resource.evicted:
            return f"token {token} was evicted: its lease node was gone", {}
        if action == "end":
            resource.inside.pop(token, None)
            return "", {}
        if token in resource.inside or len(resource.inside) < resource.limit:
            resource.inside[token] = node
            return "", {}
        # One too many: which of the holders, the newcomer included, still have
        # their lease? (A holder paused since its grant may come in late.)
        entries = sorted({**resource.inside, token: node}.items())
        alive = None if self.validate is None else await self.validate(entries)
        extra: Record = {}
        if alive is None:
            extra["unverified"] = True
        else:
            gone = sorted({t for t, _node in entries} - alive)
            for victim in gone:
                resource.inside.pop(victim, None)
                resource.evicted.add(victim)
            extra["evicted"] = gone
            if token not in alive:
                return f"token {token}: its lease node is gone", extra
        if len(resource.inside) >= resource.limit:
            extra["over_limit"] = sorted(resource.inside)
        resource.inside[token] = node
        return "", extra


class StoreServer:
    """Serves a :class:`FencedStore` on 127.0.0.1 (a free port)."""

    def __init__(self, store: FencedStore) -> None:
        self.store = store
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while line := await reader.readline():
                request: Record = {}
                try:
                    request = json.loads(line)
                    answer = await self.store.write(request)
                except (ValueError, KeyError, TypeError) as error:
                    answer = {"ok": False, "reason": f"bad request: {error}", "bad": True}
                answer["id"] = request.get("id") if isinstance(request, dict) else None
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()


class StoreUnavailableError(Exception):
    """The store did not answer (the controller is gone or overloaded)."""


class StoreClient:
    """A worker's connection to the store (one per task that writes: no sharing)."""

    def __init__(self, port: int, holder: str) -> None:
        self._port = port
        self.holder = holder
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._serial = 0

    async def write(
        self,
        resource: str,
        kind: Kind,
        token: int,
        action: str,
        *,
        op: str,
        mode: str | None = None,
        limit: int | None = None,
        node: str | None = None,
    ) -> tuple[bool, str]:
        """Send one write; (accepted, reason). StoreUnavailableError if no answer came."""
        request = {
            "resource": resource,
            "kind": kind,
            "token": token,
            "action": action,
            "holder": self.holder,
            "op": op,
            "mode": mode,
            "limit": limit,
            "node": node,
        }
        self._serial += 1
        request["id"] = self._serial
        done = False
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                if self._stream is None:
                    self._stream = await asyncio.open_connection("127.0.0.1", self._port)
                reader, writer = self._stream
                writer.write(json.dumps(request).encode() + b"\n")
                await writer.drain()
                line = await reader.readline()
            done = True
        except (OSError, TimeoutError) as error:
            raise StoreUnavailableError(repr(error)) from error
        finally:
            # An exchange cut short (a timeout, or the holder's block cancelled on
            # a loss) leaves its answer in the pipe: never read it as the next one's.
            if not done:
                self.close()
        if not line:
            self.close()
            raise StoreUnavailableError("the store closed the connection")
        answer = json.loads(line)
        if answer.get("id") != request["id"]:
            self.close()
            raise StoreUnavailableError(f"answer {answer!r} does not match request {request!r}")
        if answer.get("bad"):
            raise ValueError(answer["reason"])
        return bool(answer["ok"]), str(answer["reason"])

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
