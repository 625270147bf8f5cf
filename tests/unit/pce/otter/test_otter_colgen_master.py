"""The column-generation master and its batched scoring (issue 27, speed): columns through
switched-off circuits leave the HiGHS model without changing any optimum, the basis survives it,
and the one-call scoring gives each column the coefficient a per-column computation gives."""
from __future__ import annotations

import numpy as np
import pytest

from pce.circuits import candidate_circuits
from pce.otter.colgen import LEVELS, Master
from pce.otter.demand import score
from pce.otter.graph import colgen_state
from pce.otter.graph_flows import ClassRules, GraphFlow
from pce.otter.graph_mesh import flows as mesh_flows
from pce.otter.graph_mesh import mesh
from pce.otter.graph_params import CIRCUIT_PRICE


def random_columns(seed: int, n_agg: int = 12, n_res: int = 8, n_cols: int = 60):
    """A random OTTER-shaped LP: aggregate bandwidths, capacities and (aggregate, coef, rows) columns."""
    rng = np.random.default_rng(seed)
    bw = rng.uniform(1.0, 10.0, n_agg)
    cap = rng.uniform(5.0, 25.0, n_res)
    cols = [(int(rng.integers(n_agg)), float(rng.uniform(0.5, 4.0)),
             [int(r) for r in rng.choice(n_res, int(rng.integers(1, 4)), replace=False)]) for _ in range(n_cols)]
    return bw, cap, cols


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dropping_columns_gives_the_optimum_of_a_cold_model_without_them(seed: int) -> None:
    bw, cap, cols = random_columns(seed)
    full = Master(bw, cap)
    full.add(cols)
    x_all, _z, _y, obj_all = full.solve()
    live = [n % 3 != 0 for n in range(len(cols))]
    full.set_live(live)
    x, _z, _y, obj = full.solve()
    cold = Master(bw, cap)
    cold.add([c for c, keep in zip(cols, live, strict=True) if keep])
    assert obj == pytest.approx(cold.solve()[3], rel=1e-9, abs=1e-9)
    assert len(x) == len(cols) and not x[~np.array(live)].any()
    assert obj <= obj_all + 1e-9
    full.set_live([True] * len(cols))  # they come back: the optimum of every column again
    assert full.solve()[3] == pytest.approx(obj_all, rel=1e-9, abs=1e-9)
    assert len(x_all) == len(cols)


def test_dropping_unused_columns_keeps_the_basis() -> None:
    """Columns at 0 and nonbasic leave without a pivot: the next solve starts optimal (0 iterations)."""
    import highspy

    bw, cap, cols = random_columns(4)
    m = Master(bw, cap)
    m.add(cols)
    _x, _z, _y, obj = m.solve()
    basic = highspy.HighsBasisStatus.kBasic
    status = m.h.getBasis().col_status
    idle = {m.in_model[j] for j, st in enumerate(status) if st != basic}
    assert idle
    m.set_live([n not in idle for n in range(len(cols))])
    assert len(m.in_model) == len(cols) - len(idle)
    assert m.solve()[3] == pytest.approx(obj, rel=1e-12)
    assert m.h.getInfo().simplex_iteration_count == 0


def test_a_basic_column_of_a_switched_off_circuit_stays_at_zero() -> None:
    """A column that is basic when its circuit goes off stays in the model (the basis needs it) but
    its upper bound 0 holds it there, as if deleted; live again, it gets its bound back."""
    bw = np.array([5.0])
    cap = np.array([10.0, 10.0])  # row 0: a circuit, row 1: a lit link
    m = Master(bw, cap)
    m.add([(0, 2.0, [0]), (0, 1.0, [1])])
    x, *_ = m.solve()
    assert x[0] == pytest.approx(5.0)
    m.set_row_upper(0, 0.0)
    m.set_live([False, True])
    assert 0 in m.in_model  # basic: kept
    x, _z, _y, obj = m.solve()
    assert x[0] == pytest.approx(0.0, abs=1e-9) and obj == pytest.approx(5.0)
    m.set_row_upper(0, 10.0)
    m.set_live([True, True])
    assert m.solve()[3] == pytest.approx(10.0)


