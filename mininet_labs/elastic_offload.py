"""Lab ``elastic-offload``: an elephant among small transfers is moved onto an elastic circuit (paper Fig. 10).

Fig. 2 testbed, circuit ``initial`` lit (A-X-Y-B-Y-Z-C), A:3's egress behind the bounded 10 Mbit/s
queue that counts drops (:mod:`mininet_labs.monitor_lab`); the controller runs the monitor (Ts = 1 s,
``flowstats`` fine backend) and the TE loop (``[te] enabled = true``). Workload
(:mod:`mininet_labs.traffic`): 16 concurrent small UDP transfers h2 → h4 (0.1 Mbit/s each, sizes
drawn from the seed; a finished one is replaced on a new port) for the whole run, and — after a
warm-up — an elephant h1 → h3: a window-based bulk transfer whose bursts overflow the static
circuit's small buffer, so it backs off and gets a fraction of the circuit (the paper's big flow
starved by contention). The TE loop names it (unconstrained imbalance), lights a temporary circuit
(A:4–C:2 by the joint circuit-lighting model), steers only its 5-tuple there, verifies, and
releases everything once the elephant has ended.

Measured per run (times from the journal and ``GET /plans``, throughput from A's port counters
and the receivers): detection, decision, offload and verification times, the plan's break-down,
the elephant's and the small flows' throughput before and after the offload; a baseline with the
loop off (the same seed) for the small flows' comparison. ``--demo`` adds the web service (a
login is printed) and prints every event of the loop as it happens. Results: ``results.json`` and
``elastic_offload.png`` (Fig. 10 style: static and elastic path over time, detection and offload marked).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.controller.client import wait_until
from mininet_labs import lab_registry
from mininet_labs.traffic import SCRIPT

ROOT = Path(__file__).resolve().parents[1]
ELEPHANT_PORT, SMALL_PORT, ELEPHANT_SPORT = 5201, 5202, 45000
STATIC_CIRCUIT = "packet:A:3-B:1"
# the first early window 0.3 s after the hot spot: the counting rules went in then; the drop watch
# reads the circuit ends' queue drops every 0.25 s between polls (docs/te-loop.md "Timing")
MONITOR = 'interval = 1.0\nfine_backend = "flowstats"\nfine_first_window = 0.3\ndrop_watch_interval = 0.25\n'
# min_gain_s: the move must win back at least about one more switch-over (0.185 s setup + 0.1 s
# overhead); the default 1 s waits one or two more counts at Ts = 1 s (docs/te-loop.md)
TE = ("[te]\nenabled = {enabled}\nmin_gain_s = {gain:g}\nmin_hold_s = 5.0\npoll = 1.0\ngone_intervals = 3\n"
      "young_horizon_s = {young:g}\n")
MIN_GAIN_S = 0.3
BIN_S = 0.25
TS_S = 1.0
LAB_FLOWS, PACKET_SWITCHES = 17, 3  # the per-flow polling baseline of the monitor's cost (_monitor_cost)


class Phases:
    """Seconds of one run: warm-up (small transfers alone), the elephant, a tail."""

    def __init__(self, quick: bool) -> None:
        self.warmup, self.elephant, self.tail = (4.0, 10.0, 2.0) if quick else (6.0, 16.0, 3.0)

    @property
    def total(self) -> float:
        return self.warmup + self.elephant + self.tail


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print, runs: int = 1,
        seed: int = 1, te: bool = True, demo: bool = False, counter_refresh_ms: int | None = None,
        min_gain_s: float = MIN_GAIN_S, young_horizon_s: float = 0.0) -> dict[str, Any]:
    """Run the lab; write ``out/results.json`` and ``out/elastic_offload.png``; return the results.

    ``counter_refresh_ms``: OVS's ``other_config:max-revalidator`` while the lab runs (userspace OVS
    refreshes OpenFlow rule counters from its datapath flows only this often, 500 ms by default: the
    verification and the counting rules' first bytes wait for it); None = OVS's own setting.
    ``min_gain_s``: the TE loop's ``[te] min_gain_s`` (how much sooner a move must finish the elephant);
    ``young_horizon_s``: its ``[te] young_horizon_s`` (a young elephant the gain turns down on its bytes is
    judged as sending this many seconds more; 0 = off, app/te/young.py)."""
    if runs < 1:
        raise ValueError(f"--runs must be >= 1, got {runs}")
    if counter_refresh_ms is not None and counter_refresh_ms < 10:
        raise ValueError(f"--counter-refresh-ms must be >= 10, got {counter_refresh_ms}")
    if not 0 <= min_gain_s < 60:
        raise ValueError(f"--min-gain-s must be in [0, 60), got {min_gain_s}")
    if not 0 <= young_horizon_s < 600:
        raise ValueError(f"--young-horizon-s must be in [0, 600), got {young_horizon_s}")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock = _Clock(progress)
    phases = Phases(quick or demo)
    res: dict[str, Any] = {"lab": "elastic-offload", "quick": quick, "demo": demo, "seed": seed, "te": te,
                           "ts_s": 1.0, "small_flows": 16, "phases_s": vars(phases),
                           "counter_refresh_ms": counter_refresh_ms, "min_gain_s": min_gain_s,
                           "young_horizon_s": young_horizon_s}
    live = _Live(clock, verbose=demo)
    if te:
        with _session(out / "work", enabled=True, demo=demo, clock=clock, refresh=counter_refresh_ms,
                      gain=min_gain_s, young=young_horizon_s) as (lab, web):
            if web:
                res["web"] = web
            runs_out = []
            for i in range(runs):
                clock.note(f"run {i + 1}/{runs}: 16 small transfers h2 -> h4, elephant h1 -> h3 after "
                           f"{phases.warmup:.0f} s (seed {seed + i})")
                runs_out.append(_one_run(lab, out / "work", phases, seed + i, clock, live, te=True))
                if i + 1 < runs:
                    _settle(lab, clock)
            res["controller_errors"] = lab.controller_errors()
        res["runs"] = runs_out
        res.update({k: v for k, v in runs_out[0].items() if k not in ("series",)})
        res["series"] = runs_out[0]["series"]
        if runs > 1:
            res["median"] = _medians(runs_out)
    if not demo:  # the same workload and seed with the loop off: what the small flows get without it
        with _session(out / "baseline", enabled=False, demo=False, clock=clock,
                      refresh=counter_refresh_ms) as (lab, _web):
            clock.note(f"baseline: the same workload (seed {seed}) with the TE loop off")
            split = res.get("verified_s") if te else None
            base = _one_run(lab, out / "baseline", phases, seed, clock, live, te=False, split_s=split)
        res["baseline"] = {k: v for k, v in base.items() if k != "series"}
        if not te:
            res.update(res["baseline"])
            res["series"] = base["series"]
        res["baseline_series"] = base["series"]
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "elastic_offload.png")
    clock.note(_summary(res))
    progress(f"wrote {out / 'results.json'} and {out / 'elastic_offload.png'}")
    return res


class _Clock:
    """Times since the lab started, on every progress line."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.t0, self.progress = time.time(), progress
        self.lock = threading.Lock()

    def note(self, text: str, at: float | None = None) -> None:
        with self.lock:
            self.progress(f"[{(at or time.time()) - self.t0:6.1f}s] {text}")


