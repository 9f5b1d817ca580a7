"""Partitions: splitting a set of items among the members of a group, one owner each."""

from ._partitioner import Assignment, Partitioner, PartitionItems

__all__ = ["Assignment", "PartitionItems", "Partitioner"]
