"""Lab ``reservation-lifecycle``: a reservation h1 → h3 on the Fig. 2 testbed becomes a circuit and goes.

The operator's path, end to end: the controller (with its database), the reservation service
(``mlte web``, REST) and the Fig. 2 Mininet testbed. A reservation A:1 → C:3 is committed for a
window that starts a few seconds later. The lab then measures when the controller lit it (the
ACTIVE transition against the window start), what UDP throughput h1 → h3 gets at the reserved rate,
and — after the window ends (``--quick``: after a cancel) — that every XCON and every
reservation rule is gone — also when the controller was killed and restarted while it was lit (the
restarted one adopts it and releases it). A second reservation, whose OTS refuses one of its XCONs, must end FAILED
with the reason and leave nothing behind. Results: ``results.json`` and ``lifecycle.png`` (timeline).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from app.controller.client import wait_until
from app.web.timeutil import parse_iso, to_iso
from mininet_labs.lab_web import get as _get
from mininet_labs.lab_web import lab_web
from topology import rule_plan

RESERVED_MBPS = 5.0


def _within(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    """What ``cond`` returned once truthy, or None if it never was within ``timeout`` (measured, not fatal)."""
    try:
        return wait_until(cond, timeout, what)
    except TimeoutError:
        return None


def _reservation_rules(bridge: str) -> list[str]:
    """The reservation-band rules on an OVS bridge (by cookie), as ``ovs-ofctl`` prints them."""
    band = rule_plan.RESERVATION
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", bridge,
                          f"cookie={band.cookie():#x}/{band.mask():#x}"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return [line.strip() for line in out.splitlines() if "cookie=" in line]


def _udp_mbps(session: Any, seconds: float, mbps: float) -> tuple[float, float]:
    """(received, lost %) of an iperf3 UDP stream h1 → h3 at ``mbps``."""
    h1, h3 = session.lab.node("h1"), session.lab.node("h3")
    server = h3.popen(["iperf3", "-s", "-1", "-p", "5211", "--json"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        client = h1.popen(["iperf3", "-c", "10.0.0.3", "-p", "5211", "-u", "-b", f"{mbps}M", "-t", str(seconds),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, _err = client.communicate(timeout=seconds + 20)
        data = json.loads(out)
        s = data["end"]["sum"]
        return float(s.get("bits_per_second", 0.0)) / 1e6 * (1 - float(s.get("lost_percent", 0.0)) / 100), \
            float(s.get("lost_percent", 0.0))
    finally:
        server.kill()
        server.wait(timeout=10)


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the lab; write ``out/results.json`` and ``out/lifecycle.png``; return the results."""
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import fig2_dirs

    dirs = fig2_dirs(out)  # the static file's fibres and adaptations: admission can route at once
    out, spec, static, delay = dirs.out, dirs.spec, dirs.static, dirs.delay
    db = out / "mlte.db"
    for p in out.glob("mlte.db*"):
        p.unlink()
    lead, window = (4.0, 25.0) if quick else (6.0, 40.0)
    res: dict[str, Any] = {"lab": "reservation-lifecycle", "quick": quick, "reserved_mbps": RESERVED_MBPS}
    marks: list[tuple[float, str]] = []
    clock = LabClock(progress)

    def note(text: str) -> None:
        marks.append((time.time() - clock.t0, text))
        clock.note(text)

    with clock.locked(), LabSession(spec, out / "work", delay=delay, static_file=str(static),
                                    controller_args=("--db-url", f"sqlite:///{db}")) as session:
        note("controller and Fig. 2 testbed up")
        for h, ip in (("h1", "10.0.0.3"), ("h3", "10.0.0.1")):  # hosts announce themselves (ARP)
            session.lab.node(h).cmd(f"ping -c1 -W1 {ip} >/dev/null 2>&1")
        with lab_web(db, out / "web.log") as web:
            url, headers, port = web.url, web.headers, web.port
            note(f"web service on http://127.0.0.1:{port}")
            start = time.time() + lead
            r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
                "name": "lab h1-h3", "src": "A:1", "dst": "C:3", "bandwidth": RESERVED_MBPS,
                "start": to_iso(start), "end": to_iso(start + window)})
            r.raise_for_status()
            rid = r.json()["id"]
            requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
            res["reservation_id"] = rid
            note(f"reservation {rid} A:1 -> C:3 {RESERVED_MBPS} Mbit/s committed; window starts in {lead:.0f}s")
            state = wait_until(lambda: _state(url, headers, rid, ("ACTIVE", "FAILED")), lead + 30, "ACTIVE")
            res["lit"] = state == "ACTIVE"
            hist = requests.get(f"{url}/reservations/{rid}/history", headers=headers, timeout=30).json()
            active_at = next((parse_iso(h["time"]) for h in hist["items"] if h["detail"].get("to") == "ACTIVE"),
                             time.time())
            res["lit_after_start_s"] = round(active_at - start, 3)
            detail = requests.get(f"{url}/reservations/{rid}", headers=headers, timeout=30).json()
            res["state_reason"] = detail.get("state_reason", "")
            note(f"reservation {state} {res['lit_after_start_s']:.2f}s after its start"
                 + (f": {res['state_reason']}" if state != "ACTIVE" else ""))
            res["xcons_lit"] = session.client.xcons() if res["lit"] else []
            res["rules_installed"] = sum(len(_reservation_rules(session.lab.bridge(n))) for n in ("A", "B", "C"))
            if res["lit"]:
                mbps, lost = _udp_mbps(session, 2.0 if quick else 5.0, RESERVED_MBPS)
                res["throughput_mbps"], res["udp_lost_percent"] = round(mbps, 3), lost
                note(f"h1 -> h3 UDP at {RESERVED_MBPS} Mbit/s: {mbps:.2f} Mbit/s received ({lost:.1f}% lost)")
                res["restart"] = _restart(session, url, headers, rid, out / "work", note)
            if quick:
                requests.post(f"{url}/reservations/{rid}/cancel", headers=headers, timeout=30).raise_for_status()
                note("reservation cancelled")
            else:
                wait_until(lambda: _state(url, headers, rid, ("FINISHED",)), window + 30, "FINISHED")
                note("window ended")
            gone = _within(lambda: not session.client.xcons() and not any(
                _reservation_rules(session.lab.bridge(n)) for n in ("A", "B", "C")), 30, "release")
            res["released"] = bool(gone)
            res["leftover_xcons"] = len(session.client.xcons())
            res["leftover_rules"] = sum(len(_reservation_rules(session.lab.bridge(n))) for n in ("A", "B", "C"))
            res["final_state"] = _state(url, headers, rid, None)
            plans = requests.get(f"{url}/plans", params={"reservation": rid}, headers=headers, timeout=30)
            res["plans"] = plans.json() if plans.ok else []
            note(f"released: {res['released']} (XCONs left {res['leftover_xcons']}, rules left "
                 f"{res['leftover_rules']}); final state {res['final_state']}")
            res["refused"] = _refused(session, url, headers, note)
            res["controller_errors"] = session.controller_errors()
    res["timeline"] = [{"t": round(t, 3), "what": w} for t, w in marks]
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "lifecycle.png")
    progress(f"wrote {out / 'results.json'} and {out / 'lifecycle.png'}")
    return res


