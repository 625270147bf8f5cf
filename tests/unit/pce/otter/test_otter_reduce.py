"""The exact presolve of the OTTER LP (pce.otter.reduce) keeps the optimum and a feasible solution."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pce.otter.reduce as reduce_mod
from app.cli.main import main
from pce.otter.matrix import build_matrix, solve_problem
from pce.otter.problem import make_problem
from pce.otter.scenario import generate_flows, generate_network


def assert_feasible(prob, x) -> None:
    mat, rhs, _ = prob.constraint_matrix()
    assert np.all(x >= -1e-9)
    assert np.all(mat @ x <= rhs * (1 + 1e-7) + 1e-7)


def check_exact(prob) -> dict:
    whole = build_matrix(prob).solve()
    red_model = build_matrix(prob, presolve=True)
    red = red_model.solve()
    assert red.objective == pytest.approx(whole.objective, rel=1e-7, abs=1e-9)
    assert red.x.size == prob.n_cols
    assert red.objective == pytest.approx(float(prob.col_coef @ red.x), rel=1e-9)
    assert_feasible(prob, red.x)
    stats = red.reduction_stats
    assert stats is not None and red_model.n_cols == stats["columns_kept"] <= prob.n_cols
    return stats


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scale", [0.002, 0.01, 0.05])
def test_presolve_keeps_the_optimum_on_generated_instances(seed: int, scale: float) -> None:
    """From heavily contended (scale 0.002: most rows bind) to loose networks."""
    net = generate_network(4, 6, 4, seed=seed, scale=scale)
    fl = generate_flows(net, n=300, seed=seed)
    stats = check_exact(make_problem(net, fl, top_n=3))
    assert stats["coupling_rows_binding"] <= stats["coupling_rows"]


@pytest.mark.parametrize("seed", range(3))
def test_presolve_exact_without_c4_without_aggregation_and_with_pins(seed: int) -> None:
    net = generate_network(3, 5, 4, seed=seed, scale=0.003, edge_factor=2.0)
    fl = generate_flows(net, n=200, seed=seed)
    check_exact(make_problem(net, fl, top_n=2, use_c4=False))
    check_exact(make_problem(net, fl, top_n=2, aggregate=False))
    probe = make_problem(net, fl, top_n=2)
    rng = np.random.default_rng(seed)
    allowed = rng.random((len(fl), probe.col_slot.max() + 1)) < 0.5
    allowed[:, 0] = True
    check_exact(make_problem(net, fl, top_n=2, allowed=allowed))


def test_uncontended_lp_is_solved_without_a_solver_column() -> None:
    """With capacities far above the load no row can bind: every aggregate goes whole on its best column."""
    net = generate_network(3, 4, 3, seed=2, scale=1000.0, edge_factor=1e6)
    fl = generate_flows(net, n=150, seed=2)
    prob = make_problem(net, fl, top_n=2)
    stats = check_exact(prob)
    assert stats["coupling_rows_binding"] == 0 and stats["columns_kept"] == 0
    assert stats["aggregates_fixed"] == prob.n_aggs
    best = np.full(prob.n_aggs, -np.inf)
    np.maximum.at(best, prob.col_agg, prob.col_coef)
    assert build_matrix(prob, presolve=True).solve().objective == pytest.approx(float(prob.agg_bw @ best))


def test_hash_collisions_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row weighing the same makes different row sets of equal size collide; the entry-by-entry
    check must keep them apart."""
    monkeypatch.setattr(reduce_mod, "_row_weights", lambda n: np.ones(n, dtype=np.uint64))
    for seed in range(3):
        net = generate_network(4, 6, 4, seed=seed, scale=0.002)
        fl = generate_flows(net, n=300, seed=seed)
        check_exact(make_problem(net, fl, top_n=3))


def test_simulator_path_keeps_the_unreduced_lp() -> None:
    """solve_problem's default (used by the simulator's policies) does not presolve."""
    net = generate_network(3, 4, 3, seed=4, scale=0.005)
    prob = make_problem(net, generate_flows(net, n=100, seed=4), top_n=2)
    assert solve_problem(prob).reduction_stats is None
    assert solve_problem(prob, presolve=True).reduction_stats is not None


def test_cli_otter_solve_presolve_and_method(tmp_path, capsys) -> None:
    docs = {}
    for name, extra in (("default", []), ("plain", ["--no-presolve"]), ("ipm", ["--lp-method", "ipm"])):
        out = tmp_path / f"{name}.json"
        assert main(["pce", "otter-solve", "--sources", "4", "--dests", "4", "--paths", "4", "--flows", "500",
                     "--json", str(out), *extra]) == 0
        docs[name] = json.loads(out.read_text())
    capsys.readouterr()
    assert docs["default"]["presolve"]["columns_kept"] < docs["default"]["columns"]
    assert docs["plain"]["presolve"] is None
    for name in ("plain", "ipm"):
        assert docs[name]["objective"] == pytest.approx(docs["default"]["objective"], rel=1e-7)
    assert docs["default"]["total_seconds"] >= docs["default"]["solve_seconds"]
