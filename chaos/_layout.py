"""Where each recipe lives in ZooKeeper during a run, and the run's shared settings."""

from __future__ import annotations

import signal

__all__ = [
    "ACQUIRE_TIMEOUT",
    "AQUEUE",
    "AQUEUE_TAKEN",
    "BARRIER",
    "BARRIER_TIMEOUT",
    "CHILDREN_CACHED",
    "COUNTER_BOUND",
    "COUNTER_BOUNDED",
    "COUNTER_INT",
    "COUNTER_INT_LOCK",
    "COUNTER_LONG",
    "DQUEUE",
    "DQUEUE_TAKEN",
    "DUMP_STACKS",
    "GATE",
    "GATE_WAIT",
    "GROUP",
    "IDQUEUE",
    "LATCH",
    "LEADER",
    "LEADERSHIP",
    "LEASE",
    "LEASE_TTL",
    "MULTI_A",
    "MULTI_B",
    "MUTEX",
    "MUTEX_LOCAL",
    "MUTEX_LOCAL_BOUND",
    "NODE_CACHED",
    "OP_BOUND",
    "ORPHAN_PATHS",
    "PQUEUE",
    "QUEUE",
    "QUEUE_TAKEN",
    "ROOT",
    "RWLOCK",
    "SEMAPHORE",
    "SEMAPHORE_LEASES",
    "SEMMUTEX",
    "SESSION_TIMEOUT",
    "SHARDED",
    "SHARDED_SHARDS",
    "SHARDED_UPPER",
    "SHARED_COUNT",
    "STRAY_CANCEL",
    "TOLD_BOUND",
    "TREE",
    "WITNESS",
]

ROOT = "/chaos"
DUMP_STACKS = signal.SIGUSR1
"""Sent by the controller to a worker it is about to kill for not answering: the worker
writes every thread's stack to its stderr (``faulthandler``)."""
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
NODE_CACHED = f"{TREE}/a/0"
"""The node every worker's NodeCache follows (the tree writers create, set and delete it)."""
CHILDREN_CACHED = f"{TREE}/b"
"""The node whose children every worker's ChildrenCache follows."""
LATCH = f"{ROOT}/latch"
LEADERSHIP = f"{ROOT}/leadership"
"""An election with hand-overs, resigns and priority joins (``_leaders.py``)."""
SEMMUTEX = f"{ROOT}/semmutex"
MUTEX_LOCAL = f"{ROOT}/mutex-local"
"""A Mutex(local_handoff=MUTEX_LOCAL_BOUND) each worker's tasks share."""
MUTEX_LOCAL_BOUND = 3
MULTI_A = f"{ROOT}/multi/a"
MULTI_B = f"{ROOT}/multi/b"
"""The two Mutex paths a MultiLock takes, in this order (MULTI_B is also taken alone)."""
LEASE = f"{ROOT}/lease"
LEASE_TTL = 3.0
"""The Lease's time to live (renewed every third of it while held)."""
SHARED_COUNT = f"{ROOT}/shared-count"
SHARDED = f"{ROOT}/sharded"
SHARDED_UPPER = 4
"""The sharded counter stays within [0, SHARDED_UPPER]."""
SHARDED_SHARDS = 3
PQUEUE = f"{ROOT}/pqueue"
DQUEUE = f"{ROOT}/dqueue"
DQUEUE_TAKEN = f"{DQUEUE}-taken"
IDQUEUE = f"{ROOT}/idqueue"
GROUP = f"{ROOT}/group"
GATE = f"{ROOT}/gate"
"""Plain barriers: ``GATE/<worker>``, set and removed by that worker alone, waited on by all."""
WITNESS = f"{ROOT}/witness"
"""Plain sequential creates: every acknowledged one must survive (ZooKeeper's own promise)."""

ORPHAN_PATHS = (
    MUTEX,
    MUTEX_LOCAL,
    RWLOCK,
    f"{SEMAPHORE}/leases",
    f"{SEMAPHORE}/locks",
    LEADER,
    COUNTER_INT_LOCK,
    BARRIER,
    AQUEUE_TAKEN,
    QUEUE_TAKEN,
    LATCH,
    LEADERSHIP,
    f"{SEMMUTEX}/leases",
    f"{SEMMUTEX}/locks",
    MULTI_A,
    MULTI_B,
    LEASE,
    DQUEUE_TAKEN,
    GROUP,
)
"""Recipe paths whose children are contender, lease, latch, group-member, barrier or
taken-marker nodes: all of them must be gone once every worker has stopped (a Lease
node a failed release left behind lapses by its TTL and the server sweeps it)."""

SESSION_TIMEOUT = 4.0
"""Every worker session's timeout: short, so that pauses longer than it are quick."""
ACQUIRE_TIMEOUT = 5.0
"""How long a holder waits for a lock, lease or leadership before giving up."""
BARRIER_TIMEOUT = 8.0
"""How long a barrier participant waits to enter, or for the others to leave."""
GATE_WAIT = 3.0
"""How long a waiter waits on a plain barrier before giving up."""
TOLD_BOUND = 3 * SESSION_TIMEOUT
"""How long a holder the fenced store turned away waits for the recipe to report the loss."""
OP_BOUND = 45.0
"""No operation may take longer (the watchdog): one that does counts as a hang."""
STRAY_CANCEL = "stray CancelledError"
"""The error a worker records for an operation that raised CancelledError while
nobody had cancelled its task (its ``cancelling()`` count was 0)."""
DRIVER_BUG = "driver bug"
"""The error a worker records for an operation that raised what no recipe call
should raise (a TypeError, AttributeError, ...): a driver calling an API that
changed. Recorded as unknown, such operations would pass every check vacuously."""
BUG_ERRORS: tuple[type[Exception], ...] = (
    TypeError,
    AttributeError,
    NameError,
    AssertionError,
    KeyError,
    IndexError,
)
"""What a worker reports as a driver bug rather than an unknown outcome."""
