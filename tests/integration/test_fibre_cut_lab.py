"""Lab ``fibre-cut --quick`` on the Fig. 2 testbed (docs/failures.md): a lit reservation probed at
1 packet/ms; first, in revertive mode, a fibre of its path cut and repaired: restored, then back on its
original path after the hold; then two fibres on its path cut in turn. Each cut must be detected from the ports (loss of
light propagates to the packet ports), the reservation restored on a verified path around the cut
(its stored path changed, a restorations row), nothing half-installed after the repairs. Then a 1+1
reservation whose working fibre is cut: the probe comes back before the controller sends anything
(the fast-failover group), and the controller protects it again. Then an elephant the TE loop
offloaded: its circuit's fibre cut, the offload released. Times are recorded, not asserted (a busy
machine)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.lab("fibre-cut")
@pytest.mark.timeout(1200)  # includes waiting for the network lock
def test_cut_fibres_are_detected_and_the_reservation_is_restored_around_them(tmp_path):
    from mininet_labs.fibre_cut import run

    res = run(tmp_path, quick=True, progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    assert len(res["events"]) == 3, res["events"]
    unprotected, protected = res["events"][:2], res["events"][2]
    for ev in unprotected:
        cut = ev["fault"].split()[1]  # "X:3-Z:3"
        assert ev["settled"] == "restored", ev
        assert ev["detect_s"] is not None and ev["detect_s"] >= 0, ev
        assert ev["verified_s"] is not None and ev["verified_s"] > ev["detect_s"], ev
        assert ev["restored_s"] is not None and ev["restored_s"] >= 0, ev  # probe packets came back
        assert f"optical:{cut}" in ev["old_path"] and f"optical:{cut}" not in ev["new_path"], ev
        assert [s["state"] for s in ev["states"]][:1] == ["RESTORING"] and ev["states"][-1]["state"] == "ACTIVE"
        assert ev["probe_lost"] < ev["probe_sent"], ev
    assert unprotected[0]["fault"] != unprotected[1]["fault"]  # the second cut hit the restored path
    assert res["leftover"]["extra"] == [] and res["leftover"]["missing"] == [], res["leftover"]
    assert res["final_state"] == "ACTIVE"
    assert [r["outcome"] for r in res["restorations"]] == ["restored", "restored", "reverted", "restored"]
    (rv,) = res["reverts"]  # revertive mode for one cut: restored, repaired, back on the admitted path
    assert rv["settled"] == "restored" and rv["outcome"] == "reverted", rv
    assert rv["back_on_original"] is True and rv["restored_path"] != rv["original_path"], rv
    assert rv["reverted_s"] is not None and rv["reverted_s"] >= rv["hold_s"], rv  # not before the hold
    assert res["revert"]["reverted"] == 1 and res["revert"]["all_back_on_original"] is True, res["revert"]
    assert res["released"] is True
    assert protected["protection"] == "1+1" and protected["settled"] == "restored", protected  # protected again
    assert protected["restored_s"] is not None and protected["first_change_s"] is not None
    assert protected["restored_s"] < protected["first_change_s"], protected  # the switch failed over by itself
    assert protected["probe_lost"] < unprotected[0]["probe_lost"], protected
    assert res["summary"]["protected_cuts"]["data_plane_first"] is True
    assert res["protected_leftover"]["extra"] == [] and res["protected_released"] is True
    off = res["offload"]  # the TE loop's offload, its fibre cut: released in the failure's event
    assert off["offloaded"] is True, off
    assert off["released_s"] is not None and "failure" in (off["release_reason"] or ""), off
    assert off["offload_xcons_left"] == [] and off["controller_errors"] == "", off
    assert res["summary"]["restored"] == 3
    assert json.loads((tmp_path / "results.json").read_text())["summary"]["faults"] == 3
    assert (tmp_path / "fibre_cut.png").stat().st_size > 0
