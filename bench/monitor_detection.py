"""Elephant detection delay and monitoring cost in the Fig. 2 lab: split monitoring vs per-flow polling.

Issue 4: "Elephant detection delay from flow start (≤ 2·Ts with Ts = 1 s) in the lab" and "monitoring
cost ... ≥ 10× less at equal elephant detection delay". Measured in one run, two phases, each with its
own controller + Mininet Fig. 2 lab (reused for all runs of the phase):

* ``split``: the default monitor (coarse PORT/QUEUE_STATS everywhere every Ts, sFlow 1-in-16 only on a
  hot circuit's switches).
* ``perflow``: the baseline: ``fine_backend = "flowstats"`` with ``fine_everywhere = true`` — per-flow
  counting rules on every packet switch all the time and their FLOW_STATS polled every Ts, beside the
  same coarse polling (the hot-spot/drops logic is the same, so both name the elephant by the same rule).

Circuit A:3–B:1 (10 Mbit/s) gets the bounded drop queue of ``tests/integration/test_monitor_fig2.py``.
Each run starts, from h1, a fresh 4-Mbit/s bursty UDP elephant beside ``--mice`` fresh small UDP flows
(new source ports every run). The sender stamps its first packet (``time.time()`` in the sender
process; the lab's hosts share the clock); the delay is to the journal time of the
``unconstrained_imbalance`` event naming the elephant. Between runs the episode is let to end (hot spot
cleared, elephant gone). Cost: the controller's ``GET /monitor/cost`` counts the OpenFlow bytes the
monitor sends and receives (serialized requests, received replies / learn copies / rule changes) and,
for split monitoring, the sFlow datagram bytes; per interval = Δbytes / Δpolls, idle and over the runs.

    sudo .venv/bin/python bench/monitor_detection.py --json PATH [--runs N] [--quick] [--mice M]

Needs root, Mininet and OVS; holds ``mininet_labs.netlock.net_lock`` and removes everything it made.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TS = 1.0
ELEPHANT_MBPS = 4.0
CIRCUIT = "packet:A:3-B:1"

SENDER = r'''
import socket, sys, time
# dst dport duration then sport:mbps:size:burst_period_s ...; prints the wall time of the first packet
dst, dport, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
flows = []
for spec in sys.argv[4:]:
    sport, mbps, size, period = spec.split(":")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("", int(sport)))
    burst = max(1, round(float(mbps) * 1e6 / 8 * float(period) / int(size)))
    flows.append([s, burst, int(size), float(period), 0.0])
payload = {f[2]: b"x" * f[2] for f in flows}
first = None; t0 = time.monotonic(); sent = 0
while True:
    now = time.monotonic() - t0
    if now >= dur: break
    nxt = dur
    for f in flows:
        s, burst, size, period, due = f
        if now >= due:
            for _ in range(burst):
                if first is None: first = time.time()
                try: s.sendto(payload[size], (dst, dport)); sent += 1
                except OSError: pass
            f[4] = due = due + period
        nxt = min(nxt, due)
    time.sleep(max(0.0, min(nxt - (time.monotonic() - t0), 0.05)))
print(first, sent)
'''


def percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``q`` of the data at or below it."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median": round(statistics.median(xs), 3), "p90": round(percentile(xs, 0.9), 3),
            "max": round(max(xs), 3), "min": round(min(xs), 3), "values": [round(x, 3) for x in xs]}


class Phase:
    """One controller + Fig. 2 lab with a given ``[monitor]`` configuration."""

    def __init__(self, name: str, monitor_toml: str, work: Path) -> None:
        self.name = name
        self.work = work / name
        self.work.mkdir(parents=True, exist_ok=True)
        self.toml = monitor_toml
        self.session: Any = None
        self.a3: str | None = None

    def start(self) -> None:
        from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
        from mininet_labs.session import LabSession
        from mininet_labs.testbed import wait_ping
        from monitor.drops import OvsShapedQueue
        from topology.spec import fig2_testbed, spec_to_vendor_file
        from topology.vendor_file import write_vendor_file

        spec = fig2_testbed()
        static = self.work / "fig2-optical.json"
        write_vendor_file(spec_to_vendor_file(spec, setup_time=0.185), static)
        conf = self.work / "mlte.toml"
        conf.write_text(self.toml)
        (self.work / "sender.py").write_text(SENDER)
        self.shaper = OvsShapedQueue()
        self.session = LabSession(spec, self.work, static_file=str(static), config_file=str(conf))
        self.session.start(timeout=60)
        self.session.client.circuit(FIG2_CIRCUITS["initial"])
        self.session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)
        if not wait_ping(self.session.lab.node("h1"), "10.0.0.3", 30):
            raise RuntimeError("h1 cannot reach h3 over the circuit")
        a3 = f"{self.session.prefix}A-eth3"
        subprocess.run(["tc", "qdisc", "del", "dev", a3, "root"], capture_output=True)  # Mininet's HTB
        self.shaper.apply(a3, max_rate=10_000_000, limit=16)
        self.a3 = a3

    def stop(self) -> None:
        try:
            if self.a3:
                self.shaper.remove(self.a3)
        finally:
            if self.session is not None:
                self.session.stop()

    # ---- measurements ---------------------------------------------------------------------------------
    def cost(self) -> dict[str, int]:
        """The monitor's byte counters (empty when the controller has no ``/monitor/cost``, e.g. an
        older checkout measured for comparison)."""
        from app.controller.client import ControlApiError

        try:
            return self.session.client.request("GET", "/monitor/cost")
        except ControlApiError:
            return {"polls": 0}

    def send(self, seconds: float, flows: list[str]) -> float:
        h1 = self.session.lab.node("h1")
        proc = h1.popen([sys.executable, str(self.work / "sender.py"), "10.0.0.3", "5201", str(seconds), *flows],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=seconds + 30)
        if proc.returncode != 0:
            raise RuntimeError(f"sender failed: {err.strip()[-300:]}")
        return float(out.split()[0])

    def events(self, since: int) -> list[dict]:
        return [e for e in self.session.client.events(since, "monitor") if e["event"] != "path_change"]

    def last_seq(self) -> int:
        evs = self.session.client.events()
        return evs[-1]["seq"] if evs else 0

    def wait_calm(self, since: int, timeout: float = 40.0) -> bool:
        """Until every hot spot since ``since`` is cleared and every named elephant is gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            evs = self.events(since)
            kinds = [e["event"] for e in evs]
            named = sum(1 for k in kinds if k == "unconstrained_imbalance")
            if kinds.count("hot_spot") == kinds.count("hot_spot_cleared") and kinds.count("elephant_gone") >= named:
                return True
            time.sleep(0.5)
        return False

    def run(self, index: int, seconds: float, mice: int, pause: float) -> dict[str, Any]:
        since = self.last_seq()
        time.sleep(pause)  # a random phase between the flow's start and the monitor's polls
        sport = 40000 + index
        elephant = f"{sport}:{ELEPHANT_MBPS}:1000:0.1"  # 4 Mbit/s in 100-ms bursts of 50 packets
        mouse_mbps = 0.8 / mice  # 0.8 Mbit/s of small flows in all, one 500-byte packet per burst
        period = min(0.02 * max(1, mice // 4), 500 * 8 / (mouse_mbps * 1e6))
        small = [f"{41000 + index * 250 + i}:{mouse_mbps:.5f}:500:{period:.4f}" for i in range(mice)]
        first = self.send(seconds, [elephant, *small])
        named = None
        deadline = time.monotonic() + 3 * TS
        while named is None and time.monotonic() < deadline:
            for e in self.events(since):
                if e["event"] == "unconstrained_imbalance" and any(f["sport"] == sport for f in e["flows"]):
                    named = e
                    break
            else:
                time.sleep(0.2)
        evs = self.events(since)
        hot = next((e for e in evs if e["event"] == "hot_spot" and e["circuit"] == CIRCUIT), None)
        calm = self.wait_calm(since)
        out: dict[str, Any] = {"sport": sport, "first_packet": round(first, 3), "calm_after": calm}
        if hot is not None:
            out["hot_spot_after"] = round(hot["t"] - first, 3)
        if named is not None:
            out["named_after"] = round(named["t"] - first, 3)
            out["named_flows"] = [f["sport"] for f in named["flows"]]
            out["detail"] = named["detail"]
        return out


def run_phase(name: str, toml: str, work: Path, runs: int, seconds: float, mice: int, idle: float,
              seed: int) -> dict[str, Any]:
    ph = Phase(name, toml, work)
    rng = random.Random(seed)
    try:
        ph.start()
        time.sleep(2 * TS)
        c0, t0 = ph.cost(), time.monotonic()
        time.sleep(idle)
        c1, t1 = ph.cost(), time.monotonic()
        results = []
        for i in range(runs):
            results.append(ph.run(i, seconds, mice, rng.uniform(0, TS)))
            print(f"{name} run {i}: {results[-1]}", flush=True)
        c2 = ph.cost()
        errors = ph.session.controller_errors()
    finally:
        ph.stop()

    def per_poll(a: dict, b: dict) -> dict[str, float]:
        polls = max(1, b.get("polls", 0) - a.get("polls", 0))
        keys = ("coarse_sent", "coarse_received", "fine_sent", "fine_received", "sflow_received")
        d = {k: round((b.get(k, 0) - a.get(k, 0)) / polls, 1) for k in keys}
        d["openflow"] = round(sum(d[k] for k in keys[:4]), 1)
        d["polls"] = b.get("polls", 0) - a.get("polls", 0)
        d["replies_late"] = b.get("replies_late", 0) - a.get("replies_late", 0)
        return d

    delays = [r["named_after"] for r in results if "named_after" in r]
    return {"config": toml, "idle_seconds": round(t1 - t0, 1),
            "runs": results, "named": len(delays), "missed": runs - len(delays),
            "wrong_flows": sum(1 for r in results if "named_flows" in r and r["named_flows"] != [r["sport"]]),
            "detection_delay_s": summary(delays),
            "hot_spot_delay_s": summary([r["hot_spot_after"] for r in results if "hot_spot_after" in r]),
            "bytes_per_interval_idle": per_poll(c0, c1), "bytes_per_interval_runs": per_poll(c1, c2),
            "controller_errors": errors[-2000:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--runs", type=int, default=7, help="elephants per phase (default 7)")
    ap.add_argument("--mice", type=int, default=4, help="small flows beside each elephant (default 4, at most 250)")
    ap.add_argument("--seconds", type=float, default=5.0, help="traffic per run (default 5 s)")
    ap.add_argument("--quick", action="store_true", help="2 runs per phase (smoke run)")
    ap.add_argument("--phases", default="split,perflow", help="comma-separated: split, perflow, split_next_interval")
    ap.add_argument("--seed", type=int, default=1, help="random phase of each flow's start vs the polls")
    ap.add_argument("--keep", action="store_true", help="keep the controller and lab logs (printed path)")
    args = ap.parse_args(argv)
    if not 2 <= args.mice <= 250:
        ap.error("--mice must be 2..250")
    runs = 2 if args.quick else args.runs
    result: dict[str, Any] = {"benchmark": "monitor_detection", "ts": TS, "target_s": 2 * TS}
    if os.geteuid() != 0:
        result["skipped"] = "needs root (Mininet, OVS)"
        print(result["skipped"], file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    from mininet_labs.netlock import net_lock

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        sflow_port = u.getsockname()[1]
    base = (f"[monitor]\ninterval = {TS}\nsflow_sampling = 16\nsflow_polling = 1\n"
            f"sflow_collector_port = {sflow_port}\nprobe_interval = 0\n")
    configs = {"split": base,
               "split_next_interval": base + "fine_first_window = 0\n",
               "perflow": base + 'fine_backend = "flowstats"\nfine_everywhere = true\n'}
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in configs]
    if unknown:
        ap.error(f"unknown phase(s) {unknown}; choose from {sorted(configs)}")
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="mon-detect-"))
    result.update(runs=runs, mice=args.mice, seconds=args.seconds, phases={})
    try:
        with net_lock():
            for name in phases:
                result["phases"][name] = run_phase(name, configs[name], work, runs, args.seconds, args.mice,
                                                   idle=10 * TS, seed=args.seed)
    finally:
        if args.keep:
            print(f"logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    ph = result["phases"]
    if "split" in ph and "perflow" in ph:
        s, p = ph["split"], ph["perflow"]

        def ratio(a: float, b: float) -> float | None:
            return round(a / b, 2) if b else None

        result["ratios"] = {
            "perflow_over_split_openflow_idle": ratio(p["bytes_per_interval_idle"]["openflow"],
                                                      s["bytes_per_interval_idle"]["openflow"]),
            "perflow_over_split_openflow_runs": ratio(p["bytes_per_interval_runs"]["openflow"],
                                                      s["bytes_per_interval_runs"]["openflow"]),
            "perflow_over_split_incl_sflow_runs": ratio(
                p["bytes_per_interval_runs"]["openflow"],
                s["bytes_per_interval_runs"]["openflow"] + s["bytes_per_interval_runs"]["sflow_received"]),
            "split_over_perflow_delay_median": ratio(s["detection_delay_s"].get("median", 0),
                                                     p["detection_delay_s"].get("median", 0)),
        }
    for name, r in ph.items():
        d = r["detection_delay_s"]
        print(f"{name}: named {r['named']}/{runs}, delay median {d.get('median')} p90 {d.get('p90')} "
              f"max {d.get('max')} s; OpenFlow B/interval idle {r['bytes_per_interval_idle']['openflow']} "
              f"runs {r['bytes_per_interval_runs']['openflow']}, sFlow {r['bytes_per_interval_runs']['sflow_received']}")
    if "ratios" in result:
        print("ratios:", result["ratios"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
