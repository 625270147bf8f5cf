"""An elephant for the several-controller labs: the TE loop offloads it, a takeover must adopt it.

As the single-controller labs do it (``mininet_labs/monitor_lab.py``, ``tests/integration/test_te_restart.py``):
the static circuit ``initial`` (A-X-Y-B-Y-Z-C, packet links A:3-B:1 and B:2-C:1) lit through the leader,
A:3's egress behind the bounded 10 Mbit/s queue that counts drops, and a bursty 4 Mbit/s UDP elephant
h1 -> h3 among four small flows: the monitor (Ts = 1 s, ``flowstats``) names it, the TE loop lights the
temporary circuit A:4-C:2 and steers its 5-tuple there; once it ends, the loop's counters release it.

Fig. 2's switch A has two optical ports, so while an elephant runs (its static circuit and its
offload) no reservation of A can have a circuit: the labs run it on its own.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from app.controller.client import wait_until
from mininet_labs import audit
from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
from mininet_labs.traffic import SCRIPT
from topology import rule_plan

#: the controllers' settings: the monitor as the elastic-offload lab runs it and the TE loop on
#: (min_gain_s: the move must win back about one more switch-over; docs/te-loop.md)
SETTINGS = ("[monitor]\ninterval = 1.0\nfine_backend = \"flowstats\"\n"
            "[te]\nenabled = true\nmin_hold_s = 5.0\npoll = 1.0\ngone_intervals = 3\nmin_gain_s = 0.3\n")
STATIC = FIG2_CIRCUITS["initial"]
STATIC_PORTS = frozenset((o, p) for o, a, b in STATIC for p in (a, b))
OFFLOAD_C_PORT = 2  # the offload circuit A:4 -> C:2 (the joint model's choice on Fig. 2)
A3_RATE, A3_LIMIT = 10_000_000, 16  # the bounded queue of mininet_labs/monitor_lab.py
DPORT = 5201


@contextlib.contextmanager
def static_path(ha: Any, timeout: float = 30.0) -> Iterator[None]:
    """The static circuit lit by the leader, h1 reaching h3 over it, A:3 behind the bounded queue; all of
    it removed afterwards (the circuit through whichever controller leads then)."""
    from mininet_labs.testbed import wait_ping
    from monitor.drops import OvsShapedQueue

    leader = ha.wait_leader(timeout=30)
    leader.client.circuit(STATIC)
    a3 = f"{ha.prefix}A-eth3"
    shaper = OvsShapedQueue()
    try:
        ha.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=timeout)
        if not wait_ping(ha.lab.node("h1"), "10.0.0.3", timeout):
            raise TimeoutError("h1 does not reach h3 over the static circuit")
        subprocess.run(["tc", "qdisc", "del", "dev", a3, "root"], capture_output=True)  # Mininet's HTB
        shaper.apply(a3, max_rate=A3_RATE, limit=A3_LIMIT)
        yield
    finally:
        with contextlib.suppress(Exception):
            shaper.remove(a3)
        ha.wait_leader(timeout=30).client.remove_circuit(STATIC)


def start(ha: Any, sport: int, seconds: float) -> subprocess.Popen:
    """A 4 Mbit/s bursty UDP elephant h1:``sport`` -> h3 among four 0.2 Mbit/s flows, for ``seconds``.

    h1 and h3 forget their neighbours first, so they ARP and the leader learns their addresses: a leader
    that took over learnt the hosts behind its predecessor's rules without their IPv4 address, and the TE
    loop skips an elephant whose hosts it cannot place ("no learnt host has the address ...",
    docs/operations.md "Failure behaviour, measured")."""
    for h in ("h1", "h3"):
        ha.lab.node(h).cmd("ip neigh flush all")
    elephant = f"{sport}:4:4:1000:0.1"
    mice = [f"{sport + 1001 + i}:0.2:0.2:500:0.02" for i in range(4)]
    return ha.lab.node("h1").popen([sys.executable, SCRIPT, "flows", "10.0.0.3", str(DPORT), str(seconds), elephant,
                                    *mice], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen) -> int | None:
    """End the elephant (by PID); the packets it sent when it ended by itself."""
    if proc.poll() is None:
        proc.kill()
    out, _err = proc.communicate(timeout=10)
    return int(out.split()[0]) if proc.returncode == 0 and out.split() else None


def done(member: Any, decision: str, since: float) -> list[dict[str, Any]]:
    """``member``'s successful ``te_done`` entries of one decision (offload / release) after ``since``."""
    return [e for e in member.client.events(0, "te_done") if e["decision"] == decision and e["ok"] and e["t"] > since]


def wait_done(member: Any, decision: str, since: float, timeout: float) -> dict[str, Any] | None:
    """The first such entry, or None after ``timeout`` (the caller records why)."""
    try:
        return wait_until(lambda: done(member, decision, since), timeout, f"the TE loop's {decision}")[0]
    except TimeoutError:
        return None


def decisions(member: Any, since: float) -> list[list[str]]:
    """What the TE loop decided since ``since`` (why an offload did not come)."""
    return [[e["decision"], e["reason"]] for e in member.client.events(0, "te_decision") if e["t"] > since][-8:]


def offload_ports(ha: Any) -> list[tuple[str, int, int]]:
    """XCONs on the OTS bridges that are not the static circuit's: the TE loop's."""
    return [x for x in audit.bridge_xcons(ha) if (x[0], x[1]) not in STATIC_PORTS]


def steered_lost(ha: Any) -> dict[str, int]:
    """The elephant's packets on its offload: what A's ingress steer rule (in from h1, out to A:4) sent into
    the circuit, what C's egress steer rule (in from C:2, out to h3) took out of it; read after the elephant
    stopped and before the release removes the rules. The rules' own counters count only the elephant's
    5-tuple (port counters also count the controller's LLDP packet-outs, which userspace OVS counts apart);
    a rule written again across the takeover would restart its counter and show here."""
    def forward(switch: str, in_port: int) -> int:
        return sum(n for m, n in audit.band_packets(ha, switch, rule_plan.STEER)
                   if f"in_port={in_port}," in m + "," and "nw_src=10.0.0.1" in m)

    into, out_of = forward("A", 1), forward("C", OFFLOAD_C_PORT)
    return {"into_circuit": into, "out_of_circuit": out_of, "lost": into - out_of}


def leftover(ha: Any) -> dict[str, Any]:
    """What is left of the TE loop: XCONs that are not the static circuit's, steer rules, records."""
    return {"xcons": offload_ports(ha), "steer_rules": audit.steer_rules(ha), "te_records": audit.te_records(ha.shared_db)}


def clean(ha: Any) -> bool | None:
    """Nothing of the TE loop left (for polling)."""
    left = leftover(ha)
    return (not left["xcons"] and not left["steer_rules"] and not left["te_records"]) or None


def wait_clean(ha: Any, timeout: float) -> bool:
    try:
        return bool(wait_until(lambda: clean(ha), timeout, "nothing of the offload left"))
    except TimeoutError:
        return False
