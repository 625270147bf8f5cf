"""Lab ``placement-compare``: the elastic-offload workload once per TE placement policy, same seed.

Why: ``[te] placement = otter | joint | cspf`` decide differently which flows leave a congested
circuit and where they go; the lab measures what each decision gives the flows. Every policy gets
its own controller (config ``[te] placement = <policy>``) on a fresh network — the Fig. 2 testbed
here, ``mesh6`` in lab ``placement-mesh6`` (:mod:`mininet_labs.placement_scenarios`: the circuits
lit at the start, the hot port behind the bounded 10 Mbit/s queue that counts drops, monitor
Ts = 1 s with ``flowstats`` fine data) — and the same workload with the same seed
(:mod:`mininet_labs.traffic`, :mod:`mininet_labs.udp_probe`):

* 16 small paced UDP transfers per listed pair (h2 → h4 on Fig. 2; bulk class) for the whole run;
* an interactive flow per listed pair (h1:5060 → h3:5060 on Fig. 2; classed ``interactive`` by its
  port, as the TE loop does): a 200-byte probe every 20 ms, echoed back — its RTT, jitter and loss;
* after the warm-up, the window-based elephant h1:45000 → h3:5201 (bulk) that overflows the hot
  circuit's small buffer until the TE loop moves it.

Measured over a window of the elephant's life (:func:`window`: a fixed length from the monitor's
detection of the elephant, so every policy is judged from the moment the loop knows of it), per
policy: bytes delivered per flow (allocated bytes), the elephant's and the small flows' Mbit/s and
loss, the interactive flows' RTT (p50/p95), jitter and loss, and each flow scored against its OTTER
tolerance class (:mod:`mininet_labs.tolerance_score`): the fraction of flows inside their tolerance
and the tolerance-weighted allocation (Σ bytes × value). Also the TE loop's decisions (which flows
moved, onto what, how long after the elephant's start). ``results.json`` has them under
``placement``; ``placement_compare.png`` shows them side by side.
"""
from __future__ import annotations

import contextlib
import json
import math
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mininet_labs import udp_probe
from mininet_labs.elastic_offload import (
    BIN_S,
    ELEPHANT_PORT,
    ELEPHANT_SPORT,
    MONITOR,
    SMALL_PORT,
    _Clock,
    _hold_signals,
    _settle,
    _wait_release,
)
from mininet_labs.placement_scenarios import SCENARIOS, Scenario, scenario_lab
from mininet_labs.tolerance_score import MeasuredFlow, probe_stats, sink_stats, summarise
from mininet_labs.traffic import SCRIPT
from pce.otter.graph_flows import ClassRules
from pce.otter.graph_params import POLICIES

SIP_PORT = 5060
PROBE_INTERVAL_S, PROBE_SIZE = 0.02, 200
SMALL_FLOWS, SMALL_MBPS = 16, 0.1
TE = ("[te]\nenabled = true\nplacement = \"{policy}\"\nmin_gain_s = 0.3\nmin_hold_s = 5.0\npoll = 1.0\n"
      "gone_intervals = 3\n")
#: What the comparison reports per policy (medians over runs when there are several).
KEYS = ("allocated_bytes", "weighted_bytes", "weighted_share", "inside_fraction", "elephant_mbps", "small_mbps",
        "interactive_rtt_p50_ms", "interactive_rtt_p95_ms", "interactive_jitter_ms", "interactive_loss",
        "elephant_loss", "small_loss", "offload_delay_s")


class Phases:
    """Seconds of one run: warm-up (small transfers and the interactive flow), the elephant, a tail."""

    def __init__(self, quick: bool) -> None:
        self.warmup, self.elephant, self.tail = (4.0, 10.0, 2.0) if quick else (6.0, 16.0, 3.0)
        self.window = self.elephant - 4.0  # measured from the detection (median 1.3 s, at most ~3.5 s)

    @property
    def total(self) -> float:
        return self.warmup + self.elephant + self.tail


def policies_of(placement: str) -> tuple[str, ...]:
    """``all`` → every policy; else the one named (ValueError with the choices otherwise)."""
    if placement == "all":
        return tuple(POLICIES)
    if placement not in POLICIES:
        raise ValueError(f"unknown placement {placement!r} (choose from {', '.join(POLICIES)}, all)")
    return (placement,)


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print, runs: int = 1,
        seed: int = 1, placement: str = "all") -> dict[str, Any]:
    """Run the workload once (``runs`` times) per policy on Fig. 2; write ``results.json`` and the plot."""
    return compare(out, "fig2", quick=quick, progress=progress, runs=runs, seed=seed, placement=placement)


