"""``make chaos``: every aiocoord recipe driven together through a seeded schedule of
real faults on a 3-node ZooKeeper ensemble, with every invariant checked afterwards
from the recorded history (see ``chaos/README.md``).

Run as ``python -m chaos [--seed N] [--duration S] [--workers N] [--out DIR]``.
"""
