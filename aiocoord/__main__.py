"""``python -m aiocoord``: the ``aiocoord`` command line (see ``aiocoord --help``)."""

from ._cli import main

raise SystemExit(main())
