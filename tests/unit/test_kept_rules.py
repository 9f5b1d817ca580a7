"""The kept node's pure rules: what to do with a node found at our path, and
which node is ours to delete."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiocoord._recipes._kit._kept import Foreign, Found, is_ours, on_node_exists

SESSION = 0x1001
EARLIER = 0x0FFF
OTHER = 0x2002

sessions = st.integers(min_value=1, max_value=2**63 - 1)
owners = st.one_of(st.just(0), sessions)
policies = st.sampled_from(list(Foreign))


@pytest.mark.parametrize(
    ("owner", "ephemeral", "foreign", "expected"),
    [
        # An ephemeral node of ours: our session's is adopted (a lost create reply)...
        (SESSION, True, Foreign.REFUSE, Found.ADOPT),
        (SESSION, True, Foreign.REPLACE, Found.ADOPT),
        # ...an earlier session's is waited out, or replaced at once...
        (EARLIER, True, Foreign.REFUSE, Found.WAIT_OUT),
        (EARLIER, True, Foreign.REPLACE, Found.REPLACE),
        # ...another's, or a persistent node where we keep an ephemeral one, per policy.
        (OTHER, True, Foreign.REFUSE, Found.REFUSE),
        (OTHER, True, Foreign.REPLACE, Found.REPLACE),
        (0, True, Foreign.REFUSE, Found.REFUSE),
        (0, True, Foreign.REPLACE, Found.REPLACE),
        # A persistent node where we keep one names no owner: adopted, as Curator does.
        (0, False, Foreign.REFUSE, Found.ADOPT),
        (0, False, Foreign.REPLACE, Found.ADOPT),
        # An ephemeral one where we keep a persistent node is never adopted.
        (SESSION, False, Foreign.REFUSE, Found.REPLACE),
        (EARLIER, False, Foreign.REFUSE, Found.WAIT_OUT),
        (OTHER, False, Foreign.REFUSE, Found.REFUSE),
        (OTHER, False, Foreign.REPLACE, Found.REPLACE),
    ],
)
def test_what_a_found_node_calls_for(
    owner: int, ephemeral: bool, foreign: Foreign, expected: Found
) -> None:
    found = on_node_exists(owner, SESSION, {EARLIER}, ephemeral=ephemeral, foreign=foreign)
    assert found is expected


@given(owner=owners, session=sessions, earlier=st.sets(sessions), ephemeral=st.booleans())
def test_a_refusing_node_never_replaces_and_a_replacing_one_never_refuses_or_waits(
    owner: int, session: int, earlier: set[int], ephemeral: bool
) -> None:
    refusing = on_node_exists(owner, session, earlier, ephemeral=ephemeral, foreign=Foreign.REFUSE)
    replacing = on_node_exists(
        owner, session, earlier, ephemeral=ephemeral, foreign=Foreign.REPLACE
    )
    if refusing is not Found.REPLACE:
        assert refusing in (Found.ADOPT, Found.WAIT_OUT, Found.REFUSE)
    else:
        assert owner == session and not ephemeral  # only our own node of the wrong kind
    assert replacing in (Found.ADOPT, Found.REPLACE)
    # The policy matters only for a node that is not ours now.
    if refusing is Found.ADOPT:
        assert replacing is Found.ADOPT


@given(owner=owners, session=sessions, earlier=st.sets(sessions), foreign=policies)
def test_only_the_right_kind_of_node_is_adopted(
    owner: int, session: int, earlier: set[int], foreign: Foreign
) -> None:
    """An ephemeral node is adopted only from our current session; a persistent one
    only if it is persistent: never one that would vanish with another session."""
    if on_node_exists(owner, session, earlier, ephemeral=True, foreign=foreign) is Found.ADOPT:
        assert owner == session
    if on_node_exists(owner, session, earlier, ephemeral=False, foreign=foreign) is Found.ADOPT:
        assert owner == 0


@given(owner=sessions, session=sessions, earlier=st.sets(sessions), ephemeral=st.booleans())
def test_only_our_own_earlier_sessions_are_waited_out(
    owner: int, session: int, earlier: set[int], ephemeral: bool
) -> None:
    found = on_node_exists(owner, session, earlier, ephemeral=ephemeral, foreign=Foreign.REFUSE)
    assert (found is Found.WAIT_OUT) == (owner in earlier and owner != session)


@given(owner=owners, session=sessions, same_data=st.booleans())
def test_an_ephemeral_node_is_ours_only_in_its_own_session(
    owner: int, session: int, same_data: bool
) -> None:
    assert is_ours(owner, session, ephemeral=True, same_data=same_data) == (owner == session)


@given(owner=owners, session=sessions, same_data=st.booleans())
def test_a_persistent_node_is_ours_only_if_persistent_and_holding_our_data(
    owner: int, session: int, same_data: bool
) -> None:
    assert is_ours(owner, session, ephemeral=False, same_data=same_data) == (
        owner == 0 and same_data
    )
