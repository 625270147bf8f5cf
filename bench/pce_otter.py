"""OTTER benchmarks (issue 3): allocation of the §7.2 policies and LP scale.

1. Allocation: 8×8 sources×destinations, 8 paths, rates 20K/30K/40K flows/s, 10 s flows, run at
   ``--scale`` (rate AND capacities × scale; full 40K flows/s is 400K active flows, beyond two
   cores for the LP policies), every destination a candidate (``--top-n 8``, the plain §4 LP);
   GREEDY and PER+PATHPIN are repeated with top-4 destinations for comparison. Ratios in the same run: PER+PATHPIN vs GREEDY (target ≥ 1.26) and vs
   OPT+PATHPIN / OPT (target ≥ 0.90).
2. Scale: 64×64, 8 paths, 20,000 active flows, top-4 destinations: problem + build + solve time of
   the highspy matrix path (target ≤ 10 s) against the PuLP path on the same problem.

Network calibration (docs/performance/pce-otter.md §3-4): the paper gives no link capacities, and
its edge resources taken literally hold almost no flows. Link capacities are ``--capacity-factor``
× the sampled path throughput (access links ``--shared-factor`` × the sum over their paths), edge
resources ``--edge-factor`` × Table 4's. The defaults (1.95 / 0.4 / 30, pce/otter/calibration.py)
are fitted to the paper's GREEDY and OPT columns by bench/otter_calibrate_edge.py, never to
PER+PATHPIN. ``--capacity-factor 2 --shared-factor 0.4 --edge-factor 1`` is the GREEDY-only fit,
``--capacity-factor 1 --shared-factor 0.5 --edge-factor 1`` the uncalibrated network.

Usage: bench/pce_otter.py --json PATH [--quick] [--capacity-factor F] [--shared-factor F] [--edge-factor F]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pce.otter.aggregate import candidates  # noqa: E402
from pce.otter.calibration import (  # noqa: E402
    CALIBRATED_CAPACITY_FACTOR,
    CALIBRATED_EDGE_FACTOR,
    CALIBRATED_SHARED_FACTOR,
)
from pce.otter.matrix import build_matrix  # noqa: E402
from pce.otter.model import build_model  # noqa: E402
from pce.otter.problem import make_problem  # noqa: E402
from pce.otter.scenario import generate_flows, generate_network  # noqa: E402
from pce.otter.sim import simulate  # noqa: E402

POLICIES = ("GREEDY", "PER+PATHPIN", "OPT+PATHPIN", "OPT")
# fitted to the paper's GREEDY and OPT columns (Table 7), see bench/otter_calibrate_edge.py
CAPACITY_FACTOR = CALIBRATED_CAPACITY_FACTOR
SHARED_FACTOR = CALIBRATED_SHARED_FACTOR
EDGE_FACTOR = CALIBRATED_EDGE_FACTOR


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def scenario(rate: float, scale: float, duration: float, seed: int, pad: float,
             capacity_factor: float, shared_factor: float, edge_factor: float = EDGE_FACTOR):
    """The allocation runs' 8×8 network and flows; shared with bench/otter_calibrate.py so the
    calibration sees exactly the benchmark's instance. Returns (network, flows, measure window)."""
    net = generate_network(8, 8, 8, seed=seed, scale=scale, capacity_factor=capacity_factor,
                           shared_factor=shared_factor, edge_factor=edge_factor)
    flows = generate_flows(net, rate=rate * scale, duration=pad + duration + pad, seed=seed)
    flows.arrival[:] -= pad  # warm-up [-pad, 0), measured [0, duration], cool-down after
    return net, flows, {"measure_from": 0.0, "measure_to": duration}


