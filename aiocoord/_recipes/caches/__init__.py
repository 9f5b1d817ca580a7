"""Caches: local views of a node, its children or a subtree, kept current by watches."""

from ._cache import CacheEvent as CacheEvent
from ._cache import CacheEventType as CacheEventType
from ._cache import CacheStats as CacheStats
from ._cache import ChildrenCache as ChildrenCache
from ._cache import KeptChildrenCache as KeptChildrenCache
from ._cache import NodeCache as NodeCache
from ._cache import TreeCache as TreeCache
