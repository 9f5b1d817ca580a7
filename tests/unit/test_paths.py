"""Path rules are checked before anything is sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import aiocoord
from aiocoord import DataTooLargeError, InvalidPathError
from aiocoord._paths import basename, join, parent, validate_path


@pytest.mark.parametrize("path", ["/", "/a", "/a/b", "/a-b_c.d", "/ünïcødé", "/a/.b", "/a/..b"])
def test_valid_paths_pass(path: str) -> None:
    assert validate_path(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("a", "start with '/'"),
        ("/a/", "end with '/'"),
        ("//a", "empty segment"),
        ("/a//b", "empty segment"),
        ("/a/./b", "relative segment"),
        ("/a/../b", "relative segment"),
        ("/..", "relative segment"),
        ("/a\x00b", "U+0000"),
        ("/a\x1fb", "U+001F"),
        ("/a\x7fb", "U+007F"),
        ("/a\ud800b", "U+D800"),
        ("/a\ufff0", "U+FFF0"),
    ],
)
def test_invalid_paths_are_refused_with_a_reason(path: str, reason: str) -> None:
    with pytest.raises(InvalidPathError) as info:
        validate_path(path)
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError)


def test_sequential_create_may_end_in_a_slash() -> None:
    assert validate_path("/queue/", sequential=True) == "/queue/"
    with pytest.raises(InvalidPathError):
        validate_path("/queue//", sequential=True)


@pytest.mark.parametrize("bad", [None, b"/a", 3])
def test_a_path_that_is_not_a_string_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError):
        validate_path(bad)


def test_join_parent_basename() -> None:
    assert join("/a", "b", "c") == "/a/b/c"
    assert join("/", "b") == "/b"
    assert join("/a/", "/b/") == "/a/b"
    assert parent("/a/b") == "/a" and parent("/a") == "/"
    assert basename("/a/b") == "b"


async def test_client_checks_input_before_touching_the_network(
    new_client: Callable[..., aiocoord.Client],
) -> None:
    # Never started: any attempt to send would raise RuntimeError instead.
    client = new_client(max_data_size=10)
    with pytest.raises(InvalidPathError):
        await client.create("no-slash")
    with pytest.raises(InvalidPathError):
        await client.get("/a/")
    with pytest.raises(TypeError):
        await client.create("/a", "text, not bytes")  # type: ignore[arg-type]
    with pytest.raises(DataTooLargeError) as info:
        await client.set("/a", b"x" * 11)
    assert info.value.size == 11 and info.value.limit == 10 and "/a" in str(info.value)
    with pytest.raises(TypeError):
        await client.set("/a", b"x", version="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await client.create("/a", ephemeral=True, container=True)
    with pytest.raises(ValueError):
        await client.create("/a", ttl=0)
    with pytest.raises(InvalidPathError):
        client.transaction().check("bad", 1)
    with pytest.raises(RuntimeError, match="not started"):
        await client.get("/a")


def test_bad_connect_arguments() -> None:
    with pytest.raises(ValueError):
        aiocoord.connect("")
    with pytest.raises(ValueError):
        aiocoord.connect("h:1/chroot")
    with pytest.raises(InvalidPathError):
        aiocoord.connect("h:1", namespace="/a//b")
    with pytest.raises(ValueError):
        aiocoord.connect("h:1", session_timeout=0)
    client = aiocoord.connect("a:1, b:2,c", namespace="app")
    assert client.hosts == [("a", 1), ("b", 2), ("c", 2181)]
    assert client.namespace == "/app"
