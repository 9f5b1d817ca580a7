"""DIGEST-MD5 (RFC 2831) without a server: the RFC's worked example, parsing, input checks."""

from __future__ import annotations

import asyncio
import logging
import pickle

import pytest

import aiocoord
from aiocoord._session._options import Settings
from aiocoord._session._sasl import SaslMechanism, _DigestExchange, parse_directives

# RFC 2831 section 4: user "chris", password "secret", IMAP on elwood.innosoft.com.
RFC_CHALLENGE = (
    b'realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",'
    b"algorithm=md5-sess,charset=utf-8"
)
RFC_CNONCE = "OA6MHXh6VqTrRk"
RFC_RESPONSE = "d388dad90d4bbd760a152321f2143af7"
RFC_RSPAUTH = b"rspauth=ea40f60335c427b5527b84dbabcdfffd"

# What Java's DIGEST-MD5 server (ZooKeeper's) sends: no qop, so "auth".
ZK_CHALLENGE = b'realm="zk-sasl-md5",nonce="n0nce/+=",charset=utf-8,algorithm=md5-sess'


def _rfc_exchange() -> _DigestExchange:
    credentials = aiocoord.SaslDigest(
        "chris", "secret", realm="elwood.innosoft.com", service="imap"
    )
    return _DigestExchange(credentials, cnonce=RFC_CNONCE)


def _run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_the_rfc_worked_example_gives_its_response_and_accepts_its_rspauth() -> None:
    exchange = _rfc_exchange()
    assert _run(exchange.first()) == b""
    answer = _run(exchange.step(RFC_CHALLENGE))
    assert isinstance(answer, bytes)
    fields = {k: v[0] for k, v in parse_directives(answer).items()}
    assert fields == {
        "charset": "utf-8",
        "username": "chris",
        "realm": "elwood.innosoft.com",
        "nonce": "OA6MG9tEQGm2hh",
        "nc": "00000001",
        "cnonce": RFC_CNONCE,
        "digest-uri": "imap/elwood.innosoft.com",
        "response": RFC_RESPONSE,
        "qop": "auth",
    }
    assert not exchange.complete
    assert _run(exchange.step(RFC_RSPAUTH)) is None
    assert exchange.complete


def test_a_wrong_rspauth_is_an_auth_failure() -> None:
    exchange = _rfc_exchange()
    _run(exchange.step(RFC_CHALLENGE))
    with pytest.raises(aiocoord.AuthFailedError, match="rspauth does not match") as info:
        _run(exchange.step(b"rspauth=00000000000000000000000000000000"))
    assert info.value.mechanism == "DIGEST-MD5"
    assert not exchange.complete


def test_zookeepers_defaults_name_the_digest_uri_and_realm_the_java_client_uses() -> None:
    credentials = aiocoord.SaslDigest("alice", "secret")
    assert (credentials.realm, credentials.service) == ("zk-sasl-md5", "zookeeper")
    answer = _run(credentials.exchange("127.0.0.1").step(ZK_CHALLENGE))
    assert isinstance(answer, bytes)
    fields = parse_directives(answer)
    assert fields["digest-uri"] == ["zookeeper/zk-sasl-md5"]
    assert fields["realm"] == ["zk-sasl-md5"]
    assert fields["qop"] == ["auth"]


def test_a_challenge_without_realm_is_answered_with_our_realm() -> None:
    credentials = aiocoord.SaslDigest("alice", "secret", realm="other")
    answer = _run(credentials.exchange("h").step(b'nonce="x",algorithm=md5-sess'))
    assert isinstance(answer, bytes)
    assert parse_directives(answer)["realm"] == ["other"]
    assert b"charset" not in answer  # not offered: ISO 8859-1


def test_quoted_values_keep_commas_escapes_and_repeated_directives() -> None:
    parsed = parse_directives(
        b' ,realm="a,b" , realm="c\\"d",,nonce = "x\\\\y" ,qop="auth,auth-int",stale=true, '
    )
    assert parsed == {
        "realm": ["a,b", 'c"d'],
        "nonce": ["x\\y"],
        "qop": ["auth,auth-int"],
        "stale": ["true"],
    }
    assert parse_directives(b"") == {}
    assert parse_directives(b"NoNcE=1") == {"nonce": ["1"]}  # names are case-insensitive


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (b'realm="r",nonce="unterminated', "unterminated"),
        (b"realm", "malformed directive"),
        (b'=x,nonce="n"', "malformed directive"),
        (b'nonce="n" junk', "junk after"),
        (b"\xff\xfe", "not UTF-8"),
        (b"x=" + b"y" * 5000, "RFC 2831's bound"),
    ],
)
def test_malformed_tokens_are_typed_auth_failures(token: bytes, reason: str) -> None:
    with pytest.raises(aiocoord.AuthFailedError, match=reason):
        parse_directives(token)


