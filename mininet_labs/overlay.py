"""Lab ``overlay``: a direct path against split-TCP relays, the relay chosen by the CRONets rule
("CRONets: Cloud-Routed Overlay Networks", Cai et al., IEEE ICDCS 2016).

Four sites, one OVS switch each: S (host src), D (host dst), R1 and R2 (relay hosts r1, r2). Every
inter-site link is a *wire node* (:class:`mininet_labs.path_change.WireNode`: the delay element
between two veth ends, so each link gets its own one-way delay and per-direction loss): the direct
path S:2–D:2 and the relay legs S:3–R1:2, R1:3–D:3, S:4–R2:2, R2:3–D:4, each serialised at
50 Mbit/s (a cloud VM's NIC in the paper is 100 Mbit/s; 50 keeps the userspace switches off their
ceiling). The controller forwards on shortest paths, so src → dst takes the direct link and the
overlay is what the paper's is: an application relay (src → r → dst) the routing knows nothing about.

Per case (the wire settings below): ping measures RTT and loss of the direct path and of each relay
leg (1000 pings at 10 ms, 500 with ``quick``, in parallel); a relay path's RTT is the sum of its legs' and its loss
1 - (1 - l1)(1 - l2). The rule (the paper's C4.5 result, Section IV: an overlay path "decreases both
the RTT and the loss rate, by at least 10.5% and 12.1%") picks the relay; among relays that pass,
the one with the smallest RTT·sqrt(loss) (the Mathis model's denominator) wins, and when none passes
the same ranking names the *candidate* that is measured anyway, to check the rule. TCP throughput
(Cubic by default, one greedy flow, :mod:`mininet_labs.tcp_workload`) is
measured direct and through the relay, where a split-TCP proxy (:data:`PROXY`) terminates the
connection and opens its own to dst, so each leg runs its own control loop — the paper's
split-overlay, where its gain comes from.

``results.json``: ``cases`` (each: ``paths`` with measured ``rtt_ms``/``loss``, ``rule`` per relay,
``relay``, ``candidate``, ``relay_used``, ``throughput_mbps``, ``improvement_factor`` (relay /
direct), ``rtt_ratio`` (relay path / direct RTT), ``rule_right``, ``mathis_mbps``), and at top level
the first case's ``improvement_factor``, ``rtt_ratio``, ``relay_used`` and ``paths``. Plot:
``overlay.png``.

Also a ``mn`` custom file (the topology with the first case's wires)::

    sudo mn --custom mininet_labs/overlay.py --topo overlay --controller remote,ip=127.0.0.1,port=6653
"""
from __future__ import annotations

import inspect
import json
import math
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _bootstrap_path() -> None:
    """When ``mn`` execs this file, make the project importable (as mininet_labs/testbed.py does)."""
    root = Path(inspect.currentframe().f_code.co_filename).resolve().parents[1]  # type: ignore[union-attr]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


_bootstrap_path()

from topology.spec import HostSpec, LabSpec, LinkSpec, SwitchSpec  # noqa: E402

RTT_CUT = 0.105  # CRONets Section IV: both cuts needed for a likely throughput gain
LOSS_CUT = 0.121
DATA_PORT = 5401
WIRE_RATE_MBPS = 50.0
WIRE_LIMIT = 400  # frames per direction: ~100 ms of queue at 50 Mbit/s
MSS_BYTES = 1448
#: ping's interval: with replies outstanding (RTT > interval) iputils ping sleeps >= 10 ms between
#: probes anyway (1000 pings at 5 ms took 8.5-10 s here), so 10 ms is what a path can be probed at
PING_INTERVAL_S = 0.01
PAPER_NOTE = ("CRONets (Cai et al., ICDCS 2016): 6,600 Internet paths; the split overlay improved throughput for "
              "78% of them, median x1.67, mean x3.27; an overlay path likely helps when it cuts RTT by >= 10.5% "
              "and loss by >= 12.1% (C4.5)")

IPS = {"src": "10.0.0.1", "dst": "10.0.0.2", "r1": "10.0.0.11", "r2": "10.0.0.12"}
RELAYS = ("r1", "r2")
#: wire name -> (switch a, port, switch b, port)
WIRES = {"wd": ("S", 2, "D", 2), "w1a": ("S", 3, "R1", 2), "w1b": ("R1", 3, "D", 3),
         "w2a": ("S", 4, "R2", 2), "w2b": ("R2", 3, "D", 4)}
