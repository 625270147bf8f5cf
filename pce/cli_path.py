"""``mlte pce path`` (reservation CSPF) and ``mlte pce circuits`` (circuit planning) commands."""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pce.errors import InvalidInputError, UnknownTopologyError


def register(psub: argparse._SubParsersAction) -> None:
    p = psub.add_parser("path", help="constrained path for a reservation (OSCARS-style CSPF)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--graph", help="MultiLayerGraph JSON file, or 'fig2' for the paper's testbed")
    src.add_argument("--topology", help="topohub topology, e.g. sndlib/abilene (a packet-only graph)")
    p.add_argument("--capacity", type=float, help="uniform link capacity (Mbit/s) for --topology")
    p.add_argument("--src", required=True, help="node id or switch:port")
    p.add_argument("--dst", required=True, help="node id or switch:port")
    p.add_argument("--bandwidth", type=float, required=True, help="Mbit/s")
    p.add_argument("--start", help="ISO time (default now)")
    p.add_argument("--end", help="ISO time (default start + 1 h)")
    p.add_argument("--objective", default="shortest", choices=["shortest", "least-hops", "widest", "fits"])
    p.add_argument("--k", type=int, default=1, help="k shortest paths (Yen) or, with --disjoint, k disjoint")
    p.add_argument("--disjoint", action="store_true", help="k link-disjoint paths (protection)")
    p.add_argument("--max-latency", type=float, help="latency bound, ms")
    p.add_argument("--include", default="", help="comma-separated nodes the path must cross")
    p.add_argument("--exclude", default="", help="comma-separated nodes the path must avoid")
    p.add_argument("--ero", default="", help="comma-separated explicit route (nodes in order)")
    p.add_argument("--bookings", help="JSON list of bookings {id,start,end,bandwidth,edges,oports}")
    p.add_argument("--what-if", action="store_true", help="print the available bandwidth A->Z instead")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_path)

    c = psub.add_parser("circuits", help="plan packet routing and new optical circuits for demands")
    c.add_argument("--graph", required=True, help="MultiLayerGraph JSON file, or 'fig2'")
    c.add_argument("--demands", required=True, help="JSON list of {id,src,dst,bandwidth,deadline}")
    m = c.add_mutually_exclusive_group()
    m.add_argument("--integer", dest="method", action="store_const", const="integer",
                   help="exact MIP (default)")
    m.add_argument("--relax", dest="method", action="store_const", const="relax",
                   help="LP relaxation + rounding (diving)")
    c.add_argument("--solver", choices=["highs", "cbc"], help="default: [pce] solver")
    c.add_argument("--per-pair", type=int, default=8, help="candidate XCON chains per switch pair")
    c.add_argument("--time-limit", type=float, default=60.0,
                   help="MIP time limit, s (then the best plan found is returned, status Feasible)")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=_circuits, method="integer")


def load_graph(name: str) -> Any:
    """A MultiLayerGraph from a JSON file, or the Fig. 2 testbed for ``fig2``."""
    if name == "fig2":
        from topology.spec import fig2_testbed, spec_to_graph

        return spec_to_graph(fig2_testbed())
    from topology.graph import MultiLayerGraph

    path = Path(name)
    if not path.is_file():
        raise UnknownTopologyError(f"graph file not found: {name}")
    try:
        return MultiLayerGraph.from_json(path.read_text())
    except Exception as exc:  # TopologyError and friends: report as bad input, one line
        if getattr(exc, "user_error", False) or isinstance(exc, ValueError):
            raise InvalidInputError(f"{name}: {exc}") from None
        raise


def topology_graph(name: str, capacity: float | None) -> Any:
    """A topohub topology as a packet-only multi-layer graph (networkx MultiGraph with kinds)."""
    import networkx as nx

    from pce.topologies import load_topology

    base = load_topology(name, capacity)
    g = nx.MultiGraph()
    for n in base.nodes:
        g.add_node(str(n), kind="packet", name=str(n))
    for u, v, d in base.edges(data=True):
        a, b = sorted((str(u), str(v)))
        g.add_edge(a, b, key=f"packet:{a}-{b}", kind="packet", capacity=d.get("capacity"),
                   latency=float(d.get("latency") or 0.0))
    return g


