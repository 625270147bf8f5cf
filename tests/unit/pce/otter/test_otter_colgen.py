"""Column generation of graph-mode OTTER placement (issue 27): the LP over all paths, certified."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.cli.main import main
from pce.circuits import candidate_circuits
from pce.otter.graph import (
    CandidatePath,
    _generate_exact,
    _solve,
    build_instance,
    circuit_hops,
    colgen_state,
    column_generation,
    existing_hops,
    place,
)
from pce.otter.graph_flows import ClassRules, GraphFlow, flows_from_doc
from pce.otter.graph_mesh import flows as mesh_flows
from pce.otter.graph_mesh import mesh
from pce.otter.graph_params import CIRCUIT_PRICE
from tests.lib.otter_helpers import short_plus_circuit, two_links

FIG2_FLOWS = Path(__file__).resolve().parents[4] / "pce" / "otter" / "examples" / "flows-fig2.json"
TWO_FLOWS = {"flows": [{"id": "a", "src": "h1", "dst": "h4", "rate_mbps": 10},
                       {"id": "b", "src": "h1", "dst": "h4", "rate_mbps": 10}]}


def fig2():
    from pce.cli_path import load_graph

    return load_graph("fig2")


def all_simple_paths(switches: list[str], hops: list, s: str, d: str) -> list[CandidatePath]:
    """Every simple path s → d over the hop multigraph, by depth-first search (the brute force)."""
    out: list[CandidatePath] = []

    def walk(at: str, seen: tuple[str, ...], used: tuple) -> None:
        if at == d:
            out.append(CandidatePath(seen, used))
            return
        for h in hops:
            if at in (h.a, h.b) and h.other(at) not in seen:
                walk(h.other(at), (*seen, h.other(at)), (*used, h))

    walk(s, (s,), ())
    return out


def exhaustive_objective(g, flows: list[GraphFlow], rules: ClassRules, circuits) -> float:
    """The priced LP over every simple path of every pair (ports as rows, as in column generation)."""
    switches = sorted(n for n, d in g.g.nodes(data=True) if d.get("kind") == "packet")
    existing = existing_hops(g)
    hops = existing + circuit_hops(circuits, (h.id for h in existing))
    pairs = {(f.src, f.dst) for f in flows}
    every = {pair: all_simple_paths(switches, hops, *pair) for pair in pairs}
    inst = build_instance(g, flows, rules, circuits, pair_paths=every)
    allowed = (inst.cand.paths >= 0) & inst.deadline_ok
    return _solve(inst, allowed, None, CIRCUIT_PRICE)[0].objective


def small_instances() -> list[tuple[str, object, list[GraphFlow], ClassRules]]:
    """Every graph instance these tests place on: hand-made, Fig. 2 and small random meshes."""
    out = []
    g = fig2()
    for name, doc in (("fig2-two-flows", TWO_FLOWS), ("fig2-four-flows", json.loads(FIG2_FLOWS.read_text()))):
        fl, rules = flows_from_doc(doc, g)
        out.append((name, g, fl, rules))
    two = [GraphFlow("bulk", "A", "B", 8.0, "bulk"), GraphFlow("ssh", "A", "B", 4.0, "interactive")]
    out.append(("short+circuit", short_plus_circuit(), two, ClassRules()))
    out.append(("two-links", two_links(30.0), two, ClassRules()))
    m = mesh(n_sw=5, n_ots=3, packet_links=5, fibres=3, seed=2)
    held = [GraphFlow(f.id, f.src, f.dst, f.bw * 60.0, f.cls, deadline=0.001 if n % 3 == 0 else None,
                      avoid=frozenset({existing_hops(m)[0].id}) if n % 3 == 1 else frozenset())
            for n, f in enumerate(mesh_flows(12, 5, 2))]
    out.append(("mesh5-restricted", m, held, ClassRules()))
    for seed in (1, 2, 3):
        m = mesh(n_sw=5, n_ots=3, packet_links=5, fibres=3, seed=seed)
        fl = [GraphFlow(f.id, f.src, f.dst, f.bw * 60.0, f.cls) for f in mesh_flows(12, 5, seed)]
        out.append((f"mesh5-seed{seed}", m, fl, ClassRules()))
    return out


INSTANCES = small_instances()


def test_two_flows_of_one_pair_get_two_circuits() -> None:
    """The issue's example: two 10 Mbit/s flows h1→h4 on Fig. 2 need both port-disjoint circuits;
    the k = 4 candidates of before were near-copies and placed 10."""
    g = fig2()
    fl, rules = flows_from_doc(TWO_FLOWS, g)
    res = place(g, fl, rules, "otter")
    assert sum(p.allocated for p in res.flows) == pytest.approx(20.0)
    assert len(res.circuits) == 2 and res.objective == pytest.approx(8.0)
    ports = [set(c.oports) for c in res.circuits]
    assert not ports[0] & ports[1]
    assert res.stats["colgen_certified"] is True
    old = place(g, fl, rules, "otter", paths="k")
    assert sum(p.allocated for p in old.flows) == pytest.approx(10.0)


@pytest.mark.parametrize("name", [n for n, *_ in INSTANCES])
def test_otter_at_least_cspf(name: str) -> None:
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == name)
    otter = place(g, fl, rules, "otter")
    assert otter.stats["colgen_certified"] is True
    assert otter.objective >= place(g, fl, rules, "cspf").objective - 1e-6


@pytest.mark.parametrize("name", [n for n, *_ in INSTANCES])
def test_otter_at_least_the_k_candidates(name: str) -> None:
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == name)
    assert place(g, fl, rules, "otter").objective >= place(g, fl, rules, "otter", paths="k").objective - 1e-6


@pytest.mark.parametrize("name", [n for n, *_ in INSTANCES])
def test_otter_at_least_joint(name: str) -> None:
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == name)
    assert place(g, fl, rules, "otter").objective >= place(g, fl, rules, "joint").objective - 1e-6


def test_the_best_lit_set_is_kept_and_certified() -> None:
    """Mesh seed 2: the dive alone lights a worse set than the joint MIP (43.93 vs 44.36); the
    joint's set, evaluated on the certified LP, wins and the answer is certified on it."""
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == "mesh5-seed2")
    otter, joint = place(g, fl, rules, "otter"), place(g, fl, rules, "joint")
    assert otter.objective == pytest.approx(joint.objective, abs=1e-6)
    assert otter.objective > 44.0
    assert {c.id for c in otter.circuits} == {c.id for c in joint.circuits}
    assert otter.stats["colgen_certified"] is True and otter.stats["lit_set_check_seconds"] >= 0


