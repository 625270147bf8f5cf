"""The exact presolve of the total-flow path LP (pce.te.reduce) must not change the optimum."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

import pce.te.reduce as reduce_mod
from app.cli.main import main as mlte_main
from pce.te.network import demands_to_arrays, network_from_graph
from pce.te.paths import compute_paths
from pce.te.reduce import dual_bound, reduce_total_flow
from pce.te.solve import solve_te
from pce.topologies import load_demands, load_topology
from tests.lib.te_instances import connected_gnp


def random_instance(seed: int, n: int = 14, p: float = 0.25, pairs: int = 60, heavy: float = 1.0):
    """Connected random graph: a few thin links among fat ones, so some arcs can never fill up
    and others are bottlenecks; ``heavy`` scales the demands (load)."""
    rng = np.random.default_rng(seed)
    g = connected_gnp(rng, n, p)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = float(rng.choice([2.0, 5.0, 40.0, 200.0]))
        g.edges[u, v]["latency"] = float(rng.integers(1, 5))
    nodes = sorted(g.nodes)
    dem: dict[tuple[str, str], float] = {}
    while len(dem) < pairs:
        s, t = rng.choice(len(nodes), 2, replace=False)
        dem[(nodes[s], nodes[t])] = float(rng.uniform(0.1, 3.0)) * heavy
    return g, dem


def assert_feasible(res) -> None:
    assert np.all(res.arc_load <= res.network.arc_cap * (1 + 1e-7) + 1e-9)
    assert np.all(res.allocation <= res.demands.volume * (1 + 1e-7) + 1e-9)
    assert np.all(res.allocation >= -1e-9)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("heavy", [0.3, 1.0, 4.0])
@pytest.mark.parametrize("k", [1, 4])
def test_presolve_keeps_the_optimum_on_random_instances(seed: int, heavy: float, k: int) -> None:
    g, dem = random_instance(seed, heavy=heavy)
    plain = solve_te(g, dem, k=k, workers=1, presolve=False)
    red = solve_te(g, dem, k=k, workers=1)
    assert red.settings["presolve"] is True and plain.settings["presolve"] is False
    assert red.objective_value == pytest.approx(plain.objective_value, rel=1e-7, abs=1e-9)
    assert_feasible(red)
    # the dual bound certifies optimality of the expanded solution in the original LP
    cert = red.certificate
    assert cert is not None and cert["relative_gap"] == pytest.approx(0.0, abs=1e-7)
    assert cert["dual_bound"] >= plain.objective_value * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_presolve_with_column_generation_and_inside_pop(seed: int) -> None:
    g, dem = random_instance(seed, heavy=2.0)
    plain = solve_te(g, dem, k=3, workers=1, presolve=False)
    cg = solve_te(g, dem, k=3, workers=1, lp_algorithm="colgen")
    assert cg.objective_value == pytest.approx(plain.objective_value, rel=1e-7, abs=1e-9)
    assert cg.certificate is not None and abs(cg.certificate["relative_gap"]) < 1e-7
    pop_plain = solve_te(g, dem, k=3, partitions=3, workers=1, seed=seed, presolve=False, repair=False)
    pop_red = solve_te(g, dem, k=3, partitions=3, workers=1, seed=seed, repair=False)
    assert pop_red.objective_value == pytest.approx(pop_plain.objective_value, rel=1e-7, abs=1e-9)
    assert_feasible(pop_red)


def test_uncongested_instance_is_solved_without_an_lp() -> None:
    """Every arc can carry all demands that might use it: every demand is routed in full on its
    shortest path by the presolve alone."""
    g = nx.Graph()
    g.add_edge("a", "b", capacity=10.0)
    g.add_edge("b", "c", capacity=10.0)
    g.add_edge("a", "c", capacity=10.0)
    dem = {("a", "c"): 3.0, ("c", "a"): 2.0, ("a", "b"): 4.0}
    res = solve_te(g, dem, k=2, workers=1)
    assert res.sizes["presolve"]["commodities"] == 0
    assert res.sizes["presolve"]["demands_fixed"] == 3
    assert res.sizes["variables"] == 0
    np.testing.assert_allclose(res.allocation, res.demands.volume)
    # on the shortest paths (direct links), nowhere else
    assert res.arc_load.sum() == pytest.approx(9.0)
    assert res.certificate is not None and res.certificate["relative_gap"] == pytest.approx(0.0, abs=1e-12)


def hub_instance():
    """Two leaves behind hub h share the bottleneck h-x (capacity 1); the detour h-y-x (y-x has
    capacity 1) is their second path. y->x has the same two bottlenecks (direct, or y-h-x)."""
    g = nx.Graph()
    for leaf in ("l1", "l2"):
        g.add_edge(leaf, "h", capacity=100.0, latency=1.0)
    g.add_edge("h", "x", capacity=1.0, latency=1.0)
    g.add_edge("h", "y", capacity=100.0, latency=2.0)
    g.add_edge("y", "x", capacity=1.0, latency=2.0)
    dem = {("l1", "x"): 1.0, ("l2", "x"): 3.0, ("y", "x"): 0.5}
    return g, dem


def test_interchangeable_demands_merge_and_share_in_proportion() -> None:
    g, dem = hub_instance()
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 2, workers=1)
    red = reduce_total_flow(net, d, paths)
    # all three see the paths {h->x} and {y->x} only: one commodity of volume 4.5
    assert red.stats["commodities"] == 1
    assert red.demands.volume.tolist() == [4.5]
    assert red.stats["arcs_kept"] == 2  # h->x and y->x; everything else can never fill up
    res = solve_te(g, dem, k=2, workers=1)
    plain = solve_te(g, dem, k=2, workers=1, presolve=False)
    assert res.objective_value == pytest.approx(plain.objective_value) == pytest.approx(2.0)
    names = res.network.nodes
    by_name = {(names[s], names[t]): a for s, t, a in zip(res.demands.src.tolist(), res.demands.dst.tolist(),
                                                          res.allocation.tolist(), strict=True)}
    # the commodity's 2 units are split 1 : 3 : 0.5 like the volumes
    assert by_name[("l1", "x")] == pytest.approx(2.0 / 4.5)
    assert by_name[("l2", "x")] == pytest.approx(6.0 / 4.5)
    assert by_name[("y", "x")] == pytest.approx(1.0 / 4.5)


def test_dominated_path_is_dropped() -> None:
    """Demand s->t: path s-a-t uses bottleneck a->t only; path s-b-a-t uses a->t and b->a (also
    a bottleneck), so it can give its flow to the first and is dropped. (The third path s-b-t has
    the thin link b->t, so the demand is not simply routed in full there.)"""
    g = nx.DiGraph()
    g.add_edge("s", "a", capacity=100.0, latency=1.0)
    g.add_edge("a", "t", capacity=1.0, latency=1.0)
    g.add_edge("s", "b", capacity=100.0, latency=1.0)
    g.add_edge("b", "a", capacity=1.0, latency=2.0)
    g.add_edge("b", "t", capacity=1.0, latency=5.0)
    g.add_edge("x", "b", capacity=100.0, latency=1.0)
    g = g.to_undirected()
    dem = {("s", "t"): 5.0, ("x", "a"): 5.0}
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 3, workers=1)
    red = reduce_total_flow(net, d, paths)
    assert red.stats["paths_dominated"] >= 1
    res = solve_te(g, dem, k=3, workers=1)
    plain = solve_te(g, dem, k=3, workers=1, presolve=False)
    assert res.objective_value == pytest.approx(plain.objective_value, rel=1e-9)


def test_hash_collisions_are_caught_by_the_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every arc hashing alike, different arc sets of equal size collide; the exact check must
    keep them apart, so the optimum does not change."""
    ones = lambda n: (np.ones(n, dtype=np.uint64), np.ones(n, dtype=np.uint64))  # noqa: E731
    for seed in range(4):
        g, dem = random_instance(seed, heavy=3.0)
        expected = solve_te(g, dem, k=4, workers=1, presolve=False).objective_value
        monkeypatch.setattr(reduce_mod, "_hash_weights", ones)
        got = solve_te(g, dem, k=4, workers=1)
        monkeypatch.undo()
        assert got.objective_value == pytest.approx(expected, rel=1e-7, abs=1e-9)
        assert_feasible(got)