def _time(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"not an ISO time: {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _read_json(path: str, what: str) -> Any:
    """The JSON list of a ``--bookings``/``--demands`` file; anything else is one line naming the file."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InvalidInputError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{what} file {path} is a directory; give a JSON file") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} file {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
        raise InvalidInputError(f"{path}: {what} must be a JSON list of objects, e.g. [{{\"id\": ...}}], "
                                f"got {type(doc).__name__ if not isinstance(doc, list) else 'a list of non-objects'}")
    return doc


def _bookings(path: str | None) -> list[Any]:
    from pce.reservation import Booking

    if not path:
        return []
    out = []
    for raw in _read_json(path, "bookings"):
        try:
            out.append(Booking(str(raw["id"]), float(raw["start"]), float(raw["end"]), float(raw["bandwidth"]),
                               tuple(raw.get("edges", ())), tuple(raw.get("oports", ()))))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"{path}: bad booking {raw!r}: {exc}") from None
    return out


def _path(args: argparse.Namespace) -> int:
    from pce import reservation as rsv

    if args.k < 1:
        raise InvalidInputError(f"--k must be >= 1 (paths to compute), got {args.k}")
    graph = load_graph(args.graph) if args.graph else topology_graph(args.topology, args.capacity)
    start = _time(args.start, time.time())
    end = _time(args.end, start + 3600.0)
    books = _bookings(args.bookings)
    if args.what_if:
        bw, res = rsv.available_bandwidth(graph, args.src, args.dst, start, end, books)
        out = {"available": bw if math.isfinite(bw) else None, "path": res.to_dict() if res else None}
        print(json.dumps(out, indent=2) if args.json else f"available {args.src} -> {args.dst}: {bw:g} Mbit/s")
        return 0
    req = rsv.PathRequest(args.src, args.dst, args.bandwidth, start, end, args.objective, args.max_latency,
                          _list(args.include), _list(args.exclude), _list(args.ero) or None)
    if args.disjoint:
        results = rsv.disjoint_paths(graph, req, books, k=max(args.k, 2))
    elif args.k > 1:
        results = rsv.k_shortest_paths(graph, req, books, k=args.k)
    else:
        results = [rsv.compute_path(graph, req, books)]
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return 0
    for i, r in enumerate(results, 1):
        avail = "unlimited" if not math.isfinite(r.available) else f"{r.available:g} Mbit/s"
        print(f"path {i}: {' -> '.join(r.nodes)}")
        print(f"  latency {r.latency:g} ms, {r.hops} hops, headroom {avail} (at {r.bottleneck})")
        if r.xcons:
            print(f"  XCONs to light: {', '.join(f'{a}<->{b}' for a, b in r.xcons)}")
    return 0


def _circuits(args: argparse.Namespace) -> int:
    from pce.circuits import Demand, candidate_circuits, plan_circuits
    from pce.highs import quiet_banner

    quiet_banner()
    graph = load_graph(args.graph)
    raw = _read_json(args.demands, "demands")
    try:
        demands = [Demand(str(d["id"]), str(d["src"]), str(d["dst"]), float(d["bandwidth"]),
                          None if d.get("deadline") is None else float(d["deadline"])) for d in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{args.demands}: each demand needs id, src, dst, bandwidth: {exc}") from None
    solver = args.solver or args.cfg.get("pce", {}).get("solver", "highs")
    if args.per_pair < 1 or args.time_limit <= 0:
        raise InvalidInputError("--per-pair must be >= 1 and --time-limit > 0")
    plan = plan_circuits(graph, demands, method=args.method, solver=solver, time_limit=args.time_limit,
                         circuits=candidate_circuits(graph, per_pair=args.per_pair))
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return 0
    print(f"{plan.method} ({plan.status}): objective {plan.objective:.4f} ({plan.candidates} candidate circuits, "
          f"solve {plan.solve_seconds:.3f} s)" + (f", LP bound {plan.lp_bound:.4f}" if plan.lp_bound else ""))
    for c in plan.lit:
        print(f"  light {c.a}:{c.a_port} <-> {c.b}:{c.b_port} via {' '.join(c.oports)} "
              f"({c.capacity:g} Mbit/s, setup {c.setup_time:g} s)")
    for d in demands:
        print(f"  {d.id}: {plan.served[d.id]:g}/{d.bandwidth:g} Mbit/s served")
    sys.stdout.flush()
    return 0
