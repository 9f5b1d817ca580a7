"""Leader election: a latch and an election whose leader runs a body."""

from ._leader import LeaderElection as LeaderElection
from ._leader import LeaderLatch as LeaderLatch
