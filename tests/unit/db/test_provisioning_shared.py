"""Grooming (issue 28): several reservations record the same circuit; ``xcons_in_use`` tells a release
which XCONs other installations still hold, so a shared circuit goes only with its last reservation."""
from __future__ import annotations

from app.db.states import PROVISIONING
from tests.unit.db.test_provisioning import CIRCUIT, RULES, T, World, w  # noqa: F401

ASKED = [("X", 1, 3), ("Z", 3, 2), ("Y", 1, 2)]  # the circuit's XCONs, and one nobody holds


def test_a_shared_circuit_is_in_use_until_its_last_installation_is_released(w: World) -> None:  # noqa: F811
    a, b = w.reservation(PROVISIONING), w.reservation(PROVISIONING)
    assert w.store.mark_active(a, [CIRCUIT], RULES, T) and w.store.mark_active(b, [CIRCUIT], RULES, T)
    assert w.store.xcons_in_use(ASKED, a) == [("X", 1, 3), ("Z", 3, 2)]  # b's record of the same circuit
    assert w.store.xcons_in_use(ASKED, b) == [("X", 1, 3), ("Z", 3, 2)]
    assert w.store.xcons_in_use(ASKED, a, b) == []  # a unit of both restored together: nobody else holds it
    assert w.store.xcons_in_use([("Z", 2, 3), ("Q", 1, 2)], a) == [("Z", 3, 2)]  # what was asked, either way round
    assert w.store.xcons_in_use([], a) == []
    w.cancel(a)
    assert w.store.mark_released(a, T + 1)
    assert w.store.xcons_in_use(ASKED, b) == []  # a's record is released: b is the last one on it
    assert w.store.xcons_in_use(ASKED, a) == [("X", 1, 3), ("Z", 3, 2)]
