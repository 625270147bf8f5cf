"""Lab ``path-change``: the controller moves a probed flow between two paths of different latency; the
path-change detector of "Path Persistence in the Cloud" (Reda et al., ACM CCR 2020) and the
rolling-minimum baseline must find the moves in the RTT series they measure.

Sites A (h1, h3) and Z (h2) are joined by two packet links A:2–Z:2 and A:3–Z:3. Each link is a
*wire node*: a Mininet node with two interfaces whose only job is the delay element (``dlyfwd``,
:mod:`mininet_labs.delay`) between them, so a link gets its delay without splicing an OVS port
(OVS tracks ports by name) and Mininet builds and removes the veths like any other link. LLDP
crosses the wires, so the controller sees two parallel A–Z links. Path 1 adds 2 ms one way, path 2
6 ms; both wires serialise at 10 Mbit/s with a 50-frame queue, so cross traffic queues there.

The controller steers everything to h2 (at A) and to h1 (at Z) with two STEER-band rules; a *move*
is an update plan (``POST /plan``) that overwrites both ingress rules (make-before-break, verified
by the rules' counters). Moves come at seeded random times (dwell 8–30 s, alternating paths), the
ground truth being the time the plan's ingress swaps finished. h1 pings h2 every 200 ms (the
paper's probe interval). Congestion episodes (seeded, 4–10 s every 10–30 s) send TCP cross traffic h3 → h2 (one
long flow and 4 short transfers) over whichever path the flow is on: the "spurious congestion delay"
the paper's detector is built to ignore.

On the measured series: :class:`monitor.latency.PathChangeDetector` (1-s minima, 4-s window, 3 of
4 within 0.5 ms) and :class:`monitor.latency.RollingMinBaseline` with k = 20 observed latencies
(the paper: "a rolling minimum of the last k observed latencies", k = 20 its best, >= 7.69 % false
positives), plus the monitor's default (20 one-second minima) for reference. A detection matches a
move if it comes within ``TOLERANCE_S`` = 6 s after it (4-s window + the 1-s interval the move falls
in + 1 s for the last interval to close), each move and detection matched at most once.

``results.json``: ``moves`` (the ground truth), ``failed_moves`` (plans that failed their
verification and rolled back: the flow stayed, so they are no path change), ``congestion``, ``paths`` (the *measured* RTT and
one-way delay of each path), ``detector`` / ``baseline`` / ``baseline_1s_minima`` (``precision``,
``recall``, ``detections``), ``probes`` (sent, answered). Plot: ``path_change.png``.

Also a ``mn`` custom file (the topology, wires included)::

    sudo mn --custom mininet_labs/path_change.py --topo path-change --controller remote,ip=127.0.0.1,port=6653
"""
from __future__ import annotations

import inspect
import json
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _bootstrap_path() -> None:
    """When ``mn`` execs this file, make the project importable (as mininet_labs/testbed.py does)."""
    root = Path(inspect.currentframe().f_code.co_filename).resolve().parents[1]  # type: ignore[union-attr]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


_bootstrap_path()

from monitor.latency import PathChangeDetector, RollingMinBaseline, precision_recall, run_detector  # noqa: E402
from topology.spec import HostSpec, LabSpec, LinkSpec, SwitchSpec  # noqa: E402

PROBE_INTERVAL_S = 0.2  # the paper's probe interval
TOLERANCE_S = 6.0  # a detection within this long after a move matches it
BASELINE_K = 20  # the paper's best rolling-minimum window (observed latencies)
CROSS_PORT = 5301
WIRE_RATE_MBPS = 10.0
PAPER_NOTE = ("Path Persistence in the Cloud (Reda et al., CCR 2020): 200-ms probes, 1-s minima, 4-s window, "
              "3 of 4 within 0.5 ms; the rolling minimum of the last k=20 latencies gave >= 7.69% false positives; "
              "the detector found every traceroute-confirmed change of >= 0.5 ms")
WIRE_LIMIT = 50  # frames queued per direction in a wire: at most 60 ms of queueing at 10 Mbit/s


@dataclass(frozen=True)
class PathDef:
    """One A–Z path: the wire node and the port it uses on A and on Z (the same number on both)."""

    name: str
    wire: str
    port: int
    delay_ms: float  # configured one way; results record the measured one


PATHS = (PathDef("path1", "w1", 2, 2.0), PathDef("path2", "w2", 3, 6.0))
H1, H2, H3 = "10.0.0.1", "10.0.0.2", "10.0.0.3"


