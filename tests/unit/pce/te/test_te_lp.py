"""WAN TE LPs: optimality against independent answers, formulation relations, POP, errors."""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from pce.errors import InvalidInputError, NoPathError, UnknownTopologyError
from pce.te.network import demands_to_arrays, network_from_graph
from pce.te.path_lp import build_path_lp
from pce.te.paths import compute_paths
from pce.te.pop import partition_clients, partition_demands, solve_partitioned, split_clients
from pce.te.solve import solve_te
from pce.te.subproblem import SolveOptions, solve_subproblem
from pce.topologies import load_demands, load_topology
from tests.lib.te_instances import connected_gnp

TOL = 1e-6


def random_graph(seed: int, n: int = 8, p: float = 0.4) -> nx.Graph:
    """A connected random graph with integer capacities 1..10 and latencies."""
    rng = np.random.default_rng(seed)
    g = connected_gnp(rng, n, p)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = float(rng.integers(1, 11))
        g.edges[u, v]["latency"] = float(rng.integers(1, 5))
    return g


def ring() -> nx.Graph:
    g = nx.cycle_graph(["a", "b", "c", "d"])
    nx.set_edge_attributes(g, 10.0, "capacity")
    nx.set_edge_attributes(g, 1.0, "latency")
    return g


def check_feasible(res, routed_all: bool) -> None:
    """Loads within capacity, allocation within demand, and all routed for MLU."""
    if res.objective == "total-flow":
        assert np.all(res.arc_load <= res.network.arc_cap * (1 + TOL) + TOL)
    assert np.all(res.allocation <= res.demands.volume * (1 + TOL) + TOL)
    assert np.all(res.allocation >= -TOL)
    if routed_all:
        assert res.allocation == pytest.approx(res.demands.volume, rel=1e-6)


def check_conservation(res) -> None:
    """Arc loads are a flow: net outflow of each node = allocated out - allocated in."""
    net, dem = res.network, res.demands
    n = net.n_nodes
    net_out = np.bincount(net.arc_src, res.arc_load, n) - np.bincount(net.arc_dst, res.arc_load, n)
    expected = np.bincount(dem.src, res.allocation, n) - np.bincount(dem.dst, res.allocation, n)
    assert net_out == pytest.approx(expected, abs=1e-6 * max(1.0, dem.volume.max()))


# ------------------------------------------------------------------------------ optimality, by hand

def test_mlu_on_a_ring_computed_by_hand() -> None:
    # a->c 10 splits over a-b-c and a-d-c; a->b 4 goes a-b or a-d-c-b. Balancing a->b against a->d
    # gives x + y = 14 - x - y = 7 on capacity 10: MLU 0.7 (every other arc carries less).
    demands = {("a", "c"): 10.0, ("a", "b"): 4.0}
    for formulation in ("edge", "path"):
        res = solve_te(ring(), demands, "mlu", formulation, k=2, workers=1)
        assert res.objective_value == pytest.approx(0.7, abs=1e-7)
        check_feasible(res, routed_all=True)
        check_conservation(res)
    # one shortest path only: a->c and a->b both on arc a->b (both 2-hop routes tie, the first wins)
    one = solve_te(ring(), demands, "mlu", "path", k=1, workers=1)
    assert one.objective_value >= 0.7 - TOL


def test_total_flow_on_a_ring_by_hand() -> None:
    # a->c can use both 2-hop routes: 20
    res = solve_te(ring(), {("a", "c"): 100.0}, "total-flow", "edge", workers=1)
    assert res.objective_value == pytest.approx(20.0)
    res = solve_te(ring(), {("a", "c"): 100.0, ("b", "d"): 100.0}, "total-flow", "edge", workers=1)
    # clockwise, a-b-c and b-c-d both cross arc b->c; counter-clockwise, a-d-c and b-a-d both cross
    # arc a->d: at most 10 per direction of rotation, 20 in total (the second demand adds nothing)
    assert res.objective_value == pytest.approx(20.0)
    res = solve_te(ring(), {("a", "b"): 100.0, ("b", "a"): 100.0}, "total-flow", "edge", workers=1)
    # a->b: direct + a-d-c-b; b->a: direct + b-c-d-a -- the 8 arcs are used once each: 40
    assert res.objective_value == pytest.approx(40.0)
    res = solve_te(ring(), {("a", "b"): 100.0, ("c", "d"): 100.0}, "total-flow", "edge", workers=1)
    # c-b-a-d (for c->d) and a-d-c-b (for a->b) share arcs c->b and a->d: only one of them, 30
    assert res.objective_value == pytest.approx(30.0)


