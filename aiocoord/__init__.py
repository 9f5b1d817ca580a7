"""aiocoord: asyncio-native distributed coordination on Apache ZooKeeper."""

import logging as _logging
from types import FunctionType as _FunctionType

from ._exceptions import APIError as APIError
from ._exceptions import ArgumentTypeError as ArgumentTypeError
from ._exceptions import AuthFailedError as AuthFailedError
from ._exceptions import BadArgumentsError as BadArgumentsError
from ._exceptions import BadVersionError as BadVersionError
from ._exceptions import BarrierBrokenError as BarrierBrokenError
from ._exceptions import BoundExceededError as BoundExceededError
from ._exceptions import ClientClosedError as ClientClosedError
from ._exceptions import ConnectionLossError as ConnectionLossError
from ._exceptions import CoordinationError as CoordinationError
from ._exceptions import CorruptValueError as CorruptValueError
from ._exceptions import CounterOverflowError as CounterOverflowError
from ._exceptions import DataInconsistencyError as DataInconsistencyError
from ._exceptions import DataTooLargeError as DataTooLargeError
from ._exceptions import DeadlockError as DeadlockError
from ._exceptions import DetachedAcquireError as DetachedAcquireError
from ._exceptions import EphemeralOnLocalSessionError as EphemeralOnLocalSessionError
from ._exceptions import HoldLostError as HoldLostError
from ._exceptions import InvalidACLError as InvalidACLError
from ._exceptions import InvalidArgumentError as InvalidArgumentError
from ._exceptions import InvalidConnectStringError as InvalidConnectStringError
from ._exceptions import InvalidPathError as InvalidPathError
from ._exceptions import LeadershipLostError as LeadershipLostError
from ._exceptions import LeaseHeldError as LeaseHeldError
from ._exceptions import LockLostError as LockLostError
from ._exceptions import MarshallingError as MarshallingError
from ._exceptions import MemberIdInUseError as MemberIdInUseError
from ._exceptions import MissingExtraError as MissingExtraError
from ._exceptions import NewConfigNoQuorumError as NewConfigNoQuorumError
from ._exceptions import NoAuthError as NoAuthError
from ._exceptions import NoChildrenForEphemeralsError as NoChildrenForEphemeralsError
from ._exceptions import NoConnectionError as NoConnectionError
from ._exceptions import NodeExistsError as NodeExistsError
from ._exceptions import NoNodeError as NoNodeError
from ._exceptions import NotEmptyError as NotEmptyError
from ._exceptions import NotOwnerError as NotOwnerError
from ._exceptions import NotReadOnlyError as NotReadOnlyError
from ._exceptions import NoWatcherError as NoWatcherError
from ._exceptions import OperationTimeoutError as OperationTimeoutError
from ._exceptions import OutcomeUnknownError as OutcomeUnknownError
from ._exceptions import OwnershipError as OwnershipError
from ._exceptions import PartitionLostError as PartitionLostError
from ._exceptions import QueueEmptyError as QueueEmptyError
from ._exceptions import QuotaExceededError as QuotaExceededError
from ._exceptions import RecipeClosedError as RecipeClosedError
from ._exceptions import ReconfigDisabledError as ReconfigDisabledError
from ._exceptions import ReconfigInProgressError as ReconfigInProgressError
from ._exceptions import RolledBackError as RolledBackError
from ._exceptions import RuntimeInconsistencyError as RuntimeInconsistencyError
from ._exceptions import SaslRequiredError as SaslRequiredError
from ._exceptions import ServerOperationTimeoutError as ServerOperationTimeoutError
from ._exceptions import ServerRequestTimeoutError as ServerRequestTimeoutError
from ._exceptions import SessionError as SessionError
from ._exceptions import SessionExpiredError as SessionExpiredError
from ._exceptions import SessionMovedError as SessionMovedError
from ._exceptions import SystemZooKeeperError as SystemZooKeeperError
from ._exceptions import TakeLostError as TakeLostError
from ._exceptions import ThrottledError as ThrottledError
from ._exceptions import TLSCertificateError as TLSCertificateError
from ._exceptions import TTLNodesDisabledError as TTLNodesDisabledError
from ._exceptions import UnimplementedError as UnimplementedError
from ._exceptions import UnsupportedEventLoopError as UnsupportedEventLoopError
from ._exceptions import ZooKeeperError as ZooKeeperError
from ._recipes._kit import HoldContext as HoldContext
from ._recipes._kit import Participant as Participant
from ._recipes.barriers import Barrier as Barrier
from ._recipes.barriers import DoubleBarrier as DoubleBarrier
from ._recipes.barriers import DoubleBarrierEntry as DoubleBarrierEntry
from ._recipes.caches import CacheEvent as CacheEvent
from ._recipes.caches import CacheEventType as CacheEventType
from ._recipes.caches import CacheStats as CacheStats
from ._recipes.caches import ChildrenCache as ChildrenCache
from ._recipes.caches import NodeCache as NodeCache
from ._recipes.caches import TreeCache as TreeCache
from ._recipes.counters import AtomicBytes as AtomicBytes
from ._recipes.counters import AtomicFailure as AtomicFailure
from ._recipes.counters import AtomicInt as AtomicInt
from ._recipes.counters import AtomicLong as AtomicLong
from ._recipes.counters import AtomicStats as AtomicStats
from ._recipes.counters import AtomicValue as AtomicValue
from ._recipes.counters import CounterShard as CounterShard
from ._recipes.counters import PromotedToLock as PromotedToLock
from ._recipes.counters import ShardedCounter as ShardedCounter
from ._recipes.counters import SharedCount as SharedCount
from ._recipes.counters import VersionedValue as VersionedValue
from ._recipes.discovery import DiscoveryTransport as DiscoveryTransport
from ._recipes.discovery import ProviderStrategy as ProviderStrategy
from ._recipes.discovery import ServiceCache as ServiceCache
from ._recipes.discovery import ServiceCacheEvent as ServiceCacheEvent
from ._recipes.discovery import ServiceCacheEventType as ServiceCacheEventType
from ._recipes.discovery import ServiceDiscovery as ServiceDiscovery
from ._recipes.discovery import ServiceInstance as ServiceInstance
from ._recipes.discovery import ServiceProvider as ServiceProvider
from ._recipes.discovery import ServiceType as ServiceType
from ._recipes.groups import GroupMember as GroupMember
from ._recipes.leaders import LeaderElection as LeaderElection
from ._recipes.leaders import LeaderElectionGroup as LeaderElectionGroup
from ._recipes.leaders import LeaderLatch as LeaderLatch
from ._recipes.leaders import LeaderObserver as LeaderObserver
from ._recipes.locks import Lease as Lease
from ._recipes.locks import Lockable as Lockable
from ._recipes.locks import MultiLock as MultiLock
from ._recipes.locks import Mutex as Mutex
from ._recipes.locks import ReadWriteLock as ReadWriteLock
from ._recipes.locks import Semaphore as Semaphore
from ._recipes.locks import SemaphoreLease as SemaphoreLease
from ._recipes.locks import SemaphoreMutex as SemaphoreMutex
from ._recipes.partitions import Assignment as Assignment
from ._recipes.partitions import Partitioner as Partitioner
from ._recipes.partitions import PartitionItems as PartitionItems
from ._recipes.queues import DelayQueue as DelayQueue
from ._recipes.queues import IdQueue as IdQueue
from ._recipes.queues import ItemCodec as ItemCodec
from ._recipes.queues import PriorityQueue as PriorityQueue
from ._recipes.queues import Queue as Queue
from ._recipes.queues import QueueTake as QueueTake
from ._session._batch import Fence as Fence
from ._session._batch import Pipeline as Pipeline
from ._session._batch import Transaction as Transaction
from ._session._client import Client as Client
from ._session._client import connect as connect
from ._session._kerberos import SaslKerberos as SaslKerberos
from ._session._options import ClientOptions as ClientOptions
from ._session._requests import ACLProvider as ACLProvider
from ._session._requests import CreateOptions as CreateOptions
from ._session._retry import BoundedExponentialBackoff as BoundedExponentialBackoff
from ._session._retry import ExponentialBackoff as ExponentialBackoff
from ._session._retry import RetryForever as RetryForever
from ._session._retry import RetryNTimes as RetryNTimes
from ._session._retry import RetryPolicy as RetryPolicy
from ._session._retry import RetryUntilElapsed as RetryUntilElapsed
from ._session._sasl import SaslDigest as SaslDigest
from ._session._sasl import SaslExchange as SaslExchange
from ._session._sasl import SaslMechanism as SaslMechanism
from ._session._state import ConnectionState as ConnectionState
from ._session._state import ErrorPolicy as ErrorPolicy
from ._session._state import SessionErrorPolicy as SessionErrorPolicy
from ._session._state import StandardErrorPolicy as StandardErrorPolicy
from ._session._stream import ChangeStream as ChangeStream
from ._session._watch import PersistentWatch as PersistentWatch
from ._session._watch import Watch as Watch
from ._telemetry import Telemetry as Telemetry
from ._types import ACL as ACL
from ._types import CREATOR_ALL_ACL as CREATOR_ALL_ACL
from ._types import OPEN_ACL_UNSAFE as OPEN_ACL_UNSAFE
from ._types import READ_ACL_UNSAFE as READ_ACL_UNSAFE
from ._types import Codec as Codec
from ._types import EventType as EventType
from ._types import Perm as Perm
from ._types import Stat as Stat
from ._types import WatchEvent as WatchEvent
from ._types import digest_id as digest_id

