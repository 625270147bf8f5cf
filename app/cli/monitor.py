"""``mlte monitor ...``: sFlow collector, OVS sFlow control, drop counters, latency change detection."""
from __future__ import annotations

import argparse
import json
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("monitor", help="monitoring: sFlow collector, OVS sFlow control, path-change detection")
    msub = p.add_subparsers(dest="monitor_cmd", metavar="MONITOR_COMMAND")
    msub.required = True

    c = msub.add_parser("sflow-collect", help="receive sFlow v5 for a while and print per-flow rate estimates")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=None, help="UDP port (default [monitor] sflow_collector_port)")
    c.add_argument("--duration", type=float, default=10.0, help="seconds to listen")
    c.add_argument("--window", type=float, default=None, help="rate window in seconds (default: the duration)")
    c.add_argument("--top", type=int, default=20, help="print at most this many flows")
    c.add_argument("--json", action="store_true", help="JSON output")
    c.set_defaults(func=_collect)

    e = msub.add_parser("sflow-enable", help="turn on OVS sFlow on a bridge (via OVSDB)")
    e.add_argument("bridge")
    e.add_argument("--target", default=None, help="collector host:port (default 127.0.0.1:<sflow_collector_port>)")
    e.add_argument("--sampling", type=int, default=None, help="1-in-N packet sampling (default [monitor])")
    e.add_argument("--polling", type=int, default=None, help="counter polling seconds (default [monitor])")
    e.add_argument("--agent", default="", help="agent address or interface carried in the datagrams")
    e.set_defaults(func=_enable)
    d = msub.add_parser("sflow-disable", help="remove OVS sFlow from a bridge")
    d.add_argument("bridge")
    d.set_defaults(func=_disable)
    s = msub.add_parser("sflow-status", help="show a bridge's sFlow settings")
    s.add_argument("bridge")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_status)

    q = msub.add_parser("drops", help="drop counters of a shaped port's bounded queue (tc)")
    q.add_argument("port")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_drops)

    lat = msub.add_parser("detect-latency", help="seed-001 path-change detector on a 't,latency_ms' CSV")
    lat.add_argument("file")
    lat.add_argument("--tolerance-ms", type=float, default=None, help="default [monitor] path_change_tolerance_ms")
    lat.add_argument("--window", type=int, default=4, help="one-second minima per window")
    lat.add_argument("--stable", type=int, default=3, help="minima within the tolerance for a stable window")
    lat.add_argument("--baseline", action="store_true", help="also run the rolling-minimum (k=20) baseline")
    lat.add_argument("--json", action="store_true")
    lat.set_defaults(func=_detect_latency)

    ev = msub.add_parser("events", help="monitoring events stored in the database")
    ev.add_argument("--since", type=float, default=0.0, help="epoch seconds")
    ev.add_argument("--kind", default=None)
    ev.add_argument("--limit", type=int, default=100)
    ev.set_defaults(func=_events)


def _collect(args: argparse.Namespace) -> int:
    from monitor.sflow import SflowCollector

    port = args.port if args.port is not None else int(args.cfg["monitor"]["sflow_collector_port"])
    window = args.window or args.duration
    col = SflowCollector(args.host, port, window=window)
    try:
        col.start()
    except OSError as exc:
        from monitor.errors import MonitorError

        raise MonitorError(f"cannot listen on udp {args.host}:{port}: {exc.strerror or exc}") from None
    try:
        time.sleep(args.duration)
        rates = col.flow_rates()
    finally:
        col.stop()
    stats = col.stats()
    if args.json:
        print(json.dumps({"stats": stats, "window": window, "flows": [r.as_dict() for r in rates[: args.top]]},
                         indent=2, sort_keys=True))
        return 0
    print(f"udp {args.host}:{stats['port']}: {stats['decoded']} datagrams, {stats['flow_samples']} flow samples, "
          f"{stats['counter_samples']} counter samples, {stats['bad']} bad {stats['bad_by_reason'] or ''}")
    for r in rates[: args.top]:
        print(f"  {r.mbps:10.3f} Mbit/s  {r.samples:6d} samples  {r.key}")
    return 0


def _ctl(args: argparse.Namespace):
    from monitor.ovsdb_sflow import OvsSflow

    m = args.cfg["monitor"]
    target = getattr(args, "target", None) or f"127.0.0.1:{m['sflow_collector_port']}"
    sampling = getattr(args, "sampling", None) or int(m["sflow_sampling"])
    polling = getattr(args, "polling", None)
    return OvsSflow(target, sampling, int(m["sflow_polling"]) if polling is None else polling,
                    agent=getattr(args, "agent", ""))


def _enable(args: argparse.Namespace) -> int:
    ctl = _ctl(args)
    ctl.enable(args.bridge)
    print(f"{args.bridge}: sFlow to {ctl.target}, 1-in-{ctl.sampling} sampling, polling {ctl.polling}s")
    return 0


def _disable(args: argparse.Namespace) -> int:
    _ctl(args).disable(args.bridge)
    print(f"{args.bridge}: sFlow off")
    return 0


def _status(args: argparse.Namespace) -> int:
    cfg = _ctl(args).status(args.bridge)
    if args.json:
        print(json.dumps(cfg.__dict__ if cfg else None))
    else:
        print(f"{args.bridge}: " + (f"sFlow to {', '.join(cfg.targets)}, 1-in-{cfg.sampling}, polling {cfg.polling}s"
                                    if cfg else "sFlow off"))
    return 0


def _drops(args: argparse.Namespace) -> int:
    from monitor.drops import OvsShapedQueue

    q = OvsShapedQueue().tc_drops(args.port)
    if args.json:
        print(json.dumps(q.__dict__))
    else:
        print(f"{q.port} queue {q.queue}: {q.tx_packets} packets sent, {q.dropped} dropped")
    return 0


def _detect_latency(args: argparse.Namespace) -> int:
    from monitor.latency import PathChangeDetector, RollingMinBaseline, run_detector
    from monitor.latency_io import read_latency_csv

    series = read_latency_csv(args.file)
    tol = args.tolerance_ms if args.tolerance_ms is not None else float(args.cfg["monitor"]["path_change_tolerance_ms"])
    if not 1 <= args.stable <= args.window:
        from monitor.errors import MonitorError

        raise MonitorError("need 1 <= --stable <= --window")
    out = {"samples": len(series),
           "changes": [c.__dict__ for c in run_detector(PathChangeDetector(1.0, args.window, args.stable, tol), series)]}
    if args.baseline:
        out["baseline_changes"] = [c.__dict__ for c in run_detector(RollingMinBaseline(20, 1.0, tol), series)]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['samples']} samples, {len(out['changes'])} path changes")
    for c in out["changes"]:
        old = "-" if c["old_ms"] is None else f"{c['old_ms']:.3f}"
        print(f"  t={c['t']:.1f}s  {old} -> {c['new_ms']:.3f} ms")
    if args.baseline:
        print(f"rolling-minimum baseline: {len(out['baseline_changes'])} changes")
    return 0


def _events(args: argparse.Namespace) -> int:
    from app.cli.startup import check_database_exists
    from app.db.migrate import open_migrated
    from monitor.store import MonitorStore

    check_database_exists(args.cfg["db"]["url"], "[db] url")  # reading must not create an empty one
    db = open_migrated(args.cfg["db"]["url"])
    try:
        store = MonitorStore(db.engine, float(args.cfg["monitor"]["retention_seconds"]))
        print(json.dumps(store.events(args.since, args.kind, args.limit), indent=2))
    finally:
        db.dispose()
    return 0
