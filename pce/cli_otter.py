"""``mlte pce otter-sim`` (flow-arrival simulation of the §7.2 policies) and ``mlte pce otter-solve``
(one OTTER LP on a generated Table 4 instance). Heavy imports stay inside the handlers."""
from __future__ import annotations

import argparse
import json
import sys
import time

from pce.otter.calibration import CALIBRATED_CAPACITY_FACTOR, CALIBRATED_EDGE_FACTOR, CALIBRATED_SHARED_FACTOR

#: Above this many active flows the LP policies are slow on two cores (see docs/otter.md).
LARGE_ACTIVE = 50_000


def _network_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sources", type=int, default=8, help="number of sources (default 8)")
    p.add_argument("--dests", type=int, default=8, help="destinations; 25%% are DCs, the rest edge sites (default 8)")
    p.add_argument("--paths", type=int, default=8, help="paths per source/destination pair (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--top-n", type=int, default=4, help="candidate destinations per flow (default 4)")
    p.add_argument("--solver", choices=("highs", "cbc"), default=None, help="LP solver (default: config pce.solver)")
    p.add_argument("--backend", choices=("matrix", "pulp"), default="matrix",
                   help="matrix = direct highspy sparse build (default); pulp = PuLP model (needed for cbc)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON (graph mode: '-' prints it instead of the table)")
    p.add_argument("--capacity-factor", type=float, default=CALIBRATED_CAPACITY_FACTOR,
                   help=f"link capacity = F × sampled path throughput (default {CALIBRATED_CAPACITY_FACTOR}, "
                        "fitted with --shared-factor and --edge-factor to the paper's GREEDY and OPT results, "
                        "docs/performance/pce-otter.md; 1 with --shared-factor 0.5 --edge-factor 1 = the "
                        "uncalibrated network: links carry the measured throughput)")
    p.add_argument("--shared-factor", type=float, default=CALIBRATED_SHARED_FACTOR,
                   help=f"access link capacity = F × the sum of its paths' capacities "
                        f"(default {CALIBRATED_SHARED_FACTOR}, fitted)")
    p.add_argument("--edge-factor", type=float, default=CALIBRATED_EDGE_FACTOR,
                   help=f"edge-site CPU/RAM/disk = F × Table 4's ranges (default {CALIBRATED_EDGE_FACTOR}, fitted; "
                        "1 = as printed in Table 4)")


