"""Fig. 2 testbed with the monitor app on ``fine_backend = "flowstats"`` and latency probes.

1. An elephant beside small flows on circuit A:3–B:1 (bounded drop queue on A-eth3, as in
   test_monitor_fig2.py): *unconstrained imbalance* names exactly its 5-tuple from OpenFlow
   per-flow statistics; the counting rules (learn + count cookies) exist only on A and B while the
   event lasts and are gone from every bridge afterwards (``ovs-ofctl dump-flows``).
2. Latency probes (PACKET_OUT → trap → PACKET_IN) give samples on A:3–B:1; after re-routing to
   the router bypass at Y (packet link A:3–C:1) the probes follow the new link, samples exist
   for it (API and database), and the old link is no longer probed.
"""
from __future__ import annotations

import re
import subprocess
import threading
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.monitor_lab import fig2_monitor_lab
from tests.integration.test_monitor_fig2 import monitor_events, run_traffic

pytestmark = pytest.mark.integration

COUNTING = re.compile(r"cookie=0x4d4c5445[0-9a-f]{6}3[01]\b")  # monitor.flowstats learn / count rules
PROBE_TRAP = "cookie=0x4d4c544500000020"
ELEPHANT = {"src": "10.0.0.1", "dst": "10.0.0.3", "proto": 17, "sport": 45000, "dport": 5201}


def dump_flows(bridge: str, version: str = "OpenFlow13") -> str:
    return subprocess.run(["ovs-ofctl", "-O", version, "dump-flows", bridge], capture_output=True, text=True,
                          timeout=30, check=True).stdout


def counting_rules(lab) -> dict[str, list[str]]:
    """Counting rules per bridge: packet switches over OF1.3, the OTS bridges over OF1.0."""
    out = {}
    for n in ("A", "B", "C", "X", "Y", "Z"):
        text = dump_flows(lab.lab.bridge(n), "OpenFlow13" if n in "ABC" else "OpenFlow10")
        out[n] = [line.strip() for line in text.splitlines() if COUNTING.search(line)]
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    settings = 'interval = 1.0\nfine_backend = "flowstats"\nprobe_interval = 0.2\n'
    with fig2_monitor_lab(tmp_path_factory.mktemp("monflow"), settings) as session:
        yield session


def test_flowstats_names_the_elephant_with_counting_rules_only_on_hot_switches(lab):
    wait_until(lambda: not any(counting_rules(lab).values()), 30, "no counting rules")
    since = lab.client.events()[-1]["seq"]
    mice = [f"{46001 + i}:0.2:0.2:500:0.02" for i in range(4)]
    seen: dict = {}
    stop = threading.Event()

    def poll():
        while not stop.is_set() and not seen:
            evs = monitor_events(lab, since, "unconstrained_imbalance")
            if evs:
                seen["rules"] = counting_rules(lab)  # right after the event: still on
                seen["fine"] = lab.client.request("GET", "/monitor/fine")
                seen["ev"] = evs[0]
            time.sleep(0.2)

    th = threading.Thread(target=poll)
    th.start()
    try:
        run_traffic(lab, 12.0, ["45000:4:4:1000:0.1", *mice])
    finally:
        stop.set()
        th.join()
    assert "ev" in seen, f"no imbalance; monitor events: {monitor_events(lab, since)}; " \
                         f"fine: {lab.client.events(since, 'monitor_fine')}"
    ev = seen["ev"]
    assert ev["circuit"] == "packet:A:3-B:1"
    assert ev["flows"] == [ELEPHANT]
    assert ev["detail"]["drops"] > 0 and ev["detail"]["util"] < 0.6
    rules = seen["rules"]
    print(f"elephant named by flow stats, detail {ev['detail']}; counting rules A={len(rules['A'])} "
          f"B={len(rules['B'])}; top flows {seen['fine']['flows'][:2]}")
    assert {n for n, r in rules.items() if r} == {"A", "B"}, rules
    # the elephant has its own count rule (exact 5-tuple) on A, next to the learn rules
    assert [r for r in rules["A"] if "udp" in r and "tp_src=45000" in r and "nw_src=10.0.0.1" in r], rules["A"]
    assert seen["fine"]["backend"] == "flowstats" and seen["fine"]["switches"] == ["A", "B"]
    top = seen["fine"]["flows"][0]
    assert top["flow"] == ELEPHANT and top["mbps"] > 1.0, seen["fine"]["flows"]
    # after the traffic: elephant gone + hot spot cleared -> every counting rule removed
    wait_until(lambda: not any(counting_rules(lab).values()), 40, "counting rules removed")
    kinds = [e["event"] for e in monitor_events(lab, since)]
    assert "hot_spot_cleared" in kinds and "elephant_gone" in kinds, kinds
    fine = lab.client.events(since, "monitor_fine")
    assert {(e["op"], e["switch"]) for e in fine} == {("enable", "A"), ("enable", "B"), ("disable", "A"),
                                                        ("disable", "B")}
    assert lab.client.request("GET", "/monitor/fine")["switches"] == []


