"""ACL ids as ZooKeeper's authentication providers write and check them.

Each function turns what a user writes (an address, a principal, a distinguished
name) into the exact id string the server compares against: ZooKeeper matches
most schemes by string equality, so an id written another way (``CN=a, O=b``
where the server records ``CN=a,O=b``) is accepted by the server yet matches
nobody. Ids the server would refuse (InvalidACL) are refused here, unsent.
"""

from __future__ import annotations

import ipaddress
import re

from ._exceptions import ArgumentTypeError, InvalidArgumentError

__all__ = ["ip_id", "kerberos_id", "sasl_id", "x509_id"]


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(name, "a str", value)
    if not value:
        raise InvalidArgumentError(name, "empty")
    return value


# --- ip ---------------------------------------------------------------------------


def ip_id(address: object) -> str:
    """An ``ip`` id: an IPv4 address or CIDR block (``10.0.0.0/8``).

    ZooKeeper's IPAuthenticationProvider (3.8, 3.9) accepts IPv4 only; a block is
    written as its network address, which matches the same clients.
    """
    text = _text(address, "address")
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise InvalidArgumentError(
            "address", f"{text!r} is not an IPv4 address or CIDR block"
        ) from None
    if network.version != 4:
        raise InvalidArgumentError(
            "address", f"{text!r}: ZooKeeper's ip scheme takes IPv4 addresses only"
        )
    if "/" not in text:
        return str(network.network_address)
    return str(network)


# --- sasl and kerberos ----------------------------------------------------------

# How ZooKeeper's KerberosName splits a principal: primary[/instance]@REALM.
_PRINCIPAL = re.compile(r"([^/@]*)(?:/([^/@]*))?@([^/@]*)")


def sasl_id(user: object) -> str:
    """A ``sasl`` id: the authorized name the SASL exchange produced (a DIGEST-MD5
    user name, or a Kerberos principal as the server maps it)."""
    text = _text(user, "user")
    # The server's SASLAuthenticationProvider refuses an id with '@' that is not
    # a principal (primary[/instance]@REALM).
    if "@" in text and not _PRINCIPAL.fullmatch(text):
        raise InvalidArgumentError("user", f"{text!r} is not a Kerberos principal")
    return text


def kerberos_id(principal: object, *, remove_host: bool, remove_realm: bool) -> str:
    """The ``sasl`` id a server records for ``principal`` (``primary[/host][@REALM]``).

    By default that is the whole principal. A server run with
    ``kerberos.removeHostFromPrincipal`` / ``kerberos.removeRealmFromPrincipal``
    drops the host or the realm (for principals of its own realm, which its
    default ``auth_to_local`` rule maps to the primary).
    """
    text = _text(principal, "principal")
    for flag, name in ((remove_host, "remove_host"), (remove_realm, "remove_realm")):
        if type(flag) is not bool:
            raise ArgumentTypeError(name, "a bool", flag)
    match = _PRINCIPAL.fullmatch(text)
    if match is None:
        if "@" in text or "/" in text.partition("/")[2]:
            raise InvalidArgumentError("principal", f"{text!r} is not primary[/instance][@REALM]")
        primary, _, host = text.partition("/")
        realm = None
        has_host = "/" in text
    else:
        primary, host, realm = match.group(1), match.group(2), match.group(3)
        has_host = host is not None
    if not primary or (has_host and not host) or realm == "":
        raise InvalidArgumentError("principal", f"{text!r} is not primary[/instance][@REALM]")
    result = primary
    if has_host and not remove_host:
        result += f"/{host}"
    if realm is not None and not remove_realm:
        result += f"@{realm}"
    return result


# --- x509 -------------------------------------------------------------------------

# Attribute types Java's X500Principal.getName() writes by keyword (RFC 2253), and
# the OIDs it writes as those keywords. Other types it writes as OID=#hex-DER.
_KEYWORDS = {
    "CN": "2.5.4.3",
    "C": "2.5.4.6",
    "L": "2.5.4.7",
    "ST": "2.5.4.8",
    "O": "2.5.4.10",
    "OU": "2.5.4.11",
    "STREET": "2.5.4.9",
    "DC": "0.9.2342.19200300.100.1.25",
    "UID": "0.9.2342.19200300.100.1.1",
}
_BY_OID = {oid: keyword for keyword, oid in _KEYWORDS.items()}
_OID = re.compile(r"[0-9]+(?:\.[0-9]+)+")
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")
_HEX_VALUE = re.compile(r"#(?:[0-9A-Fa-f]{2})+")
_ESCAPED = frozenset(',=+<>#;"\\')
"""Characters Java's RFC 2253 output escapes with a backslash wherever they are."""
_SPECIAL = frozenset(',+"\\<>;=')
"""Characters that end a value or need escaping in the input."""


class _BadName(Exception):
    pass


