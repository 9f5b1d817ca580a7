"""ACL entries for every scheme, with ids written the way the server records them.

ZooKeeper compares most ACL ids as strings: an id written another way than the
server writes it is accepted and then matches nobody. The expected x509 ids
below are what Java 17's ``X500Principal.getName()`` printed for each input (the
call ZooKeeper's X509AuthenticationProvider makes on a client certificate); the
ip and sasl refusals are ids ZooKeeper 3.8's and 3.9's providers call invalid.
"""

from __future__ import annotations

import ipaddress
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

import aiocoord
from aiocoord import (
    ACL,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    ArgumentTypeError,
    InvalidArgumentError,
    Perm,
    digest_id,
)
from aiocoord._session._options import Settings
from aiocoord._session._requests import RequestBuilder

# --- x509 -----------------------------------------------------------------------------

AS_JAVA_PRINTS_IT = [
    ("CN=alice, OU=clients, O=aiocoord-test", "CN=alice,OU=clients,O=aiocoord-test"),
    (" CN = a , O = b ", "CN=a,O=b"),
    ("cn=a+uid=b,o=x", "CN=a+UID=b,O=x"),
    ("O=x+CN=y", "O=x+CN=y"),
    ("CN=a + OU=b", "CN=a+OU=b"),
    ("DC=example,DC=com", "DC=example,DC=com"),
    ("C=DE,ST=Berlin,L=Berlin,STREET=Main 1", "C=DE,ST=Berlin,L=Berlin,STREET=Main 1"),
    ("2.5.4.3=x", "CN=x"),
    ("OID.2.5.4.3=x", "CN=x"),
    ("1.2.840.113549.1.9.1=#1603614062,CN=x", "1.2.840.113549.1.9.1=#1603614062,CN=x"),
    ("CN=#04036162AB", "CN=#04036162ab"),
    ("CN=a\\,b,O=x", "CN=a\\,b,O=x"),
    ('CN="a,b",O=x', "CN=a\\,b,O=x"),
    ('CN="a;b"', "CN=a\\;b"),
    ('CN="a\\"b"', 'CN=a\\"b'),
    ("CN=a\\=b,O=x", "CN=a\\=b,O=x"),
    ("CN=a\\+b", "CN=a\\+b"),
    ("CN=a\\\\b", "CN=a\\\\b"),
    ("CN=x\\>y", "CN=x\\>y"),
    ("CN=a\\3Cb", "CN=a\\<b"),
    ("CN=\\#a", "CN=\\#a"),
    ("CN=a\\ ", "CN=a\\ "),
    ("CN=\\ a", "CN=\\ a"),
    ("CN= a ,O=x", "CN=a,O=x"),
    ("CN=a b", "CN=a b"),
    ("CN=é,O=x", "CN=é,O=x"),
    ("CN=a\\c3\\a9", "CN=aé"),
    ("cN=A", "CN=A"),
    ("CN=", "CN="),
    ("CN=a,O=b\\,c+OU=d", "CN=a,O=b\\,c+OU=d"),
]


@pytest.mark.parametrize(("written", "recorded"), AS_JAVA_PRINTS_IT)
def test_an_x509_id_is_the_subject_as_zookeeper_records_it(written: str, recorded: str) -> None:
    entry = ACL.x509(written, Perm.READ)
    assert entry == ACL(Perm.READ, "x509", recorded)
    assert ACL.x509(recorded, Perm.READ) == entry  # already in that form: unchanged


