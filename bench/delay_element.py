"""Accuracy of the delay element ``dlyfwd`` (no netem here): delay error, jitter, loss, throughput ceiling.

Two namespaces joined by a veth; the element is spliced in at one end (``mininet_labs.delay.splice``);
``dlyprobe`` sends timestamped UDP through it and the receiver's kernel timestamps give each frame's
one-way delay (both ends share the machine's clock). Per rate (1/5/20/50 Mbit/s) and frame size
(1514 bytes = a 1500-byte packet, and 64 bytes): the error against the configured delay (mean, p1,
p50, p99, worst), the element's CPU; then jitter (uniform ±J: stdev against J/√3), loss (measured
against configured, with its 95 % binomial interval) and rates above 50 Mbit/s until it no longer
keeps ±0.5 ms. The same sends without the element (``baseline``) show what the veth path itself adds.
Holds the machine-wide lab lock (never measures while a lab runs); needs root.

    sudo .venv/bin/python bench/delay_element.py --json bench/results/delay_element.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mininet_labs.delay import measure  # noqa: E402
from mininet_labs.delay.link import netem_available, splice  # noqa: E402
from mininet_labs.delay.scratch import ScratchPair, scratch_pair  # noqa: E402

TOL_MS = 0.5
DELAY_MS = 10.0
SIZES = (1514, 64)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (s), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(pair: ScratchPair, rate: float, size: int, seconds: float, delay_ms: float | None = DELAY_MS,
        jitter_ms: float = 0.0, loss: float = 0.0, rt_priority: int = 10, seed: int = 1) -> dict[str, Any]:
    """One send through a fresh element (or none: ``delay_ms=None``); the row the JSON keeps."""
    if delay_ms is None:
        res = measure.one_way(pair.a, pair.b, pair.b_ip, rate, size, seconds)
        res.pop("delays_ms")
        return res
    with splice(pair.a, pair.a_if, delay_ms, jitter_ms, loss, backend="element", rt_priority=rt_priority,
                seed=seed) as s:
        assert s.pid is not None
        cpu0, t0 = cpu_seconds(s.pid), time.monotonic()
        res = measure.one_way(pair.a, pair.b, pair.b_ip, rate, size, seconds, drain_s=1.0 + delay_ms / 1000)
        cpu = (cpu_seconds(s.pid) - cpu0) / (time.monotonic() - t0)
        counters = s.link.counters()["a_to_b"]
    d = res.pop("delays_ms")
    res.update(configured={"delay_ms": delay_ms, "jitter_ms": jitter_ms, "loss": loss},
               element_cpu_pct=round(100 * cpu, 1), realtime=rt_priority > 0,
               element={k: counters[k] for k in ("rx", "tx", "lost", "queue_drop", "oversize", "tx_error",
                                                 "max_late_ns")})
    if d.size:
        err = d - delay_ms
        s_ = measure.summary(err)
        assert s_ is not None
        res["error_ms"] = {k: s_[k] for k in ("mean", "p1", "p50", "p99", "min", "max")}
        res["within_tol_fraction"] = round(float((abs(err) <= TOL_MS).mean()), 5)
        res["keeps_tolerance"] = bool(jitter_ms == 0 and loss == 0 and res["loss"] == 0
                                      and max(abs(s_["p1"]), abs(s_["p99"]), abs(s_["mean"])) <= TOL_MS)
    return res


def show(tag: str, r: dict[str, Any]) -> None:
    e = r.get("error_ms") or {}
    print(f"{tag:9s} {r['rate_mbps']:6g} Mbit/s {r['frame_bytes']:5d} B  sent {r['sent']:7d} loss {r['loss']:.4f}  "
          + (f"err mean {e['mean']:+.3f} p50 {e['p50']:+.3f} p99 {e['p99']:+.3f} max {e['max']:+.3f} ms  "
             f"cpu {r['element_cpu_pct']:5.1f}%  ok={r.get('keeps_tolerance')}" if e else
             f"delay p50 {r['delay_ms']['p50']:.4f} p99 {r['delay_ms']['p99']:.4f} ms"), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true", help="1 s per point, fewer points (CI smoke)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("error: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from mininet_labs.netlock import net_lock

    secs = 1.0 if args.quick else 3.0
    rates = (1, 20) if args.quick else (1, 5, 20, 50)
    probes = {1514: (100, 200), 64: (10, 50)} if args.quick else {1514: (100, 200, 400, 800), 64: (30, 40, 80, 100)}
    out: dict[str, Any] = {"quick": args.quick, "seconds_per_point": secs, "delay_ms": DELAY_MS,
                           "tolerance_ms": TOL_MS, "netem_available": netem_available(),
                           "machine": {"cpus": os.cpu_count(), "kernel": platform.release()}}
    t_start = time.monotonic()
    with net_lock(), scratch_pair("bench") as pair:
        out["machine"]["loadavg_at_start"] = os.getloadavg()
        out["baseline"] = [run(pair, 20, size, secs, None) for size in SIZES]
        for r in out["baseline"]:
            show("baseline", r)
        out["accuracy"] = []
        for size in SIZES:
            for rate in rates:
                out["accuracy"].append(run(pair, rate, size, secs))
                show("accuracy", out["accuracy"][-1])
        out["no_realtime"] = run(pair, 20, 64, secs, rt_priority=0)
        show("no-rt", out["no_realtime"])
        # 1 Mbit/s of 1514-byte frames: 12 ms apart, more than the ±2 ms window, so keeping the
        # order (a frame never leaves before the one ahead of it) does not bend the distribution.
        jit = run(pair, 1, 1514, max(secs, 3.0), DELAY_MS, jitter_ms=2.0)
        expected_sd = 2.0 / math.sqrt(3)
        jit["jitter_check"] = {"expected_stdev_ms": round(expected_sd, 4), "measured_stdev_ms": jit["delay_ms"]["stdev"],
                               "min_ms": jit["delay_ms"]["min"], "max_ms": jit["delay_ms"]["max"]}
        out["jitter"] = jit
        print(f"jitter    ±2 ms: stdev {jit['delay_ms']['stdev']:.3f} ms (uniform: {expected_sd:.3f}), "
              f"range {jit['delay_ms']['min']:.3f}..{jit['delay_ms']['max']:.3f} ms", flush=True)
        out["loss"] = []
        for seed, p in enumerate((0.01, 0.05, 0.2), start=11):  # a seed each: independent draws
            r = run(pair, 50, 1514, secs, DELAY_MS, loss=p, seed=seed)
            n = r["sent"]
            half = 1.96 * math.sqrt(p * (1 - p) / n)
            r["loss_check"] = {"configured": p, "measured": r["loss"], "ci95": [round(p - half, 5), round(p + half, 5)],
                               "inside_ci95": p - half <= r["loss"] <= p + half}
            out["loss"].append(r)
            print(f"loss      {p:.2f}: measured {r['loss']:.4f} of {n} (95% interval {p - half:.4f}..{p + half:.4f})",
                  flush=True)
        # The highest rate up to which every rate tried keeps the tolerance: the accuracy rates, then
        # probes in rate order (between the last pass and the first failure, or above 50 Mbit/s).
        out["ceiling_runs"] = []
        ceiling: dict[str, float] = {}
        for size in SIZES:
            done = {r["rate_mbps"]: r["keeps_tolerance"] for r in out["accuracy"] if r["frame_bytes"] == size}
            ceiling[str(size)] = 0
            for rate in sorted(set(done) | set(probes[size])):
                if rate not in done:
                    r = run(pair, rate, size, secs)
                    out["ceiling_runs"].append(r)
                    show("ceiling", r)
                    done[rate] = r["keeps_tolerance"]
                if not done[rate]:
                    break
                ceiling[str(size)] = rate
        out["ceiling_mbps"] = ceiling
    out["bench_seconds"] = round(time.monotonic() - t_start, 1)
    print(f"keeps ±{TOL_MS} ms (p1, mean, p99) up to: " + ", ".join(f"{k} B frames {v} Mbit/s" for k, v in ceiling.items())
          + f"  ({out['bench_seconds']} s)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
