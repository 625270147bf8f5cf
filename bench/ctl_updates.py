"""Controller overhead of multi-layer updates on the Fig. 2 testbed (needs root, OVS, Mininet).

The OTS agents run with a *fixed* provisioning delay (``--delay``, default 0.2 s), so what an update
takes beyond it is the controller's (plus OpenFlow and the userspace datapath):

1. **XCON reconfiguration**: ``POST /xcon`` X 1<->3 then ``DELETE``, N times; end to end at the client
   minus the provisioning delay (the issue's target: median < 10 ms; the OSCARS-TE paper measured
   150 ms min / 217 ms mean end to end on hardware).
2. **A 3-OTS circuit plus its packet rules** (``bypass``: X 1<->2, Y 1<->4, Z 1<->2, link A:3-C:1, and
   one rule per direction at A and C) through ``POST /plan``: parallel steps (the planner's order)
   against the same XCONs hop by hop (each XCON step depends on the previous one), same run; target
   parallel <= one delay + 50 ms. Verification is off (no traffic) and D = 0 ms: the plan waits for the
   ports up and the LLDP link, not for a stability period.
3. **The control API's credential** (issue 24): both measurements again in the same run after the
   controller is restarted with ``[controller] api_auth = false`` (same lab, same switches); what the
   bearer token costs is ``auth_cost`` (target < 10 %). ``--no-auth-off`` skips it.

    sudo .venv/bin/python bench/ctl_updates.py --json bench/results/ctl_updates.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.update import planner  # noqa: E402
from app.update.model import FlowRule, XconSpec  # noqa: E402
from app.update.plan import Plan, XconStep  # noqa: E402
from topology import rule_plan  # noqa: E402

BYPASS = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]


def stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {"median_ms": round(statistics.median(s), 2), "min_ms": round(s[0], 2), "max_ms": round(s[-1], 2),
            "p90_ms": round(s[int(0.9 * (len(s) - 1))], 2), "n": len(s)}


def circuit_plans(ident: int) -> tuple[Plan, Plan, Plan]:
    """(parallel provision, hop-by-hop provision, release) of the bypass circuit and its rules."""
    band = rule_plan.RESERVATION
    rules = [FlowRule("A", band.name, ident, band.priority(), (("in_port", 1),), 3),
             FlowRule("C", band.name, ident, band.priority(), (("in_port", 1),), 3)]
    ingress = [FlowRule("A", band.name, ident, band.priority(), (("in_port", 3),), 1),
               FlowRule("C", band.name, ident, band.priority(), (("in_port", 3),), 1)]
    kw = {"verify": False, "stable_ms": 0.0, "circuit_timeout_s": 10.0}
    parallel = planner.provision(BYPASS, [("A", 3), ("C", 1)], [(("A", 3), ("C", 1))], rules, ingress, **kw)
    chained, prev = [], None
    for s in parallel.steps:  # the same plan, XCON steps one after the other
        if isinstance(s, XconStep):
            s = s.with_deps({prev} if prev else set())
            prev = s.id
        chained.append(s)
    hop = Plan(tuple(chained), parallel.kind, parallel.mode, commit=parallel.commit)
    release = planner.release(BYPASS, rules, ingress, drain=False)
    return parallel, hop, release


def measure(c, n_xcon: int, n_circuit: int, delay: float) -> dict:
    """Both measurements through the control API client ``c``."""
    out: dict = {}
    e2e, barrier = [], []
    for _ in range(n_xcon):
        t0 = time.perf_counter()
        r = c.xcon("X", 1, 3)
        e2e.append((time.perf_counter() - t0 - delay) * 1000)
        barrier.append((r["applied_at"] - r["sent_at"] - delay) * 1000)
        c.remove_xcon("X", 1)
        time.sleep(0.2)
    out["xcon_overhead"] = {"end_to_end_minus_delay": stats(e2e), "barrier_minus_delay": stats(barrier),
                            "target_median_ms": 10.0}
    print(f"XCON overhead: median {out['xcon_overhead']['end_to_end_minus_delay']['median_ms']} ms "
          f"(end to end minus the {delay * 1000:.0f} ms delay)", flush=True)
    runs: dict[str, list[float]] = {"parallel": [], "hop_by_hop": []}
    for i in range(n_circuit):
        parallel, hop, release = circuit_plans(100 + i)
        for name, plan in (("parallel", parallel), ("hop_by_hop", hop)):
            rec = c.request("POST", "/plan", {"plan": plan.to_json()}, timeout=60)
            assert rec["state"] == "done", rec
            runs[name].append((rec["finished_at"] - rec["started_at"]) * 1000)
            rel = c.request("POST", "/plan", {"plan": release.to_json()}, timeout=60)
            assert rel["state"] == "done", rel
            time.sleep(0.5)
    p, h = stats(runs["parallel"]), stats(runs["hop_by_hop"])
    out["circuit_3ots"] = {"parallel": p, "hop_by_hop": h, "speedup": round(h["median_ms"] / p["median_ms"], 2),
                           "target_ms": round(delay * 1000 + 50, 1),
                           "parallel_meets_target": p["median_ms"] <= delay * 1000 + 50}
    print(f"3-OTS circuit + rules: parallel median {p['median_ms']} ms, hop by hop {h['median_ms']} ms "
          f"(target <= {delay * 1000 + 50:.0f} ms)", flush=True)
    return out


def auth_cost(on: dict, off: dict, delay: float) -> dict:
    """The credential's share: medians with and without it, relative to the controller's overhead
    (the strict reading) and to the whole update as the client sees it."""
    x_on = on["xcon_overhead"]["end_to_end_minus_delay"]["median_ms"]
    x_off = off["xcon_overhead"]["end_to_end_minus_delay"]["median_ms"]
    c_on, c_off = on["circuit_3ots"]["parallel"]["median_ms"], off["circuit_3ots"]["parallel"]["median_ms"]
    return {"xcon_overhead_median_ms": {"on": x_on, "off": x_off},
            "xcon_cost_of_overhead_pct": round((x_on - x_off) / x_off * 100, 1),
            "xcon_cost_end_to_end_pct": round((x_on - x_off) / (x_off + delay * 1000) * 100, 2),
            "circuit_parallel_median_ms": {"on": c_on, "off": c_off},
            "circuit_cost_pct": round((c_on - c_off) / c_off * 100, 2),
            "target_pct": 10.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--delay", type=float, default=0.2, help="fixed OTS provisioning delay, s")
    ap.add_argument("--no-auth-off", action="store_true", help="skip the run without the API credential")
    args = ap.parse_args()
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    n_xcon, n_circuit = (5, 3) if args.quick else (30, 10)
    work = Path(tempfile.mkdtemp(prefix="mlte-bench-ctl-"))
    spec = fig2_testbed()
    static = work / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=args.delay), static)
    out: dict = {"delay_s": args.delay, "quick": args.quick}
    with net_lock(), LabSession(spec, work, delay=(args.delay, args.delay), static_file=str(static)) as session:
        out.update(measure(session.client, n_xcon, n_circuit, args.delay))
        if not args.no_auth_off:
            from app.controller.client import ControllerClient

            off_cfg = work / "auth-off.toml"  # UNSAFE outside a benchmark: no credential on the API
            off_cfg.write_text("[controller]\napi_auth = false\n")
            session.config_file = str(off_cfg)
            session.restart_controller(kill=False)
            session.client = ControllerClient(port=session.api_port, auth=False)
            session.wait_connected(60)
            out["auth_off"] = measure(session.client, n_xcon, n_circuit, args.delay)
            out["auth_cost"] = cost = auth_cost(out, out["auth_off"], args.delay)
            print(f"control-API credential: XCON overhead median {cost['xcon_overhead_median_ms']['on']} ms on, "
                  f"{cost['xcon_overhead_median_ms']['off']} ms off ({cost['xcon_cost_of_overhead_pct']} % of the "
                  f"overhead, {cost['xcon_cost_end_to_end_pct']} % end to end); parallel circuit "
                  f"{cost['circuit_cost_pct']} %", flush=True)
        out["controller_errors"] = session.controller_errors()
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
