"""Soak: several controllers run the Fig. 2 testbed for a while under a steady churn of work and failures.

Three controllers elected through etcd (``mininet_labs/ha_session.py``); for ``minutes``: reservations
are created through the REST API, lit at their start, and cancelled or left to end, one after the other
on alternating host pairs; every ``elephant_every`` seconds an elephant instead (``mininet_labs/ha_elephant.py``:
its static circuit lit, the TE loop offloads it, it stops, the loop releases it, nothing of it left); every
``kill_every`` seconds the leader is SIGKILLed and started again (it rejoins as a follower). Every few seconds the resident memory (RSS) and open file descriptors of every
controller process are sampled from ``/proc``. At the end nothing may be left over: no reservation
still lit, no XCON on an OTS bridge, no reservation rule on a packet switch.

``results.json``: ``cycles`` (reservations lit and released), ``elephants`` (each: ``offloaded_s`` after
its start, ``released_s`` after its end, ``clean``), ``elephants_offloaded``, ``elephants_released``,
``elephants_left`` (TE records and steer rules at the end), ``kills``, per controller process its
samples (``rss_mb``, ``fds``) and growth from its first sample after warm-up to its last, ``leftover``
and the lost reservations (created but never ACTIVE). ``make soak`` runs 10 minutes; the CI check 2.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import requests

from app.controller.client import ControlApiError, wait_until
from app.web.timeutil import to_iso
from mininet_labs import audit, ha_elephant
from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, directed
from mininet_labs.fibre_cut import _dirs
from mininet_labs.lab_web import get as _get
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state

PAIRS = (("A:1", "C:3"), ("A:2", "C:4"))
SAMPLE_S = 5.0
ELEPHANT_EVERY_S = 40.0  # one elephant (offloaded, then released) this often; the first after half of it
ELEPHANT_SPORT = 45000
WARMUP_S = 20.0  # samples before this are the process warming up (imports, first reservations)


def proc_stats(pid: int) -> tuple[float, int] | None:
    """(RSS in MB, open file descriptors) of a live process, from /proc; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return None
    rss_kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return round(rss_kb / 1024, 1), fds


def growth(samples: list[dict[str, Any]], started: float) -> dict[str, Any] | None:
    """From the first sample after the warm-up to the last one of one process."""
    warm = [s for s in samples if s["t"] - started >= WARMUP_S]
    if len(warm) < 2:
        return None
    first, last = warm[0], warm[-1]
    return {"seconds": round(last["t"] - first["t"], 1), "rss_mb": round(last["rss_mb"] - first["rss_mb"], 1),
            "fds": last["fds"] - first["fds"], "rss_mb_max": max(s["rss_mb"] for s in warm)}