def test_large_instances_skip_the_lit_set_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above JOINT_CHECK_SIZE (pairs × candidate circuits) the MIP is not run: the dive's set stands."""
    import pce.otter.graph as graph_mod

    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == "mesh5-seed2")
    monkeypatch.setattr(graph_mod, "JOINT_CHECK_SIZE", 0)
    res = place(g, fl, rules, "otter")
    assert "lit_set_check_seconds" not in res.stats and res.stats["colgen_certified"] is True
    assert res.objective < 44.0


@pytest.mark.parametrize("name", [n for n, *_ in INSTANCES])
def test_column_generation_equals_the_lp_over_every_simple_path(name: str) -> None:
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == name)
    fl = [f for f in fl if f.src != f.dst]
    circuits = candidate_circuits(g, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    cg = column_generation(g, fl, rules, circuits, CIRCUIT_PRICE)
    assert cg.certified
    want = exhaustive_objective(g, fl, rules, circuits)
    assert cg.objective == pytest.approx(want, rel=1e-6, abs=1e-6)
    # and the LP over the generated paths alone reaches it too
    inst = build_instance(g, fl, rules, circuits, pair_paths=cg.paths)
    got = _solve(inst, (inst.cand.paths >= 0) & inst.deadline_ok, None, CIRCUIT_PRICE)[0].objective
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_fewer_initial_paths_are_made_up_by_generated_ones() -> None:
    """From one lit and one circuit path per pair the generation adds columns and still reaches the
    exhaustive optimum: the answer does not depend on the initial guess."""
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == "mesh5-seed2")
    circuits = candidate_circuits(g, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    small = column_generation(g, fl, rules, circuits, CIRCUIT_PRICE, initial_k=1)
    assert small.generated_columns > 0 and small.rounds > 1 and small.certified
    assert small.objective == pytest.approx(exhaustive_objective(g, fl, rules, circuits), rel=1e-6)
    assert [h["objective"] for h in small.history] == sorted(h["objective"] for h in small.history)


def test_restricted_flows_get_no_column_through_what_they_avoid() -> None:
    """A flow that must avoid the lit link and one whose deadline is shorter than the circuit's setup
    share a pair but not a group: neither is given a path it may not use."""
    g = short_plus_circuit()
    fl = [GraphFlow("avoid", "A", "B", 4.0, "bulk", avoid=frozenset({"A:2-B:2"})),
          GraphFlow("now", "A", "B", 4.0, "bulk", deadline=0.001)]
    res = place(g, fl, ClassRules(), "otter")
    by = res.by_id()
    assert "A:2-B:2" not in by["avoid"].path.key
    assert by["now"].path.key == ("A:2-B:2",)


def test_cli_prints_columns_and_certificate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flows = tmp_path / "flows.json"
    flows.write_text(json.dumps(TWO_FLOWS))
    assert main(["pce", "otter-solve", "--graph", "fig2", "--flows", str(flows)]) == 0
    out = capsys.readouterr().out
    assert "20/20 Mbit/s placed" in out and "2 circuit(s) to light" in out
    assert "optimal over all paths: certified" in out
    assert main(["pce", "otter-solve", "--graph", "fig2", "--flows", str(flows), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["colgen"]["certified"] is True and doc["colgen"]["generated_columns"] >= 0
    assert doc["colgen"]["columns"] == doc["stats"]["colgen_columns"]
    assert main(["pce", "otter-solve", "--graph", "fig2", "--flows", str(flows), "--candidates", "k"]) == 0
    out = capsys.readouterr().out
    assert "10/20 Mbit/s placed" in out and "column generation off" in out


def test_a_run_stopped_early_is_not_certified() -> None:
    """The certificate means something: one round on an instance that needs generated columns is
    reported uncertified and stays below the exhaustive optimum."""
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == "mesh5-seed2")
    circuits = candidate_circuits(g, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    state = colgen_state(g, fl, rules, circuits, CIRCUIT_PRICE, initial_k=1)
    state.max_rounds = 1
    assert state.run() is False and state.result().certified is False
    assert state.objective < exhaustive_objective(g, fl, rules, circuits) - 1e-6


def test_generated_paths_are_simple_and_priced_consistently() -> None:
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == "mesh5-seed2")
    circuits = candidate_circuits(g, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    cg = column_generation(g, fl, rules, circuits, CIRCUIT_PRICE, initial_k=1)
    for (s, d), plist in cg.paths.items():
        assert len({p.key for p in plist}) == len(plist)
        for p in plist:
            assert p.switches[0] == s and p.switches[-1] == d
            assert len(set(p.switches)) == len(p.switches)
    assert np.isfinite(cg.objective)


@pytest.mark.parametrize("name", [n for n, *_ in INSTANCES])
def test_the_exact_master_reached_through_the_coarse_levels_is_the_lp_over_every_path(name: str) -> None:
    """The placement's route to the exact master (the dive's LP on the pair level, then the class
    level, then the exact aggregates, each seeded from the coarser solution and starting from its
    used paths) ends certified at the exhaustive LP over every simple path on the lit set."""
    _n, g, fl, rules = next(i for i in INSTANCES if i[0] == name)
    fl = [f for f in fl if f.src != f.dst]
    circuits = candidate_circuits(g, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    keep = {c.id for c in circuits[::2]}
    dive = colgen_state(g, fl, rules, circuits, CIRCUIT_PRICE, level="pair")
    dive.resolve()  # the dive's first LP: every circuit, the initial paths
    exact = _generate_exact(dive, keep, keep_all=False)
    assert exact.certified
    assert len(exact.agg_bw) == len(colgen_state(g, fl, rules, circuits, CIRCUIT_PRICE).agg_bw) >= len(dive.agg_bw)
    want = exhaustive_objective(g, fl, rules, [c for c in circuits if c.id in keep])
    assert exact.objective == pytest.approx(want, rel=1e-6, abs=1e-6)
    assert not exact.off & keep and exact.off == {c.id for c in circuits} - keep
