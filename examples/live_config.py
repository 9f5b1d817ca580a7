"""Live configuration with a TreeCache, on an embedded ZooKeeper (or AIOCOORD_ZK).

A "checkout" service keeps its settings under ``/config/checkout``, one node
per setting. It holds them in a TreeCache: reading a setting is a local
dictionary lookup, never a round trip, and the cache's events tell the
service when to reload. An operator (another client: another process, in real
life) changes a setting, adds one and removes one; the service applies each
change as it happens, without a restart. After a reconnection or a new
session the cache repairs its view and says RESYNCED, so the service reloads
everything then.

Run: python examples/live_config.py

Expected output:

    service: started with currency=EUR max_items=20 timeout_ms=500
    operator: set max_items to 50
    service: reloaded max_items: 20 -> 50
    operator: added new_cart = on
    service: reloaded new_cart: (unset) -> on
    operator: removed timeout_ms
    service: reloaded timeout_ms: 500 -> (unset)
    service: settings now currency=EUR max_items=50 new_cart=on
    the service's view equals what ZooKeeper holds: True
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable

import aiocoord
from aiocoord import CacheEventType, TreeCache
from aiocoord.testing import ZooKeeperServer

CONFIG = "/config/checkout"


def setting(name: str) -> str:
    return f"{CONFIG}/{name}"


@contextlib.asynccontextmanager
async def zookeeper() -> AsyncIterator[str]:
    if os.environ.get("AIOCOORD_ZK"):
        yield os.environ["AIOCOORD_ZK"]
        return
    async with ZooKeeperServer() as server:
        yield server.connect_string


class CheckoutService:
    """Reads its settings from the cache; reloads one when its node changes."""

    def __init__(self, cache: TreeCache) -> None:
        self.cache = cache
        self.settings: dict[str, str] = {}
        self.reloaded: asyncio.Queue[str] = asyncio.Queue()

    def load_all(self) -> None:
        self.settings = {}
        for name in self.cache.children(CONFIG):
            node = self.cache.get(setting(name))
            if node is not None and node[0] is not None:
                self.settings[name] = node[0].decode()

    def show(self) -> str:
        return " ".join(f"{name}={value}" for name, value in sorted(self.settings.items()))

    async def follow(self, events: aiocoord.ChangeStream[aiocoord.CacheEvent]) -> None:
        async for event in events:
            if event.type in (CacheEventType.INITIALIZED, CacheEventType.RESYNCED):
                self.load_all()  # the whole view: after a start, an outage or an overflow
                continue
            name = event.path.rpartition("/")[2]
            if event.path != setting(name):
                continue  # the settings' parent node itself
            before = self.settings.get(name, "(unset)")
            if event.type is CacheEventType.DELETED or event.data is None:
                self.settings.pop(name, None)
            else:
                self.settings[name] = event.data.decode()
            after = self.settings.get(name, "(unset)")
            print(f"service: reloaded {name}: {before} -> {after}")
            self.reloaded.put_nowait(name)


async def main() -> None:
    async with zookeeper() as hosts:
        namespace = f"/aiocoord-live-config-demo-{os.getpid()}"
        try:
            async with (
                aiocoord.connect(hosts, namespace=namespace) as service_client,
                aiocoord.connect(hosts, namespace=namespace) as operator,
            ):
                for name, value in (
                    ("currency", "EUR"),
                    ("max_items", "20"),
                    ("timeout_ms", "500"),
                ):
                    await operator.create(setting(name), value.encode(), make_parents=True)

                async with TreeCache(service_client, CONFIG) as cache:
                    service = CheckoutService(cache)
                    service.load_all()
                    print(f"service: started with {service.show()}")
                    # Subscribed before any change: the service misses none.
                    follower = asyncio.create_task(service.follow(cache.events()))

                    async def change(what: str, action: Awaitable[object]) -> None:
                        print(f"operator: {what}")
                        await action
                        await asyncio.wait_for(service.reloaded.get(), 10)

                    await change("set max_items to 50", operator.set(setting("max_items"), b"50"))
                    await change("added new_cart = on", operator.create(setting("new_cart"), b"on"))
                    await change("removed timeout_ms", operator.delete(setting("timeout_ms")))
                    print(f"service: settings now {service.show()}")

                    on_server = {
                        name: (await operator.get(setting(name)))[0]
                        for name in await operator.children(CONFIG)
                    }
                    in_view = {
                        name: cache.get(setting(name))[0]  # type: ignore[index]
                        for name in cache.children(CONFIG)
                    }
                    print(f"the service's view equals what ZooKeeper holds: {on_server == in_view}")
                await follower  # closing the cache ended its events
        finally:
            async with aiocoord.connect(hosts) as cleaner:
                await cleaner.delete_recursive(namespace)


if __name__ == "__main__":
    asyncio.run(main())
