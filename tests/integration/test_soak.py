"""Lab ``soak`` as a CI check (docs/operations.md): three controllers for 80 s (``--quick`` runs 2 minutes,
the lab 10), reservations lit and released back to back, an elephant offloaded and released every 40 s,
the leader killed every 40 s.
Every reservation is lit, every elephant offloaded and released, nothing is left on the switches, and
the longest-lived controller's memory and file descriptors stay flat (bounded growth; the figures are
recorded)."""
from __future__ import annotations

import pytest

from tests.lib.ha_lab import run_quick

pytestmark = pytest.mark.integration


@pytest.mark.lab("soak")
@pytest.mark.timeout(1200)  # includes waiting for the network lock
def test_controllers_under_churn_leave_nothing_and_do_not_grow(tmp_path):
    res = run_quick("soak", tmp_path, minutes=80 / 60, kill_every=40.0)
    assert res["kills"] >= 1 and res["cycles"] >= 5, res
    assert res["lost_reservations"] == 0, res
    assert res["leftover"]["clean"] and not res["leftover"]["lit"], res["leftover"]
    assert res["elephants"], res  # one every 40 s, the first after 20 s
    assert res["elephants_offloaded"] == res["elephants_released"] == len(res["elephants"]), res["elephants"]
    assert all(e["clean"] for e in res["elephants"]) and res["elephants_left"] == 0, res["elephants"]
    g = res["longest_lived_growth"]
    assert g is not None, res["processes"].keys()
    assert g["fds"] <= 10, g  # a leak would grow with every reservation and takeover
    assert g["rss_mb"] <= 60.0, g
    assert (tmp_path / "soak.png").stat().st_size > 10_000
