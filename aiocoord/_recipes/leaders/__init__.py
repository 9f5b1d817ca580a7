"""Leader election: a latch and an election whose leader runs a body, and an
observer that follows who leads without taking part."""

from ._balance import LeaderElectionGroup as LeaderElectionGroup
from ._leaders import LeaderElection as LeaderElection
from ._leaders import LeaderLatch as LeaderLatch
from ._observe import LeaderObserver as LeaderObserver