def _restart(session: Any, url: str, headers: dict, rid: int, work: Path,
             note: Callable[[str], None]) -> dict[str, Any]:
    """SIGKILL the controller under the lit reservation and start it again: a probe h1 -> h3 (one
    packet every 2 ms) must not notice, the XCONs are read back and adopted, the reservation stays
    ACTIVE and the restarted controller knows it is lit (it will release it)."""
    from mininet_labs.planned_vs_oneshot import RECEIVER, SENDER

    (work / "send.py").write_text(SENDER)
    (work / "recv.py").write_text(RECEIVER)
    h1, h3 = session.lab.node("h1"), session.lab.node("h3")
    seconds = 8.0
    recv = h3.popen([sys.executable, str(work / "recv.py"), "6002", str(seconds + 2), str(work / "got-restart.json")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    send = h1.popen([sys.executable, str(work / "send.py"), "10.0.0.3", "6002", str(seconds), "0.002"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    t_kill = session.restart_controller(kill=True)
    note("controller killed (SIGKILL) and started again")

    def adopted() -> Any:
        try:
            lit = session.client.request("GET", "/reservations", timeout=5).get("lit", {})
            xcons = session.client.xcons()
        except Exception:  # noqa: BLE001 - the API is still coming up
            return None
        if str(rid) not in lit:
            return None
        # every XCON of the circuit, both directions: the OTSes reconnect (and are read back) one by one
        want = 2 * len(lit[str(rid)].get("xcons") or [])
        return (lit, xcons) if want and sum(1 for x in xcons if x.get("adopted")) >= want else None

    got = _within(adopted, 30, "the reservation and its XCONs adopted")
    t_adopted = time.time()
    out, _err = send.communicate(timeout=seconds + 30)
    recv.communicate(timeout=seconds + 30)
    sent = int(out.split()[0])
    received = len(json.loads((work / "got-restart.json").read_text()))
    state = _state(url, headers, rid, None)
    res = {"probe_sent": sent, "probe_lost": sent - received, "adopted": got is not None,
           "adopted_after_s": round(t_adopted - t_kill, 2),
           "xcons_adopted": sum(1 for x in (got[1] if got else []) if x.get("adopted")), "state_after": state}
    note(f"after the restart: {res['xcons_adopted']} XCON directions adopted {res['adopted_after_s']}s after the "
         f"kill, reservation {state}, probe lost {res['probe_lost']} of {sent}")
    return res


def _ots_flows(bridge: str) -> list[str]:
    """XCON flows on an OTS bridge (the agent's priority-0 drop-all rule left out)."""
    out = subprocess.run(["ovs-ofctl", "--no-names", "dump-flows", bridge], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    return [line.strip() for line in out.splitlines() if "cookie=" in line and "priority=0 " not in line
            and not line.rstrip().endswith("priority=0 actions=drop")]


def _refused(session: Any, url: str, headers: dict, note: Callable[[str], None]) -> dict[str, Any]:
    """A reservation whose OTS refuses its XCON ends FAILED with the reason and leaves nothing.

    Z:2 is taken behind the controller's back (a raw FLOW_MOD Z 2 -> 4, which the controller does not
    count as an XCON), so the stored path's XCON Z 3<->2 is refused by the OTS itself."""
    session.client.flowmod("Z", {"in_port": 2}, 4)
    start = time.time() + 3.0
    r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
        "name": "lab refused", "src": "A:1", "dst": "C:3", "bandwidth": RESERVED_MBPS,
        "start": to_iso(start), "end": to_iso(start + 20)})
    if not r.ok:  # say why (a busy-machine CI run got a bare 400 here)
        raise RuntimeError(f"the refused-XCON reservation was not booked: {r.status_code} {r.text[:500]}")
    rid = r.json()["id"]
    requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
    state = wait_until(lambda: _state(url, headers, rid, ("ACTIVE", "FAILED")), 40, "FAILED")
    detail = requests.get(f"{url}/reservations/{rid}", headers=headers, timeout=30).json()
    out = {"reservation_id": rid, "state": state, "reason": detail.get("state_reason", ""),
           "leftover_xcons": len(session.client.xcons()),
           "leftover_rules": sum(len(_reservation_rules(session.lab.bridge(n))) for n in ("A", "B", "C")),
           "x_flows": _ots_flows(session.lab.bridge("X"))}
    note(f"reservation {rid} with Z:2 taken: {state} ({out['reason']}); XCONs left {out['leftover_xcons']}, "
         f"rules left {out['leftover_rules']}, X flows {len(out['x_flows'])}")
    return out




def _state(url: str, headers: dict, rid: int, want: tuple[str, ...] | None) -> str | None:
    r = _get(f"{url}/reservations/{rid}", headers)
    state = (r or {}).get("state")
    return state if want is None or state in want else None


def _plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3))
    for n, m in enumerate(res["timeline"]):
        ax.plot([m["t"], m["t"]], [0, 1], color="tab:blue", lw=1)
        ax.text(m["t"], 1.02 + 0.12 * (n % 4), m["what"][:48], rotation=0, fontsize=7)
    ax.set_ylim(0, 1.6)
    ax.set_yticks([])
    ax.set_xlabel("seconds since the lab started")
    ax.set_title(f"reservation lifecycle: lit {res.get('lit_after_start_s', '?')} s after start, "
                 f"{res.get('throughput_mbps', 0)} of {res['reserved_mbps']} Mbit/s, released {res.get('released')}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