@pytest.mark.parametrize(
    "written",
    [
        "",
        "alice",
        "=x",
        "CN=a,",
        "CN=a,,O=b",
        "CN=a+",
        'CN=a"b',
        'CN="a',
        'CN="a"b',
        "CN=a;b",
        "CN=a<b>c",
        "CN=#abc",
        "CN=#zz",
        "CN=a\\q",
        "CN=a\\ff",  # a hex escape that is not UTF-8
        "EMAILADDRESS=a@b,CN=x",
        "SERIALNUMBER=12,CN=x",
        "1.2.840.113549.1.9.1=a@b",  # a type without a keyword needs its DER value
    ],
)
def test_a_malformed_distinguished_name_is_refused(written: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        ACL.x509(written)
    assert caught.value.argument == "distinguished_name"


_KEYWORD = st.sampled_from(["CN", "cn", "O", "ou", "C", "L", "ST", "DC", "UID", "STREET"])
_VALUE = st.text(alphabet=string.ascii_letters + string.digits + ' ,=+<>#;"\\é-_.', max_size=8)


def _escaped(value: str) -> str:
    """``value`` written as RFC 4514 allows (every special escaped, spaces at the ends too)."""
    out = "".join("\\" + c if c in ',=+<>#;"\\' else c for c in value)
    if out.startswith(" "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


@given(st.lists(st.lists(st.tuples(_KEYWORD, _VALUE), min_size=1, max_size=3), min_size=1))
def test_x509_ids_are_stable_and_ignore_spacing_and_keyword_case(
    rdns: list[list[tuple[str, str]]],
) -> None:
    tight = ",".join("+".join(f"{k}={_escaped(v)}" for k, v in rdn) for rdn in rdns)
    loose = " , ".join(" + ".join(f" {k.lower()} = {_escaped(v)}" for k, v in rdn) for rdn in rdns)
    recorded = ACL.x509(tight).id
    assert ACL.x509(recorded).id == recorded
    assert ACL.x509(loose).id == recorded
    assert ACL.x509(tight.upper()).id == ACL.x509(loose.upper()).id


# --- ip ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "recorded"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("10.1.2.3/8", "10.0.0.0/8"),  # the same clients match
        ("192.168.1.7/32", "192.168.1.7/32"),
        ("0.0.0.0/0", "0.0.0.0/0"),
    ],
)
def test_an_ip_id_is_an_ipv4_address_or_block(written: str, recorded: str) -> None:
    assert ACL.ip(written) == ACL(Perm.ALL, "ip", recorded)


