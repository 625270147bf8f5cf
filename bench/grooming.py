"""Grooming: circuit-hours of a day of reservations, shared circuits vs one circuit per reservation.

A generated day calendar (``--requests`` random reservations, sub-wavelength bandwidths of 1-5 Mbit/s
on 10 Mbit/s ODU2 circuits, windows of 30 min to 4 h starting anywhere in the day, asked in random
order) is admitted through the PCE twice on the same graph: without grooming (every reservation
lights circuits of its own, optical ports taken whole) and with it (a reservation rides a circuit
booked for an overlapping window when the piecewise peak leaves room). For each run: admitted and
refused requests, Mbit/s·h served, and circuit-hours — for each circuit (optical-port chain) the length
of the union of the windows of the reservations on it, i.e. the time it must be lit. The headline
ratio compares, for the reservations grooming admitted, what one circuit per reservation would take
(each for its own window) with what the shared circuits take; the ungroomed run on the same graph is
the baseline of what admission serves without grooming. Also the admission time per request of both.

Why a graph stays below 2x: the same admitted reservations with ONE direct circuit each for their window
(``circuit_hours_ratio_one_direct``: a multi-hop groomed path counts once, not once per circuit it
crosses) and the best any per-pair sharing of direct circuits could do (``pair_packing_ratio_bound``:
per switch pair, at every instant exactly ``ceil(load / 10)`` circuits — perfect packing, no port
limit), with ``concurrent_per_pair`` (reservation-hours / 24 h / switch pairs): where reservations of a
pair seldom overlap, no routing choice can share much.

    .venv/bin/python bench/grooming.py --json bench/results/grooming.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pce.bookings import Booking  # noqa: E402
from pce.errors import NoPathError  # noqa: E402
from pce.grooming import segments  # noqa: E402
from pce.reservation import PathRequest, compute_path  # noqa: E402
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph  # noqa: E402

DAY = 86400.0
BANDWIDTHS = (1.0, 2.0, 3.0, 5.0)  # Mbit/s: sub-wavelength demands on 10 Mbit/s circuits
CIRCUIT_MBPS = 10.0  # ODU2 at the lab's scale


def calendar(endpoints: list[tuple[str, str]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` reservations for one day, in the (random) order they are asked."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        src, dst = rng.choice(endpoints)
        start = rng.randrange(0, int(DAY) - 1800, 900)
        length = rng.choice((1800, 3600, 7200, 10800, 14400))
        out.append({"id": f"r{i}", "src": src, "dst": dst, "bandwidth": rng.choice(BANDWIDTHS),
                    "start": float(start), "end": float(min(DAY, start + length))})
    return out


def union_hours(spans: list[tuple[float, float]]) -> float:
    """Length of the union of ``[start, end)`` spans, in hours."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total / 3600.0


def switch_of(endpoint: str) -> str:
    return endpoint.rpartition(":")[0] or endpoint


def pair_packing_hours(bookings: list[Booking], requests: dict[str, dict[str, Any]], capacity: float) -> float:
    """The fewest circuit-hours *direct* circuits could take for these reservations: per switch pair, at
    every instant as many circuits as its load needs (``ceil(load / capacity)``), each off the moment
    it is not needed — perfect packing, no ports limit. The bound of per-pair sharing: only riding
    several circuits (through other switches) can beat it."""
    by: dict[tuple[str, ...], list[Booking]] = defaultdict(list)
    for b in bookings:
        r = requests[b.id]
        by[tuple(sorted((switch_of(r["src"]), switch_of(r["dst"]))))].append(b)
    total = 0.0
    for bs in by.values():
        points = sorted({t for b in bs for t in (b.start, b.end)})
        for a, z in zip(points, points[1:], strict=False):
            load = sum(b.bandwidth for b in bs if b.start <= a < b.end)
            total += math.ceil(load / capacity - 1e-9) * (z - a)
    return total / 3600.0


def admit(graph: Any, requests: list[dict[str, Any]], groom: bool) -> dict[str, Any]:
    books: list[Booking] = []
    times = []
    refused = 0
    for i, r in enumerate(requests):
        t0 = time.perf_counter()
        try:  # each with a VLAN of its own (sharers of a circuit need one, all different)
            res = compute_path(graph, PathRequest(r["src"], r["dst"], r["bandwidth"], r["start"], r["end"],
                                                  groom=groom, tag=1 + i % 4094), books)
        except NoPathError:
            refused += 1
            times.append(time.perf_counter() - t0)
            continue
        times.append(time.perf_counter() - t0)
        books.append(res.booking(r["id"], r["start"], r["end"], r["bandwidth"], tag=1 + i % 4094))
    on: dict[str, list[tuple[float, float]]] = defaultdict(list)
    own = 0.0  # one circuit per reservation: each of its circuits lit for its own window
    for b in books:
        segs = segments(graph, b.edges)
        own += len(segs) * (b.end - b.start) / 3600.0
        for seg in segs:
            on[seg.key].append((b.start, b.end))
    lit = sum(union_hours(v) for v in on.values())
    one = sum(b.end - b.start for b in books) / 3600.0  # one direct circuit per reservation, its window
    packed = pair_packing_hours(books, {r["id"]: r for r in requests}, CIRCUIT_MBPS)
    return {"admitted": len(books), "refused": refused,
            "circuit_hours_one_direct_each": round(one, 2), "circuit_hours_pair_packing_bound": round(packed, 2),
            "served_mbit_h": round(sum(b.bandwidth * (b.end - b.start) for b in books) / 3600.0, 2),
            "circuit_hours": round(lit, 2), "circuit_hours_one_per_reservation": round(own, 2),
            "circuits_used": len(on),
            "circuit_hours_per_100_mbit_h": round(100 * lit / served, 2) if (served := sum(
                b.bandwidth * (b.end - b.start) for b in books) / 3600.0) else None,
            "admission_ms_median": round(statistics.median(times) * 1000, 3),
            "admission_ms_p95": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 3)}