# ---------------------------------------------------------------------- topology (plain data)
def path_change_spec() -> LabSpec:
    """Switches A, Z and hosts h1, h3 (on A) and h2 (on Z); the wires are added as wire nodes."""
    switches = (SwitchSpec("A", 0x5C01), SwitchSpec("Z", 0x5C02))
    hosts = (HostSpec("h1", "A", 1, H1, "00:00:00:00:5c:01"), HostSpec("h2", "Z", 1, H2, "00:00:00:00:5c:02"),
             HostSpec("h3", "A", 4, H3, "00:00:00:00:5c:03"))
    links = tuple(LinkSpec(h.name, 0, h.switch, h.port, "access", 100.0) for h in hosts)
    return LabSpec("path-change", switches, (), hosts, links)


def wire_links(paths: Sequence[PathDef] = PATHS) -> set[tuple[str, int, str, int]]:
    """The directed packet links LLDP must see across the wires."""
    out = set()
    for p in paths:
        out |= {("A", p.port, "Z", p.port), ("Z", p.port, "A", p.port)}
    return out


# ---------------------------------------------------------------------- the controller's moves
def steer_rules(port: int) -> tuple[Any, Any]:
    """(rule at A: to h2 out ``port``, rule at Z: to h1 out ``port``): the probed flow both ways."""
    from app.update.model import FlowRule
    from topology import rule_plan

    band = rule_plan.STEER
    to_h2 = FlowRule("A", band.name, 1, band.priority(), (("eth_type", 0x0800), ("ipv4_dst", H2)), port)
    to_h1 = FlowRule("Z", band.name, 1, band.priority(), (("eth_type", 0x0800), ("ipv4_dst", H1)), port)
    return to_h2, to_h1


def move_plan(old_port: int | None, new_port: int, verify: bool = True) -> Any:
    """The update plan that moves the flow from ``old_port`` (None: not steered yet) to ``new_port``:
    both ingress rules overwritten (same match and priority), then their counters must rise."""
    from app.update import planner
    from app.update.model import IngressChange

    new = steer_rules(new_port)
    old = steer_rules(old_port) if old_port is not None else (None, None)
    changes = [IngressChange(n, o) for n, o in zip(new, old, strict=True)]
    return planner.move([], [], [], [], [], [], changes, verify=verify, drain=False, verify_timeout_s=3.0)


def swap_time(record: dict[str, Any], fallback: float) -> float:
    """When the move took effect: the last ingress rule's barrier (``fallback`` if the record has none)."""
    done = [s["finished_at"] for s in record.get("steps", []) if s.get("kind") == "flow_add" and s.get("finished_at")]
    return max(done) if done else fallback


# ---------------------------------------------------------------------- schedule (seeded)
def schedule(seed: int, seconds: float, n_paths: int = len(PATHS), dwell: tuple[float, float] = (8.0, 30.0),
             episode: tuple[float, float] = (4.0, 10.0), gap: tuple[float, float] = (10.0, 30.0),
             warmup: float = 8.0) -> dict[str, Any]:
    """Move times (s after probing starts, each to a different path than the current one) and
    congestion episodes; the same seed gives the same schedule."""
    if seconds <= warmup or n_paths < 2 or not 0 < dwell[0] <= dwell[1] or not 0 < episode[0] <= episode[1]:
        raise ValueError("need seconds > warmup, >= 2 paths, 0 < dwell min <= max and 0 < episode min <= max")
    rng = random.Random(seed)
    start = rng.randrange(n_paths)
    moves, cur, t = [], start, warmup + rng.uniform(0.0, dwell[0])
    while t < seconds - TOLERANCE_S:
        cur = rng.choice([p for p in range(n_paths) if p != cur])
        moves.append({"t": round(t, 3), "path": cur})
        t += rng.uniform(*dwell)
    congestion, t = [], warmup / 2 + rng.uniform(*gap) / 2
    while t + episode[0] < seconds:
        end = min(t + rng.uniform(*episode), seconds)
        congestion.append({"start": round(t, 3), "end": round(end, 3)})
        t = end + rng.uniform(*gap)
    return {"seed": seed, "seconds": seconds, "start_path": start, "moves": moves, "congestion": congestion}


# ---------------------------------------------------------------------- probes and analysis
PING_LINE = re.compile(r"^\[(\d+\.\d+)\] .*icmp_seq=(\d+) .*time=([\d.]+) ms")


