"""The kit's Pulse: a fire wakes the tasks waiting then, and no later one."""

from __future__ import annotations

import asyncio

from aiocoord._recipes._kit._pulse import Pulse


async def test_a_fire_wakes_every_waiter_of_the_moment_once() -> None:
    pulse = Pulse()
    waiters = [asyncio.create_task(pulse.wait()) for _ in range(3)]
    await asyncio.sleep(0)  # each waiter now holds the pulse's event
    pulse.fire()
    await asyncio.wait_for(asyncio.gather(*waiters), 5)


async def test_a_wait_begun_after_a_fire_waits_for_the_next_one() -> None:
    pulse = Pulse()
    pulse.fire()  # nobody waiting: nothing is left set for later
    late = asyncio.create_task(pulse.wait())
    await asyncio.sleep(0)
    assert not late.done()
    pulse.fire()
    await asyncio.wait_for(late, 5)


async def test_a_woken_waiter_that_has_not_run_yet_is_not_lost_by_a_second_fire() -> None:
    # The reason for swapping events rather than set() then clear().
    pulse = Pulse()
    waiter = asyncio.create_task(pulse.wait())
    await asyncio.sleep(0)
    pulse.fire()
    pulse.fire()
    await asyncio.wait_for(waiter, 5)
