"""Lab ``controller-failover``: three controllers elected through etcd run the Fig. 2 testbed; the
leader is killed (SIGKILL), then the next leader is frozen (SIGSTOP) for 10 s and woken (docs/operations.md).

On the way: a reservation A:1 -> C:3 lit before the failover and probed at 1 packet/ms (it must lose
nothing: the data plane needs no controller), a second reservation (A:2 -> C:4) whose start falls inside the
takeover (a new leader must light it), and at the end an audit of the switches against the
database: every XCON and reservation rule on the bridges belongs to a lit reservation, none twice.

``results.json``: ``takeover_s`` (SIGKILL -> every switch confirmed the new master's role),
``freeze_takeover_s`` (SIGSTOP -> the same), ``probe_lost``, the late reservation's
``lit_after_start_s``, ``duplicate_xcons``, ``orphan_xcons``, ``duplicate_rules``, ``orphan_rules``,
``refused_writes`` (what the thawed ex-leader's gate and database fence refused), and the details.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from app.controller.client import ControlApiError, wait_until
from app.web.timeutil import to_iso
from mininet_labs import loss_probe
from mininet_labs.fibre_cut import _dirs, _reserve
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state
from topology import rule_plan

PERIOD = 0.001  # probe: 1 packet/ms
PROBE_PORT = 6004
RESERVED_MBPS = 2.0
#: the late reservation asks more than the first one's circuit has left (10 Mbit/s), so it needs a circuit
#: of its own: a new leader must light it (with less, admission routes it over the lit circuit's packet link)
LATE_MBPS = 9.0
FREEZE_S = 10.0
LATE_AFTER_S = 12.0  # the late reservation starts this long after it is admitted: 1 s after the kill
CONTROLLERS = 3


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the lab; write ``out/results.json`` and ``out/controller_failover.png``; return the results.
    ``quick``: the same steps (they are what the lab checks), shorter probe margins."""
    from mininet_labs.ha_session import HaSession
    from mininet_labs.labclock import LabClock

    out, spec, static, delay = _dirs(Path(out), "fig2")
    clock = LabClock(progress)
    note = clock.note
    work = out / "work"
    res: dict[str, Any] = {"lab": "controller-failover", "quick": quick, "controllers": CONTROLLERS,
                           "probe_period_s": PERIOD, "freeze_s": FREEZE_S}
    with clock.locked(), HaSession(spec, work, controllers=CONTROLLERS, delay=delay,
                                   static_file=str(static)) as ha:
        first = ha.wait_leader()
        note(f"{CONTROLLERS} controllers up, {first.name} leads; Fig. 2 testbed connected to all of them")
        assert ha.lab is not None
        h1, h3 = ha.lab.node("h1"), ha.lab.node("h3")
        for a, ip in ((h1, "10.0.0.3"), (h3, "10.0.0.1")):
            a.cmd(f"ping -c1 -W1 {ip} >/dev/null 2>&1")
        with lab_web(ha.shared_db, out / "web.log") as web:
            url, headers = web.url, web.headers
            # the late reservation is admitted first, on the optical graph as it is now (admitted after the
            # first is lit, it would be routed over that circuit's packet link, which nothing lights)
            late_start = time.time() + LATE_AFTER_S
            late = _late_reservation(url, headers, late_start)
            rid = _reserve(url, headers, "failover probe", "A:1", "C:3", "none")
            note(f"reservation {rid} A:1 -> C:3 ACTIVE (lit by {first.name}); reservation {late} A:2 -> C:4 "
                 f"starts in {late_start - time.time():.1f} s")
            margin = 3.0 if quick else 5.0
            probe_s = max(0.0, late_start - 1.0 - time.time()) + margin + 2.0
            recv, send, got = _probe(h1, h3, work, probe_s)
            time.sleep(max(1.0, late_start - 1.0 - time.time()))  # the kill 1 s before the late start
            t_kill = ha.kill(first)
            note(f"SIGKILL {first.name} (the leader)")
            second = ha.wait_leader(timeout=30, exclude=first)
            takeover = _role_confirmed(second, t_kill, len(spec.switches) + len(spec.ots))
            res["takeover_s"] = takeover
            note(f"{second.name} leads; every switch confirmed it {takeover} s after the kill")
            sent_out, _ = send.communicate(timeout=probe_s + 30)
            recv.communicate(timeout=probe_s + 30)
            sent, t0 = sent_out.split()
            res["probe"] = loss_probe.loss_after({int(k): tuple(v) for k, v in json.loads(got.read_text()).items()},
                                                 int(sent), float(t0), PERIOD, t_kill)
            res["probe_lost"] = res["probe"]["probe_lost"]
            note(f"probe: {res['probe_lost']} of {res['probe']['probe_sent']} lost across the takeover")
            res["late_reservation"] = late
            res["lit_after_start_s"] = _lit_after(second, late, late_start)
            note(f"reservation {late} (start inside the takeover) lit {res['lit_after_start_s']} s after its start")
            ha.restart(first)
            _within(lambda: _sees_all(first, len(spec.switches) + len(spec.ots)), 60)
            note(f"{first.name} back as a follower, every switch connected to it")
            # the next leader frozen: its lease runs out, a third one takes over; woken, it changes nothing
            recv, send, got = _probe(h1, h3, work, FREEZE_S + 4.0, name="probe-freeze")
            time.sleep(1.0)
            t_stop = ha.freeze(second)
            note(f"SIGSTOP {second.name} for {FREEZE_S:g} s")
            third = ha.wait_leader(timeout=30, exclude=second)
            res["freeze_takeover_s"] = _role_confirmed(third, t_stop, len(spec.switches) + len(spec.ots))
            note(f"{third.name} leads {res['freeze_takeover_s']} s after the freeze")
            time.sleep(max(0.0, t_stop + FREEZE_S - time.time()))
            ha.thaw(second)
            time.sleep(2.0)  # it wakes, finds its lease gone, stays quiet
            sent_out, _ = send.communicate(timeout=FREEZE_S + 40)
            recv.communicate(timeout=FREEZE_S + 40)
            sent, t0 = sent_out.split()
            res["probe_freeze"] = loss_probe.loss_after(
                {int(k): tuple(v) for k, v in json.loads(got.read_text()).items()}, int(sent), float(t0), PERIOD, t_stop)
            res["probe_lost"] += res["probe_freeze"]["probe_lost"]
            # an operator (or a stale script) asks the deposed leader for a change: it must refuse it
            res["deposed_change"] = _try_change(second)
            st = second.client.request("GET", "/mastership")
            health = second.client.request("GET", "/health")
            res["thawed"] = {"master": st["master"], "reason": st["reason"],
                             "refused_by_type": st.get("refused_by_type", {}),
                             "db": {k: (health.get("db") or {}).get(k) for k in ("epoch", "refused_writes")}}
            res["refused_writes"] = sum(st.get("refused_by_type", {}).values()) + int(
                (health.get("db") or {}).get("refused_writes") or 0)
            note(f"{second.name} thawed: master={st['master']} ({st['reason']}); refused {res['refused_writes']}")
            time.sleep(2.0)
            leader = ha.wait_leader()
            res["audit"] = _audit(ha, leader, {rid, late})
            res.update({k: res["audit"][k] for k in ("duplicate_xcons", "orphan_xcons", "duplicate_rules",
                                                     "orphan_rules")})
            note("audit: " + ", ".join(f"{k} {res[k]}" for k in ("duplicate_xcons", "orphan_xcons",
                                                                 "duplicate_rules", "orphan_rules")))
            res["states_before_cancel"] = {str(r): _state(url, headers, r, None) for r in (rid, late)}
            for r in (rid, late):
                resp = requests.post(f"{url}/reservations/{r}/cancel", headers=headers, timeout=30)
                if resp.status_code != 409:  # 409: already ended (FAILED): recorded in the states
                    resp.raise_for_status()
            res["released"] = bool(_within(lambda: not _bridge_xcons(ha), 30))
            res["states"] = {str(r): _state(url, headers, r, None) for r in (rid, late)}
        res["leaders"] = [first.name, second.name, third.name]
        res["controller_errors"] = ha.controller_errors()
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "controller_failover.png")
    progress(f"wrote {out / 'results.json'} and {out / 'controller_failover.png'}")
    return res


