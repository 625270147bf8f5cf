"""Reservation CSPF speed on large multi-layer graphs, against plain networkx Dijkstra.

Graphs: ``optical_mesh`` labs (packet switches over an OTS mesh, every OTS a full crossbar of
ODU2 ports) with random bookings. For random endpoint pairs it times ``compute_path`` per
objective, ``k_shortest_paths`` (k=4), ``disjoint_paths`` (k=2) and ``available_bandwidth``;
the baseline in the same run is ``networkx.dijkstra_path`` by latency on the same (unpruned,
undirected) graph, which knows nothing of bandwidth, windows or port rules.

    .venv/bin/python bench/pce_cspf.py --json bench/results/pce_cspf.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import networkx as nx  # noqa: E402

from pce.errors import NoPathError  # noqa: E402
from pce.reservation import (  # noqa: E402
    BookingCalendar,
    PathRequest,
    available_bandwidth,
    compute_path,
    disjoint_paths,
    k_shortest_paths,
)
from topology.spec import optical_mesh, spec_to_graph  # noqa: E402


def timed(fn, *a, **kw) -> tuple[float, object]:
    t0 = time.perf_counter()
    try:
        out = fn(*a, **kw)
    except NoPathError as exc:
        out = exc
    return time.perf_counter() - t0, out


def bench_graph(n_packet: int, n_ots: int, pairs: int, seed: int) -> dict:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    g = spec_to_graph(optical_mesh(n_packet, n_ots, degree=4, seed=seed))
    build = time.perf_counter() - t0
    sws = g.nodes_of_kind("packet")
    # background load: 40 earlier reservations, booked one after another through the PCE
    books = []
    for i in range(40):
        a, b = rng.sample(sws, 2)
        s = rng.uniform(0, 50)
        try:
            res = compute_path(g, PathRequest(a, b, 1.0, s, s + 30), books)
        except NoPathError:
            continue
        books.append(res.booking(f"r{i}", s, s + 30, 1.0))
    cal = BookingCalendar(books)
    times: dict[str, list[float]] = {k: [] for k in ("networkx_dijkstra", "shortest", "least-hops", "widest",
                                                      "fits", "yen_k4", "disjoint_k2", "available")}
    fails = 0
    weight = lambda u, v, d: min(x.get("latency", 0.0) for x in d.values()) + 1e-3  # noqa: E731
    for _ in range(pairs):
        a, b = rng.sample(sws, 2)
        t, _ = timed(nx.dijkstra_path, g.g, a, b, weight=weight)
        times["networkx_dijkstra"].append(t)
        for obj in ("shortest", "least-hops", "widest", "fits"):
            t, out = timed(compute_path, g, PathRequest(a, b, 1.0, 20, 40, objective=obj), cal)
            times[obj].append(t)
            fails += isinstance(out, NoPathError)
        times["yen_k4"].append(timed(k_shortest_paths, g, PathRequest(a, b, 1.0, 20, 40), cal, k=4)[0])
        times["disjoint_k2"].append(timed(disjoint_paths, g, PathRequest(a, b, 1.0, 20, 40), cal, k=2)[0])
        times["available"].append(timed(available_bandwidth, g, a, b, 20, 40, cal)[0])
    base = statistics.median(times["networkx_dijkstra"])
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "graph": repr(g), "nodes": g.g.number_of_nodes(), "edges": g.g.number_of_edges(),
        "bookings": len(books), "pairs": pairs, "no_path_answers": fails, "build_seconds": build,
        "median_seconds": med,
        "max_seconds": {k: max(v) for k, v in times.items()},
        "ratio_to_networkx": {k: v / base for k, v in med.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    sizes = [(20, 10)] if args.quick else [(20, 10), (200, 100), (1000, 300)]
    results = []
    for n_packet, n_ots in sizes:
        r = bench_graph(n_packet, n_ots, pairs=5 if args.quick else 20, seed=1)
        results.append(r)
        print(json.dumps({k: r[k] for k in ("graph", "bookings", "median_seconds")}, indent=1), flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
