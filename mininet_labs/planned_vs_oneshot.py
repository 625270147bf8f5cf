"""Lab ``planned-vs-oneshot``: move one flow to a new circuit, ordered vs all at once (paper Fig. 6/8–9).

Fig. 2 testbed, circuit ``initial`` lit (A-X-Y-B-Y-Z-C: h1 → h3 crosses B). A UDP probe sends a
sequence-numbered packet every 1 ms from h1 to h3. The flow is then moved onto the ``offload``
circuit A-X-Z-C (XCONs X 4↔5, Z 5↔4; packet link A:4–C:2) by one update plan:

- **planned** (ordered): XCONs → circuit up (PORT_STATUS stable for D ms, LLDP link seen) → the egress
  rule at C → the ingress rule at A, last → verification by the new rules' counters;
- **one-shot**: the same messages at once, no barriers, no waits — the ingress rule steers the flow
  into a circuit that is still dark for the provisioning delay.

A third run takes Z:4 behind the controller's back so the OTS refuses Z 5↔4: the ordered plan must
roll back with the flow still on its old path. The probe's receiver on h3 counts what arrived; the lab reports sent/lost per mode, the per-step
times of both plans and a plot of the receive timeline around each move.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.update import planner
from app.update.model import FlowRule, XconSpec
from topology import rule_plan

SENDER = r'''
import signal, socket, sys, time
dst, port, seconds, period = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # SIGTERM ends the probe early, count still printed
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic(); n = 0
while not stop:
    due = t0 + n * period
    now = time.monotonic()
    if due - t0 > seconds:
        break
    if due > now:
        time.sleep(due - now)
    s.sendto(n.to_bytes(4, "big") + time.time_ns().to_bytes(8, "big") + b"p" * 52, (dst, port))
    n += 1
print(n)
'''
RECEIVER = r'''
import json, os, signal, socket, sys, time
port, seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
beat = sys.argv[4] if len(sys.argv) > 4 else None  # optional: "<packets> <last arrival>" rewritten every 20 ms
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # SIGTERM ends it early, arrivals still written
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", port)); s.settimeout(0.02)
got = {}; t_end = time.monotonic() + seconds; last = 0.0; written = 0.0
while not stop and time.monotonic() < t_end:
    try:
        data, _ = s.recvfrom(2048)
        last = time.time()
        got[int.from_bytes(data[:4], "big")] = last
    except socket.timeout:
        pass
    if beat and time.monotonic() - written >= 0.02:
        written = time.monotonic()
        with open(beat + ".tmp", "w") as f:
            f.write(f"{len(got)} {last!r}")
        os.replace(beat + ".tmp", beat)
json.dump(got, open(out, "w"))
'''
PROBE_PORT = 6001
H1_MAC, H3_MAC = "00:00:00:00:00:01", "00:00:00:00:00:03"
OFFLOAD = [XconSpec("X", 4, 5), XconSpec("Z", 5, 4)]


def flow_rules(ident: int = 1) -> tuple[list[FlowRule], list[FlowRule]]:
    """(egress at C, ingress at A) steering the probe flow h1 → h3 onto A:4–C:2."""
    band = rule_plan.STEER
    five = (("eth_type", 0x0800), ("ip_proto", 17), ("ipv4_dst", "10.0.0.3"), ("udp_dst", PROBE_PORT))
    egress = FlowRule("C", band.name, ident, band.priority(), (("in_port", 2), *five), 3)
    ingress = FlowRule("A", band.name, ident, band.priority(), (("in_port", 1), *five), 4)
    return [egress], [ingress]


def plans(stable_ms: float = 50.0) -> tuple[Any, Any, Any]:
    """(ordered move, one-shot move, release) as update plans."""
    egress, ingress = flow_rules()
    ordered = planner.provision(OFFLOAD, [("A", 4), ("C", 2)], [(("A", 4), ("C", 2))], egress, ingress,
                                stable_ms=stable_ms, circuit_timeout_s=10.0, verify_timeout_s=3.0)
    one_shot = planner.one_shot(planner.provision(OFFLOAD, [("A", 4), ("C", 2)], [(("A", 4), ("C", 2))], egress,
                                                  ingress, verify=False))
    release = planner.release(OFFLOAD, egress, ingress, drain=False)
    return ordered, one_shot, release


def _post_plan(session: Any, plan: Any) -> dict[str, Any]:
    from app.controller.client import ControlApiError

    try:
        return session.client.request("POST", "/plan", {"plan": plan.to_json()}, timeout=60)
    except ControlApiError as exc:  # 422: failed or rolled back; the body is the record
        return exc.body if isinstance(exc.body, dict) else {"state": "error", "error": str(exc)}


def move_once(session: Any, work: Path, mode: str, plan: Any, seconds: float, lead: float) -> dict[str, Any]:
    """Run the probe for ``seconds``; ``lead`` s into it, execute ``plan``; return sent/lost and timing."""
    import subprocess
    import sys

    h1, h3 = session.lab.node("h1"), session.lab.node("h3")
    got_file = work / f"got-{mode}.json"
    recv = h3.popen([sys.executable, str(work / "recv.py"), str(PROBE_PORT), str(seconds + 2), str(got_file)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    send = h1.popen([sys.executable, str(work / "send.py"), "10.0.0.3", str(PROBE_PORT), str(seconds), "0.001"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(lead)
    t_plan = time.time()
    record = _post_plan(session, plan)
    t_done = time.time()
    out, err = send.communicate(timeout=seconds + 30)
    recv.communicate(timeout=seconds + 30)
    sent = int(out.split()[0])
    got = {int(k): v for k, v in json.loads(got_file.read_text()).items()}
    lost = sorted(set(range(sent)) - set(got))
    return {"sent": sent, "lost": len(lost), "lost_first": lost[:1], "lost_last": lost[-1:],
            "plan_started": t_plan, "plan_returned": t_done, "plan_seconds": round(t_done - t_plan, 4),
            "plan_state": record.get("state"), "plan_error": record.get("error", ""),
            "steps": [{k: s.get(k) for k in ("id", "kind", "started_at", "finished_at", "ok")}
                      for s in record.get("steps", [])],
            "received_at": got}


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Both modes in one run on one testbed; writes ``results.json`` and ``planned_vs_oneshot.png``."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import fig2_dirs

    dirs = fig2_dirs(out, {"send.py": SENDER, "recv.py": RECEIVER})
    out, work, spec, static, delay = dirs.out, dirs.work, dirs.spec, dirs.static, dirs.delay
    seconds, lead = (3.0, 1.0) if quick else (6.0, 2.0)
    clock = LabClock(progress)
    note = clock.note

    ordered, one_shot, release = plans()
    res: dict[str, Any] = {"lab": "planned-vs-oneshot", "quick": quick, "probe_interval_ms": 1.0,
                           "provisioning_delay_s": list(delay)}
    with clock.locked(), LabSession(spec, work, delay=delay, static_file=str(static)) as session:
        session.client.circuit(FIG2_CIRCUITS["initial"])
        session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)
        for h, ip in (("h1", "10.0.0.3"), ("h3", "10.0.0.1")):
            session.lab.node(h).cmd(f"ping -c2 -W1 {ip} >/dev/null 2>&1")
        note("Fig. 2 testbed up, circuit 'initial' lit, h1 <-> h3 over A-B-C")
        for mode, plan in (("planned", ordered), ("one_shot", one_shot)):
            r = move_once(session, work, mode, plan, seconds, lead)
            note(f"{mode}: plan {r['plan_state']} in {r['plan_seconds'] * 1000:.0f} ms; probe sent {r['sent']}, "
                 f"lost {r['lost']}")
            res[mode] = r
            rel = _post_plan(session, release)
            if rel.get("state") != "done":
                raise RuntimeError(f"release after {mode} failed: {rel.get('error')}")
            time.sleep(1.0)  # the flow is back on A-B-C; the circuit's ports settle dark
        # a refused XCON: Z:4 taken behind the controller's back (a raw FLOW_MOD Z 4 -> 3), so the OTS
        # refuses Z 5<->4; the ordered plan rolls back and the flow never leaves A-B-C
        session.client.flowmod("Z", {"in_port": 4}, 3)
        r = move_once(session, work, "refused", ordered, seconds, lead)
        note(f"refused: plan {r['plan_state']} ({r['plan_error']}); probe sent {r['sent']}, lost {r['lost']}; "
             f"XCONs left {len(session.client.xcons())}")
        r["leftover_xcons"] = session.client.xcons()
        res["refused"] = r
        res["controller_errors"] = session.controller_errors()
    for mode in ("planned", "one_shot", "refused"):
        res[mode]["received_at"] = {str(k): v for k, v in res[mode]["received_at"].items()}
    _plot(res, out / "planned_vs_oneshot.png")
    slim = {k: ({kk: vv for kk, vv in v.items() if kk != "received_at"} if isinstance(v, dict) else v)
            for k, v in res.items()}
    slim["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(slim, indent=2, sort_keys=True))
    progress(f"wrote {out / 'results.json'} and {out / 'planned_vs_oneshot.png'}")
    return slim


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(8, 4.5), sharex=True)
    for ax, mode in zip(axes, ("planned", "one_shot"), strict=True):
        r = res[mode]
        got = {int(k) for k in r["received_at"]}
        xs = list(range(r["sent"]))
        ys = [1 if n in got else 0 for n in xs]
        ax.step([x / 1000 for x in xs], ys, where="post", lw=0.8)
        t_plan = (r["plan_started"] - min(r["received_at"].values(), default=r["plan_started"]))
        ax.axvline(t_plan, color="tab:red", ls="--", lw=1, label="plan sent")
        ax.set_ylim(-0.1, 1.2)
        ax.set_yticks([0, 1], ["lost", "received"])
        ax.set_title(f"{mode.replace('_', '-')}: {r['lost']} of {r['sent']} probe packets lost "
                     f"(plan {r['plan_seconds'] * 1000:.0f} ms)", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1].set_xlabel("seconds since the probe started (1 packet / ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