def run(out: Path, *, quick: bool = False, minutes: float | None = None, kill_every: float = 60.0,
        elephant_every: float = ELEPHANT_EVERY_S, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the soak (``quick``: 2 minutes, else ``minutes`` or 10); write ``out/results.json`` and
    ``out/soak.png``; return the results. ``elephant_every``: seconds between elephants (0: none)."""
    from mininet_labs.ha_session import HaSession
    from mininet_labs.labclock import LabClock

    seconds = 60.0 * (minutes if minutes is not None else (2.0 if quick else 10.0))
    if seconds <= 0 or kill_every <= 0 or elephant_every < 0:
        raise ValueError("need minutes > 0, kill_every > 0 and elephant_every >= 0")
    out, spec, static, delay = _dirs(Path(out), "fig2")
    clock = LabClock(progress)
    note = clock.note
    work = out / "work"
    res: dict[str, Any] = {"lab": "soak", "quick": quick, "seconds": seconds, "kill_every_s": kill_every,
                           "elephant_every_s": elephant_every, "controllers": 3}
    n_switches = len(spec.switches) + len(spec.ots)
    conf = work / "mlte.toml"
    conf.write_text(ha_elephant.SETTINGS)  # the monitor and the TE loop on, for the elephants
    with clock.locked(), HaSession(spec, work, controllers=3, delay=delay, static_file=str(static),
                                   config_file=str(conf)) as ha:
        assert ha.lab is not None
        for h, ip in (("h1", "10.0.0.3"), ("h2", "10.0.0.4"), ("h3", "10.0.0.1"), ("h4", "10.0.0.2")):
            ha.lab.node(h).cmd(f"ping -c1 -W1 {ip} >/dev/null 2>&1")
        samples: dict[str, list[dict[str, Any]]] = {}
        born: dict[str, float] = {}
        with lab_web(ha.shared_db, out / "web.log") as web:
            url, headers = web.url, web.headers
            t0 = time.time()
            next_kill, next_sample = t0 + kill_every, t0
            next_elephant = t0 + elephant_every / 2 if elephant_every else float("inf")
            elephants: list[dict[str, Any]] = []
            cycles, kills, lost, i = 0, 0, [], 0
            errors: list[str] = []
            hosts_back: list[float] = []
            note(f"soak for {seconds:g} s, the leader killed every {kill_every:g} s")
            while time.time() - t0 < seconds:
                now = time.time()
                if now >= next_sample:
                    for m in ha.members:
                        if m.proc is not None and m.proc.poll() is None:
                            key = f"{m.name}#{m.proc.pid}"
                            born.setdefault(key, now)
                            st = proc_stats(m.proc.pid)
                            if st is not None:
                                samples.setdefault(key, []).append({"t": now, "rss_mb": st[0], "fds": st[1]})
                    next_sample = now + SAMPLE_S
                if now >= next_kill:
                    leader = ha.wait_leader(timeout=30, stable_s=1.0)
                    t_kill = ha.kill(leader)
                    kills += 1
                    ha.wait_leader(timeout=30, exclude=leader, stable_s=1.0)
                    # the reservation service admits on host ports again once the new leader's snapshot has them
                    wait_until(partial(_hosts_published, url, headers, len(spec.hosts)), 30, "the hosts in the snapshot")
                    hosts_back.append(round(time.time() - t_kill, 2))
                    ha.restart(leader)
                    wait_until(partial(audit.sees_all, leader, n_switches), 60, "the restarted controller")
                    note(f"kill {kills}: {leader.name} killed and back; {cycles} reservations so far")
                    next_kill = time.time() + kill_every
                    continue
                if now >= next_elephant:
                    elephants.append(_elephant(ha, ELEPHANT_SPORT + 10 * len(elephants)))
                    note(f"elephant {len(elephants)}: {elephants[-1]}")
                    next_elephant = time.time() + elephant_every
                    continue
                src, dst = PAIRS[i % len(PAIRS)]
                i += 1
                try:
                    rid = _cycle(url, headers, src, dst, cancel=i % 2 == 0)
                except CycleError as exc:
                    rid = None
                    errors.append(str(exc))
                if rid is None:
                    lost.append(i)
                else:
                    cycles += 1
            res.update(cycles=cycles, kills=kills, lost_reservations=len(lost), errors=errors[:20],
                       hosts_published_after_kill_s=hosts_back, elephants=elephants,
                       elephants_offloaded=sum(1 for e in elephants if e["offloaded_s"] is not None),
                       elephants_released=sum(1 for e in elephants if e["released_s"] is not None))
            time.sleep(2.0)
            leader = ha.wait_leader(timeout=30)
            still = leader.client.request("GET", "/reservations", timeout=10).get("lit", {})
            ok = wait_until(lambda: (not audit.bridge_xcons(ha) and not audit.reservation_rules(ha)) or None, 30,
                            "nothing left on the switches")
            left = ha_elephant.leftover(ha)
            res["leftover"] = {"lit": sorted(still), "xcons": audit.bridge_xcons(ha), "rules": audit.reservation_rules(ha),
                               "steer_rules": left["steer_rules"], "te_records": left["te_records"],
                               "clean": bool(ok) and not left["steer_rules"] and not left["te_records"]}
            res["elephants_left"] = len(left["te_records"]) + len(left["steer_rules"])
        res["processes"] = {k: {"samples": v, "growth": growth(v, born[k])} for k, v in samples.items()}
        res["controller_errors"] = ha.controller_errors()
    longest = max(res["processes"].values(), key=lambda p: len(p["samples"]), default=None)
    res["longest_lived_growth"] = longest["growth"] if longest else None
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    _plot(res, out / "soak.png")
    note(f"{res['cycles']} reservations lit and released, {res['elephants_offloaded']} elephants offloaded and "
         f"{res['elephants_released']} released, {res['kills']} leaders killed, "
         f"longest-lived controller: {res['longest_lived_growth']}")
    progress(f"wrote {out / 'results.json'} and {out / 'soak.png'}")
    return res


def _elephant(ha: Any, sport: int) -> dict[str, Any]:
    """One elephant (:func:`_offload_once`); a step that fails (the static circuit refused, the testbed not
    answering) is recorded with its reason, and the soak goes on."""
    out: dict[str, Any] = {"offloaded_s": None, "released_s": None, "clean": False}
    # the last reservation has ended in the database; its XCONs may still be on their way out (X:1 ...)
    out["xcons_gone_before"] = bool(audit.within(lambda: not audit.bridge_xcons(ha), 30))
    try:
        _offload_once(ha, sport, out)
    except (ControlApiError, TimeoutError, RuntimeError) as exc:  # RuntimeError: LabStartError (no leader)
        out["error"] = str(exc)[:300]
    gone = {(a, ap) for a, ap, _b, _bp in directed(FIG2_CIRCUIT_LINKS["initial"])}
    out["links_gone"] = bool(audit.within(lambda: not {(x[0], x[1]) for x in ha.seen_links()} & gone, 30))
    return out


def _offload_once(ha: Any, sport: int, out: dict[str, Any]) -> None:
    """Its static circuit lit, the elephant offloaded by the TE loop, stopped 2 s after the offload, released
    by the loop's counters, nothing of it left; then its static circuit removed and its packet links gone
    from the leader's view (a reservation admitted next must not be routed over them)."""
    with ha_elephant.static_path(ha):
        leader = ha.wait_leader(timeout=30)
        t0 = time.time()
        proc = ha_elephant.start(ha, sport, 30.0)
        try:
            off = ha_elephant.wait_done(leader, "offload", t0, 30)
            if off is not None:
                out["offloaded_s"] = round(off["t"] - t0, 3)
                time.sleep(2.0)
            else:
                out["decisions"] = ha_elephant.decisions(leader, t0)
        finally:
            ha_elephant.stop(proc)
        t_end = time.time()
        if off is not None:
            rel = ha_elephant.wait_done(leader, "release", t0, 30)
            out["released_s"] = None if rel is None else round(rel["t"] - t_end, 3)
        out["clean"] = ha_elephant.wait_clean(ha, 20)


def _hosts_published(url: str, headers: dict, n: int) -> bool | None:
    """The topology snapshot the web reads has ``n`` hosts (the leader learnt them and wrote it)."""
    graph = (_get(url + "/topology", headers) or {}).get("graph") or {}
    return sum(1 for node in graph.get("nodes", []) if node.get("kind") == "host") >= n or None


class CycleError(RuntimeError):
    """A reservation of the churn could not be created (the reason is kept in results.json)."""


def _cycle(url: str, headers: dict, src: str, dst: str, cancel: bool) -> int | None:
    """One reservation: lit at its start (2 s on), then cancelled or left to end (4 s window); waits until
    it is released. Its id, or None when it was never lit."""
    start = time.time() + 2.0
    r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
        "name": f"soak {src}->{dst}", "src": src, "dst": dst, "bandwidth": 2.0,
        "start": to_iso(start), "end": to_iso(start + 4.0)})
    if r.status_code >= 400:  # recorded by the caller with the reason (a 409: the window still booked)
        raise CycleError(f"POST /reservations {src} -> {dst}: HTTP {r.status_code} {r.text.strip()[:300]}")
    rid = int(r.json()["id"])
    requests.post(f"{url}/reservations/{rid}/commit", headers=headers, timeout=30).raise_for_status()
    try:
        state = wait_until(lambda: _state(url, headers, rid, ("ACTIVE", "FAILED", "FINISHED")), 30, "lit")
    except TimeoutError:
        state = None
    if cancel and state == "ACTIVE":
        requests.post(f"{url}/reservations/{rid}/cancel", headers=headers, timeout=30)
    try:
        wait_until(lambda: _state(url, headers, rid, ("FINISHED", "CANCELLED", "FAILED")), 30, "released")
    except TimeoutError:
        return None
    return rid if state in ("ACTIVE", "FINISHED") else None


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    t0 = min((s["t"] for p in res["processes"].values() for s in p["samples"]), default=0.0)
    for name, p in sorted(res["processes"].items()):
        ts = [s["t"] - t0 for s in p["samples"]]
        a.plot(ts, [s["rss_mb"] for s in p["samples"]], label=name)
        b.plot(ts, [s["fds"] for s in p["samples"]], label=name)
    a.set_xlabel("s")
    a.set_ylabel("RSS (MB)")
    b.set_xlabel("s")
    b.set_ylabel("open file descriptors")
    a.legend(fontsize=7)
    fig.suptitle(f"soak: {res.get('cycles')} reservations, {res.get('elephants_offloaded')} elephants offloaded and "
                 f"{res.get('elephants_released')} released, {res.get('kills')} leaders killed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
