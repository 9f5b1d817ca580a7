"""Locks: mutex, read-write lock, semaphores, TTL leases and several locks at once."""

from ._lease import Lease as Lease
from ._multilock import Lockable as Lockable
from ._multilock import MultiLock as MultiLock
from ._mutex import Mutex as Mutex
from ._mutex import ReadWriteLock as ReadWriteLock
from ._semaphore import Semaphore as Semaphore
from ._semaphore import SemaphoreLease as SemaphoreLease
from ._semaphore import SemaphoreMutex as SemaphoreMutex