@pytest.mark.parametrize("seed", range(6))
def test_single_commodity_total_flow_equals_networkx_max_flow(seed: int) -> None:
    g = random_graph(seed)
    s, t = "n0", f"n{g.number_of_nodes() - 1}"
    directed = g.to_directed()
    expected = nx.maximum_flow_value(directed, s, t, capacity="capacity")
    edge = solve_te(g, {(s, t): 1e6}, "total-flow", "edge", workers=1)
    assert edge.objective_value == pytest.approx(expected, rel=1e-7)
    check_feasible(edge, routed_all=False)
    check_conservation(edge)
    # all simple paths -> the path formulation is exact too
    n_simple = sum(1 for _ in nx.all_simple_paths(g, s, t))
    path = solve_te(g, {(s, t): 1e6}, "total-flow", "path", k=n_simple, path_method="yen", workers=1)
    assert path.objective_value == pytest.approx(expected, rel=1e-7)
    check_conservation(path)


def test_max_concurrent_flow_brute_force_on_tiny_instance() -> None:
    """MLU path LP vs a brute-force grid over the split of two demands on a triangle."""
    g = nx.Graph()
    g.add_edge("x", "y", capacity=4.0, latency=1.0)
    g.add_edge("y", "z", capacity=6.0, latency=1.0)
    g.add_edge("x", "z", capacity=3.0, latency=1.0)
    dem = {("x", "z"): 5.0, ("x", "y"): 2.0}
    best = np.inf
    grid = np.linspace(0, 1, 401)
    for f1, f2 in itertools.product(grid, grid):  # fraction on the direct link
        xz_direct, xz_via = 5 * f1, 5 * (1 - f1)
        xy_direct, xy_via = 2 * f2, 2 * (1 - f2)
        loads = {
            ("x", "z"): xz_direct + xy_via, ("x", "y"): xz_via + xy_direct,
            ("y", "z"): xz_via, ("z", "y"): xy_via,
        }
        caps = {("x", "z"): 3, ("x", "y"): 4, ("y", "z"): 6, ("z", "y"): 6}
        best = min(best, max(loads[a] / caps[a] for a in loads))
    for formulation in ("edge", "path"):
        res = solve_te(g, dem, "mlu", formulation, k=2, workers=1)
        assert res.objective_value <= best + 1e-9
        assert res.objective_value == pytest.approx(best, abs=2e-3)


# ------------------------------------------------------------------------------ formulation relations

@pytest.mark.parametrize("seed", range(4))
def test_path_vs_edge_relations(seed: int) -> None:
    g = random_graph(seed, n=9)
    dem = load_demands_random(g, seed)
    edge_mlu = solve_te(g, dem, "mlu", "edge", workers=1).objective_value
    edge_tf = solve_te(g, dem, "total-flow", "edge", workers=1).objective_value
    for k in (1, 2, 3):
        path_mlu = solve_te(g, dem, "mlu", "path", k=k, workers=1)
        path_tf = solve_te(g, dem, "total-flow", "path", k=k, workers=1)
        assert path_mlu.objective_value >= edge_mlu - 1e-7
        assert path_tf.objective_value <= edge_tf + 1e-6
        check_conservation(path_mlu)
        check_feasible(path_tf, routed_all=False)
    # enough paths to cover every simple path from each source (to any node, as ksp prunes at
    # intermediate nodes): equal to the exact optimum
    k_all = max(sum(1 for _ in nx.all_simple_paths(g, s, t)) for s in {s for s, _ in dem} for t in g if t != s)
    for method in ("ksp", "yen"):
        full = solve_te(g, dem, "mlu", "path", k=k_all, path_method=method, workers=1)
        assert full.objective_value == pytest.approx(edge_mlu, rel=1e-6)
        full_tf = solve_te(g, dem, "total-flow", "path", k=k_all, path_method=method, workers=1)
        assert full_tf.objective_value == pytest.approx(edge_tf, rel=1e-6)


