"""``[te] placement = "otter"`` on the Fig. 2 testbed: an elephant among small flows on circuit A:3-B:1
is named by the monitor; the OTTER placement over every monitored flow moves it (alone) onto a new
circuit, while an interactive flow (UDP source port 5060, classed interactive by port) and the small
flows keep their path over B; the circuit is released once the elephant is gone."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.circuits import FIG2_CIRCUITS
from mininet_labs.monitor_lab import band_rules, fig2_monitor_lab
from mininet_labs.traffic import SCRIPT
from topology import rule_plan

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]  # the lab lock may be held for minutes

SETTINGS = ("interval = 1.0\nfine_backend = \"flowstats\"\n"
            "[te]\nenabled = true\nplacement = \"otter\"\nmin_hold_s = 5.0\npoll = 1.0\ngone_intervals = 3\n")
ELEPHANT = "udp 10.0.0.1:45200 -> 10.0.0.3:5201"
SIP = "udp 10.0.0.1:5060 -> 10.0.0.3:5201"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with fig2_monitor_lab(tmp_path_factory.mktemp("teplace"), SETTINGS) as session:
        yield session


def test_otter_offloads_the_elephant_and_the_interactive_flow_keeps_its_path(lab):
    since = lab.client.events()[-1]["seq"]
    elephant = "45200:4:4:1000:0.1"  # 4 Mbit/s in 100-ms bursts
    sip = "5060:0.1:0.1:200:0.02"  # a small steady flow from the SIP port: interactive
    mice = [f"{46201 + i}:0.2:0.2:500:0.02" for i in range(4)]
    h1 = lab.lab.node("h1")
    t0 = time.time()
    proc = h1.popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5201", "14", elephant, sip, *mice],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}

    def watch() -> None:
        while proc.poll() is None:
            done = [e for e in lab.client.events(since, "te_done") if e["decision"] == "offload" and e["ok"]]
            if done and "rules" not in seen:
                seen["offloaded"] = done[0]["t"] - t0
                seen["rules"] = {sw: band_rules(lab, sw, rule_plan.STEER) for sw in ("A", "B", "C")}
            time.sleep(0.3)

    th = threading.Thread(target=watch)
    th.start()
    try:
        proc.communicate(timeout=60)
    finally:
        th.join()
    decisions = lab.client.events(since, "te_decision")
    offloads = [e for e in decisions if e["decision"] == "offload"]
    assert offloads, decisions or lab.client.events(since, "monitor")
    off = offloads[0]
    assert off["policy"] == "otter" and off["flows"] == [ELEPHANT], off  # only the elephant moves
    assert off["circuit"] and "new circuit" in off["reason"], off
    assert off["kept"].get(SIP) == "interactive", off  # the interactive flow stays (PATHPIN)
    assert "rules" in seen, lab.client.events(since, "te_done")
    a_rules = [r for r in seen["rules"]["A"] if "in_port=1" in r]
    assert a_rules and all("tp_src=45200" in r or "udp_src=45200" in r for r in a_rules), seen["rules"]
    assert not any("5060" in r for rules in seen["rules"].values() for r in rules), seen["rules"]
    assert seen["rules"]["B"] == [], seen["rules"]  # the new path does not cross B
    assert any("n_packets=0" not in r for r in a_rules), a_rules  # the elephant crossed the new circuit
    print(f"otter placement: elephant offloaded onto {off['circuit']} and verified {seen['offloaded']:.2f} s "
          f"after its start; kept {sorted(off['kept'])}; placement took {off['seconds']} s")
    wait_until(lambda: [e for e in lab.client.events(since, "te_done") if e["decision"] == "release" and e["ok"]],
               30, "the offload released")
    assert band_rules(lab, "A", rule_plan.STEER) == [] and band_rules(lab, "C", rule_plan.STEER) == []
    initial = {(o, a) for o, a, b in FIG2_CIRCUITS["initial"]} | {(o, b) for o, a, b in FIG2_CIRCUITS["initial"]}
    assert {(x["ots"], x["in_port"]) for x in lab.client.xcons()} == initial
