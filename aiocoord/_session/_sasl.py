"""SASL for ZooKeeper sessions: the mechanism interface and DIGEST-MD5.

A mechanism (:class:`SaslDigest`, or GSSAPI's ``SaslKerberos``) is a frozen
value given to :func:`~aiocoord.connect` as ``sasl=``. On every connection the
session engine asks it for a fresh :class:`SaslExchange` and runs it before
any other request (see ``SessionEngine._authenticate``):

1. it sends :meth:`SaslExchange.first` (ZooKeeper's SASL request, opcode 102);
2. for each server reply, unless the exchange is already :attr:`complete
   <SaslExchange.complete>`, it sends :meth:`SaslExchange.step`'s answer, until
   that is None;
3. the exchange must then be complete, or the connection fails with
   :class:`~aiocoord.AuthFailedError`.

An exchange raises AuthFailedError itself when a server token cannot be
answered (a malformed challenge, a server proof that does not match).

DIGEST-MD5 is RFC 2831 with ``qop=auth`` only, which is what a ZooKeeper
server offers (Java's DIGEST-MD5 server, whose challenge names no qop, hence
``auth``): authentication, no integrity or confidentiality layer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol, runtime_checkable

from .._exceptions import ArgumentTypeError, AuthFailedError, InvalidArgumentError

__all__ = ["DIGEST_MD5", "SaslDigest", "SaslExchange", "SaslMechanism", "parse_directives"]

DIGEST_MD5 = "DIGEST-MD5"

_MAX_TOKEN = 4096
"""RFC 2831 bounds a digest-challenge at 2048 bytes and a response at 4096."""


class SaslExchange(Protocol):
    """One SASL conversation, on one connection."""

    mechanism: str
    """The SASL mechanism's name: ``"DIGEST-MD5"``, ``"GSSAPI"``."""

    async def first(self) -> bytes:
        """The first token to send (``b""`` if the mechanism has no initial response)."""
        ...

    async def step(self, challenge: bytes) -> bytes | None:
        """The answer to a server token; None: nothing more to send."""
        ...

    @property
    def complete(self) -> bool:
        """True once this side has verified everything it needs to."""
        ...


@runtime_checkable
class SaslMechanism(Protocol):
    """A SASL mechanism with its credentials: a frozen value whose repr holds no secret."""

    def exchange(self, host: str) -> SaslExchange:
        """A new conversation for one connection to ``host`` (the server host this
        connection reached, as given in the connect string)."""
        ...