@contextlib.contextmanager
def _counter_refresh(ms: int | None) -> Iterator[None]:
    """OVS's ``max-revalidator`` set to ``ms`` while the lab holds the network lock, then restored."""
    if ms is None:
        yield
        return
    get = subprocess.run(["ovs-vsctl", "--if-exists", "get", "Open_vSwitch", ".", "other_config:max-revalidator"],
                         capture_output=True, text=True, check=False)
    before = get.stdout.strip().strip('"')
    subprocess.run(["ovs-vsctl", "set", "Open_vSwitch", ".", f"other_config:max-revalidator={ms}"], check=True)
    try:
        yield
    finally:
        restore = (["set", "Open_vSwitch", ".", f"other_config:max-revalidator={before}"] if before else
                   ["remove", "Open_vSwitch", ".", "other_config", "max-revalidator"])
        subprocess.run(["ovs-vsctl", *restore], check=False)


@contextlib.contextmanager
def _session(work: Path, *, enabled: bool, demo: bool, clock: _Clock,
             refresh: int | None = None, gain: float = MIN_GAIN_S,
             young: float = 0.0) -> Iterator[tuple[Any, dict | None]]:
    """The Fig. 2 monitor lab with the TE loop on or off (and, for the demo, the web service)."""
    from mininet_labs.monitor_lab import fig2_monitor_lab

    db = work / "mlte.db"
    work.mkdir(parents=True, exist_ok=True)
    for p in work.glob("mlte.db*"):
        p.unlink()
    args = ("--db-url", f"sqlite:///{db}") if demo else ()
    password = _create_user(db) if demo else ""  # before the controller: one writer creates the schema
    clock.note(f"starting the controller (monitor Ts = 1 s, TE loop {'on' if enabled else 'off'}) and the Fig. 2 "
               "testbed")
    held: dict = {}
    try:
        # the controller takes rates between counter refresh steps: tell it the refresh period set here
        monitor = MONITOR + (f"flowstats_refresh = {refresh / 1000:g}\n" if refresh else "")
        with fig2_monitor_lab(work, monitor + TE.format(enabled=str(enabled).lower(), gain=gain, young=young), check_errors=False,
                              controller_args=args) as lab, _counter_refresh(refresh):
            try:
                clock.note(f"testbed up: circuit 'initial' lit (A-X-Y-B-Y-Z-C), A:3 behind a bounded 10 Mbit/s "
                           f"queue; controller API http://127.0.0.1:{lab.api_port}")
                if not demo:
                    yield lab, None
                else:
                    with _web(db, work, clock, password) as web:
                        yield lab, web
            finally:
                held = _hold_signals()  # a second Ctrl-C / SIGTERM must not stop the clean-up half-way
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def _hold_signals() -> dict:
    """Ignore SIGINT/SIGTERM/SIGHUP (main thread only); returns the handlers to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


@contextlib.contextmanager
def _web(db: Path, work: Path, clock: _Clock, password: str) -> Iterator[dict]:
    """``mlte web`` on the controller's database (user ``demo`` exists); stopped by PID."""
    from mininet_labs.session import free_port

    cli = [sys.executable, "-m", "app.cli.main", "web"]
    port = 8080 if _port_free(8080) else free_port()
    log = open(work / "web.log", "w")
    proc = subprocess.Popen([*cli, "--db", str(db), "--host", "127.0.0.1", "--port", str(port), "--topology",
                             "controller"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lab_registry.track(proc.pid)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until(lambda: _http_ok(url + "login"), 30, "the web service")
        clock.note(f"web UI {url} — log in as demo / {password} (topology page: {url}topology)")
        yield {"url": url, "user": "demo", "password": password}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _create_user(db: Path) -> str:
    """User ``demo`` (admin) with a fresh password in the demo's database; returns the password."""
    password = "demo-" + secrets.token_hex(4)
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "web", "user", "create", "demo", "--admin",
                           "--password-stdin", "--db", str(db)], input=password + "\n", cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"could not create the demo's web user: {last}")
    return password


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _http_ok(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=3).status_code < 500
    except requests.RequestException:
        return False


