"""What every recipe family shares, and the only door to it: families import from
here, never from the kit's modules (tests/unit/test_import_graph.py keeps it so).

- arguments: a recipe's path, generated participant ids, default node data;
- contenders and their pure rules: who holds, whom to watch (Curator's lock driver);
- holds: the one hold scope, loss monitoring, task ownership, telemetry hold records;
- a kept node: a recipe's own node, made again after expiry (Curator's PersistentNode);
- reading children with their data, with one retry rule and one error rule;
- the start-and-close lifecycle and its ``Resource`` base (anyio's AsyncResource);
- waits (a deadline, a node going away, re-reading after a reconnection), a pulse,
  the event feed of a view, and following a subtree.
"""

from ._args import default_node_data, generated_participant_id, recipe_path
from ._children import read_children, read_children_and
from ._contenders import (
    LOCK_NAME,
    READ_LOCK_NAME,
    WRITE_LOCK_NAME,
    Contender,
    Decision,
    Rule,
    mutex_rule,
    read_rule,
    sequence_key,
    sort_contenders,
)
from ._feed import Feed
from ._follow import Rereads, follow_subtree
from ._holding import (
    Hold,
    HoldContext,
    LockHolding,
    LossMonitor,
    NotifyingHold,
    acquiring_task,
    current_task,
    end_record,
    native_cancel_pending,
    not_owner,
    start_record,
    task_owned_acquire,
    wait_lost_within,
)
from ._kept import Foreign, KeptNode, KeptState
from ._lifecycle import Lifecycle, Phase, Resource
from ._participants import Participant
from ._pulse import Pulse
from ._waits import Deadline, Reconnects, wait_change, wait_gone

__all__ = [
    "LOCK_NAME",
    "READ_LOCK_NAME",
    "WRITE_LOCK_NAME",
    "Contender",
    "Deadline",
    "Decision",
    "Feed",
    "Foreign",
    "Hold",
    "HoldContext",
    "KeptNode",
    "KeptState",
    "Lifecycle",
    "LockHolding",
    "LossMonitor",
    "NotifyingHold",
    "Participant",
    "Phase",
    "Pulse",
    "Reconnects",
    "Rereads",
    "Resource",
    "Rule",
    "acquiring_task",
    "current_task",
    "default_node_data",
    "end_record",
    "follow_subtree",
    "generated_participant_id",
    "mutex_rule",
    "native_cancel_pending",
    "not_owner",
    "read_children",
    "read_children_and",
    "read_rule",
    "recipe_path",
    "sequence_key",
    "sort_contenders",
    "start_record",
    "task_owned_acquire",
    "wait_change",
    "wait_gone",
    "wait_lost_within",
]
