"""SASL GSSAPI (Kerberos 5) for ZooKeeper: :class:`SaslKerberos`.

The exchange is RFC 4752's: GSS-API context tokens until the context is established
(``init_sec_context`` steps, mutual authentication), then one wrapped 4-octet offer
from the server (which security layers it supports, and its largest message), which
the client answers, wrapped, with "no security layer", a maximum size of 0 and the
authorization id. ZooKeeper traffic after SASL is never wrapped: only "no security
layer" is ever chosen.

GSS-API comes from the ``gssapi`` package (the ``kerberos`` extra), which links the
system's MIT Kerberos; it is imported when a :class:`SaslKerberos` is made, so a
missing extra is an error there, before anything is sent. Calls that may reach the
KDC (acquiring credentials, the first context step, which asks for a service
ticket) run in a worker thread: they never block the event loop.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio.to_thread

from .._exceptions import (
    ArgumentTypeError,
    AuthFailedError,
    InvalidArgumentError,
    MissingExtraError,
)
from ._sasl import SaslExchange

if TYPE_CHECKING:
    import gssapi

__all__ = ["SaslKerberos"]

MECHANISM: Final = "GSSAPI"
_NO_SECURITY_LAYER: Final = 0x01
"""RFC 4752's bit for "no security layer", in the first octet of the offer and answer."""

# GSS-API routine errors (RFC 2744: the major status' bits 16-23).
_GSS_S_BAD_NAME: Final = 2
_GSS_S_NO_CRED: Final = 7
_GSS_S_DEFECTIVE_TOKEN: Final = 9
_GSS_S_CREDENTIALS_EXPIRED: Final = 11
_GSS_S_CONTEXT_EXPIRED: Final = 12

# MIT Kerberos' minor codes (krb5.h, "krb5" error table), as signed 32-bit numbers.
_KRB5_CAUSES: Final[dict[int, str]] = {
    -1765328378: "unknown client principal (not in the KDC's database)",  # C_PRINCIPAL_UNKNOWN
    -1765328377: "unknown server principal (not in the KDC's database)",  # S_PRINCIPAL_UNKNOWN
    -1765328360: "wrong password or key (pre-authentication failed)",  # PREAUTH_FAILED
    -1765328353: "wrong password or key (integrity check failed)",  # AP_ERR_BAD_INTEGRITY
    -1765328352: "expired ticket",  # KRB5KRB_AP_ERR_TKT_EXPIRED
    -1765328347: "clock skew too great between client, server or KDC",  # KRB5KRB_AP_ERR_SKEW
    -1765328366: "client principal revoked or locked",  # KRB5KDC_ERR_CLIENT_REVOKED
    -1765328383: "client principal expired",  # KRB5KDC_ERR_NAME_EXP
    -1765328243: "no ticket for the principal (no matching credentials in the cache)",
    -1765328189: "no ticket (no credentials cache)",  # KRB5_FCC_NOFILE
    -1765328203: "no key for the principal in the keytab",  # KRB5_KT_NOTFOUND
    -1765328230: "unknown realm (no KDC configured for it)",  # KRB5_REALM_UNKNOWN
    -1765328228: "no KDC reachable for the realm",  # KRB5_KDC_UNREACH
}
_MAJOR_CAUSES: Final[dict[int, str]] = {
    _GSS_S_NO_CRED: "no ticket or credentials",
    _GSS_S_CREDENTIALS_EXPIRED: "expired ticket",
    _GSS_S_CONTEXT_EXPIRED: "expired ticket",
    _GSS_S_BAD_NAME: "bad principal name",
    _GSS_S_DEFECTIVE_TOKEN: "the server sent a defective GSS-API token",
}


def _gssapi() -> ModuleType:
    """The ``gssapi`` package; MissingExtraError naming the extra when it is not there."""
    try:
        import gssapi
        import gssapi.exceptions
    except ImportError as exc:
        raise MissingExtraError(
            "SaslKerberos needs the gssapi package: pip install 'aiocoord[kerberos]' "
            f"(it builds against the system's MIT Kerberos) [{exc}]",
            extra="kerberos",
            package="gssapi",
        ) from exc
    return gssapi


