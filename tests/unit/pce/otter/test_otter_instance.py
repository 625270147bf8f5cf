"""Instance files (issue 14): schema validation with field paths, export → load → same LP, CLI."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from app.cli.main import main
from pce.errors import InvalidInputError
from pce.otter.instance import instance_from_doc, instance_to_doc, load_instance
from pce.otter.matrix import build_matrix
from pce.otter.problem import make_problem
from pce.otter.scenario import generate_flows, generate_network

EXAMPLE = Path(__file__).resolve().parents[4] / "pce" / "otter" / "examples" / "instance-small.json"


def _objective(net, flows, top_n: int = 4) -> float:
    return build_matrix(make_problem(net, flows, top_n=top_n)).solve().objective


def test_example_loads_with_names_and_resources() -> None:
    inst = load_instance(EXAMPLE)
    assert inst.source_names == ["ran-east", "ran-west"]
    assert inst.flow_ids == ["ar-1", "video-1", "game-1", "drive-1"]
    net = inst.network
    assert net.dest_is_edge.tolist() == [False, True, True]
    assert np.isinf(net.dest_cap[2, 1]) and net.dest_cap[2, 0] == 16  # edge-b: RAM unlimited, 16 vCPU
    assert np.isinf(net.link_cap[net.link_names.index("dc-in")])
    # bw_mbps defaults to the bottleneck link, or is taken as given
    assert net.path_metrics[0, 3] == 400 and net.path_metrics[4, 3] == 300
    assert inst.flows.profile.tolist() == [4, -1, 5, 6]
    assert inst.flows.shapes[1, 1] == -1  # video-1 ignores jitter


def test_example_optimum_by_hand() -> None:
    """Every flow fits on its best path: objective = Σ_f Σ_m 𝒟_f^m(best path) (x_f = bw_f)."""
    inst = load_instance(EXAMPLE)
    sol = build_matrix(make_problem(inst.network, inst.flows, top_n=3)).solve()
    assert sol.allocated() == pytest.approx(331.0)
    # ar-1: edge-a path 12 ms ≤ 20 → rtt 1, loss linear 1e-5 vs 0.1% = 1e-3 → ε; jitter ignored 1; bw 1
    # video-1: best is dc-1 via wan-2 (loss 0.01% → rational 1e-6/1e-4 = 0.01), rtt 1, jitter 1, bw 1
    # game-1: west paths: edge-b jitter 2 ≤ 10, loss 0.2% = 2e-3 > 1e-3 → ε; dc-1 rtt 80 ≤ 100, loss 2e-4 → 4
    # drive-1: edge-b 8 ms → rtt 1, loss 2e-3 > 1e-4 → ε: 3 + ε; dc-1: rtt ε, loss 2e-4 > 1e-4 → 2 + 2ε
    eps = 1e-3
    expected = (3 + eps) + (3 + 0.01) + 4 + (3 + eps)
    assert sol.objective == pytest.approx(expected, rel=1e-6)


def test_generated_instance_round_trip_same_objective() -> None:
    net = generate_network(3, 4, 3, seed=5, scale=0.002, edge_factor=30)
    flows = generate_flows(net, n=400, seed=5)
    doc = json.loads(json.dumps(instance_to_doc(net, flows)))
    back = instance_from_doc(doc)
    assert np.array_equal(back.network.path_links, net.path_links)
    assert np.array_equal(back.network.pair_paths, net.pair_paths)
    assert np.array_equal(back.flows.shapes, flows.shapes)
    obj = _objective(net, flows)
    assert obj > 0
    assert _objective(back.network, back.flows) == pytest.approx(obj, rel=1e-9, abs=1e-9)


def _base() -> dict:
    return json.loads(EXAMPLE.read_text())


@pytest.mark.parametrize(("edit", "where"), [
    (lambda d: d["flows"][2]["rtt"].update(shape="cubic"), "flows[2].rtt.shape: unknown shape 'cubic'"),
    (lambda d: d["flows"][0].update(bw_mbps=0), "flows[0].bw_mbps: must be > 0"),
    (lambda d: d["flows"][1].update(src="ran-north"), "flows[1].src: unknown source 'ran-north'"),
    (lambda d: d["paths"][3]["links"].append("wan-9"), "paths[3].links[3]: unknown link 'wan-9'"),
    (lambda d: d["paths"][0].update(rtt_ms=-1), "paths[0].rtt_ms: must be ≥ 0"),
    (lambda d: d["paths"][0].update(loss_pct=150), "paths[0].loss_pct: a percentage must be ≤ 100"),
    (lambda d: d["links"][2].update(capacity_mbps="fast"), "links[2].capacity_mbps: expected a finite number"),
    (lambda d: d["destinations"][1].update(gpu=2), "destinations[1].gpu: unknown field"),
    (lambda d: d["destinations"].append({"name": "dc-1"}), "destinations[3].name: duplicate name 'dc-1'"),
    (lambda d: d["flows"][3].update(id="ar-1"), "flows[3].id: duplicate id 'ar-1'"),
    (lambda d: d["flows"][3].update(profile="telepathy"), "flows[3].profile: unknown profile 'telepathy'"),
    (lambda d: d["flows"][0]["loss"].pop("at"), "flows[0].loss.at: missing (or null)"),
    (lambda d: d.update(version=2), "version: unsupported version 2"),
    (lambda d: d.pop("paths"), "paths: expected a list"),
    (lambda d: d["paths"][5].pop("rtt_ms"), "paths[5].rtt_ms: missing (or null); give a finite number"),
    (lambda d: d["flows"][0].pop("bw_mbps"), "flows[0].bw_mbps: missing (or null); give a finite number"),
])
def test_bad_fields_name_their_path(edit, where: str) -> None:
    doc = copy.deepcopy(_base())
    edit(doc)
    with pytest.raises(InvalidInputError) as err:
        instance_from_doc(doc, "x.json")
    msg = str(err.value)
    assert msg.startswith("x.json: ") and where in msg and "\n" not in msg


def test_cli_export_then_solve_same_objective(tmp_path, capsys) -> None:
    exported = tmp_path / "inst.json"
    common = ["pce", "otter-solve", "--sources", "3", "--dests", "4", "--paths", "2", "--scale", "0.002"]
    assert main([*common, "--flows", "300", "--export-instance", str(exported)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert json.loads(exported.read_text())["version"] == 1
    assert main(["pce", "otter-solve", "--instance", str(exported)]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["flows"] == 300 and second["columns"] == first["columns"]
    assert second["objective"] == pytest.approx(first["objective"], rel=1e-9)


def test_cli_sim_instance_round_trip(tmp_path, capsys) -> None:
    exported = tmp_path / "arrivals.json"
    common = ["--policies", "GREEDY,PER", "--quiet", "--solve-delay", "0", "--duration", "2"]
    net = ["--sources", "2", "--dests", "4", "--paths", "2", "--rate", "20000", "--scale", "0.002", "--warmup", "1"]
    out1, out2 = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["pce", "otter-sim", *net, *common, "--export-instance", str(exported), "--json", str(out1)]) == 0
    assert any(f["arrival_s"] < 0 for f in json.loads(exported.read_text())["flows"])  # warm-up flows
    assert main(["pce", "otter-sim", "--instance", str(exported), *common, "--json", str(out2)]) == 0
    a, b = (json.loads(p.read_text())["results"] for p in (out1, out2))
    for ra, rb in zip(a, b, strict=True):
        assert rb["flows"] == ra["flows"] > 0
        assert rb["allocated_bytes_fraction"] == pytest.approx(ra["allocated_bytes_fraction"], rel=1e-9)
    capsys.readouterr()


def test_cli_errors_one_line_exit_2_nothing_written(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    doc = _base()
    doc["flows"][0]["rtt"]["shape"] = "cubic"
    bad.write_text(json.dumps(doc))
    assert main(["pce", "otter-solve", "--instance", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"mlte: error: {bad}: flows[0].rtt.shape: unknown shape 'cubic' (choose from step, linear, rational)"
    assert main(["pce", "otter-solve", "--instance", str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{")
    assert main(["pce", "otter-solve", "--instance", str(tmp_path / "broken.json")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    target = tmp_path / "missing-dir" / "x.json"
    assert main(["pce", "otter-solve", "--flows", "10", "--sources", "2", "--dests", "2", "--paths", "1",
                 "--export-instance", str(target)]) == 2
    assert "missing-dir does not exist" in capsys.readouterr().err and not target.parent.exists()
    assert main(["pce", "otter-solve", "--instance", str(EXAMPLE), "--flows", "5"]) == 2
    assert main(["pce", "otter-solve", "--flows", "many"]) == 2
    assert "needs --graph" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["pce", "otter-solve", "--instance", str(EXAMPLE)],
    ["pce", "otter-sim", "--instance", str(EXAMPLE), "--policies", "GREEDY", "--quiet"],
    ["pce", "otter-solve", "--graph", "fig2", "--flows", str(EXAMPLE.parent / "flows-fig2.json")],
])
def test_cli_refuses_an_unwritable_json_before_running(command, tmp_path, capsys) -> None:
    """--json to a missing directory or to a directory: one line, exit 2, before solving/simulating."""
    assert main([*command, "--json", str(tmp_path / "nonexistent" / "x.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "nonexistent does not exist" in captured.err
    assert main([*command, "--json", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "is a directory" in captured.err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("gain", ["7", "-0.1"])
def test_cli_pin_gain_outside_0_1_is_refused(gain, capsys) -> None:
    assert main(["pce", "otter-solve", "--graph", "fig2", "--flows", str(EXAMPLE.parent / "flows-fig2.json"),
                 "--pin-gain", gain]) == 2
    assert "--pin-gain must be in 0..1" in capsys.readouterr().err


def test_cli_says_when_the_objective_is_the_aggregated_lps(tmp_path, capsys) -> None:
    """Issue 26 item 7: with flows merged (5 % buckets) the printed objective is the optimum of a
    restricted LP; the output says so, and --aggregation-gap gives the exact optimum and the gap."""
    exported = tmp_path / "inst.json"
    common = ["pce", "otter-solve", "--sources", "2", "--dests", "2", "--paths", "2", "--scale", "0.01"]
    assert main([*common, "--flows", "2000", "--export-instance", str(exported), "--aggregation-gap"]) == 0
    agg = json.loads(capsys.readouterr().out)
    assert agg["aggregates"] < agg["flows"] == 2000
    assert agg["objective_of"].startswith("the aggregated LP (2000 flows in ") and "lower bound" in agg["objective_of"]
    assert main(["pce", "otter-solve", "--instance", str(exported), "--no-aggregate"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert exact["objective_of"] == "the exact LP (one variable set per flow)" and "exact_objective" not in exact
    assert agg["exact_objective"] == pytest.approx(exact["objective"], rel=1e-9)
    assert agg["aggregation_gap"] == pytest.approx(exact["objective"] - agg["objective"], abs=1e-9)
    assert agg["aggregation_gap"] >= -1e-6 * exact["objective"]  # a restriction: never above the exact optimum
    assert main(["pce", "otter-solve", "--instance", str(exported), "--no-aggregate", "--aggregation-gap"]) == 2
    assert "drop --no-aggregate" in capsys.readouterr().err
