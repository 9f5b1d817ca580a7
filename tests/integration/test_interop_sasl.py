"""Curator and aiocoord on a SASL-required ensemble: one mutex, one counter.

Three members with quorum SASL and ``sessionRequireClientSASLAuth=true``; the
Curator process logs in through a JAAS ``Client`` section (see
``_curator.sasl_client_flags``), aiocoord with ``sasl=SaslDigest``. The shared
nodes are created first with the ACL ``sasl:alice`` only, so Curator's locks and
counter writes succeed only on a connection that authenticated as alice: no
anonymous fallback can pass these tests.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from _curator import finish, sasl_client_flags, start_curator, together

import aiocoord
from aiocoord import ACL, Mutex, NodeExistsError, Perm
from aiocoord.testing import ZooKeeperEnsemble

pytestmark = pytest.mark.timeout(240)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ALICE_ONLY = [ACL(Perm.ALL, "sasl", "alice")]
ZERO = struct.pack(">q", 0)


@pytest_asyncio.fixture
async def sasl_ensemble() -> AsyncIterator[ZooKeeperEnsemble]:
    async with ZooKeeperEnsemble(3, sasl_users=USERS, require_sasl=True) as ensemble:
        yield ensemble


async def test_curator_and_aiocoord_exclude_each_other_on_a_sasl_required_ensemble(
    curator_classpath: str, sasl_ensemble: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    ensemble = sasl_ensemble
    iterations = 30
    async with aiocoord.connect(ensemble.connect_string, sasl=ensemble.sasl_digest("alice")) as a:
        for path, data in (("/shared", b""), ("/shared/lock", b""), ("/shared/counter", ZERO)):
            await a.create(path, data, acl=ALICE_ONLY)
        java = await start_curator(
            curator_classpath,
            "CuratorHarness",
            "mutex",
            ensemble.connect_string,
            "/shared/lock",
            "/shared/inside",
            "/shared/counter",
            str(iterations),
            jvm_args=sasl_client_flags(tmp_path, ensemble.sasl_digest("alice")),
        )

        async def python_side() -> None:
            lock = Mutex(a, "/shared/lock")
            for _ in range(iterations):
                async with lock:
                    try:
                        await a.create("/shared/inside", ephemeral=True, acl=ALICE_ONLY)
                    except NodeExistsError:
                        pytest.fail("the Curator holder was inside while aiocoord held the lock")
                    data, _stat = await a.get("/shared/counter")
                    # Yield inside the hold, so that a broken exclusion shows as a lost add.
                    await asyncio.sleep(0.001)
                    value = struct.unpack(">q", data)[0] + 1
                    await a.set("/shared/counter", struct.pack(">q", value))
                    await a.delete("/shared/inside")

        outputs = await together(finish(java), python_side())
        assert f"DONE {iterations}" in outputs[0]
        data, _ = await a.get("/shared/counter")
        # Every add was a read-modify-write under the lock: none lost, none doubled.
        assert struct.unpack(">q", data)[0] == 2 * iterations
        assert await a.children("/shared/lock") == []
        acl, _ = await a.get_acl("/shared/lock")
        assert acl == ALICE_ONLY


async def test_curator_and_aiocoord_count_together_on_a_sasl_required_ensemble(
    curator_classpath: str, sasl_ensemble: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    ensemble = sasl_ensemble
    iterations = 50
    async with (
        aiocoord.connect(ensemble.connect_string, sasl=ensemble.sasl_digest("alice")) as a,
        aiocoord.connect(ensemble.connect_string, sasl=ensemble.sasl_digest("bob")) as bob,
    ):
        await a.create("/count", ZERO, acl=ALICE_ONLY)
        java = await start_curator(
            curator_classpath,
            "CuratorHarness",
            "counter",
            ensemble.connect_string,
            "/count",
            str(iterations),
            jvm_args=sasl_client_flags(tmp_path, ensemble.sasl_digest("alice")),
        )
        counter = aiocoord.AtomicLong(a, "/count", retry=aiocoord.RetryNTimes(10_000, 0.001))
        python_ok = 0

        async def python_side() -> None:
            nonlocal python_ok
            for _ in range(iterations):
                if (await counter.increment()).succeeded:
                    python_ok += 1

        outputs = await together(finish(java), python_side())
        java_ok = int(outputs[0].split("DONE ")[1].split()[0])
        assert (java_ok, python_ok) == (iterations, iterations)  # no retry budget ran out
        assert (await counter.get()).post_value == 2 * iterations
        # The ACL held throughout: another SASL user, on either side, cannot add.
        with pytest.raises(aiocoord.NoAuthError):
            await aiocoord.AtomicLong(bob, "/count").increment()
        as_bob = await start_curator(
            curator_classpath,
            "CuratorHarness",
            "counter",
            ensemble.connect_string,
            "/count",
            "1",
            jvm_args=sasl_client_flags(tmp_path, ensemble.sasl_digest("bob")),
        )
        with pytest.raises(AssertionError, match="NoAuthException"):
            await finish(as_bob)
        assert (await counter.get()).post_value == 2 * iterations
