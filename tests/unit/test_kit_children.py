"""The kit's read_children on a fake client: its one retry rule and its one error rule."""

from __future__ import annotations

from typing import Any

import pytest

from aiocoord import ConnectionLossError, NoAuthError, NoNodeError, RetryNTimes, Stat
from aiocoord._recipes._kit._children import read_children, read_children_and


def stat(version: int) -> Stat:
    return Stat(1, 1, 0, 0, version, 0, 0, 0, 0, 0, 1)


class FakePipeline:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.paths: list[str] = []

    def get(self, path: str) -> FakePipeline:
        self.paths.append(path)
        return self

    async def execute(self) -> list[Any]:
        self.client.batches.append(self.paths)
        answers = self.client.answers.pop(0)
        return [answers[path] for path in self.paths]


class FakeClient:
    """Lists ``names`` (or raises them, when an error); answers each batch of
    reads from the next mapping of ``answers``."""

    retry_policy = RetryNTimes(3, 0)
    session_timeout = 1.0
    session_id = 1

    def __init__(self, listings: list[Any], answers: list[dict[str, Any]]) -> None:
        self.listings = listings
        self.answers = answers
        self.batches: list[list[str]] = []

    async def children(self, path: str) -> list[str]:
        listing = self.listings.pop(0)
        if isinstance(listing, Exception):
            raise listing
        return list(listing)

    def pipeline(self) -> FakePipeline:
        return FakePipeline(self)


def client(listings: list[Any], answers: list[dict[str, Any]]) -> Any:
    return FakeClient(listings, answers)


async def test_a_child_gone_since_the_listing_is_left_out() -> None:
    fake = client([["b", "a"]], [{"/p/a": (b"A", stat(1)), "/p/b": NoNodeError("/p/b")}])
    found = await read_children(fake, "/p", select=sorted)
    assert [(c.name, c.path, c.data) for c in found] == [("a", "/p/a", b"A")]
    assert fake.batches == [["/p/a", "/p/b"]]  # in the order select gave


async def test_any_other_failed_read_is_raised_never_dropped() -> None:
    fake = client([["a", "b"]], [{"/p/a": (b"A", stat(1)), "/p/b": NoAuthError("/p/b")}])
    with pytest.raises(NoAuthError):
        await read_children(fake, "/p")


async def test_connection_loss_reads_the_listing_and_the_data_again() -> None:
    lost = ConnectionLossError(sent=True)
    fake = client(
        [["a"], ["a", "b"]],
        [{"/p/a": lost}, {"/p/a": (b"A", stat(1)), "/p/b": (b"B", stat(1))}],
    )
    found = await read_children(fake, "/p")
    assert [c.name for c in found] == ["a", "b"]


async def test_a_given_listing_is_used_once_and_a_retry_lists_again() -> None:
    lost = ConnectionLossError(sent=True)
    fake = client([["x"]], [{"/p/old": lost}, {"/p/x": (b"X", stat(1))}])
    found = await read_children(fake, "/p", listing=["old"])
    assert [c.name for c in found] == ["x"] and not fake.listings


async def test_a_missing_parent_is_empty_and_sends_no_reads() -> None:
    fake = client([NoNodeError("/p")], [])
    assert await read_children(fake, "/p") == []
    assert fake.batches == []


async def test_other_nodes_ride_in_the_same_round_trip() -> None:
    fake = client([["a"]], [{"/p/a": (b"A", stat(1)), "/items": NoNodeError("/items")}])
    found, also = await read_children_and(fake, "/p", ["/items"])
    assert [c.name for c in found] == ["a"] and also == [None]
    assert fake.batches == [["/p/a", "/items"]]
