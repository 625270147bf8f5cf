"""Graph mode (issue 15): OTTER placement on small multi-layer graphs with hand-known answers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from pce.errors import InvalidInputError
from pce.otter.graph import existing_hops, place
from pce.otter.graph_flows import ClassRules, GraphFlow, flows_from_doc
from tests.lib.otter_helpers import short_plus_circuit, two_links

FIG2_FLOWS = Path(__file__).resolve().parents[4] / "pce" / "otter" / "examples" / "flows-fig2.json"


@pytest.mark.parametrize("policy", ["otter", "joint"])
def test_sensitive_flow_keeps_short_path_bulk_takes_new_circuit(policy: str) -> None:
    # interactive on the circuit: RTT 30 ms, linear from 20 ms → 0.5; on the link 2 ms → 1. bulk: 1 on both.
    flows = [GraphFlow("bulk", "A", "B", 8.0, "bulk", 1, 1), GraphFlow("ssh", "A", "B", 4.0, "interactive", 1, 1)]
    res = place(short_plus_circuit(), flows, ClassRules(), policy)
    by = res.by_id()
    assert by["ssh"].path.key == ("A:2-B:2",) and by["ssh"].allocated == 4.0
    assert [h.circuit is not None for h in by["bulk"].path.hops] == [True] and by["bulk"].allocated == 8.0
    assert [c.xcons for c in res.circuits] == [(("X:1", "X:2"), ("Y:2", "Y:1"))]
    assert res.objective == pytest.approx(8.0)  # both flows whole, every tolerance 1: Σ_f 4 · bw_f / bw_f


def test_cspf_baseline_puts_the_big_flow_first_on_the_short_path() -> None:
    flows = [GraphFlow("bulk", "A", "B", 8.0, "bulk", 1, 1), GraphFlow("ssh", "A", "B", 4.0, "interactive", 1, 1)]
    by = place(short_plus_circuit(), flows, ClassRules(), "cspf").by_id()
    assert by["bulk"].path.key == ("A:2-B:2",)
    assert by["ssh"].path.circuits and by["ssh"].satisfaction == pytest.approx((0.5 + 3) / 4)


def test_no_circuit_when_lit_capacity_suffices() -> None:
    flows = [GraphFlow("a", "A", "B", 3.0, "bulk"), GraphFlow("b", "A", "B", 4.0, "interactive")]
    res = place(short_plus_circuit(), flows, ClassRules(), "otter")
    assert res.circuits == [] and all(p.path.key == ("A:2-B:2",) for p in res.flows)


@pytest.mark.parametrize("policy", ["otter", "joint"])
def test_background_on_the_lit_link_makes_every_lighting_policy_light_the_circuit(policy: str) -> None:
    """7 Mbit/s fit the lit 10-Mbit/s link, but 6 of its 10 carry traffic the placement has no flows
    for: the priced lighting and the joint MIP alike light the circuit (the joint MIP used to decide
    on raw capacities), and the live graph keeps its capacity."""
    flows = [GraphFlow("a", "A", "B", 3.0, "bulk"), GraphFlow("b", "A", "B", 4.0, "interactive")]
    g = short_plus_circuit()
    assert place(g, flows, ClassRules(), policy).circuits == []
    res = place(g, flows, ClassRules(), policy, background={"A:2-B:2": 6.0})
    assert [c.xcons for c in res.circuits] == [(("X:1", "X:2"), ("Y:2", "Y:1"))]
    assert sum(p.allocated for p in res.flows) == pytest.approx(7.0)
    assert [h.capacity for h in existing_hops(g)] == [10.0]


def test_deadline_shorter_than_setup_time_excludes_the_circuit() -> None:
    flows = [GraphFlow("now", "A", "B", 8.0, "bulk", deadline=0.05), GraphFlow("ssh", "A", "B", 4.0, "interactive")]
    by = place(short_plus_circuit(), flows, ClassRules(), "otter").by_id()
    assert not by["now"].path.circuits  # setup 0.185 s > 50 ms: it cannot wait for the circuit
    assert by["ssh"].path.circuits and by["now"].allocated == 8.0 and by["ssh"].allocated == 2.0 + 2.0


@pytest.mark.parametrize(("slow_ms", "threshold", "moves"), [
    (11.0, 0.05, False),  # RTT 22 ms → linear 0.9: gain (1 − 0.9)/4 = 0.025 < 0.05: stays
    (11.0, 0.01, True),   # the same gain passes a 0.01 threshold
    (30.0, 0.05, True),   # RTT 60 ms → ε: gain ≈ 0.25
])
def test_pathpin_moves_only_above_the_gain_threshold(slow_ms: float, threshold: float, moves: bool) -> None:
    flow = GraphFlow("ssh", "A", "B", 1.0, "interactive", path=("A:2-B:2",))
    p = place(two_links(slow_ms), [flow], ClassRules(), "otter", pin_gain=threshold).flows[0]
    assert p.moved is moves and p.pinned is not moves
    assert p.path.key == (("A:4-B:4",) if moves else ("A:2-B:2",))
    assert p.gain == pytest.approx((1 - (2 - 2 * slow_ms / 20)) / 4 if slow_ms < 20 else (1 - 1e-3) / 4, abs=1e-6)


def test_pinned_flow_keeps_path_while_a_new_flow_is_placed_freely() -> None:
    flows = [GraphFlow("old", "A", "B", 1.0, "interactive", path=("A:2-B:2",)),
             GraphFlow("new", "A", "B", 1.0, "interactive")]
    by = place(two_links(11.0), flows, ClassRules(), "otter").by_id()
    assert by["old"].path.key == ("A:2-B:2",) and by["old"].pinned
    assert by["new"].path.key == ("A:4-B:4",) and by["new"].gain is None


def test_whole_flows_never_overload_a_hop() -> None:
    g = short_plus_circuit()
    flows = [GraphFlow(f"f{i}", "A", "B", 1.5 + (i % 4), "interactive" if i % 3 == 0 else "bulk") for i in range(12)]
    for policy in ("otter", "joint", "cspf"):
        res = place(g, flows, ClassRules(), policy)
        load: dict[str, float] = {}
        for p in res.flows:
            if p.path is not None:
                assert p.allocated <= p.flow.bw + 1e-9
                for h in p.path.hops:
                    load[h.id] = load.get(h.id, 0.0) + p.allocated
        assert load and all(v <= 10.0 + 1e-6 for v in load.values())
        assert sum(load.values()) == pytest.approx(20.0)  # both 10 Mbit/s hops full: demand is 36


def test_fig2_flow_file_classes_and_two_disjoint_circuits() -> None:
    from topology.spec import fig2_testbed, spec_to_graph

    g = spec_to_graph(fig2_testbed())
    flows, rules = flows_from_doc(json.loads(FIG2_FLOWS.read_text()), g, "f.json")
    assert {f.id: f.cls for f in flows} == {"ssh": "interactive", "call": "video", "backup": "bulk", "resv-7": "bulk"}
    assert {f.id: (f.src, f.src_port, f.dst, f.dst_port) for f in flows}["resv-7"] == ("A", 2, "C", 4)
    res = place(g, flows, rules, "otter")
    assert sum(p.allocated for p in res.flows) == pytest.approx(16.5)  # 16.5 Mbit/s need both 10 Mbit/s circuits
    ports = [set(c.oports) for c in res.circuits]
    assert len(ports) == 2 and not ports[0] & ports[1]
    assert existing_hops(g) == []  # nothing is lit in the Fig. 2 spec


def test_flow_file_errors_name_the_field() -> None:
    g = short_plus_circuit()
    base = {"flows": [{"id": "x", "src": "h1", "dst": "h2", "rate_mbps": 1}]}
    cases = [
        ({"flows": [{"src": "h1", "dst": "h9", "rate_mbps": 1}]}, "flows[0].dst: unknown endpoint 'h9'"),
        ({"flows": [{"src": "h1", "dst": "h2"}]}, "flows[0]: give exactly one of rate_mbps"),
        ({"flows": [{"src": "h1", "dst": "h2", "rate_mbps": 1, "class": "gold"}]}, "flows[0].class: unknown class 'gold'"),
        ({**base, "classes": {"gold": {"rtt": {"shape": "sigmoid", "at": 3}}}}, "classes.gold.rtt.shape: unknown shape"),
        ({**base, "rules": {"vlans": {"5000": "bulk"}}}, "rules.vlans.5000: expected a number 0..4095"),
        ({"flows": [{"src": "h1", "dst": "h2", "rate_mbps": 1, "five_tuple": {"src": "a", "dst": "b", "proto": 300}}]},
         "flows[0].five_tuple.proto"),
        ({"flows": [{"src": "X:1", "dst": "h2", "rate_mbps": 1}]}, "flows[0].src: endpoint 'X:1' is an oport node"),
    ]
    for doc, where in cases:
        with pytest.raises(InvalidInputError) as err:
            flows_from_doc(doc, g, "f.json")
        assert str(err.value).startswith("f.json: ") and where in str(err.value), str(err.value)


def test_classification_order_and_window() -> None:
    rules = ClassRules(vlans={7: "interactive"}, reservations={"r1": "interactive"})
    assert rules.classify(match=("a", "b", 6, 40000, 22)) == "interactive"
    assert rules.classify(match=("a", "b", 6, 40000, 5001)) == "bulk"
    assert rules.classify(vlan=7, match=("a", "b", 6, 1, 5001)) == "interactive"
    assert rules.classify(reservation="r1") == "interactive" and rules.classify(reservation="r2") == "bulk"
    doc = {"flows": [{"id": "r", "src": "A", "dst": "B", "bandwidth_mbps": 2, "start_s": 100, "end_s": 200}]}
    g = short_plus_circuit()
    assert [f.id for f in flows_from_doc(doc, g, now=150)[0]] == ["r"]
    assert flows_from_doc(doc, g, now=250)[0] == []


def test_cli_graph_file_table_json_and_no_lab_import(tmp_path, capsys) -> None:
    gfile, ffile, out = tmp_path / "g.json", tmp_path / "f.json", tmp_path / "p.json"
    gfile.write_text(short_plus_circuit().to_json())
    ffile.write_text(json.dumps({"flows": [
        {"id": "bulk", "src": "h1", "dst": "h2", "rate_mbps": 8},
        {"id": "ssh", "src": "h1", "dst": "h2", "rate_mbps": 4,
         "five_tuple": {"src": "10.0.0.1", "dst": "10.0.0.2", "proto": 6, "sport": 40000, "dport": 22}}]}))
    args = ["pce", "otter-solve", "--graph", str(gfile), "--flows", str(ffile)]
    assert main([*args, "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "ssh" in table and "interactive" in table and "light c0:A:3-B:3" in table
    doc = json.loads(out.read_text())
    assert {f["id"]: f["path"]["hops"] for f in doc["flows"]}["ssh"] == ["A:2-B:2"]
    assert main([*args, "--json", "-", "--policy", "cspf"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "cspf"
    assert main([*args, "--k", "0"]) == 2
    assert "--k and --per-pair must be ≥ 1" in capsys.readouterr().err
    ffile.write_text(json.dumps({"flows": [{"src": "h1", "dst": "nowhere", "rate_mbps": 1}]}))
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == f"mlte: error: {ffile}: flows[0].dst: unknown endpoint 'nowhere'"
    code = ("import sys; from app.cli.main import main; "
            f"main(['pce', 'otter-solve', '--graph', {str(gfile)!r}, '--flows', {str(ffile)!r}]); "
            "print([m for m in sys.modules if m.startswith('mininet_labs')])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip().endswith("[]")
