"""Column generation (``lp_algorithm="colgen"``) must give the same optimum as the full path LP."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pce.errors import InvalidInputError
from pce.te.colgen import solve_total_flow_colgen
from pce.te.network import demands_to_arrays, network_from_graph
from pce.te.paths import compute_paths
from pce.te.solve import solve_te
from pce.topologies import load_demands, load_topology
from tests.lib.te_instances import connected_gnp


def random_instance(seed: int, n: int = 12, p: float = 0.3, pairs: int = 40):
    """Connected random graph (capacities 1..10) and random demands large enough to congest it."""
    rng = np.random.default_rng(seed)
    g = connected_gnp(rng, n, p)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = float(rng.integers(1, 11))
        g.edges[u, v]["latency"] = float(rng.integers(1, 5))
    nodes = sorted(g.nodes)
    dem: dict[tuple[str, str], float] = {}
    while len(dem) < pairs:
        s, t = rng.choice(len(nodes), 2, replace=False)
        dem[(nodes[s], nodes[t])] = float(rng.uniform(0.5, 8.0))
    return g, dem


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 6])
def test_colgen_equals_full_lp_on_random_instances(seed: int, k: int) -> None:
    g, dem = random_instance(seed)
    full = solve_te(g, dem, "total-flow", "path", k=k, workers=1)
    cg = solve_te(g, dem, "total-flow", "path", k=k, workers=1, lp_algorithm="colgen")
    assert cg.objective_value == pytest.approx(full.objective_value, rel=1e-7, abs=1e-7)
    # the colgen allocation is itself feasible in the full LP
    assert np.all(cg.arc_load <= cg.network.arc_cap * (1 + 1e-7) + 1e-7)
    assert np.all(cg.allocation <= cg.demands.volume * (1 + 1e-7) + 1e-7)
    assert np.all(cg.allocation >= -1e-9)
    assert cg.settings["lp_algorithm"] == "colgen"


def test_colgen_needs_more_than_one_round_and_adds_demand_rows_only_when_needed() -> None:
    """Congested instance: the shortest paths alone are not optimal, so paths enter; only demands
    with >= 2 active paths get a row."""
    g, dem = random_instance(3, pairs=60)
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 4, workers=1)
    sol = solve_total_flow_colgen(net, d, paths)
    assert sol.rounds >= 2
    assert sol.sizes["constraints"] == net.n_arcs + sol.sizes["multi_path_demands"]
    assert sol.sizes["variables"] < paths.n_paths
    assert sol.history[-1]["entering"] == 0
    # the objective never decreases from round to round (the master only gains columns)
    objs = [h["objective"] for h in sol.history]
    assert all(b >= a - 1e-6 * max(1.0, a) for a, b in zip(objs, objs[1:], strict=False))


def test_colgen_on_as7018_subset_equals_full_lp() -> None:
    top = "caida/2024-08/7018"
    g = load_topology(top, capacity=10_000.0)
    dem = load_demands(top, g, load=0.5, endpoints=40)
    full = solve_te(g, dem, "total-flow", "path", k=4, workers=1)
    cg = solve_te(g, dem, "total-flow", "path", k=4, workers=1, lp_algorithm="colgen")
    assert cg.objective_value == pytest.approx(full.objective_value, rel=1e-7)


def test_colgen_inside_pop_equals_full_lp_inside_pop() -> None:
    g, dem = random_instance(5, n=14, pairs=80)
    a = solve_te(g, dem, "total-flow", "path", k=3, partitions=4, workers=1, seed=3, split=0.5, repair=False)
    b = solve_te(g, dem, "total-flow", "path", k=3, partitions=4, workers=2, seed=3, split=0.5, repair=False,
                 lp_algorithm="colgen")
    assert b.objective_value == pytest.approx(a.objective_value, rel=1e-7)


def test_colgen_rejects_what_it_cannot_solve() -> None:
    g, dem = random_instance(0)
    with pytest.raises(InvalidInputError, match="colgen"):
        solve_te(g, dem, "mlu", "path", k=2, workers=1, lp_algorithm="colgen")
    with pytest.raises(InvalidInputError, match="colgen"):
        solve_te(g, dem, "total-flow", "edge", workers=1, lp_algorithm="colgen")
    with pytest.raises(InvalidInputError, match="LP algorithm"):
        solve_te(g, dem, "total-flow", "path", k=2, workers=1, lp_algorithm="magic")


@pytest.mark.parametrize(("strategy", "warm"), [("dual", True), ("primal", True), ("dual", False)])
def test_colgen_master_strategies_reach_the_same_optimum(strategy: str, warm: bool) -> None:
    g, dem = random_instance(4, pairs=60)
    full = solve_te(g, dem, "total-flow", "path", k=4, workers=1)
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 4, workers=1)
    sol = solve_total_flow_colgen(net, d, paths, strategy=strategy, warm_start=warm)
    assert sol.objective == pytest.approx(full.objective_value, rel=1e-7)
    with pytest.raises(InvalidInputError, match="strategy"):
        solve_total_flow_colgen(net, d, paths, strategy="barrier")


def test_demand_proportional_capacity_shares_sum_to_one_and_stay_feasible() -> None:
    from pce.te.pop import capacity_shares, partition_clients

    g, dem = random_instance(2, n=14, pairs=80)
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 3, workers=1)
    groups = partition_clients(d.volume, 4, seed=1)
    shares = capacity_shares(net, paths, groups)
    assert np.sum(shares, axis=0) == pytest.approx(np.ones(net.n_arcs))
    assert all(np.all(s >= 0) for s in shares)
    whole = solve_te(g, dem, "total-flow", "path", k=3, workers=1)
    for algorithm in ("full", "colgen"):
        pop = solve_te(g, dem, "total-flow", "path", k=3, partitions=4, workers=1, seed=1,
                       capacity_split="demand", lp_algorithm=algorithm)
        assert np.all(pop.arc_load <= pop.network.arc_cap * (1 + 1e-7) + 1e-7)
        assert pop.objective_value <= whole.objective_value * (1 + 1e-7)
    one = solve_te(g, dem, "total-flow", "path", k=3, partitions=1, workers=1, capacity_split="demand")
    assert one.objective_value == pytest.approx(whole.objective_value, rel=1e-9)
    with pytest.raises(InvalidInputError, match="capacity split"):
        solve_te(g, dem, "total-flow", "path", k=3, partitions=2, workers=1, capacity_split="random")
    with pytest.raises(InvalidInputError, match="path formulation"):
        solve_te(g, dem, "total-flow", "edge", partitions=2, workers=1, capacity_split="demand")


def test_cli_colgen_and_demand_capacity_split(tmp_path, capsys) -> None:
    from app.cli.main import main

    docs = {}
    for algorithm in ("full", "colgen"):
        out = tmp_path / f"{algorithm}.json"
        rc = main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000", "--load", "1.5",
                   "--paths", "3", "--lp-algorithm", algorithm, "--json", str(out), "--summary-only", "-q"])
        assert rc == 0
        docs[algorithm] = json.loads(out.read_text())
    assert docs["colgen"]["lp_algorithm"] == "colgen" and docs["colgen"]["sizes"]["colgen_rounds"] >= 1
    assert docs["colgen"]["objective"]["value"] == pytest.approx(docs["full"]["objective"]["value"], rel=1e-7)
    out = tmp_path / "pop.json"
    assert main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000", "--load", "1.5",
                 "--paths", "3", "--partitions", "2", "--capacity-split", "demand", "--json", str(out),
                 "--summary-only", "-q"]) == 0
    pop = json.loads(out.read_text())
    assert pop["capacity_split"] == "demand"
    assert pop["objective"]["value"] <= docs["full"]["objective"]["value"] * (1 + 1e-7)
    assert main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000", "--objective", "mlu",
                 "--lp-algorithm", "colgen", "-q"]) == 2
    assert "colgen" in capsys.readouterr().err