class _Live:
    """Follows the controller's journal while a run goes: what the loop does, as it happens."""

    KINDS = ("monitor", "te_decision", "plan", "te_done")

    def __init__(self, clock: _Clock, verbose: bool) -> None:
        self.clock, self.verbose = clock, verbose

    def follow(self, lab: Any, since: int, stop: threading.Event, t_start: float) -> None:
        while True:
            last = stop.is_set()  # one more look after the stop: the release's own lines
            try:
                events = lab.client.events(since)
            except Exception:  # noqa: BLE001 - the API is busy: look again
                events = []
            for e in events:
                since = max(since, e["seq"])
                line = self._line(e, t_start)
                if line:
                    self.clock.note(line, at=e["t"])
            if last:
                return
            stop.wait(0.2)

    def _line(self, e: dict, t_start: float) -> str | None:
        rel = f"(elephant +{e['t'] - t_start:.2f}s) " if e["t"] >= t_start else ""
        kind = e["type"]
        if kind == "monitor" and e.get("event") in ("hot_spot", "unconstrained_imbalance", "hot_spot_cleared",
                                                    "elephant_gone", "balanced_growth"):
            d = e.get("detail", {})
            what = {"unconstrained_imbalance": "DETECTED unconstrained imbalance"}.get(e["event"], e["event"])
            flows = ", ".join(f"{f['src']}:{f['sport']}->{f['dst']}:{f['dport']}" for f in e.get("flows", []))
            return (f"{rel}monitor: {what} on {e['circuit']} (util {d.get('util', 0):.2f}, drops "
                    f"{d.get('drops', 0)}){' elephant ' + flows if flows else ''}"
                    f"{' at ' + str(d.get('elephant_mbps')) + ' Mbit/s' if d.get('elephant_mbps') else ''}")
        if kind == "te_decision":
            gain = next(iter((e.get("gain") or {}).values()), None)
            why = f" — gain: {gain['reason']}" if isinstance(gain, dict) and "reason" in gain else ""
            return f"{rel}TE decision {e['decision'].upper()}: {e['reason']}{why}"
        if kind == "plan" and self.verbose and e.get("event") in ("plan_started", "step_done", "step_failed",
                                                                  "plan_done"):
            step = f" {e.get('step')} ({e.get('kind')})" if e.get("step") else ""
            if e["event"] == "plan_done":
                return f"{rel}plan {e.get('plan')}: finished, {e.get('state', '?').replace('_', ' ')}"
            return f"{rel}plan {e.get('plan')}: {e['event'].replace('_', ' ')}{step}"
        if kind == "te_done":
            what = {"offload": "OFFLOADED and verified", "release": "RELEASED"}.get(e["decision"], e["decision"])
            return f"{rel}{what}: plan {e['plan']} {e['state']} in {e['seconds']:.2f} s"
        return None


