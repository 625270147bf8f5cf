"""Circuit planning: exact MIP vs LP relaxation + rounding (diving) on generated instances.

For each instance (``optical_mesh`` lab graph, a few copper links, random demands and deadlines)
both methods run on the same candidate circuits; the JSON holds each objective, the LP bound,
the optimality gap of the rounding ((relax - mip) / mip), the circuits each lit, unserved Mbit/s
and solve times, plus a summary (mean/max gap, time ratio MIP/relax = the baseline ratio).

    .venv/bin/python bench/pce_circuits.py --json bench/results/pce_circuits.json [--quick]
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pce.circuits import Demand, candidate_circuits, plan_circuits  # noqa: E402
from topology.spec import optical_mesh, spec_to_graph  # noqa: E402


def instance(n_packet: int, n_ots: int, seed: int, n_demands: int, load: str = "heavy"):
    rng = random.Random(seed)
    g = spec_to_graph(optical_mesh(n_packet, n_ots, degree=3, seed=seed, uplinks=2))
    sws = g.nodes_of_kind("packet")
    port = 50
    for a, b in rng.sample(list(itertools.combinations(sws, 2)), max(1, n_packet // 3)):
        g.add_packet_link(a, port, b, port, capacity=rng.choice([5.0, 10.0]), latency=1.0, source="static")
        port += 1
    pairs = rng.sample(list(itertools.combinations(sws, 2)), n_demands)
    hi = 15 if load == "heavy" else 6
    dem = [Demand(f"d{i}", a, b, float(rng.randint(1 if load == "light" else 2, hi)), rng.choice([None, None, 1.0, 0.1]))
           for i, (a, b) in enumerate(pairs)]
    return g, dem


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=30.0, help="MIP time limit per instance (s)")
    ap.add_argument("--load", choices=["heavy", "light"], default="heavy",
                    help="heavy: 2-15 Mbit/s demands (often more than fits); light: 1-6 Mbit/s")
    args = ap.parse_args(argv)
    sizes = [(6, 4, 6)] if args.quick else [(6, 4, 6), (10, 6, 8), (12, 6, 10)]
    seeds = range(2 if args.quick else args.seeds)
    rows = []
    for (n_packet, n_ots, n_dem), seed in itertools.product(sizes, seeds):
        g, dem = instance(n_packet, n_ots, seed, n_dem, args.load)
        t0 = time.perf_counter()
        cands = candidate_circuits(g, per_pair=4)
        cand_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        mip = plan_circuits(g, dem, method="integer", circuits=cands, time_limit=args.time_limit)
        mip_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rel = plan_circuits(g, dem, method="relax", circuits=cands)
        rel_s = time.perf_counter() - t0
        gap = (rel.objective - mip.objective) / abs(mip.objective) if mip.objective else 0.0
        rows.append({
            "packet_switches": n_packet, "ots": n_ots, "demands": n_dem, "seed": seed,
            "candidates": len(cands), "candidates_seconds": round(cand_s, 4),
            "mip_objective": mip.objective, "relax_objective": rel.objective, "lp_bound": rel.lp_bound,
            "mip_status": mip.status, "gap": gap,
            "gap_to_lp_bound": (rel.objective - rel.lp_bound) / abs(rel.lp_bound) if rel.lp_bound else 0.0,
            "mip_circuits": len(mip.lit), "relax_circuits": len(rel.lit),
            "mip_unserved": sum(mip.unserved.values()), "relax_unserved": sum(rel.unserved.values()),
            "mip_seconds": round(mip_s, 4), "relax_seconds": round(rel_s, 4),
        })
        print(f"{n_packet}x{n_ots} seed {seed}: {len(cands)} cands, mip {mip.status} {mip.objective:.3f} "
              f"({mip_s:.2f}s) relax {rel.objective:.3f} ({rel_s:.2f}s) lp {rel.lp_bound:.3f} gap {gap:.2%}",
              flush=True)
    gaps = [r["gap"] for r in rows]
    summary = {
        "instances": len(rows),
        "mean_gap": statistics.mean(gaps),
        "max_gap": max(gaps),
        "load": args.load,
        "mip_time_limit": args.time_limit,
        "mip_proven_optimal": sum(r["mip_status"] == "Optimal" for r in rows),
        "mean_gap_to_lp_bound": statistics.mean(r["gap_to_lp_bound"] for r in rows),
        "optimal_fraction": sum(g <= 1e-9 for g in gaps) / len(gaps),
        "time_ratio_mip_over_relax": statistics.mean(r["mip_seconds"] for r in rows)
        / statistics.mean(r["relax_seconds"] for r in rows),
        "mean_extra_unserved_mbps": statistics.mean(r["relax_unserved"] - r["mip_unserved"] for r in rows),
        "mean_extra_circuits": statistics.mean(r["relax_circuits"] - r["mip_circuits"] for r in rows),
        # LP bound <= any integer plan; a proven-optimal MIP <= the rounded plan
        "lp_bound_ok": all(r["lp_bound"] <= min(r["mip_objective"], r["relax_objective"]) + 1e-3
                           and (r["mip_status"] != "Optimal" or r["mip_objective"] <= r["relax_objective"] + 1e-3)
                           for r in rows),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"summary": summary, "instances": rows}, indent=2))
    print(json.dumps(summary, indent=2))
    return 0 if summary["lp_bound_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
