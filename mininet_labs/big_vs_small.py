"""Lab ``big-vs-small``: one unbounded TCP flow sharing a circuit with C small transfers (OSCARS-TE Figs. 4-5).

Fig. 2 testbed, circuit ``initial`` lit (h1 → h3 over A-X-Y-B-Y-Z-C; every circuit link shaped to
10 Mbit/s). For every C in ``cs`` and every TCP congestion control the kernel offers, h1 runs one
long flow plus C concurrent small transfers of S ~ U(512 KB, 4 MB) (a new one whenever fewer than C
are active) to h3 for ``duration`` seconds (:mod:`mininet_labs.tcp_workload`, one process per side).
The paper's point: the big flow is starved by the small ones as C grows — the case for moving it to
a circuit of its own.

``results.json``: ``runs`` (``c``, ``cc``, ``delay_ms`` (measured, see below), ``long_flow_mbps``,
``small_flows_mbps``, ``utilization``, ``small_done``), ``ccs`` (what the kernel offered),
``share_falls`` (the long flow's share at the largest C is below the one at the smallest C, for each
congestion control). ``delay_ms`` is the RTT measured by ping between h1 and h3 before the runs: a
lab never claims delay it did not apply. Plots: ``big_vs_small.png``.
"""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mininet_labs import tcp_workload

PORT = 5101
CAPACITY_MBPS = 10.0
WARMUP_S = 2.0  # the first seconds (slow start, the first transfers) are left out of the means
PAPER_NOTE = ("OSCARS-TE Figs. 4-5: on a 10 Gbit/s path the long flow's throughput falls as the number of "
              "concurrent small transfers grows, for every TCP variant")


def available_ccs() -> list[str]:
    """The TCP congestion controls this kernel offers (reno is always there)."""
    try:
        text = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    except OSError:
        return ["reno"]
    return sorted(text.split()) or ["reno"]


def ping_rtt_ms(node: Any, ip: str, count: int = 5) -> float | None:
    """The average RTT ping measures from ``node`` to ``ip`` (None if nothing came back)."""
    out = node.cmd(f"ping -c {count} -i 0.2 -W 1 {ip}")
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    return float(m.group(1)) if m else None


def mean_after(series: Sequence[float], bin_s: float, warmup_s: float, seconds: float) -> float:
    """Mean of a binned Mbit/s series between ``warmup_s`` and ``seconds``."""
    lo, hi = int(warmup_s / bin_s), max(int(seconds / bin_s), int(warmup_s / bin_s) + 1)
    part = list(series[lo:hi])
    return round(statistics.fmean(part), 3) if part else 0.0


def summarise_run(got: dict[str, Any], c: int, cc: str, delay_ms: float | None, duration: float) -> dict[str, Any]:
    long_mbps = mean_after(got["mbps"]["long"], got["bin_s"], WARMUP_S, duration)
    small_mbps = mean_after(got["mbps"]["small"], got["bin_s"], WARMUP_S, duration)
    return {"c": c, "cc": cc, "delay_ms": delay_ms, "long_flow_mbps": long_mbps, "small_flows_mbps": small_mbps,
            "long_share": round(long_mbps / (long_mbps + small_mbps), 4) if long_mbps + small_mbps else None,
            "utilization": round((long_mbps + small_mbps) / CAPACITY_MBPS, 3),
            "small_done": len(got["small_done"]), "series": got["mbps"], "bin_s": got["bin_s"]}


def share_falls(runs: list[dict[str, Any]]) -> dict[str, bool]:
    """Per congestion control (and delay): is the long flow's share at the largest C below the smallest C's?"""
    out = {}
    for key in sorted({(r["cc"], r["delay_ms"]) for r in runs}, key=str):
        mine = sorted((r for r in runs if (r["cc"], r["delay_ms"]) == key), key=lambda r: r["c"])
        if len(mine) >= 2 and mine[0]["long_share"] is not None and mine[-1]["long_share"] is not None:
            out[f"{key[0]}" + (f"@{key[1]:.1f}ms" if key[1] else "")] = mine[-1]["long_share"] < mine[0]["long_share"]
    return out


