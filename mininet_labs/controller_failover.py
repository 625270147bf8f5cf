"""Lab ``controller-failover``: three controllers elected through etcd run the Fig. 2 testbed; the
leader is killed (SIGKILL), then the next leader is frozen (SIGSTOP) for 10 s and woken (docs/operations.md).

On the way: a reservation A:1 -> C:3 lit before the failover and probed at 1 packet/ms (it must lose
nothing: the data plane needs no controller), a second reservation (A:2 -> C:4) whose start falls inside the
takeover (a new leader must light it), an audit of the switches against the database (every XCON and
reservation rule on the bridges belongs to a lit reservation, none twice) and, once both reservations are
released (Fig. 2's switch A has two optical ports: an elephant needs both), an elephant offloaded by the
TE loop just before the leader of the time is SIGKILLed (``mininet_labs/ha_elephant.py``): the next leader
must adopt it — its XCONs and steer rules still lit, once, its record in the shared ``te_records`` under
the new epoch — and release it once after the elephant has stopped. Last, a plan cut in half: the leader
is SIGKILLed while a hop-by-hop ``POST /circuit`` goes in (as soon as its first hop shows on a bridge);
the next leader must finish it or roll it back, exactly once, leaving the whole circuit or nothing.

``results.json``: ``takeover_s`` (SIGKILL -> every switch confirmed the new master's role),
``freeze_takeover_s`` (SIGSTOP -> the same), ``probe_lost``, the late reservation's
``lit_after_start_s``, ``duplicate_xcons``, ``orphan_xcons``, ``duplicate_rules``, ``orphan_rules``,
``refused_writes`` (what the thawed ex-leader's gate and database fence refused), ``elephant``
(``offloaded_s``, ``takeover_s``, ``te_takeover_s``, ``adopted``, ``duplicate_xcons``,
``duplicate_steer_rules``, ``elephant_lost`` — the elephant's packets that A's steer rule sent into the
offload circuit and C's never took out of it —, ``offload_released_s`` after the elephant stopped, ``releases``, ``clean``), ``mid_plan`` (``xcons_at_kill``,
``outcome`` — done or rolled_back —, ``record`` — its epoch and the claiming leader's —, ``plan_records``,
``recovered_s`` after the kill, ``consistent``, ``clean``), and the details.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from app.controller.client import ControlApiError
from app.web.timeutil import to_iso
from mininet_labs import audit, ha_elephant, loss_probe
from mininet_labs.circuits import FIG2_CIRCUITS
from mininet_labs.fibre_cut import _dirs, _reserve
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state

PERIOD = 0.001  # probe: 1 packet/ms
PROBE_PORT = 6004
RESERVED_MBPS = 2.0
#: the late reservation asks more than the first one's circuit has left (10 Mbit/s), so it needs a circuit
#: of its own: a new leader must light it (with less, admission routes it over the lit circuit's packet link)
LATE_MBPS = 9.0
FREEZE_S = 10.0
LATE_AFTER_S = 12.0  # the late reservation starts this long after it is admitted: 1 s after the kill
CONTROLLERS = 3
ELEPHANT_SPORT = 45000
ELEPHANT_MAX_S = 60.0  # stopped (by PID) once the takeover has been checked
KILL_AFTER_OFFLOAD_S = 0.5  # the leader dies this long after its offload was verified


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
    conf = work / "mlte.toml"
    conf.write_text(ha_elephant.SETTINGS)  # the monitor and the TE loop on, for the elephant
    with clock.locked(), HaSession(spec, work, controllers=CONTROLLERS, delay=delay,
                                   static_file=str(static), config_file=str(conf)) as ha:
        first = ha.wait_leader(stable_s=1.0)
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
            res["late_start_after_kill_s"] = round(late_start - t_kill, 3)  # > 0: the new leader must light it
            note(f"SIGKILL {first.name} (the leader)")
            second = ha.wait_leader(timeout=30, exclude=first, stable_s=1.0)
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
            audit.within(lambda: audit.sees_all(first, len(spec.switches) + len(spec.ots)), 60)
            note(f"{first.name} back as a follower, every switch connected to it")
            # the next leader frozen: its lease runs out, a third one takes over; woken, it changes nothing
            recv, send, got = _probe(h1, h3, work, FREEZE_S + 4.0, name="probe-freeze")
            time.sleep(1.0)
            t_stop = ha.freeze(second)
            note(f"SIGSTOP {second.name} for {FREEZE_S:g} s")
            third = ha.wait_leader(timeout=30, exclude=second, stable_s=1.0)
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
            leader = ha.wait_leader(stable_s=1.0)
            res["audit"] = audit.audit(ha, leader, {rid, late})
            res.update({k: res["audit"][k] for k in ("duplicate_xcons", "orphan_xcons", "duplicate_rules",
                                                     "orphan_rules")})
            note("audit: " + ", ".join(f"{k} {res[k]}" for k in ("duplicate_xcons", "orphan_xcons",
                                                                 "duplicate_rules", "orphan_rules")))
            res["states_before_cancel"] = {str(r): _state(url, headers, r, None) for r in (rid, late)}
            for r in (rid, late):
                resp = requests.post(f"{url}/reservations/{r}/cancel", headers=headers, timeout=30)
                if resp.status_code != 409:  # 409: already ended (FAILED): recorded in the states
                    resp.raise_for_status()
            res["released"] = bool(audit.within(lambda: not audit.bridge_xcons(ha), 30))
            res["states"] = {str(r): _state(url, headers, r, None) for r in (rid, late)}
            # the elephant: A's two optical ports are free again (its static circuit and its offload need both)
            res["elephant"] = _elephant(ha, len(spec.switches) + len(spec.ots), note)
            res["released"] = res["released"] and bool(audit.within(lambda: not audit.bridge_xcons(ha), 30))
            # last: a plan cut in half by the leader's death (the bridges are empty again)
            res["mid_plan"] = _mid_plan_kill(ha, note)
        res["leaders"] = [first.name, second.name, third.name]
        res["controller_errors"] = ha.controller_errors()
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "controller_failover.png")
    progress(f"wrote {out / 'results.json'} and {out / 'controller_failover.png'}")
    return res


# ---- the elephant --------------------------------------------------------------------------------
def _elephant(ha: Any, switches: int, note: Callable[[str], None]) -> dict[str, Any]:
    """An elephant offloaded by the leader, the leader SIGKILLed right after the offload was verified; the new
    leader must adopt it (its XCONs and steer rules still lit, once, its record in the shared ``te_records``
    under the new epoch), and release it once after the elephant has stopped, leaving nothing."""
    out: dict[str, Any] = {"adopted": False}
    with ha_elephant.static_path(ha):
        leader = ha.wait_leader(stable_s=1.0)
        t_start = time.time()
        proc = ha_elephant.start(ha, ELEPHANT_SPORT, ELEPHANT_MAX_S)
        note(f"static circuit 'initial' lit, elephant h1:{ELEPHANT_SPORT} -> h3 started ({leader.name} leads)")
        new = leader
        try:
            off = ha_elephant.wait_done(leader, "offload", t_start, 40)
            if off is None:
                out["decisions"] = ha_elephant.decisions(leader, t_start)
                note(f"the elephant was not offloaded: {out['decisions']}")
                return out
            out["offloaded_s"] = round(off["t"] - t_start, 3)
            lit = sorted(ha_elephant.offload_ports(ha))
            out["offload_xcons"] = [list(x) for x in lit]
            time.sleep(KILL_AFTER_OFFLOAD_S)
            t_kill = ha.kill(leader)
            note(f"elephant offloaded {out['offloaded_s']} s after its start ({len(lit)} XCON directions); "
                 f"SIGKILL {leader.name}")
            new = ha.wait_leader(timeout=30, exclude=leader, stable_s=1.0)
            out["leaders"] = [leader.name, new.name]
            out["takeover_s"] = _role_confirmed(new, t_kill, switches)
            tk = audit.within(lambda: [e for e in new.client.events(0, "te_takeover") if e["t"] > t_kill], 40)
            out["te_takeover"] = tk[0] if tk else None
            out["te_takeover_s"] = round(tk[0]["t"] - t_kill, 3) if tk else None
            out["running_at_takeover"] = proc.poll() is None
            out.update(_adoption(ha, new, lit))
            note(f"{new.name} leads; TE takeover {out['te_takeover_s']} s after the kill: adopted {out['adopted']}, "
                 f"duplicate XCONs {out['duplicate_xcons']}, duplicate steer rules {out['duplicate_steer_rules']}")
        finally:
            out["elephant_sent"] = ha_elephant.stop(proc)
        t_end = time.time()
        time.sleep(1.0)  # what is in flight arrives; the release needs gone_intervals polls (3 s)
        out["steered"] = ha_elephant.steered_lost(ha)
        out["elephant_lost"] = out["steered"]["lost"]
        rel = ha_elephant.wait_done(new, "release", t_kill, 40)
        out["offload_released_s"] = None if rel is None else round(rel["t"] - t_end, 3)
        out["releases"] = len(ha_elephant.done(new, "release", t_kill))
        out["clean"] = ha_elephant.wait_clean(ha, 20)
        out["left"] = ha_elephant.leftover(ha)
        note(f"elephant stopped; offload released {out['offload_released_s']} s later ({out['releases']} release), "
             f"lost on its circuit {out['elephant_lost']}, nothing left: {out['clean']}")
    return out


def _adoption(ha: Any, new: Any, lit: list[tuple[str, int, int]]) -> dict[str, Any]:
    """Is the offload adopted: the takeover pass kept it, the new leader's loop owns it (``GET /te``), its
    XCONs are the ones lit before the kill (none twice), its steer rules there once, its record ``lit``
    under the new leader's epoch?"""
    te = new.client.request("GET", "/te")
    epoch = new.client.request("GET", "/mastership").get("epoch")
    xcons = ha_elephant.offload_ports(ha)
    steer = audit.steer_rules(ha)
    records = audit.te_records(ha.shared_db)
    tk = [e for e in new.client.events(0, "te_takeover")]
    dup_x = sorted({f"{o}:{a}" for o, a, _b in xcons if sum(1 for x in xcons if x[:2] == (o, a)) > 1})
    adopted = (bool(tk) and tk[-1]["adopted"] == 1 and tk[-1]["released"] == 0 and len(te.get("offloads", {})) == 1
               and sorted(set(xcons)) == lit and bool(steer)
               and [(r["kind"], r["state"], r["epoch"]) for r in records] == [("offload", "lit", epoch)])
    return {"adopted": adopted, "te": {"adopted": te.get("adopted"), "offloads": sorted(te.get("offloads", {}))},
            "epoch": epoch, "te_records": records, "xcons_after_takeover": [list(x) for x in xcons],
            "steer_rules": len(steer), "duplicate_xcons": len(dup_x), "duplicate_steer_rules": len(audit.duplicates(steer))}


