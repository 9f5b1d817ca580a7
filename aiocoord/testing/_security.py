"""What a secured test server needs: its JAAS file, config lines and JVM flags.

A SASL server as production runs one: ``SASLAuthenticationProvider``, a JAAS
``Server`` section with ZooKeeper's ``DigestLoginModule`` users, optionally
``zookeeper.sessionRequireClientSASLAuth=true`` (refuse every client that did
not authenticate), and, for an ensemble, quorum SASL (members authenticate to
each other through the ``QuorumServer`` and ``QuorumLearner`` sections).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "JaasEntry",
    "KerberosServerSetup",
    "QuorumCredentials",
    "SecurityOptions",
    "check_sasl_users",
    "write_jaas",
]

_DIGEST_LOGIN = "org.apache.zookeeper.server.auth.DigestLoginModule"
_SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
_QUORUM_USER = "quorum"
JAAS_FILE = "jaas.conf"


@dataclass(frozen=True)
class JaasEntry:
    """One login module line of a JAAS section, with its options."""

    module: str
    options: Mapping[str, str | bool] = field(default_factory=dict)
    flag: str = "required"

    def render(self) -> str:
        lines = [f"    {self.module} {self.flag}"]
        for key, value in self.options.items():
            text = str(value).lower() if isinstance(value, bool) else f'"{value}"'
            lines.append(f"    {key}={text}")
        return "\n".join(lines) + ";"


@dataclass(frozen=True)
class KerberosServerSetup:
    """The pieces of a Kerberos-secured server's launch, kept apart so they can be
    merged with other mechanisms' (a DIGEST-MD5 ``Server`` section takes its own
    login module entry beside this one).

    ``jaas``: JAAS section name -> login module entries (``Server``, and for quorum
    members ``QuorumServer`` and ``QuorumLearner``), written with the other
    mechanisms' by :class:`SecurityOptions`.
    ``config``: ``zoo.cfg`` lines. ``jvm_args``: flags, less the JAAS file's
    ``-Djava.security.auth.login.config``, which names the file the caller writes.
    """

    principal: str
    keytab: Path
    jaas: Mapping[str, Sequence[JaasEntry]]
    config: Mapping[str, str] = field(default_factory=dict)
    jvm_args: Sequence[str] = ()


def write_jaas(path: Path, sections: Mapping[str, Sequence[JaasEntry]]) -> Path:
    """Write a JAAS configuration: one ``Name { entries };`` block per section.

    The one place the kit writes JAAS: a mechanism that needs its own login
    module (Kerberos' ``Krb5LoginModule``) adds its entries to the sections.
    """
    blocks = [
        f"{name} {{\n" + "\n".join(entry.render() for entry in entries) + "\n};\n"
        for name, entries in sections.items()
        if entries
    ]
    path.write_text("\n".join(blocks))
    path.chmod(0o600)
    return path


def check_sasl_users(users: Mapping[str, str] | None) -> dict[str, str]:
    """``users`` as a dict, refusing what a JAAS option cannot hold (ValueError)."""
    if users is None:
        return {}
    checked: dict[str, str] = {}
    for name, password in users.items():
        if not isinstance(name, str) or not isinstance(password, str):
            raise TypeError("sasl_users maps user names (str) to passwords (str)")
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise ValueError(f"sasl user name {name!r}: use letters, digits, '-', '_', '.'")
        if any(c in password for c in '"\\\n\r'):
            raise ValueError(
                f"the password of sasl user {name!r} holds a quote, backslash or newline"
            )
        checked[name] = password
    return checked


@dataclass(frozen=True)
class QuorumCredentials:
    """The DIGEST-MD5 user an ensemble's members authenticate to each other with."""

    username: str = _QUORUM_USER
    password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)


@dataclass(frozen=True)
class SecurityOptions:
    """A server's SASL setup: its client users, whether it refuses clients without
    SASL, and (for an ensemble member) the quorum's own credentials."""

    sasl_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    require_sasl: bool = False
    quorum: QuorumCredentials | None = None
    kerberos: KerberosServerSetup | None = None
    """Kerberos (GSSAPI) for clients, and for quorum members when it has their sections
    (then quorum SASL is Kerberos, not the DIGEST-MD5 of ``quorum``)."""

    def __post_init__(self) -> None:
        if self.require_sasl and not self.sasl_users and self.kerberos is None:
            raise ValueError(
                "require_sasl=True needs sasl_users or kerberos (no client could connect)"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.sasl_users) or self.quorum is not None or self.kerberos is not None

    def sections(self) -> dict[str, list[JaasEntry]]:
        """The JAAS sections this server's file holds."""
        sections: dict[str, list[JaasEntry]] = {}
        if self.sasl_users:
            users = {f"user_{name}": password for name, password in self.sasl_users.items()}
            sections["Server"] = [JaasEntry(_DIGEST_LOGIN, users)]
        if self.quorum is not None:
            quorum = self.quorum
            sections["QuorumServer"] = [
                JaasEntry(_DIGEST_LOGIN, {f"user_{quorum.username}": quorum.password})
            ]
            sections["QuorumLearner"] = [
                JaasEntry(_DIGEST_LOGIN, {"username": quorum.username, "password": quorum.password})
            ]
        if self.kerberos is not None:
            for name, entries in self.kerberos.jaas.items():
                if name == "Server":
                    sections.setdefault(name, []).extend(entries)
                else:
                    sections[name] = list(entries)  # quorum SASL: Kerberos replaces DIGEST
        return sections

    def apply(self, data_dir: Path) -> tuple[dict[str, str], list[str]]:
        """Write the JAAS file into ``data_dir``; return (zoo.cfg lines, JVM flags)."""
        if not self.enabled:
            return {}, []
        jaas = write_jaas(data_dir / JAAS_FILE, self.sections())
        config: dict[str, str] = {}
        flags = [f"-Djava.security.auth.login.config={jaas}"]
        if self.sasl_users or self.kerberos is not None:
            config["authProvider.1"] = _SASL_PROVIDER
        if self.require_sasl:
            flags.append("-Dzookeeper.sessionRequireClientSASLAuth=true")
        if self.quorum is not None:
            config |= {
                "quorum.auth.enableSasl": "true",
                "quorum.auth.learnerRequireSasl": "true",
                "quorum.auth.serverRequireSasl": "true",
                "quorum.auth.learner.saslLoginContext": "QuorumLearner",
                "quorum.auth.server.saslLoginContext": "QuorumServer",
                "quorum.cnxn.threads.size": "20",
            }
        if self.kerberos is not None:
            config |= self.kerberos.config
            flags += self.kerberos.jvm_args
        return config, flags
