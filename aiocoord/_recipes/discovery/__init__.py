"""Service discovery: Curator's curator-x-discovery layout and JSON, asyncio-native."""

from ._discovery import ServiceDiscovery as ServiceDiscovery
from ._instance import ServiceInstance as ServiceInstance
from ._instance import ServiceType as ServiceType
