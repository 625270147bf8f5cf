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
3. **Packet rule updates**: the bypass circuit's 4 packet rules (A and C) added one after the other
   through ``POST /plan``, then removed: FLOW_MOD + BARRIER round trips to OVS and nothing else.

``--tls-compare`` (issue 24: OpenFlow over TLS costs < 10 %): the same measurements twice in one run,
``[controller] tls`` off then on (``LabSession(tls=True)``: a `mlte pki` CA, OVS ``set-ssl``), and the
on/off ratio of each median. Until the OTS agent has its TLS client (``testbed.AGENT_TLS_OPTIONS``)
the comparison runs on Fig. 2's packet switches alone (A, B, C, a cable A:3-C:1 where the bypass
circuit would be): the rule updates only.

    sudo .venv/bin/python bench/ctl_updates.py --json bench/results/ctl_updates.json [--quick]
    sudo .venv/bin/python bench/ctl_updates.py --tls-compare --json bench/results/ctl_tls.json   # = bench/ctl_tls.py
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
from app.update.plan import ADD, REMOVE, FlowStep, Plan, XconStep  # noqa: E402
from topology import rule_plan  # noqa: E402

BYPASS = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]


def stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {"median_ms": round(statistics.median(s), 2), "min_ms": round(s[0], 2), "max_ms": round(s[-1], 2),
            "p90_ms": round(s[int(0.9 * (len(s) - 1))], 2), "n": len(s)}


def bypass_rules(ident: int) -> tuple[list[FlowRule], list[FlowRule]]:
    """(transit, ingress) packet rules of the bypass circuit at A and C."""
    band = rule_plan.RESERVATION
    rules = [FlowRule("A", band.name, ident, band.priority(), (("in_port", 1),), 3),
             FlowRule("C", band.name, ident, band.priority(), (("in_port", 1),), 3)]
    ingress = [FlowRule("A", band.name, ident, band.priority(), (("in_port", 3),), 1),
               FlowRule("C", band.name, ident, band.priority(), (("in_port", 3),), 1)]
    return rules, ingress


def rule_plans(ident: int) -> tuple[Plan, Plan]:
    """(add, remove) the bypass circuit's 4 packet rules, each step after the previous one."""
    rules, ingress = bypass_rules(ident)
    plans = []
    for op in (ADD, REMOVE):
        steps = [FlowStep(id=f"{op}{i}", deps=frozenset({f"{op}{i - 1}"} if i else ()), op=op, rule=r)
                 for i, r in enumerate(rules + ingress)]
        plans.append(Plan(tuple(steps), f"bench_rules_{op}"))
    return plans[0], plans[1]


def circuit_plans(ident: int) -> tuple[Plan, Plan, Plan]:
    """(parallel provision, hop-by-hop provision, release) of the bypass circuit and its rules."""
    rules, ingress = bypass_rules(ident)
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


Samples = dict[str, list[float]]  # raw milliseconds by measurement, accumulated over rounds


def measure_rules(c, n: int, raw: Samples) -> None:
    """Section 3: ``n`` rule plans added and removed (plan time in the controller, and at the client)."""
    for i in range(n):
        add, remove = rule_plans(200 + i)
        t0 = time.perf_counter()
        rec = c.request("POST", "/plan", {"plan": add.to_json()}, timeout=60)
        raw.setdefault("rules.add_end_to_end", []).append((time.perf_counter() - t0) * 1000)
        assert rec["state"] == "done", rec
        raw.setdefault("rules.add", []).append((rec["finished_at"] - rec["started_at"]) * 1000)
        rec = c.request("POST", "/plan", {"plan": remove.to_json()}, timeout=60)
        assert rec["state"] == "done", rec
        raw.setdefault("rules.remove", []).append((rec["finished_at"] - rec["started_at"]) * 1000)


def measure_optical(c, delay: float, n_xcon: int, n_circuit: int, raw: Samples) -> None:
    """Sections 1 and 2 (need the OTS agents)."""
    for _ in range(n_xcon):
        t0 = time.perf_counter()
        r = c.xcon("X", 1, 3)
        raw.setdefault("xcon.end_to_end_minus_delay", []).append((time.perf_counter() - t0 - delay) * 1000)
        raw.setdefault("xcon.barrier_minus_delay", []).append((r["applied_at"] - r["sent_at"] - delay) * 1000)
        c.remove_xcon("X", 1)
        time.sleep(0.2)
    for i in range(n_circuit):
        parallel, hop, release = circuit_plans(100 + i)
        for name, plan in (("parallel", parallel), ("hop_by_hop", hop)):
            rec = c.request("POST", "/plan", {"plan": plan.to_json()}, timeout=60)
            assert rec["state"] == "done", rec
            raw.setdefault(f"circuit.{name}", []).append((rec["finished_at"] - rec["started_at"]) * 1000)
            rel = c.request("POST", "/plan", {"plan": release.to_json()}, timeout=60)
            assert rel["state"] == "done", rel
            time.sleep(0.5)


