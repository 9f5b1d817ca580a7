"""ServiceProvider keeps its candidates between picks (#26): every change that may
change them is seen by the next pick (a cache event, a noted error, a window's
end, requests in flight), also with several tasks picking at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

import pytest
from _kit import EVENT_TIMEOUT, Started

import aiocoord
from aiocoord import (
    ProviderStrategy,
    ServiceCacheEventType,
    ServiceDiscovery,
    ServiceInstance,
    ServiceProvider,
)

pytestmark = pytest.mark.timeout(60)


BASE = "/services"

EVERY_ONE_SEEN = (ProviderStrategy.ROUND_ROBIN, ProviderStrategy.LEAST_OUTSTANDING)
"""Strategies whose 60 picks over a few instances certainly reach each one."""


def api(instance_id: str, **changes: object) -> ServiceInstance:
    fields: dict[str, object] = {"name": "api", "id": instance_id, "address": "10.0.0.7"}
    fields.update(port=8080, registration_time=1)
    fields.update(changes)
    return ServiceInstance(**fields)  # type: ignore[arg-type]


async def seen(
    provider: ServiceProvider, change: Awaitable[object], kind: ServiceCacheEventType
) -> None:
    """Make ``change`` and wait for the provider's cache to show it (its event)."""
    events = provider.cache.events()
    async with events, asyncio.timeout(EVENT_TIMEOUT):
        await change
        async for event in events:
            if event.type is kind:
                return


async def until(moment: float) -> None:
    """Sleep until ``time.monotonic()`` (the loop's clock too) has passed ``moment``:
    a loop's timer may fire up to its clock resolution early, far under the margin."""
    await asyncio.sleep(max(0.0, moment - time.monotonic()) + 0.005)
    assert time.monotonic() >= moment


def picked(provider: ServiceProvider, strategy: ProviderStrategy, expected: set[str]) -> None:
    ids = [i.id for i in provider.instances()]
    assert ids == sorted(expected)
    picks = {provider.pick().id for _ in range(60)}  # type: ignore[union-attr]
    if strategy in EVERY_ONE_SEEN:
        assert picks == expected
    else:
        assert picks <= expected and picks


