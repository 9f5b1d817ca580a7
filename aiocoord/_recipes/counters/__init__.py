"""Counters: atomic values (optimistic compare-and-set, falling back to a lock),
shared counts and sharded bounded counters."""

from ._adds import AtomicFailure as AtomicFailure
from ._adds import AtomicStats as AtomicStats
from ._adds import AtomicValue as AtomicValue
from ._counter import AtomicBytes as AtomicBytes
from ._counter import AtomicInt as AtomicInt
from ._counter import AtomicLong as AtomicLong
from ._counter import PromotedToLock as PromotedToLock
from ._escrow import CounterShard as CounterShard
from ._escrow import ShardedCounter as ShardedCounter
from ._shared_count import SharedCount as SharedCount
from ._shared_count import VersionedValue as VersionedValue
