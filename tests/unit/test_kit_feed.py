"""The kit's Feed on its own (no server): what a view's consumers see as it is
built, then stops."""

from __future__ import annotations

import asyncio

import pytest

from aiocoord import ClientClosedError, RecipeClosedError
from aiocoord._recipes._kit._feed import Feed
from aiocoord._recipes._kit._lifecycle import Lifecycle


async def _nothing(*_args: object) -> None:
    return None


def feed() -> Feed[str]:
    life = Lifecycle("view '/v'", _nothing, _nothing)
    return Feed(
        life, "events of '/v'", "/v", max_buffer=2, initialized_mark=lambda: "initialized",
        overflow=(lambda: "overflowed",),
    )  # fmt: skip


async def test_wait_initialized_answers_false_at_its_timeout_and_true_once_built() -> None:
    view = feed()
    assert await view.wait_initialized(timeout=0.01) is False
    waiting = asyncio.create_task(view.wait_initialized(timeout=5))
    await asyncio.sleep(0)
    view.built()
    assert await waiting is True
    assert await view.wait_initialized(timeout=0) is True


async def test_a_stream_made_after_the_build_starts_with_initialized() -> None:
    view = feed()
    early = view.events()
    view.publish("created")
    view.built()
    late = view.events()
    assert [await anext(early), await anext(early)] == ["created", "initialized"]
    assert await anext(late) == "initialized"


async def test_a_stopped_view_ends_streams_and_fails_waits_the_same_way() -> None:
    view = feed()
    stream = view.events()
    error = ClientClosedError("client closed")
    view.stop(error)
    with pytest.raises(ClientClosedError):
        await anext(stream)
    with pytest.raises(ClientClosedError):
        await anext(view.events())  # made after the stop: ended the same way
    with pytest.raises(ClientClosedError):
        await view.wait_initialized()


async def test_a_view_stopped_without_an_error_ends_streams_quietly() -> None:
    view = feed()
    view.stop(None)
    with pytest.raises(StopAsyncIteration):
        await anext(view.events())
    with pytest.raises(ClientClosedError):
        await view.wait_initialized()


async def test_a_closed_views_wait_raises_recipe_closed() -> None:
    life = Lifecycle("view '/v'", _nothing, _nothing)
    view: Feed[str] = Feed(life, "v", "/v", max_buffer=1, initialized_mark=str, overflow=())
    await life.aclose()
    with pytest.raises(RecipeClosedError):
        await view.wait_initialized()
