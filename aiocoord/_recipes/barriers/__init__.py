"""Barriers: a gate all wait at, and a double barrier that enters and leaves together."""

from ._barrier import Barrier as Barrier
from ._barrier import DoubleBarrier as DoubleBarrier
from ._barrier import DoubleBarrierEntry as DoubleBarrierEntry