def _network(args: argparse.Namespace):
    """The Table 4 network of the command line (the factors default to the fitted ones)."""
    from pce.otter.scenario import generate_network

    return generate_network(args.sources, args.dests, args.paths, seed=args.seed, scale=args.scale,
                            capacity_factor=args.capacity_factor, shared_factor=args.shared_factor,
                            edge_factor=args.edge_factor)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("otter-sim", help="simulate OTTER's GREEDY/PER/OPT policies on Poisson flow arrivals")
    _network_args(p)
    p.add_argument("--rate", type=float, default=40000.0, help="mean flow arrivals per second (default 40000)")
    p.add_argument("--duration", type=float, default=10.0, help="simulated seconds of measured arrivals (default 10)")
    p.add_argument("--warmup", type=float, default=0.0,
                   help="seconds of arrivals before the measured ones (they load the network, not the metrics)")
    p.add_argument("--cooldown", type=float, default=0.0,
                   help="seconds of arrivals after the measured ones (keep the load up while measured flows live)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply the arrival rate AND every link/edge capacity by this (e.g. 0.01)")
    p.add_argument("--policies", default="GREEDY,PER,PER+PATHPIN,PER+DSTPIN,OPT,OPT+PATHPIN,OPT+DSTPIN",
                   help="comma-separated policies")
    p.add_argument("--period", type=float, default=1.0, help="PER: simulated seconds between LP runs (default 1)")
    p.add_argument("--solve-delay", default="measured",
                   help="PER: simulated LP delay in seconds, or 'measured' = the real build+solve wall time")
    p.add_argument("--opt-epoch", type=float, default=0.1,
                   help="OPT: re-optimise at epochs of this many simulated seconds (default 0.1)")
    p.add_argument("--greedy-ties", choices=("first", "room"), default="first",
                   help="GREEDY among equal best scores: first candidate (default) or most room")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _instance_args(p, "flows with arrival_s and duration_s; replaces the generated network and arrivals")
    p.set_defaults(func=_sim)
    s = sub.add_parser("otter-solve", help="build and solve one OTTER LP over N generated flows")
    _network_args(s)
    s.add_argument("--flows", default=None,
                   help="generated instance: number of active flows (default 20000); with --graph: the flow "
                        "list JSON file (docs/otter.md, \"Graph mode\")")
    s.add_argument("--scale", type=float, default=1.0, help="multiply link/edge capacities by this")
    s.add_argument("--no-aggregate", action="store_true",
                   help="one LP variable set per flow: the exact LP (by default flows alike up to 5%% in "
                        "bandwidth share their routing, which gives a lower bound on the exact optimum)")
    s.add_argument("--aggregation-gap", action="store_true",
                   help="also solve the exact LP (--no-aggregate) and report the aggregated optimum's gap to it")
    s.add_argument("--no-c4", action="store_true", help="drop the destination resource constraints")
    s.add_argument("--no-presolve", dest="presolve", action="store_false",
                   help="hand HiGHS the whole LP, without the exact reductions of pce/otter/reduce.py "
                        "(matrix backend; see docs/otter.md)")
    s.add_argument("--lp-method", choices=("primal", "dual", "ipm"), default="primal",
                   help="HiGHS algorithm, matrix backend (default primal; ipm is faster on very large LPs)")
    _instance_args(s, "solve it instead of a generated instance")
    from pce.cli_otter_graph import register_graph_args

    register_graph_args(s)
    s.set_defaults(func=_solve)


def _instance_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--instance", metavar="FILE",
                   help=f"OTTER instance JSON (schema: docs/otter.md, \"Instance files\"): {what}")
    p.add_argument("--export-instance", metavar="FILE",
                   help="write the instance (network and flows) as instance JSON, then run as usual")


def _solver(args) -> str:
    if args.solver:
        return args.solver
    cfg = getattr(args, "cfg", None) or {}
    return cfg.get("pce", {}).get("solver", "highs")


def _backend(args, solver: str) -> str:
    return "pulp" if solver == "cbc" else args.backend


