"""What the integration tests share besides fixtures: the ``started`` fixture's type
and the one bound on waiting for something to happen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiocoord

Started = Callable[..., Awaitable[list[aiocoord.Client]]]
"""The ``started`` fixture: ``await started(n, **client_kwargs)`` gives ``n`` started clients."""

EVENT_TIMEOUT = 30.0
"""How long a test waits for an event it caused or expects (a change seen, a leader
chosen, a member joined, a loss noticed) before it fails. Only a failing test waits
this long; it is generous because the machine running the suite may be shared."""
