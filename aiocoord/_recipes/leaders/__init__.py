"""Leader election: a latch and an election whose leader runs a body, and an
observer that follows who leads without taking part."""

from ._balance import LeaderElectionGroup as LeaderElectionGroup
from ._election import LeaderElection as LeaderElection
from ._latch import LeaderLatch as LeaderLatch
from ._observe import LeaderObserver as LeaderObserver
