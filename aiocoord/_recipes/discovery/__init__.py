"""Service discovery: Curator's curator-x-discovery layout and JSON, asyncio-native."""

from ._cache import ServiceCache as ServiceCache
from ._cache import ServiceCacheEvent as ServiceCacheEvent
from ._cache import ServiceCacheEventType as ServiceCacheEventType
from ._discovery import ServiceDiscovery as ServiceDiscovery
from ._http import DiscoveryTransport as DiscoveryTransport
from ._instance import ServiceInstance as ServiceInstance
from ._instance import ServiceType as ServiceType
from ._provider import ServiceProvider as ServiceProvider
from ._strategies import ProviderStrategy as ProviderStrategy