# ---- steps ------------------------------------------------------------------------------------------
def _within(cond: Callable[[], Any], timeout: float) -> Any:
    try:
        return wait_until(cond, timeout, "condition")
    except TimeoutError:
        return None


def _try_change(member: Any) -> dict[str, Any]:
    """POST /xcon X 2 -> 6 (ports no circuit uses) on ``member``: refused (the gate) or applied?"""
    try:
        member.client.xcon("X", 2, 6, bidirectional=False)
    except ControlApiError as exc:
        return {"refused": True, "status": exc.status, "error": str(exc)}
    member.client.remove_xcon("X", 2, bidirectional=False)
    return {"refused": False}


def _sees_all(member: Any, switches: int) -> bool | None:
    """Every switch is connected to ``member`` (OTS capabilities known): it could take over now."""
    sws = member.client.switches()
    return len([s for s in sws if s["kind"] == "packet" or s["capabilities"]]) >= switches or None


def _late_reservation(url: str, headers: dict, start: float) -> int:
    """A reservation A:2 -> C:4 (h2 -> h4) committed now, starting at ``start`` (inside the coming takeover)."""
    r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
        "name": "failover late start", "src": "A:2", "dst": "C:4", "bandwidth": LATE_MBPS,
        "start": to_iso(start), "end": to_iso(start + 3600)})
    r.raise_for_status()
    rid = int(r.json()["id"])
    requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
    return rid