def small_mesh():
    m = mesh(n_sw=5, n_ots=3, packet_links=5, fibres=3, seed=2)
    fl = [GraphFlow(f.id, f.src, f.dst, f.bw * 60.0, f.cls) for f in mesh_flows(12, 5, 2)]
    circuits = candidate_circuits(m, per_pair=4, pairs={tuple(sorted((f.src, f.dst))) for f in fl})
    return m, fl, circuits


def test_restricting_a_live_master_equals_generating_on_the_subset_from_scratch() -> None:
    """The dive's path: the master over every circuit, then restricted (columns deleted, rows at 0)
    and generated on, reaches the certified optimum of a fresh generation over those circuits only."""
    g, fl, circuits = small_mesh()
    state = colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE)
    assert state.run()
    keep = {c.id for c in circuits[::3]}
    state.restrict(keep)
    assert state.run() and state.certified
    fresh = colgen_state(g, fl, ClassRules(), [c for c in circuits if c.id in keep], CIRCUIT_PRICE)
    assert fresh.run()
    assert state.objective == pytest.approx(fresh.objective, rel=1e-7, abs=1e-7)
    assert len(state.master.in_model) < state.master.n_cols  # columns through the others left
    state.restrict(None)  # every circuit again: the first optimum, certified
    assert state.run()
    full = colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE)
    full.run()
    assert state.objective == pytest.approx(full.objective, rel=1e-7, abs=1e-7)


def test_batched_scoring_gives_each_column_its_own_coefficient() -> None:
    """Every column's unpriced coefficient is Σ over its aggregate's flows of Σ_m 𝒟 on its path,
    per Mbit/s of the aggregate — computed here one column at a time."""
    g, fl, circuits = small_mesh()
    state = colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE, initial_k=1)
    state.run()  # initial columns (one call) and generated ones (one call per round)
    fs = state.fs
    assert state.master.n_cols > state.initial_columns
    for a, p, raw in zip(state.col_agg, state.col_path, state.col_raw, strict=True):
        mem = state.members[a]
        m = np.array(p.metrics(), float)
        want = float(score(fs.shapes[mem], fs.breakpoints[mem], fs.bw[mem], m[None, :]).sum()) / state.agg_bw[a]
        assert raw == pytest.approx(want, rel=1e-7)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_the_greedy_start_is_feasible_and_the_optimum_is_the_lps(seed: int) -> None:
    """A cold master starts from the greedy point: it must satisfy every row, and the solve from it
    must still end at the LP optimum (checked against SciPy's LP solver on the same matrix)."""
    from scipy.optimize import linprog

    bw, cap, cols = random_columns(seed, n_agg=20, n_res=10, n_cols=120)
    m = Master(bw, cap)
    m.add(cols)
    x0 = m.greedy()
    a = np.zeros((len(bw) + len(cap), len(cols)))
    for n, (agg, _c, rows) in enumerate(cols):
        a[agg, n] += 1.0
        for r in rows:
            a[len(bw) + r, n] += 1.0
    rhs = np.concatenate([bw, cap])
    assert (x0 >= 0).all() and (a @ x0 <= rhs + 1e-9).all() and x0.sum() > 0
    want = -linprog(-np.array([c for _a, c, _r in cols]), A_ub=a, b_ub=rhs, bounds=(0, None), method="highs").fun
    x, _z, _y, obj = m.solve()
    assert obj == pytest.approx(want, rel=1e-9)
    assert (a @ x <= rhs + 1e-7).all()


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_the_hinted_start_basis_is_feasible_and_the_solve_from_it_is_the_lps(seed: int) -> None:
    """A cold master seeded with hint columns starts from a basis whose point satisfies every row
    and puts each hinted aggregate whole on its hinted column; the solve from it ends at SciPy's
    LP optimum on the same matrix."""
    import highspy
    from scipy.optimize import linprog

    bw, cap, cols = random_columns(seed, n_agg=20, n_res=10, n_cols=120)
    m = Master(bw, cap)
    m.add(cols)
    m.hint = list(range(0, len(cols), 7))
    m.h.setBasis(m.start_basis())
    m.h.setOptionValue("simplex_iteration_limit", 0)
    m.h.run()
    assert m.h.getInfo().simplex_iteration_count == 0
    x0 = np.asarray(m.h.getSolution().col_value, float)
    a = np.zeros((len(bw) + len(cap), len(cols)))
    for n, (agg, _c, rows) in enumerate(cols):
        a[agg, n] += 1.0
        for r in rows:
            a[len(bw) + r, n] += 1.0
    rhs = np.concatenate([bw, cap])
    assert (x0 >= -1e-9).all() and (a @ x0 <= rhs + 1e-7).all()
    status = m.h.getBasis().col_status
    placed = [n for n in m.hint if status[n] == highspy.HighsBasisStatus.kBasic]
    assert placed and all(x0[n] == pytest.approx(bw[cols[n][0]]) for n in placed)  # whole aggregates
    # a hint that fits whole when its turn comes is taken (here: the first whose rows have room)
    fits = next(n for n in m.hint if all(cap[r] >= bw[cols[n][0]] for r in cols[n][2]))
    assert fits in placed
    m.h.setOptionValue("simplex_iteration_limit", 2**31 - 1)
    want = -linprog(-np.array([c for _a, c, _r in cols]), A_ub=a, b_ub=rhs, bounds=(0, None), method="highs").fun
    x, _z, _y, obj = m.solve()
    assert obj == pytest.approx(want, rel=1e-9)
    assert (a @ x <= rhs + 1e-7).all()