@pytest.mark.parametrize(
    "written",
    ["", "1.2.3", "localhost", "127.0.0.1/33", "127.0.0.1/", "::1", "fe80::1/64", "10.0.0.01"],
)
def test_an_ip_that_is_no_ipv4_address_or_block_is_refused(written: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        ACL.ip(written)
    assert caught.value.argument == "address"


@given(st.ip_addresses(v=4), st.integers(0, 32))
def test_every_ipv4_address_and_block_is_taken(address: ipaddress.IPv4Address, prefix: int) -> None:
    assert ACL.ip(str(address)).id == str(address)
    block = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    assert ACL.ip(f"{address}/{prefix}").id == str(block)


# --- sasl, kerberos, digest, world, auth ------------------------------------------------


def test_a_sasl_id_is_the_user_name_and_a_malformed_principal_is_refused() -> None:
    assert ACL.sasl("alice") == ACL(Perm.ALL, "sasl", "alice")
    assert ACL.sasl("zk/host@EXAMPLE.COM", Perm.READ).id == "zk/host@EXAMPLE.COM"
    for bad in ("", "a@b@c", "a/b/c@R"):
        with pytest.raises(InvalidArgumentError):
            ACL.sasl(bad)


@pytest.mark.parametrize(
    ("principal", "remove_host", "remove_realm", "recorded"),
    [
        ("alice@EXAMPLE.COM", False, False, "alice@EXAMPLE.COM"),
        ("alice@EXAMPLE.COM", False, True, "alice"),
        ("app/node1.example.com@EXAMPLE.COM", False, False, "app/node1.example.com@EXAMPLE.COM"),
        ("app/node1.example.com@EXAMPLE.COM", True, False, "app@EXAMPLE.COM"),
        ("app/node1.example.com@EXAMPLE.COM", False, True, "app/node1.example.com"),
        ("app/node1.example.com@EXAMPLE.COM", True, True, "app"),
        ("alice", True, True, "alice"),
        ("app/node1", True, False, "app"),
    ],
)
def test_a_kerberos_id_is_the_principal_as_the_server_maps_it(
    principal: str, remove_host: bool, remove_realm: bool, recorded: str
) -> None:
    entry = ACL.kerberos(principal, remove_host=remove_host, remove_realm=remove_realm)
    assert entry == ACL(Perm.ALL, "sasl", recorded)


@pytest.mark.parametrize("principal", ["", "@EXAMPLE.COM", "a@", "a/@R", "a/b/c@R", "a@b@c", "/h"])
def test_a_malformed_principal_is_refused(principal: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        ACL.kerberos(principal)
    assert caught.value.argument == "principal"


def test_digest_world_and_auth_entries() -> None:
    assert ACL.digest("bob", "pw", Perm.READ) == ACL(Perm.READ, "digest", digest_id("bob", "pw"))
    # What ZooKeeper's DigestAuthenticationProvider.generateDigest("bob:pw") printed.
    assert ACL.digest("bob", "pw").id == "bob:ikIaKsbtGweaHnb/jKn7OHqbunM="
    assert (ACL.world(),) == OPEN_ACL_UNSAFE
    assert (ACL.auth(),) == CREATOR_ALL_ACL
    with pytest.raises(InvalidArgumentError, match="username"):
        ACL.digest("", "pw")


@pytest.mark.parametrize(
    "make",
    [
        lambda perms: ACL.world(perms),
        lambda perms: ACL.auth(perms),
        lambda perms: ACL.digest("u", "p", perms),
        lambda perms: ACL.ip("127.0.0.1", perms),
        lambda perms: ACL.sasl("u", perms),
        lambda perms: ACL.kerberos("u@R", perms),
        lambda perms: ACL.x509("CN=u", perms),
    ],
)
def test_perms_must_be_a_perm(make: object) -> None:
    assert callable(make)
    assert make(Perm.READ | Perm.WRITE).perms == Perm.READ | Perm.WRITE
    for bad in (31, "ALL", None, True):
        with pytest.raises(ArgumentTypeError, match="perms"):
            make(bad)


def test_ids_that_are_not_text_are_refused_by_type() -> None:
    for make in (ACL.ip, ACL.sasl, ACL.kerberos, ACL.x509):
        with pytest.raises(ArgumentTypeError):
            make(b"x")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="remove_host"):
        ACL.kerberos("a@R", remove_host=1)  # type: ignore[arg-type]


# --- the ACL provider ----------------------------------------------------------------------

MINE = [ACL.digest("me", "pw")]


def test_the_provider_is_asked_with_the_callers_path_and_none_means_the_default() -> None:
    asked: list[str] = []

    def provider(path: str) -> list[ACL] | None:
        asked.append(path)
        return MINE if path.startswith("/private") else None

    builder = RequestBuilder("/app", OPEN_ACL_UNSAFE, 1024, provider)
    assert builder.acl_for("/private/x") == tuple(MINE)
    assert builder.acl_for("/public") == OPEN_ACL_UNSAFE
    builder.create("/private/seq-", b"", sequential=True)
    assert asked[-1] == "/private/seq-"  # without the namespace, before the suffix
    asked.clear()
    builder.create("/private/given", b"", acl=OPEN_ACL_UNSAFE)  # acl= wins: not asked
    assert asked == []


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ([], InvalidArgumentError),
        ("world:anyone", ArgumentTypeError),
        ([("world", "anyone")], ArgumentTypeError),
        ([ACL(64, "world", "anyone")], InvalidArgumentError),  # type: ignore[arg-type]
    ],
)
def test_a_provider_answer_that_is_no_acl_is_refused_naming_the_path(
    answer: object, error: type[Exception]
) -> None:
    builder = RequestBuilder(None, OPEN_ACL_UNSAFE, 1024, lambda path: answer)  # type: ignore[arg-type,return-value]
    with pytest.raises(error, match="acl_provider") as caught:
        builder.create("/some/node", b"")
    assert caught.value.path == "/some/node"  # type: ignore[attr-defined]


def test_a_provider_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ArgumentTypeError, match="acl_provider"):
        Settings(acl_provider=MINE)  # type: ignore[arg-type]


# --- add_auth ------------------------------------------------------------------------------


async def test_add_auth_refuses_bad_credentials_before_sending() -> None:
    client = aiocoord.connect("127.0.0.1:1")  # never started: nothing could be sent
    with pytest.raises(InvalidArgumentError, match="scheme"):
        await client.add_auth("", "user:pw")
    with pytest.raises(ArgumentTypeError, match="credential"):
        await client.add_auth("digest", 5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="credential"):
        await client.add_auth("digest", None)  # type: ignore[arg-type]