@pytest.mark.parametrize("strategy", list(ProviderStrategy))
async def test_the_next_pick_sees_each_cache_event(
    started: Started, strategy: ProviderStrategy
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        for x in "ab":
            await writer.register(api(x))
        async with reader.provider("api", strategy=strategy) as provider:
            picked(provider, strategy, {"a", "b"})  # the candidates are kept from here
            await seen(provider, writer.register(api("c")), ServiceCacheEventType.ADDED)
            picked(provider, strategy, {"a", "b", "c"})
            await seen(
                provider, writer.update(api("b", enabled=False)), ServiceCacheEventType.UPDATED
            )
            picked(provider, strategy, {"a", "c"})
            await seen(provider, writer.unregister(api("a")), ServiceCacheEventType.REMOVED)
            picked(provider, strategy, {"c"})
            await seen(provider, writer.update(api("b")), ServiceCacheEventType.UPDATED)
            picked(provider, strategy, {"b", "c"})
            await seen(provider, writer.unregister(api("b")), ServiceCacheEventType.REMOVED)
            await seen(provider, writer.unregister(api("c")), ServiceCacheEventType.REMOVED)
            assert provider.pick() is None and provider.instances() == []


async def test_sticky_moves_when_its_instance_is_disabled(started: Started) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        for x in "abc":
            await writer.register(api(x))
        async with reader.provider("api", strategy=ProviderStrategy.STICKY) as provider:
            first = provider.pick()
            assert first is not None and {provider.pick() for _ in range(10)} == {first}
            gone = api(first.id, enabled=False)
            await seen(provider, writer.update(gone), ServiceCacheEventType.UPDATED)
            second = provider.pick()
            assert second is not None and second.id != first.id
            assert {provider.pick() for _ in range(10)} == {second}


@pytest.mark.parametrize("strategy", list(ProviderStrategy))
async def test_a_noted_error_takes_an_instance_out_and_its_window_brings_it_back(
    started: Started, strategy: ProviderStrategy
) -> None:
    a, b = await started(2)
    window = 0.3
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        for x in "abc":
            await writer.register(api(x))
        async with reader.provider(
            "api", strategy=strategy, error_threshold=2, down_timeout=window
        ) as provider:
            picked(provider, strategy, {"a", "b", "c"})
            provider.note_error(api("b"))
            # On the down policy's clock, read after b's first error: its window ends by then.
            b_back = time.monotonic() + window
            picked(provider, strategy, {"a", "b", "c"})  # one error: under the threshold
            provider.note_error(api("b"))
            picked(provider, strategy, {"a", "c"})
            provider.note_error(api("a"))
            a_back = time.monotonic() + window
            provider.note_error(api("a"))
            picked(provider, strategy, {"c"})
            # Waiting on the clock is what is tested: the windows end, nothing else
            # happens, and nothing but the clock tells the provider.
            await until(b_back)
            ids = {i.id for i in provider.instances()}
            assert {"b", "c"} <= ids <= {"a", "b", "c"}  # a's window began later
            assert provider.errors(api("b")) == 0
            await until(a_back)
            picked(provider, strategy, {"a", "b", "c"})


async def test_least_outstanding_follows_requests_in_flight_and_new_instances(
    started: Started,
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        for x in "abc":
            await writer.register(api(x))
        strategy = ProviderStrategy.LEAST_OUTSTANDING
        async with reader.provider("api", strategy=strategy) as provider:
            release = asyncio.Event()
            holding: list[str] = []
            held = asyncio.Condition()

            async def request() -> None:
                async with provider.using(timeout=0) as instance:
                    async with held:
                        holding.append(instance.id)
                        held.notify_all()
                    await release.wait()

            async def holding_at_least(n: int) -> None:
                async with held, asyncio.timeout(EVENT_TIMEOUT):
                    await held.wait_for(lambda: len(holding) >= n)

            tasks = [asyncio.create_task(request()) for _ in range(6)]
            await holding_at_least(6)
            assert sorted(holding) == ["a", "a", "b", "b", "c", "c"]
            assert provider.pick() is not None
            await seen(provider, writer.register(api("d")), ServiceCacheEventType.ADDED)
            # The new instance has none in flight: the next two requests go to it,
            # then each of the four takes one more in turn.
            tasks += [asyncio.create_task(request()) for _ in range(2)]
            await holding_at_least(8)
            assert holding[6:] == ["d", "d"]
            tasks += [asyncio.create_task(request()) for _ in range(4)]
            await holding_at_least(12)
            assert sorted(holding[8:]) == ["a", "b", "c", "d"]
            release.set()
            await asyncio.gather(*tasks)
            assert all(provider.outstanding(api(x)) == 0 for x in "abcd")
            assert sorted(provider.pick().id for _ in range(4)) == list("abcd")  # type: ignore[union-attr]


@pytest.mark.parametrize("strategy", list(ProviderStrategy))
async def test_tasks_picking_at_once_see_every_change(
    started: Started, strategy: ProviderStrategy
) -> None:
    a, b = await started(2)
    async with ServiceDiscovery(a, BASE) as writer, ServiceDiscovery(b, BASE) as reader:
        await writer.register(api("stable"))
        async with reader.provider("api", strategy=strategy) as provider:
            live = {"stable"}
            wrong: list[str] = []
            done = asyncio.Event()

            async def worker() -> None:
                while not done.is_set():
                    async with provider.using(timeout=EVENT_TIMEOUT) as instance:
                        # Every pick is of an instance the cache's view holds, enabled.
                        if instance.id not in live:
                            wrong.append(instance.id)
                        await asyncio.sleep(0)

            def follow(event: aiocoord.ServiceCacheEvent) -> None:
                if event.instance is None:
                    return
                if event.type is ServiceCacheEventType.REMOVED or not event.instance.enabled:
                    live.discard(event.instance.id)
                else:
                    live.add(event.instance.id)

            provider.cache.add_listener(follow)
            workers = [asyncio.create_task(worker()) for _ in range(8)]
            for n in range(8):
                await seen(provider, writer.register(api(f"c-{n}")), ServiceCacheEventType.ADDED)
                await seen(
                    provider,
                    writer.update(api(f"c-{n}", enabled=False)),
                    ServiceCacheEventType.UPDATED,
                )
                await seen(
                    provider, writer.unregister(api(f"c-{n}")), ServiceCacheEventType.REMOVED
                )
            done.set()
            await asyncio.gather(*workers)
            provider.cache.remove_listener(follow)
            assert wrong == []
            assert live == {"stable"} and [i.id for i in provider.instances()] == ["stable"]
            assert provider.outstanding(api("stable")) == 0
