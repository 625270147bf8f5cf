"""Lab ``controller-failover --quick`` (docs/operations.md): three controllers elected through a private
etcd on the Fig. 2 testbed; the leader SIGKILLed, the next SIGSTOPped for 10 s. A new leader takes over
each time (every switch confirms its role), a lit reservation's probe loses nothing, a reservation
starting during the takeover is lit by the new leader, the thawed ex-leader changes nothing, the
switches hold no orphaned or duplicated XCON or reservation rule, and an elephant offloaded just before
a third leader's SIGKILL is adopted by the next one (its XCONs and steer rules once, its record under
the new epoch) and released once after it ended, leaving nothing; last, a leader SIGKILLed in the middle
of a hop-by-hop ``POST /circuit``: the next leader finishes or rolls back that plan, once, and the
bridges hold the whole circuit or nothing. Times are recorded, not asserted."""
from __future__ import annotations

import json

import pytest

from tests.lib.ha_lab import run_quick

pytestmark = pytest.mark.integration


@pytest.mark.lab("controller-failover")
@pytest.mark.timeout(1200)  # includes waiting for the network lock
def test_a_killed_and_a_frozen_leader_are_replaced_without_loss_or_leftovers(tmp_path):
    res = run_quick("controller_failover", tmp_path)
    first, second, third = res["leaders"]
    assert second != first and third != second, res["leaders"]
    assert res["takeover_s"] is not None and res["freeze_takeover_s"] is not None, res
    assert res["probe_lost"] == 0, (res["probe"], res["probe_freeze"])
    assert res["lit_after_start_s"] is not None, res
    assert set(res["states_before_cancel"].values()) == {"ACTIVE"}, res["states_before_cancel"]
    assert res["thawed"]["master"] is False, res["thawed"]
    assert res["deposed_change"]["refused"] is True and res["deposed_change"]["status"] == 503, res["deposed_change"]
    assert res["refused_writes"] >= 1, res["thawed"]  # that change, refused whole at the one send path
    for key in ("duplicate_xcons", "orphan_xcons", "duplicate_rules", "orphan_rules"):
        assert res[key] == 0, res["audit"]
    assert res["audit"]["lit"] == res["audit"]["expected"], res["audit"]
    assert res["released"] is True
    el = res["elephant"]  # offloaded just before a SIGKILL: adopted by the next leader, released once after it ended
    assert el.get("offloaded_s") is not None, el.get("decisions")
    assert el["running_at_takeover"] and el["te_takeover"] is not None, el
    assert el["adopted"] is True, el
    assert el["duplicate_xcons"] == 0 and el["duplicate_steer_rules"] == 0, el
    # the data plane carried it across the takeover without a controller: a steer rule rewritten or lost
    # would restart a counter or lose most of it. The exact loss is a recorded figure, not asserted:
    # 0 of 1,900 in the lab's runs, 14 of 1,319 in a fresh-clone CI run (userspace OVS refreshes rule
    # counters only every 500 ms, and the elephant shares the one forwarding core with everything else)
    steered = el["steered"]
    assert steered["into_circuit"] > 0 and 0.9 * steered["into_circuit"] <= steered["out_of_circuit"], steered
    print(f"elephant lost across the takeover: {el['elephant_lost']} of {steered['into_circuit']}")
    assert el["offload_released_s"] is not None and el["offload_released_s"] >= 0, el  # after the end, not before
    assert el["releases"] == 1, el
    assert el["clean"] is True, el["left"]
    mp = res["mid_plan"]  # POST /circuit cut in half by a SIGKILL: finished or rolled back by the next leader, once
    assert mp["first_hop_seen"] and 0 < len(mp["xcons_at_kill"]) < 8, mp  # the leader died mid-plan
    assert mp["outcome"] in ("done", "rolled_back") and mp["plan_records"] == 1, mp
    assert mp["record"]["claimed_epoch"] > mp["record"]["epoch"], mp["record"]  # by a newer leader
    assert mp["consistent"] is True and mp["clean"] is True, mp  # the whole circuit once, or nothing
    assert json.loads((tmp_path / "results.json").read_text())["takeover_s"] == res["takeover_s"]
    assert (tmp_path / "controller_failover.png").stat().st_size > 10_000
