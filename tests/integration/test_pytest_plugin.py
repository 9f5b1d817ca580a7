"""The pytest plugin as a library user meets it: run in a separate pytest process."""

from __future__ import annotations

import pytest

from aiocoord.testing import ZooKeeperTarget

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(120)

USER_TESTS = """
import pytest
import aiocoord
from aiocoord.testing import ZooKeeperTarget


async def test_coord_is_a_connected_client_in_a_namespace(
    coord: aiocoord.Client, zookeeper: ZooKeeperTarget
) -> None:
    assert coord.namespace == zookeeper.namespace
    await coord.create("/mine", b"x")
    assert zookeeper.server is None  # the settings pointed at a running server


async def test_coord_factory_makes_more_clients(coord_factory) -> None:
    first, second = coord_factory(), coord_factory(session_timeout=5)
    async with first, second:
        await first.create("/shared", b"1")
        assert (await second.get("/shared"))[0] == b"1"


@pytest.mark.anyio
async def test_under_anyios_plugin(coord: aiocoord.Client) -> None:
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf", *args)


def test_fixtures_work_under_pytest_asyncio_with_the_server_from_the_command_line(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIOCOORD_ZK", raising=False)
    result = _run(pytester, "--aiocoord-zk", zookeeper.connect_string, "-k", "not anyio")
    result.assert_outcomes(passed=2)


def test_the_server_may_come_from_the_ini_file(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIOCOORD_ZK", raising=False)
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini(f"[pytest]\nasyncio_mode = auto\naiocoord_zk = {zookeeper.connect_string}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "namespace")
    result.assert_outcomes(passed=1)


def test_a_test_marked_for_anyio_gets_a_clear_message_not_a_loop_mismatch(
    pytester: pytest.Pytester, zookeeper: ZooKeeperTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOCOORD_ZK", zookeeper.connect_string)
    result = _run(pytester, "-k", "anyio and asyncio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*mark it @pytest.mark.asyncio instead*"])
    assert "attached to a different loop" not in result.stdout.str()


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