LEGS = {"r1": ("w1a", "w1b"), "r2": ("w2a", "w2b")}
#: the cases: wire -> (one-way delay ms, loss per direction)
CASES: dict[str, dict[str, tuple[float, float]]] = {
    # a long, lossy direct path; r1 is close to both ends with clean legs, r2 is a detour
    "lossy_direct": {"wd": (30.0, 0.01), "w1a": (8.0, 0.002), "w1b": (8.0, 0.002),
                     "w2a": (20.0, 0.005), "w2b": (20.0, 0.005)},
    # a short, clean direct path: every relay path is longer and lossier
    "good_direct": {"wd": (10.0, 0.002), "w1a": (10.0, 0.01), "w1b": (10.0, 0.01),
                    "w2a": (20.0, 0.005), "w2b": (20.0, 0.005)},
}

#: the split-TCP relay: accept on PORT, open a connection of its own to DST:PORT, copy both ways
PROXY = r'''
import socket, sys, threading
port, dst, seconds, cc = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4].encode()
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", port)); srv.listen(16)
srv.settimeout(seconds)
def pump(a, b):
    buf = bytearray(262144)
    try:
        while True:
            n = a.recv_into(buf)
            if not n:
                break
            b.sendall(memoryview(buf)[:n])
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
try:
    while True:
        c, _ = srv.accept()
        up = socket.socket(); up.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
        up.settimeout(10); up.connect((dst, port)); up.settimeout(None); c.settimeout(None)
        for a, b in ((c, up), (up, c)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()
except socket.timeout:
    pass
'''


# ---------------------------------------------------------------------- topology (plain data)
def overlay_spec() -> LabSpec:
    """The four sites and their hosts; the wires between sites are added as wire nodes."""
    switches = (SwitchSpec("S", 0x0E01), SwitchSpec("D", 0x0E02), SwitchSpec("R1", 0x0E03), SwitchSpec("R2", 0x0E04))
    hosts = (HostSpec("src", "S", 1, IPS["src"], "00:00:00:00:0e:01"),
             HostSpec("dst", "D", 1, IPS["dst"], "00:00:00:00:0e:02"),
             HostSpec("r1", "R1", 1, IPS["r1"], "00:00:00:00:0e:11"),
             HostSpec("r2", "R2", 1, IPS["r2"], "00:00:00:00:0e:12"))
    links = tuple(LinkSpec(h.name, 0, h.switch, h.port, "access", 100.0) for h in hosts)
    return LabSpec("overlay", switches, (), hosts, links)


def wire_links() -> set[tuple[str, int, str, int]]:
    """The directed packet links LLDP must see across the wires."""
    return {x for a, ap, b, bp in WIRES.values() for x in ((a, ap, b, bp), (b, bp, a, ap))}


# ---------------------------------------------------------------------- the rule
def relay_path(leg1: dict[str, Any], leg2: dict[str, Any]) -> dict[str, Any]:
    """A one-hop overlay path from its two legs: RTTs add, deliveries multiply."""
    return {"rtt_ms": round(leg1["rtt_ms"] + leg2["rtt_ms"], 4),
            "loss": round(1 - (1 - leg1["loss"]) * (1 - leg2["loss"]), 6), "legs": [leg1, leg2]}


def cuts(direct: dict[str, Any], relay: dict[str, Any], rtt_cut: float = RTT_CUT,
         loss_cut: float = LOSS_CUT) -> dict[str, Any]:
    """The relay path's RTT and loss cuts against the direct path and whether both reach the rule's.

    A loss-free direct path has no loss to cut: the rule cannot pass (its loss cut is None)."""
    if direct["rtt_ms"] <= 0:
        raise ValueError(f"direct RTT must be > 0 ms, got {direct['rtt_ms']!r}")
    rc = round(1 - relay["rtt_ms"] / direct["rtt_ms"], 6)  # rounded: 1 - 89.5/100 is 0.105, not 0.10499..
    lc = round(1 - relay["loss"] / direct["loss"], 6) if direct["loss"] > 0 else None
    return {"rtt_cut": round(rc, 4), "loss_cut": None if lc is None else round(lc, 4),
            "passes": rc >= rtt_cut and lc is not None and lc >= loss_cut}


