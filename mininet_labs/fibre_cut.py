"""Lab ``fibre-cut``: faults under lit reservations — detection, restoration, and what the probe lost.

The operator's setting: the controller with its database, the reservation service (``mlte web``) and
a testbed (Fig. 2, or ``mesh6`` with ``--topology mesh6``). A reservation h1 → h3 is lit; a probe
sends one packet per millisecond through it; then each fault of the run is injected in turn, with
the probe running: the fibre the reservation's path crosses is cut (and repaired after), in turn
for every cut of the run, so each cut hits the path the last restoration chose; ``--quick`` cuts two
fibres. The full run also powers off the OTS in the middle of the path (Fig. 2's Y, when the path
crosses it), kills an OTS agent (its cross-connects stay lit: nothing may be lost) and takes a packet
switch off its controller.

Per fault and reservation (``events`` in ``results.json``): ``detect_s`` (cut → the controller's
journal says the reservation is broken), ``restored_s`` (cut → the first probe packet after the
loss arrives, over the new path), ``verified_s`` (cut → the controller verified the new path and
marked it ACTIVE), ``probe_lost``, the reservation's states after the cut, and its path before and
after. ``leftover`` checks that after every repair only the reservation's own XCONs are lit.
Plot: ``fibre_cut.png`` (probe loss and restoration time per fault). docs/failures.md.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import requests

from app.controller.client import wait_until
from app.web.timeutil import to_iso
from mininet_labs import faults, loss_probe
from mininet_labs.lab_web import get as _get
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state

PERIOD = 0.001  # s between probe packets (1 packet/ms)
PROBE_PORT = 6003
REVERT_HOLD_S = 2.0  # the lab's revert hold (the default is 30 s): the revert phase stays short
RESERVED_MBPS = 2.0
TOPOLOGIES = ("fig2", "mesh6")
#: (source host port, destination host port, destination IP) of the probed reservation per topology
ENDS = {"fig2": ("A:1", "C:3", "h3", "10.0.0.3"), "mesh6": ("A:1", "C:1", "h3", "10.0.0.3")}


def _dirs(out: Path, topology: str) -> tuple[Path, Any, Path, tuple[float, float]]:
    """(out, spec, static file, provisioning delay) of the testbed."""
    from mininet_labs.workdir import FIG2_DELAY
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    out = out.resolve()
    (out / "work").mkdir(parents=True, exist_ok=True)
    if topology == "mesh6":
        from mininet_labs.mesh_spec import mesh6
        spec = mesh6()
    else:
        spec = fig2_testbed()
    static = out / f"{topology}-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=sum(FIG2_DELAY) / 2), static)
    return out, spec, static, FIG2_DELAY


def _wall(fault: Callable[..., Any], *args: Any) -> float:
    """Inject a fault of :mod:`mininet_labs.faults`; the wall time just before it (the probe's clock)."""
    t = time.time()
    fault(*args)
    return t


def _fibres(path: dict[str, Any]) -> list[tuple[str, str]]:
    """The fibres a stored path crosses, as (OTS port, OTS port)."""
    out = []
    for e in path.get("edges") or []:
        if e.startswith("optical:"):
            a, b = e[len("optical:"):].split("-")
            out.append((a, b))
    return out


def run(out: Path, *, quick: bool = False, topology: str = "fig2",
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    return _run(out, quick=quick, topology=topology, progress=progress, offload=topology == "fig2")


def _run(out: Path, *, quick: bool, topology: str, progress: Callable[[str], None], offload: bool) -> dict[str, Any]:
    """Run the lab; write ``out/results.json`` and ``out/fibre_cut.png``; return the results."""
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession

    if topology not in TOPOLOGIES:
        raise ValueError(f"fibre-cut runs on {' or '.join(TOPOLOGIES)}, not {topology!r}")
    out, spec, static, delay = _dirs(Path(out), topology)
    db = out / "mlte.db"
    for p in out.glob("mlte.db*"):
        p.unlink()
    src, dst, dst_host, dst_ip = ENDS[topology]
    cuts = 2 if quick else 5
    res: dict[str, Any] = {"lab": "fibre-cut", "quick": quick, "topology": topology, "events": [],
                           "probe_period_s": PERIOD}
    clock = LabClock(progress)
    work = out / "work"
    with clock.locked(), LabSession(spec, work, delay=delay, static_file=str(static),
                                    controller_args=("--db-url", f"sqlite:///{db}")) as session:
        clock.note(f"controller and {topology} testbed up")
        assert session.lab is not None
        h1, hd = session.lab.node("h1"), session.lab.node(dst_host)
        for a, ip in ((h1, dst_ip), (hd, "10.0.0.1")):  # hosts announce themselves (ARP)
            a.cmd(f"ping -c1 -W1 {ip} >/dev/null 2>&1")
        with lab_web(db, out / "web.log") as web:
            url, headers = web.url, web.headers
            rid = _reserve(url, headers, "fibre-cut probe", src, dst, "none")
            clock.note(f"reservation {rid} {src} -> {dst} ACTIVE")
            res["reservation_id"] = rid
            hosts = (h1, hd, dst_ip)
            # revertive mode for a cut at a time: restored around it, back on the admitted path after the repair
            res["reverts"] = []
            for k in range(1 if quick else 5):
                rv = _revert_phase(session, url, headers, rid, hosts, work, k)
                res["reverts"].append(rv)
                clock.note(f"revert {k + 1}: {rv['outcome']}, back on the original path {rv['reverted_s']} s after "
                           f"the repair (plan {rv['revert_plan_s']} s), {rv['probe_lost_after_repair']} probe "
                           "packets lost after it")
            res["revert"] = _revert_summary(res["reverts"])
            n = _cuts(session, url, headers, rid, hosts, work, 1, cuts, quick, clock.note, res["events"])
            if not quick:  # the other faults of the failure model
                n = _other_faults(session, rid, hosts, work, n, topology, clock.note, res["events"])
            res["leftover"] = _leftover(session, url, headers, rid)
            res["final_state"] = _state(url, headers, rid, None)
            res["restorations"] = (_get(f"{url}/reservations/{rid}/restorations", headers) or {}).get("items")
            requests.post(f"{url}/reservations/{rid}/cancel", headers=headers, timeout=30).raise_for_status()
            res["released"] = bool(_within(lambda: not session.client.xcons(), 30))
            # 1+1: both paths lit, a fast-failover group at each end; the cut working path must cost
            # almost nothing and need no controller message; the controller then protects it again
            pid = _reserve(url, headers, "fibre-cut 1+1 probe", src, dst, "1+1")
            clock.note(f"reservation {pid} {src} -> {dst} 1+1 ACTIVE")
            res["protected_id"] = pid
            _cuts(session, url, headers, pid, hosts, work, n, 1 if quick else 5, quick, clock.note, res["events"],
                  protection="1+1")
            res["protected_leftover"] = _leftover(session, url, headers, pid)
            res["protected_final_state"] = _state(url, headers, pid, None)
            requests.post(f"{url}/reservations/{pid}/cancel", headers=headers, timeout=30).raise_for_status()
            res["protected_released"] = bool(_within(lambda: not session.client.xcons(), 30))
            res["controller_errors"] = session.controller_errors()
    if offload:  # a second testbed: the TE loop on, an elephant offloaded, then its circuit's fibre cut
        res["offload"] = _offload_cut(out / "te", progress)
    res["summary"] = _summary(res["events"])
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "fibre_cut.png")
    progress(f"wrote {out / 'results.json'} and {out / 'fibre_cut.png'}")
    return res


def _offload_cut(work: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """The elastic-offload lab's setting (Fig. 2, circuit 'initial' lit, monitor Ts = 1 s, TE loop on):
    small transfers h2 → h4 and an elephant h1 → h3 that the loop offloads onto a temporary circuit;
    once it is there, a fibre of that circuit is cut. The offload must be released in the failure's
    event (``te_decision`` with the cause, ``te_done`` release) and nothing of it left; the elephant
    falls back to the static path."""
    import threading

    from mininet_labs import elastic_offload as eo
    from topology.spec import fig2_testbed, spec_to_graph

    clock = eo._Clock(progress)
    ph = eo.Phases(True)
    out: dict[str, Any] = {}
    g = spec_to_graph(fig2_testbed())
    with eo._session(work, enabled=True, demo=False, clock=clock) as (lab, _web):
        since = lab.client.events()[-1]["seq"]
        done: dict[str, Any] = {}

        def workload() -> None:
            try:
                done["run"] = eo._one_run(lab, work, ph, 1, clock, eo._Live(clock, verbose=False), te=True)
            except Exception as exc:  # noqa: BLE001 - recorded: the cut is what this phase measures
                done["error"] = repr(exc)

        th = threading.Thread(target=workload, daemon=True)
        th.start()
        offs = _within(lambda: lab.client.request("GET", "/te").get("offloads") or None, ph.warmup + ph.elephant + 5)
        if not offs:
            th.join(timeout=60)
            return {"offloaded": False, "error": done.get("error", "the elephant was not offloaded")}
        off = next(iter(offs.values()))
        ports = [f"{x['ots']}:{x['out_port']}" for x in off["xcons"]]
        a = next(p for p in ports if g.fibre_peer(p) is not None)
        b = g.fibre_peer(a)
        assert b is not None
        clock.note(f"elephant offloaded onto {off['circuit']}; cutting its fibre {a}-{b}")
        t_cut = _wall(faults.cut_fibre, lab, a, b)

        def released() -> float | None:
            rel = [e for e in lab.client.events(since, "te_done") if e["decision"] == "release" and e["ok"]]
            return float(rel[0]["t"]) if rel and not lab.client.request("GET", "/te").get("offloads") else None

        t_rel = _within(released, 15)
        why = [e.get("reason", "") for e in lab.client.events(since, "te_decision") if e.get("decision") == "release"]
        th.join(timeout=60)
        faults.repair_fibre(lab, a, b)
        left = {f"{x['ots']}:{x['in_port']}" for x in lab.client.xcons()}
        out = {"offloaded": True, "circuit": off["circuit"], "fibre": f"{a}-{b}",
               "released_s": None if t_rel is None else round(t_rel - t_cut, 4),
               "release_reason": why[0] if why else None,
               "offload_xcons_left": sorted(set(ports) & left), "workload_error": done.get("error"),
               "controller_errors": lab.controller_errors()}
        clock.note(f"offload released {out['released_s']} s after the cut ({out['release_reason']})")
    return out


def _reserve(url: str, headers: dict, name: str, src: str, dst: str, protection: str) -> int:
    """A reservation starting in 3 s for an hour, committed and waited for until ACTIVE."""
    start = time.time() + 3.0
    r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
        "name": name, "src": src, "dst": dst, "bandwidth": RESERVED_MBPS, "protection": protection,
        "start": to_iso(start), "end": to_iso(start + 3600)})
    r.raise_for_status()
    rid = int(r.json()["id"])
    requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
    state = wait_until(lambda: _state(url, headers, rid, ("ACTIVE", "FAILED")), 40, "ACTIVE")
    if state != "ACTIVE":
        raise RuntimeError(f"reservation {rid} ({name}) {src} -> {dst} was not lit: {state}")
    return rid