def load_demands_random(g: nx.Graph, seed: int, pairs: int = 12) -> dict[tuple[str, str], float]:
    rng = np.random.default_rng(seed)
    nodes = sorted(g.nodes)
    out = {}
    while len(out) < pairs:
        s, t = rng.choice(nodes, 2, replace=False)
        out[(str(s), str(t))] = float(rng.uniform(1, 8))
    return out


def test_geant_edge_vs_path_on_sndlib_matrix() -> None:
    g = load_topology("sndlib/geant", capacity=100_000)
    dem = load_demands("sndlib/geant", g)
    edge = solve_te(g, dem, "mlu", "edge", workers=1)
    path1 = solve_te(g, dem, "mlu", "path", k=1, workers=1)
    path4 = solve_te(g, dem, "mlu", "path", k=4, workers=1)
    assert path1.objective_value >= path4.objective_value - 1e-9 >= edge.objective_value - 2e-9
    check_conservation(edge)
    check_conservation(path4)


def test_cbc_and_highs_agree() -> None:
    g = random_graph(3, n=7)
    dem = load_demands_random(g, 3, pairs=6)
    for objective in ("mlu", "total-flow"):
        for formulation in ("edge", "path"):
            a = solve_te(g, dem, objective, formulation, k=3, solver="highs", workers=1)
            b = solve_te(g, dem, objective, formulation, k=3, solver="cbc", workers=1)
            assert b.objective_value == pytest.approx(a.objective_value, rel=1e-6)


# ------------------------------------------------------------------------------ POP

