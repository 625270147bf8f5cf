"""``mlte pce otter-solve --graph fig2|FILE --flows FILE``: one OTTER placement over a multi-layer graph.

Kept apart from ``pce/cli_otter.py`` (the generated-instance commands) because it reads a graph
and a flow list and prints a placement, not LP statistics. The graph loader is the one of
``mlte pce path``: the lab spec (``topology.spec``) is imported only for ``--graph fig2``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pce.otter.graph_params import (
    CIRCUIT_PRICE,
    DEFAULT_K,
    DEFAULT_PATHS,
    DEFAULT_PER_PAIR,
    DEFAULT_PIN_GAIN,
    PATH_MODES,
    POLICIES,
)


def register_graph_args(s: argparse.ArgumentParser) -> None:
    """Graph-mode options of ``otter-solve`` (the OTTER defaults are in pce.otter.graph)."""
    s.add_argument("--graph", help="graph mode: MultiLayerGraph JSON file, or 'fig2'; needs --flows FILE")
    s.add_argument("--policy", choices=POLICIES, default="otter",
                   help="graph mode: otter (LP, circuit lighting priced in; default), joint (lighting fixed by "
                        "the joint circuit MIP first, then the LP) or cspf (shortest path with room)")
    s.add_argument("--candidates", choices=PATH_MODES, default=DEFAULT_PATHS,
                   help="graph mode, otter/joint: colgen (column generation: the LP over all paths, certified; "
                        "default) or k (the k shortest of each kind, as before)")
    s.add_argument("--k", type=int, default=DEFAULT_K,
                   help=f"graph mode: candidate paths per flow aggregate and kind (existing / new circuit; default {DEFAULT_K}); "
                        "with --candidates colgen only cspf uses it")
    s.add_argument("--per-pair", type=int, default=DEFAULT_PER_PAIR,
                   help=f"graph mode: candidate XCON chains per switch pair (default {DEFAULT_PER_PAIR})")
    s.add_argument("--circuit-price", type=float, default=CIRCUIT_PRICE,
                   help=f"graph mode: relative objective price of a path through an unlit circuit (default {CIRCUIT_PRICE})")
    s.add_argument("--pin-gain", type=float, default=DEFAULT_PIN_GAIN,
                   help="graph mode: PATHPIN — a flow with a current path moves only if its satisfaction gains at "
                        f"least this much (0..1, default {DEFAULT_PIN_GAIN})")
    s.add_argument("--at", type=float, default=None,
                   help="graph mode: epoch seconds; flows with a start_s/end_s window not containing it are left out")


def solve_graph_command(args: argparse.Namespace) -> int:
    from pce.cli_path import load_graph
    from pce.errors import InvalidInputError
    from pce.otter.graph import place
    from pce.otter.graph_flows import flows_from_doc
    from pce.otter.instance import read_json, write_json

    if args.instance or args.export_instance:
        raise InvalidInputError("--graph places flows on a graph; --instance/--export-instance are for LP instances")
    if not args.flows:
        raise InvalidInputError("--graph needs --flows FILE (the flow list, docs/otter.md \"Graph mode\")")
    if args.k < 1 or args.per_pair < 1:
        raise InvalidInputError("--k and --per-pair must be ≥ 1")
    if not 0 <= args.pin_gain <= 1:
        raise InvalidInputError(f"--pin-gain must be in 0..1 (a share of satisfaction), got {args.pin_gain:g}")
    graph = load_graph(args.graph)
    flows, rules = flows_from_doc(read_json(args.flows), graph, args.flows, now=args.at)
    solver = args.solver or (getattr(args, "cfg", None) or {}).get("pce", {}).get("solver", "highs")
    opts: dict[str, Any] = {"k": args.k, "per_pair": args.per_pair}
    if args.policy != "cspf":
        opts.update(circuit_price=args.circuit_price, pin_gain=args.pin_gain, solver=solver, paths=args.candidates)
    result = place(graph, flows, rules, args.policy, **opts)
    doc = {"command": "otter-solve", "graph": args.graph, "flows_file": args.flows, **result.as_dict(),
           "colgen": colgen_summary(result.stats)}
    if args.json == "-":
        print(json.dumps(doc, indent=1))
    else:
        print_placement(result, sys.stdout)
        if args.json:
            write_json(args.json, doc)
    return 0


def colgen_summary(stats: dict[str, Any]) -> dict[str, Any] | None:
    """What column generation did (None when it did not run: cspf, ``--candidates k``, no flows)."""
    if "colgen_certified" not in stats:
        return None
    return {"certified": stats["colgen_certified"], "columns": stats["colgen_columns"],
            "generated_columns": stats["colgen_generated_columns"], "initial_paths": stats["colgen_initial_paths"],
            "generated_paths": stats["colgen_generated_paths"], "rounds": stats["colgen_rounds"],
            "lp_objective": stats["colgen_lp_objective"]}


def colgen_line(stats: dict[str, Any]) -> str:
    """One line: columns generated and whether the LP is certified optimal over all paths."""
    c = colgen_summary(stats)
    if c is None:
        return "columns: column generation off (fixed candidate paths)"
    cert = "certified (no column with positive reduced cost)" if c["certified"] else "NOT certified (round limit)"
    return (f"columns: {c['generated_columns']} generated ({c['generated_paths']} new path(s)) on "
            f"{c['columns'] - c['generated_columns']} initial, {c['rounds']} round(s); optimal over all paths: {cert}")


def _path_text(fp: Any) -> str:
    if fp.path is None:
        return "(not placed: no room)"
    if not fp.path.hops:
        return f"{fp.path.switches[0]} (local)"
    parts = [fp.path.switches[0]]
    for hop, sw in zip(fp.path.hops, fp.path.switches[1:], strict=True):
        parts.append(f"={hop.id}=" if hop.circuit is not None else f"-{hop.id}-")
        parts.append(sw)
    return " ".join(parts)


def print_placement(result: Any, out: Any) -> None:
    """The placement as a table: one row per flow, then the circuits to light and the timings."""
    d = result.as_dict()
    print(f"policy {result.policy}: {len(result.flows)} flows, {d['allocated_mbps']:.6g}/{d['requested_mbps']:.6g} "
          f"Mbit/s placed, objective {result.objective:.4f}, {len(result.circuits)} circuit(s) to light", file=out)
    rows = [("flow", "class", "Mbit/s", "placed", "satisf.", "move", "path (=hop= new circuit)")]
    for fp in result.flows:
        move = "pinned" if fp.pinned else ("moved" if fp.moved else "")
        rows.append((fp.flow.id, fp.flow.cls, f"{fp.flow.bw:g}", f"{fp.allocated:g}", f"{fp.satisfaction:.3f}", move,
                     _path_text(fp)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1], file=out)
    for c in result.circuits:
        xc = ", ".join(f"{a}>{b}" for a, b in c.xcons)
        print(f"light {c.id}: {c.a}:{c.a_port} - {c.b}:{c.b_port}, {c.capacity:g} Mbit/s, setup {c.setup_time:.3f} s, "
              f"XCONs {xc}", file=out)
    s = result.stats
    if result.policy != "cspf":
        print(colgen_line(s), file=out)
    times = ", ".join(f"{k.removesuffix('_seconds')} {v:.3f} s" for k, v in s.items() if k.endswith("_seconds"))
    print(f"timing: {times}", file=out)