def _cuts(session: Any, url: str, headers: dict, rid: int, hosts: tuple[Any, Any, str], work: Path, n0: int,
          count: int, quick: bool, note: Callable[[str], None], out: list[dict[str, Any]],
          protection: str = "none") -> int:
    """Cut ``count`` fibres of the reservation's (working) path in turn, each repaired before the next;
    returns the next probe number."""
    n = n0
    for k in range(count):
        path = (_get(f"{url}/reservations/{rid}", headers) or {}).get("path") or {}
        fibres = _fibres(path)
        if not fibres:
            note(f"cut {k + 1}: the path crosses no fibre; stop")
            break
        a, b = fibres[k % len(fibres)]
        ev = _fault(session, hosts, rid, f"fibre {a}-{b} cut", work, n, protection=protection,
                    inject=partial(_wall, faults.cut_fibre, session, a, b),
                    repair=partial(_wall, faults.repair_fibre, session, a, b),
                    seconds=4.0 if quick else 6.0)
        n += 1
        ev["old_path"] = path.get("edges") or []
        ev["new_path"] = ((_get(f"{url}/reservations/{rid}", headers) or {}).get("path") or {}).get("edges")
        out.append(ev)
        note(_line(ev))
    return n


def _revert_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"runs": len(runs), "reverted": sum(1 for r in runs if r["outcome"] == "reverted"),
            "all_back_on_original": all(r["back_on_original"] for r in runs),
            "median_reverted_s": _median([r["reverted_s"] for r in runs]),
            "median_revert_plan_s": _median([r["revert_plan_s"] for r in runs]),
            "max_probe_lost_after_repair": max((r["probe_lost_after_repair"] for r in runs), default=None)}


