"""A Griffe extension for the API pages: aiocoord's docstrings use a little reST
(``:class:`Mutex```, ``text::`` before a literal block, ``Value\\ s``); turn it
into the Markdown that mkdocstrings renders.

Roles become code spans rather than links, so a reference to a private helper
can never break the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|exc|mod|data|obj|const):`~?([^`]+)`")
_LITERAL_INTRO = re.compile(r"::\n", re.M)


def to_markdown(text: str) -> str:
    """``text`` with reST roles, literal-block markers and escaped spaces made Markdown."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).lstrip('.')}`", text)
    text = _LITERAL_INTRO.sub(":\n", text)
    return text.replace("`\\ ", "`")


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
