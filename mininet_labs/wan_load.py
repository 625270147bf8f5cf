"""The WAN lab's loaded stage (issue 25, item 1): a lit backbone and reservations that start together,
on the running lab of :mod:`mininet_labs.wan`, then traffic on every reservation while the controller's
cost is measured. Best-effort traffic does not ride reservation circuits, so each reservation carries
tagged UDP at its booked rate from its source host to its destination host
(:mod:`mininet_labs.tagged_udp`), and what arrived is compared with what was sent.

What it books is chosen here from the lab's spec alone (pure, unit-tested); the lab drives it through
the reservation service, as an operator would:

- **backbone**: a depth-first spanning tree over the fibres, one circuit over each of its fibres, each
  lit by a reservation of its own routed over that fibre (``ero``): every PoP reaches every other over
  lit circuits (the lab gives each PoP the tree's largest degree + 1 uplinks, the spare for the TE
  loop);
- **reservations**: ``n`` small reservations between PoP pairs drawn with gravity weights (the product
  of the PoPs' fibre degrees), each on a VLAN of its own, all starting at the same instant, riding the backbone's circuits (grooming: their rules and
  meters only);
- **arrivals**: while the traffic runs, reservations arrive one by one (a Poisson process of
  :data:`ARRIVAL_RATE` a second, gravity pairs), each booked to start 2 s later and end 8 s after that:
  admission, lighting and release under load, each one's time to ACTIVE after its start and to
  FINISHED after its end.
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mininet_labs import tagged_udp

#: Each reservation's VLAN: the first, then one more per reservation; the backbone's from BACKBONE_VLAN.
FIRST_VLAN = 101
BACKBONE_VLAN = 3001
#: Reservations arriving over the loaded window (a Poisson process), each on a VLAN after the riders'.
ARRIVAL_RATE = 1.0


@dataclass(frozen=True)
class Pop:
    """One PoP of a WAN lab: its packet switch, its OTS, its host (on the switch's port 1)."""

    switch: str
    ots: str
    host: str
    ip: str


def pops(spec: Any) -> list[Pop]:
    """The lab's PoPs in the spec's switch order (``from_topohub``: switch ``s<i>`` on OTS ``o<i>``)."""
    ots_of = {link.a: link.b for link in spec.links_of_kind("adaptation")}
    host_of = {h.switch: h for h in spec.hosts}
    out = []
    for sw in spec.switches:
        if sw.name not in ots_of or sw.name not in host_of:
            raise ValueError(f"{sw.name} has no OTS uplink or no host: not a WAN lab PoP")
        out.append(Pop(sw.name, ots_of[sw.name], host_of[sw.name].name, host_of[sw.name].ip))
    return out


def fibre_degree(spec: Any) -> dict[str, int]:
    """Fibres at each OTS."""
    deg: dict[str, int] = {}
    for link in spec.links_of_kind("optical"):
        deg[link.a] = deg.get(link.a, 0) + 1
        deg[link.b] = deg.get(link.b, 0) + 1
    return deg


def tree_pairs(spec: Any) -> list[tuple[Pop, Pop]]:
    """The edges of a depth-first spanning tree over the fibres from the first PoP (neighbours in name
    order), parent first: PoPs joined by one fibre each, every PoP reached."""
    by_ots = {p.ots: p for p in pops(spec)}
    adj: dict[str, list[str]] = {o: [] for o in by_ots}
    for link in spec.links_of_kind("optical"):
        adj[link.a].append(link.b)
        adj[link.b].append(link.a)
    first = pops(spec)[0].ots
    seen, out = {first}, []

    def visit(ots: str) -> None:
        for nxt in sorted(adj[ots]):
            if nxt not in seen:
                seen.add(nxt)
                out.append((by_ots[ots], by_ots[nxt]))
                visit(nxt)

    visit(first)
    if len(seen) != len(by_ots):
        raise ValueError(f"the fibres do not connect every PoP ({len(seen)} of {len(by_ots)} reached)")
    return out


def uplinks_needed(spec: Any, spare: int = 1) -> int:
    """Uplinks per PoP for the backbone of :func:`tree_pairs` (its largest degree) plus ``spare`` for
    circuits the TE loop lights."""
    deg: dict[str, int] = {}
    for a, b in tree_pairs(spec):
        deg[a.switch] = deg.get(a.switch, 0) + 1
        deg[b.switch] = deg.get(b.switch, 0) + 1
    return max(deg.values(), default=0) + spare


def gravity_pairs(spec: Any, n: int, seed: int = 0) -> list[tuple[Pop, Pop]]:
    """``n`` ordered PoP pairs (repeats allowed), each drawn with weight degree(a) × degree(b)."""
    if n < 0:
        raise ValueError("the number of pairs must be >= 0")
    ps = pops(spec)
    deg = fibre_degree(spec)
    pairs = [(a, b) for a in ps for b in ps if a != b]
    if not pairs:
        raise ValueError("a WAN lab needs at least two PoPs")
    weights = [deg.get(a.ots, 1) * deg.get(b.ots, 1) for a, b in pairs]
    return random.Random(seed).choices(pairs, weights=weights, k=n)


def reservation_requests(pairs: Sequence[tuple[Pop, Pop]], mbps: float, start: str, end: str,
                         first_vlan: int = FIRST_VLAN) -> list[dict[str, Any]]:
    """The reservation service's request bodies, one per pair, each on its own VLAN."""
    if first_vlan + len(pairs) - 1 > 4094:
        raise ValueError(f"{len(pairs)} reservations from VLAN {first_vlan} run past VLAN 4094")
    return [{"name": f"wan {i}: {a.switch} to {b.switch}", "src": f"{a.switch}:1", "dst": f"{b.switch}:1",
             "src_vlan": first_vlan + i, "dst_vlan": first_vlan + i, "bandwidth": mbps, "start": start,
             "end": end} for i, (a, b) in enumerate(pairs)]



def _states(url: str, headers: dict[str, str], ids: Sequence[int]) -> dict[int, str]:
    """The state of each of ``ids`` (one page of at most 500)."""
    import requests

    r = requests.get(url + "/reservations", headers=headers, params={"limit": 500}, timeout=30)
    r.raise_for_status()
    want = set(ids)
    return {int(x["id"]): x["state"] for x in r.json()["items"] if int(x["id"]) in want}


def _book(url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """Create and commit one reservation; its JSON."""
    import requests

    r = requests.post(url + "/reservations", headers=headers, json=body, timeout=60)
    if r.status_code != 201:
        raise RuntimeError(f"{body['name']}: refused with {r.status_code}: {r.text[:300]}")
    made = r.json()
    requests.post(f"{url}/reservations/{made['id']}/commit", headers=headers, timeout=60).raise_for_status()
    return made


def lead_for(one_booking_s: float, n: int, floor_s: float = 10.0) -> float:
    """Seconds from now to a common start that ``n`` bookings of ``one_booking_s`` each make in time
    (twice the estimate: admission slows as the calendar fills)."""
    return floor_s + 2.0 * one_booking_s * n


SETTLED = frozenset({"ACTIVE", "FAILED", "CANCELLED", "FINISHED"})  # a reservation in one of these is not lit later


def book_together(url: str, headers: dict[str, str], requests_: Callable[[float], Sequence[dict[str, Any]]],
                  timeout: float, progress: Any = print) -> dict[str, Any]:
    """Book and commit every request of ``requests_(start)`` (all starting at ``start``, epoch seconds),
    then poll until every one is ACTIVE (or ``timeout`` after ``start``): when each was first seen
    ACTIVE, after ``start``. The start is set from one booking timed first (then cancelled): admission
    took 0.07 s per reservation on abilene and 1.25 s on germany50."""
    import requests

    probe = requests_(time.time() + 3600.0)[0]
    t = time.monotonic()
    made = _book(url, headers, probe)
    one_s = time.monotonic() - t
    requests.post(f"{url}/reservations/{made['id']}/cancel", headers=headers, timeout=60).raise_for_status()
    start = time.time() + lead_for(one_s, len(requests_(0.0)))
    ids = []
    uses: dict[str, int] = {}
    t0 = time.monotonic()
    for body in requests_(start):
        made = _book(url, headers, body)
        ids.append(int(made["id"]))
        for c in (made.get("path") or {}).get("circuits") or []:
            uses[c["use"]] = uses.get(c["use"], 0) + 1
    booked_s = round(time.monotonic() - t0, 2)
    if time.time() >= start:
        raise RuntimeError(f"booking {len(ids)} reservations took {booked_s} s, past their start (one took "
                           f"{one_s:.2f} s)")
    progress(f"wan: {len(ids)} reservations booked in {booked_s} s; they start together in "
             f"{start - time.time():.1f} s")
    active_at: dict[int, float] = {}
    states: dict[int, str] = {}
    while time.time() < start + timeout and len(active_at) < len(ids):
        states = _states(url, headers, ids)
        now = time.time()
        for rid, state in states.items():
            if state == "ACTIVE" and rid not in active_at:
                active_at[rid] = max(0.0, now - start)
        if len(states) == len(ids) and all(st in SETTLED for st in states.values()):
            break  # some failed for good: waiting out the timeout would only hold up the next stage
        time.sleep(0.2)
    after = sorted(active_at.values())
    return {"n": len(ids), "booked_s": booked_s, "one_booking_s": round(one_s, 3), "uses": uses, "active": len(after),
            "active_s": round(after[-1], 2) if len(after) == len(ids) else None,
            "active_median_s": round(after[len(after) // 2], 2) if after else None,
            "states": {s: sum(1 for x in states.values() if x == s) for s in sorted(set(states.values()))}}


def arrival_offsets(rate_per_s: float, window_s: float, seed: int = 0) -> list[float]:
    """Seconds from the window's start at which reservations arrive: a Poisson process of ``rate_per_s``
    (exponential gaps, seeded), every arrival inside ``window_s``."""
    if not rate_per_s > 0 or not window_s > 0:
        raise ValueError(f"arrivals need a rate and a window > 0, got {rate_per_s}/s over {window_s} s")
    rng, t = random.Random(seed), 0.0
    out: list[float] = []
    while True:
        t += rng.expovariate(rate_per_s)
        if t >= window_s:
            return out
        out.append(round(t, 3))


def book_arrivals(url: str, headers: dict[str, str], pairs: Sequence[tuple[Pop, Pop]], offsets: Sequence[float],
                  mbps: float, first_vlan: int, *, lead_s: float = 2.0, hold_s: float = 8.0,
                  timeout: float = 60.0) -> dict[str, Any]:
    """Reservations arriving over time: the i-th booked (and committed) at ``offsets[i]`` s from now, to start
    ``lead_s`` after its booking and end ``hold_s`` later, between ``pairs[i]`` on VLAN ``first_vlan + i``.
    Polls the states meanwhile: when each was first seen ACTIVE after its start, and FINISHED after its end."""
    from app.web.timeutil import to_iso

    if len(pairs) < len(offsets):
        raise ValueError(f"{len(offsets)} arrivals need as many PoP pairs, got {len(pairs)}")
    t_base = time.time()
    booked: dict[int, tuple[float, float]] = {}  # id -> (start, end), epoch s
    book_s: list[float] = []
    refused: list[str] = []
    active: dict[int, float] = {}
    finished: dict[int, float] = {}
    states: dict[int, str] = {}
    todo = list(enumerate(offsets))
    deadline = t_base + (offsets[-1] if offsets else 0.0) + lead_s + hold_s + timeout
    while time.time() < deadline and (todo or len(finished) < len(booked)):
        while todo and time.time() >= t_base + todo[0][1]:
            i, _off = todo.pop(0)
            start = time.time() + lead_s
            a, b = pairs[i]
            body = reservation_requests([(a, b)], mbps, to_iso(start) or "", to_iso(start + hold_s) or "",
                                        first_vlan=first_vlan + i)[0]
            body["name"] = f"arrival {i}: {a.switch} to {b.switch}"
            t = time.monotonic()
            try:
                made = _book(url, headers, body)
            except RuntimeError as exc:
                refused.append(str(exc)[:200])
                continue
            book_s.append(time.monotonic() - t)
            booked[int(made["id"])] = (start, start + hold_s)
        if booked:
            states.update(_states(url, headers, list(booked)))
            now = time.time()
            for rid, state in states.items():
                start, end = booked[rid]
                if state == "ACTIVE" and rid not in active:
                    active[rid] = max(0.0, now - start)
                if state == "FINISHED" and rid not in finished:
                    finished[rid] = max(0.0, now - end)
        time.sleep(0.2)
    ups = sorted(active.values())
    downs = sorted(finished.values())
    return {"n": len(offsets), "booked": len(booked), "refused": refused, "lead_s": lead_s, "hold_s": hold_s,
            "book_median_s": round(sorted(book_s)[len(book_s) // 2], 3) if book_s else None,
            "active": len(ups), "active_median_s": round(ups[len(ups) // 2], 2) if ups else None,
            "active_max_s": round(ups[-1], 2) if ups else None,
            "finished": len(downs), "finished_median_s": round(downs[len(downs) // 2], 2) if downs else None,
            "states": {s: sum(1 for x in states.values() if x == s) for s in sorted(set(states.values()))}}


def backbone_requests(spec: Any, start: str, end: str, mbps: float = 0.1,
                      first_vlan: int = BACKBONE_VLAN) -> list[dict[str, Any]]:
    """One reservation per edge of :func:`tree_pairs`, routed (``ero``) over its fibre: booked first, each
    lights its circuit, and the reservations after them ride these circuits (grooming)."""
    pairs = tree_pairs(spec)
    body = reservation_requests(pairs, mbps, start, end, first_vlan=first_vlan)
    for item, (a, b) in zip(body, pairs, strict=True):
        item["name"] = f"backbone {a.switch}-{b.switch}"
        item["ero"] = [a.switch, a.ots, b.ots, b.switch]
    return body


def run_loaded(session: Any, spec: Any, db: Any, work: Any, *, quick: bool, ts: float, window: float,
               reservations: int | None = None, progress: Any = print) -> dict[str, Any]:
    """The loaded stage on a running WAN lab whose controller keeps its state in ``db``."""
    from app.web.timeutil import to_iso
    from mininet_labs.lab_web import lab_web
    from mininet_labs.wan import window_cost

    n = reservations if reservations is not None else (30 if quick else 100)
    if not 1 <= n <= BACKBONE_VLAN - FIRST_VLAN:
        raise ValueError(f"reservations: 1 to {BACKBONE_VLAN - FIRST_VLAN} (one VLAN each), got {n}")
    out: dict[str, Any] = {}
    res_mbps = 0.1  # the tree's busiest circuit carries at most ~n/2 of them: 5 of its 10 Mbit/s
    with lab_web(db, work / "web.log", extra=("--grooming",)) as web:
        tree = tree_pairs(spec)
        out["backbone"] = book_together(
            web.url, web.headers, lambda t: backbone_requests(spec, to_iso(t) or "", to_iso(t + 7200) or ""),
            timeout=120.0, progress=progress)
        bb = out["backbone"]
        progress(f"wan: backbone of {len(tree)} circuits (one reservation each) ACTIVE {bb['active_s']} s after their "
                 f"start" if bb["active_s"] is not None else
                 f"wan: backbone of {len(tree)} circuits (one reservation each): {bb['active']} of {bb['n']} ACTIVE "
                 f"(states {bb['states']}); the riders light what is missing")
        pairs = gravity_pairs(spec, n, seed=2)
        out["reservations"] = book_together(
            web.url, web.headers,
            lambda t: reservation_requests(pairs, res_mbps, to_iso(t) or "", to_iso(t + 3600) or ""),
            timeout=120.0, progress=progress)
        out["reservations"]["mbps_each"] = res_mbps
        progress(f"wan: {out['reservations']['active']} of {n} reservations ACTIVE, the last "
                 f"{out['reservations']['active_s']} s after their start "
                 f"({out['reservations']['uses']} on the backbone's circuits)")
        flows = traffic_flows(pairs, res_mbps)
        cost: dict[str, Any] = {}
        offsets = arrival_offsets(ARRIVAL_RATE, window, seed=3)[:BACKBONE_VLAN - FIRST_VLAN - n]  # VLANs left
        arrivals: dict[str, Any] = {}

        def arrive() -> None:
            try:
                arrivals.update(book_arrivals(web.url, web.headers, gravity_pairs(spec, len(offsets), seed=3),
                                              offsets, res_mbps, FIRST_VLAN + n))
            except Exception as exc:  # noqa: BLE001 - recorded: the stage's other figures still count
                arrivals["error"] = f"{type(exc).__name__}: {exc}"

        booker = threading.Thread(target=arrive, name="wan-arrivals", daemon=True)

        def during() -> None:
            booker.start()
            cost.update(window_cost(session, window, ts))

        sent, got = tagged_udp.run(session.lab, work, flows, window + 1.0, during=during)
        booker.join(timeout=window + 120.0)
        out.update(cost)
        out["traffic"] = traffic_summary(flows, sent, got)
        out["arrivals"] = arrivals
        progress(f"wan: {arrivals.get('booked')} of {arrivals.get('n')} reservations arriving over the window "
                 f"({ARRIVAL_RATE}/s, each {arrivals.get('hold_s')} s long): {arrivals.get('active')} ACTIVE "
                 f"(median {arrivals.get('active_median_s')} s, max {arrivals.get('active_max_s')} s after their "
                 f"start), {arrivals.get('finished')} FINISHED; states {arrivals.get('states')}"
                 + (f"; {arrivals['error']}" if "error" in arrivals else ""))
        progress(f"wan: loaded with traffic on every reservation ({out['traffic']['sent_mbps']} Mbit/s sent, "
                 f"{out['traffic']['delivered']:.1%} delivered, worst {out['traffic']['worst']:.1%}): "
                 f"CPU {100 * out['cpu_share']:.1f} % of a core, RSS {out['rss_mb']} MB")
    return out


def traffic_flows(pairs: Sequence[tuple[Pop, Pop]], mbps: float, first_vlan: int = FIRST_VLAN) -> list[tagged_udp.Flow]:
    """One tagged UDP flow per reservation of :func:`reservation_requests` (same pairs, same VLANs), at
    its booked rate, to UDP port 20000 + VLAN."""
    return [tagged_udp.Flow(a.host, b.host, first_vlan + i, 20000 + first_vlan + i, mbps)
            for i, (a, b) in enumerate(pairs)]


def traffic_summary(flows: Sequence[tagged_udp.Flow], sent: dict[tagged_udp.Flow, float],
                    got: dict[tagged_udp.Flow, float]) -> dict[str, Any]:
    """Totals and the worst flow's share of what it sent that arrived."""
    share = {f: (got.get(f, 0.0) / sent[f]) if sent.get(f) else 0.0 for f in flows}
    total_sent = sum(sent.values())
    return {"flows": len(flows), "sent_mbps": round(total_sent, 3), "received_mbps": round(sum(got.values()), 3),
            "delivered": round(sum(got.values()) / total_sent, 4) if total_sent else 0.0,
            "worst": round(min(share.values(), default=0.0), 4),
            "below_90pct": sorted(f.vlan for f, x in share.items() if x < 0.9)}