def allocation(rates, scale: float, duration: float, seed: int, top_n: int, pad: float,
               capacity_factor: float = CAPACITY_FACTOR, shared_factor: float = SHARED_FACTOR,
               edge_factor: float = EDGE_FACTOR) -> list[dict]:
    out = []
    for rate in rates:
        net, flows, window = scenario(rate, scale, duration, seed, pad, capacity_factor, shared_factor, edge_factor)
        cand = candidates(net, flows, top_n)
        row = {"rate": rate, "scale": scale, "effective_rate": rate * scale, "flows_simulated": len(flows),
               "warmup_s": pad, "cooldown_s": pad, "top_n": top_n, "capacity_factor": capacity_factor,
               "shared_factor": shared_factor, "edge_factor": edge_factor, "policies": {}}
        for pol in POLICIES:
            r = simulate(net, flows, pol, cand=cand, top_n=top_n, period=1.0, opt_epoch=0.1, **window)
            row["policies"][pol] = r.as_dict()
            log(f"rate {rate:g} ×{scale:g}: {pol:12s} bytes {r.allocated_bytes_fraction:.3f} "
                f"sat {r.satisfaction:.3f} solves {r.solves} wall {r.wall_seconds:.1f}s")
        b = {k: v["allocated_bytes_fraction"] for k, v in row["policies"].items()}
        row["ratios"] = {
            "PER+PATHPIN/GREEDY": b["PER+PATHPIN"] / b["GREEDY"],
            "PER+PATHPIN/OPT+PATHPIN": b["PER+PATHPIN"] / b["OPT+PATHPIN"],
            "PER+PATHPIN/OPT": b["PER+PATHPIN"] / b["OPT"],
        }
        row["targets_met"] = {
            "vs_greedy_ge_1.26": row["ratios"]["PER+PATHPIN/GREEDY"] >= 1.26,
            "vs_opt_pathpin_within_10pct": row["ratios"]["PER+PATHPIN/OPT+PATHPIN"] >= 0.90,
            "vs_opt_within_10pct": row["ratios"]["PER+PATHPIN/OPT"] >= 0.90,
        }
        log(f"rate {rate:g}: ratios {row['ratios']}")
        # the same flows with only the top-4 destinations (the LP scaling measure)
        cand4 = candidates(net, flows, 4)
        row["top4"] = {pol: simulate(net, flows, pol, cand=cand4, top_n=4, period=1.0, **window).as_dict()
                       for pol in ("GREEDY", "PER+PATHPIN")}
        log(f"rate {rate:g} top-4: " + ", ".join(f"{k} {v['allocated_bytes_fraction']:.3f}" for k, v in row["top4"].items()))
        out.append(row)
    return out


