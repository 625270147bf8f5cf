"""Lab ``placement-compare`` without a network: measured flows scored against their OTTER classes,
a run's numbers from the journal and the generators' files, and the CLI's ``--placement``."""
from __future__ import annotations

import pytest

from mininet_labs.placement_compare import Phases, measure, policies_of
from mininet_labs.tolerance_score import MeasuredFlow, probe_stats, score, sink_stats, summarise
from pce.otter.graph_flows import BULK, INTERACTIVE


def test_a_flow_inside_its_tolerance_counts_all_its_bytes() -> None:
    f = MeasuredFlow("sip", INTERACTIVE, 10_000, 10.0, rtt_ms=12.0, jitter_ms=1.0, loss=0.0)
    s = score(f)
    assert s["inside"] and s["value"] == 1.0 and s["weighted_bytes"] == 10_000
    assert s["values"] == {"rtt": 1.0, "jitter": 1.0, "loss": 1.0} and s["unmeasured"] == []


def test_the_class_shapes_decide_the_value() -> None:
    # interactive: RTT linear from 20 ms (30 ms -> 0.5), loss step at 1e-3 (2e-3 -> epsilon)
    s = score(MeasuredFlow("sip", INTERACTIVE, 1000, 1.0, rtt_ms=30.0, jitter_ms=0.0, loss=2e-3))
    assert not s["inside"]
    assert s["values"]["rtt"] == pytest.approx(0.5) and s["values"]["loss"] == pytest.approx(1e-3)
    assert s["value"] == pytest.approx((0.5 + 1 + 1e-3) / 3, abs=1e-4)
    # bulk: loss rational from 1e-2 (4 % -> 0.25); jitter is not cared about, RTT not measured
    s = score(MeasuredFlow("el", BULK, 4000, 1.0, jitter_ms=50.0, loss=0.04))
    assert s["values"] == {"loss": 0.25} and s["unmeasured"] == ["rtt"] and s["weighted_bytes"] == 1000


def test_summary_counts_flows_that_share_a_measurement() -> None:
    out = summarise([MeasuredFlow("el", BULK, 4000, 1.0, loss=0.04),
                     MeasuredFlow("small", BULK, 1000, 1.0, rtt_ms=5.0, loss=0.0, count=16)])
    assert out["flows_total"] == 17 and out["flows_inside"] == 16 and out["inside_fraction"] == round(16 / 17, 4)
    assert out["allocated_bytes"] == 5000 and out["weighted_bytes"] == 2000 and out["weighted_share"] == 0.4


def test_probe_stats_in_a_window() -> None:
    probe = {"size": 200, "sent": [[0, 10.0], [1, 10.1], [2, 10.2], [3, 10.3], [4, 11.5]],
             "rtt_ms": {"0": 1.0, "1": 3.0, "3": 2.0, "4": 9.0}}
    s = probe_stats(probe, 10.0, 11.0)
    assert s["sent"] == 4 and s["answered"] == 3 and s["loss"] == 0.25 and s["bytes"] == 600
    assert s["rtt_p50_ms"] == 2.0 and s["rtt_max_ms"] == 3.0 and s["jitter_ms"] == 1.5  # |3-1|, |2-3|


def test_sink_stats_count_missing_sequence_numbers_in_the_window() -> None:
    sink = {"bin_s": 0.5, "bins": {"0": [3000, 0, 3, 3], "1": [2000, 4, 7, 2], "2": [5000, 8, 12, 5]}}
    assert sink_stats(sink, 0.0, 1.0) == {"bytes": 5000, "packets": 5, "loss": round(1 - 5 / 8, 5)}
    assert sink_stats(sink, 1.0, 1.5) == {"bytes": 5000, "packets": 5, "loss": 0.0}
    assert sink_stats(sink, 2.0, 3.0)["loss"] is None


def _data(t0: float, ph: Phases, *, el_per_bin: int, small_per_bin: int, lost_probes: int) -> dict:
    bins = int(ph.total / 0.25)
    per = el_per_bin // 1000  # 1000-byte packets, numbered on; the even bins lose one
    el = {str(b): [el_per_bin, b * per, b * per + per - 1, per]
          for b in range(int(ph.warmup / 0.25), int((ph.warmup + ph.elephant) / 0.25))}
    el = {k: v if int(k) % 2 else [v[0], v[1], v[2], v[3] - 1] for k, v in el.items()}
    sm = {str(b): small_per_bin for b in range(bins)}
    sent = [[i, t0 + i * 0.02] for i in range(int(ph.total / 0.02))]
    lost = {i for i in range(lost_probes)}
    rtt = {str(i): 2.0 for i, _t in sent if i not in lost}
    return {"sink-el": {"bin_s": 0.25, "bins": el}, "recv-small0": {"series": {"small": sm}},
            "small0": {"bytes_sent": small_per_bin * bins}, "elephant": {"packets_sent": 1000, "packets_lost": 5},
            "probe0": {"size": 200, "sent": sent, "rtt_ms": rtt}}


