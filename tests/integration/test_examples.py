"""Every example runs on its own and prints what its docstring says it prints.

As with Go's testable examples (an ``// Output:`` comment), each example's
module docstring ends with its expected output: a paragraph that starts with
``Expected output`` and ends with ``:`` (notes go in between), then the lines
the run must print, indented (the common indentation is removed). The example
runs against the shared server (``AIOCOORD_ZK`` set), and its whole standard
output must match, line by line:

- a line that is only ``...`` stands for any number of lines, none included;
- elsewhere, ``...`` stands for any text within one line, none included;
- everything else must be printed exactly (trailing spaces aside).

So an example keeps what varies from run to run (times, ports, session ids) to a
``...`` and states what it proves as a fixed line. It must also write nothing to
standard error: no warning, no traceback, no log record.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))

pytestmark = pytest.mark.timeout(180)

ELLIPSIS = "..."


def expected_output(source: str) -> list[str]:
    """The lines of the ``Expected output ...:`` block that ends the module docstring."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    lines = docstring.splitlines()
    heading = [i for i, line in enumerate(lines) if line.startswith("Expected output")]
    assert heading, "the module docstring has no 'Expected output ...:' block at its end"
    end = heading[0]
    while not lines[end].endswith(":"):  # the heading may run over several lines
        end += 1
        assert end < len(lines) and lines[end].strip(), (
            "the 'Expected output' paragraph must end with ':'"
        )
    block = textwrap.dedent("\n".join(lines[end + 1 :])).strip("\n")
    assert block, "the 'Expected output' block is empty"
    return [line.rstrip() for line in block.splitlines()]


def line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split(ELLIPSIS)))


def matches(expected: list[str], printed: list[str]) -> bool:
    """Whether ``printed`` matches ``expected`` in full (see the module docstring)."""
    if not expected:
        return not printed
    head, rest = expected[0], expected[1:]
    if head.strip() == ELLIPSIS:
        return any(matches(rest, printed[skip:]) for skip in range(len(printed) + 1))
    return (
        bool(printed)
        and line_pattern(head).fullmatch(printed[0].rstrip()) is not None
        and matches(rest, printed[1:])
    )


@pytest.mark.parametrize(
    ("expected", "printed", "match"),
    [
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["a", "b  "], True),  # trailing spaces do not count
        (["a", "b"], ["a"], False),
        (["a"], ["a", "b"], False),  # nothing more may be printed
        (["a", "b"], ["b", "a"], False),  # in order
        (["took ... s"], ["took 1.5 s"], True),
        (["took ... s"], ["took  s"], True),
        (["took ... s"], ["took 1.5 ms"], False),
        (["x ... y ... z"], ["x 1 y 2 z"], True),
        (["a.b"], ["aXb"], False),  # other characters are literal
        (["[ok] ..."], ["[ok] (1+1)*2"], True),
        (["a", "...", "b"], ["a", "b"], True),
        (["a", "...", "b"], ["a", "1", "2", "b"], True),
        (["a", "...", "b"], ["a", "1", "2"], False),
        (["a", "...", "b", "c"], ["a", "b", "x", "b", "c"], True),  # not the first "b"
        (["  [state] ..."], ["[state] LOST"], False),  # indentation counts
    ],
)
def test_expected_output_patterns(expected: list[str], printed: list[str], match: bool) -> None:
    assert matches(expected, printed) is match


def test_the_expected_output_block_ends_the_docstring() -> None:
    source = '''"""Title.

    Run: python it.py

    Expected output, with a note
    over two lines:

        first
          indented ...
        ...
        last
    """
    '''
    assert expected_output(textwrap.dedent(source)) == ["first", "  indented ...", "...", "last"]
    with pytest.raises(AssertionError, match="no 'Expected output"):
        expected_output('"""Title.\n\nRun: python it.py\n"""')
    with pytest.raises(AssertionError, match="must end with ':'"):
        expected_output('"""Title.\n\nExpected output\n\n    first\n"""')


@pytest.fixture
def expected(example: Path) -> list[str]:
    return expected_output(example.read_text())


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
async def test_example_prints_its_expected_output(
    example: Path, expected: list[str], zookeeper
) -> None:
    env = {**os.environ, "AIOCOORD_ZK": zookeeper.connect_string}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(example),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    stdout, stderr = out.decode(), err.decode()
    report = (
        f"--- expected ({example.name} docstring)\n"
        + "\n".join(expected)
        + f"\n--- printed (exit code {proc.returncode})\n{stdout}"
        + (f"--- standard error\n{stderr}" if stderr else "")
    )
    assert proc.returncode == 0, report
    assert matches(expected, stdout.splitlines()), report
    assert stderr == "", report