def _write(args, doc: dict) -> None:
    from pce.cli_output import write_json_file

    if args.json:
        write_json_file(args.json, doc, indent=2)


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable --json/--export-instance paths before the (long) run, not after it."""
    from pce.cli_output import check_writable

    check_writable(args.json)
    check_writable(args.export_instance, "--export-instance")


def _sim(args: argparse.Namespace) -> int:
    from pce.errors import InvalidInputError
    from pce.highs import quiet_banner
    from pce.otter.aggregate import candidates
    from pce.otter.baselines import get_policy
    from pce.otter.scenario import generate_flows
    from pce.otter.sim import simulate, stderr_progress

    quiet_banner()
    if args.scale <= 0 or args.rate <= 0 or args.duration <= 0 or args.warmup < 0 or args.cooldown < 0:
        raise InvalidInputError("--scale, --rate and --duration must be > 0, --warmup and --cooldown ≥ 0")
    delay = None if args.solve_delay == "measured" else _float(args.solve_delay, "--solve-delay")
    _check_outputs(args)
    policies = [get_policy(p.strip()) for p in args.policies.split(",") if p.strip()]
    solver = _solver(args)

    def arrivals(net):
        fl = generate_flows(net, rate=args.rate * args.scale, duration=args.warmup + args.duration + args.cooldown,
                            seed=args.seed)
        fl.arrival[:] = fl.arrival - args.warmup
        return fl

    net, flows = _instance_or_generated(args, arrivals)
    if args.instance and (len(flows) == 0 or not (flows.duration > 0).all()):
        raise InvalidInputError(f"{args.instance}: flows: otter-sim needs flows, each with duration_s > 0")
    cand = candidates(net, flows, args.top_n)
    progress = None if args.quiet else stderr_progress
    active = len(flows) * 10.0 / max(1e-9, args.warmup + args.duration + args.cooldown)  # mean duration 10 s
    if active > LARGE_ACTIVE and any(p.mode != "greedy" for p in policies):
        print(f"otter-sim: warning: ~{active:,.0f} active flows; each LP of PER/OPT will take long on this machine "
              f"(try --scale 0.01, which scales the rate and every capacity)", file=sys.stderr)
    if progress:
        progress(f"otter-sim: {len(flows)} flows ({args.rate * args.scale:g}/s, scale {args.scale:g}), "
                 f"{net.n_paths} paths, policies {', '.join(p.name for p in policies)}")
    results = []
    for pol in policies:
        r = simulate(net, flows, pol, cand=cand, top_n=args.top_n, period=args.period, solve_delay=delay,
                     opt_epoch=args.opt_epoch, measure_from=0.0, measure_to=args.duration, backend=_backend(args, solver), solver=solver,
                     progress=progress, greedy_ties=args.greedy_ties)
        results.append(r.as_dict())
        print(f"{pol.name:12s} allocated bytes {r.allocated_bytes_fraction:.3f}  per-flow {r.mean_flow_allocated_fraction:.3f}"
              f"  satisfaction {r.satisfaction:.3f}  solves {r.solves}"
              + (f" (mean {sum(r.solve_seconds) / r.solves:.2f}s)" if r.solves else ""))
        if pol.mode != "greedy" and r.solves and not r.installs:
            took = (f"its LP took {r.solve_seconds[0]:.1f} s (measured)" if delay is None
                    else f"--solve-delay {delay:g} s")
            print(f"{'':12s} NOT {pol.name}: no LP result was installed before the run ended ({took}; the run lasts "
                  f"{args.warmup + args.duration + args.cooldown:g} simulated s), so these are GREEDY's figures "
                  f"(a smaller --scale makes the LP faster)")
    # a policy whose LP never took effect is GREEDY under another name: no ratio for it
    by = {r["policy"]: r["allocated_bytes_fraction"] for r in results
          if r["policy"] == "GREEDY" or r["installs"] or not r["solves"]}
    ratios = {f"{a}/{b}": by[a] / by[b] for a in by for b in by if a != b and by[b] > 0
              and (b == "GREEDY" or (b.startswith("OPT") and a.replace("PER", "OPT") == b))}
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    _write(args, {
        "command": "otter-sim",
        "config": {k: v for k, v in vars(args).items() if k not in ("func", "cfg")},
        "effective_rate": args.rate * args.scale,
        "flows_measured": results[0]["flows"] if results else 0,
        "results": results,
        "ratios": ratios,
    })
    return 0


def _instance_or_generated(args: argparse.Namespace, generate) -> tuple:
    """(network, flows) from ``--instance`` or from ``generate(network)``; ``--export-instance`` writes
    them first (whole or not at all), so an exported scenario is exactly what this run solves."""
    from pce.otter.instance import instance_to_doc, load_instance, write_json

    if args.instance:
        inst = load_instance(args.instance)
        net, flows = inst.network, inst.flows
    else:
        net = _network(args)
        flows = generate(net)
    if args.export_instance:
        write_json(args.export_instance, instance_to_doc(net, flows, f"mlte pce {args.pce_cmd} seed {args.seed}"))
    return net, flows


def _flow_count(args: argparse.Namespace) -> int:
    from pce.errors import InvalidInputError

    if args.flows is None:
        return 20000
    try:
        n = int(args.flows)
    except ValueError:
        raise InvalidInputError(f"--flows: expected a number of flows, got {args.flows!r} "
                                "(a flow list file needs --graph)") from None
    if n < 1:
        raise InvalidInputError("--flows must be ≥ 1")
    return n


def _solve(args: argparse.Namespace) -> int:
    from pce.errors import InvalidInputError
    from pce.highs import quiet_banner
    from pce.otter.matrix import solve_problem
    from pce.otter.problem import make_problem
    from pce.otter.scenario import generate_flows

    quiet_banner()
    _check_outputs(args)
    if getattr(args, "graph", None):
        from pce.cli_otter_graph import solve_graph_command

        return solve_graph_command(args)
    if args.scale <= 0:
        raise InvalidInputError("--scale must be > 0")
    if args.aggregation_gap and args.no_aggregate:
        raise InvalidInputError("--aggregation-gap compares the aggregated LP with the exact one; drop --no-aggregate")
    if args.instance and args.flows is not None:
        raise InvalidInputError("--flows is the generated instance's size; --instance brings its own flows")
    n_flows = _flow_count(args)
    solver = _solver(args)
    net, flows = _instance_or_generated(args, lambda net: generate_flows(net, n=n_flows, seed=args.seed))
    if len(flows) == 0:
        raise InvalidInputError(f"{args.instance}: flows: the instance has no flows to place")
    t0 = time.perf_counter()
    prob = make_problem(net, flows, top_n=args.top_n, aggregate=not args.no_aggregate, use_c4=not args.no_c4)
    t_prob = time.perf_counter() - t0
    backend = _backend(args, solver)
    presolve = args.presolve and backend == "matrix" and solver == "highs"
    sol = solve_problem(prob, backend, solver, presolve=presolve, method=args.lp_method)
    doc = {
        "command": "otter-solve",
        "config": {k: v for k, v in vars(args).items() if k not in ("func", "cfg")},
        "flows": len(flows), "paths": net.n_paths,
        "aggregates": prob.n_aggs, "columns": prob.n_cols, "objective": sol.objective,
        "objective_of": _objective_of(prob.n_aggs, len(flows)),
        "allocated_mbps": sol.allocated(), "requested_mbps": float(flows.bw.sum()),
        "problem_seconds": t_prob, "build_seconds": sol.build_seconds, "solve_seconds": sol.solve_seconds,
        "total_seconds": t_prob + sol.build_seconds + sol.solve_seconds,
        "presolve": sol.reduction_stats,
    }
    if args.aggregation_gap:
        doc.update(_aggregation_gap(args, net, flows, sol.objective, backend, solver, presolve, prob.n_aggs))
    print(json.dumps({k: v for k, v in doc.items() if k != "config"}, indent=2), file=sys.stdout)
    _write(args, doc)
    return 0


def _objective_of(n_aggs: int, n_flows: int) -> str:
    """What ``objective`` is the optimum of: flows merged into aggregates share their per-path
    fractions, a restriction of the exact LP, so its optimum is a lower bound on the exact one."""
    if n_aggs == n_flows:
        return "the exact LP (one variable set per flow)"
    return (f"the aggregated LP ({n_flows} flows in {n_aggs} aggregates: flows alike up to 5% in bandwidth share "
            "their routing), a lower bound on the exact LP's optimum; --aggregation-gap also solves the exact "
            "LP, --no-aggregate solves only that")


def _aggregation_gap(args: argparse.Namespace, net, flows, aggregated: float, backend: str, solver: str,
                     presolve: bool, n_aggs: int) -> dict:
    """The exact LP's optimum and the aggregated optimum's gap to it (absolute and relative)."""
    from pce.otter.matrix import solve_problem
    from pce.otter.problem import make_problem

    if n_aggs == len(flows):
        exact = aggregated  # nothing was merged: the aggregated LP is the exact one
    else:
        prob = make_problem(net, flows, top_n=args.top_n, aggregate=False, use_c4=not args.no_c4)
        exact = solve_problem(prob, backend, solver, presolve=presolve, method=args.lp_method).objective
    gap = exact - aggregated
    return {"exact_objective": exact, "aggregation_gap": gap,
            "aggregation_gap_relative": gap / abs(exact) if exact else 0.0}


def _float(text: str, flag: str) -> float:
    from pce.errors import InvalidInputError

    try:
        v = float(text)
    except ValueError:
        raise InvalidInputError(f"{flag}: expected seconds or 'measured', got {text!r}") from None
    if v < 0:
        raise InvalidInputError(f"{flag} must be ≥ 0")
    return v