@pytest.mark.parametrize(
    ("challenge", "reason"),
    [
        (b"", "empty challenge"),
        (b'realm="r",algorithm=md5-sess', "no nonce"),
        (b'nonce="n"', "no algorithm"),
        (b'nonce="n",algorithm=md5', "not md5-sess"),
        (b'nonce="n",nonce="m",algorithm=md5-sess', "repeats 'nonce'"),
        (b'nonce="n",algorithm=md5-sess,qop="auth-conf"', "qop 'auth-conf' only"),
    ],
)
def test_challenges_missing_what_the_response_needs_are_typed_auth_failures(
    challenge: bytes, reason: str
) -> None:
    exchange = aiocoord.SaslDigest("alice", "secret").exchange("h")
    with pytest.raises(aiocoord.AuthFailedError, match=reason):
        _run(exchange.step(challenge))


def test_the_second_token_must_be_rspauth_and_nothing_follows_completion() -> None:
    exchange = aiocoord.SaslDigest("alice", "secret").exchange("h")
    _run(exchange.step(ZK_CHALLENGE))
    with pytest.raises(aiocoord.AuthFailedError, match="no rspauth"):
        _run(exchange.step(ZK_CHALLENGE))


def test_text_outside_latin1_needs_the_servers_utf8() -> None:
    exchange = aiocoord.SaslDigest("алиса", "secret").exchange("h")
    with pytest.raises(aiocoord.AuthFailedError, match="ISO 8859-1"):
        _run(exchange.step(b'nonce="n",algorithm=md5-sess'))
    answer = _run(aiocoord.SaslDigest("алиса", "пароль").exchange("h").step(ZK_CHALLENGE))
    assert isinstance(answer, bytes)
    assert parse_directives(answer)["username"] == ["алиса"]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "argument"),
    [
        (("", "pw"), {}, aiocoord.InvalidArgumentError, "username"),
        ((b"alice", "pw"), {}, aiocoord.ArgumentTypeError, "username"),
        (("alice", b"pw"), {}, aiocoord.ArgumentTypeError, "password"),
        (("alice", None), {}, aiocoord.ArgumentTypeError, "password"),
        (("alice", "pw"), {"realm": ""}, aiocoord.InvalidArgumentError, "realm"),
        (("alice", "pw"), {"service": 1}, aiocoord.ArgumentTypeError, "service"),
        (("alice", "p\x00w"), {}, aiocoord.InvalidArgumentError, "password"),
    ],
)
def test_bad_credentials_are_refused_before_anything_is_sent(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], argument: str
) -> None:
    with pytest.raises(error) as info:
        aiocoord.SaslDigest(*args, **kwargs)  # type: ignore[arg-type]
    assert info.value.argument == argument  # type: ignore[attr-defined]
    assert "pw" not in str(info.value)


def test_the_password_is_in_no_repr_error_or_log(caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-Password"
    credentials = aiocoord.SaslDigest("alice", secret)
    assert repr(credentials) == (
        "SaslDigest(username='alice', realm='zk-sasl-md5', service='zookeeper')"
    )
    exchange = credentials.exchange("h")
    assert secret not in repr(exchange)
    caplog.set_level(logging.DEBUG)
    _run(exchange.step(ZK_CHALLENGE))
    with pytest.raises(aiocoord.AuthFailedError) as info:
        _run(exchange.step(b"rspauth=0"))
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert secret not in caplog.text
    with pytest.raises(aiocoord.ArgumentTypeError) as bad:
        aiocoord.SaslDigest("alice", secret.encode())  # type: ignore[arg-type]
    assert secret not in str(bad.value)


def test_credentials_are_frozen_values_that_pickle() -> None:
    credentials = aiocoord.SaslDigest("alice", "secret", realm="r")
    with pytest.raises(AttributeError):
        credentials.username = "mallory"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(credentials)) == credentials
    assert credentials != aiocoord.SaslDigest("alice", "other", realm="r")
    assert isinstance(credentials, SaslMechanism)
    assert credentials.mechanism == "DIGEST-MD5"


def test_settings_take_a_mechanism_and_name_what_they_accept() -> None:
    credentials = aiocoord.SaslDigest("alice", "secret")
    assert Settings(sasl=credentials).sasl is credentials
    assert Settings().sasl is None
    with pytest.raises(aiocoord.ArgumentTypeError, match=r"SaslDigest, an aiocoord\.SaslKerberos"):
        Settings(sasl=("alice", "secret"))  # type: ignore[arg-type]
    with pytest.raises(aiocoord.ArgumentTypeError):
        aiocoord.connect("127.0.0.1:2181", sasl="alice:secret")  # type: ignore[arg-type]
