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
Each configuration runs ``--repeat`` times (5); the JSON's ``wall_seconds`` is the median run (with
its phase times in ``stats``), ``wall_seconds_all`` every run, ``wall_seconds_best`` the fastest.
``--before REV`` also runs the graph placement as it was at git revision REV — ``pce/otter/graph.py``
with the ``pce/cspf.py``, ``pce/ksp.py`` and ``pce/circuits.py`` of REV — on the same instance in
the same process, interleaved run by run, so before/after timings share the machine's load;
``same_as_before`` says whether the placements are identical (paths per flow, placed Mbit/s,
objective). Time it holding ``/tmp/mlte-net.lock`` so no Mininet lab shares the two cores.

``--k-compare`` (issue 27): ``otter`` with column generation (the default) next to ``otter`` with
the k = 4 candidates of before (``paths="k"``), both at ``--per-pair`` 2, interleaved configuration
by configuration in one process. With ``--before REV`` as well, the column generation of REV
(``pce/otter/colgen.py`` is among the old modules when REV has it) runs interleaved with today's.
Each run's process CPU seconds are recorded next to its wall time (``cpu_seconds``): on a machine
shared with other work the wall time moves with the load, the CPU time much less.

Usage: bench/pce_otter_graph.py --json PATH [--quick] [--joint] [--seed N] [--repeat N] [--before REV] [--k-compare]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
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

#: The modules the speed-ups touched: ``--before`` loads all of them from the old revision, each
#: importing the others' old versions, so the baseline is the old code path end to end.
BEFORE_MODULES = ("pce.cspf", "pce.ksp", "pce.circuits", "pce.otter.colgen", "pce.otter.graph")


def old_module(rev: str) -> ModuleType:
    """``pce.otter.graph`` as it was at git revision ``rev``, over the old versions of
    :data:`BEFORE_MODULES` (imported under other names; the current modules are left in place)."""
    root = Path(__file__).resolve().parent.parent
    tmp = Path(tempfile.mkdtemp())
    saved = {name: sys.modules.get(name) for name in BEFORE_MODULES}
    mod = None
    try:
        for name in BEFORE_MODULES:
            rel = name.replace(".", "/") + ".py"
            if subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{rev}:{rel}"],
                              capture_output=True).returncode:
                continue  # not there yet at that revision (pce/otter/colgen.py before issue 27)
            text = subprocess.run(["git", "-C", str(root), "show", f"{rev}:{rel}"], check=True,
                                  capture_output=True, text=True).stdout
            alias = "before_" + name.replace(".", "_")
            path = tmp / f"{alias}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(alias, path)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[alias] = mod
            sys.modules[name] = mod  # while loading: the next old module imports this one
            spec.loader.exec_module(mod)
    finally:
        for name, m in saved.items():
            if m is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = m
    assert mod is not None
    return mod


