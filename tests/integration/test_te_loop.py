"""The elastic TE loop on the Fig. 2 testbed: an elephant among small flows on circuit A:3-B:1 is named
by the monitor, moved onto a temporary circuit by an ordered plan (only the elephant: 5-tuple steer
rules), and the circuit is released once the elephant is gone — nothing of it left behind."""
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

pytestmark = pytest.mark.integration

SETTINGS = ("interval = 1.0\nfine_backend = \"flowstats\"\n"
            "[te]\nenabled = true\nmin_hold_s = 5.0\npoll = 1.0\ngone_intervals = 3\n")


def steer_rules(lab, switch: str) -> list[str]:
    return band_rules(lab, switch, rule_plan.STEER)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with fig2_monitor_lab(tmp_path_factory.mktemp("teloop"), SETTINGS) as session:
        yield session


def test_an_elephant_is_offloaded_and_released_and_the_small_flows_stay(lab):
    since = lab.client.events()[-1]["seq"]
    elephant = "45000:4:4:1000:0.1"  # 4 Mbit/s in 100-ms bursts
    mice = [f"{46001 + i}:0.2:0.2:500:0.02" for i in range(4)]
    h1 = lab.lab.node("h1")
    t0 = time.time()
    proc = h1.popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5201", "14", elephant, *mice],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}

    def watch() -> None:
        while proc.poll() is None:
            done = [e for e in lab.client.events(since, "te_done") if e["decision"] == "offload" and e["ok"]]
            if done and "rules" not in seen:
                seen["offloaded"] = done[0]["t"] - t0
                seen["rules"] = {sw: steer_rules(lab, sw) for sw in ("A", "C")}
            time.sleep(0.3)

    th = threading.Thread(target=watch)
    th.start()
    try:
        proc.communicate(timeout=60)
    finally:
        th.join()
    decisions = [e for e in lab.client.events(since, "te_decision")]
    offloads = [e for e in decisions if e["decision"] == "offload"]
    assert offloads, decisions or lab.client.events(since, "monitor")
    assert offloads[0]["flows"] == ["udp 10.0.0.1:45000 -> 10.0.0.3:5201"]  # only the elephant moves
    assert "rules" in seen, lab.client.events(since, "te_done")
    a_rules = [r for r in seen["rules"]["A"] if "in_port=1" in r]
    assert a_rules and all("tp_src=45000" in r or "udp_src=45000" in r for r in a_rules), seen["rules"]
    assert any("n_packets=0" not in r for r in a_rules), a_rules  # the elephant crossed the new circuit
    print(f"elephant offloaded and verified {seen['offloaded']:.2f} s after its start")
    # the traffic ended: the elephant is gone, the offload released, nothing of it left
    wait_until(lambda: [e for e in lab.client.events(since, "te_done") if e["decision"] == "release" and e["ok"]],
               30, "the offload released")
    assert steer_rules(lab, "A") == [] and steer_rules(lab, "C") == []
    initial = {(o, a) for o, a, b in FIG2_CIRCUITS["initial"]} | {(o, b) for o, a, b in FIG2_CIRCUITS["initial"]}
    assert {(x["ots"], x["in_port"]) for x in lab.client.xcons()} == initial


def test_a_short_burst_named_an_elephant_is_not_offloaded_and_the_skip_gives_the_gain(lab):
    """A 2.2-s burst at 6 Mbit/s among small flows is named an elephant, but what it sent (its counting
    rule's bytes) predicts too little to win back the switch-over (min_gain_s = 1 s): a te_decision
    skip with the gain's numbers; judged again on each new count, it ends before a move pays."""
    wait_until(lambda: not lab.client.request("GET", "/te").get("offloads"), 30, "no offload in place")
    since = lab.client.events()[-1]["seq"]
    burst = "45100:6:6:1000:0.1"
    mice = [f"{46101 + i}:0.2:0.2:500:0.02" for i in range(4)]
    proc = lab.lab.node("h1").popen([sys.executable, SCRIPT, "flows", "10.0.0.3", "5201", "2.2", burst, *mice],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.communicate(timeout=30)
    time.sleep(4.0)  # counts after the burst: a late offload would show now
    named = [e for e in lab.client.events(since, "monitor") if e["event"] == "unconstrained_imbalance"]
    assert any(f["sport"] == 45100 for e in named for f in e["flows"]), lab.client.events(since, "monitor")
    decisions = lab.client.events(since, "te_decision")
    flow = "udp 10.0.0.1:45100 -> 10.0.0.3:5201"
    assert not [e for e in decisions if e["decision"] == "offload"], decisions
    assert not lab.client.events(since, "te_done")
    skips = [e for e in decisions if e["decision"] == "skip" and e.get("gain") and flow in e["gain"]]
    assert skips, decisions
    gain = skips[0]["gain"][flow]
    assert gain["pays"] is False and "gain" in skips[0]["reason"] and gain["gain_s"] < 1.0, skips[0]
    assert gain["remaining_bytes"] > 0 and "switch-over" in gain["reason"], gain
    print(f"short burst skipped: {gain['reason']}")
