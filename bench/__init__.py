"""aiocoord's benchmark suite: ``python -m bench.run`` (see bench/README.md)."""
