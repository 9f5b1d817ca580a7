"""Group membership: who is in a group, as ephemeral nodes."""

from ._group import GroupMember as GroupMember
