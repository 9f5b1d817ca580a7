"""The README's "Layout" section names only folders and modules that exist.

The section is a tree: a line's leading names (a folder ends in ``/``, a module has
a suffix), then two or more spaces and what it holds. A name lies in the nearest
folder above it that is indented less; a line with no name continues the one above.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_NAME = re.compile(r"[\w.-]+/|[\w-]+\.\w+")


def layout_block(text: str) -> str:
    match = re.search(r"^## Layout\n.*?```\n(.*?)```", text, re.S | re.M)
    assert match, "the README has a Layout section with a code block"
    return match.group(1)


def named_paths(block: str) -> list[str]:
    """Every path the tree names, relative to the repository root."""
    folders: list[tuple[int, str]] = []  # (indent, path) of the open folders
    paths: list[str] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        head = re.split(r" {2,}", line.strip(), maxsplit=1)[0]
        names = head.split(" ")
        if not head or not _NAME.fullmatch(names[0]):
            continue  # a description carried over from the line above
        assert all(_NAME.fullmatch(name) for name in names), (
            f"Layout line {line.strip()!r}: names, then two spaces, then what they hold"
        )
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        for name in names:
            paths.append(parent + name)
        if len(names) == 1 and names[0].endswith("/"):
            folders.append((indent, parent + names[0]))
    return paths


def test_a_name_run_into_its_description_is_refused() -> None:
    with pytest.raises(AssertionError, match="two spaces"):
        named_paths("pkg/\n  a.py b.py two modules\n")


def test_the_parser_reads_a_tree() -> None:
    block = (
        "pkg/\n"
        "  a.py b.py   two modules\n"
        "  sub/        a folder\n"
        "                continued, no name here\n"
        "    c.py      inside sub\n"
        "  d.py        back in pkg\n"
        "top/          another root\n"
    )
    assert named_paths(block) == [
        "pkg/",
        "pkg/a.py",
        "pkg/b.py",
        "pkg/sub/",
        "pkg/sub/c.py",
        "pkg/d.py",
        "top/",
    ]


PATHS = named_paths(layout_block(README.read_text()))


def test_the_layout_names_the_layers() -> None:
    assert {"aiocoord/_session/", "aiocoord/_recipes/_kit/", "aiocoord/testing/"} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS)
def test_every_name_in_the_layout_exists(path: str) -> None:
    target = ROOT / path
    if path.endswith("/"):
        assert target.is_dir(), f"README Layout names {path}, which is not a folder"
    else:
        assert target.is_file(), f"README Layout names {path}, which is not a file"


def test_every_recipe_family_is_in_the_layout() -> None:
    families = {
        f"aiocoord/_recipes/{p.name}/"
        for p in (ROOT / "aiocoord" / "_recipes").iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    assert families - set(PATHS) == set(), "recipe families missing from README Layout"