def _signed(code: int) -> int:
    return code - (1 << 32) if code >= 1 << 31 else code


def kerberos_cause(error: BaseException) -> str:
    """Name the cause of a GSS-API failure in a few words, from its major and minor codes.

    The minor code (MIT Kerberos' own) is the more precise; the routine part of the
    major code is the fallback. The library's own text is kept after it, as it names
    the principal or cache concerned (never a key or password).
    """
    major = getattr(error, "maj_code", None)
    minor = getattr(error, "min_code", None)
    cause = None
    if isinstance(minor, int):
        cause = _KRB5_CAUSES.get(_signed(minor))
    if cause is None and isinstance(major, int):
        cause = _MAJOR_CAUSES.get((major >> 16) & 0xFF)
    detail = ""
    with contextlib.suppress(Exception):
        detail = str(error.gen_message()) if hasattr(error, "gen_message") else str(error)
    cause = cause or "GSS-API failure"
    return f"{cause} ({detail})" if detail else cause


def _failed(error: BaseException, *, service_principal: str) -> AuthFailedError:
    cause = kerberos_cause(error)
    return AuthFailedError(mechanism=MECHANISM, reason=f"{cause}; server {service_principal}")


def canonical_host(host: str) -> str:
    """The name the Java client would put in the server principal for *host*.

    As ZooKeeper's ``SaslServerPrincipal`` (``zookeeper.sasl.client.canonicalize.hostname``,
    on by default): resolve the host, look its address up in reverse, and use that name
    unless the lookup only gave the address back; so ``127.0.0.1`` becomes ``localhost``
    where the hosts file says so. When a lookup fails the host is kept as given.
    Blocking (DNS): call it in a worker thread.
    """
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        address = str(infos[0][4][0])
        name, _port = socket.getnameinfo((address, 0), socket.NI_NAMEREQD)
    except (OSError, UnicodeError, IndexError):
        return host
    return host if not name or name == address else name