def test_pop_with_one_partition_equals_unpartitioned() -> None:
    g = load_topology("sndlib/nobel-eu", capacity=500)
    dem_dict = load_demands("sndlib/nobel-eu", g)
    net = network_from_graph(g)
    dem = demands_to_arrays(net, dem_dict)
    paths = compute_paths(net, dem, 3)
    for objective in ("mlu", "total-flow"):
        whole = solve_subproblem(net, dem, paths, SolveOptions("path", objective))
        pop = solve_partitioned(net, dem, paths, SolveOptions("path", objective), partitions=1, workers=1)
        assert pop.allocation == pytest.approx(whole.allocation, rel=1e-6, abs=1e-6)
        assert pop.arc_load == pytest.approx(whole.arc_load, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("formulation", ["path", "edge"])
def test_pop_combined_allocation_is_feasible_and_bounded_by_optimum(formulation: str) -> None:
    g = load_topology("sndlib/nobel-eu", capacity=300)
    dem = load_demands("sndlib/nobel-eu", g)
    whole = solve_te(g, dem, "total-flow", formulation, k=3, workers=1)
    pop = solve_te(g, dem, "total-flow", formulation, k=3, partitions=4, workers=2, seed=7)
    check_feasible(pop, routed_all=False)
    check_conservation(pop)
    assert pop.objective_value <= whole.objective_value + 1e-6
    assert pop.objective_value > 0.5 * whole.objective_value
    whole_mlu = solve_te(g, dem, "mlu", formulation, k=3, workers=1)
    pop_mlu = solve_te(g, dem, "mlu", formulation, k=3, partitions=4, workers=2, seed=7)
    check_feasible(pop_mlu, routed_all=True)
    assert pop_mlu.objective_value >= whole_mlu.objective_value - 1e-9


def test_pop_parallel_equals_sequential() -> None:
    g = load_topology("sndlib/polska", capacity=400)
    dem = load_demands("sndlib/polska", g)
    seq = solve_te(g, dem, "total-flow", "path", k=3, partitions=3, workers=1, seed=2)
    par = solve_te(g, dem, "total-flow", "path", k=3, partitions=3, workers=2, seed=2)
    assert par.objective_value == pytest.approx(seq.objective_value, rel=1e-9)


def test_partition_is_a_random_split_of_all_demands() -> None:
    groups = partition_demands(103, 4, seed=1)
    assert sorted(np.concatenate(groups).tolist()) == list(range(103))
    assert {len(g) for g in groups} <= {25, 26}
    assert [g.tolist() for g in groups] != [g.tolist() for g in partition_demands(103, 4, seed=2)]
    with pytest.raises(InvalidInputError):
        partition_demands(3, 4)


def test_client_splitting_cuts_the_largest_demands_first() -> None:
    volume = np.array([100.0, 10.0, 1.0, 40.0])
    assert split_clients(volume, 0.0).tolist() == [1, 1, 1, 1]
    # 4 extra pieces: 100 -> 2 (50 each), 100 -> 3 (33.3), 40 -> 2 (20), 100 -> 4 (25)
    assert split_clients(volume, 1.0).tolist() == [4, 1, 1, 2]
    with pytest.raises(InvalidInputError):
        split_clients(volume, -0.5)


def test_partition_clients_keeps_every_demand_volume() -> None:
    rng = np.random.default_rng(0)
    volume = rng.pareto(1.5, 500) + 0.1
    groups = partition_clients(volume, 8, seed=3, split=0.5)
    total = np.zeros(volume.size)
    for idx, vol in groups:
        assert np.all(np.diff(idx) > 0)  # unique and sorted: pieces in one group are merged
        total[idx] += vol
    assert total == pytest.approx(volume)
    # the largest demand is spread over several groups
    assert sum(int(np.argmax(volume)) in idx for idx, _ in groups) > 1


def test_pop_with_client_splitting_is_feasible_and_closer_to_optimum() -> None:
    g = load_topology("sndlib/germany50", capacity=30)
    dem = load_demands("sndlib/germany50", g)
    whole = solve_te(g, dem, "total-flow", "path", k=4, workers=1)
    plain = solve_te(g, dem, "total-flow", "path", k=4, partitions=8, workers=2, seed=1, repair=False)
    split = solve_te(g, dem, "total-flow", "path", k=4, partitions=8, workers=2, seed=1, split=1.0,
                     repair=False)
    for res in (plain, split):
        check_feasible(res, routed_all=False)
        check_conservation(res)
        assert res.objective_value <= whole.objective_value + 1e-6
    assert split.objective_value > plain.objective_value


# ------------------------------------------------------------------------------ structure and errors

def test_path_lp_structure() -> None:
    net = network_from_graph(ring())
    dem = demands_to_arrays(net, {("a", "c"): 10.0, ("a", "b"): 4.0})
    paths = compute_paths(net, dem, 2)
    model = build_path_lp(net, dem, paths, "total-flow")
    assert model.lp.n_cols == paths.n_paths == 4
    assert model.lp.n_rows == 2 + net.n_arcs
    assert model.lp.nnz == paths.n_paths + paths.arcs.size
    mlu = build_path_lp(net, dem, paths, "mlu")
    assert mlu.lp.n_cols == 5 and mlu.lp.nnz == model.lp.nnz + net.n_arcs


def test_invalid_inputs_are_clear_errors() -> None:
    g = ring()
    with pytest.raises(InvalidInputError, match="negative"):
        solve_te(g, {("a", "c"): -1.0})
    with pytest.raises(UnknownTopologyError, match="'zz'"):
        solve_te(g, {("a", "zz"): 1.0})
    with pytest.raises(InvalidInputError, match="paths"):
        solve_te(g, {("a", "c"): 1.0}, k=0)
    with pytest.raises(InvalidInputError, match="objective"):
        solve_te(g, {("a", "c"): 1.0}, objective="fastest")
    with pytest.raises(InvalidInputError, match="no demand"):
        solve_te(g, {("a", "a"): 1.0})
    bad = ring()
    bad.edges["a", "b"]["capacity"] = -3.0
    with pytest.raises(InvalidInputError, match="capacity"):
        solve_te(bad, {("a", "c"): 1.0})


def test_disconnected_demand_endpoints() -> None:
    g = ring()
    g.add_edge("p", "q", capacity=1.0, latency=1.0)
    with pytest.raises(NoPathError, match="a->p") as err:
        solve_te(g, {("a", "c"): 1.0, ("a", "p"): 1.0})
    assert err.value.user_error and err.value.bottleneck == "a->p"