def compare(out: Path, scenario: str, *, quick: bool = False, progress: Callable[[str], None] = print,
            runs: int = 1, seed: int = 1, placement: str = "all") -> dict[str, Any]:
    """The comparison on one of :data:`~mininet_labs.placement_scenarios.SCENARIOS`."""
    policies = policies_of(placement)
    sc = SCENARIOS[scenario]()
    if runs < 1:
        raise ValueError(f"--runs must be >= 1, got {runs}")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock = _Clock(progress)
    phases = Phases(quick)
    lab_name = "placement-compare" if sc.name == "fig2" else f"placement-{sc.name}"
    res: dict[str, Any] = {"lab": lab_name, "topology": sc.name, "title": sc.title, "quick": quick, "seed": seed,
                           "runs": runs, "policies": list(policies), "phases_s": vars(phases), "small_flows": SMALL_FLOWS,
                           "interactive": {"sport": SIP_PORT, "interval_s": PROBE_INTERVAL_S, "size": PROBE_SIZE},
                           "flows": {"elephant": sc.flows.elephant, "small": sc.flows.small,
                                     "interactive": sc.flows.interactive},
                           "placement": {}}
    for policy in policies:
        work = out / "work" / policy
        with _session(work, sc, policy, clock) as lab:
            runs_out = []
            for i in range(runs):
                clock.note(f"{policy}: run {i + 1}/{runs} (seed {seed + i}): 16 small transfers per pair "
                           f"{sc.flows.small}, interactive {sc.flows.interactive}, elephant {sc.flows.elephant} "
                           f"after {phases.warmup:.0f} s")
                runs_out.append(_one_run(lab, sc, work, phases, seed + i))
                if i + 1 < runs:
                    _settle(lab, clock)
            errors = lab.controller_errors()
        entry = {"runs": runs_out, "controller_errors": errors, **_medians(runs_out)}
        res["placement"][policy] = entry
        clock.note(_line(policy, entry))
    res["otter_weighted_ratio"] = _ratios(res["placement"])
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "placement_compare.png")
    progress(f"wrote {out / 'results.json'} and {out / 'placement_compare.png'}")
    return res