def test_row_hash_collisions_of_any_kind_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row hashing to 0 makes paths of different lengths, arcs with different path counts and
    demands with different signatures collide; the checks must keep all of them apart."""
    for seed in range(4):
        g, dem = random_instance(seed, heavy=3.0)
        expected = solve_te(g, dem, k=4, workers=1, presolve=False).objective_value
        monkeypatch.setattr(reduce_mod, "_row_hash", lambda t: np.zeros(t.shape[0], dtype=np.int64))
        got = solve_te(g, dem, k=4, workers=1)
        monkeypatch.undo()
        assert got.objective_value == pytest.approx(expected, rel=1e-7, abs=1e-9)
        assert_feasible(got)


def test_groups_matches_numpy_unique() -> None:
    key = np.random.default_rng(3).integers(0, 50, 1000)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rep, ids = reduce_mod._groups(key)
    assert rep.tolist() == first.tolist() and ids.tolist() == inverse.reshape(-1).tolist()


def test_many_paths_per_demand_skip_domination_but_stay_exact() -> None:
    """Above MAX_PATHS_FOR_DOMINATION paths per demand only equal sets are de-duplicated."""
    g, dem = random_instance(2, n=12, p=0.5, pairs=30, heavy=5.0)
    plain = solve_te(g, dem, k=20, workers=1, path_method="ksp", presolve=False)
    red = solve_te(g, dem, k=20, workers=1, path_method="ksp")
    assert red.objective_value == pytest.approx(plain.objective_value, rel=1e-7, abs=1e-9)
    assert_feasible(red)


def test_zero_volume_demands_and_dual_bound_is_an_upper_bound() -> None:
    g, dem = random_instance(1, heavy=2.0)
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 3, workers=1)
    plain = solve_te(g, dem, k=3, workers=1, presolve=False)
    # a zero-volume demand (as a POP client piece can be) is left out with 0 flow
    d.volume[0] = 0.0
    red = reduce_total_flow(net, d, paths)
    assert red.stats["demands_fixed"] >= 1
    assert not np.isin(paths.demand[red.member_path], [0]).any()
    assert red.expand(np.zeros(red.paths.n_paths))[paths.demand == 0].sum() == 0.0
    # any nonnegative prices give an upper bound (weak duality); all zero: the total demand
    d = demands_to_arrays(net, dem)
    assert dual_bound(net, d, paths, np.zeros(net.n_arcs)) == pytest.approx(d.volume.sum())
    for level in (0.05, 0.3, 1.0):
        assert dual_bound(net, d, paths, np.full(net.n_arcs, level)) >= plain.objective_value - 1e-9


def test_presolve_on_as7018_subset_equals_full_lp() -> None:
    top = "caida/2024-08/7018"
    g = load_topology(top, capacity=10_000.0)
    dem = load_demands(top, g, load=0.5, endpoints=50)
    plain = solve_te(g, dem, k=4, workers=1, presolve=False)
    red = solve_te(g, dem, k=4, workers=1)
    assert red.objective_value == pytest.approx(plain.objective_value, rel=1e-7)
    stats = red.sizes["presolve"]
    assert stats["commodities"] < stats["demands"]
    assert red.sizes["variables"] < plain.sizes["variables"]


def test_cli_reports_presolve_and_certificate(tmp_path, capsys) -> None:
    out = tmp_path / "te.json"
    rc = mlte_main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000",
                    "--load", "1.5", "--workers", "1", "-q", "--summary-only", "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["presolve"] is True
    assert doc["certificate"]["relative_gap"] == pytest.approx(0.0, abs=1e-7)
    assert "presolve" in doc["sizes"] and "presolve_s" in doc["timings"]
    assert "optimality: dual bound" in capsys.readouterr().out
    out2 = tmp_path / "te2.json"
    rc = mlte_main(["pce", "te", "--topology", "topozoo/Abilene", "--capacity", "1000",
                    "--load", "1.5", "--workers", "1", "-q", "--summary-only", "--no-presolve",
                    "--json", str(out2)])
    assert rc == 0
    doc2 = json.loads(out2.read_text())
    assert doc2["presolve"] is False and "certificate" not in doc2
    assert doc2["objective"]["value"] == pytest.approx(doc["objective"]["value"], rel=1e-7)


def test_links_in_series_keep_only_the_tightest_row() -> None:
    """s-w1-w2-t is a chain; w1->w2 (3) and w2->t (5) carry exactly the same paths (of s->t and
    w1->t), so only w1->w2 stays; s->w1 (2) carries only s->t and stays too."""
    g = nx.Graph()
    g.add_edge("s", "w1", capacity=2.0)
    g.add_edge("w1", "w2", capacity=3.0)
    g.add_edge("w2", "t", capacity=5.0)
    dem = {("s", "t"): 10.0, ("w1", "t"): 1.0}
    net = network_from_graph(g)
    d = demands_to_arrays(net, dem)
    paths = compute_paths(net, d, 1, workers=1)
    red = reduce_total_flow(net, d, paths)
    assert red.stats["arcs_in_series"] == 1
    assert sorted(red.network.arc_cap.tolist()) == [2.0, 3.0]
    res = solve_te(g, dem, k=1, workers=1)
    assert res.objective_value == pytest.approx(3.0)
    assert_feasible(res)
    assert res.certificate is not None and abs(res.certificate["relative_gap"]) < 1e-9


def test_auto_lp_algorithm_picks_colgen_only_for_the_unpartitioned_presolved_total_flow_lp() -> None:
    g, dem = random_instance(3, heavy=2.0)
    runs = {
        "colgen": solve_te(g, dem, k=3, workers=1),
        "full (no presolve)": solve_te(g, dem, k=3, workers=1, presolve=False),
        "full (POP)": solve_te(g, dem, k=3, workers=1, partitions=2),
        "full (cbc)": solve_te(g, dem, k=3, workers=1, solver="cbc"),
        "full (mlu)": solve_te(g, {k: v / 50 for k, v in dem.items()}, "mlu", k=3, workers=1),
    }
    for label, res in runs.items():
        assert res.settings["lp_algorithm"] == label.split()[0], label
    assert runs["colgen"].objective_value == pytest.approx(runs["full (no presolve)"].objective_value, rel=1e-7)
    assert runs["full (cbc)"].objective_value == pytest.approx(runs["colgen"].objective_value, rel=1e-6)