def parse_ping(text: str) -> list[tuple[float, float]]:
    """``ping -D`` output -> (send time, RTT ms) per answered probe (send = receive stamp - RTT)."""
    out = []
    for line in text.splitlines():
        m = PING_LINE.match(line.strip())
        if m:
            rtt = float(m.group(3))
            out.append((float(m.group(1)) - rtt / 1000.0, rtt))
    return sorted(out)


def score(detected: Sequence[float], truth: Sequence[float], tolerance_s: float = TOLERANCE_S) -> dict[str, Any]:
    """Precision and recall of detection times against true move times (monitor.latency's matching:
    each move takes the first unused detection within ``tolerance_s`` after it)."""
    precision, recall = precision_recall(list(detected), list(truth), tolerance_s)
    return {"precision": round(precision, 4), "recall": round(recall, 4), "detections": [round(t, 3) for t in detected],
            "n_detections": len(detected), "true_positives": round(recall * len(truth))}


def analyse(series: Sequence[tuple[float, float]], truth: Sequence[float], probe_interval: float = PROBE_INTERVAL_S,
            tolerance_s: float = TOLERANCE_S) -> dict[str, Any]:
    """Run the detector and both baselines on ``(t, rtt_ms)`` (t relative to the probing start) and
    score each against the true move times."""
    series = sorted(series)
    runs = {"detector": PathChangeDetector(),
            "baseline": RollingMinBaseline(k=BASELINE_K, bucket=probe_interval),
            "baseline_1s_minima": RollingMinBaseline(k=BASELINE_K)}
    out = {}
    for name, det in runs.items():
        changes = run_detector(det, series)
        out[name] = {**score([c.t for c in changes], truth, tolerance_s),
                     "changes": [{"t": round(c.t, 3), "old_ms": None if c.old_ms is None else round(c.old_ms, 3),
                                  "new_ms": round(c.new_ms, 3)} for c in changes]}
    return out


def path_rtts(series: Sequence[tuple[float, float]], moves: Sequence[dict[str, Any]], start_path: int,
              n_paths: int = len(PATHS), settle_s: float = 1.0) -> list[float | None]:
    """Median probe RTT on each path during the run (probes within ``settle_s`` after a move left out)."""
    per: list[list[float]] = [[] for _ in range(n_paths)]
    marks = sorted((m["t"], m["path"]) for m in moves)
    for t, rtt in series:
        cur, last = start_path, -1e9
        for mt, p in marks:
            if mt <= t:
                cur, last = p, mt
        if t - last >= settle_s:
            per[cur].append(rtt)
    return [round(statistics.median(v), 4) if v else None for v in per]