# ---- a plan cut in half ------------------------------------------------------------------------------
MID_PLAN_CIRCUIT = "initial"  # four hops X, Y, Y, Z applied one after the other (~0.2 s each)


def _mid_plan_kill(ha: Any, note: Callable[[str], None]) -> dict[str, Any]:
    """``POST /circuit`` (Fig. 2's 'initial' circuit, hop by hop) to the leader, SIGKILLed as soon as the
    first hop shows on its bridge: the plan's record is left ``running`` with a step done. The next leader
    must finish it or roll it back, exactly once (its claim on the record, docs/updates.md "Plans a dead
    leader left half-done"), and the bridges must then hold either the whole circuit, once, or nothing."""
    hops = FIG2_CIRCUITS[MID_PLAN_CIRCUIT]
    whole = sorted({(o, a, b) for o, a, b in hops} | {(o, b, a) for o, a, b in hops})
    leader = ha.wait_leader(stable_s=1.0)
    before = _circuit_plan_ids(ha.shared_db)
    answer: dict[str, Any] = {}

    def post() -> None:
        try:
            answer["reply"] = leader.client.request(
                "POST", "/circuit", {"xcons": [{"ots": o, "in_port": a, "out_port": b} for o, a, b in hops],
                                     "parallel": False}, timeout=30)
        except (ControlApiError, OSError) as exc:  # the leader died under it: expected
            answer["error"] = str(exc)[:200]

    t = threading.Thread(target=post, name="mid-plan-post", daemon=True)
    t.start()
    first_hop = audit.within(lambda: [x for x in audit.bridge_xcons(ha) if x[0] == hops[0][0]], 10)
    at_kill = audit.bridge_xcons(ha)
    t_kill = ha.kill(leader)
    t.join(timeout=30)
    out: dict[str, Any] = {"killed": leader.name, "xcons_at_kill": [list(x) for x in at_kill],
                           "first_hop_seen": bool(first_hop), "answer": answer}
    new = ha.wait_leader(timeout=30, exclude=leader, stable_s=1.0)
    out["new_leader"] = new.name
    note(f"POST /circuit to {leader.name}, SIGKILLed with {len(at_kill)} of {len(whole)} XCON directions on the "
         f"bridges; {new.name} leads")

    def closed() -> dict[str, Any] | None:
        rows = [r for r in _circuit_plans(ha.shared_db) if r["id"] not in before]
        return rows[-1] if rows and rows[-1]["claim_done"] else None

    row = audit.within(closed, 60)
    out["recovered_s"] = None if row is None else round(float(row["finished_at"]) - t_kill, 3)
    records = [r for r in _circuit_plans(ha.shared_db) if r["id"] not in before]
    out["record"] = row if row is not None else (records[-1] if records else None)
    out["plan_records"] = len(records)
    after = audit.bridge_xcons(ha)
    out["xcons_after"] = [list(x) for x in after]
    outcome = None if row is None else row["state"]
    out["outcome"] = outcome
    # the bridges agree with the outcome: the whole circuit once, or nothing at all
    out["consistent"] = (outcome == "done" and sorted(after) == whole) or (outcome == "rolled_back" and not after)
    note(f"{new.name} closed the half-done plan: {outcome} {out['recovered_s']} s after the kill; "
         f"bridges consistent: {out['consistent']}")
    if after:
        new.client.request("DELETE", "/circuit", {"xcons": [{"ots": o, "in_port": a} for o, a, _b in hops]},
                           timeout=30)
    out["clean"] = bool(audit.within(lambda: not audit.bridge_xcons(ha), 30))
    return out


