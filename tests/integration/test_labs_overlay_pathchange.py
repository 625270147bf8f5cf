"""Labs 6 and 7 on Mininet in their CI size (``--quick``), asserting on what they measured:
path-change (the detector beats the rolling minimum on precision and finds the moves) and overlay
(the relay the rule picks carries more than the direct path; where the rule says no, the relay
would have carried less). Each holds the lab lock itself; the timeouts include waiting for it."""
from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration]


@pytest.mark.lab("path-change")
@pytest.mark.timeout(1500)
def test_path_change_detector_beats_the_rolling_minimum(tmp_path):
    from mininet_labs.path_change import PATHS, run

    res = run(tmp_path, quick=True, progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    assert len(res["moves"]) >= 3 and res["probes"]["answered"] >= 0.9 * res["probes"]["sent"]
    assert res["failed_moves"] == [], res["failed_moves"]  # every move verified on the new rules' counters
    rtts = [p["measured_rtt_ms"] for p in res["paths"]]
    # measured, not configured: the slower path adds about 2 x (6 - 2) ms of RTT
    assert rtts[1] - rtts[0] == pytest.approx(2 * (PATHS[1].delay_ms - PATHS[0].delay_ms), abs=1.5), rtts
    det, base = res["detector"], res["baseline"]
    assert det["recall"] >= 0.5, det
    assert det["precision"] > base["precision"], (det, base)
    assert json.loads((tmp_path / "results.json").read_text())["detector"]["precision"] == det["precision"]
    assert (tmp_path / "path_change.png").stat().st_size > 0


@pytest.mark.lab("overlay")
@pytest.mark.timeout(1500)
def test_overlay_relay_helps_where_the_rule_says_and_only_there(tmp_path):
    from mininet_labs.overlay import CASES, run

    res = run(tmp_path, quick=True, progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    helps, good = res["cases"]
    assert helps["name"] == "lossy_direct" and helps["relay_used"] and helps["relay"] == "r1", helps["rule"]
    assert helps["improvement_factor"] > 1.5, helps["throughput_mbps"]
    assert helps["rtt_ratio"] < 1 - 0.105 and helps["rule"]["r1"]["loss_cut"] >= 0.121
    assert good["name"] == "good_direct" and not good["relay_used"], good["rule"]
    assert good["improvement_factor"] < 1.0, good["throughput_mbps"]  # the rule was right to keep direct
    assert helps["rule_right"] and good["rule_right"]
    # the wires delay for real: measured direct RTT = 2 x the configured one-way delay (+ ~1 ms of switches)
    for case in (helps, good):
        want = 2 * CASES[case["name"]]["wd"][0]
        assert want <= case["paths"]["direct"]["rtt_ms"] <= want + 5.0, case["paths"]["direct"]
    assert res["improvement_factor"] == helps["improvement_factor"] and res["relay_used"] is True
    assert (tmp_path / "overlay.png").stat().st_size > 0