def test_measure_reads_the_journal_and_the_files() -> None:
    ph, t0 = Phases(quick=True), 1000.0
    events = [
        {"type": "monitor", "event": "unconstrained_imbalance", "t": t0 + 5.3, "flows": [{"sport": 45000}]},
        {"type": "te_decision", "decision": "offload", "t": t0 + 6.0, "reason": "otter placement: 1 flow",
         "flows": ["udp 10.0.0.1:45000 -> 10.0.0.3:5201"], "circuit": "c0:A:4-C:2", "policy": "otter"},
        {"type": "te_done", "decision": "offload", "ok": True, "t": t0 + 6.5},
    ]
    r = measure(events, _data(t0, ph, el_per_bin=250_000, small_per_bin=50_000, lost_probes=0), t0, ph, True)
    assert r["elephant_moved"] and r["small_flows_moved"] == 0 and not r["interactive_moved"]
    assert r["circuits"] == ["c0:A:4-C:2"] and r["offload_delay_s"] == 2.5 and r["released"]
    assert r["elephant_mbps"] == 8.0 and r["small_mbps"] == 1.6  # 250 kB and 50 kB per 0.25 s
    assert r["interactive_loss"] == 0.0 and r["interactive_rtt_p95_ms"] == 2.0
    assert r["detected_s"] == 5.3 and r["window_s"] == [5.5, 11.25]  # 6 s from the detection, whole 0.25-s bins
    assert r["elephant_loss"] == 0.00209  # 12 of the 23 bins lost one of their 250 numbers
    assert r["flows_total"] == 18 and r["inside_fraction"] == 1.0  # elephant loss < 1 %
    assert r["allocated_bytes"] == 5.75 * (1_000_000 + 200_000) + r["flows"][2]["bytes"]
    assert r["weighted_bytes"] == r["allocated_bytes"]


def test_measure_scores_a_lossy_interactive_flow_and_no_offload() -> None:
    ph, t0 = Phases(quick=True), 1000.0
    data = _data(t0, ph, el_per_bin=100_000, small_per_bin=50_000, lost_probes=0)
    data["probe0"]["rtt_ms"] = {k: v for k, v in data["probe0"]["rtt_ms"].items() if int(k) % 50}  # 2 % lost
    r = measure([], data, t0, ph, False)
    assert not r["elephant_moved"] and r["offload_delay_s"] is None and r["moved_flows"] == []
    sip = r["flows"][2]
    assert sip["class"] == "interactive" and not sip["inside"] and sip["values"]["loss"] == pytest.approx(1e-3)
    assert r["flows_inside"] == 17 and r["weighted_bytes"] < r["allocated_bytes"]


def test_placement_choices() -> None:
    assert policies_of("all") == ("otter", "joint", "cspf") and policies_of("cspf") == ("cspf",)
    with pytest.raises(ValueError, match="unknown placement 'ecmp'"):
        policies_of("ecmp")


def test_cli_refuses_placement_for_a_lab_that_does_not_take_it(capsys, monkeypatch) -> None:
    import os
    import shutil

    from app.cli.main import main

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    assert main(["lab", "run", "elastic-offload", "--placement", "otter"]) == 2
    assert "lab elastic-offload does not take --placement" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lab", "run", "placement-compare", "--placement", "ecmp"])
    assert "invalid choice: 'ecmp'" in capsys.readouterr().err


def test_mesh6_is_valid_plain_data_with_the_circuits_it_lights() -> None:
    from mininet_labs.mesh_spec import MESH6_CIRCUIT_LINKS, MESH6_CIRCUITS, mesh6
    from topology.spec import spec_to_graph

    spec = mesh6()
    assert [s.name for s in spec.switches] == ["A", "B", "C", "D"] and [o.name for o in spec.ots] == ["X", "Y"]
    assert all(link.mbps <= 20 for link in spec.links if link.kind != "access")
    g = spec_to_graph(spec).g
    adapt = {(a, b) for a, b, d in g.edges(data=True) if d.get("kind") == "adaptation"}
    for name, hops in MESH6_CIRCUITS.items():  # each lit circuit joins the two packet ports its links name
        (sw_a, pa, sw_b, pb), = MESH6_CIRCUIT_LINKS[name]
        ends = {f"{hops[0][0]}:{hops[0][1]}", f"{hops[-1][0]}:{hops[-1][2]}"}
        found = {o for s, o in ((x, y) if x in "ABCD" else (y, x) for x, y in adapt)
                 if s in (sw_a, sw_b) and o in ends}
        assert found == ends, (name, found)


def test_measure_on_mesh6_scores_both_site_pairs() -> None:
    from mininet_labs.placement_scenarios import SCENARIOS

    sc = SCENARIOS["mesh6"]()
    ph, t0 = Phases(quick=True), 1000.0
    one = _data(t0, ph, el_per_bin=250_000, small_per_bin=50_000, lost_probes=0)
    data = {**one, "recv-small1": one["recv-small0"], "small1": one["small0"], "probe1": one["probe0"]}
    events = [{"type": "te_decision", "decision": "offload", "t": t0 + 6.0, "reason": "cspf placement",
               "flows": ["udp 10.0.0.1:45000 -> 10.0.0.3:5201"], "circuit": None, "policy": "cspf"}]
    r = measure(events, data, t0, ph, True, sc)
    assert r["elephant_moved"] and r["circuits"] == [] and r["offload_delay_s"] is None
    assert r["flows_total"] == 1 + 2 * 16 + 2 and len(r["interactive_by_pair"]) == 2
    assert [f["flow"] for f in r["flows"]][1:] == ["16 small transfers h2 -> h4:5202", "16 small transfers h5 -> h6:5203",
                                                   "interactive h1:5060 -> h3:5060", "interactive h5:5060 -> h6:5060"]
    assert r["flows"][1]["rtt_ms"] == r["flows"][2]["rtt_ms"] == 2.0  # h2 -> h4 shares A -> C with h1 -> h3's probe