def _probe(h1: Any, h3: Any, work: Path, seconds: float, name: str = "probe") -> tuple[Any, Any, Path]:
    got = work / f"{name}.json"
    recv = h3.popen([sys.executable, loss_probe.SCRIPT, "recv", str(PROBE_PORT), str(seconds + 2), str(got)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    send = h1.popen([sys.executable, loss_probe.SCRIPT, "send", "10.0.0.3", str(PROBE_PORT), str(seconds),
                     str(PERIOD)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return recv, send, got


def _role_confirmed(member: Any, since: float, switches: int, timeout: float = 20.0) -> float | None:
    """Seconds from ``since`` until every switch confirmed ``member``'s MASTER role (its journal)."""
    def done() -> float | None:
        evs = [e for e in member.client.events(kind="role") if e.get("role") == "master" and e["t"] > since]
        nodes = {e.get("node") for e in evs}
        return max(e["t"] for e in evs) if len(nodes) >= switches else None

    t = _within(done, timeout)
    return None if t is None else round(t - since, 4)


def _lit_after(member: Any, rid: int, start: float, timeout: float = 40.0) -> float | None:
    """Seconds from the reservation's start until the leader reported it lit."""
    def lit() -> float | None:
        for e in member.client.events(kind="reservation"):
            if e.get("reservation_id") == rid and e.get("event") == "reservation_active":
                return float(e["t"])
        return None

    t = _within(lit, timeout)
    return None if t is None else round(t - start, 4)


# ---- audit --------------------------------------------------------------------------------------------
_XCON = re.compile(r"in_port=(\d+).*actions=output:(\d+)")
_COOKIE = re.compile(r"cookie=(0x[0-9a-f]+)")
_PRIORITY = re.compile(r"priority=(\d+)")


def _bridge_xcons(ha: Any) -> list[tuple[str, int, int]]:
    """(OTS, in_port, out_port) of every XCON flow on the OTS bridges (what the hardware holds)."""
    out = []
    for o in ha.spec.ots:
        text = subprocess.run(["ovs-ofctl", "--no-names", "dump-flows", ha.lab.bridge(o.name)], capture_output=True,
                              text=True, timeout=10, check=True).stdout
        for line in text.splitlines():
            m = _XCON.search(line)
            if m and "priority=0 " not in line:
                out.append((o.name, int(m.group(1)), int(m.group(2))))
    return out


def _reservation_rules(ha: Any) -> list[tuple[str, int, str]]:
    """(switch, reservation id, match without priority) of every reservation-band rule on the packet switches."""
    out = []
    for sw in ha.spec.switches:
        text = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", ha.lab.bridge(sw.name)],
                              capture_output=True, text=True, timeout=10, check=True).stdout
        for line in text.splitlines():
            c = _COOKIE.search(line)
            if c is None or not rule_plan.RESERVATION.owns(int(c.group(1), 16)):
                continue
            fields = line.split(" actions=")[0].split()[-1]
            match = ",".join(f for f in fields.split(",") if not f.startswith("priority="))
            out.append((sw.name, rule_plan.cookie_id(int(c.group(1), 16)), match))
    return out


def _audit(ha: Any, leader: Any, ours: set[int]) -> dict[str, Any]:
    """The switches against what the leader says is lit: an XCON or reservation rule of no lit
    reservation is an orphan; one lit twice (two records, or two rules of one match) a duplicate."""
    lit = leader.client.request("GET", "/reservations", timeout=10).get("lit", {})
    owners: Counter[tuple[str, int]] = Counter()
    for c in lit.values():
        for x in c.get("xcons", []):
            owners[(x["ots"], int(x["in_port"]))] += 1
            owners[(x["ots"], int(x["out_port"]))] += 1
    xcons = _bridge_xcons(ha)
    on_bridges = Counter((o, a) for o, a, _b in xcons)
    orphan_x = sorted(f"{o}:{a}->{b}" for o, a, b in xcons if (o, a) not in owners)
    dup_x = sorted({f"{o}:{a}" for (o, a), n in owners.items() if n > 1}
                   | {f"{o}:{a}" for (o, a), n in on_bridges.items() if n > 1})
    rules = _reservation_rules(ha)
    lit_ids = {int(k) for k in lit}
    orphan_r = sorted(f"{sw}:{rid}:{m}" for sw, rid, m in rules if rid not in lit_ids)
    dup_r = sorted(f"{sw}:{rid}:{m}" for (sw, rid, m), n in Counter(rules).items() if n > 1)
    return {"lit": sorted(lit_ids), "expected": sorted(ours), "xcons_on_bridges": len(xcons),
            "reservation_rules": len(rules), "orphan_xcon_list": orphan_x, "duplicate_xcon_list": dup_x,
            "orphan_rule_list": orphan_r, "duplicate_rule_list": dup_r, "orphan_xcons": len(orphan_x),
            "duplicate_xcons": len(dup_x), "orphan_rules": len(orphan_r), "duplicate_rules": len(dup_r)}


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = ["SIGKILL", "SIGSTOP"]
    vals = [res.get("takeover_s") or 0.0, res.get("freeze_takeover_s") or 0.0]
    a.bar(names, vals, color=["tab:red", "tab:orange"])
    a.axhline(2.0, ls="--", c="grey", lw=1)
    a.text(1.45, 2.0, "2 s target", va="bottom", ha="right", fontsize=8, color="grey")
    for i, v in enumerate(vals):
        a.text(i, v, f"{v:.2f} s", ha="center", va="bottom")
    a.set_ylabel("leader failure -> every switch has a new master (s)")
    a.set_title("takeover")
    keys = ["probe_lost", "duplicate_xcons", "orphan_xcons", "duplicate_rules", "orphan_rules", "refused_writes"]
    b.barh(keys, [res.get(k) or 0 for k in keys], color="tab:blue")
    for i, k in enumerate(keys):
        b.text(res.get(k) or 0, i, f" {res.get(k)}", va="center")
    b.set_title(f"late reservation lit {res.get('lit_after_start_s')} s after its start")
    fig.suptitle(f"controller failover: {res.get('controllers')} controllers, Fig. 2 testbed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
