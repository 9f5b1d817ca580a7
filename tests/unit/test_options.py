"""Client options: the connect string and the defaults, checked before any I/O."""

from __future__ import annotations

import inspect
import typing

import pytest

import aiocoord
from aiocoord._session._options import Settings, parse_hosts


def test_hosts_parse_with_the_default_port_and_ipv6_brackets() -> None:
    assert parse_hosts("a:2182, b ,[::1]:2183") == [("a", 2182), ("b", 2181), ("::1", 2183)]
    assert parse_hosts([("c", 1), "d:2"]) == [("c", 1), ("d", 2)]


@pytest.mark.parametrize("hosts", ["127.0.0.1:notaport", "h:0", "h:70000", ":2181", "h:"])
def test_a_bad_host_entry_is_refused_naming_it(hosts: str) -> None:
    with pytest.raises(aiocoord.InvalidConnectStringError, match="is not host:port") as caught:
        aiocoord.connect(hosts)
    assert caught.value.hosts == hosts
    assert isinstance(caught.value, ValueError)


def test_a_chroot_and_an_empty_list_are_refused() -> None:
    with pytest.raises(ValueError, match="namespace="):
        parse_hosts("h:2181/app")
    with pytest.raises(ValueError, match="no ZooKeeper hosts"):
        parse_hosts(" , ")


def test_the_options_type_and_the_settings_name_the_same_options() -> None:
    """connect()'s keywords are spelled once (ClientOptions); Settings holds their defaults."""
    options = set(typing.get_type_hints(aiocoord.ClientOptions))
    settings = {f for f in Settings.__dataclass_fields__ if f != "credentials"}
    assert options == settings
    for function in (aiocoord.connect, aiocoord.Client):
        parameters = inspect.signature(function).parameters.values()
        keywords = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
        assert keywords == options, function


def test_starting_outside_an_asyncio_loop_raises_a_clear_error() -> None:
    """As under trio: the coroutine runs, but no asyncio loop is running."""
    client = aiocoord.connect("127.0.0.1:2181")
    coro = client.start()
    with pytest.raises(aiocoord.UnsupportedEventLoopError, match="asyncio"):
        coro.send(None)
    assert isinstance(aiocoord.UnsupportedEventLoopError(), RuntimeError)
