"""The pytest plugin as a library user meets it: run in a separate pytest process."""

from __future__ import annotations

import pytest

from aiocoord.testing import ZooKeeperTarget

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(120)

USER_TESTS = """
import asyncio

import pytest
import aiocoord
from aiocoord.testing import ZooKeeperTarget


async def test_coord_is_a_connected_client_in_a_namespace(
    coord: aiocoord.Client, zookeeper: ZooKeeperTarget
) -> None:
    assert coord.namespace == zookeeper.namespace
    await coord.create("/mine", b"x")
    assert zookeeper.server is None  # the settings pointed at a running server


async def test_coord_factory_makes_more_clients_started_as_coord_is(
    coord: aiocoord.Client, coord_factory
) -> None:
    first, second = await coord_factory(), await coord_factory(session_timeout=5)
    assert coord.connected and first.connected and second.connected
    await first.create("/shared", b"1")
    assert (await second.get("/shared"))[0] == b"1"
    assert (await coord.get("/shared"))[0] == b"1"


@pytest.mark.anyio
async def test_under_anyios_plugin(coord: aiocoord.Client, coord_factory) -> None:
    other = await coord_factory()
    async with aiocoord.Mutex(coord, "/lock"):
        assert not await aiocoord.Mutex(other, "/lock").try_acquire()
    await other.create("/made", b"y")
    assert (await coord.get("/made"))[0] == b"y"
"""

CONFTEST_ASYNCIO_BACKEND = """
import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def _run(pytester: pytest.Pytester, *args: str, mode: str = "auto") -> pytest.RunResult:
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeconftest(CONFTEST_ASYNCIO_BACKEND)
    ini = f"asyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n"
    pytester.makeini(f"[pytest]\n{ini}filterwarnings = error\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf", *args)


def test_fixtures_work_under_pytest_asyncio_with_the_server_from_the_command_line(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIOCOORD_ZK", raising=False)
    result = _run(pytester, "--aiocoord-zk", zookeeper.connect_string, "-k", "not anyio")
    result.assert_outcomes(passed=2)


def test_a_test_marked_for_anyio_in_auto_mode_gets_a_clear_message_not_a_loop_mismatch(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest-asyncio's auto mode runs the test on its loop, and anyio's plugin would
    run the fixtures on its own: say so, and what to change."""
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    result = _run(pytester, "-k", "anyio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*set asyncio_mode = strict*"])
    assert "attached to a different loop" not in result.stdout.str()


def test_the_server_may_come_from_the_ini_file(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIOCOORD_ZK", raising=False)
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini(f"[pytest]\nasyncio_mode = auto\naiocoord_zk = {zookeeper.connect_string}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "namespace")
    result.assert_outcomes(passed=1)


def test_a_test_marked_for_anyio_runs_on_anyios_loop_with_the_fixtures(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In strict mode pytest-asyncio leaves tests marked for anyio to anyio's plugin:
    the fixtures then run on anyio's loop (a FastAPI user's setup)."""
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    result = _run(pytester, "-k", "anyio", mode="strict")
    result.assert_outcomes(passed=1)


def test_fixtures_work_under_anyios_plugin_without_pytest_asyncio(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeconftest(CONFTEST_ASYNCIO_BACKEND)
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-k", "anyio"
    )
    result.assert_outcomes(passed=1)


def test_anyios_trio_backend_gets_a_clear_message(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeconftest(CONFTEST_ASYNCIO_BACKEND.replace('"asyncio"', '"trio"'))
    pytester.makeini("[pytest]\nasyncio_mode = strict\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "anyio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*aiocoord runs on asyncio*not on anyio's 'trio' backend*"])


def test_without_pytest_asyncio_the_fixtures_say_what_to_install(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    pytester.makepyfile(
        test_user="""
def test_wants_a_client(coord):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pip install aiocoord?pytest?*"])  # [ ] are fnmatch classes
