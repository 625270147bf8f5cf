"""Lab ``big-vs-small``: one unbounded TCP flow sharing a circuit with C small transfers (OSCARS-TE Figs. 4-5).

Fig. 2 testbed, circuit ``initial`` lit (h1 → h3 over A-X-Y-B-Y-Z-C; every circuit link shaped to
10 Mbit/s). For every C in ``cs`` and every TCP congestion control the kernel offers, h1 runs one
long flow plus C concurrent small transfers of S ~ U(16 KB, 128 KB) (a new one whenever fewer than C
are active; the paper's U(512 KB, 4 MB) scaled to the 10 Mbit/s circuit, see ``SMALL_KB``) to h3 for ``duration`` seconds (:mod:`mininet_labs.tcp_workload`, one process per side),
without and with added delay (``delays_ms`` one way, by the delay element spliced into h3's link:
:mod:`mininet_labs.delay`, netem where the kernel has it).
The paper's point: the big flow is starved by the small ones as C grows — the case for moving it to
a circuit of its own.

``results.json``: ``runs`` (``c``, ``cc``, ``delay_ms`` (measured, see below), ``long_flow_mbps``,
``small_flows_mbps``, ``utilization``, ``small_started``, ``small_done``, ``small_completion``,
``rtt_ms`` idle, ``rtt_loaded_ms`` during the run), ``link_deletes`` (the controller's LLDP link
deletions: the lab's controller keeps links ``LINK_TIMEOUT_S`` without a sighting, as LLDP shares the
congested circuit), ``ccs`` (what the kernel offered),
``share_falls`` (the long flow's share at the largest C is below the one at the smallest C, for each
congestion control and delay), ``delays`` (per setting: configured and measured). ``delay_ms`` is the
one-way delay the element added as *measured* by ping (half the RTT increase; 0 without the
element): a lab never claims delay it did not apply. Plots: ``big_vs_small.png``.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if (_root := str(Path(inspect.currentframe().f_code.co_filename).resolve().parents[1])) not in sys.path:
    sys.path.insert(0, _root)  # `mn --custom` execs this file (no __file__): make the project importable

from mininet_labs.workdir import fig2_topos  # noqa: E402

topos = fig2_topos("big-vs-small")  # `sudo mn --custom mininet_labs/big_vs_small.py --topo big-vs-small`: its Fig. 2 testbed

from mininet_labs import tcp_workload  # noqa: E402

PORT = 5101
CAPACITY_MBPS = 10.0
WARMUP_S = 2.0  # the first seconds (slow start, the first transfers) are left out of the means
# Small transfer sizes (KB). The paper's U(512 KB, 4 MB) ran on a 10 Gbit/s circuit (a few ms per
# transfer at line rate). On our 10 Mbit/s circuit, measured (docs/labs.md, big-vs-small): in the
# default 15-s runs 3-5 of the first 6-8 transfers end at C = 4, 1 of 17 at C = 16 and 0 of 32 at C = 32
# (median completion 8-14 s; 31 s at C = 32 in 100-s runs), so from C = 16 on "C active transfers"
# would be C flows that never end: the long flow against C+1 bulk flows, not against turnover.
# 1/32 of the paper's sizes: 13-105 ms alone on the circuit, ~1-2 s at C = 32, every slot turns over.
SMALL_KB = (16, 128)
#: ``paper_sizes``: the paper's U(512 KB, 4 MB), run long enough for transfers to end on 10 Mbit/s
#: (100 s: 26 of 55 ended at C = 32, median 31 s), for the kernel's default cc only, so the lab
#: stays within 10 minutes (7 min measured)
PAPER_SMALL_KB = (512, 4096)
PAPER_SIZES_DURATION_S = 100.0
#: LLDP shares the congested circuit: at C = 32 it loses 17-42 % of its frames (the loaded ping's loss)
#: and five in a row happened in 1 of 3 quick runs, so the default 5-s ``link_timeout`` expired the links
#: and forwarding deleted its rules (re-added 3 ms later when the next frame arrived; when that one is
#: lost too, every flow stalls for the next LLDP round, ~1 s). This lab measures TCP, not failure
#: detection: its controller keeps links for 30 s without a sighting (ports going down still delete
#: them at once). ``link_deletes`` in results.json shows any that still happen.
LINK_TIMEOUT_S = 30.0
PAPER_NOTE = ("OSCARS-TE Figs. 4-5: on a 10 Gbit/s path the long flow's throughput falls as the number of "
              "concurrent small transfers grows, for every TCP variant")


def available_ccs() -> list[str]:
    """The TCP congestion controls this kernel offers (reno is always there)."""
    try:
        text = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    except OSError:
        return ["reno"]
    return sorted(text.split()) or ["reno"]


def mean_after(series: Sequence[float], bin_s: float, warmup_s: float, seconds: float) -> float:
    """Mean of a binned Mbit/s series between ``warmup_s`` and ``seconds``."""
    lo, hi = int(warmup_s / bin_s), max(int(seconds / bin_s), int(warmup_s / bin_s) + 1)
    part = list(series[lo:hi])
    return round(statistics.fmean(part), 3) if part else 0.0


def p90(xs: Sequence[float]) -> float:
    """The 90th percentile (nearest rank) of sorted, non-empty ``xs``."""
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def completion_stats(done: Sequence[dict[str, float]]) -> dict[str, float | None]:
    """Completion times (s, accept to last byte) and sizes (MB) of the small transfers that ended: whether
    "C active transfers" really turned over within a run is what the transfer sizes decide."""
    secs = sorted(d["end"] - d["start"] for d in done)
    if not secs:
        return {"p50_s": None, "p90_s": None, "max_s": None, "mean_mb": None}
    return {"p50_s": round(statistics.median(secs), 2), "p90_s": round(p90(secs), 2),
            "max_s": round(secs[-1], 2), "mean_mb": round(statistics.fmean(d["bytes"] for d in done) / 2**20, 2)}


def summarise_run(got: dict[str, Any], c: int, cc: str, delay_ms: float | None, duration: float,
                  rtt_ms: float | None = None, sent: dict[str, int] | None = None) -> dict[str, Any]:
    """One run's means after the warm-up, and how many small transfers started (``sent``: the sender's
    counters) and completed, with their completion times."""
    long_mbps = mean_after(got["mbps"]["long"], got["bin_s"], WARMUP_S, duration)
    small_mbps = mean_after(got["mbps"]["small"], got["bin_s"], WARMUP_S, duration)
    return {"c": c, "cc": cc, "delay_ms": delay_ms, "rtt_ms": rtt_ms, "long_flow_mbps": long_mbps, "small_flows_mbps": small_mbps,
            "long_share": round(long_mbps / (long_mbps + small_mbps), 4) if long_mbps + small_mbps else None,
            "utilization": round((long_mbps + small_mbps) / CAPACITY_MBPS, 3),
            "small_done": len(got["small_done"]), "small_started": (sent or {}).get("small_started"),
            "sender_errors": (sent or {}).get("errors"), "small_completion": completion_stats(got["small_done"]),
            "series": got["mbps"], "bin_s": got["bin_s"]}


def share_falls(runs: list[dict[str, Any]]) -> dict[str, bool]:
    """Per congestion control (and delay): is the long flow's share at the largest C below the smallest C's?"""
    out = {}
    for key in sorted({(r["cc"], r["delay_ms"]) for r in runs}, key=str):
        mine = sorted((r for r in runs if (r["cc"], r["delay_ms"]) == key), key=lambda r: r["c"])
        if len(mine) >= 2 and mine[0]["long_share"] is not None and mine[-1]["long_share"] is not None:
            out[f"{key[0]}" + (f"@{key[1]:.1f}ms" if key[1] else "")] = mine[-1]["long_share"] < mine[0]["long_share"]
    return out


@contextlib.contextmanager
def _added_delay(h1: Any, h3: Any, delay_ms: float) -> Iterator[dict[str, Any]]:
    """``delay_ms`` one way added on h3's link for the block (nothing for 0); yields what was measured."""
    from mininet_labs.delay import Netns, measure_rtt, path_record, splice
    from mininet_labs.delay.measure import warm_up

    src = Netns(pid=h1.pid)
    base = measure_rtt(src, "10.0.0.3", count=20)
    if delay_ms <= 0:
        yield {"configured_ms": 0.0, "delay_ms": 0.0, "rtt_ms": (base["rtt_ms"] or {}).get("p50")}
        return
    with splice(Netns(pid=h3.pid), h3.defaultIntf().name, delay_ms=delay_ms) as link:
        # the path answers again only once the spliced element forwards and h3 is reachable through it
        # (one default run measured 20 of 20 pings lost right after the splice, and ran its 12 delayed
        # runs with delay_ms None): ping until it answers, then measure; never run on an unmeasured delay
        warm_up(src, "10.0.0.3")
        rtt = measure_rtt(src, "10.0.0.3", count=20)
        rec = path_record(link.describe(), rtt, base)
        if rec["measured_one_way_ms"] is None:
            raise RuntimeError(f"added delay {delay_ms:g} ms: nothing came back through the element ({rtt})")
        yield {"configured_ms": delay_ms, "delay_ms": rec["measured_one_way_ms"],
               "rtt_ms": (rtt["rtt_ms"] or {}).get("p50"), "element": rec}


