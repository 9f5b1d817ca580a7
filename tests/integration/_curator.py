"""Running Apache Curator next to aiocoord, for the interoperability tests.

The Java side is Debian's libcurator-recipes-java and libcurator-discovery-java (service
discovery, with the Jackson it needs): Debian 12's 5.4 (the system's), or with
``CURATOR_VERSION=5.7`` Debian 13's 5.7.1 with the ZooKeeper 3.9.3 client it is built
against (fetched by scripts/fetch-zookeeper.sh, which ``make test`` runs). Every
``tests/interop/*.java`` is one small program (its class named as its file) that drives
one family of Curator recipes on paths a test gives it; they are compiled together, once
per test session, by the ``curator_classpath`` fixture (see conftest).

Each program prints ``READY`` once connected, then whatever its test reads,
and ``DONE ...`` at the end; exit code 2 means it saw a violation.

On a SASL-required server the JVM logs in as Curator users do, through JAAS: a
``Client`` section (the ZooKeeper client's default context name) with
``DigestLoginModule``'s username and password; ``sasl_client_flags`` writes it and
gives the flags to pass to ``start_curator(..., jvm_args=...)``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from aiocoord import SaslDigest
from aiocoord.testing._security import JaasEntry, write_jaas
from aiocoord.testing._server import find_versioned_jars

SOURCES = Path(__file__).resolve().parents[1] / "interop"
JARS = Path("/usr/share/java")
CLASSPATH_JARS = ["curator-recipes.jar", "curator-x-discovery.jar", "slf4j-nop.jar"]
# Named though curator-x-discovery's manifest names them, so that a missing one fails
# compile_harnesses with its name. Curator 5.7.1 too runs on Debian 12's Jackson (2.14):
# it calls only ObjectMapper's long-standing API and the annotations of 2.x.
JACKSON_JARS = ["jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"]
ENV_CURATOR_VERSION = "CURATOR_VERSION"
# Debian 13 pairs Curator 5.7.1 with ZooKeeper 3.9.3; Debian 12 pairs 5.4 with 3.8 (the system's).
_ZOOKEEPER_CLIENT_FOR = {"5.7": "3.9"}


def curator_jars() -> list[Path]:
    """The jars of the Curator ``CURATOR_VERSION`` asks for (unset: the system's), leaves
    first: each Debian jar's manifest names the system's unversioned jars, which the JVM
    searches right after it, so the versioned ones must come before."""
    wanted = os.environ.get(ENV_CURATOR_VERSION)
    jackson = [JARS / j for j in JACKSON_JARS]
    if not wanted:
        return [*(JARS / j for j in CLASSPATH_JARS), *jackson]
    short = ".".join(wanted.split(".")[:2])
    client = find_versioned_jars(
        ["zookeeper-jute", "zookeeper"], _ZOOKEEPER_CLIENT_FOR.get(short, "3.8")
    )
    curator = find_versioned_jars(
        ["curator-client", "curator-framework", "curator-recipes", "curator-x-discovery"], wanted
    )
    if client is None or curator is None:
        pytest.fail(
            f"Curator {wanted} ({ENV_CURATOR_VERSION}) or its ZooKeeper client is not in "
            f"{JARS} nor in the jar cache: `make test CURATOR_VERSION=5.7` fetches Debian 13's "
            "5.7.1 (scripts/fetch-zookeeper.sh); 5.4 is Debian 12's libcurator-recipes-java "
            "and libcurator-discovery-java"
        )
    return [*client[1], *curator[1], JARS / "slf4j-nop.jar", *jackson]


def compile_harnesses(out: Path) -> str:
    """Compile every harness into ``out``; fail (not skip) if Curator or javac is missing."""
    jars = curator_jars()
    missing = [str(j) for j in jars if not j.is_file()]
    javac = shutil.which("javac")
    if missing or javac is None:
        pytest.fail(
            f"Curator interop needs Debian's libcurator-recipes-java, libcurator-discovery-java "
            "and a JDK "
            f"(missing: {missing or 'javac'}); `make test` installs them"
        )
    libs = ":".join(str(j) for j in jars)
    sources = sorted(str(p) for p in SOURCES.glob("*.java"))
    subprocess.run([javac, "-d", str(out), "-cp", libs, *sources], check=True)
    return f"{out}:{libs}"


def sasl_client_flags(directory: Path, sasl: SaslDigest) -> list[str]:
    """JVM flags that make the ZooKeeper client under Curator authenticate with
    DIGEST-MD5 as ``sasl``'s user: a JAAS file (written in ``directory``) whose
    ``Client`` section holds the credentials. ``zookeeper.sasl.client`` is on by
    default and ``Client`` is the default ``zookeeper.sasl.clientconfig``; both are
    named anyway so that a changed default cannot turn SASL off unseen."""
    jaas = write_jaas(
        directory / "curator-client-jaas.conf",
        {
            "Client": [
                JaasEntry(
                    "org.apache.zookeeper.server.auth.DigestLoginModule",
                    {"username": sasl.username, "password": sasl.password},
                )
            ]
        },
    )
    return [
        f"-Djava.security.auth.login.config={jaas}",
        "-Dzookeeper.sasl.client=true",
        "-Dzookeeper.sasl.clientconfig=Client",
    ]


async def start_curator(
    classpath: str, program: str, *args: str, jvm_args: Sequence[str] = ()
) -> asyncio.subprocess.Process:
    """Start ``java [jvm_args] <program> args...`` and wait for its READY line."""
    java = shutil.which("java")
    assert java is not None
    proc = await asyncio.create_subprocess_exec(
        java,
        *jvm_args,
        "-cp",
        classpath,
        program,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), 60)
    except BaseException:
        await kill(proc)
        raise
    if first.strip() != b"READY":
        await kill(proc)
        raise AssertionError(f"{program} did not start: {first!r}")
    return proc


async def read_line(proc: asyncio.subprocess.Process, timeout: float = 60) -> str:
    """The program's next output line (stripped); fails on end of output."""
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout)
    if not line:
        raise AssertionError(f"the Curator program ended (exit {await proc.wait()})")
    return line.decode().strip()


async def send_line(proc: asyncio.subprocess.Process, text: str) -> None:
    """Write one command line to the program's stdin."""
    assert proc.stdin is not None
    proc.stdin.write(text.encode() + b"\n")
    await proc.stdin.drain()


async def kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def together(*coroutines: Coroutine[Any, Any, Any]) -> list[Any]:
    """Run side by side; if one fails, the others are cancelled (and their Java
    processes killed by ``finish``) instead of being left running."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(c) for c in coroutines]
    return [t.result() for t in tasks]


async def finish(proc: asyncio.subprocess.Process, timeout: float = 120) -> str:
    """Wait for the program to end; its whole remaining output. Fails unless it exited 0."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        await kill(proc)
    text = out.decode()
    assert proc.returncode == 0, text
    return text
