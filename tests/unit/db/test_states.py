"""The transition table: every (from, to) pair is either allowed by the table or refused with a reason.

Only PROVISIONING leads to ACTIVE (the controller lit it); RESERVED never skips to ACTIVE; only a lit
reservation goes through RESTORING / DEGRADED."""
from __future__ import annotations

import itertools

import pytest

from app.db.states import (
    ACTIVE,
    CANCELLED,
    DEGRADED,
    FAILED,
    FINISHED,
    HELD,
    PROVISIONING,
    RESERVED,
    RESTORING,
    STATES,
    TRANSITIONS,
    IllegalTransition,
    check_transition,
)

EXPECTED = {
    (HELD, RESERVED), (HELD, CANCELLED), (HELD, FAILED),
    (RESERVED, PROVISIONING), (RESERVED, CANCELLED), (RESERVED, FAILED), (RESERVED, FINISHED),
    (PROVISIONING, ACTIVE), (PROVISIONING, FAILED), (PROVISIONING, CANCELLED), (PROVISIONING, FINISHED),
    (ACTIVE, FINISHED), (ACTIVE, CANCELLED), (ACTIVE, FAILED), (ACTIVE, RESTORING),
    (RESTORING, ACTIVE), (RESTORING, DEGRADED), (RESTORING, FINISHED), (RESTORING, CANCELLED), (RESTORING, FAILED),
    (DEGRADED, RESTORING), (DEGRADED, ACTIVE), (DEGRADED, FINISHED), (DEGRADED, CANCELLED), (DEGRADED, FAILED),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(STATES, STATES)))
def test_every_pair(current: str, target: str) -> None:
    if (current, target) in EXPECTED:
        assert check_transition(current, target) == target
    else:
        with pytest.raises(IllegalTransition) as err:
            check_transition(current, target)
        assert current in str(err.value) and target in str(err.value)


def test_final_states_have_no_exit() -> None:
    for s in (FINISHED, CANCELLED, FAILED):
        assert TRANSITIONS[s] == {}
        with pytest.raises(IllegalTransition, match="final state"):
            check_transition(s, HELD)


def test_unknown_state_refused() -> None:
    with pytest.raises(IllegalTransition):
        check_transition("BOGUS", HELD)
    with pytest.raises(IllegalTransition):
        check_transition(HELD, "BOGUS")
