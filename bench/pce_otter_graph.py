"""Graph-mode OTTER placement at controller scale (issue 15): one placement, target ≤ 1 s.

Instance: 20 packet switches (one host each) with 30 lit 10 Gbit/s packet links (latency 2–15 ms)
over a random connected mesh of 10 OTSes (15 fibres of two ODU2 wavelengths, 1–8 ms); every
switch has two free ODU2 uplinks into its OTS, so candidate circuits exist between every pair.
2,000 flows between random hosts: 20% interactive (ssh, 1–10 Mbit/s), 80% bulk (log-normal,
median 80 Mbit/s) — more than the lit links carry, so circuits are worth lighting.

Measured per policy (``otter`` = the LP with priced lighting, ``cspf`` = the baseline in the same
run; ``joint`` with ``--joint``, the exact MIP): candidate circuits, candidate paths, LP build
(problem + presolve + matrix), LP solve, rounding, total; placed Mbit/s and mean satisfaction.
``otter`` is run with ``--per-pair`` 2 (the setting the target is measured at) and with the
default 8. Ratio: otter's placed Mbit/s and satisfaction over cspf's.

Every run is *cold* (the candidate-path and circuit caches of ``pce.otter.graph`` cleared first);
``warm`` is the same otter placement again on the unchanged graph — what a PER re-solve pays.
``--before REV`` also runs ``pce/otter/graph.py`` as it was at git revision REV on the same instance
in the same process, so before/after timings share the machine's load; same-path counts say
whether the placements are identical.

Usage: bench/pce_otter_graph.py --json PATH [--quick] [--joint] [--seed N] [--before REV]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pce.highs import quiet_banner  # noqa: E402
from pce.otter import graph as graph_mod  # noqa: E402
from pce.otter.graph_flows import ClassRules, GraphFlow  # noqa: E402
from pce.otter.graph_mesh import flows, mesh  # noqa: E402
from topology.graph import MultiLayerGraph  # noqa: E402


def old_module(rev: str) -> ModuleType:
    """``pce/otter/graph.py`` as it was at git revision ``rev`` (imported under another name)."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "-C", str(root), "show", f"{rev}:pce/otter/graph.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "graph_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("graph_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["graph_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def run(g: MultiLayerGraph, fl: list[GraphFlow], policy: str, mod: ModuleType = graph_mod, cold: bool = True,
        **opts) -> dict:
    if cold and hasattr(mod, "clear_caches"):
        mod.clear_caches()
    t0 = time.perf_counter()
    res = mod.place(g, fl, ClassRules(), policy, **opts)
    wall = time.perf_counter() - t0
    placed = sum(p.allocated for p in res.flows)
    return {
        "policy": policy, "options": opts, "wall_seconds": wall, "stats": res.stats,
        "circuits_lit": len(res.circuits), "placed_mbps": placed, "requested_mbps": sum(f.bw for f in fl),
        "mean_satisfaction": sum(p.satisfaction for p in res.flows) / len(res.flows),
        "flows_on_new_circuits": sum(1 for p in res.flows if p.path is not None and p.path.circuits),
        "paths": [None if p.path is None else list(p.path.key) for p in res.flows],
    }


def best_of(runs: list[dict]) -> dict:
    best = dict(min(runs, key=lambda r: r["wall_seconds"]))
    best["wall_seconds_all"] = [r["wall_seconds"] for r in runs]
    return best


def show(tag: str, r: dict) -> None:
    print(f"{tag:22s} {json.dumps(r['options']):20s} wall {r['wall_seconds']:.3f} s (of {len(r['wall_seconds_all'])}: "
          f"{', '.join(f'{w:.3f}' for w in r['wall_seconds_all'])})  placed {r['placed_mbps']:.0f}/"
          f"{r['requested_mbps']:.0f} Mbit/s  satisfaction {r['mean_satisfaction']:.4f}  "
          f"circuits {r['circuits_lit']}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="200 flows, one repetition")
    ap.add_argument("--joint", action="store_true", help="also the joint MIP lighting (slow at this size)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", metavar="REV", help="also run pce/otter/graph.py of git revision REV (same run)")
    args = ap.parse_args()
    quiet_banner()
    n_flows = 200 if args.quick else 2000
    repeat = 1 if args.quick else args.repeat
    g = mesh(seed=args.seed)
    fl = flows(n_flows, 20, args.seed)
    configs = [("otter", {"per_pair": 2}), ("otter", {}), ("cspf", {"per_pair": 2})]
    if args.joint:
        configs.append(("joint", {"per_pair": 2, "time_limit": 60.0}))
    before = old_module(args.before) if args.before else None
    graph_mod.place(g, fl[:20], ClassRules(), "otter", per_pair=2)  # imports and solver start-up, not timed
    results, previous = [], []
    for policy, opts in configs:
        if before is not None:  # interleaved with the new code's runs: the same load for both
            runs_b, runs = [], []
            for _ in range(repeat):
                runs_b.append(run(g, fl, policy, before, **opts))
                runs.append(run(g, fl, policy, **opts))
            b = best_of(runs_b)
            previous.append(b)
            show(f"{policy} before {args.before}", b)
        else:
            runs = [run(g, fl, policy, **opts) for _ in range(repeat)]
        best = best_of(runs)
        if before is not None:
            best["same_paths_as_before"] = sum(x == y for x, y in zip(best["paths"], previous[-1]["paths"], strict=True))
        results.append(best)
        show(policy, best)
    warm = best_of([run(g, fl, "otter", cold=False, per_pair=2) for _ in range(repeat)])
    show("otter warm (PER)", warm)
    for r in results + previous + [warm]:
        r.pop("paths")
    otter, cspf = results[0], results[2]
    doc = {
        "benchmark": "pce_otter_graph", "switches": 20, "ots": 10, "flows": n_flows, "seed": args.seed,
        "cpus": os.cpu_count(), "load_average": os.getloadavg(), "target_seconds": 1.0, "results": results,
        "otter_per_pair2_within_target": otter["wall_seconds"] <= 1.0,
        "otter_per_pair2_warm": warm, "otter_per_pair2_warm_within_target": warm["wall_seconds"] <= 1.0,
        "ratios": {"placed otter/cspf": otter["placed_mbps"] / cspf["placed_mbps"],
                   "satisfaction otter/cspf": otter["mean_satisfaction"] / cspf["mean_satisfaction"]},
    }
    if before is not None:
        doc["before"] = {"revision": args.before, "results": previous}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
