"""Graph mode's vectorised steps give what the plain loops they replaced give (issue 15 speed-up).

The 1 s placement target made the rounding, the dealing of aggregates to slots and the circuit
incidence numpy/list code; each is compared here with a straightforward loop written from its
docstring, on random shares and on the benchmark's mesh (where every step really runs)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pce.otter import graph as gm
from pce.otter.graph_flows import ClassRules
from pce.otter.graph_mesh import flows, mesh


def _preferred_loop(share: np.ndarray, prob_agg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per aggregate: floor(share·n) members per slot, largest remainders get the rest, members in
    flow order dealt to slots by decreasing share (stable)."""
    N = share.shape[0]
    preferred, weight = np.full(N, -1, np.int64), np.zeros(N)
    for a in sorted(set(prob_agg.tolist())):
        members = [i for i in range(N) if prob_agg[i] == a]
        frac, n = share[members[0]], len(members)
        counts = [math.floor(v * n + 1e-9) for v in frac]
        rest = int(round(frac.sum() * n)) - sum(counts)
        rem = sorted(range(len(frac)), key=lambda j: (-(frac[j] * n - counts[j]), j))
        for j in rem[: max(rest, 0)]:
            counts[j] += 1
        it = iter(members)
        for j in sorted(range(len(frac)), key=lambda j: (-frac[j], j)):
            for _ in range(counts[j]):
                m = next(it, None)
                if m is not None:
                    preferred[m], weight[m] = j, frac[j]
    return preferred, weight


@pytest.mark.parametrize("seed", range(6))
def test_dealing_aggregates_to_slots_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_aggs, K = 40, 6
    sizes = rng.integers(1, 7, n_aggs)
    prob_agg = rng.permutation(np.repeat(np.arange(n_aggs), sizes))
    rows = rng.random((n_aggs, K)) * (rng.random((n_aggs, K)) < 0.5)
    rows[::3] = np.round(rows[::3] * 4) / 4  # exact quarters: ties in shares and in remainders
    total = rows.sum(axis=1, keepdims=True)
    rows = np.where(total > 1, rows / np.maximum(total, 1e-12), rows)  # ≤ 1 per aggregate, as the LP gives
    share = rows[prob_agg]
    got_p, got_w = gm._preferred(share, prob_agg)
    want_p, want_w = _preferred_loop(share, prob_agg)
    assert got_p.tolist() == want_p.tolist()
    assert got_w.tolist() == want_w.tolist()


def test_dealing_with_no_flows() -> None:
    p, w = gm._preferred(np.zeros((0, 3)), np.zeros(0, np.int64))
    assert p.shape == (0,) and w.shape == (0,)


@pytest.fixture(scope="module")
def bench_instance() -> gm.GraphInstance:
    g = mesh(seed=3)
    fl = flows(800, 20, 3)
    gm.clear_caches()
    circuits = gm.cached_candidate_circuits(g, 2, {tuple(sorted((f.src, f.dst))) for f in fl})
    return gm.build_instance(g, fl, ClassRules(), circuits, 4)


def test_circuit_incidence_matches_the_slot_lists(bench_instance: gm.GraphInstance) -> None:
    inst = bench_instance
    want = [(i, j, c) for i, row in enumerate(inst.slot_circuits) for j, cids in enumerate(row) for c in cids]
    got = list(zip(inst.uses_flow.tolist(), inst.uses_slot.tolist(),
                   [inst.circuit_ids[c] for c in inst.uses_circuit], strict=True))
    assert want and got == want


def test_usable_and_carried_match_the_loops(bench_instance: gm.GraphInstance) -> None:
    inst = bench_instance
    rng = np.random.default_rng(1)
    base = (inst.cand.paths >= 0) & (rng.random(inst.cand.paths.shape) < 0.9)
    keep = set(inst.circuit_ids[::3])
    want = base.copy()
    for i, row in enumerate(inst.slot_circuits):
        for j, cids in enumerate(row):
            if set(cids) - keep:
                want[i, j] = False
    assert (gm._usable(inst, base, keep) == want).all() and want.sum() < base.sum()
    share = rng.random(inst.cand.paths.shape) * (inst.cand.paths >= 0) / inst.cand.paths.shape[1]
    carried: dict[str, float] = {}
    for i, row in enumerate(inst.slot_circuits):
        for j, cids in enumerate(row):
            for c in cids:
                carried[c] = carried.get(c, 0.0) + share[i, j] * inst.flowset.bw[i]
    want_c = {c: v for c, v in carried.items() if v > 1e-9}
    got_c = gm._carried(inst, share)
    assert list(got_c) == list(want_c) and got_c == pytest.approx(want_c, rel=1e-12)


def _round_loop(inst: gm.GraphInstance, share: np.ndarray, allowed: np.ndarray, prob_agg: np.ndarray
                ) -> tuple[list[int], list[float]]:
    """Flows by (−dealt share, −bw, index); each takes the first of its tries (dealt slot, then LP
    share, tolerance, slot) with room for all of it, else the roomiest if it has any room."""
    N, K = share.shape
    preferred, weight = _preferred_loop(share, prob_agg)
    residual = inst.network.link_cap.astype(float).copy()
    bw = inst.flowset.bw
    slot, alloc = [-1] * N, [0.0] * N
    for i in sorted(range(N), key=lambda i: (-weight[i], -bw[i], i)):
        ok = [j for j in range(K) if allowed[i, j] and inst.cand.paths[i, j] >= 0]
        ok.sort(key=lambda j: (j != preferred[i], -share[i, j], -float(inst.cand.score[i, j]), j))
        links = [[h for h in inst.network.path_links[inst.cand.paths[i, j]] if h >= 0] for j in ok]
        room = [min((residual[h] for h in ls), default=math.inf) for ls in links]
        fit = [n for n, r in enumerate(room) if r >= bw[i] * (1 - 1e-9)]
        if fit:
            n = fit[0]
        elif room and max(room) > 1e-9:
            n = room.index(max(room))
        else:
            continue
        amount = min(bw[i], room[n])
        for h in links[n]:
            residual[h] -= amount
        slot[i], alloc[i] = ok[n], amount
    return slot, alloc


def test_whole_flow_rounding_matches_the_loop(bench_instance: gm.GraphInstance) -> None:
    inst = bench_instance
    N, K = inst.cand.paths.shape
    rng = np.random.default_rng(2)
    prob_agg = np.arange(N) // 2  # pairs of flows share an aggregate's shares
    rows = rng.random((N, K)) * (inst.cand.paths >= 0)
    rows /= np.maximum(rows.sum(axis=1, keepdims=True), 1e-12)
    share = rows[prob_agg[::2]][prob_agg] if N % 2 == 0 else rows[prob_agg]
    allowed = (inst.cand.paths >= 0) & ~inst.circuit_slots  # lit links only: contended
    slot, alloc = gm._round(inst, share, allowed, prob_agg, np.full(N, -1))
    want_slot, want_alloc = _round_loop(inst, share, allowed, prob_agg)
    assert slot.tolist() == want_slot
    assert alloc.tolist() == pytest.approx(want_alloc, abs=1e-9)
    assert 0 < alloc.sum() < 0.95 * inst.flowset.bw.sum()  # contended: some flows are cut or left out
    assert (slot == -1).any() and ((alloc > 0) & (alloc < inst.flowset.bw - 1e-6)).any()
