"""Every Python block of the documentation site (docs/*.md) runs, against the test's server.

How a page's blocks are treated (the pages themselves do not mention it):

- A ```python block preceded by the line ``<!-- illustrative -->`` (blank lines
  between are allowed) is not run: a fragment, or a sketch that needs a setup
  the page does not show.
- A ```python block whose first line is ``# test_<name>.py`` is a pytest module:
  it is written to a temporary directory and run by pytest in a subprocess
  (``asyncio_mode = auto``), with aiocoord's plugin pointed at the test's server
  (``--aiocoord-zk``). Every test in it must pass.
- Every other ```python block is a program: it defines ``async def main()`` and
  ends with ``asyncio.run(main())``. The test drops that line, points the
  program at its own server (``"127.0.0.1:2181"`` becomes the server's connect
  string, and ``namespace="/myapp"`` a fresh namespace; a block that connects to
  ``"127.0.0.1:2181"`` must use that namespace), executes the module and awaits
  ``main()``, for 60 s at most. A program may launch a server of its own
  (``aiocoord.testing.ZooKeeperServer``) instead.
- A ```text block preceded by ``<!-- output -->`` is the expected standard
  output of the program before it (with nothing but prose between them): the
  printed lines must match it line for line, as the examples' expected output
  does: a line that is only ``...`` stands for any number of lines, and
  elsewhere ``...`` for any text within one line.

So a block either runs here or says it does not. The API page must also list
every public name (``::: aiocoord.<name>``), so a new class cannot be missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import aiocoord
import aiocoord.testing
from aiocoord.testing import ZooKeeperTarget

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(120)

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("*.md"))

ILLUSTRATIVE = "<!-- illustrative -->"
OUTPUT = "<!-- output -->"
CONNECT = '"127.0.0.1:2181"'
NAMESPACE = 'namespace="/myapp"'
RUN = "asyncio.run(main())"
TEST_MODULE = re.compile(r"# (test_\w+\.py)\n")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    marker: str | None
    """The HTML comment just before the block (``ILLUSTRATIVE``, ``OUTPUT``), if any."""
    output: Block | None = None
    """For a program, the ``<!-- output -->`` text block that follows it."""

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order, each with the marker comment before it."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    marker: str | None = None
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            assert not re.match(r"^\s+```", lines[i]), (
                f"{page.name}:{i + 1}: indented fences are not checked; start them at column 0"
            )
            text = lines[i].strip()
            if text in (ILLUSTRATIVE, OUTPUT):
                marker = text
            elif text:
                marker = None
            i += 1
            continue
        end = i + 1
        while not lines[end].startswith("```"):
            end += 1
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(page.name, i + 1, fence.group(1), code, marker))
        marker = None
        i = end + 1
    return blocks


def classify() -> tuple[list[Block], list[Block], list[Block]]:
    """(programs, pytest modules, illustrative blocks) of every page; a program carries
    the output block that follows it."""
    programs: list[Block] = []
    modules: list[Block] = []
    illustrative: list[Block] = []
    for page in PAGES:
        last_program: Block | None = None
        for block in read_blocks(page):
            if block.language == "text" and block.marker == OUTPUT:
                assert last_program is not None, f"{block.name}: output of no program"
                programs[-1] = Block(**{**last_program.__dict__, "output": block})
                last_program = None
                continue
            if block.language != "python":
                continue
            last_program = None
            if block.marker == ILLUSTRATIVE:
                illustrative.append(block)
            elif TEST_MODULE.match(block.code):
                modules.append(block)
            else:
                programs.append(block)
                last_program = block
    return programs, modules, illustrative


PROGRAMS, MODULES, ILLUSTRATIONS = classify()


def line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")))


def matches(want: list[str], got: list[str]) -> bool:
    """Whether the printed lines ``got`` match ``want`` in full (see the module docstring)."""
    if not want:
        return not got
    head, rest = want[0], want[1:]
    if head.strip() == "...":
        return any(matches(rest, got[skip:]) for skip in range(len(got) + 1))
    return bool(got) and line_pattern(head).fullmatch(got[0]) is not None and matches(rest, got[1:])


def check_output(expected: Block, printed: str) -> None:
    want = [line.rstrip() for line in expected.code.rstrip("\n").splitlines()]
    got = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
    assert matches(want, got), f"{expected.name}: printed\n{printed}\nexpected\n{expected.code}"


@pytest.mark.parametrize(
    ("want", "got", "match"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a"], False),
        (["a"], ["a", "b"], False),  # nothing more may be printed
        (["a ... z"], ["a 123 z"], True),
        (["a", "...", "z"], ["a", "z"], True),
        (["a", "...", "z"], ["a", "b", "c", "z"], True),
        (["a", "...", "z"], ["a", "b"], False),
    ],
)
def test_output_patterns(want: list[str], got: list[str], match: bool) -> None:
    assert matches(want, got) is match


def test_the_pages_have_blocks_of_every_kind() -> None:
    assert len(PAGES) >= 15, [p.name for p in PAGES]
    assert PROGRAMS and MODULES and ILLUSTRATIONS
    assert any(p.output for p in PROGRAMS)


@pytest.mark.parametrize("block", PROGRAMS, ids=lambda b: b.name)
async def test_program_runs(block: Block, zookeeper: ZooKeeperTarget) -> None:
    code = block.code
    assert code.rstrip().endswith(RUN), (
        f"{block.name}: a program ends with {RUN} (or mark the block {ILLUSTRATIVE})"
    )
    if CONNECT in code:
        assert NAMESPACE in code, f"{block.name}: connect with {NAMESPACE}"
    code = (
        code.replace(CONNECT, repr(zookeeper.connect_string))
        .replace(NAMESPACE, f"namespace={zookeeper.namespace!r}")
        .replace(RUN, "")
    )
    scope: dict[str, object] = {"__name__": "docs"}
    exec(compile(code, block.name, "exec"), scope)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            async with asyncio.timeout(60):
                await scope["main"]()  # type: ignore[operator]
    finally:
        async with aiocoord.connect(zookeeper.connect_string) as cleaner:
            await cleaner.delete_recursive(zookeeper.namespace)
    if block.output is not None:
        check_output(block.output, printed.getvalue())


@pytest.mark.parametrize("block", MODULES, ids=lambda b: b.name)
def test_pytest_module_passes(
    block: Block,
    pytester: pytest.Pytester,
    zookeeper: ZooKeeperTarget,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIOCOORD_ZK", raising=False)
    match = TEST_MODULE.match(block.code)
    assert match
    pytester.path.joinpath(match.group(1)).write_text(block.code)
    pytester.makeini(
        textwrap.dedent("""\
            [pytest]
            asyncio_mode = auto
            asyncio_default_fixture_loop_scope = function
            """)
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--aiocoord-zk", zookeeper.connect_string
    )
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and outcomes.get("passed", 0) >= 1, result.stdout.str()
    assert set(outcomes) <= {"passed", "seconds"}, outcomes


def test_the_api_page_lists_every_public_name() -> None:
    api = (DOCS / "api.md").read_text()
    listed = set(re.findall(r"^::: (aiocoord(?:\.testing)?\.\w+)$", api, re.M))
    public = {f"aiocoord.{name}" for name in aiocoord.__all__}
    public |= {f"aiocoord.testing.{name}" for name in aiocoord.testing.__all__}
    assert sorted(public - listed) == [], "public names missing from docs/api.md"
    assert sorted(listed - public) == [], "docs/api.md lists names that are not public"