def latency(lab) -> dict:
    return lab.client.request("GET", "/monitor/latency?samples=50")


def probed(lab, link: str, n: int = 10) -> dict | None:
    """The latency snapshot once ``link`` has at least ``n`` probe samples."""
    snap = latency(lab)
    return snap if snap["links"].get(link, {}).get("received", 0) >= n else None


def test_probes_measure_the_link_and_follow_a_reroute(lab):
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed

    old, new = "packet:A:3-B:1", "packet:A:3-C:1"
    for n in "ABC":  # the probe trap rule on every packet switch, none on the OTS bridges
        assert PROBE_TRAP in dump_flows(lab.lab.bridge(n)), n
    for n in "XYZ":
        assert "4d4c5445" not in dump_flows(lab.lab.bridge(n), "OpenFlow10"), n
    snap = wait_until(lambda: probed(lab, old), 15, "probe samples on A:3-B:1")
    link = snap["links"][old]
    assert link["src"] == {"node": "A", "port": 3} and link["dst"] == {"node": "B", "port": 1}
    samples = [s for s in link["samples"] if s["link_ms"] is not None]
    assert samples, link
    assert all(0 <= s["link_ms"] <= s["probe_ms"] for s in samples)
    assert link["control_ms"]["A"] > 0 and link["control_ms"]["B"] > 0
    # data-plane reference (printed, not asserted): h1 -> h3 crosses A-X-Y-B-Y-Z-C, a superset of
    # the probed A:3 -> B:1, so half its minimum ping RTT bounds the link's true one-way delay
    out = lab.lab.node("h1").cmd("ping -c 10 -i 0.2 -n 10.0.0.3")
    rtt = re.search(r"= ([0-9.]+)/", out)
    print(f"A:3-B:1 probe min {min(s['probe_ms'] for s in samples):.3f} ms, link estimate min "
          f"{min(s['link_ms'] for s in samples):.3f} ms, control one-way {link['control_ms']}, "
          f"h1-h3 ping min RTT/2 {float(rtt.group(1)) / 2 if rtt else None} ms")
    since = lab.client.events()[-1]["seq"]
    t_switch = time.time()
    # re-route: router bypass at Y (A:3-C:1) instead of A:3-B:1 + B:2-C:1
    lab.client.remove_circuit(FIG2_CIRCUITS["initial"])
    lab.client.circuit(FIG2_CIRCUITS["bypass"])
    try:
        lab.wait_links(directed(FIG2_CIRCUIT_LINKS["bypass"]), timeout=30)
        snap = wait_until(lambda: probed(lab, new), 20, "probe samples on A:3-C:1")
        assert old not in snap["links"] and "packet:B:2-C:1" not in snap["links"], sorted(snap["links"])
        assert snap["retired"].get(old, 0) >= 10
        link = snap["links"][new]
        assert link["src"] == {"node": "A", "port": 3} and link["dst"] == {"node": "C", "port": 1}
        assert [s for s in link["samples"] if s["link_ms"] is not None]
        changes = lab.client.events(since, "monitor_probe_links")
        assert any(old in e["removed"] for e in changes) and any(new in e["added"] for e in changes), changes
        # the per-interval minima are stored for both links
        from app.db.engine import make_engine
        from monitor.store import MonitorStore

        store = MonitorStore(make_engine(str(lab.work / "capabilities.db")))  # migrated by the controller
        wait_until(lambda: store.series(new, "latency_ms", since=t_switch), 5, "stored latency of A:3-C:1")
        assert store.series(old, "latency_ms", since=t_switch - 30)
        assert not store.series(old, "latency_ms", since=time.time() - 1)
    finally:
        lab.client.remove_circuit(FIG2_CIRCUITS["bypass"])
        lab.client.circuit(FIG2_CIRCUITS["initial"])