def run(name: str, graph: Any, endpoints: list[tuple[str, str]], n: int, seed: int) -> dict[str, Any]:
    reqs = calendar(endpoints, n, seed)
    plain = admit(graph, reqs, groom=False)
    groomed = admit(graph, reqs, groom=True)
    ratio = groomed["circuit_hours_one_per_reservation"] / groomed["circuit_hours"] if groomed["circuit_hours"] else None
    lit = groomed["circuit_hours"]
    out = {"graph": name, "requests": n, "seed": seed, "one_circuit_per_reservation": plain, "grooming": groomed,
           "circuit_hours_ratio": None if ratio is None else round(ratio, 2),
           # the same reservations, each on ONE direct circuit for its window: vs grooming, and vs the best
           # per-pair packing of direct circuits (the most per-pair sharing could give)
           "circuit_hours_ratio_one_direct": round(groomed["circuit_hours_one_direct_each"] / lit, 2) if lit else None,
           "pair_packing_ratio_bound": round(groomed["circuit_hours_one_direct_each"]
                                             / groomed["circuit_hours_pair_packing_bound"], 2)
           if groomed["circuit_hours_pair_packing_bound"] else None,
           "concurrent_per_pair": round(groomed["circuit_hours_one_direct_each"] / 24.0 / len(
               {tuple(sorted((switch_of(a), switch_of(b)))) for a, b in endpoints}), 2),
           "admitted_ratio": round(groomed["admitted"] / plain["admitted"], 2) if plain["admitted"] else None}
    print(f"{name}: {n} requests; one circuit each: {plain['admitted']} admitted, {plain['circuit_hours']} "
          f"circuit-h; grooming: {groomed['admitted']} admitted, {groomed['circuit_hours']} circuit-h "
          f"(one each would take {groomed['circuit_hours_one_per_reservation']}): ratio {out['circuit_hours_ratio']}",
          flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=5, help="calendars per graph")
    ap.add_argument("--quick", action="store_true", help="one short calendar per graph (smoke run)")
    args = ap.parse_args(argv)
    if args.requests < 1 or args.seeds < 1:
        print("--requests and --seeds must be >= 1", file=sys.stderr)
        return 2
    n, seeds = (40, 1) if args.quick else (args.requests, args.seeds)
    fig2 = spec_to_graph(fig2_testbed())
    fig2_eps = [("A:1", "C:3"), ("A:2", "C:4"), ("A:1", "B"), ("B", "C:3"), ("A:2", "B")]
    mesh = spec_to_graph(optical_mesh(6, 6, degree=3, seed=1))
    sws = sorted(mesh.nodes_of_kind("packet"))
    mesh_eps = [(a, b) for a in sws for b in sws if a < b]
    runs = [run(name, g, eps, n, seed) for name, g, eps in (("fig2", fig2, fig2_eps), ("mesh6x6", mesh, mesh_eps))
            for seed in range(seeds)]
    summary = {}
    for name in ("fig2", "mesh6x6"):
        mine = [r for r in runs if r["graph"] == name]
        summary[name] = {"circuit_hours_ratio_min": min(r["circuit_hours_ratio"] or 0 for r in mine),
                         "circuit_hours_ratio_median": statistics.median(r["circuit_hours_ratio"] or 0 for r in mine),
                         "admitted_ratio_median": statistics.median(r["admitted_ratio"] or 0 for r in mine),
                         "circuit_hours_ratio_one_direct_median": statistics.median(
                             r["circuit_hours_ratio_one_direct"] or 0 for r in mine),
                         "pair_packing_ratio_bound_median": statistics.median(
                             r["pair_packing_ratio_bound"] or 0 for r in mine),
                         "concurrent_per_pair_median": statistics.median(r["concurrent_per_pair"] for r in mine)}
    result = {"benchmark": "grooming", "command": "bench/grooming.py" + (" --quick" if args.quick else ""),
              "requests": n, "bandwidths_mbps": list(BANDWIDTHS), "circuit_mbps": CIRCUIT_MBPS, "summary": summary,
              "runs": runs}
    print(json.dumps(summary), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