@dataclass(frozen=True)
class SaslKerberos:
    """SASL GSSAPI (Kerberos 5) credentials for ``connect(..., sasl=SaslKerberos())``.

    The client's credentials come from the usual ticket cache (``KRB5CCNAME``, else
    the system default) or, when it holds none, from a client keytab
    (``KRB5_CLIENT_KTNAME``); *principal* (``"alice@EXAMPLE.COM"``) picks one of them,
    None takes the default. The server's principal is ``<service>/<host>``: *host* is
    the server this connection reached, made canonical as the Java client does
    (:func:`canonical_host`: ``127.0.0.1`` becomes ``localhost``), unless *hostname*
    pins it (for every server), or *canonicalize* is False (the host as in the
    connect string). Its realm is the one ``krb5.conf`` maps the host to.

    Needs the ``kerberos`` extra (the ``gssapi`` package): without it, making one
    raises :class:`~aiocoord.MissingExtraError`. A refused or impossible exchange
    (no ticket, an expired one, clock skew, an unknown server principal) is an
    :class:`~aiocoord.AuthFailedError` whose ``reason`` says which.
    """

    principal: str | None = None
    service: str = "zookeeper"
    hostname: str | None = None
    canonicalize: bool = True
    mechanism: ClassVar[str] = MECHANISM

    def __post_init__(self) -> None:
        for name in ("principal", "hostname"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _argument_error(name, value)
        if not isinstance(self.service, str) or not self.service or "/" in self.service:
            raise _argument_error("service", self.service)
        if not isinstance(self.canonicalize, bool):
            raise _argument_error("canonicalize", self.canonicalize)
        _gssapi()  # the extra must be there before anything is sent

    def exchange(self, host: str) -> SaslExchange:
        """A new conversation for one connection to *host* (the server reached)."""
        return KerberosExchange(self, host)


def _argument_error(name: str, value: object) -> Exception:
    if name == "canonicalize":
        return ArgumentTypeError(name, "a bool", value)
    if value is not None and not isinstance(value, str):
        return ArgumentTypeError(name, "a str" + ("" if name == "service" else " or None"), value)
    reason = "must not be empty" + (" nor hold '/'" if name == "service" else "")
    return InvalidArgumentError(name, reason)


class KerberosExchange:
    """One GSSAPI conversation on one connection (:meth:`SaslKerberos.exchange`)."""

    def __init__(self, mechanism: SaslKerberos, host: str) -> None:
        self.mechanism: str = MECHANISM
        self._config = mechanism
        self._gssapi: Any = _gssapi()
        self._host = host
        self._service_principal = f"{mechanism.service}/{mechanism.hostname or host}"
        self._context: gssapi.SecurityContext | None = None
        self._established = False
        self._complete = False

    def __repr__(self) -> str:
        state = (
            "complete" if self._complete else "security layer" if self._established else "context"
        )
        return f"<KerberosExchange to {self._service_principal} {state}>"

    @property
    def complete(self) -> bool:
        """True once the security-layer answer is made: the client has nothing more to say."""
        return self._complete

    @property
    def service_principal(self) -> str:
        """``service/host`` (the realm is krb5.conf's for the host); final after :meth:`first`."""
        return self._service_principal

    async def first(self) -> bytes:
        """Acquire credentials and make the first context token (the initial response)."""
        if self._context is not None:
            raise RuntimeError("first() was already called on this exchange")
        config = self._config
        host = config.hostname
        if host is None:
            host = (
                await anyio.to_thread.run_sync(canonical_host, self._host)
                if config.canonicalize
                else self._host
            )
        self._service_principal = f"{config.service}/{host}"
        target = f"{config.service}@{host}"
        return await anyio.to_thread.run_sync(self._start, target)

    def _start(self, target: str) -> bytes:
        lib = self._gssapi
        try:
            creds = None
            if self._config.principal is not None:
                name = lib.Name(self._config.principal, name_type=lib.NameType.kerberos_principal)
                creds = lib.Credentials(name=name, usage="initiate")
            server = lib.Name(target, name_type=lib.NameType.hostbased_service)
            flags = lib.RequirementFlag.mutual_authentication | lib.RequirementFlag.integrity
            self._context = lib.SecurityContext(
                name=server, creds=creds, usage="initiate", flags=flags
            )
            token = self._context.step()
            if self._context.complete:
                self._established = True
        except lib.exceptions.GSSError as exc:
            raise _failed(exc, service_principal=self._service_principal) from exc
        return bytes(token or b"")

    async def step(self, challenge: bytes) -> bytes | None:
        """Answer the server's token: the next context token, an empty answer once the
        context is established (the server then sends its security-layer offer), or
        the security-layer answer; None when the exchange is already complete."""
        if self._context is None:
            raise RuntimeError("call first() before step()")
        if self._complete:
            return None
        if not self._established:
            return await anyio.to_thread.run_sync(self._context_step, bytes(challenge))
        return self._security_layer(bytes(challenge))

    def _context_step(self, challenge: bytes) -> bytes:
        assert self._context is not None
        lib = self._gssapi
        try:
            token = self._context.step(challenge)
        except lib.exceptions.GSSError as exc:
            raise _failed(exc, service_principal=self._service_principal) from exc
        if self._context.complete:
            self._established = True
        return bytes(token or b"")

    def _security_layer(self, challenge: bytes) -> bytes:
        """RFC 4752 section 3.1: unwrap the offer, choose "no security layer"."""
        assert self._context is not None
        lib = self._gssapi
        try:
            offer = bytes(self._context.unwrap(challenge).message)
            if len(offer) != 4:
                raise AuthFailedError(
                    mechanism=MECHANISM,
                    reason=f"the security-layer offer of {self._service_principal} is "
                    f"{len(offer)} octets, not 4",
                )
            if not offer[0] & _NO_SECURITY_LAYER:
                raise AuthFailedError(
                    mechanism=MECHANISM,
                    reason=f"{self._service_principal} requires a security layer "
                    "(integrity or privacy), which ZooKeeper clients do not use",
                )
            authzid = str(self._context.initiator_name).encode()
            # The size octets must be 0 when no security layer is chosen.
            answer = bytes([_NO_SECURITY_LAYER, 0, 0, 0]) + authzid
            wrapped = bytes(self._context.wrap(answer, encrypt=False).message)
        except lib.exceptions.GSSError as exc:
            raise _failed(exc, service_principal=self._service_principal) from exc
        self._complete = True
        return wrapped
