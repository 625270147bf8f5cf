"""LP optimum checked by hand and against an independent dense formulation (scipy linprog)."""
import numpy as np
import pytest
from scipy.optimize import linprog

from pce.errors import InvalidInputError
from pce.otter.demand import EPS
from pce.otter.matrix import build_matrix
from pce.otter.model import build_model
from pce.otter.problem import make_problem
from pce.otter.scenario import Network, generate_flows, generate_network
from tests.lib.otter_helpers import flows, two_path_network


def solve_both(problem):
    a = build_matrix(problem).solve()
    b = build_model(problem).solve("highs")
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    return a


def test_hand_computed_optimum_with_shared_link_binding():
    # f0 wants RTT ≤ 50: score 4 on p0, 3+ε on p1; f1 ignores RTT: score 4 on both.
    # Shared link 12 < 16 requested: best is 12 units at 4/8 per unit → objective 6, f0 all on p0.
    net = two_path_network(shared=12.0)
    fl = flows({"src": 0, "bw": 8.0, "rtt": ("step", 50.0)}, {"src": 0, "bw": 8.0})
    prob = make_problem(net, fl, aggregate=False)
    sol = solve_both(prob)
    assert sol.objective == pytest.approx(6.0)
    assert sol.allocated() == pytest.approx(12.0)
    x = {(int(a), int(p)): v for a, p, v in zip(prob.col_agg, prob.col_path, sol.x, strict=True)}
    assert x[(0, 1)] == pytest.approx(0.0, abs=1e-9)  # f0 never on the slow path while p0 has room


def test_c4_binds_and_dropping_it_allocates_more():
    # f0 needs 16 vCPU for its 8 Mbit/s; the edge (p0) has 8 vCPU → at most 4 Mbit/s there.
    net = two_path_network(edge_cpu=8.0)
    fl = flows({"src": 0, "bw": 8.0, "rtt": ("step", 50.0), "res": (16.0, 0.0, 0.0)})
    with_c4 = solve_both(make_problem(net, fl))
    assert with_c4.objective == pytest.approx(4 / 8 * 4 + 4 / 8 * (3 + EPS))
    x = dict(zip(with_c4.problem.col_path.tolist(), with_c4.x, strict=True))
    assert x[0] == pytest.approx(4.0) and x[1] == pytest.approx(4.0)
    without = solve_both(make_problem(net, fl, use_c4=False))
    assert without.objective == pytest.approx(4.0)


def test_explicit_y_and_c5_formulation_has_same_optimum():
    net = generate_network(3, 4, 3, seed=5, scale=0.002)
    fl = generate_flows(net, n=120, seed=5)
    prob = make_problem(net, fl, top_n=2)
    a = build_matrix(prob).solve()
    b = build_model(prob, explicit_resources=True).solve("highs")
    assert a.objective == pytest.approx(b.objective, rel=1e-7)


def test_cbc_agrees_with_highs():
    net = generate_network(2, 4, 2, seed=3, scale=0.002)
    fl = generate_flows(net, n=40, seed=3)
    prob = make_problem(net, fl)
    assert build_model(prob).solve("cbc").objective == pytest.approx(build_matrix(prob).solve().objective, rel=1e-6)


def dense_optimum(net: Network, fl) -> float:
    """The paper's LP written independently: x_{f,p} for every path from s_f, no aggregation."""
    from pce.otter.demand import score

    cols = [(f, p) for f in range(len(fl)) for p in range(net.n_paths) if net.path_src[p] == fl.src[f]]
    c = np.array([
        -score(fl.shapes[f], fl.breakpoints[f], fl.bw[f], net.path_metrics[p]) / fl.bw[f] for f, p in cols
    ])
    rows, rhs = [], []
    for f in range(len(fl)):
        rows.append([1.0 if cf == f else 0.0 for cf, _ in cols])
        rhs.append(fl.bw[f])
    for link in range(net.n_links):
        rows.append([1.0 if link in net.path_links[p] else 0.0 for _, p in cols])
        rhs.append(net.link_cap[link])
    for d in np.flatnonzero(net.dest_is_edge):
        for pi in range(3):
            rows.append([fl.res[f, pi] / fl.bw[f] if net.path_dst[p] == d else 0.0 for f, p in cols])
            rhs.append(net.dest_cap[d, pi])
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_independent_dense_formulation(seed):
    net = generate_network(2, 4, 3, seed=seed, scale=0.001)
    fl = generate_flows(net, n=30, seed=seed)
    prob = make_problem(net, fl, top_n=4, aggregate=False)  # all destinations: the full LP
    assert solve_both(prob).objective == pytest.approx(dense_optimum(net, fl), rel=1e-7)


def test_aggregation_is_a_restriction_and_exact_for_identical_flows():
    net = generate_network(2, 4, 3, seed=9, scale=0.001)
    fl = generate_flows(net, n=200, seed=9)
    full = build_matrix(make_problem(net, fl, aggregate=False)).solve().objective
    agg = build_matrix(make_problem(net, fl, aggregate=True)).solve().objective
    assert agg <= full + 1e-6
    # identical flows merge into one aggregate with the same optimum as unmerged
    same = flows(*[{"src": 0, "bw": 8.0, "rtt": ("step", 50.0), "res": (1.0, 0.0, 0.0)}] * 3)
    net2 = two_path_network(shared=12.0, edge_cpu=2.0)
    p_agg = make_problem(net2, same)
    assert p_agg.n_aggs == 1
    a = build_matrix(p_agg).solve().objective
    b = build_matrix(make_problem(net2, same, aggregate=False)).solve().objective
    assert a == pytest.approx(b)


def test_top_n_keeps_best_destinations():
    net = two_path_network(edge_cpu=8.0)  # dest 0 via RTT 10, dest 1 via RTT 100
    fl = flows({"src": 0, "bw": 1.0, "rtt": ("step", 50.0)})
    prob = make_problem(net, fl, top_n=1)
    assert prob.col_path.tolist() == [0]


def test_invalid_inputs_raise_clear_errors():
    with pytest.raises(InvalidInputError, match="bandwidth"):
        flows({"src": 0, "bw": -1.0})
    with pytest.raises(InvalidInputError, match="shape"):
        flows({"src": 0, "bw": 1.0, "rtt": ("cubic", 5.0)})
    with pytest.raises(InvalidInputError):
        generate_network(0, 4, 4)
    with pytest.raises(InvalidInputError, match="top-n"):
        make_problem(two_path_network(), flows({"src": 0, "bw": 1.0}), top_n=0)
    from pce.errors import UnknownTopologyError

    with pytest.raises(UnknownTopologyError):
        Network.from_paths(1, [(0, 0, ["nope"], 1, 0, 0, 1)], {"a": 1.0}, [None])
    from pce.otter.model import pulp_solver

    with pytest.raises(InvalidInputError, match="solver"):
        pulp_solver("gurobi")


@pytest.mark.parametrize("method", ["primal", "dual", "ipm"])
def test_lp_methods_agree(method):
    net = generate_network(2, 4, 3, seed=6, scale=0.002)
    fl = generate_flows(net, n=80, seed=6)
    prob = make_problem(net, fl)
    ref = build_matrix(prob).solve().objective
    assert build_matrix(prob).solve(method=method).objective == pytest.approx(ref, rel=1e-6)
    with pytest.raises(InvalidInputError):
        build_matrix(prob).solve(method="barrier")
