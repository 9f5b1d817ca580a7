"""Where each recipe lives in ZooKeeper during a run, and the run's shared settings."""

from __future__ import annotations

__all__ = [
    "ACQUIRE_TIMEOUT",
    "AQUEUE",
    "AQUEUE_TAKEN",
    "BARRIER",
    "BARRIER_TIMEOUT",
    "COUNTER_BOUND",
    "COUNTER_BOUNDED",
    "COUNTER_INT",
    "COUNTER_INT_LOCK",
    "COUNTER_LONG",
    "LEADER",
    "MUTEX",
    "OP_BOUND",
    "ORPHAN_PATHS",
    "QUEUE",
    "QUEUE_TAKEN",
    "ROOT",
    "RWLOCK",
    "SEMAPHORE",
    "SEMAPHORE_LEASES",
    "SESSION_TIMEOUT",
    "TOLD_BOUND",
    "TREE",
    "WITNESS",
]

ROOT = "/chaos"
MUTEX = f"{ROOT}/mutex"
RWLOCK = f"{ROOT}/rwlock"
SEMAPHORE = f"{ROOT}/semaphore"
SEMAPHORE_LEASES = 2
LEADER = f"{ROOT}/leader"
COUNTER_LONG = f"{ROOT}/counter/long"
COUNTER_INT = f"{ROOT}/counter/int"
COUNTER_INT_LOCK = f"{ROOT}/counter/int-lock"
COUNTER_BOUNDED = f"{ROOT}/counter/bounded"
COUNTER_BOUND = 3
"""The bounded counter stays within [0, COUNTER_BOUND]."""
BARRIER = f"{ROOT}/barrier"
QUEUE = f"{ROOT}/queue"
QUEUE_TAKEN = f"{QUEUE}-taken"
AQUEUE = f"{ROOT}/aqueue"
AQUEUE_TAKEN = f"{AQUEUE}-taken"
TREE = f"{ROOT}/tree"
WITNESS = f"{ROOT}/witness"
"""Plain sequential creates: every acknowledged one must survive (ZooKeeper's own promise)."""

ORPHAN_PATHS = (
    MUTEX,
    RWLOCK,
    f"{SEMAPHORE}/leases",
    f"{SEMAPHORE}/locks",
    LEADER,
    COUNTER_INT_LOCK,
    BARRIER,
    AQUEUE_TAKEN,
    QUEUE_TAKEN,
)
"""Recipe paths whose children are contender, lease, barrier or taken-marker nodes:
all of them must be gone once every worker has stopped."""

SESSION_TIMEOUT = 4.0
"""Every worker session's timeout: short, so that pauses longer than it are quick."""
ACQUIRE_TIMEOUT = 5.0
"""How long a holder waits for a lock, lease or leadership before giving up."""
BARRIER_TIMEOUT = 8.0
"""How long a barrier participant waits to enter, or for the others to leave."""
TOLD_BOUND = 3 * SESSION_TIMEOUT
"""How long a holder the fenced store turned away waits for the recipe to report the loss."""
OP_BOUND = 45.0
"""No operation may take longer (the watchdog): one that does counts as a hang."""