def x509_id(distinguished_name: object) -> str:
    """An ``x509`` id: a certificate's subject DN exactly as ZooKeeper records it.

    The server takes ``getSubjectX500Principal().getName()`` (RFC 2253: the most
    specific RDN first, no spaces around separators, keywords in capitals,
    specials escaped) and compares ACL ids to it as strings. The DN given here is
    parsed (RFC 4514, as ``openssl x509 -nameopt RFC2253`` prints it) and written
    that way; types without an RFC 2253 keyword must be given as ``OID=#hex``.
    """
    text = _text(distinguished_name, "distinguished_name")
    try:
        rdns = _parse_dn(text)
    except _BadName as error:
        raise InvalidArgumentError(
            "distinguished_name", f"{text!r} is not a distinguished name: {error}"
        ) from None
    return ",".join("+".join(f"{kind}={value}" for kind, value in rdn) for rdn in rdns)


def _parse_dn(text: str) -> list[list[tuple[str, str]]]:
    rdns: list[list[tuple[str, str]]] = []
    rdn: list[tuple[str, str]] = []
    pos = 0
    while True:
        kind, pos = _attribute_type(text, pos)
        value, pos = _attribute_value(text, pos, kind)
        rdn.append((kind, value))
        if pos == len(text):
            rdns.append(rdn)
            return rdns
        if text[pos] == "+":
            pos += 1
        else:  # a ',' (anything else ended the value with an error)
            rdns.append(rdn)
            rdn = []
            pos += 1


def _attribute_type(text: str, pos: int) -> tuple[str, int]:
    equals = text.find("=", pos)
    if equals < 0:
        raise _BadName(f"no '=' after position {pos}")
    raw = text[pos:equals].strip()
    if raw.upper() in _KEYWORDS:
        return raw.upper(), equals + 1
    oid = raw[4:] if raw[:4].upper() == "OID." else raw
    if _OID.fullmatch(oid):
        return _BY_OID.get(oid, oid), equals + 1
    if not raw:
        raise _BadName(f"an attribute type is missing at position {pos}")
    raise _BadName(
        f"attribute type {raw!r}: ZooKeeper records it as its OID with a hex DER value "
        "(write OID=#hex)"
    )


def _attribute_value(text: str, pos: int, kind: str) -> tuple[str, int]:
    """The value starting at ``pos``, in Java's RFC 2253 form, and where it ended."""
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if pos < len(text) and text[pos] == "#":
        end = _value_end(text, pos)
        raw = text[pos:end].rstrip(" ")
        if not _HEX_VALUE.fullmatch(raw):
            raise _BadName(f"{raw!r} is not a hex value")
        return raw.lower(), end
    if kind not in _KEYWORDS:
        raise _BadName(f"{kind} needs a hex value (#...), as ZooKeeper records it")
    quoted = pos < len(text) and text[pos] == '"'
    if quoted:
        pos += 1
    chars: list[str] = []
    escaped_at: set[int] = set()  # positions in ``chars`` that came escaped
    while pos < len(text):
        char = text[pos]
        if quoted and char == '"':
            pos += 1
            while pos < len(text) and text[pos] == " ":
                pos += 1
            if pos < len(text) and text[pos] not in ",+":
                raise _BadName(f"text after a quoted value at position {pos}")
            return _escape("".join(chars)), _separator(text, pos)
        if not quoted and char in ",+":
            break
        if char == "\\":
            decoded, pos = _unescape(text, pos)
            escaped_at.update(range(len(chars), len(chars) + len(decoded)))
            chars.extend(decoded)
            continue
        if char in _SPECIAL and not quoted:
            raise _BadName(f"{char!r} at position {pos} must be escaped")
        chars.append(char)
        pos += 1
    if quoted:
        raise _BadName("an unclosed quote")
    # Unescaped spaces after a value are not part of it (those before were skipped).
    while chars and chars[-1] == " " and len(chars) - 1 not in escaped_at:
        chars.pop()
    return _escape("".join(chars)), _separator(text, pos)


def _separator(text: str, pos: int) -> int:
    if pos < len(text) and pos + 1 == len(text):
        raise _BadName("the name ends with a separator")
    if pos + 1 < len(text) and text[pos + 1] in ",+":
        raise _BadName(f"an empty attribute at position {pos + 1}")
    return pos


def _value_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] not in ",+":
        pos += 1
    return pos


def _unescape(text: str, pos: int) -> tuple[str, int]:
    """The characters a backslash escape at ``pos`` stands for (``\\,`` or UTF-8
    ``\\c3\\a9``), and the position after it."""
    pair = text[pos + 1 : pos + 3]
    if _HEX_PAIR.fullmatch(pair):
        octets = bytearray()
        while text[pos : pos + 1] == "\\" and _HEX_PAIR.fullmatch(text[pos + 1 : pos + 3]):
            octets.append(int(text[pos + 1 : pos + 3], 16))
            pos += 3
        try:
            return octets.decode(), pos
        except UnicodeDecodeError:
            raise _BadName("a hex escape that is not UTF-8") from None
    if pos + 1 < len(text) and (text[pos + 1] in _SPECIAL or text[pos + 1] in " #"):
        return text[pos + 1], pos + 2
    raise _BadName(f"a bad escape at position {pos}")


def _escape(value: str) -> str:
    out = ["\\" + c if c in _ESCAPED else c for c in value]
    if out and out[0] == " ":
        out[0] = "\\ "
    if out and out[-1] == " ":
        out[-1] = "\\ "
    return "".join(out)