# ---------------------------------------------------------------------- plot
def plot(res: dict[str, Any], series: Sequence[tuple[float, float]], path: Path) -> Path:
    """The RTT series (probes and 1-s minima), congestion shaded, true moves as lines, detections marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 4.2))
    if series:
        ax.scatter([t for t, _ in series], [r for _, r in series], s=3, color="0.6", label="probe RTT (200 ms)")
        mins: dict[int, float] = {}
        for t, r in series:
            mins[int(t)] = min(r, mins.get(int(t), r))
        ks = sorted(mins)
        ax.step([k + 1 for k in ks], [mins[k] for k in ks], where="pre", color="k", lw=0.9, label="1-s minimum")
    for i, c in enumerate(res.get("congestion", [])):
        ax.axvspan(c["start"], c["end"], color="tab:orange", alpha=0.15, label="congestion" if i == 0 else None)
    for i, m in enumerate(res.get("moves", [])):
        ax.axvline(m["t"], color="tab:green", lw=1.2, label="true move" if i == 0 else None)
    top = max((r for _, r in series), default=10.0)
    for name, y, marker, colour in (("detector", 1.04, "v", "tab:red"), ("baseline", 0.98, "x", "tab:blue")):
        det = res.get(name, {})
        ts = det.get("detections", [])
        ax.scatter(ts, [top * y] * len(ts), marker=marker, color=colour, s=40, zorder=5,
                   label=f"{name}: P {det.get('precision', 0):.2f}, R {det.get('recall', 0):.2f}")
    ax.set_xlabel("s since probing started")
    ax.set_ylabel("RTT h1 → h2 (ms)")
    ax.set_yscale("log")
    ax.set_title(f"path-change (seed {res.get('seed')}): {len(res.get('moves', []))} moves, "
                 f"tolerance {res.get('tolerance_s', TOLERANCE_S):g} s", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- Mininet parts
def _post_plan(session: Any, plan: Any) -> dict[str, Any]:
    from app.controller.client import ControlApiError

    try:
        return session.client.request("POST", "/plan", {"plan": plan.to_json()}, timeout=60)
    except ControlApiError as exc:  # 422: failed and rolled back; the body is the record
        return exc.body if isinstance(exc.body, dict) else {"state": "error", "error": str(exc)}


def _move(session: Any, old: int | None, new: int, verify: bool = True) -> tuple[float, dict[str, Any]]:
    t_req = time.time()
    rec = _post_plan(session, move_plan(old, new, verify=verify))
    if rec.get("state") != "done":
        raise RuntimeError(f"move to port {new} failed: {rec.get('state')}: {rec.get('error')}")
    return swap_time(rec, t_req), rec


def _drive(session: Any, h3: Any, sch: dict[str, Any], t0: float, cur: int, script: str,
           procs: list[subprocess.Popen], note: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Play the schedule: start each congestion episode's cross traffic and make each move on time;
    returns the moves as made (``t``: when the ingress swap finished, s after ``t0``) and the moves
    that failed (rolled back, so the flow stayed where it was: not a path change), with the
    controller's links at that moment."""
    events = sorted([(m["t"], "move", m) for m in sch["moves"]] +
                    [(c["start"], "cong", c) for c in sch["congestion"]], key=lambda e: e[0])
    moves: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for at, kind, ev in events:
        time.sleep(max(0.0, t0 + at - time.time()))
        if kind == "cong":
            procs.append(h3.popen([sys.executable, script, "send", H2, str(CROSS_PORT), f"{ev['end'] - ev['start']:.3f}",
                                   "4", "--seed", str(sch["seed"])], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
            continue
        new_port = PATHS[ev["path"]].port
        if new_port == cur:  # an earlier move failed and the flow is already there: no change to make
            note(f"move to {PATHS[ev['path']].name} at t={time.time() - t0:.2f} s skipped: the flow is already there")
            continue
        try:
            t_swap, rec = _move(session, cur, new_port)
        except RuntimeError as exc:
            failed.append({"planned_t": ev["t"], "t": round(time.time() - t0, 3), "path": ev["path"], "error": str(exc),
                           "links": sorted(f"{x['src']['node']}:{x['src']['port']}-{x['dst']['node']}:{x['dst']['port']}"
                                           for x in session.client.links())})
            note(f"move to {PATHS[ev['path']].name} at t={time.time() - t0:.2f} s FAILED (rolled back): {exc}")
            continue
        cur = new_port
        moves.append({"planned_t": ev["t"], "t": round(t_swap - t0, 3), "path": ev["path"],
                      "plan_ms": round(1000 * ((rec.get("finished_at") or t_swap) - (rec.get("started_at") or t_swap)), 1)})
        note(f"move {len(moves)} to {PATHS[ev['path']].name} at t={t_swap - t0:.2f} s")
    return moves, failed


def run(out: Path, *, quick: bool = False, seed: int = 1, progress: Callable[[str], None] = print,
        seconds: float | None = None) -> dict[str, Any]:
    """One seeded schedule on one network: 80 s of probing ``quick``, 420 s by default."""
    from mininet_labs.delay import Netns, measure_rtt, path_record
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import finish

    seconds = float(seconds or (80.0 if quick else 420.0))
    sch = schedule(seed, seconds)  # bad values fail here, before any network
    out = Path(out).resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    script = str(Path(__file__).resolve().parent / "tcp_workload.py")
    clock = LabClock(progress)
    note = clock.note

    spec = path_change_spec()
    res: dict[str, Any] = {"lab": "path-change", "quick": quick, "seed": seed, "seconds": seconds,
                           "probe_interval_s": PROBE_INTERVAL_S, "tolerance_s": TOLERANCE_S, "baseline_k": BASELINE_K,
                           "wire_rate_mbps": WIRE_RATE_MBPS, "wire_limit_frames": WIRE_LIMIT,
                           "schedule": sch, "paper": PAPER_NOTE}
    with clock.locked(), LabSession(spec, work) as session:
        lab = session.lab
        assert lab is not None
        wires = [add_wire(lab, p.wire, "A", p.port, "Z", p.port, delay_ms=p.delay_ms, rate_mbps=WIRE_RATE_MBPS,
                          limit=WIRE_LIMIT, seed=seed + i) for i, p in enumerate(PATHS)]
        session.wait_links(wire_links(), timeout=30)
        h1, h2, h3 = lab.node("h1"), lab.node("h2"), lab.node("h3")
        for h, ip in ((h1, H2), (h2, H1), (h3, H2)):
            h.cmd(f"ping -c2 -W1 {ip} >/dev/null 2>&1")
        note(f"sites A and Z up, {len(PATHS)} wires seen by LLDP "
             f"({', '.join(f'{p.name}: A:{p.port}-Z:{p.port} +{p.delay_ms:g} ms' for p in PATHS)})")
        src = Netns(pid=h1.pid)
        res["paths"] = []
        cur: int | None = None
        for i, (p, w) in enumerate(zip(PATHS, wires, strict=True)):
            _, _ = _move(session, cur, p.port, verify=False)
            cur = p.port
            time.sleep(0.3)
            rec = path_record(w.describe(), measure_rtt(src, H2, count=50))
            res["paths"].append({"name": p.name, "port": p.port, "configured_one_way_ms": p.delay_ms,
                                 "measured_rtt_ms": (rec["measured_rtt"]["rtt_ms"] or {}).get("p50"),
                                 "measured_one_way_ms": rec["measured_one_way_ms"], "element": rec})
            note(f"{p.name}: RTT h1 -> h2 {res['paths'][i]['measured_rtt_ms']} ms (p50 of 50 pings)")
        start_port = PATHS[sch["start_path"]].port
        if cur != start_port:
            _move(session, cur, start_port, verify=False)
            cur = start_port
        # the cross traffic's receiver, then the probes; probing time 0 = when ping starts
        procs: list[subprocess.Popen] = []
        try:
            procs.append(h2.popen([sys.executable, script, "recv", str(CROSS_PORT), str(seconds + 10),
                                   str(work / "cross-recv.json")], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
            time.sleep(0.3)
            n_probes = int(seconds / PROBE_INTERVAL_S)
            # into a file, not a pipe: nobody reads a pipe while the schedule plays, and a full one
            # (64 KB, ~175 s of ping -D lines) stops ping until the end (no probes, no move verified)
            probe_log = work / "probe-ping.txt"
            with open(probe_log, "w") as log:
                ping = h1.popen(["ping", "-D", "-n", "-i", f"{PROBE_INTERVAL_S:g}", "-W", "1", "-c", str(n_probes), H2],
                                stdout=log, stderr=subprocess.STDOUT)
            t0 = time.time()
            note(f"probing {seconds:g} s: {len(sch['moves'])} moves, {len(sch['congestion'])} congestion episodes "
                 f"(seed {seed})")
            moves, failed = _drive(session, h3, sch, t0, cur, script, procs, note)
            finish([ping], seconds + 15)
            ping_out = probe_log.read_text()
        finally:
            finish(procs, 2.0)  # senders are done by now; the receiver is stopped by PID
        res["controller_errors"] = session.controller_errors()
        for w in wires:
            w.stop_wire()
    series = [(t - t0, rtt) for t, rtt in parse_ping(ping_out)]
    truth = [m["t"] for m in moves]
    res["moves"] = moves
    res["failed_moves"] = failed
    res["congestion"] = sch["congestion"]
    res["probes"] = {"sent": n_probes, "answered": len(series)}
    res.update(analyse(series, truth))
    res["paths_during_run_rtt_ms"] = path_rtts(series, moves, sch["start_path"])
    plot(res, series, out / "path_change.png")
    res["lab_seconds"] = clock.durations()
    (out / "series.json").write_text(json.dumps([[round(t, 4), r] for t, r in series]))
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    for name in ("detector", "baseline", "baseline_1s_minima"):
        r = res[name]
        note(f"{name}: precision {r['precision']:.2f}, recall {r['recall']:.2f} "
             f"({r['n_detections']} detections, {len(truth)} moves)")
    progress(f"wrote {out / 'results.json'} and {out / 'path_change.png'}")
    return res


# ---------------------------------------------------------------------- wire nodes (need Mininet)
try:  # only where Mininet is importable (Debian's python3, or the venv that sees it)
    from mininet.node import Host
    from mininet.topo import Topo

    class WireNode(Host):
        """A node that is only a wire: its two interfaces joined by a delay element in its namespace.

        ``delay_ms``/``jitter_ms``/``loss``/``rate_mbps``/``limit``/``seed`` configure the element
        (:class:`mininet_labs.delay.DelayLink`); it starts once both links exist (``config``, or
        :meth:`start_wire` for a wire added to a running network) and stops with the node.
        """

        def __init__(self, name: str, delay_ms: float = 0.0, jitter_ms: float = 0.0, loss: float = 0.0,
                     rate_mbps: float | None = None, limit: int = 10000, seed: int = 1, **params: Any) -> None:
            params["ip"] = None  # no address: it forwards frames, it is not a host
            super().__init__(name, **params)
            # no IPv6 chatter from the wire's own interfaces (the controller would learn a host there)
            self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
            self.wire_cfg = {"delay_ms": float(delay_ms), "jitter_ms": float(jitter_ms), "loss": float(loss),
                             "rate_mbps": None if rate_mbps in (None, "", "None") else float(rate_mbps),
                             "limit": int(limit), "seed": int(seed)}
            self.wire: Any = None

        def config(self, **params: Any) -> Any:
            result = super().config(**params)
            if len(self._wire_ifs()) == 2:
                self.start_wire()
            return result

        def _wire_ifs(self) -> list[str]:
            return [i.name for i in self.intfList() if i.name != "lo"]

        def start_wire(self, **cfg: Any) -> Any:
            """(Re)start the element with the current settings updated by ``cfg``; returns it."""
            from mininet_labs.delay import DelayLink, Netns

            self.stop_wire()
            self.wire_cfg.update(cfg)
            ifs = self._wire_ifs()
            if len(ifs) != 2:
                raise RuntimeError(f"wire {self.name} needs exactly 2 interfaces, has {ifs}")
            self.wire = DelayLink(ifs[0], ifs[1], netns=Netns(pid=self.pid), **self.wire_cfg).start()
            return self.wire

        def stop_wire(self) -> dict[str, Any]:
            """Stop the element (by PID); returns its final counters."""
            wire, self.wire = self.wire, None
            return wire.stop() if wire is not None else {}

        def describe(self) -> dict[str, Any]:
            """The element's backend and configured values (for :func:`mininet_labs.delay.path_record`)."""
            return {**(self.wire.describe() if self.wire is not None else {"configured": self.wire_cfg}),
                    "wire": self.name}

        def terminate(self) -> None:
            try:
                self.stop_wire()
            finally:
                super().terminate()

    def add_wire(lab: Any, name: str, a: str, a_port: int, b: str, b_port: int, **cfg: Any) -> WireNode:
        """Join ``a:a_port`` and ``b:b_port`` of a running lab (:class:`~mininet_labs.testbed.LabNet`)
        through a new wire node; the OVS ports get exactly those numbers."""
        net = lab.net
        node = net.addHost(lab.prefix + name, cls=WireNode, **cfg)
        for idx, (sw_name, port) in enumerate(((a, a_port), (b, b_port))):
            sw = lab.node(sw_name)
            link = net.addLink(node, sw, port1=idx, port2=port)
            intf = link.intf2.name
            subprocess.run(["ovs-vsctl", "--timeout=10", "add-port", sw.name, intf, "--", "set", "Interface", intf,
                            f"ofport_request={port}"], check=True, capture_output=True)
            subprocess.run(["ip", "link", "set", "dev", intf, "up"], check=True, capture_output=True)
        node.start_wire()
        return node

    def add_spec_nodes(topo: Topo, spec: LabSpec) -> None:
        """A lab spec's switches, hosts and access links into a ``mn`` topology (wires come next)."""
        from mininet_labs.testbed import OffloadOffHost, PacketSwitch

        for s in spec.switches:
            topo.addSwitch(s.name, cls=PacketSwitch, dpid=f"{s.dpid:016x}")
        for h in spec.hosts:
            topo.addHost(h.name, cls=OffloadOffHost, ip=f"{h.ip}/8", mac=h.mac)
        for link in spec.links:
            topo.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port)

    class PathChangeTopo(Topo):
        """``--topo path-change``: sites A and Z, hosts h1, h3 (A) and h2 (Z), the two delayed wires."""

        def build(self, **_kwargs: Any) -> None:  # type: ignore[override]
            add_spec_nodes(self, path_change_spec())
            for p in PATHS:
                self.addHost(p.wire, cls=WireNode, delay_ms=p.delay_ms, rate_mbps=WIRE_RATE_MBPS, limit=WIRE_LIMIT)
                self.addLink(p.wire, "A", port1=0, port2=p.port)
                self.addLink(p.wire, "Z", port1=1, port2=p.port)

    topos = {"path-change": PathChangeTopo}
except ImportError:  # pragma: no cover - no Mininet: the plain parts still import
    topos = {}