class _PortRates:
    """A's egress toward the static (A:3) and the elastic (A:4) circuit: Mbit/s every 0.25 s."""

    def __init__(self, bridge: str) -> None:
        self.bridge, self.samples = bridge, []

    def _read(self) -> dict[int, int]:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", self.bridge], capture_output=True,
                             text=True, timeout=5).stdout
        got, port = {}, None
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("port"):
                head = line.split(":")[0].split()[-1]
                port = int(head) if head.isdigit() else None
            elif port is not None and line.startswith("tx pkts"):
                got[port] = int(line.split("bytes=")[1].split(",")[0])
        return got

    def loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):
                self.samples.append((time.time(), self._read()))
            stop.wait(BIN_S)

    def series(self, t0: float) -> dict[str, list[list[float]]]:
        out: dict[str, list[list[float]]] = {"static": [], "elastic": []}
        for (ta, a), (tb, b) in zip(self.samples, self.samples[1:], strict=False):
            for name, port in (("static", 3), ("elastic", 4)):
                if port in a and port in b and tb > ta:
                    out[name].append([round(tb - t0, 3), round((b[port] - a[port]) * 8 / 1e6 / (tb - ta), 3)])
        return out


def _one_run(lab: Any, work: Path, ph: Phases, seed: int, clock: _Clock, live: _Live, *, te: bool,
             split_s: float | None = None) -> dict[str, Any]:
    """One workload run; returns its measurements (times relative to the run's start)."""
    h1, h2, h3, h4 = (lab.lab.node(h) for h in ("h1", "h2", "h3", "h4"))
    since = lab.client.events()[-1]["seq"]
    t0 = time.time() + 1.0
    t_el = t0 + ph.warmup
    tag = f"s{seed}{'' if te else '-off'}"
    files = {k: work / f"{k}-{tag}.json" for k in ("recv-el", "recv-small", "small", "elephant")}
    procs: list[Any] = []
    stop = threading.Event()
    rates = _PortRates(lab.lab.bridge("A"))
    threads = [threading.Thread(target=rates.loop, args=(stop,), daemon=True),
               threading.Thread(target=live.follow, args=(lab, since, stop, t_el), daemon=True)]
    try:
        for p, args in ((h3, ["recv", str(ELEPHANT_PORT), "--out", str(files["recv-el"])]),
                        (h4, ["recv", str(SMALL_PORT), "--out", str(files["recv-small"])])):
            procs.append(p.popen([sys.executable, SCRIPT, *args, "--duration", str(ph.total + 1.5), "--t0", str(t0),
                                  "--bin", str(BIN_S)], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for th in threads:
            th.start()
        time.sleep(max(0.0, t0 - time.time()))
        cost0 = (time.monotonic(), lab.client.request("GET", "/monitor/cost"))
        procs.append(h2.popen([sys.executable, SCRIPT, "small", "10.0.0.4", str(SMALL_PORT), "--duration",
                               str(ph.total), "--seed", str(seed), "--report", str(files["small"])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        procs.append(h1.popen([sys.executable, SCRIPT, "elephant", "10.0.0.3", str(ELEPHANT_PORT), "--duration",
                               str(ph.elephant), "--start", str(t_el), "--sport", str(ELEPHANT_SPORT),
                               "--report", str(files["elephant"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(max(0.0, t_el - time.time()))
        clock.note("elephant started (h1:45000 -> h3:5201)")
        next_line = time.time() + 2.0
        while any(p.poll() is None for p in procs):
            if time.time() >= next_line:
                clock.note(_progress_line(rates, t0, t_el, ph))
                next_line += 2.0
            time.sleep(0.1)
        cost = _monitor_cost(cost0, (time.monotonic(), lab.client.request("GET", "/monitor/cost")))
        for p in procs:
            _out, err = p.communicate(timeout=10)
            if p.returncode:
                raise RuntimeError(f"traffic generator failed: {err.decode(errors='replace')[-300:]}")
        released = None
        if te:
            released = _wait_release(lab, since)
        stop.set()
    finally:
        stop.set()
        for p in procs:  # by PID: whatever is still running of this run
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        for th in threads:
            th.join(timeout=5)
    out = _measure(lab, since, files, rates, t0, t_el, ph, te, released, split_s)
    out["monitor_cost"] = cost
    return out


def _monitor_cost(a: tuple[float, dict], b: tuple[float, dict]) -> dict[str, Any]:
    """The monitor's OpenFlow bytes during the run (``GET /monitor/cost``) against per-flow polling of
    the run's flows every Ts (bench/monitor_cost.py's model, real OF1.3 encodings): each of the
    ``LAB_FLOWS`` concurrent flows (16 small + the elephant) holds a 5-tuple rule on its ingress and
    egress switch, spread over the 3 packet switches, all polled every Ts."""
    sys.path.insert(0, str(ROOT))
    from bench.monitor_cost import per_flow_polling

    (t0, c0), (t1, c1) = a, b
    keys = ("coarse_sent", "coarse_received", "fine_sent", "fine_received")
    seconds = max(1e-9, t1 - t0)
    per_s = {k: round((c1.get(k, 0) - c0.get(k, 0)) / seconds, 1) for k in keys}
    split = sum(per_s.values())
    rules = math.ceil(LAB_FLOWS * 2 / PACKET_SWITCHES)
    baseline = per_flow_polling(PACKET_SWITCHES, rules)["per_interval_bytes"] / TS_S
    return {"seconds": round(seconds, 2), "polls": c1.get("polls", 0) - c0.get("polls", 0), "bytes_per_s": per_s,
            "monitor_bytes_per_s": round(split, 1), "per_flow_polling_bytes_per_s": round(baseline, 1),
            "per_flow_rules_per_switch": rules, "ratio": round(baseline / split, 2) if split else None}


def _progress_line(rates: _PortRates, t0: float, t_el: float, ph: Phases) -> str:
    s = rates.series(t0)
    last = {k: (v[-1][1] if v else 0.0) for k, v in s.items()}
    left = max(0.0, t_el + ph.elephant + ph.tail - time.time())
    return (f"A's egress: static circuit {last['static']:5.2f} Mbit/s, elastic circuit {last['elastic']:5.2f} "
            f"Mbit/s ({left:.0f} s of traffic left)")


def _wait_release(lab: Any, since: int) -> bool:
    """The offload's release plan ran and nothing of it is left (``GET /te`` empty)."""
    def done() -> bool:
        rel = [e for e in lab.client.events(since, "te_done") if e["decision"] == "release" and e["ok"]]
        return bool(rel) and not lab.client.request("GET", "/te").get("offloads")
    try:
        wait_until(done, 25, "the offload released")
        return True
    except TimeoutError:
        return False


def _settle(lab: Any, clock: _Clock) -> None:
    """Before the next run: the static circuit's hot spot cleared (fine monitoring off again)."""
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not lab.client.request("GET", "/monitor/fine").get("switches"), 20, "fine monitoring off")
    clock.note("settled: fine monitoring off, no offload in place")


def _measure(lab: Any, since: int, files: dict[str, Path], rates: _PortRates, t0: float, t_el: float,
             ph: Phases, te: bool, released: bool | None, split_s: float | None) -> dict[str, Any]:
    events = lab.client.events(since)
    start = ph.warmup  # the elephant's start, seconds into the run
    rel = lambda t: round(t - t0, 3)  # noqa: E731
    mon = [e for e in events if e["type"] == "monitor" and e.get("event") == "unconstrained_imbalance"
           and any(f.get("sport") == ELEPHANT_SPORT for f in e.get("flows", []))]
    decisions = [e for e in events if e["type"] == "te_decision"]
    offloads = [e for e in decisions if e["decision"] == "offload"]
    done = [e for e in events if e["type"] == "te_done" and e["decision"] == "offload" and e["ok"]]
    out: dict[str, Any] = {"elephant_start_s": start, "detected_s": rel(mon[0]["t"]) if mon else None,
                           "offloaded_s": rel(offloads[0]["t"]) if offloads else None,
                           "verified_s": rel(done[0]["t"]) if done else None, "released": bool(released)}
    out["offload_delay_s"] = round(out["verified_s"] - start, 3) if out["verified_s"] is not None else None
    rel_done = [e for e in events if e["type"] == "te_done" and e["decision"] == "release"]
    out["release_plan_s"] = rel_done[0]["seconds"] if rel_done else None
    moved = {f for e in offloads for f in e["flows"]}
    out["moved_flows"] = sorted(moved)
    out["small_flows_moved"] = sum(1 for f in moved if f":{ELEPHANT_SPORT} " not in f)
    out["decisions"] = [{"t_s": rel(e["t"]), "decision": e["decision"], "reason": e["reason"],
                         "gain": e.get("gain")} for e in decisions]
    out["breakdown"] = _breakdown(lab, mon, offloads, t0, start) if offloads else {}
    recv_el = json.loads(files["recv-el"].read_text())
    recv_small = json.loads(files["recv-small"].read_text())
    split = out["verified_s"] if out["verified_s"] is not None else split_s
    if split is None:
        split = start + (ph.elephant / 2)
    end = start + ph.elephant
    el, sm = recv_el["series"]["elephant"], recv_small["series"]["small"]
    out["split_s"] = split
    out["elephant_mbps_before"] = _mean_mbps(el, start + 0.5, split)
    out["elephant_mbps_after"] = _mean_mbps(el, split + 0.5, end)
    out["small_mbps_before"] = _mean_mbps(sm, start + 0.5, split)
    out["small_mbps_after"] = _mean_mbps(sm, split + 0.5, end)
    out["small_mbps_alone"] = _mean_mbps(sm, 1.0, start)
    out["elastic_capacity_mbps"] = 10.0
    out["elephant_share_after"] = round(out["elephant_mbps_after"] / out["elastic_capacity_mbps"], 3)
    out["small_transfers"] = json.loads(files["small"].read_text())
    out["elephant_sender"] = json.loads(files["elephant"].read_text())
    out["series"] = {"ports": rates.series(t0), "elephant": _bins(el), "small": _bins(sm)}
    return out


def _bins(series: dict[str, int]) -> list[list[float]]:
    return [[round((int(b) + 0.5) * BIN_S, 3), round(v * 8 / 1e6 / BIN_S, 3)] for b, v in sorted(
        series.items(), key=lambda kv: int(kv[0]))]


def _mean_mbps(series: dict[str, int], a: float, b: float) -> float:
    """Mean Mbit/s (payload) over the whole bins inside [a, b)."""
    first, last = int(a / BIN_S) + 1, int(b / BIN_S)
    if last <= first:
        return 0.0
    total = sum(series.get(str(i), 0) for i in range(first, last))
    return round(total * 8 / 1e6 / ((last - first) * BIN_S), 3)


def _breakdown(lab: Any, mon: list[dict], offloads: list[dict], t0: float, start: float) -> dict[str, Any]:
    """Where the time from the elephant's start to its verified offload went (journal + ``GET /plans``)."""
    plan_id = f"offload{offloads[0]['offload']}"
    rec = next((p for p in lab.client.request("GET", "/plans", timeout=10) if p.get("id") == plan_id), None)
    out: dict[str, Any] = {"detection_s": round(mon[0]["t"] - t0 - start, 3) if mon else None,
                           "decision_pce_s": round(offloads[0]["t"] - mon[0]["t"], 3) if mon else None,
                           "plan": plan_id}
    if rec is None:
        return out

    def span(kinds: tuple[str, ...]) -> float | None:
        steps = [s for s in rec["steps"] if s["kind"] in kinds and s["started_at"] and s["finished_at"]]
        if not steps:
            return None
        return round(max(s["finished_at"] for s in steps) - min(s["started_at"] for s in steps), 3)

    out.update({"queued_s": round(rec["started_at"] - offloads[0]["t"], 3),
                # the XCON FLOW_MODs until the OTS's BARRIER_REPLY, which the agent sends once the XCON is
                # applied, i.e. after its provisioning delay: XCON delay and barrier are one interval here
                "xcon_delay_barrier_s": span(("xcon_add",)),
                "circuit_up_s": span(("circuit_up",)),  # the circuit's packet ports up and stable D
                "rules_s": span(("flow_add",)),  # 5-tuple FLOW_MODs + barriers, egress then ingress
                "verification_s": span(("verify",)),
                "plan_s": round(rec["finished_at"] - rec["started_at"], 3),
                "steps": [{k: s.get(k) for k in ("id", "kind", "started_at", "finished_at", "ok")} for s in rec["steps"]]})
    return out


MEDIAN_KEYS = ("detected_s", "offloaded_s", "verified_s", "offload_delay_s", "elephant_mbps_before",
               "elephant_mbps_after", "small_mbps_before", "small_mbps_after")


def _medians(runs: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in MEDIAN_KEYS:
        vals = [r[k] for r in runs if r.get(k) is not None]
        out[k] = round(statistics.median(vals), 3) if vals else None
    for k in ("detection_s", "decision_pce_s", "xcon_delay_barrier_s", "circuit_up_s", "rules_s", "verification_s",
              "plan_s"):
        vals = [r["breakdown"][k] for r in runs if r.get("breakdown", {}).get(k) is not None]
        out[f"breakdown_{k}"] = round(statistics.median(vals), 3) if vals else None
    out["offload_delays_s"] = [r.get("offload_delay_s") for r in runs]
    for k in ("ratio", "monitor_bytes_per_s", "per_flow_polling_bytes_per_s"):
        vals = [r["monitor_cost"][k] for r in runs if r.get("monitor_cost", {}).get(k) is not None]
        out[f"monitor_cost_{k}"] = round(statistics.median(vals), 2) if vals else None
    out["all_released"] = all(r.get("released") for r in runs)
    out["small_flows_moved"] = sum(r.get("small_flows_moved", 0) for r in runs)
    return out


def _summary(res: dict[str, Any]) -> str:
    if res.get("offload_delay_s") is None:
        return "the elephant was not offloaded" if res.get("te") else "baseline only (TE loop off)"
    line = (f"elephant offloaded and verified {res['offload_delay_s']:.2f} s after its start (paper, Ts = 6 s: "
            f"~21 s); elephant {res['elephant_mbps_before']:.2f} -> {res['elephant_mbps_after']:.2f} Mbit/s, small "
            f"flows {res['small_mbps_before']:.2f} -> {res['small_mbps_after']:.2f} Mbit/s; released "
            f"{res['released']}; small flows moved {res['small_flows_moved']}")
    if "baseline" in res:
        b = res["baseline"]
        line += (f"; loop off: elephant {b['elephant_mbps_after']:.2f}, small flows {b['small_mbps_after']:.2f} "
                 "Mbit/s after the same time")
    if "median" in res:
        m = res["median"]
        line += (f"; median offload delay over {len(res['runs'])} runs {m['offload_delay_s']} s; monitor "
                 f"{m.get('monitor_cost_monitor_bytes_per_s')} B/s, per-flow polling "
                 f"{m.get('monitor_cost_per_flow_polling_bytes_per_s')} B/s (ratio {m.get('monitor_cost_ratio')})")
    return line


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.8))
    ports = res.get("series", {}).get("ports", {})
    for name, color in (("static", "tab:blue"), ("elastic", "tab:orange")):
        pts = ports.get(name) or []
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=1.2,
                label=f"{name} path (A:{3 if name == 'static' else 4} egress)")
    base = (res.get("baseline_series") or {}).get("ports", {}).get("static") if res.get("te") else None
    if base:
        ax.plot([p[0] for p in base], [p[1] for p in base], color="tab:gray", lw=0.8, ls=":",
                label="static path, TE loop off (same seed)")
    marks = (("elephant_start_s", "elephant starts", "k"), ("detected_s", "detected", "tab:red"),
             ("verified_s", "offloaded + verified", "tab:green"))
    for key, label, color in marks:
        if res.get(key) is not None:
            ax.axvline(res[key], color=color, ls="--", lw=1, label=f"{label} ({res[key]:.1f} s)")
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("Mbit/s")
    ax.set_ylim(0, 12)
    title = "elastic offload (Fig. 10 style), Ts = 1 s"
    if res.get("offload_delay_s") is not None:
        title += (f": elephant moved {res['offload_delay_s']:.2f} s after its start; "
                  f"{res['elephant_mbps_before']:.1f} -> {res['elephant_mbps_after']:.1f} Mbit/s")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
