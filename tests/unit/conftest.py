"""What the unit tests share: clients that are never started.

Nothing a never-started client is asked can be sent (a request raises instead),
so a test on one proves its checks run before any I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import aiocoord

UNREACHABLE = "127.0.0.1:1"
"""Where a never-started client points (it never connects anyway)."""


@pytest.fixture
def new_client() -> Callable[..., aiocoord.Client]:
    """``new_client(**options)``: a never-started client with ``connect()``'s options."""

    def make(**options: Any) -> aiocoord.Client:
        return aiocoord.connect(UNREACHABLE, **options)

    return make


@pytest.fixture
def client(new_client: Callable[..., aiocoord.Client]) -> aiocoord.Client:
    """A never-started client: constructing it (and recipes on it) sends nothing."""
    return new_client()
