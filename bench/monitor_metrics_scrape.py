"""Cost of one ``GET /metrics`` scrape on the controller's hub as the network grows.

A network view filled like a WAN of N PoPs (a packet switch and an OTS each, 8 ports apiece, every
packet switch LLDP-linked to 3 others), then the controller's metrics registry rendered as
Prometheus asks for it:

* ``scrape_changed``: the first scrape after a graph input changed (the view rebuilds its merged graph
  for that version: the scrape pays it only if no other reader — the monitor, the DB feed — did);
* ``scrape_unchanged``: a scrape of an unchanged view (the collector's per-version figures cached);
* baseline, same run: ``graph_rebuild``, one rebuild of the merged graph alone (what every reader of
  a changed view pays once).

    .venv/bin/python bench/monitor_metrics_scrape.py [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controller.mastership import Mastership  # noqa: E402
from app.controller.metrics import ControllerMetrics  # noqa: E402
from app.controller.metrics_collector import NetworkCollector  # noqa: E402
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo  # noqa: E402
from app.controller.network_view import NetworkView  # noqa: E402
from app.controller.openflow_southbound import OpenFlowSouthbound  # noqa: E402

PORTS = 8


def wan_view(pops: int) -> NetworkView:
    view = NetworkView()
    for i in range(pops):
        view.add_switch(SwitchInfo(0x100 + i, PACKET, 4, f"P{i}", {
            p: PortInfo(p, f"P{i}-eth{p}", "00:00:00:00:00:01", True) for p in range(1, PORTS + 1)}))
        view.add_switch(SwitchInfo(0x10000 + i, OTS, 1, f"O{i}", {
            p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:00:01", False) for p in range(1, PORTS + 1)}))
    for i in range(pops):
        for k, step in ((1, 1), (2, 7), (3, 31)):
            view.add_link(PacketLink(PortRef(0x100 + i, k), PortRef(0x100 + (i + step) % pops, k + 3)), 1.0)
    return view


def measure(pops: int, reps: int) -> dict:
    view = wan_view(pops)
    metrics = ControllerMetrics()
    metrics.attach(NetworkCollector(view, OpenFlowSouthbound(), Mastership()))
    changed, unchanged, rebuild = [], [], []
    body = b""
    for r in range(reps):
        # a graph input moves (a link appears / is refreshed on another port): a new view version
        view.add_link(PacketLink(PortRef(0x100, PORTS), PortRef(0x101, PORTS - r % 2)), 2.0 + r)
        t = time.perf_counter()
        body = metrics.render()
        changed.append(time.perf_counter() - t)
        t = time.perf_counter()
        metrics.render()
        unchanged.append(time.perf_counter() - t)
        view.add_link(PacketLink(PortRef(0x100, PORTS), PortRef(0x102, PORTS)), 1000.0 + r)
        t = time.perf_counter()
        view.graph()
        rebuild.append(time.perf_counter() - t)
    ms = lambda xs: round(statistics.median(xs) * 1e3, 3)  # noqa: E731
    return {"pops": pops, "switches": 2 * pops, "lldp_links": len(view.links.links()), "reps": reps,
            "scrape_changed_ms": ms(changed), "scrape_unchanged_ms": ms(unchanged), "graph_rebuild_ms": ms(rebuild),
            "unchanged_over_rebuild": round(statistics.median(unchanged) / statistics.median(rebuild), 4),
            "bytes": len(body)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sizes, reps = ((12,), 3) if args.quick else ((12, 25, 50, 100), 9)
    rows = [measure(n, reps) for n in sizes]
    for r in rows:
        print(f"{r['pops']:4d} PoPs ({r['switches']} switches, {r['lldp_links']} LLDP links): scrape after a change "
              f"{r['scrape_changed_ms']} ms (graph rebuild alone {r['graph_rebuild_ms']} ms), unchanged "
              f"{r['scrape_unchanged_ms']} ms, {r['bytes']} bytes")
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "monitor_metrics_scrape", "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
