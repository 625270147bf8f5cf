"""The paper's two scaling measures: top-n destinations per flow and flow aggregates.

*Top-n* (digest: n = 4): destinations ranked by the flow's best Σ_m 𝒟 over the paths to them
(ties: higher mean over those paths, then lower index); only their paths become LP columns.
*Aggregates*: flows with equal source, candidate destinations, profile, demand shapes, breakpoints
and bandwidth quantised to 5% (log) buckets — plus equal pin state — share one set of variables,
i.e. are routed with the same per-path fractions. Under that common routing the aggregate's
objective coefficient Σ_f 𝒟_f,p / bw_A and its resource sums are exact (resources are summed, not
keyed, so they need no quantisation).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pce.errors import InvalidInputError
from pce.otter.demand import score
from pce.otter.scenario import FlowSet, Network

BUCKET = 0.05  # quantisation of breakpoints / bandwidth for aggregate keys (5% buckets)


@dataclass
class Candidates:
    """Per flow: its top-n destinations (ascending, -1 padded) and their paths with Σ_m 𝒟 scores."""

    dests: np.ndarray  # (N, n)
    paths: np.ndarray  # (N, n*K), -1 padded
    score: np.ndarray  # (N, n*K) float32, 0 where padded

    def take(self, idx: np.ndarray) -> Candidates:
        return Candidates(self.dests[idx], self.paths[idx], self.score[idx])


def candidates(network: Network, flows: FlowSet, top_n: int = 4, chunk_cells: int = 2_000_000) -> Candidates:
    """Score every flow against every path from its source and keep its ``top_n`` destinations."""
    if top_n < 1:
        raise InvalidInputError("top-n must be ≥ 1")
    S, D, K = network.pair_paths.shape
    n = min(top_n, D)
    N = len(flows)
    dests = np.empty((N, n), np.int64)
    paths = np.empty((N, n * K), np.int64)
    scores = np.empty((N, n * K), np.float32)
    step = max(1, chunk_cells // max(1, D * K))
    metrics = np.vstack([network.path_metrics, np.zeros((1, 4))])  # row -1 = padding
    for lo in range(0, N, step):
        hi = min(N, lo + step)
        pp = network.pair_paths[flows.src[lo:hi]]  # (c, D, K)
        valid = pp >= 0
        sc = score(
            flows.shapes[lo:hi, None, None, :],
            flows.breakpoints[lo:hi, None, None, :],
            flows.bw[lo:hi, None, None],
            metrics[pp],
        )
        sc = np.where(valid, sc, -np.inf)
        best = sc.max(axis=2)
        cnt = valid.sum(axis=2)
        mean = np.where(cnt > 0, np.where(valid, sc, 0).sum(axis=2) / np.maximum(cnt, 1), -np.inf)
        order = np.lexsort((np.broadcast_to(np.arange(D), best.shape), -mean, -best), axis=-1)[:, :n]
        top = np.sort(order, axis=1)
        rows = np.arange(hi - lo)[:, None]
        tp = pp[rows, top].reshape(hi - lo, n * K)
        ts = sc[rows, top].reshape(hi - lo, n * K)
        reachable = np.isfinite(best[rows, top])
        dests[lo:hi] = np.where(reachable, top, -1)
        paths[lo:hi] = np.where(np.isfinite(ts), tp, -1)
        scores[lo:hi] = np.where(np.isfinite(ts), ts, 0.0)
    return Candidates(dests, paths, scores)


def quantise(values: np.ndarray) -> np.ndarray:
    """5% log buckets: values within ~5% of each other share a bucket."""
    return np.round(np.log(np.maximum(values, 1e-12)) / np.log1p(BUCKET)).astype(np.int64)


def aggregate_keys(flows: FlowSet, idx: np.ndarray, cand: Candidates, pin_key: np.ndarray | None = None):
    """Group flows ``idx`` into aggregates; returns (inverse (len(idx),), number of aggregates).

    ``cand`` holds the candidates of exactly the flows ``idx`` (same order); ``pin_key`` an integer
    per flow that must also match (e.g. the pinned path set), -1 when unpinned.
    """
    cols = [
        flows.src[idx][:, None],
        cand.dests,
        flows.profile[idx][:, None],
        flows.shapes[idx].astype(np.int64),
        quantise(flows.breakpoints[idx]),
        quantise(flows.bw[idx])[:, None],
    ]
    if pin_key is not None:
        cols.append(np.asarray(pin_key, np.int64)[:, None])
    keys = np.concatenate(cols, axis=1)
    if len(idx) == 0:
        return np.zeros(0, np.int64), 0
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return inverse, int(inverse.max()) + 1
