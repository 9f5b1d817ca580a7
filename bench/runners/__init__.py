"""One runner per library, each run as its own pinned subprocess by bench/run.py."""
