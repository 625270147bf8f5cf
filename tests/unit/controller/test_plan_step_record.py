"""A reservation's plan is kept in the plans table however long its steps' targets: the verify step of a
WAN reservation names every rule of its path (~500 characters over 9 hops), which the store refused
(``target must be a string of 1..256 characters``: the plan was lost and the error log filled, seen in the
WAN lab); the table keeps the target cut, the journal keeps it whole."""
from __future__ import annotations

import pytest

from app.controller.reservation_manager import TARGET_MAX, step_record
from app.db.migrate import open_migrated
from app.db.provisioning import ProvisioningError, ProvisioningStore

T = 1_900_000_000.0
LONG = "; ".join(f"s{i}/reservation#31 p30001 [in_port=1,vlan_vid=4216] -> 2" for i in range(9))


def _plan(steps: list[dict]) -> dict:
    return {"kind": "provision", "mode": "ordered", "state": "done", "error": None, "started_at": T,
            "finished_at": T + 1, "steps": steps}


def _step(target: str) -> dict:
    return {"id": "verify", "kind": "verify", "target": target, "deps": [], "started_at": T, "finished_at": T + 1,
            "ok": True, "error": None, "detail": {"rules": 18}}


def test_a_long_verify_target_is_kept_cut_and_the_plan_recorded(tmp_path) -> None:  # noqa: ANN001
    store = ProvisioningStore(open_migrated(f"sqlite:///{tmp_path / 'p.db'}"))
    assert len(LONG) > TARGET_MAX
    with pytest.raises(ProvisioningError, match="target must be a string of 1..256"):
        store.record_plan(_plan([{k: v for k, v in _step(LONG).items() if k != "detail"}]))
    kept = step_record(_step(LONG))
    assert len(kept["target"]) == TARGET_MAX and kept["target"].endswith("…") and LONG.startswith(kept["target"][:-1])
    assert "detail" not in kept
    assert store.record_plan(_plan([kept]))
    store.db.dispose()


def test_a_short_target_is_kept_as_it_is() -> None:
    assert step_record(_step("X:1<->3"))["target"] == "X:1<->3"
    assert step_record({"id": "a", "kind": "k", "target": None})["target"] is None