def _one_run(h1: Any, h3: Any, work: Path, script: Path, c: int, cc: str, duration: float, seed: int,
             path: dict[str, Any], small_kb: tuple[int, int] = SMALL_KB) -> dict[str, Any]:
    from mininet_labs.workdir import finish

    got_file = work / f"got-{cc}-{c}-{path['configured_ms']:g}.json"
    recv = h3.popen([sys.executable, str(script), "recv", str(PORT), str(duration + 3), str(got_file)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    send = h1.popen([sys.executable, str(script), "send", "10.0.0.3", str(PORT), str(duration), str(c),
                     "--cc", cc, "--seed", str(seed), "--min-kb", str(small_kb[0]), "--max-kb", str(small_kb[1])],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the RTT under load (the circuit's queue, not the idle path): a ping every 0.5 s after the warm-up
    time.sleep(WARMUP_S)
    ping = h1.popen(["ping", "-n", "-i", "0.5", "-W", "3", "-w", f"{max(duration - WARMUP_S, 1):.0f}", "10.0.0.3"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (s_out, s_err), (_, r_err), (p_out, _) = finish([send, recv, ping], duration + 30)
    if send.returncode != 0 or not got_file.exists():
        raise RuntimeError(f"workload {cc} C={c} failed: {(s_err or r_err).strip()}")
    sent = json.loads(s_out.strip().splitlines()[-1]) if s_out.strip() else None
    r = summarise_run(json.loads(got_file.read_text()), c, cc, path["delay_ms"], duration, path["rtt_ms"], sent)
    r["rtt_loaded_ms"] = loaded_rtt(p_out)
    return r


def loaded_rtt(ping_out: str) -> dict[str, float | None]:
    """Median and 90th percentile RTT (ms) and the loss of a ping's output: the queueing delay every
    transfer's slow start and loss recovery pay on the busy circuit."""
    rtts = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", ping_out))
    m = re.search(r"(\d+) packets transmitted, (\d+) received", ping_out)
    loss = round(1 - int(m.group(2)) / int(m.group(1)), 3) if m and int(m.group(1)) else None
    if not rtts:
        return {"p50": None, "p90": None, "loss": loss}
    return {"p50": round(statistics.median(rtts), 1), "p90": round(p90(rtts), 1),
            "loss": loss}


def run(out: Path, *, quick: bool = False, cs: Sequence[int] | None = None, ccs: Sequence[str] | None = None,
        delays_ms: Sequence[float] | None = None, duration: float | None = None, seed: int = 0,
        small_kb: tuple[int, int] | None = None, paper_sizes: bool = False,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (delay, cc, C) on one testbed: by default C in {4, 8, 16, 32}, every congestion control the
    kernel offers, 0 and 20 ms added one way, 15 s each (the paper ran 30 s: ``duration=30``; the
    default keeps the lab under 10 minutes). ``quick``: C in {4, 32}, the kernel's default cc, no added
    delay, 8 s each. ``paper_sizes``: the paper's U(512 KB, 4 MB) transfers, C in {4, 8, 16, 32}, the
    kernel's default cc, no added delay, 100 s each (not a ``quick`` size)."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import fig2_dirs

    offered = available_ccs()
    default_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() if Path(
        "/proc/sys/net/ipv4/tcp_congestion_control").exists() else "reno"
    if paper_sizes and quick:
        raise ValueError(f"paper_sizes runs {PAPER_SIZES_DURATION_S:g}-s transfers of the paper's sizes: "
                         "not a quick size (drop --quick)")
    one_cc = quick or paper_sizes
    cs = list(cs or ((4, 32) if quick else (4, 8, 16, 32)))
    ccs = list(ccs or ([default_cc] if one_cc else offered))
    delays_ms = list(delays_ms if delays_ms is not None else ((0.0,) if one_cc else (0.0, 20.0)))
    duration = duration or (8.0 if quick else PAPER_SIZES_DURATION_S if paper_sizes else 15.0)
    small_kb = small_kb or (PAPER_SMALL_KB if paper_sizes else SMALL_KB)
    bad = [cc for cc in ccs if cc not in offered]
    if bad or any(c < 0 for c in cs) or duration <= WARMUP_S or any(not 0 <= d <= 1000 for d in delays_ms) \
            or not 0 < small_kb[0] <= small_kb[1]:
        raise ValueError(f"need congestion controls from {offered} (got {bad}), C >= 0, delays in [0, 1000] ms, "
                         f"a duration > {WARMUP_S:g} s and 0 < small_kb min <= max")
    dirs = fig2_dirs(out)
    script = Path(tcp_workload.__file__).resolve()
    clock = LabClock(progress)
    note = clock.note

    res: dict[str, Any] = {"lab": "big-vs-small", "quick": quick, "ccs_offered": offered, "ccs": ccs, "cs": cs,
                           "duration_s": duration, "warmup_s": WARMUP_S, "capacity_mbps": CAPACITY_MBPS,
                           "small_kb": list(small_kb), "paper_sizes": paper_sizes, "seed": seed, "paper": PAPER_NOTE,
                           "link_timeout_s": LINK_TIMEOUT_S, "runs": []}
    conf = dirs.work / "mlte.toml"
    conf.write_text(f"[controller]\nlink_timeout = {LINK_TIMEOUT_S}\n")
    with clock.locked(), LabSession(dirs.spec, dirs.work, delay=dirs.delay, static_file=str(dirs.static),
                                    config_file=str(conf)) as session:
        session.client.circuit(FIG2_CIRCUITS["initial"])
        session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)
        h1, h3 = session.lab.node("h1"), session.lab.node("h3")
        n_runs = len(delays_ms) * len(ccs) * len(cs)
        note(f"Fig. 2 testbed up, circuit 'initial' lit; {n_runs} runs of {duration:g} s "
             f"({', '.join(ccs)} x C in {cs} x {delays_ms} ms added)")
        res["delays"] = []
        for delay in delays_ms:
            with _added_delay(h1, h3, delay) as path:
                res["delays"].append(path)
                note(f"added delay {delay:g} ms one way: measured {path['delay_ms']} ms, RTT {path['rtt_ms']} ms")
                for cc in ccs:
                    for c in cs:
                        r = _one_run(h1, h3, dirs.work, script, c, cc, duration, seed, path, small_kb)
                        res["runs"].append(r)
                        note(f"{cc:>6} C={c:<3} +{delay:g} ms: long flow {r['long_flow_mbps']:5.2f} Mbit/s, "
                             f"small transfers {r['small_flows_mbps']:5.2f} Mbit/s ({r['small_done']} of {r['small_started']} done, "
                             f"median {r['small_completion']['p50_s']} s), loaded RTT {r['rtt_loaded_ms']['p50']} ms, "
                             f"utilization {r['utilization']:.0%}")
        res["controller_errors"] = session.controller_errors()
        events = session.client.events()  # the journal dies with the controller: a stall is explained by it
        (dirs.work / "events.json").write_text(json.dumps(events))
        res["link_deletes"] = [e for e in events if e.get("type") == "link_delete"]
    res["share_falls"] = share_falls(res["runs"])
    plot(res, dirs.out / "big_vs_small.png")
    slim = {**res, "runs": [{k: v for k, v in r.items() if k not in ("series", "bin_s")} for r in res["runs"]]}
    slim["lab_seconds"] = clock.durations()
    (dirs.out / "results.json").write_text(json.dumps(slim, indent=2, sort_keys=True))
    progress(f"wrote {dirs.out / 'results.json'} and {dirs.out / 'big_vs_small.png'}")
    return slim


def plot(res: dict[str, Any], path: Path) -> None:
    """Left: long flow and small transfers' Mbit/s against C, per congestion control and added delay.
    Right: throughput over time at the largest C for the first congestion control (1-s means)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for cc, delay in sorted({(r["cc"], r["delay_ms"] or 0.0) for r in res["runs"]}):
        rs = sorted((r for r in res["runs"] if (r["cc"], r["delay_ms"] or 0.0) == (cc, delay)), key=lambda r: r["c"])
        xs = [r["c"] for r in rs]
        name = cc + (f", +{delay:.1f} ms" if delay else "")
        line, = a.plot(xs, [r["long_flow_mbps"] for r in rs], marker="o", label=f"long flow ({name})")
        a.plot(xs, [r["small_flows_mbps"] for r in rs], marker="s", ls="--", color=line.get_color(),
               label=f"small transfers ({name})")
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
