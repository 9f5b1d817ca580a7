"""One checker for "never more holders at once than the recipe allows".

Every test of a lock, a semaphore, a leader or a queue take records its
holders here, and asserts on what the checker saw: the recipe must keep its
holders apart however the test drives it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Hashable, Iterator


class Exclusion:
    """Records who holds what, and every entry that broke the rule.

    The rule, per resource ``key``: at most ``limit`` exclusive holders at once;
    shared holders (readers) may be in together, but never with an exclusive one.
    """

    def __init__(self, limit: int = 1) -> None:
        self.limit = limit
        self.inside: dict[Hashable, list[tuple[object, bool]]] = collections.defaultdict(list)
        """Who holds each resource now, with whether they share it."""
        self.entries = 0
        self.peak = 0
        """The most holders of one resource at once (shared ones included)."""
        self.violations: list[list[object]] = []
        """For each entry that broke the rule: who was in, the newcomer last."""
        self._changed = asyncio.Event()

    @contextlib.contextmanager
    def hold(
        self, who: object = None, *, key: Hashable = None, shared: bool = False
    ) -> Iterator[None]:
        """Record ``who`` holding ``key`` (shared or not) for the ``with`` block."""
        holders = self.inside[key]
        if shared:
            broken = any(not other_shares for _other, other_shares in holders)
        else:
            broken = sum(not other_shares for _other, other_shares in holders) >= self.limit
            broken = broken or any(other_shares for _other, other_shares in holders)
        if broken:
            self.violations.append([other for other, _ in holders] + [who])
        entry = (who, shared)
        holders.append(entry)
        self.entries += 1
        self.peak = max(self.peak, len(holders))
        self._wake()
        try:
            yield
        finally:
            holders.remove(entry)
            self._wake()

    async def wait_inside(self, count: int, *, key: Hashable = None) -> None:
        """Return once ``count`` holders of ``key`` are in at the same time."""
        while len(self.inside[key]) < count:
            await self._changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def assert_kept(self, entries: int | None = None) -> None:
        """No entry broke the rule (and, if given, exactly ``entries`` were made)."""
        assert self.violations == [], f"holders overlapped: {self.violations}"
        if entries is not None:
            assert self.entries == entries, (self.entries, entries)
