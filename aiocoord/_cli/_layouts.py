"""The recipes' znode names (aiocoord's and Curator's are the same), as the CLI
recognises them. The recipes keep theirs private; these mirror them, and the
CLI's tests check them against nodes the recipes make."""

from __future__ import annotations

import re

__all__ = [
    "BARRIER_MEMBER",
    "COUNTER_QUEUE",
    "CURATOR_QUEUE_ITEM",
    "LATCH_NODE",
    "LEADER_TAGGED",
    "LEASE_NODE",
    "LOCK_MARKERS",
    "LOCK_NODE",
    "PARTITION_CLAIM",
    "PARTITION_MEMBER",
    "PARTITION_TOKEN",
    "QUEUE_ITEM",
    "QUEUE_TAKEN_SUFFIX",
    "READY_NODE",
    "RW_MARKERS",
    "RW_NODE",
    "SEMAPHORE_CHILDREN",
    "SEMAPHORE_LEASES",
    "SEMAPHORE_LOCKS",
    "sequence",
]

_PROTECTED = r"(?:_c_[0-9a-fA-F-]{36}-)?"
"""Curator's protection prefix, which aiocoord's contenders carry too."""

_LEADER_TAG = r"(?:aio(?:\.-?\d+)?-)?"
"""aiocoord's leaders tag their nodes (``aio-``, ``aio.<priority>-``) before the lock name."""

LOCK_NODE = re.compile(_PROTECTED + _LEADER_TAG + r"lock-(\d{10})$")
"""Mutex (InterProcessMutex) and LeaderElection (LeaderSelector) contenders."""
LOCK_MARKERS = ("lock-",)
RW_NODE = re.compile(_PROTECTED + r"(__READ__|__WRIT__)(\d{10})$")
"""ReadWriteLock (InterProcessReadWriteLock) contenders."""
RW_MARKERS = ("__READ__", "__WRIT__")
SEMAPHORE_LEASES = "leases"
SEMAPHORE_LOCKS = "locks"
SEMAPHORE_CHILDREN = frozenset({SEMAPHORE_LEASES, SEMAPHORE_LOCKS})
"""Semaphore (InterProcessSemaphoreV2): lease nodes under one, a mutex under the other."""
LEASE_NODE = re.compile(_PROTECTED + r"lease-(\d{10})$")
"""A semaphore's leases (ephemeral) and a Lease's TTL nodes (persistent)."""
LATCH_NODE = re.compile(_PROTECTED + _LEADER_TAG + r"latch-(\d{10})$")
"""LeaderLatch participants."""
LEADER_TAGGED = re.compile(r"(?:^|-)aio(?:\.-?\d+)?-(?:latch|lock)-\d{10}$")
"""aiocoord's LeaderLatch and LeaderElection participants (a Mutex's nodes carry no
tag): tells an aiocoord election's queue from a lock's."""
BARRIER_MEMBER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""DoubleBarrier participants (one UUID each)."""
COUNTER_QUEUE = "combining"
"""Where contended adds to an AtomicLong queue: a child of the counter's node."""
READY_NODE = "ready"
"""DoubleBarrier's "everyone is in" marker."""
QUEUE_ITEM = re.compile(r"qn-(\d{10})$")
"""Queue (SimpleDistributedQueue) items."""
CURATOR_QUEUE_ITEM = re.compile(r"queue-.*(\d{10})$")
"""PriorityQueue, DelayQueue, IdQueue (Curator's DistributedQueue family) items."""
PARTITION_MEMBER = "member-"
"""Partitioner members: ephemeral ``member-<id>`` holding ``{"id": ..., "weight": ...}``."""
PARTITION_CLAIM = "claim-"
"""Partitioner claims: ephemeral ``claim-<item>`` holding the owner's id."""
PARTITION_TOKEN = "token-"
"""Partitioner tokens: persistent ``token-<item>``, its version bumped by each claim and release."""
QUEUE_TAKEN_SUFFIX = "-taken"
"""Where a queue's takes keep their markers, by default: ``<queue path>-taken``."""


def sequence(name: str) -> str:
    """What a sequential node sorts by: its last ten digits."""
    return name[-10:]
