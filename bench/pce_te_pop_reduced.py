"""POP applied *after* the exact presolve (issue 3's POP target, one more way to try it).

``mlte pce te --partitions K`` partitions the demands and presolves every partition on its own,
which merges far fewer interchangeable demands than one presolve of the whole instance does.
This benchmark tries the other order: presolve the whole AS7018 instance once (exact,
pce.te.reduce), then run POP (random partitions of the *commodities*, 1/K of every remaining
capacity, client splitting ``--splits``) on the reduced instance. Baseline in the same run: the
exact optimum of the same reduced instance by column generation (what ``mlte pce te`` does by
default). Ratios: (presolve + exact) / (presolve + POP), and the gap to the exact optimum.

Usage: ``bench/pce_te_pop_reduced.py --json PATH [--quick] [--splits 0,0.25,0.5,1]``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pce.te.colgen import solve_total_flow_colgen  # noqa: E402
from pce.te.network import demands_to_arrays, network_from_graph  # noqa: E402
from pce.te.paths import compute_paths  # noqa: E402
from pce.te.pop import solve_partitioned  # noqa: E402
from pce.te.reduce import reduce_total_flow  # noqa: E402
from pce.te.subproblem import SolveOptions  # noqa: E402
from pce.topologies import load_demands, load_topology  # noqa: E402

CAIDA = "caida/2024-08/7018"
CAPACITY = 10_000.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="150 endpoints and 4 partitions (~20 s)")
    ap.add_argument("--load", type=float, default=0.5)
    ap.add_argument("--splits", default="0,0.25,0.5,1", help="POP client-splitting fractions")
    args = ap.parse_args()
    endpoints, partitions = (150, 4) if args.quick else (None, 16)
    t_start = time.perf_counter()
    g = load_topology(CAIDA, capacity=CAPACITY)
    network = network_from_graph(g, "auto")
    dem = demands_to_arrays(network, load_demands(CAIDA, g, load=args.load, endpoints=endpoints))
    paths = compute_paths(network, dem, 4, "ksp", workers=2)
    log(f"{len(dem)} demands, {paths.n_paths} paths")
    t0 = time.perf_counter()
    red = reduce_total_flow(network, dem, paths, 1.0)
    presolve_s = time.perf_counter() - t0
    fixed = float(red.fixed_volume.sum())
    log(f"presolve {presolve_s:.1f}s: {len(red.demands)} commodities, {red.network.n_arcs} arcs")
    exact = solve_total_flow_colgen(red.network, red.demands, red.paths, 1.0, threads=2)
    optimum = fixed + float(exact.path_flow.sum())
    base_s = presolve_s + exact.seconds
    log(f"exact (colgen) {exact.seconds:.1f}s, optimum {optimum:.2f}")
    out: dict[str, Any] = {
        "benchmark": "pce_te_pop_reduced", "quick": args.quick,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "topology": CAIDA, "capacity": CAPACITY, "load": args.load, "endpoints": endpoints,
        "demands": len(dem), "partitions": partitions,
        "presolve": {**red.stats, "presolve_s": presolve_s},
        "exact": {"objective": optimum, "colgen_s": exact.seconds, "lp_s": base_s, "rounds": exact.rounds},
        "pop": {},
        "targets": {"speedup_min": 10.0, "gap_max": 0.015},
    }
    for split in (float(x) for x in args.splits.split(",")):
        t0 = time.perf_counter()
        c = solve_partitioned(red.network, red.demands, red.paths,
                              SolveOptions("path", "total-flow", lp_algorithm="full", presolve=False), partitions,
                              split=split, workers=2)
        pop_s = time.perf_counter() - t0
        value = fixed + float(c.allocation.sum())
        entry = {"objective": value, "pop_s": pop_s, "lp_s": presolve_s + pop_s,
                 "speedup_lp": base_s / (presolve_s + pop_s), "objective_gap": (optimum - value) / optimum,
                 "sizes": c.sizes, "timings": c.timings}
        out["pop"][f"split={split:g}"] = entry
        log(f"POP-{partitions} split {split:g} on the presolved instance: {pop_s:.1f}s, "
            f"speed-up {entry['speedup_lp']:.2f}x, gap {100 * entry['objective_gap']:.2f}%")
    out["wall_seconds"] = time.perf_counter() - t_start
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