@dataclass(frozen=True, slots=True)
class SaslDigest:
    """DIGEST-MD5 (RFC 2831) credentials for a ZooKeeper server's SASL users.

    The server knows them from the ``Server`` section of its JAAS file
    (``org.apache.zookeeper.server.auth.DigestLoginModule``, ``user_<name>="<password>"``);
    on success the connection holds the ACL identity ``sasl:<username>``.

    ``realm`` is the server name ZooKeeper's Java client uses for DIGEST-MD5,
    ``zk-sasl-md5``: it goes in the ``digest-uri`` (``service/realm``, which the
    server checks) and is the realm answered when the server offers none (or
    several). Change ``realm`` or ``service`` only for a server configured with
    other names. The password never appears in the repr, in logs or in errors.
    """

    username: str
    password: str = field(repr=False)
    _: KW_ONLY
    realm: str = "zk-sasl-md5"
    service: str = "zookeeper"

    def __post_init__(self) -> None:
        if not isinstance(self.username, str):
            raise ArgumentTypeError("username", "a str", self.username)
        if not self.username:
            raise InvalidArgumentError("username", "must not be empty")
        if not isinstance(self.password, str):
            # The message names the type only: the value may be the secret itself.
            raise ArgumentTypeError("password", "a str (text)", self.password)
        for name in ("realm", "service"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ArgumentTypeError(name, "a str", value)
            if not value:
                raise InvalidArgumentError(name, "must not be empty")
        for name in ("username", "password", "realm", "service"):
            if "\x00" in getattr(self, name):
                raise InvalidArgumentError(name, "must not contain NUL characters")

    @property
    def mechanism(self) -> str:
        """``"DIGEST-MD5"``."""
        return DIGEST_MD5

    def exchange(self, host: str) -> SaslExchange:
        """A new DIGEST-MD5 conversation (``host`` plays no part: the digest-uri
        names ``service/realm``, as ZooKeeper's servers expect)."""
        return _DigestExchange(self)


# --- RFC 2831 ---------------------------------------------------------------------


def _failed(reason: str) -> AuthFailedError:
    return AuthFailedError(mechanism=DIGEST_MD5, reason=reason)


def parse_directives(token: bytes) -> dict[str, list[str]]:
    """A digest-challenge's (or rspauth's) ``name=value`` pairs, values unquoted.

    RFC 2831's ``#rule``: comma-separated, empty elements and linear white
    space allowed, values a token or a quoted-string (where ``\\`` escapes the
    next character, so a quoted value may hold commas). A directive may repeat
    (``realm``); names are case-insensitive. AuthFailedError if malformed.
    """
    if len(token) > _MAX_TOKEN:
        raise _failed(f"the server's token is {len(token)} bytes, over RFC 2831's bound")
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise _failed("the server's token is not UTF-8 text") from None
    result: dict[str, list[str]] = {}
    i, end = 0, len(text)
    while True:
        while i < end and text[i] in " \t\r\n,":
            i += 1
        if i >= end:
            return result
        start = i
        while i < end and text[i] not in "= \t\r\n,":
            i += 1
        name = text[start:i].lower()
        while i < end and text[i] in " \t":
            i += 1
        if not name or i >= end or text[i] != "=":
            raise _failed(f"malformed directive in the server's token at offset {start}")
        i += 1
        while i < end and text[i] in " \t":
            i += 1
        if i < end and text[i] == '"':
            i += 1
            chars: list[str] = []
            while True:
                if i >= end:
                    raise _failed(f"unterminated quoted value of {name!r} in the server's token")
                char = text[i]
                if char == "\\" and i + 1 < end:
                    chars.append(text[i + 1])
                    i += 2
                elif char == '"':
                    i += 1
                    break
                else:
                    chars.append(char)
                    i += 1
            value = "".join(chars)
        else:
            start = i
            while i < end and text[i] not in " \t\r\n,":
                i += 1
            value = text[start:i]
        while i < end and text[i] in " \t\r\n":
            i += 1
        if i < end and text[i] != ",":
            raise _failed(f"junk after the value of {name!r} in the server's token")
        result.setdefault(name, []).append(value)


def _single(directives: Mapping[str, list[str]], name: str) -> str | None:
    values = directives.get(name)
    if values is None:
        return None
    if len(values) > 1:
        raise _failed(f"the server's challenge repeats {name!r}")
    return values[0]


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


def _hex_md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class _DigestExchange:
    """The client side of one DIGEST-MD5 authentication (RFC 2831 section 2.1)."""

    mechanism = DIGEST_MD5

    def __init__(self, credentials: SaslDigest, *, cnonce: str | None = None) -> None:
        self._credentials = credentials
        self._cnonce = cnonce or secrets.token_urlsafe(24)
        self._expected_rspauth: str | None = None
        self._complete = False

    def __repr__(self) -> str:
        state = "complete" if self._complete else "answered" if self._expected_rspauth else "new"
        return f"<DIGEST-MD5 exchange for {self._credentials.username!r} {state}>"

    @property
    def complete(self) -> bool:
        """True once the server proved it knows the password (``rspauth``)."""
        return self._complete

    async def first(self) -> bytes:
        """DIGEST-MD5 has no initial response: the server speaks first."""
        return b""

    async def step(self, challenge: bytes) -> bytes | None:
        """The digest-response to the challenge, then None once ``rspauth`` checks out."""
        if self._complete:
            raise _failed("the server sent a token after the exchange completed")
        directives = parse_directives(challenge)
        if self._expected_rspauth is None:
            if not directives:
                raise _failed(
                    "the server sent an empty challenge: it has no SASL set up "
                    "(no 'Server' section in its JAAS configuration)"
                )
            return self._respond(directives)
        rspauth = _single(directives, "rspauth")
        if rspauth is None:
            raise _failed("the server's second token has no rspauth")
        if not hmac.compare_digest(rspauth.lower().encode(), self._expected_rspauth.encode()):
            raise _failed("the server's rspauth does not match: it does not know the password")
        self._complete = True
        return None

    def _respond(self, challenge: Mapping[str, list[str]]) -> bytes:
        nonce = _single(challenge, "nonce")
        if nonce is None:
            raise _failed("the server's challenge has no nonce")
        algorithm = _single(challenge, "algorithm")
        if algorithm is None:
            raise _failed("the server's challenge has no algorithm")
        if algorithm.lower() != "md5-sess":
            raise _failed(f"the server's challenge names algorithm {algorithm!r}, not md5-sess")
        qops = [q.strip().lower() for q in (_single(challenge, "qop") or "auth").split(",")]
        if "auth" not in qops:
            raise _failed(
                f"the server offers qop {','.join(qops)!r} only; aiocoord speaks 'auth' "
                "(no integrity or confidentiality layer)"
            )
        utf8 = (_single(challenge, "charset") or "").lower() == "utf-8"
        creds = self._credentials
        realms = challenge.get("realm", [])
        realm = realms[0] if len(realms) == 1 else creds.realm
        encoding = "utf-8" if utf8 else "iso-8859-1"
        try:
            user_realm_password = ":".join((creds.username, realm, creds.password)).encode(encoding)
        except UnicodeEncodeError:
            raise _failed(
                "the user name, realm or password is not ISO 8859-1 text, and the "
                "server does not offer charset=utf-8"
            ) from None
        digest_uri = f"{creds.service}/{creds.realm}"
        nc = "00000001"
        a1 = b":".join((_md5(user_realm_password), nonce.encode(), self._cnonce.encode()))
        ha1 = _hex_md5(a1)

        def kd(a2: str) -> str:
            ha2 = _hex_md5(a2.encode())
            return _hex_md5(":".join((ha1, nonce, nc, self._cnonce, "auth", ha2)).encode())

        response = kd(f"AUTHENTICATE:{digest_uri}")
        self._expected_rspauth = kd(f":{digest_uri}")
        parts = [
            *(["charset=utf-8"] if utf8 else []),
            f"username={_quote(creds.username)}",
            f"realm={_quote(realm)}",
            f"nonce={_quote(nonce)}",
            f"nc={nc}",
            f"cnonce={_quote(self._cnonce)}",
            f"digest-uri={_quote(digest_uri)}",
            f"response={response}",
            "qop=auth",
        ]
        return ",".join(parts).encode(encoding)