def scale_lp(n_flows: int, sd: int, seed: int, pulp_too: bool) -> dict:
    net = generate_network(sd, sd, 8, seed=seed)
    flows = generate_flows(net, n=n_flows, seed=seed)
    t0 = time.perf_counter()
    prob = make_problem(net, flows, top_n=4)
    t_prob = time.perf_counter() - t0
    mm = build_matrix(prob)
    sol = mm.solve()
    res = {
        "sources": sd, "dests": sd, "paths": 8, "flows": n_flows, "top_n": 4,
        "aggregates": prob.n_aggs, "columns": prob.n_cols, "rows": mm.n_rows, "nnz": mm.nnz,
        "matrix": {"problem_seconds": t_prob, "build_seconds": mm.build_seconds,
                   "solve_seconds": sol.solve_seconds,
                   "total_seconds": t_prob + mm.build_seconds + sol.solve_seconds,
                   "objective": sol.objective},
        "cpus": os.cpu_count(),
    }
    log(f"scale {sd}x{sd} {n_flows} flows: matrix {res['matrix']['total_seconds']:.2f}s ({prob.n_cols} columns)")
    ipm = build_matrix(prob).solve(method="ipm")
    res["matrix_ipm"] = {"solve_seconds": ipm.solve_seconds, "objective": ipm.objective,
                         "total_seconds": t_prob + mm.build_seconds + ipm.solve_seconds}
    log(f"  matrix with IPM: {res['matrix_ipm']['total_seconds']:.2f}s")
    # the otter-solve default: exact presolve (pce/otter/reduce.py), then primal simplex
    for method in ("primal", "ipm"):
        red = build_matrix(prob, presolve=True)
        rs = red.solve(method=method)
        res[f"presolve_{method}"] = {
            "build_seconds": red.build_seconds, "solve_seconds": rs.solve_seconds,
            "total_seconds": t_prob + red.build_seconds + rs.solve_seconds, "objective": rs.objective,
            "objective_rel_diff": abs(rs.objective - sol.objective) / max(1.0, abs(sol.objective)),
            "rows": red.n_rows, "columns": red.n_cols, "reduction": rs.reduction_stats,
        }
        log(f"  presolve + {method}: {res[f'presolve_{method}']['total_seconds']:.2f}s "
            f"({red.n_rows} rows x {red.n_cols} columns)")
    res["presolve_speedup"] = res["matrix"]["total_seconds"] / res["presolve_primal"]["total_seconds"]
    res["target_total_le_10s"] = res["presolve_primal"]["total_seconds"] <= 10.0  # otter-solve's defaults
    if pulp_too:
        pm = build_model(prob)
        ps = pm.solve("highs")
        res["pulp"] = {"problem_seconds": t_prob, "build_seconds": pm.build_seconds, "solve_seconds": ps.solve_seconds,
                       "total_seconds": t_prob + pm.build_seconds + ps.solve_seconds, "objective": ps.objective}
        res["pulp_over_matrix_time"] = res["pulp"]["total_seconds"] / res["matrix"]["total_seconds"]
        res["objective_rel_diff"] = abs(ps.objective - sol.objective) / max(1.0, abs(sol.objective))
        log(f"  pulp {res['pulp']['total_seconds']:.2f}s, ratio {res['pulp_over_matrix_time']:.1f}, "
            f"objective diff {res['objective_rel_diff']:.2e}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="smoke run: small scale, short, small LP")
    ap.add_argument("--scale", type=float, default=None, help="allocation scale (default 0.005, quick 0.002)")
    ap.add_argument("--top-n", type=int, default=8, help="allocation runs: candidate destinations (default all 8)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=("allocation", "scale"), help="run one part only")
    ap.add_argument("--capacity-factor", type=float, default=CAPACITY_FACTOR,
                    help=f"link capacity = F × sampled path throughput (default {CAPACITY_FACTOR}, fitted; "
                         "1.65 with --shared-factor 0.5 = the one-point calibration, 1 = uncalibrated)")
    ap.add_argument("--shared-factor", type=float, default=SHARED_FACTOR,
                    help=f"access link = F × the sum of its paths' capacities (default {SHARED_FACTOR}, fitted)")
    ap.add_argument("--edge-factor", type=float, default=EDGE_FACTOR,
                    help=f"edge-site resources = F × Table 4's ranges (default {EDGE_FACTOR}, fitted)")
    ap.add_argument("--rates", default="20000,30000,40000", help="allocation runs: flows/s (default 20000,30000,40000)")
    ap.add_argument("--pad", type=float, default=None, help="warm-up and cool-down seconds (default 10, quick 3)")
    args = ap.parse_args()
    scale = args.scale or (0.002 if args.quick else 0.005)
    t0 = time.perf_counter()
    doc = {"benchmark": "pce_otter", "quick": args.quick, "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
    if args.only in (None, "allocation"):
        doc["allocation"] = allocation(
            tuple(int(x) for x in args.rates.split(",")), scale, 5.0 if args.quick else 10.0, args.seed, args.top_n,
            args.pad if args.pad is not None else (3.0 if args.quick else 10.0),
            args.capacity_factor, args.shared_factor, args.edge_factor,
        )
    if args.only in (None, "scale"):
        doc["scale"] = scale_lp(2000 if args.quick else 20000, 16 if args.quick else 64, args.seed, pulp_too=True)
    doc["wall_seconds"] = time.perf_counter() - t0
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
