"""The README's quickstart runs as written (against the test's server and namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from aiocoord.testing import ZooKeeperTarget

README = Path(__file__).resolve().parents[2] / "README.md"


def _quickstart() -> str:
    match = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert match, "the README has a Quickstart code block"
    return match.group(1)


async def test_the_quickstart_runs_and_hears_connected(zookeeper: ZooKeeperTarget, capsys) -> None:
    code = (
        _quickstart()
        .replace('"127.0.0.1:2181"', repr(zookeeper.connect_string))
        .replace('namespace="/myapp"', f"namespace={zookeeper.namespace!r}")
        .replace("asyncio.run(main())", "")
    )
    scope: dict[str, object] = {}
    exec(compile(code, "README quickstart", "exec"), scope)
    with anyio.fail_after(30):
        await scope["main"]()  # type: ignore[operator]
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["zookeeper: CONNECTED", "holding the lock"]
    assert "b'off' -> CHANGED /config/flag" in out