def _revert_phase(session: Any, url: str, headers: dict, rid: int, hosts: tuple[Any, Any, str],
                  work: Path, k: int) -> dict[str, Any]:
    """Revertive mode on (hold :data:`REVERT_HOLD_S`) for one cut of the admitted path: restored on a
    path that keeps off it, the fibre repaired, and the probe kept running until the reservation is
    back on its original path, moved make-before-break (``reverted_s``: repair → the revert verified;
    ``probe_lost_after_repair``: what the revert cost, 0 when made before break). Revert off again after."""
    h1, hd, dst_ip = hosts
    path = (_get(f"{url}/reservations/{rid}", headers) or {}).get("path") or {}
    a, b = _fibres(path)[0]
    session.client.request("POST", "/restoration", {"revert": True, "revert_hold_s": REVERT_HOLD_S}, timeout=10)
    seconds = 6.0 + REVERT_HOLD_S
    got = work / f"probe-revert-{k}.json"
    recv = hd.popen([sys.executable, loss_probe.SCRIPT, "recv", str(PROBE_PORT), str(seconds + 2), str(got)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    send = h1.popen([sys.executable, loss_probe.SCRIPT, "send", dst_ip, str(PROBE_PORT), str(seconds),
                     str(PERIOD)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seq0 = max((e["seq"] for e in session.client.events()), default=0)
    time.sleep(0.5)
    t_cut = _wall(faults.cut_fibre, session, a, b)
    settled = _within(lambda: _settled(session, rid, seq0), 10.0)
    restored_path = ((_get(f"{url}/reservations/{rid}", headers) or {}).get("path") or {}).get("edges") or []
    time.sleep(0.5)
    t_repair = _wall(faults.repair_fibre, session, a, b)

    def reverted() -> dict[str, Any] | None:
        return next((e for e in session.client.events(since=seq0, kind="reservation")
                     if e.get("reservation_id") == rid and e.get("event") in ("reservation_reverted",
                                                                             "reservation_revert_failed")), None)

    done = _within(reverted, REVERT_HOLD_S + 10.0)
    sent_out, _ = send.communicate(timeout=seconds + 30)
    recv.communicate(timeout=seconds + 30)
    session.client.request("POST", "/restoration", {"revert": False}, timeout=10)
    sent, t0 = sent_out.split()
    arrived = {int(k): tuple(v) for k, v in json.loads(got.read_text()).items()}
    probe = loss_probe.loss_after(arrived, int(sent), float(t0), PERIOD, t_cut)
    after_repair = loss_probe.loss_after(arrived, int(sent), float(t0), PERIOD, t_repair)
    plans = [e for e in session.client.events(since=seq0, kind="plan") if e.get("reservation_id") == rid]
    move = [e for e in plans if "revert" in str(e.get("plan", ""))]
    final_path = ((_get(f"{url}/reservations/{rid}", headers) or {}).get("path") or {}).get("edges") or []
    time.sleep(1.0)
    return {"fault": f"fibre {a}-{b} cut, repaired", "hold_s": REVERT_HOLD_S, "settled": settled,
            "outcome": None if done is None else str(done["event"]).removeprefix("reservation_"),
            "reason": None if done is None else done.get("reason"),
            "reverted_s": None if done is None or done["event"] != "reservation_reverted"
            else round(done["t"] - t_repair, 4),
            "revert_plan_s": round(move[-1]["t"] - move[0]["t"], 4) if len(move) > 1 else None,
            "probe_lost_after_repair": after_repair["probe_lost_after_fault"], "probe_lost": probe["probe_lost"],
            "probe_sent": probe["probe_sent"], "original_path": path.get("edges") or [],
            "restored_path": restored_path, "final_path": final_path,
            "back_on_original": final_path == (path.get("edges") or [])}


def _other_faults(session: Any, rid: int, hosts: tuple[Any, Any, str], work: Path, n: int, topology: str,
                  note: Callable[[str], None], out: list[dict[str, Any]]) -> int:
    """An OTS agent killed (its XCONs stay lit: nothing may be lost), the same agent frozen (a silent
    switch: the echo timeout drops it, ``switch_left_s``), a packet switch off its controller
    (fail-secure: nothing lost), and the OTS next to the destination powered off (no path is left:
    DEGRADED, then lit again after the power comes back)."""
    first_ots = "X"
    last_ots = "Z" if topology == "fig2" else "Y"
    dst_switch = "C"
    plan = [(f"OTS {first_ots} agent killed", "none", lambda: _wall(faults.kill_agent, session, first_ots),
             lambda: _wall(faults.restart_agent, session, first_ots)),
            (f"OTS {first_ots} agent frozen (silent)", "none",
             lambda: _wall(faults.freeze_agent, session, first_ots, True),
             lambda: _wall(faults.freeze_agent, session, first_ots, False)),
            (f"switch {dst_switch} off its controller", "none",
             lambda: _wall(faults.disconnect_switch, session, dst_switch),
             lambda: _wall(faults.reconnect_switch, session, dst_switch)),
            (f"OTS {last_ots} powered off", "degraded", lambda: _wall(faults.power_off_ots, session, last_ots),
             lambda: _wall(faults.power_on_ots, session, last_ots))]
    for what, expect, inject, repair in plan:
        seconds = 12.0 if "silent" in what else 6.0  # the echo timeout takes a few seconds to drop it
        ev = _fault(session, hosts, rid, what, work, n, inject=inject, repair=repair, seconds=seconds, expect=expect)
        n += 1
        out.append(ev)
        note(_line(ev))
        time.sleep(3.0)  # a reconnected switch or agent is read back and reconciled before the next fault
    return n


def _line(ev: dict[str, Any]) -> str:
    return (f"{ev['fault']} ({ev['protection']}): detected {ev['detect_s']} s, probe back {ev['restored_s']} s, "
            f"verified {ev['verified_s']} s, {ev['probe_lost']} of {ev['probe_sent']} lost; "
            f"states {[s['state'] for s in ev['states']]}"
            + (f"; lit again {ev['back_after_repair_s']} s after the repair" if ev.get("back_after_repair_s") else ""))


def _within(cond: Callable[[], Any], timeout: float) -> Any:
    try:
        return wait_until(cond, timeout, "condition")
    except TimeoutError:
        return None


def _fault(session: Any, hosts: tuple[Any, Any, str], rid: int, what: str, work: Path, n: int, *,
           inject: Callable[[], float], repair: Callable[[], float], seconds: float, expect: str = "restored",
           protection: str = "none") -> dict[str, Any]:
    """Run the probe (``hosts``: sender, receiver, receiver's IP), inject the fault a second in, wait
    for the reservation to settle (``expect``: "restored", "degraded" — then also until the repair
    brought it back — or "none": nothing must happen), then repair."""
    h1, hd, dst_ip = hosts
    got = work / f"probe-{n}.json"
    recv = hd.popen([sys.executable, loss_probe.SCRIPT, "recv", str(PROBE_PORT), str(seconds + 2), str(got)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    send = h1.popen([sys.executable, loss_probe.SCRIPT, "send", dst_ip, str(PROBE_PORT), str(seconds),
                     str(PERIOD)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seq0 = max((e["seq"] for e in session.client.events()), default=0)
    time.sleep(1.0)
    t_cut = inject()
    settled = _within(lambda: _settled(session, rid, seq0), 10.0) if expect != "none" else None
    sent_out, _ = send.communicate(timeout=seconds + 30)
    recv.communicate(timeout=seconds + 30)
    t_repair = repair()
    back = None
    if settled == "degraded":  # retried with back-off: lit again once the repair left a path
        back = _within(lambda: _back(session, rid, seq0), 45.0)
    sent, t0 = sent_out.split()
    probe = loss_probe.loss_after({int(k): tuple(v) for k, v in json.loads(got.read_text()).items()},
                                  int(sent), float(t0), PERIOD, t_cut)
    events = [e for e in session.client.events(since=seq0, kind="reservation") if e.get("reservation_id") == rid]
    plans = [e for e in session.client.events(since=seq0, kind="plan") if e.get("reservation_id") == rid]
    broken = next((e["t"] for e in events if e.get("event") == "broken"), None)
    left = [e["t"] for e in session.client.events(since=seq0, kind="switch_leave")]
    restored = next((e["t"] for e in events if e.get("event") == "reservation_restored"), None)
    time.sleep(1.0)  # the repair settles before the next fault
    return {"fault": what, "reservation": rid, "protection": protection, "expect": expect, "at": t_cut,
            "repaired_at": t_repair, "detect_s": None if broken is None else round(broken - t_cut, 4),
            "verified_s": None if restored is None else round(restored - t_cut, 4),
            "first_change_s": round(plans[0]["t"] - t_cut, 4) if plans else None,
            "switch_left_s": round(left[0] - t_cut, 4) if left else None,
            "back_after_repair_s": None if back is None else round(back - t_repair, 4),
            "settled": settled, "states": _states(events, t_cut), **probe}


def _back(session: Any, rid: int, seq0: int) -> float | None:
    for e in session.client.events(since=seq0, kind="reservation"):
        if e.get("reservation_id") == rid and e.get("event") == "reservation_restored":
            return float(e["t"])
    return None


def _settled(session: Any, rid: int, seq0: int) -> str | None:
    """The reservation's outcome after the fault: restored, degraded, unprotected (a 1+1 one on its
    survivor with no new protection path), or None while restoring."""
    for e in session.client.events(since=seq0, kind="reservation"):
        if e.get("reservation_id") == rid and e.get("event") in ("reservation_restored", "reservation_degraded",
                                                                 "reservation_unprotected"):
            return str(e["event"]).removeprefix("reservation_")
    return None


def _states(events: list[dict], t_cut: float) -> list[dict[str, Any]]:
    names = {"reservation_restoring": "RESTORING", "reservation_restored": "ACTIVE", "reservation_degraded": "DEGRADED"}
    return [{"t": round(e["t"] - t_cut, 4), "state": names[e["event"]]} for e in events if e.get("event") in names]


def _leftover(session: Any, url: str, headers: dict, rid: int) -> dict[str, Any]:
    """After the repairs: the XCONs lit are exactly the reservation's own (nothing half-installed)."""
    lit = session.client.request("GET", "/reservations", timeout=10).get("lit", {}).get(str(rid), {})
    want = {f"{x['ots']}:{min(x['in_port'], x['out_port'])}<->{max(x['in_port'], x['out_port'])}"
            for x in lit.get("xcons", [])}
    have = {f"{x['ots']}:{min(x['in_port'], x['out_port'])}<->{max(x['in_port'], x['out_port'])}"
            for x in session.client.xcons()}
    return {"reservation_xcons": sorted(want), "lit_xcons": sorted(have), "extra": sorted(have - want),
            "missing": sorted(want - have)}


def _median(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 4) if vals else None


def _group(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"faults": len(events), "restored": sum(1 for e in events if e.get("settled") == "restored"),
            "median_detect_s": _median([e["detect_s"] for e in events]),
            "median_restored_s": _median([e["restored_s"] for e in events]),
            "median_verified_s": _median([e["verified_s"] for e in events]),
            "median_probe_lost": _median([e["probe_lost"] for e in events]),
            "max_probe_lost": max((e["probe_lost"] for e in events), default=None)}


def _summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per kind of fault: fibre cuts under the unprotected reservation, under the 1+1 one (with
    whether its probe came back before the controller's first message), and the other faults."""
    cuts = [e for e in events if e["protection"] == "none" and e["fault"].startswith("fibre")]
    prot = [e for e in events if e["protection"] == "1+1"]
    return {"faults": len(events), "restored": sum(1 for e in events if e.get("settled") == "restored"),
            "unprotected_cuts": _group(cuts),
            "protected_cuts": {**_group(prot), "data_plane_first": all(
                e["restored_s"] is not None and e["first_change_s"] is not None
                and e["restored_s"] < e["first_change_s"] for e in prot)},
            "other": {e["fault"]: {k: e.get(k) for k in ("settled", "probe_lost", "detect_s", "back_after_repair_s",
                                                         "switch_left_s")}
                      for e in events if e not in cuts and e not in prot}}


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evs = res["events"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    labels = [f"{n + 1}: {e['fault'].replace(' cut', '')}{' (1+1)' if e['protection'] == '1+1' else ''}"
              for n, e in enumerate(evs)]
    ax1.bar(range(len(evs)), [e["probe_lost"] for e in evs],
            color=["tab:purple" if e["protection"] == "1+1" else "tab:red" for e in evs])
    ax1.set_yscale("symlog")
    ax1.set_ylabel("probe packets lost (1 per ms)")
    for ax in (ax1, ax2):
        ax.set_xticks(range(len(evs)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    width = 0.27
    for k, (key, color) in enumerate((("detect_s", "tab:blue"), ("restored_s", "tab:green"),
                                      ("verified_s", "tab:orange"))):
        ax2.bar([i + (k - 1) * width for i in range(len(evs))], [e.get(key) or 0 for e in evs], width,
                label=key, color=color)
    ax2.set_ylabel("seconds after the fault")
    ax2.legend(fontsize=7)
    u, p = res["summary"]["unprotected_cuts"], res["summary"]["protected_cuts"]
    fig.suptitle(f"fibre-cut on {res['topology']}: unprotected — median probe back {u['median_restored_s']} s, "
                 f"verified {u['median_verified_s']} s; 1+1 — median {p['median_probe_lost']} packets lost",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
