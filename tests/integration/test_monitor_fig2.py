"""Fig. 2 testbed with the monitor app: elephant → unconstrained imbalance; rising balanced load →
balanced growth; sFlow (real, from OVS) only on the hot circuit's switches, and off afterwards.

The circuit A:3–B:1 (the initial path's first hop, ODU2 = 10 Mbit/s at unit 1) gets the drop
signal of docs/monitor.md: A-eth3's Mininet HTB is replaced by an OVS linux-htb queue with a
bounded leaf, so the switch reports drops in OpenFlow queue stats.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.monitor_lab import fig2_monitor_lab
from mininet_labs.traffic import SCRIPT

pytestmark = pytest.mark.integration

def sh(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=True).stdout


def sflow_on(bridge: str) -> bool:
    return sh("ovs-vsctl", "get", "bridge", bridge, "sflow").strip() not in ("", "[]")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        sflow_port = u.getsockname()[1]
    settings = ("interval = 1.0\nsflow_sampling = 16\nsflow_polling = 1\n"
                f"sflow_collector_port = {sflow_port}\n")
    with fig2_monitor_lab(tmp_path_factory.mktemp("monfig2"), settings) as session:
        yield session


def run_traffic(lab, seconds: float, flows: list[str]) -> int:
    h1 = lab.lab.node("h1")
    proc = h1.popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5201", str(seconds), *flows],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=seconds + 30)
    assert proc.returncode == 0, err
    return int(out.split()[0])


def bridges(lab) -> dict[str, str]:
    return {n: lab.lab.bridge(n) for n in ("A", "B", "C", "X", "Y", "Z")}


def monitor_events(lab, since: int, kind: str | None = None) -> list[dict]:
    evs = lab.client.events(since, "monitor")
    return [e for e in evs if kind is None or e["event"] == kind]


def fine_state(lab, since: int) -> str:
    """What fine monitoring did (for a failure's message): actions, sFlow rows, datagrams received."""
    rows = sh("ovs-vsctl", "--columns=name,datapath_id,sflow", "list", "bridge")
    sflow = sh("ovs-vsctl", "--columns=_uuid,agent,targets", "list", "sflow")
    return (f"fine: {lab.client.events(since, 'monitor_fine')}; cost: {lab.client.request('GET', '/monitor/cost')}; "
            f"bridges: {' '.join(rows.split())}; sflow rows: {' '.join(sflow.split())}")


def wait_all_sflow_off(lab, timeout: float = 30) -> None:
    wait_until(lambda: not any(sflow_on(b) for b in bridges(lab).values()), timeout, "sFlow off everywhere")


def test_elephant_next_to_small_flows_raises_unconstrained_imbalance(lab):
    wait_all_sflow_off(lab)
    since = lab.client.events()[-1]["seq"]
    elephant = "45000:4:4:1000:0.1"  # 4 Mbit/s average in 100-ms bursts of 50 packets
    mice = [f"{46001 + i}:0.2:0.2:500:0.02" for i in range(4)]  # 0.2 Mbit/s each, smooth
    t_start = time.time()
    seen: dict = {}

    def watch():
        evs = monitor_events(lab, since, "unconstrained_imbalance")
        if evs and not seen:
            seen["ev"] = evs[0]
            seen["sflow"] = {n: sflow_on(b) for n, b in bridges(lab).items()}
        return evs

    import threading

    stop = threading.Event()

    def poll():
        while not stop.is_set() and not seen:
            watch()
            time.sleep(0.2)

    th = threading.Thread(target=poll)
    th.start()
    try:
        run_traffic(lab, 12.0, [elephant, *mice])
    finally:
        stop.set()
        th.join()
    watch()
    assert "ev" in seen, f"no imbalance; monitor events: {monitor_events(lab, since)}; " \
                         f"load: {lab.client.events(since, 'monitor_load')[-5:]}; {fine_state(lab, since)}"
    ev = seen["ev"]
    assert ev["circuit"] == "packet:A:3-B:1"
    assert ev["flows"] == [{"src": "10.0.0.1", "dst": "10.0.0.3", "proto": 17, "sport": 45000, "dport": 5201}]
    assert ev["detail"]["drops"] > 0 and ev["detail"]["util"] < 0.6
    print(f"elephant named {ev['t'] - t_start:.2f} s after its start; detail {ev['detail']}")
    # fine monitoring (real sFlow from OVS named the flow) on exactly A and B while it ran
    assert seen["sflow"] == {"A": True, "B": True, "C": False, "X": False, "Y": False, "Z": False}, (
        seen["sflow"], monitor_events(lab, since), lab.client.events(since, "monitor_fine"))
    # after the traffic: hot spot cleared and elephant gone -> sFlow off everywhere
    wait_all_sflow_off(lab, 30)
    kinds = [e["event"] for e in monitor_events(lab, since) if e["event"] not in ("path_change", "latency_shift")]  # latency probes
    assert kinds[0] == "hot_spot" and "hot_spot_cleared" in kinds and "elephant_gone" in kinds
    fine = lab.client.events(since, "monitor_fine")
    assert {(e["op"], e["switch"]) for e in fine} == {("enable", "A"), ("enable", "B"), ("disable", "A"),
                                                        ("disable", "B")}
    # stored for the UI: events with epoch times, the circuit's utilization series
    from app.db.engine import make_engine
    from monitor.store import MonitorStore

    store = MonitorStore(make_engine(str(lab.work / "capabilities.db")))  # migrated by the controller
    stored = store.events(since=t_start, kind="unconstrained_imbalance")
    assert stored and stored[0]["flows"] == ev["flows"] and stored[0]["t"] <= time.time()
    assert [p for p in store.series("packet:A:3-B:1", "util", since=t_start) if 0 < p.value < 0.6]


def test_rising_balanced_load_raises_balanced_growth(lab):
    wait_all_sflow_off(lab)
    since = lab.client.events()[-1]["seq"]
    flows = [f"{47001 + i}:0.2:0.8:1000:0.01" for i in range(10)]  # 10 similar flows, 2 -> 8 Mbit/s in total
    run_traffic(lab, 14.0, flows)
    evs = monitor_events(lab, since)
    growth = [e for e in evs if e["event"] == "balanced_growth"]
    assert growth, f"no balanced growth; events {evs}; load {lab.client.events(since, 'monitor_load')[-5:]}"
    assert growth[0]["circuit"] in ("packet:A:3-B:1", "packet:B:2-C:1")
    assert growth[0]["detail"]["util"] > 0.7 and growth[0]["detail"]["top_share"] <= 0.5
    assert not [e for e in evs if e["event"] == "unconstrained_imbalance"]
    fine = lab.client.events(since, "monitor_fine")
    assert {e["switch"] for e in fine} <= {"A", "B", "C"}  # packet switches of hot circuits only
    wait_all_sflow_off(lab, 30)