def run(out: Path, *, quick: bool = False, cs: Sequence[int] | None = None, ccs: Sequence[str] | None = None,
        duration: float | None = None, seed: int = 0, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (cc, C) pair on one testbed. ``quick``: C in {4, 32}, the kernel's default cc, 8 s each."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import fig2_dirs, finish

    offered = available_ccs()
    default_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() if Path(
        "/proc/sys/net/ipv4/tcp_congestion_control").exists() else "reno"
    cs = list(cs or ((4, 32) if quick else (4, 8, 16, 32)))
    ccs = list(ccs or ([default_cc] if quick else offered))
    duration = duration or (8.0 if quick else 20.0)
    bad = [cc for cc in ccs if cc not in offered]
    if bad or any(c < 0 for c in cs) or duration <= WARMUP_S:
        raise ValueError(f"need congestion controls from {offered} (got {bad}), C >= 0 and a duration > "
                         f"{WARMUP_S:g} s")
    dirs = fig2_dirs(out)
    script = Path(tcp_workload.__file__).resolve()
    t0 = time.time()

    def note(text: str) -> None:
        progress(f"[{time.time() - t0:6.1f}s] {text}")

    res: dict[str, Any] = {"lab": "big-vs-small", "quick": quick, "ccs_offered": offered, "ccs": ccs, "cs": cs,
                           "duration_s": duration, "warmup_s": WARMUP_S, "capacity_mbps": CAPACITY_MBPS,
                           "small_kb": [512, 4096], "seed": seed, "paper": PAPER_NOTE, "runs": []}
    with net_lock(), LabSession(dirs.spec, dirs.work, delay=dirs.delay, static_file=str(dirs.static)) as session:
        session.client.circuit(FIG2_CIRCUITS["initial"])
        session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)
        h1, h3 = session.lab.node("h1"), session.lab.node("h3")
        rtt = ping_rtt_ms(h1, "10.0.0.3")
        note(f"Fig. 2 testbed up, circuit 'initial' lit; RTT h1 -> h3 {rtt} ms; {len(ccs) * len(cs)} runs of "
             f"{duration:g} s ({', '.join(ccs)} x C in {cs})")
        for cc in ccs:
            for c in cs:
                got_file = dirs.work / f"got-{cc}-{c}.json"
                recv = h3.popen([sys.executable, str(script), "recv", str(PORT), str(duration + 3), str(got_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                time.sleep(0.3)
                send = h1.popen([sys.executable, str(script), "send", "10.0.0.3", str(PORT), str(duration), str(c),
                                 "--cc", cc, "--seed", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
                (_, s_err), (_, r_err) = finish([send, recv], duration + 30)
                if send.returncode != 0 or not got_file.exists():
                    raise RuntimeError(f"workload {cc} C={c} failed: {(s_err or r_err).strip()}")
                r = summarise_run(json.loads(got_file.read_text()), c, cc, rtt, duration)
                res["runs"].append(r)
                note(f"{cc:>6} C={c:<3} long flow {r['long_flow_mbps']:5.2f} Mbit/s, small transfers "
                     f"{r['small_flows_mbps']:5.2f} Mbit/s ({r['small_done']} done), utilization "
                     f"{r['utilization']:.0%}")
        res["controller_errors"] = session.controller_errors()
    res["share_falls"] = share_falls(res["runs"])
    plot(res, dirs.out / "big_vs_small.png")
    slim = {**res, "runs": [{k: v for k, v in r.items() if k not in ("series", "bin_s")} for r in res["runs"]]}
    (dirs.out / "results.json").write_text(json.dumps(slim, indent=2, sort_keys=True))
    progress(f"wrote {dirs.out / 'results.json'} and {dirs.out / 'big_vs_small.png'}")
    return slim


def plot(res: dict[str, Any], path: Path) -> None:
    """Left: long flow and small transfers' Mbit/s against C, per congestion control. Right: throughput
    over time at the largest C for the first congestion control (1-s means)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for cc in res["ccs"]:
        rs = sorted((r for r in res["runs"] if r["cc"] == cc), key=lambda r: r["c"])
        xs = [r["c"] for r in rs]
        line, = a.plot(xs, [r["long_flow_mbps"] for r in rs], marker="o", label=f"long flow ({cc})")
        a.plot(xs, [r["small_flows_mbps"] for r in rs], marker="s", ls="--", color=line.get_color(),
               label=f"small transfers ({cc})")
    a.set_xscale("log", base=2)
    a.set_xticks(res["cs"], [str(c) for c in res["cs"]])
    a.set_xlabel("concurrent small transfers C")
    a.set_ylabel("Mbit/s (mean after warm-up)")
    a.set_title(f"One long TCP flow vs C small transfers on a {res['capacity_mbps']:g} Mbit/s circuit", fontsize=9)
    a.legend(fontsize=7)
    big = max((r for r in res["runs"] if r["cc"] == res["ccs"][0]), key=lambda r: r["c"], default=None)
    if big is not None:
        per = max(1, round(1.0 / big["bin_s"]))
        for cls in ("long", "small"):
            s = big["series"][cls]
            pts = [statistics.fmean(s[i:i + per]) for i in range(0, len(s) - per + 1, per)]
            b.plot(range(len(pts)), pts, label=f"{cls} ({big['cc']}, C={big['c']})")
        b.set_xlabel("s")
        b.set_ylabel("Mbit/s")
        b.set_title("Throughput over time (largest C)", fontsize=9)
        b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
