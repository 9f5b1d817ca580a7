"""Distributed queues: FIFO, priority, delay and id queues, and takes that hold an item."""

from ._queue import DelayQueue as DelayQueue
from ._queue import IdQueue as IdQueue
from ._queue import PriorityQueue as PriorityQueue
from ._queue import Queue as Queue
from ._rules import ItemCodec as ItemCodec
from ._take import QueueTake as QueueTake