@contextlib.contextmanager
def _session(work: Path, sc: Scenario, policy: str, clock: _Clock) -> Iterator[Any]:
    """The scenario's lab with the TE loop on and ``[te] placement = policy``."""
    work.mkdir(parents=True, exist_ok=True)
    clock.note(f"{policy}: starting the controller ([te] placement = \"{policy}\") and {sc.name}")
    held: dict = {}
    try:
        with scenario_lab(work, sc, "[monitor]\n" + MONITOR + TE.format(policy=policy)) as lab:
            try:
                clock.note(f"{policy}: {sc.name} up, {', '.join(sc.circuits)} lit, {sc.hot[0]}:{sc.hot[1]} behind a "
                           "bounded 10 Mbit/s queue")
                yield lab
            finally:
                held = _hold_signals()  # a second Ctrl-C / SIGTERM must not stop the clean-up half-way
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def _one_run(lab: Any, sc: Scenario, work: Path, ph: Phases, seed: int) -> dict[str, Any]:
    """One workload run under the session's policy; returns its measurements."""
    ips: dict[str, str] = lab.ips
    fl = sc.flows
    since = lab.client.events()[-1]["seq"]
    t0 = time.time() + 1.0
    t_el = t0 + ph.warmup
    files = {k: work / f"{k}-s{seed}.json" for k in
             ("sink-el", "elephant", *(f"{k}{i}" for i in range(len(fl.small)) for k in ("recv-small", "small")),
              *(f"probe{i}" for i in range(len(fl.interactive))))}
    procs: list[Any] = []

    def start(host: str, cmd: list[str]) -> None:
        procs.append(lab.lab.node(host).popen([sys.executable, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE))

    try:
        span = str(ph.total + 1.5)
        recv = ["--duration", span, "--t0", str(t0), "--bin", str(BIN_S)]
        start(fl.elephant[1], [udp_probe.SCRIPT, "sink", str(ELEPHANT_PORT), "--out", str(files["sink-el"]), *recv])
        for i, (_src, dst) in enumerate(fl.small):
            start(dst, [SCRIPT, "recv", str(SMALL_PORT + i), "--out", str(files[f"recv-small{i}"]), *recv])
        for dst in sorted({d for _s, d in fl.interactive}):
            start(dst, [udp_probe.SCRIPT, "echo", str(SIP_PORT), "--duration", span])
        time.sleep(max(0.0, t0 - time.time()))
        for i, (src, dst) in enumerate(fl.small):
            start(src, [SCRIPT, "small", ips[dst], str(SMALL_PORT + i), "--duration", str(ph.total), "--seed",
                        str(seed + 100 * i), "--concurrent", str(SMALL_FLOWS), "--mbps", str(SMALL_MBPS),
                        "--report", str(files[f"small{i}"])])
        for i, (src, dst) in enumerate(fl.interactive):
            start(src, [udp_probe.SCRIPT, "send", ips[dst], str(SIP_PORT), "--sport", str(SIP_PORT), "--interval",
                        str(PROBE_INTERVAL_S), "--size", str(PROBE_SIZE), "--duration", str(ph.total),
                        "--out", str(files[f"probe{i}"])])
        src, dst = fl.elephant
        start(src, [SCRIPT, "elephant", ips[dst], str(ELEPHANT_PORT), "--duration", str(ph.elephant), "--start",
                    str(t_el), "--sport", str(ELEPHANT_SPORT), "--report", str(files["elephant"])])
        deadline = time.time() + ph.total + 30
        while any(p.poll() is None for p in procs):
            if time.time() > deadline:
                raise TimeoutError("the traffic generators did not finish")
            time.sleep(0.2)
        for p in procs:
            _out, err = p.communicate(timeout=10)
            if p.returncode:
                raise RuntimeError(f"traffic generator failed: {err.decode(errors='replace')[-300:]}")
        released = _wait_release(lab, since)
    finally:
        for p in procs:  # by PID: whatever is still running of this run
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    events = lab.client.events(since)
    (work / f"events-s{seed}.json").write_text(json.dumps({"t0": t0, "released": released, "events": events}))
    return measure(events, {k: json.loads(v.read_text()) for k, v in files.items()}, t0, ph, released, sc, ips)


def measure(events: list[dict], data: dict[str, Any], t0: float, ph: Phases, released: bool,
            sc: Scenario | None = None, ips: dict[str, str] | None = None) -> dict[str, Any]:
    """A run's numbers from the journal and the generators' files (``sink-el``, ``elephant``,
    ``recv-small<i>``, ``small<i>``, ``probe<i>``) over the window of :func:`window`."""
    sc = sc or SCENARIOS["fig2"]()
    spec = sc.spec()
    ips = ips or {h.name: h.ip for h in spec.hosts}
    sw = {h.name: h.switch for h in spec.hosts}
    fl = sc.flows
    detected = next((round(e["t"] - t0, 3) for e in events if e["type"] == "monitor"
                     and e.get("event") == "unconstrained_imbalance"
                     and any(f.get("sport") == ELEPHANT_SPORT for f in e.get("flows", []))), None)
    a, b = window(ph, detected)
    secs = b - a
    offloads = [e for e in events if e["type"] == "te_decision" and e["decision"] == "offload"]
    done = [e for e in events if e["type"] == "te_done" and e["decision"] == "offload" and e["ok"]]
    moved = sorted({f for e in offloads for f in e["flows"]})
    el_src, el_dst = fl.elephant
    el_key = f"udp {ips[el_src]}:{ELEPHANT_SPORT} -> {ips[el_dst]}:{ELEPHANT_PORT}"
    rules = ClassRules()

    def cls(src: str, dst: str, sport: int, dport: int) -> Any:
        return rules.classes[rules.classify(match=(ips[src], ips[dst], 17, sport, dport))]

    el = sink_stats(data["sink-el"], a, b)
    el_bytes, el_loss = el["bytes"], el["loss"]
    flows = [MeasuredFlow(f"elephant {el_src}:{ELEPHANT_SPORT} -> {el_dst}:{ELEPHANT_PORT}",
                          cls(el_src, el_dst, ELEPHANT_SPORT, ELEPHANT_PORT), el_bytes, secs, loss=el_loss,
                          notes=["loss: sequence numbers missing at the receiver in the window",
                                 "rtt: not measured on the elephant's own path"])]
    probes, probe_moved = [], []
    for i, (src, _dst) in enumerate(fl.interactive):
        p = probe_stats(data[f"probe{i}"], t0 + a, t0 + b)
        probes.append(p)
        probe_moved.append(any(f"{ips[src]}:{SIP_PORT} " in f for f in moved))
    small_moved = 0
    small_out = []
    for i, (src, dst) in enumerate(fl.small):
        series = data[f"recv-small{i}"]["series"]["small"]
        sent, got = data[f"small{i}"]["bytes_sent"], sum(series.values())
        loss = round(max(0.0, 1 - got / sent), 5) if sent else None
        n_moved = sum(1 for f in moved if f.startswith(f"udp {ips[src]}:") and f.endswith(f":{SMALL_PORT + i}"))
        small_moved += n_moved
        # the small flows share the path of the probe between the same switches unless a policy moved either
        same = [j for j, (ps, pd) in enumerate(fl.interactive) if (sw[ps], sw[pd]) == (sw[src], sw[dst])]
        rtt = probes[same[0]].get("rtt_p95_ms") if same and not n_moved and not probe_moved[same[0]] else None
        smb = _bytes(series, a, b)
        small_out.append(round(smb * 8 / 1e6 / secs, 3))
        flows.append(MeasuredFlow(f"{SMALL_FLOWS} small transfers {src} -> {dst}:{SMALL_PORT + i}",
                                  cls(src, dst, 46000, SMALL_PORT + i), smb, secs, rtt_ms=rtt, loss=loss,
                                  count=SMALL_FLOWS,
                                  notes=["one measurement for all: aggregate bytes and loss over the run",
                                         "rtt: the p95 of the interactive probe between the same switches"]))
    for (src, dst), p in zip(fl.interactive, probes, strict=True):
        flows.append(MeasuredFlow(f"interactive {src}:{SIP_PORT} -> {dst}:{SIP_PORT}",
                                  cls(src, dst, SIP_PORT, SIP_PORT), p["bytes"], secs, rtt_ms=p.get("rtt_p95_ms"),
                                  jitter_ms=p.get("jitter_ms"), loss=p["loss"],
                                  notes=["rtt: p95 of the echoed probes; jitter: mean |delta RTT|; "
                                         "loss: probes unanswered"]))
    summary = summarise(flows)
    verified = round(done[0]["t"] - t0 - ph.warmup, 3) if done else None
    first = probes[0]
    return {"window_s": [a, b], "detected_s": detected, "moved_flows": moved, "elephant_moved": el_key in moved,
            "small_flows_moved": small_moved, "interactive_moved": any(probe_moved),
            "circuits": sorted({e.get("circuit") or "" for e in offloads} - {""}),
            "decisions": [{"t_s": round(e["t"] - t0, 3), "decision": e["decision"], "reason": e["reason"],
                           "policy": e.get("policy")} for e in events if e["type"] == "te_decision"],
            "offload_delay_s": verified, "released": released,
            "elephant_mbps": round(el_bytes * 8 / 1e6 / secs, 3), "small_mbps": small_out[0],
            "small_mbps_by_pair": small_out, "elephant_loss": el_loss, "small_loss": flows[1].loss,
            "interactive": first, "interactive_by_pair": probes,
            "interactive_rtt_p95_by_pair": [p.get("rtt_p95_ms") for p in probes],
            "interactive_inside_by_pair": [f["inside"] for f in summary["flows"][-len(probes):]], "interactive_rtt_p50_ms": first.get("rtt_p50_ms"),
            "interactive_rtt_p95_ms": first.get("rtt_p95_ms"), "interactive_jitter_ms": first.get("jitter_ms"),
            "interactive_loss": first["loss"], **summary}


def window(ph: Phases, detected: float | None) -> tuple[float, float]:
    """The measured window (seconds into the run): ``WINDOW_S`` from the monitor's detection of the
    elephant — every policy is judged from the moment the loop knows of it, so the monitor's sampling
    phase (the same for every policy) does not count — cut at the elephant's end; without a detection
    its lifetime less the first 0.5 s. Both ends on the receivers' bin edges."""
    end = ph.warmup + ph.elephant
    a, b = (ph.warmup + 0.5, end) if detected is None else (detected, min(end, detected + ph.window))
    return math.ceil(a / BIN_S - 1e-9) * BIN_S, math.floor(b / BIN_S + 1e-9) * BIN_S  # whole bins


def _bytes(series: dict[str, int], a: float, b: float) -> int:
    """Bytes in the bins of [a, b) (bin edges; bins of BIN_S from the run's start)."""
    first, last = round(a / BIN_S), round(b / BIN_S)
    return sum(series.get(str(i), 0) for i in range(first, last))


def _medians(runs: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in KEYS:
        vals = [r[k] for r in runs if r.get(k) is not None]
        out[k] = round(statistics.median(vals), 4) if vals else None
    for k in ("small_mbps_by_pair", "interactive_rtt_p95_by_pair"):
        cols = list(zip(*(r[k] for r in runs), strict=True))
        out[k] = [round(statistics.median(v for v in c if v is not None), 4) if any(v is not None for v in c)
                  else None for c in cols]
    out["elephant_moved_all"] = all(r["elephant_moved"] for r in runs)
    out["released_all"] = all(r["released"] for r in runs)
    out["moved_flows"] = sorted({f for r in runs for f in r["moved_flows"]})
    return out


def _ratios(by_policy: dict[str, dict]) -> dict[str, float | None]:
    """OTTER's tolerance-weighted allocation / each other policy's (medians); empty without OTTER."""
    otter = by_policy.get("otter", {}).get("weighted_bytes")
    return {p: (round(otter / e["weighted_bytes"], 4) if otter and e.get("weighted_bytes") else None)
            for p, e in by_policy.items() if p != "otter" and otter is not None}


def _line(policy: str, e: dict[str, Any]) -> str:
    delay = "not offloaded" if e["offload_delay_s"] is None else f"offloaded {e['offload_delay_s']:.2f} s after start"
    return (f"{policy}: elephant {e['elephant_mbps']} Mbit/s ({delay}), small flows {e['small_mbps']} Mbit/s, "
            f"interactive RTT p95 {e['interactive_rtt_p95_ms']} ms, loss {e['interactive_loss']}; inside tolerance "
            f"{e['inside_fraction']:.0%}; tolerance-weighted {e['weighted_bytes'] / 1e6:.3f} of "
            f"{e['allocated_bytes'] / 1e6:.3f} MB; moved {e['moved_flows']}")


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pol = [p for p in res["policies"] if p in res["placement"]]  # the run's order (results.json sorts keys)
    e = [res["placement"][p] for p in pol]
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.4))
    x = range(len(pol))
    ax = axes[0]
    ax.bar([i - 0.2 for i in x], [v["allocated_bytes"] / 1e6 for v in e], 0.4, label="allocated", color="tab:gray")
    ax.bar([i + 0.2 for i in x], [v["weighted_bytes"] / 1e6 for v in e], 0.4, label="tolerance-weighted",
           color="tab:green")
    ax.set_title("bytes delivered in the window (MB)", fontsize=9)
    ax.legend(fontsize=7, loc="lower center")
    ax = axes[1]
    ax.bar([i - 0.2 for i in x], [v["elephant_mbps"] for v in e], 0.4, label="elephant", color="tab:orange")
    ax.bar([i + 0.2 for i in x], [v["small_mbps"] for v in e], 0.4, label="16 small (sum)", color="tab:blue")
    ax.set_title("throughput (Mbit/s)", fontsize=9)
    ax.legend(fontsize=7, loc="center right")
    ax = axes[2]
    pairs = res["flows"]["interactive"]
    width = 0.8 / len(pairs)
    for j, (src, dst) in enumerate(pairs):
        ax.bar([i - 0.4 + width * (j + 0.5) for i in x], [v["interactive_rtt_p95_by_pair"][j] or 0 for v in e], width,
               label=f"{src} -> {dst}", color=("tab:pink", "tab:purple", "tab:brown")[j % 3])
    ax.axhline(20, color="k", ls=":", lw=1, label="tolerance (20 ms)")
    top = max([25.0] + [r or 0 for v in e for r in v["interactive_rtt_p95_by_pair"]])
    ax.set_ylim(0, top * 1.4)  # room for the legend
    ax.set_title("interactive flows: RTT p95 (ms)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax = axes[3]
    ax.bar(list(x), [v["inside_fraction"] for v in e], 0.5, color="tab:cyan")
    ax.set_ylim(0, 1.05)
    ax.set_title("flows inside their tolerance", fontsize=9)
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels(pol)
    runs = res["runs"]
    fig.suptitle(f"placement policies on {res['title']}, same workload (seed {res['seed']}"
                 f"{f', median of {runs} runs' if runs > 1 else ''})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
