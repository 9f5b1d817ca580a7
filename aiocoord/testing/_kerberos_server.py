"""What a ZooKeeper server needs to take Kerberos (SASL GSSAPI) clients, and for quorum
members to authenticate to each other with Kerberos: JAAS login sections, ``zoo.cfg``
lines and JVM flags, for a realm a :class:`~aiocoord.testing.KerberosKDC` runs.

The server's principal is ``zookeeper/localhost@<realm>``: the Java client (and
:class:`~aiocoord.SaslKerberos`) canonicalise ``127.0.0.1`` by reverse DNS, which
gives ``localhost``. Every member of a loopback ensemble shares that principal and
its keys (exported without new keys, so each member's keytab stays valid).
"""

from __future__ import annotations

from pathlib import Path

from ._kdc import KerberosKDC
from ._security import JaasEntry, KerberosServerSetup

__all__ = ["kerberos_server_setup"]

SERVICE = "zookeeper"
SERVER_HOST = "localhost"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
_KRB5_LOGIN = "com.sun.security.auth.module.Krb5LoginModule"


def _login_entry(principal: str, keytab: Path) -> JaasEntry:
    options: dict[str, str | bool] = {
        "useKeyTab": True,
        "keyTab": str(keytab),
        "storeKey": True,
        "useTicketCache": False,
        "doNotPrompt": True,
        "principal": principal,
    }
    return JaasEntry(_KRB5_LOGIN, options)


async def kerberos_server_setup(
    kdc: KerberosKDC,
    directory: Path,
    *,
    quorum: bool = False,
    remove_host_from_principal: bool | None = None,
    remove_realm_from_principal: bool | None = None,
) -> KerberosServerSetup:
    """Add ``zookeeper/localhost`` to *kdc*'s realm (once), export its keys into
    ``<directory>/zookeeper.keytab`` and return what the server's launch needs.

    *quorum*: also quorum SASL between members, Kerberos both ways (``QuorumServer``
    and ``QuorumLearner`` log in with the same principal; every member requires it).
    *remove_host_from_principal* / *remove_realm_from_principal*: ZooKeeper's
    ``kerberos.removeHostFromPrincipal`` / ``kerberos.removeRealmFromPrincipal``
    (the identity ``sasl:`` ACLs name), written only when given.
    """
    principal = await kdc.ensure_principal(f"{SERVICE}/{SERVER_HOST}")
    keytab = directory / "zookeeper.keytab"
    if not keytab.is_file():
        await kdc.keytab(principal, keytab)
    entry = _login_entry(principal, keytab)
    jaas: dict[str, list[JaasEntry]] = {"Server": [entry]}
    config = {"authProvider.1": SASL_PROVIDER}
    if remove_host_from_principal is not None:
        config["kerberos.removeHostFromPrincipal"] = str(remove_host_from_principal).lower()
    if remove_realm_from_principal is not None:
        config["kerberos.removeRealmFromPrincipal"] = str(remove_realm_from_principal).lower()
    if quorum:
        jaas["QuorumServer"] = [entry]
        jaas["QuorumLearner"] = [entry]
        config |= {
            "quorum.auth.enableSasl": "true",
            "quorum.auth.learnerRequireSasl": "true",
            "quorum.auth.serverRequireSasl": "true",
            # The learner asks for this principal of the member it connects to.
            "quorum.auth.kerberos.servicePrincipal": principal,
        }
    jvm_args = (
        f"-Djava.security.krb5.conf={kdc.krb5_conf}",
        # A KDC of one realm gives no referrals; asking for them only adds a round trip.
        "-Dsun.security.krb5.disableReferrals=true",
    )
    return KerberosServerSetup(
        principal=principal, keytab=keytab, jaas=jaas, config=config, jvm_args=jvm_args
    )
