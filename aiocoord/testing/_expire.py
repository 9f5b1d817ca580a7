"""Fault injection on a client's session and connection.

Expiry uses the same trick as Curator's test kit: a second connection presents
the client's session id and password, then closes the session from there. The
server ends the session at once; the client finds out when it reconnects.
"""

from __future__ import annotations

import itertools

import anyio

from .._session import (
    Client,
    ConnectionState,
    SaslMechanism,
    _zk,
    authenticate,
    hold_reconnects,
    sasl_of,
)
from .._session import drop_connection as _drop_connection
from .._session._connection import open_connection

__all__ = ["drop_connection", "expire_session"]


async def _close_session(
    host: str, port: int, session_id: int, password: bytes, sasl: SaslMechanism | None
) -> bool:
    """Close a session from a second connection; False if the server did not confirm.

    With ``sasl`` (the client's own mechanism) the connection authenticates first,
    as a server that requires SASL refuses the close otherwise.
    """
    try:
        conn = await open_connection(host, port, lambda _f: None, lambda _c: None, None)
    except OSError:
        return False
    try:
        # The server drops the session's current connection when this one
        # claims it. The close goes right behind the handshake, so that the
        # session is ours for as short a time as can be (the caller also holds
        # the client's own reconnection until the close has applied).
        handshake = conn.send_connect(0, 30_000, session_id, password, False)
        if sasl is not None:
            reply = await handshake
            if reply.timeout_ms <= 0:
                return True  # already expired
            await authenticate(conn, sasl, host)
        closing = conn.submit(_zk.close_op())
        closing.add_done_callback(lambda f: f.cancelled() or f.exception())
        reply = await handshake
        if reply.timeout_ms <= 0:
            return True  # already expired
        await closing
        return True
    except Exception:
        return False
    finally:
        conn.close()


_ATTEMPT_TIMEOUT = 5.0
"""How long one server may take to close the session before the next is tried:
a server cut off from its quorum holds the close until it notices."""


def _servers(client: Client, address: tuple[str, int] | None) -> list[tuple[str, int]]:
    """Where to send the close: ``address`` alone if given, else the client's
    current server first, then every server it knows."""
    if address is not None:
        return [address]
    first = [client.connected_to] if client.connected_to is not None else []
    return list(dict.fromkeys([*first, *client.hosts]))


async def expire_session(
    client: Client,
    *,
    timeout: float = 30.0,
    wait: bool = True,
    address: tuple[str, int] | None = None,
) -> None:
    """Expire ``client``'s current session on the server.

    Any server of the ensemble can end the session; the helper tries the
    client's current one first, then the others in turn, so it works while
    the client is between connections or its server is down.

    With ``wait`` (the default) return only once the client has reported
    LOST and then connected with a new session, so the test can go on.
    ``address`` reaches the server there instead of where the client is
    connected: needed when the client goes through a held :class:`TcpProxy`.
    """
    identity = client.client_id
    if identity is None:
        raise RuntimeError("the client has no session to expire")
    session_id, password = identity
    servers = _servers(client, address)
    sasl = sasl_of(client)
    changes = client.state_changes()
    try:
        with anyio.fail_after(timeout):
            # A session belongs to the whole ensemble, so any server can close
            # it. Go round them all: the one the client last used may be the
            # one that is down (the client between connections reports none).
            # The client waits meanwhile: our handshake drops its connection,
            # and a reconnection of its own would take the session back before
            # our close applied (RECONNECTED, then LOST, where a real expiry
            # reports LOST alone), and make our close miss.
            with hold_reconnects(client):
                for attempt in itertools.count():
                    host, port = servers[attempt % len(servers)]
                    with anyio.move_on_after(_ATTEMPT_TIMEOUT):
                        if await _close_session(host, port, session_id, password, sasl):
                            break
                    await anyio.sleep(0.01)
            if not wait:
                return
            seen_lost = False
            async for state in changes:
                if state is ConnectionState.LOST:
                    seen_lost = True
                elif seen_lost and state.is_connected:
                    return
    finally:
        await changes.aclose()


def drop_connection(client: Client) -> None:
    """Cut the client's socket abruptly, as a network failure would.

    The session stays alive on the server; the client reports SUSPENDED and
    reconnects on its own. Requests in flight fail with
    ``ConnectionLossError(sent=True)``.
    """
    _drop_connection(client)
