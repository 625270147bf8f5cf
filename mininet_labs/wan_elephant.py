"""The WAN lab's elephant stage (issue 25, item 1): the TE loop on a WAN, one elephant among small flows.

Best-effort traffic crosses the optical layer only on circuits the operator lit (``POST /circuit``):
reservation circuits carry reservations alone. So the stage lights one best-effort circuit between two
PoPs joined by a fibre, puts the sending switch's uplink behind the bounded queue that makes drops
visible (:mod:`monitor.drops`), and sends an elephant with a few small flows from one PoP's host to the
other's. The monitor names the elephant on its hot spot, the TE loop (``[te] placement = "otter"``)
places the flows and lights a new circuit for the elephant over other fibres, verifies it on the new
rules' counters, and releases it once the elephant has gone; the stage then takes its own circuit down.

It runs on the lab before the backbone is lit: a fibre carries one wavelength, and on most topologies
(abilene, germany50's dark fibres between most PoP pairs) the fibres the backbone's spanning tree leaves
dark do not join a PoP pair twice. The fibre is the one with the shortest detour (fewest OTS hops once
it is taken out), so the offload's circuit is the shortest chain of XCONs other than the fibre itself.

Recorded (``results.json``'s ``elephant``): the pair and circuits, the TE decision (its ``seconds``:
the placement's PCE time, the flows it moved, the circuit), the plan's time and steps, and the
elephant's start to its offload verified and to its release.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_labs.wan_load import Pop, pops

#: The elephant (4 Mbit/s in 100-ms bursts of 1000-B datagrams: over the 16-packet queue every burst),
#: a steady flow from the SIP port (interactive: it stays) and four small flows (the monitor's imbalance
#: needs small flows beside the elephant): ``sport:start_mbps:end_mbps:size:period`` of
#: :mod:`mininet_labs.traffic`'s ``flows``.
ELEPHANT_SPORT = 45200
FLOWS = (f"{ELEPHANT_SPORT}:4:4:1000:0.1", "5060:0.1:0.1:200:0.02",
         *(f"{46201 + i}:0.2:0.2:500:0.02" for i in range(4)))
DPORT = 5201
QUEUE_RATE, QUEUE_LIMIT = 10_000_000, 16  # the sending uplink's bounded queue: bit/s, packets


@dataclass(frozen=True)
class ElephantPair:
    """Where the stage's elephant goes: ``src`` to ``dst`` over ``xcons`` (a circuit over one fibre),
    with ``detour_hops`` fibres on the shortest other route between their OTSes."""

    src: Pop
    dst: Pop
    xcons: tuple[tuple[str, int, int], ...]
    uplinks: tuple[int, int]  # the packet ports of src and dst the circuit joins
    detour_hops: int

    def link(self) -> tuple[str, int, str, int]:
        """The packet link the circuit makes, as LLDP reports it from ``src``."""
        return (self.src.switch, self.uplinks[0], self.dst.switch, self.uplinks[1])


def _detour(adj: dict[str, set[str]], a: str, b: str) -> int | None:
    """Fibres on the shortest route from ``a`` to ``b`` without their direct fibre (None: there is none)."""
    seen, todo = {a}, deque([(a, 0)])
    while todo:
        node, hops = todo.popleft()
        for nxt in sorted(adj[node]):
            if node == a and nxt == b:
                continue
            if nxt == b:
                return hops + 1
            if nxt not in seen:
                seen.add(nxt)
                todo.append((nxt, hops + 1))
    return None


def elephant_pair(spec: Any) -> ElephantPair:
    """The fibre with the shortest detour (ties: the spec's first), lit from each PoP's last uplink.

    Raises ValueError when no fibre lies on a cycle (a tree of fibres: an offload has nowhere to go)."""
    fibres = spec.links_of_kind("optical")
    adj: dict[str, set[str]] = {}
    for f in fibres:
        if f.a == f.b or f.b in adj.get(f.a, set()):
            continue  # parallel fibres are one in from_topohub; never expected here
        adj.setdefault(f.a, set()).add(f.b)
        adj.setdefault(f.b, set()).add(f.a)
    best: tuple[int, Any] | None = None
    for f in fibres:
        hops = _detour(adj, f.a, f.b)
        if hops is not None and (best is None or hops < best[0]):
            best = (hops, f)
    if best is None:
        raise ValueError("no fibre lies on a cycle: an elephant's offload would have no other route")
    hops, fibre = best
    by_ots = {p.ots: p for p in pops(spec)}
    src, dst = by_ots[fibre.a], by_ots[fibre.b]
    up: dict[str, tuple[int, int]] = {}
    for link in spec.links_of_kind("adaptation"):
        if link.a in (src.switch, dst.switch) and link.a_port > up.get(link.a, (0, 0))[0]:
            up[link.a] = (link.a_port, link.b_port)
    (sp, so), (dp, do) = up[src.switch], up[dst.switch]
    xcons = ((src.ots, so, fibre.a_port), (dst.ots, fibre.b_port, do))
    return ElephantPair(src, dst, xcons, (sp, dp), hops)


def run_elephant(session: Any, spec: Any, work: Path, *, duration: float = 14.0,
                 progress: Any = print) -> dict[str, Any]:
    """The stage on a running WAN lab with the TE loop on and nothing lit (see the module docstring)."""
    from app.controller.client import wait_until
    from mininet_labs.circuits import directed
    from mininet_labs.testbed import wait_ping
    from mininet_labs.traffic import SCRIPT
    from monitor.drops import OvsShapedQueue

    try:
        pair = elephant_pair(spec)
    except ValueError as exc:  # fibres in a tree: nowhere to move an elephant to
        progress(f"wan: elephant stage skipped: {exc}")
        return {"skipped": str(exc)}
    client = session.client
    out: dict[str, Any] = {"src": pair.src.switch, "dst": pair.dst.switch, "circuit": [list(x) for x in pair.xcons],
                           "detour_hops": pair.detour_hops}
    since = client.events()[-1]["seq"]
    client.circuit(list(pair.xcons))
    shaper, hot = OvsShapedQueue(), f"{session.prefix}{pair.src.switch}-eth{pair.uplinks[0]}"
    shaped = False
    try:
        session.wait_links(directed([pair.link()]), timeout=30)
        if not wait_ping(session.lab.node(pair.src.host), pair.dst.ip, 30):
            raise TimeoutError(f"{pair.src.host} does not reach {pair.dst.ip} over the circuit {pair.xcons}")
        subprocess.run(["tc", "qdisc", "del", "dev", hot, "root"], capture_output=True)  # Mininet's HTB
        shaper.apply(hot, max_rate=QUEUE_RATE, limit=QUEUE_LIMIT)
        shaped = True
        progress(f"wan: elephant stage: {pair.src.host} -> {pair.dst.host} over {pair.src.switch}-{pair.dst.switch} "
                 f"(a detour of {pair.detour_hops} fibres for the offload)")
        since = client.events()[-1]["seq"]
        t0 = time.time()
        proc = session.lab.node(pair.src.host).popen(
            [sys.executable, SCRIPT, "flows", pair.dst.ip, str(DPORT), str(duration), *FLOWS],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen: dict[str, float] = {}

        def watch() -> None:
            while proc.poll() is None and "verified" not in seen:
                done = [e for e in client.events(since, "te_done") if e.get("decision") == "offload" and e.get("ok")]
                if done:
                    seen["verified"] = done[0]["t"] - t0
                time.sleep(0.2)

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        try:
            proc.communicate(timeout=duration + 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            th.join(timeout=5)
        decisions = client.events(since, "te_decision")
        offloads = [e for e in decisions if e.get("decision") == "offload"]
        out["decisions"] = [{k: e.get(k) for k in ("decision", "policy", "reason", "flows", "circuit", "seconds")}
                            for e in decisions]
        done = [e for e in client.events(since, "te_done") if e.get("decision") == "offload"]
        out["offloaded"] = bool(done and done[0].get("ok"))
        if offloads:
            off = offloads[0]
            out.update({"decision_s": off.get("seconds"), "moved": off.get("flows"), "offload_circuit": off.get("circuit"),
                        "decided_s": round(off["t"] - t0, 3)})
        if "verified" in seen or out["offloaded"]:
            out["verified_s"] = round(seen.get("verified", done[0]["t"] - t0 if done else 0.0), 3)
            plan = _plan(client, done[0]) if done else None
            if plan:
                out["plan_s"] = plan["s"]
                out["plan_steps"] = plan["steps"]
            wait_until(lambda: [e for e in client.events(since, "te_done") if e.get("decision") == "release"],
                       60, "the offload released once the elephant had gone")
            rel = [e for e in client.events(since, "te_done") if e.get("decision") == "release"][0]
            out["released"] = bool(rel.get("ok"))
            out["released_s"] = round(rel["t"] - t0 - duration, 3)  # after the elephant's end
        progress(f"wan: elephant stage: offload {'verified' if out['offloaded'] else 'NOT done'}"
                 + (f" {out['verified_s']} s after the elephant's start (decision {out.get('decision_s')} s, "
                    f"onto {out.get('offload_circuit')}; plan {out.get('plan_s')} s); released "
                    f"{out.get('released_s')} s after it ended" if out["offloaded"] else
                    f"; decisions: {[d['decision'] + ': ' + str(d['reason']) for d in out['decisions']][:3]}"))
    finally:
        if shaped:
            with contextlib.suppress(Exception):
                shaper.remove(hot)
        client.remove_circuit(list(pair.xcons))
    wait_until(lambda: not client.xcons(), 60, "every XCON of the elephant stage gone")
    return out


def _plan(client: Any, done: dict[str, Any]) -> dict[str, Any] | None:
    """The offload plan's time and its steps' kinds and seconds (``GET /plans``)."""
    plan_id = done.get("plan") or (f"offload{done['offload']}" if done.get("offload") is not None else None)
    rec = next((p for p in client.request("GET", "/plans", timeout=10) if p.get("id") == plan_id), None)
    if rec is None or not rec.get("finished_at"):
        return None
    steps: dict[str, float] = {}
    for s in rec.get("steps", []):
        if s.get("started_at") and s.get("finished_at"):
            steps[s["kind"]] = round(max(steps.get(s["kind"], 0.0), s["finished_at"] - s["started_at"]), 3)
    return {"s": round(rec["finished_at"] - rec["started_at"], 3), "steps": steps}
