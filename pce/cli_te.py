"""``mlte pce te`` (WAN TE LPs on real topologies) and ``mlte pce topologies`` (what can be loaded)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(psub: argparse._SubParsersAction) -> None:
    p = psub.add_parser(
        "te",
        help="WAN TE LP (MLU or total flow; path or edge formulation; POP partitions) on a real topology",
        description="Solve a WAN traffic-engineering LP on a topohub topology or a node-link JSON file. "
        "Progress goes to stderr, a summary to stdout, the full result to --json.",
    )
    p.add_argument("--topology", required=True, help="sndlib/<n>, topozoo/<n>, caida/<date>/<asn>, "
                   "backbone/<n>, gabriel/<n>/<i> or a JSON file (see `mlte pce topologies`)")
    p.add_argument("--objective", choices=["mlu", "total-flow"], default="total-flow",
                   help="minimise max link utilization (all demand routed) or maximise routed traffic")
    p.add_argument("--formulation", choices=["path", "edge"], default="path",
                   help="path: k paths per demand; edge: arc-flow multicommodity LP (exact optimum)")
    p.add_argument("--paths", type=int, default=None, help="paths per demand (default: config pce.k_paths)")
    p.add_argument("--path-method", choices=["ksp", "yen", "disjoint"], default="ksp",
                   help="ksp: k shortest simple paths per source (fast); yen: exact per demand (small); "
                   "disjoint: k link-disjoint paths")
    p.add_argument("--weight", choices=["auto", "latency", "hops"], default="auto",
                   help="path length metric (auto: latency when every link has one)")
    p.add_argument("--capacity", type=float, default=None,
                   help="uniform link capacity in Mbit/s (required when the topology has none: all of topohub)")
    p.add_argument("--partitions", type=int, default=1, help="POP: K random demand groups with 1/K capacity each")
    p.add_argument("--split", type=float, default=0.0,
                   help="POP client splitting: add this fraction of extra demand pieces, cutting the "
                   "largest demands (e.g. 0.25)")
    p.add_argument("--demands", choices=["auto", "sndlib", "gravity", "uniform", "random"], default="auto",
                   help="traffic matrix: auto = SNDlib matrix when present, else gravity")
    p.add_argument("--load", type=float, default=None,
                   help="scale demands to this load factor (mean link utilization under min-hop routing)")
    p.add_argument("--total", type=float, default=None, help="scale demands to this total (Mbit/s)")
    p.add_argument("--demand-scale", type=float, default=1.0, help="multiply every demand (after --load/--total)")
    p.add_argument("--endpoints", type=int, default=None,
                   help="generated matrices: only the N nodes of largest capacity send/receive traffic")
    p.add_argument("--solver", choices=["highs", "cbc"], default=None, help="LP solver (default: config pce.solver)")
    p.add_argument("--lp-method", choices=["auto", "simplex", "ipm", "pdlp"], default="auto",
                   help="HiGHS algorithm")
    p.add_argument("--capacity-split", choices=["uniform", "demand"], default="uniform",
                   help="POP: 1/K of every link per partition (uniform), or shares proportional to each "
                        "partition's expected load on the link (demand; not in the POP paper)")
    p.add_argument("--no-repair", dest="repair", action="store_false",
                   help="POP as published: leave out the repair LP that routes the unmet demand over the "
                        "capacity the partitions left (total-flow only; on by default)")
    p.add_argument("--lp-algorithm", choices=["auto", "full", "colgen"], default="auto",
                   help="full: the whole LP at once; colgen: exact column generation (total-flow path LP only, "
                        "same optimum, see docs/te.md); auto (default): colgen for an unpartitioned presolved "
                        "total-flow LP with highs, full otherwise")
    p.add_argument("--no-presolve", dest="presolve", action="store_false",
                   help="solve the total-flow path LP as it is, without the exact reductions (docs/te.md)")
    p.add_argument("--workers", type=int, default=2, help="processes for paths and POP partitions")
    p.add_argument("--seed", type=int, default=0, help="seed of POP's random partition and random demands")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per LP solve")
    p.add_argument("--json", metavar="PATH", help="write the result (with per-demand and per-link lists) here")
    p.add_argument("--summary-only", action="store_true", help="leave the per-demand/per-link lists out of --json")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run_te)

    t = psub.add_parser("topologies", help="list the topologies `mlte pce te --topology` accepts")
    t.add_argument("--source", choices=["sndlib", "topozoo", "caida", "backbone", "gabriel"],
                   help="only this source")
    t.add_argument("--details", action="store_true", help="also nodes, links and whether a demand matrix ships")
    t.set_defaults(func=run_topologies)


def _cfg(args: argparse.Namespace, key: str, fallback: Any) -> Any:
    cfg = getattr(args, "cfg", None) or {}
    return cfg.get("pce", {}).get(key, fallback)


def run_te(args: argparse.Namespace) -> int:
    from pce.cli_output import check_writable, write_json_file
    from pce.errors import InvalidInputError
    from pce.te.solve import solve_te
    from pce.topologies import load_demands, load_topology

    t0 = time.perf_counter()

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    if args.demand_scale <= 0:
        raise InvalidInputError(f"--demand-scale must be positive, got {args.demand_scale}")
    if args.split < 0:
        raise InvalidInputError(f"--split must be >= 0 (a fraction of extra demand pieces, e.g. 0.25), got {args.split}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise InvalidInputError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    check_writable(args.json)
    k = args.paths if args.paths is not None else int(_cfg(args, "k_paths", 4))
    solver = args.solver or str(_cfg(args, "solver", "highs"))
    graph = load_topology(args.topology, capacity=args.capacity)
    demands = load_demands(args.topology, graph, kind=args.demands, total=args.total, seed=args.seed,
                           load=args.load, endpoints=args.endpoints)
    if args.demand_scale != 1.0:
        demands = {key: v * args.demand_scale for key, v in demands.items()}
    progress(f"loaded {args.topology}: {graph.number_of_nodes()} nodes, {graph.number_of_edges()} links, "
             f"{len(demands)} demands")
    result = solve_te(graph, demands, objective=args.objective, formulation=args.formulation, k=k,
                      partitions=args.partitions, solver=solver, lp_method=args.lp_method,
                      path_method=args.path_method, weight=args.weight, workers=args.workers,
                      seed=args.seed, time_limit=args.time_limit, progress=progress,
                      split=args.split, lp_algorithm=args.lp_algorithm, capacity_split=args.capacity_split,
                      presolve=args.presolve, repair=None if args.repair else False)
    doc = {"topology": args.topology, "capacity": args.capacity, "demand_kind": args.demands,
           **result.to_json(details=not args.summary_only)}
    doc["timings"]["end_to_end_s"] = time.perf_counter() - t0
    if args.json:
        write_json_file(args.json, doc)
        progress(f"wrote {args.json}")
    s = result.summary()
    print(f"{args.topology}: {s['objective']['name']} = {s['objective']['value']:.6g} "
          f"({args.formulation}, partitions {args.partitions})")
    print(f"  demands {s['demands']['count']}, allocated {s['demands']['allocated']:.6g} of "
          f"{s['demands']['total']:.6g} Mbit/s ({100 * s['demands']['satisfied_fraction']:.2f}%), "
          f"MLU {s['mlu']:.4f}")
    if s["overloaded_links"]:
        bound = "no routing fits" if args.formulation == "edge" else f"no routing over these {k} paths per demand fits"
        print(f"  OVERLOADED: the network cannot carry these demands ({bound}); at the optimum "
              f"{s['overloaded_links']} of {result.network.arc_cap.size} links (per direction) carry more than their "
              f"capacity, the busiest {s['mlu']:.3g}x its capacity")
    print("  seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in doc["timings"].items()))
    print(f"  LP size: {s['sizes']['variables']} variables, {s['sizes']['constraints']} constraints, "
          f"{s['sizes']['nonzeros']} nonzeros" + (" (after presolve)" if s.get("presolve") else ""))
    if "certificate" in s:
        c = s["certificate"]
        print(f"  optimality: dual bound {c['dual_bound']:.10g}, relative gap {c['relative_gap']:.1e}")
    return 0


def run_topologies(args: argparse.Namespace) -> int:
    from pce.topologies import available, topology_info

    names = available(args.source)
    for name in names:
        if args.details:
            info = topology_info(name)
            print(f"{name}\t{info['nodes']} nodes\t{info['links']} links"
                  f"{chr(9) + 'demand matrix' if info['demand_matrix'] else ''}")
        else:
            print(name)
    print(f"{len(names)} topologies", file=sys.stderr)
    return 0