def test_each_aggregation_level_refines_the_next() -> None:
    """Every exact aggregate lies within one class aggregate and every class aggregate within one
    restriction group (the pair level): what ``hint_from`` deals out relies on it."""
    g, fl, circuits = small_mesh()
    fl = fl + [GraphFlow(f"{f.id}-ssh", f.src, f.dst, 3.0, "interactive") for f in fl[:6]]
    levels = {lv: colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE, level=lv).agg for lv in LEVELS}
    for fine, coarse in (("exact", "class"), ("class", "pair")):
        pairs = set(zip(levels[fine].tolist(), levels[coarse].tolist(), strict=True))
        assert len(pairs) == len(set(levels[fine].tolist()))  # one coarse aggregate per fine one
    assert len(set(levels["exact"].tolist())) >= len(set(levels["class"].tolist())) > len(set(levels["pair"].tolist()))


def test_a_refined_state_starts_from_the_coarse_solution() -> None:
    """A class-level state refined from a solved pair-level one gets at most one hint column per
    aggregate, each on a path the coarse solution uses for its group, and its certified optimum is
    at least the coarse one."""
    g, fl, circuits = small_mesh()
    pair = colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE, level="pair")
    assert pair.run()
    fine = pair.refined("class")
    used = {(gi, p.key) for xv, a, p in zip(pair.x.tolist(), pair.col_agg, pair.col_path, strict=True)
            if xv > 1e-9 for gi in [pair.group_of_agg[a]]}
    assert fine.master.hint
    hinted = {fine.col_agg[n] for n in fine.master.hint}
    assert len(hinted) == len(fine.master.hint)
    assert all((fine.group_of_agg[fine.col_agg[n]], fine.col_path[n].key) in used for n in fine.master.hint)
    # a finer aggregation can split any coarse solution in proportion to bandwidth at equal value
    assert fine.run() and fine.objective >= pair.objective - 1e-7 * max(1.0, pair.objective)


def test_a_state_refined_from_an_unsolved_one_starts_unseeded() -> None:
    """Nothing to deal out before the coarse master has a solution: no hint, the greedy start."""
    g, fl, circuits = small_mesh()
    fine = colgen_state(g, fl, ClassRules(), circuits, CIRCUIT_PRICE, level="pair").refined("exact")
    assert fine.master.hint == []
    assert fine.run() and fine.certified