__version__ = "0.1.0.dev0"

__all__ = [
    "ACL",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "ACLProvider",
    "APIError",
    "ArgumentTypeError",
    "Assignment",
    "AtomicBytes",
    "AtomicFailure",
    "AtomicInt",
    "AtomicLong",
    "AtomicStats",
    "AtomicValue",
    "AuthFailedError",
    "BadArgumentsError",
    "BadVersionError",
    "Barrier",
    "BarrierBrokenError",
    "BoundExceededError",
    "BoundedExponentialBackoff",
    "CacheEvent",
    "CacheEventType",
    "CacheStats",
    "ChangeStream",
    "ChildrenCache",
    "Client",
    "ClientClosedError",
    "ClientOptions",
    "Codec",
    "ConnectionLossError",
    "ConnectionState",
    "CoordinationError",
    "CorruptValueError",
    "CounterOverflowError",
    "CounterShard",
    "CreateOptions",
    "DataInconsistencyError",
    "DataTooLargeError",
    "DeadlockError",
    "DelayQueue",
    "DetachedAcquireError",
    "DiscoveryTransport",
    "DoubleBarrier",
    "DoubleBarrierEntry",
    "EphemeralOnLocalSessionError",
    "ErrorPolicy",
    "EventType",
    "ExponentialBackoff",
    "Fence",
    "GroupMember",
    "HoldContext",
    "HoldLostError",
    "IdQueue",
    "InvalidACLError",
    "InvalidArgumentError",
    "InvalidConnectStringError",
    "InvalidPathError",
    "ItemCodec",
    "LeaderElection",
    "LeaderElectionGroup",
    "LeaderLatch",
    "LeaderObserver",
    "LeadershipLostError",
    "Lease",
    "LeaseHeldError",
    "LockLostError",
    "Lockable",
    "MarshallingError",
    "MemberIdInUseError",
    "MissingExtraError",
    "MultiLock",
    "Mutex",
    "NewConfigNoQuorumError",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoConnectionError",
    "NoNodeError",
    "NoWatcherError",
    "NodeCache",
    "NodeExistsError",
    "NotEmptyError",
    "NotOwnerError",
    "NotReadOnlyError",
    "OperationTimeoutError",
    "OutcomeUnknownError",
    "OwnershipError",
    "Participant",
    "PartitionItems",
    "PartitionLostError",
    "Partitioner",
    "Perm",
    "PersistentWatch",
    "Pipeline",
    "PriorityQueue",
    "PromotedToLock",
    "ProviderStrategy",
    "Queue",
    "QueueEmptyError",
    "QueueTake",
    "QuotaExceededError",
    "ReadWriteLock",
    "RecipeClosedError",
    "ReconfigDisabledError",
    "ReconfigInProgressError",
    "RetryForever",
    "RetryNTimes",
    "RetryPolicy",
    "RetryUntilElapsed",
    "RolledBackError",
    "RuntimeInconsistencyError",
    "SaslDigest",
    "SaslExchange",
    "SaslKerberos",
    "SaslMechanism",
    "SaslRequiredError",
    "Semaphore",
    "SemaphoreLease",
    "SemaphoreMutex",
    "ServerOperationTimeoutError",
    "ServerRequestTimeoutError",
    "ServiceCache",
    "ServiceCacheEvent",
    "ServiceCacheEventType",
    "ServiceDiscovery",
    "ServiceInstance",
    "ServiceProvider",
    "ServiceType",
    "SessionError",
    "SessionErrorPolicy",
    "SessionExpiredError",
    "SessionMovedError",
    "ShardedCounter",
    "SharedCount",
    "StandardErrorPolicy",
    "Stat",
    "SystemZooKeeperError",
    "TLSCertificateError",
    "TTLNodesDisabledError",
    "TakeLostError",
    "Telemetry",
    "ThrottledError",
    "Transaction",
    "TreeCache",
    "UnimplementedError",
    "UnsupportedEventLoopError",
    "VersionedValue",
    "Watch",
    "WatchEvent",
    "ZooKeeperError",
    "connect",
    "digest_id",
]

# Public classes and functions say they live here (in reprs, docs and pickles),
# not in the private module that defines them.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type | _FunctionType) and _value.__module__.startswith(__name__ + "."):
        _value.__module__ = __name__
del _name, _value, _FunctionType

# What the library logs (a lost lock at WARNING, state changes at INFO) goes
# where the application's logging configuration sends it, and nowhere (not to
# stderr through logging's last resort) when the application configures none.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())