def _circuit_plans(db_url: str) -> list[dict[str, Any]]:
    """The plan records of ``POST /circuit`` in the shared database, oldest first."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, state, epoch, claimed_epoch, claim_done, finished_at, step_states "
                                     "FROM plans WHERE source = 'circuit' ORDER BY id")).mappings().all()
    finally:
        engine.dispose()
    return [dict(r) for r in rows]


def _circuit_plan_ids(db_url: str) -> set[int]:
    return {int(r["id"]) for r in _circuit_plans(db_url)}


# ---- steps ------------------------------------------------------------------------------------------
def _try_change(member: Any) -> dict[str, Any]:
    """POST /xcon X 2 -> 6 (ports no circuit uses) on ``member``: refused (the gate) or applied?"""
    try:
        member.client.xcon("X", 2, 6, bidirectional=False)
    except ControlApiError as exc:
        return {"refused": True, "status": exc.status, "error": str(exc)}
    member.client.remove_xcon("X", 2, bidirectional=False)
    return {"refused": False}


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

    t = audit.within(done, timeout)
    return None if t is None else round(t - since, 4)


def _lit_after(member: Any, rid: int, start: float, timeout: float = 40.0) -> float | None:
    """Seconds from the reservation's start until the leader reported it lit."""
    def lit() -> float | None:
        for e in member.client.events(kind="reservation"):
            if e.get("reservation_id") == rid and e.get("event") == "reservation_active":
                return float(e["t"])
        return None

    t = audit.within(lit, timeout)
    return None if t is None else round(t - start, 4)


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    el = res.get("elephant") or {}
    names = ["SIGKILL", "SIGSTOP", "SIGKILL,\nelephant offloaded"]
    vals = [res.get("takeover_s") or 0.0, res.get("freeze_takeover_s") or 0.0, el.get("takeover_s") or 0.0]
    a.bar(names, vals, color=["tab:red", "tab:orange", "tab:purple"])
    a.axhline(2.0, ls="--", c="grey", lw=1)
    a.text(2.45, 2.0, "2 s target", va="bottom", ha="right", fontsize=8, color="grey")
    for i, v in enumerate(vals):
        a.text(i, v, f"{v:.2f} s", ha="center", va="bottom")
    a.set_ylabel("leader failure -> every switch has a new master (s)")
    a.set_title("takeover")
    el = {**el, "lost": el.get("elephant_lost")}
    counts = {k: res.get(k) for k in ("probe_lost", "duplicate_xcons", "orphan_xcons", "duplicate_rules", "orphan_rules",
                                    "refused_writes")}
    counts.update({f"elephant {k}": el.get(k) for k in ("lost", "duplicate_xcons", "duplicate_steer_rules")})
    b.barh(list(counts), [v or 0 for v in counts.values()], color="tab:blue")
    for i, v in enumerate(counts.values()):
        b.text(v or 0, i, f" {v}", va="center")
    b.set_title(f"late reservation lit {res.get('lit_after_start_s')} s after its start; elephant adopted "
                f"{el.get('adopted')}, released {el.get('offload_released_s')} s after it stopped", fontsize=8)
    fig.suptitle(f"controller failover: {res.get('controllers')} controllers, Fig. 2 testbed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
