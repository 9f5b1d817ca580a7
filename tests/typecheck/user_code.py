"""Code as a strictly typed user writes it, checked by ``make lint`` (mypy --strict).

Each ``# type: ignore[...]`` marks a mistake the types must catch: with
``warn_unused_ignores`` (part of strict), an ignore that is no longer needed,
because the mistake type-checks, fails the check.
"""

from __future__ import annotations

import aiocoord


async def handler(client: aiocoord.Client) -> int:
    counter = aiocoord.AtomicLong(client, "/hits")
    result = await counter.increment(upper=5)
    if not result.succeeded and result.reason is aiocoord.AtomicFailure.BOUND:
        return -1
    await counter.increment(uper=5)  # type: ignore[call-arg]
    await counter.increment(upper="5")  # type: ignore[arg-type]
    aiocoord.AtomicInt(client, "/n", coalesce=True)  # type: ignore[call-arg]
    return result.post_value


async def locked(client: aiocoord.Client) -> str:
    lock = aiocoord.Mutex(client, "/lock")
    async with lock.hold():
        return "a return inside the block needs no return after it"


async def leased(client: aiocoord.Client) -> str:
    lease = aiocoord.Lease(client, "/lease", ttl=5, participant_id="me")
    async with lease.hold():
        return lease.participant_id


async def fenced(client: aiocoord.Client, lock: aiocoord.Mutex, lease: aiocoord.Lease) -> None:
    await client.transaction().guard(lock.fence(), lease.fence()).set("/x", b"1").commit()
    await client.create("/y", b"", ephemeral=True, sequential=True)
    await client.create("/y", b"", ephemral=True)  # type: ignore[call-arg]


def options() -> aiocoord.Client:
    return aiocoord.connect("127.0.0.1:2181", request_timeout=2.0, session_timeout=10)


def bad_options() -> aiocoord.Client:
    return aiocoord.connect("127.0.0.1:2181", request_timeout="2")  # type: ignore[arg-type]


async def queued(client: aiocoord.Client) -> str:
    raw = aiocoord.Queue(client, "/jobs")
    first: bytes = await raw.get()
    texts = aiocoord.PriorityQueue(client, "/texts", codec=aiocoord.Codec.UTF8)
    await texts.put("urgent", priority=-1)
    await texts.put(b"urgent")  # type: ignore[arg-type]
    await raw.put("not bytes")  # type: ignore[arg-type]
    async with texts.take() as text:
        return text + first.decode()


def kerberized() -> aiocoord.Client:
    # SaslKerberos is a SASL mechanism as connect() types it (a structural Protocol).
    return aiocoord.connect("zk1:2181", sasl=aiocoord.SaslKerberos(principal="svc@EXAMPLE.COM"))
