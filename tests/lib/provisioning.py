"""What a controller records when it lights a reservation, for tests that need an ACTIVE one.

:func:`installation` derives, from a reservation's stored path, the circuit a controller would light
(the adaptation ports at both ends, the path's XCONs) and a packet rule at each end switch;
:func:`light` records it through :class:`app.db.provisioning.ProvisioningStore` as the controller does.
"""
from __future__ import annotations

from typing import Any

from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningStore

COOKIE = 0x4D4C544500000100  # the controller's cookie prefix; kind 0x00, id 1


def installation(path: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(circuit, rules)`` for a path: the circuit (None on a packet-only path) between the first and
    last adaptation port, over the path's XCONs (Fig. 2's A → X → Z → C: ``A:3``–``C:1``), and a rule
    at each end switch sending into it."""
    adaptation = [e.split(":", 1)[1] for e in path["edges"] if e.startswith("adaptation:")]
    if not adaptation:
        return None, [{"switch": sw, "table": 0, "priority": 300, "cookie": COOKIE + n, "match": {"eth_type": 2048},
                       "actions": [{"output": 1}]} for n, sw in enumerate((path["nodes"][0], path["nodes"][-1]))]
    a_end, z_end = adaptation[0].split("-")[0], adaptation[-1].split("-")[0]
    xcons = [(a.split(":")[0], int(a.split(":")[1]), int(b.split(":")[1])) for a, b in path["xcons"]]
    circuit = {"a_end": a_end, "z_end": z_end, "capacity": 10.0, "xcons": xcons}
    rules = [{"switch": end.split(":")[0], "table": 0, "priority": 300, "cookie": COOKIE + n,
              "match": {"eth_type": 2048, "vlan_vid": 100}, "actions": [{"output": int(end.split(":")[1])}]}
             for n, end in enumerate((a_end, z_end))]
    return circuit, rules


def light(url: str, res_id: int, now: float) -> bool:
    """Do what the controller does for a due reservation: record its installation, PROVISIONING → ACTIVE."""
    store = ProvisioningStore(open_migrated(url))
    try:
        orders = {o.id: o for o in store.due(now)}
        if res_id not in orders:
            raise AssertionError(f"reservation {res_id} is not due at {now}: {sorted(orders)}")
        circuit, rules = installation(orders[res_id].path or {})
        return store.mark_active(res_id, circuit, rules, now)
    finally:
        store.db.dispose()