def run(g: MultiLayerGraph, fl: list[GraphFlow], policy: str, mod: ModuleType = graph_mod, cold: bool = True,
        **opts) -> dict:
    if cold and hasattr(mod, "clear_caches"):
        mod.clear_caches()
    t0, c0 = time.perf_counter(), time.process_time()
    res = mod.place(g, fl, ClassRules(), policy, **opts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    placed = sum(p.allocated for p in res.flows)
    return {
        "policy": policy, "options": opts, "wall_seconds": wall, "cpu_seconds": cpu, "stats": res.stats, "objective": res.objective,
        "circuits_lit": len(res.circuits), "placed_mbps": placed, "requested_mbps": sum(f.bw for f in fl),
        "mean_satisfaction": sum(p.satisfaction for p in res.flows) / len(res.flows),
        "flows_on_new_circuits": sum(1 for p in res.flows if p.path is not None and p.path.circuits),
        "paths": [None if p.path is None else list(p.path.key) for p in res.flows],
    }


def median_of(runs: list[dict]) -> dict:
    """The run of median wall time (its stats and results), with every run's time and the best."""
    ordered = sorted(runs, key=lambda r: r["wall_seconds"])
    mid = dict(ordered[(len(ordered) - 1) // 2])
    mid["wall_seconds_all"] = [r["wall_seconds"] for r in runs]
    mid["wall_seconds_best"] = ordered[0]["wall_seconds"]
    mid["cpu_seconds_all"] = [r["cpu_seconds"] for r in runs]
    mid["cpu_seconds_median"] = statistics.median(r["cpu_seconds"] for r in runs)
    return mid


def same(a: dict, b: dict) -> dict:
    """How far two placements of the same instance agree (paths per flow, totals, objective)."""
    return {"same_paths": sum(x == y for x, y in zip(a["paths"], b["paths"], strict=True)), "flows": len(a["paths"]),
            "placed_mbps_diff": a["placed_mbps"] - b["placed_mbps"], "objective_diff": a["objective"] - b["objective"],
            "satisfaction_diff": a["mean_satisfaction"] - b["mean_satisfaction"]}


def show(tag: str, r: dict) -> None:
    print(f"{tag:22s} {json.dumps(r['options']):20s} median {r['wall_seconds']:.3f} s (of {len(r['wall_seconds_all'])}: "
          f"{', '.join(f'{w:.3f}' for w in r['wall_seconds_all'])}; cpu median {r['cpu_seconds_median']:.3f} s)  placed {r['placed_mbps']:.0f}/"
          f"{r['requested_mbps']:.0f} Mbit/s  satisfaction {r['mean_satisfaction']:.4f}  "
          f"circuits {r['circuits_lit']}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="200 flows, one repetition")
    ap.add_argument("--joint", action="store_true", help="also the joint MIP lighting (slow at this size)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5, help="runs per configuration (the median is reported)")
    ap.add_argument("--before", metavar="REV", help="also run the code of git revision REV (same run, interleaved)")
    ap.add_argument("--k-compare", action="store_true",
                    help="otter with column generation and with the k = 4 candidates (paths='k'), per-pair 2 only")
    args = ap.parse_args()
    quiet_banner()
    load0 = os.getloadavg()
    n_flows = 200 if args.quick else 2000
    repeat = 1 if args.quick else args.repeat
    g = mesh(seed=args.seed)
    fl = flows(n_flows, 20, args.seed)
    configs = [("otter", {"per_pair": 2}), ("otter", {}), ("cspf", {"per_pair": 2})]
    if args.k_compare:  # the k = 4 candidate code (issue 15) next to column generation, same run
        configs = [("otter", {"per_pair": 2}), ("otter", {"per_pair": 2, "paths": "k"}), ("cspf", {"per_pair": 2})]
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
            b = median_of(runs_b)
            previous.append(b)
            show(f"{policy} before {args.before}", b)
        else:
            runs = [run(g, fl, policy, **opts) for _ in range(repeat)]
        best = median_of(runs)
        if before is not None:
            best["same_as_before"] = same(best, previous[-1])
            print(f"{'':22s} same as before: {json.dumps(best['same_as_before'])}", file=sys.stderr)
        results.append(best)
        show(policy, best)
    warm = median_of([run(g, fl, "otter", cold=False, per_pair=2) for _ in range(repeat)])
    show("otter warm (PER)", warm)
    for r in results + previous + [warm]:
        r.pop("paths")
    otter, cspf = results[0], results[2]
    if args.k_compare:
        k4 = results[1]
        print(f"colgen vs k=4: median {otter['wall_seconds']:.3f} vs {k4['wall_seconds']:.3f} s (cpu "
              f"{otter['cpu_seconds_median']:.3f} vs {k4['cpu_seconds_median']:.3f}), objective "
              f"{otter['objective']:.1f} vs {k4['objective']:.1f}, placed {otter['placed_mbps']:.0f} vs "
              f"{k4['placed_mbps']:.0f} Mbit/s", file=sys.stderr)
    doc = {
        "benchmark": "pce_otter_graph", "switches": 20, "ots": 10, "flows": n_flows, "seed": args.seed,
        "cpus": os.cpu_count(), "load_average_at_start": load0, "load_average": os.getloadavg(), "target_seconds": 1.0, "results": results,
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