def report(raw: Samples, delay: float) -> dict:
    """The result document of one mode (the keys ``make bench-ctl`` has always written, plus ``rules``)."""
    out: dict = {}
    if "xcon.end_to_end_minus_delay" in raw:
        out["xcon_overhead"] = {"end_to_end_minus_delay": stats(raw["xcon.end_to_end_minus_delay"]),
                                "barrier_minus_delay": stats(raw["xcon.barrier_minus_delay"]),
                                "target_median_ms": 10.0}
        p, h = stats(raw["circuit.parallel"]), stats(raw["circuit.hop_by_hop"])
        out["circuit_3ots"] = {"parallel": p, "hop_by_hop": h, "speedup": round(h["median_ms"] / p["median_ms"], 2),
                               "target_ms": round(delay * 1000 + 50, 1),
                               "parallel_meets_target": p["median_ms"] <= delay * 1000 + 50}
        print(f"XCON overhead: median {out['xcon_overhead']['end_to_end_minus_delay']['median_ms']} ms "
              f"(end to end minus the {delay * 1000:.0f} ms delay); 3-OTS circuit + rules: parallel median "
              f"{p['median_ms']} ms, hop by hop {h['median_ms']} ms (target <= {delay * 1000 + 50:.0f} ms)", flush=True)
    out["rules"] = {k.split(".", 1)[1]: stats(v) for k, v in raw.items() if k.startswith("rules.")}
    print(f"4 packet rules one by one: add median {out['rules']['add']['median_ms']} ms, "
          f"remove {out['rules']['remove']['median_ms']} ms", flush=True)
    return out


def packet_only(spec):
    """Fig. 2's packet switches and hosts with a cable A:3-C:1 where the bypass circuit would be."""
    from topology.spec import LabSpec, LinkSpec

    access = [link for link in spec.links if link.kind == "access"]
    return LabSpec("fig2-packet", spec.switches, (), spec.hosts,
                   (*access, LinkSpec("A", 3, "C", 1, "packet", access[0].mbps)), spec.unit_mbps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--delay", type=float, default=0.2, help="fixed OTS provisioning delay, s")
    ap.add_argument("--tls-compare", action="store_true", help="the same run with OpenFlow over TLS off, then on")
    ap.add_argument("--rounds", type=int, default=2, help="--tls-compare: labs per mode, alternated (default 2)")
    args = ap.parse_args()
    from mininet_labs import testbed
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    n_xcon, n_circuit, n_rules = (5, 3, 10) if args.quick else (30, 10, 50)
    work = Path(tempfile.mkdtemp(prefix="mlte-bench-ctl-"))
    spec = fig2_testbed()
    static = work / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=args.delay), static)
    out: dict = {"delay_s": args.delay, "quick": args.quick}
    optical = not args.tls_compare or testbed.AGENT_TLS_OPTIONS is not None  # agents that can dial TLS
    # --tls-compare alternates off, on, off, on ...: load on the machine and warm-up hit both alike
    modes = [False, True] * args.rounds if args.tls_compare else [False]
    raw: dict[bool, Samples] = {False: {}, True: {}}
    errors: list[str] = []
    with net_lock():
        for k, tls in enumerate(modes):
            kw = {"static_file": str(static)} if optical else {}
            with LabSession(spec if optical else packet_only(spec), work / f"{k}-{'tls' if tls else 'plain'}",
                            delay=(args.delay, args.delay), tls=tls, **kw) as session:
                session.wait_links(timeout=30)  # discovery settled before anything is timed
                measure_rules(session.client, 3, {})  # warm-up, not counted
                if optical:
                    measure_optical(session.client, args.delay, n_xcon, n_circuit, raw[tls])
                measure_rules(session.client, n_rules, raw[tls])
                errors.append(session.controller_errors())
    if not args.tls_compare:
        out.update(report(raw[False], args.delay))
    else:
        out["lab"] = "fig2" if optical else "fig2 packet switches only (the OTS agents cannot dial TLS yet)"
        out["rounds"] = args.rounds
        out["tls_off"], out["tls_on"] = report(raw[False], args.delay), report(raw[True], args.delay)
        off = {k: statistics.median(v) for k, v in raw[False].items()}
        on = {k: statistics.median(v) for k, v in raw[True].items()}
        out["tls_cost_pct"] = {k: round((on[k] - off[k]) / off[k] * 100, 1) for k in off if k in on and off[k] > 0}
        out["target_cost_pct"] = 10.0
        print(f"TLS cost (on vs off, medians): {out['tls_cost_pct']}", flush=True)
    out["controller_errors"] = "".join(errors)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
