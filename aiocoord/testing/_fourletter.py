"""ZooKeeper "four letter word" admin commands (``ruok``, ``srvr``, ``mntr``, ...)."""

from __future__ import annotations

import anyio

__all__ = ["four_letter_word"]


async def four_letter_word(host: str, port: int, word: str, *, timeout: float = 5.0) -> str:
    """Send a four letter word to a ZooKeeper server and return its whole answer.

    The server answers and closes the connection, so this reads until EOF. Network
    failures surface as :class:`OSError` subclasses (``ConnectionRefusedError``,
    ``TimeoutError`` when *timeout* seconds pass, ...), never wrapped in anything else.
    """
    data = word.encode("ascii")
    if len(data) != 4:
        raise ValueError(f"a four letter word has 4 ASCII letters, got {word!r}")
    chunks: list[bytes] = []
    with anyio.fail_after(timeout):
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError as exc:
            # anyio wraps the real error ("All connection attempts failed"); a single
            # address has a single cause, which is the more useful exception to raise.
            if isinstance(exc.__cause__, OSError):
                raise exc.__cause__ from None
            raise
        async with stream:
            try:
                await stream.send(data)
                while True:
                    try:
                        chunks.append(await stream.receive())
                    except anyio.EndOfStream:
                        break
            except anyio.BrokenResourceError as exc:
                cause = exc.__cause__
                if isinstance(cause, OSError):
                    raise cause from None
                raise ConnectionResetError(f"{host}:{port} reset the connection") from exc
    return b"".join(chunks).decode("utf-8", errors="replace")