def mathis_mbps(rtt_ms: float, loss: float, mss: int = MSS_BYTES) -> float | None:
    """Mathis et al.'s TCP throughput MSS/(RTT·sqrt(p))·sqrt(3/2) in Mbit/s (None without loss)."""
    if loss <= 0 or rtt_ms <= 0:
        return None
    return round(mss * 8 / (rtt_ms / 1000 * math.sqrt(loss)) * math.sqrt(1.5) / 1e6, 3)


def choose(direct: dict[str, Any], relays: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rule per relay, the relay used (the best-ranked that passes, else None) and the candidate
    (the best-ranked of all: measured anyway so the rule can be checked). Rank: RTT·sqrt(loss)."""
    if not relays:
        raise ValueError("no relay paths to choose from")
    rules = {name: cuts(direct, r) for name, r in relays.items()}
    ranked = sorted(relays, key=lambda n: (relays[n]["rtt_ms"] * math.sqrt(max(relays[n]["loss"], 1e-6)), n))
    used = next((n for n in ranked if rules[n]["passes"]), None)
    return {"rule": rules, "relay": used, "candidate": used or ranked[0], "relay_used": used is not None}


def summarise_case(name: str, paths: dict[str, Any], decision: dict[str, Any], direct_mbps: Sequence[float],
                   relay_mbps: Sequence[float]) -> dict[str, Any]:
    """One case's result: the throughputs (mean of runs), their ratio, the RTT ratio, and whether the
    rule was right (relay used exactly when it carried more than the direct path)."""
    if not direct_mbps or not relay_mbps:
        raise ValueError("need at least one direct and one relay throughput run")
    cand = decision["candidate"]
    d, r = statistics.fmean(direct_mbps), statistics.fmean(relay_mbps)
    factor = r / d if d > 0 else None
    legs = paths[cand]["legs"]
    split_model = [mathis_mbps(leg["rtt_ms"], leg["loss"]) for leg in legs]
    return {"name": name, "paths": paths, **decision,
            "throughput_mbps": {"direct": round(d, 3), "relay": round(r, 3), "direct_runs": [round(x, 3) for x in direct_mbps],
                                "relay_runs": [round(x, 3) for x in relay_mbps]},
            "improvement_factor": None if factor is None else round(factor, 3),
            "rtt_ratio": round(paths[cand]["rtt_ms"] / paths["direct"]["rtt_ms"], 4),
            "rule_right": factor is not None and decision["relay_used"] == (factor > 1.0),
            "mathis_mbps": {"direct": mathis_mbps(paths["direct"]["rtt_ms"], paths["direct"]["loss"]),
                            "relay_plain": mathis_mbps(paths[cand]["rtt_ms"], paths[cand]["loss"]),
                            "relay_split": None if None in split_model else min(split_model)}}


# ---------------------------------------------------------------------- measuring
PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")
PING_RTT = re.compile(r"= [\d.]+/([\d.]+)/")


def parse_ping_summary(text: str) -> dict[str, Any]:
    """sent, received, loss and the mean RTT (ms) from ping's summary lines (ValueError if absent)."""
    m = PING_SUMMARY.search(text)
    if m is None:
        raise ValueError(f"no ping summary in {text.strip()[-200:]!r}")
    sent, recv = int(m.group(1)), int(m.group(2))
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", text)]
    return {"sent": sent, "received": recv, "loss": round(1 - recv / sent, 6) if sent else None,
            "rtt_ms": round(statistics.median(rtts), 4) if rtts else None}


def throughput_from(got: dict[str, Any], warmup_s: float, seconds: float) -> float:
    """Mean Mbit/s of the long flow between ``warmup_s`` and ``seconds`` from tcp_workload's bins."""
    from mininet_labs.big_vs_small import mean_after

    return mean_after(got["mbps"]["long"], got["bin_s"], warmup_s, seconds)


def plot(res: dict[str, Any], path: Path) -> Path:
    """Left: throughput direct vs relay per case (bars) with the Mathis model (markers). Right: each
    relay's RTT cut vs loss cut per case, the rule's region shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = res["cases"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    xs = range(len(cases))
    w = 0.38
    a.bar([x - w / 2 for x in xs], [c["throughput_mbps"]["direct"] for c in cases], w, label="direct", color="tab:gray")
    a.bar([x + w / 2 for x in xs], [c["throughput_mbps"]["relay"] for c in cases], w,
          label="via relay (split TCP)", color="tab:blue")
    for x, c in zip(xs, cases, strict=True):
        m = c["mathis_mbps"]
        if m["direct"] is not None:
            a.plot(x - w / 2, m["direct"], "k_", ms=18, mew=2)
        if m["relay_split"] is not None:
            a.plot(x + w / 2, m["relay_split"], "k_", ms=18, mew=2)
        top = max(c["throughput_mbps"]["direct"], c["throughput_mbps"]["relay"])
        a.annotate(f"x{c['improvement_factor']}\n{'relay used' if c['relay_used'] else 'direct kept'}",
                   (x, top), ha="center", va="bottom", fontsize=8)
    a.plot([], [], "k_", ms=12, mew=2, label="Mathis model")
    a.set_xticks(list(xs), [f"{c['name']}\n(candidate {c['candidate']})" for c in cases], fontsize=8)
    a.set_ylabel("TCP throughput (Mbit/s)")
    a.set_title("Direct vs split-TCP relay", fontsize=9)
    ymax = max([c["throughput_mbps"][k] for c in cases for k in ("direct", "relay")] +
               [v for c in cases for v in c["mathis_mbps"].values() if v is not None])
    a.set_ylim(0, ymax * 1.45)
    a.legend(fontsize=7, loc="upper center", ncol=3)
    b.fill_between([RTT_CUT * 100, 100], LOSS_CUT * 100, 100, color="tab:green", alpha=0.12,
                   label="rule: RTT cut >= 10.5% and loss cut >= 12.1%")
    floor = -100.0  # cuts below -100% are drawn at -100% (their labels give the value)
    n = 0
    for c, marker in zip(cases, "os^D", strict=False):
        for name, r in c["rule"].items():
            n += 1
            lc = r["loss_cut"] if r["loss_cut"] is not None else -1.0
            x, y = max(r["rtt_cut"] * 100, floor), max(lc * 100, floor)
            b.scatter(x, y, marker=marker, s=50, color="tab:green" if r["passes"] else "tab:red")
            b.annotate(f"{c['name']}:{name} ({r['rtt_cut']:.0%}, {lc:.0%})", (x, y), fontsize=7,
                       xytext=(4, 4 + 9 * (n % 3)), textcoords="offset points")
    b.axvline(RTT_CUT * 100, color="k", lw=0.6, ls="--")
    b.axhline(LOSS_CUT * 100, color="k", lw=0.6, ls="--")
    b.set_xlim(floor - 10, 110)
    b.set_ylim(floor - 10, 110)
    b.set_xlabel("RTT cut (%)")
    b.set_ylabel("loss cut (%)")
    b.set_title("Relay paths against the rule (measured)", fontsize=9)
    b.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- Mininet parts
def _configure(wires: dict[str, Any], case: dict[str, tuple[float, float]], seed: int) -> None:
    """Restart every wire's element with the case's delay and loss (a few ms without forwarding)."""
    for i, (name, (delay, loss)) in enumerate(sorted(case.items())):
        wires[name].start_wire(delay_ms=delay, loss=loss, seed=seed * 100 + i + 1)


def _ping_all(lab: Any, pairs: dict[str, tuple[str, str]], count: int, interval: float, save: Path) -> dict[str, str]:
    """Run one ping per (host, peer) pair at once; their outputs by key. Each writes ``save``-KEY.txt,
    not a pipe: one read after another, a later ping's full pipe (64 KB) would stall it."""
    from mininet_labs.workdir import finish

    files = {k: Path(f"{save}-{k}.txt") for k in pairs}
    procs = []
    for k, (a, b) in pairs.items():
        with open(files[k], "w") as log:
            procs.append(lab.node(a).popen(["ping", "-n", "-c", str(count), "-i", f"{interval:g}", "-W", "2", IPS[b]],
                                           stdout=log, stderr=subprocess.STDOUT))
    finish(procs, count * interval + 30)
    return {k: f.read_text() for k, f in files.items()}


def _measure_paths(lab: Any, count: int, interval: float, save: Path) -> dict[str, Any]:
    """Ping the direct path and every relay leg at once; the relay paths combine their legs."""
    pairs = {"direct": ("src", "dst")}
    for r in RELAYS:
        pairs[f"{r}.leg1"], pairs[f"{r}.leg2"] = ("src", r), (r, "dst")
    got = {k: parse_ping_summary(o) for k, o in _ping_all(lab, pairs, count, interval, save).items()}
    for k, g in got.items():
        if g["rtt_ms"] is None:
            raise RuntimeError(f"no ping came back on {k} ({pairs[k][0]} -> {pairs[k][1]})")
    paths: dict[str, Any] = {"direct": got["direct"]}
    for r in RELAYS:
        paths[r] = relay_path(got[f"{r}.leg1"], got[f"{r}.leg2"])
    return paths


def _transfer(lab: Any, work: Path, script: str, via: str | None, seconds: float, tag: str, cc: str) -> float:
    """One greedy TCP flow src -> dst for ``seconds`` (through ``via``'s split proxy if given) with
    congestion control ``cc`` on every sending socket; Mbit/s."""
    from mininet_labs.workdir import finish

    got_file = work / f"got-{tag}.json"
    dst, src = lab.node("dst"), lab.node("src")
    recv = dst.popen([sys.executable, script, "recv", str(DATA_PORT), str(seconds + 2), str(got_file)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs = [recv]
    if via is not None:
        procs.append(lab.node(via).popen([sys.executable, str(work / "proxy.py"), str(DATA_PORT), IPS["dst"],
                                          str(seconds + 2), cc], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True))
    time.sleep(0.5)
    send = src.popen([sys.executable, script, "send", IPS[via or "dst"], str(DATA_PORT), str(seconds), "0", "--cc", cc],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (_, s_err), *_ = finish([send, *procs], seconds + 30)
    if send.returncode != 0 or not got_file.exists():
        raise RuntimeError(f"transfer {tag} failed: {s_err.strip()[-300:]}")
    return throughput_from(json.loads(got_file.read_text()), 2.0, seconds)


def _run_cases(res: dict[str, Any], names: Sequence[str], work: Path, script: str, seed: int, cc: str, reps: int,
               seconds: float, pings: int, note: Callable[[str], None]) -> None:
    """Build the network and run every case on it, appending to ``res["cases"]`` (hold the lock)."""
    from mininet_labs.path_change import add_wire
    from mininet_labs.session import LabSession

    with LabSession(overlay_spec(), work) as session:
        lab = session.lab
        assert lab is not None
        first = CASES[names[0]]
        wires = {name: add_wire(lab, name, a, ap, b, bp, delay_ms=first[name][0], loss=first[name][1],
                                rate_mbps=WIRE_RATE_MBPS, limit=WIRE_LIMIT)
                 for name, (a, ap, b, bp) in WIRES.items()}
        session.wait_links(wire_links(), timeout=40)
        # first packets: ARP and the controller's path set-up, off the measured pings (all at once)
        _ping_all(lab, {f"{a}-{b}": (a, b) for a, b in (("src", "dst"), ("src", "r1"), ("src", "r2"),
                                                         ("r1", "dst"), ("r2", "dst"))}, 2, 0.2, work / "ping-warmup")
        note(f"4 sites up, {len(WIRES)} wires seen by LLDP; congestion control {cc}")
        for name in names:
            _configure(wires, CASES[name], seed)
            time.sleep(1.0)
            paths = _measure_paths(lab, pings, PING_INTERVAL_S, work / f"ping-{name}")
            decision = choose(paths["direct"], {r: paths[r] for r in RELAYS})
            note(f"{name}: direct RTT {paths['direct']['rtt_ms']:.1f} ms loss {paths['direct']['loss']:.2%}; " +
                 "; ".join(f"{r} RTT {paths[r]['rtt_ms']:.1f} ms loss {paths[r]['loss']:.2%} "
                           f"(cuts {decision['rule'][r]['rtt_cut']:.0%}/"
                           f"{'-' if decision['rule'][r]['loss_cut'] is None else format(decision['rule'][r]['loss_cut'], '.0%')})"
                           for r in RELAYS) +
                 f" -> {'relay ' + decision['relay'] if decision['relay_used'] else 'direct (candidate ' + decision['candidate'] + ')'}")
            direct, relay = [], []
            for k in range(reps):
                order = (None, decision["candidate"]) if (k + seed) % 2 == 0 else (decision["candidate"], None)
                for via in order:
                    mbps = _transfer(lab, work, script, via, seconds, f"{name}-{via or 'direct'}-{k}", cc)
                    (relay if via else direct).append(mbps)
                    note(f"{name} run {k + 1}/{reps}: {'via ' + via if via else 'direct'} {mbps:.2f} Mbit/s")
            case = summarise_case(name, paths, decision, direct, relay)
            case["elements"] = {n: w.describe() for n, w in wires.items()}
            res["cases"].append(case)
            note(f"{name}: direct {case['throughput_mbps']['direct']:.2f} Mbit/s, via {case['candidate']} "
                 f"{case['throughput_mbps']['relay']:.2f} Mbit/s: x{case['improvement_factor']} "
                 f"(relay {'used' if case['relay_used'] else 'not used'}; rule right: {case['rule_right']})")
        res["controller_errors"] = session.controller_errors()
        for w in wires.values():
            w.stop_wire()


def run(out: Path, *, quick: bool = False, seed: int = 1, progress: Callable[[str], None] = print,
        cases: Sequence[str] | None = None, cc: str = "cubic") -> dict[str, Any]:
    """Every case on one network: ``quick`` 500 pings and one 10-s transfer per path, else 1000 pings
    and three transfers of 20 s each.

    ``cc`` is the senders' congestion control (src and the relay's proxy). Cubic by default, the
    loss-based TCP of the paper's servers: BBR (this kernel's default) ignores random loss, and
    then the rule's loss cut means nothing (measured: x1.0 on lossy_direct, docs/labs.md)."""
    from mininet_labs.big_vs_small import available_ccs
    from mininet_labs.labclock import LabClock

    names = list(cases or CASES)
    unknown = [c for c in names if c not in CASES]
    if unknown:
        raise ValueError(f"unknown overlay cases {unknown} (known: {', '.join(CASES)})")
    if cc not in available_ccs():
        raise ValueError(f"congestion control {cc!r} is not offered by this kernel ({', '.join(available_ccs())})")
    seconds, reps, pings = (10.0, 1, 500) if quick else (20.0, 3, 1000)
    out = Path(out).resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "proxy.py").write_text(PROXY)
    script = str(Path(__file__).resolve().parent / "tcp_workload.py")
    clock = LabClock(progress)

    res: dict[str, Any] = {"lab": "overlay", "quick": quick, "seed": seed, "transfer_s": seconds, "repetitions": reps,
                           "pings_per_path": pings, "ping_interval_s": PING_INTERVAL_S,
                           "congestion_control": cc, "rule": {"rtt_cut": RTT_CUT, "loss_cut": LOSS_CUT},
                           "wire_rate_mbps": WIRE_RATE_MBPS, "paper": PAPER_NOTE, "cases": []}
    with clock.locked():
        _run_cases(res, names, work, script, seed, cc, reps, seconds, pings, clock.note)
    top = res["cases"][0]
    res.update({k: top[k] for k in ("improvement_factor", "rtt_ratio", "relay_used", "relay", "candidate", "paths")})
    plot(res, out / "overlay.png")
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    progress(f"wrote {out / 'results.json'} and {out / 'overlay.png'}")
    return res


# ---------------------------------------------------------------------- `mn --custom`
try:  # only where Mininet is importable
    from mininet.topo import Topo

    class OverlayTopo(Topo):
        """``--topo overlay[,case=good_direct]``: the four sites and the five wires of one case."""

        def build(self, case: str = "lossy_direct", **_kwargs: Any) -> None:  # type: ignore[override]
            from mininet_labs.path_change import WireNode, add_spec_nodes

            if case not in CASES:
                raise ValueError(f"unknown case {case!r} (known: {', '.join(CASES)})")
            add_spec_nodes(self, overlay_spec())
            for name, (a, ap, b, bp) in WIRES.items():
                delay, loss = CASES[case][name]
                self.addHost(name, cls=WireNode, delay_ms=delay, loss=loss, rate_mbps=WIRE_RATE_MBPS, limit=WIRE_LIMIT)
                self.addLink(name, a, port1=0, port2=ap)
                self.addLink(name, b, port1=1, port2=bp)

    topos = {"overlay": OverlayTopo}
except ImportError:  # pragma: no cover
    topos = {}
