"""Balanced growth on the Fig. 2 testbed (circuit 'direct', packet link A:3-C:1 behind the bounded
10 Mbit/s queue): many flows growing together get a parallel circuit A:4-C:2 with split rules, part of
the flows cross it, and after the traffic ends the circuit and every split rule are released."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.circuits import FIG2_CIRCUITS
from mininet_labs.monitor_lab import band_rules, fig2_monitor_lab
from mininet_labs.traffic import SCRIPT
from topology import rule_plan

pytestmark = pytest.mark.integration

SETTINGS = ("interval = 1.0\nfine_backend = \"flowstats\"\n"
            "[te]\nenabled = true\npoll = 1.0\ngrow_hold_s = 5.0\ngrow_calm_intervals = 3\n")


def split_rules(lab, switch: str) -> list[str]:
    return band_rules(lab, switch, rule_plan.SPLIT)


def tx_mbps(lab, switch: str, ports: tuple[int, ...], seconds: float = 3.0) -> dict[int, float]:
    """Egress Mbit/s of ``ports`` over ``seconds`` (OVS port counters): how the load splits."""
    def tx() -> dict[int, int]:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-ports", lab.lab.bridge(switch)],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        got, port = {}, None
        for line in out.splitlines():
            if "port " in line and ":" in line and "rx" in line:
                port = line.split("port")[1].split(":")[0].strip()
            elif "tx pkts" in line and port and port.isdigit():
                got[int(port)] = int(line.split("bytes=")[1].split(",")[0])
        return got
    a = tx()
    time.sleep(seconds)
    b = tx()
    return {p: round((b[p] - a[p]) * 8 / 1e6 / seconds, 2) for p in ports}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with fig2_monitor_lab(tmp_path_factory.mktemp("tegrow"), SETTINGS, circuit="direct") as session:
        yield session


def test_balanced_growth_adds_a_parallel_circuit_and_releases_it_when_calm(lab):
    since = lab.client.events()[-1]["seq"]
    flows = [f"{47001 + i}:0.9:0.9:1000:0.02" for i in range(10)]  # 10 x 0.9 Mbit/s, none dominant
    h1 = lab.lab.node("h1")
    t0 = time.time()
    proc = h1.popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5301", "20", *flows],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        grown = wait_until(lambda: [e for e in lab.client.events(since, "te_done")
                                    if e["decision"] == "grow" and e["ok"]], 30, "a parallel circuit")
        assert grown, lab.client.events(since, "te_decision")
        xcons = {(x["ots"], x["in_port"]) for x in lab.client.xcons()}
        assert ("X", 4) in xcons and ("Z", 4) in xcons  # A:4 and C:2 are lit next to the direct circuit
        rules = wait_until(lambda: [r for r in split_rules(lab, "A") if "n_packets=0" not in r], 10,
                           "traffic on the split rules")
        assert rules and all("tp_src=" in r or "udp_src=" in r for r in rules), split_rules(lab, "A")
        split = tx_mbps(lab, "A", (3, 4))
        assert split[4] > 0.5, split  # the parallel circuit carries part of the load
    finally:
        proc.communicate(timeout=60)
    t_end = time.time()
    decision = next(e for e in lab.client.events(since, "te_decision") if e["decision"] == "grow")
    assert decision["share"] == 0.5 and "in_place" in decision
    shrunk = wait_until(lambda: [e for e in lab.client.events(since, "te_done")
                                 if e["decision"] == "shrink" and e["ok"]], 40, "the parallel circuit released")
    growth_ev = next(e for e in lab.client.events(since, "monitor") if e.get("event") == "balanced_growth")
    print(f"\nMEASURED growth: balanced_growth +{growth_ev['t'] - t0:.2f}s, grow decision +{decision['t'] - t0:.2f}s "
          f"(load {decision['load_mbps']} Mbit/s, want {decision['want_mbps']}), plan done +{grown[0]['t'] - t0:.2f}s "
          f"({grown[0]['seconds']} s); egress A:3/A:4 while grown {split[3]}/{split[4]} Mbit/s; traffic ended "
          f"+{t_end - t0:.2f}s, shrink done +{shrunk[0]['t'] - t0:.2f}s ({shrunk[0]['seconds']} s)")
    assert split_rules(lab, "A") == [] and split_rules(lab, "C") == []
    direct = {(o, a) for o, a, b in FIG2_CIRCUITS["direct"]} | {(o, b) for o, a, b in FIG2_CIRCUITS["direct"]}
    assert {(x["ots"], x["in_port"]) for x in lab.client.xcons()} == direct
