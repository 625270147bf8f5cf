"""The WAN lab (issue 25) in its CI size on Abilene: the backbone is discovered and its control-plane
cost recorded idle, then loaded: a backbone over a spanning tree of the fibres lit by reservations, then
30 reservations that start together, all ACTIVE riding the backbone's circuits, and tagged traffic on
each of them while the cost is measured again, reservations arriving one by one meanwhile; before the
backbone, the TE loop (OTTER placement) offloads an elephant from a best-effort circuit onto a new one."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.lab("wan")
@pytest.mark.timeout(900)  # includes the wait for the machine-wide network lock
def test_wan_lab_discovers_abilene_loads_it_and_records_its_cost(tmp_path):
    from mininet_labs.wan import run
    from topology.spec import from_topohub

    spec = from_topohub("sndlib/abilene")
    res = run(tmp_path, quick=True, topology="topohub:sndlib/abilene", progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    assert res["pops"] == len(spec.dpid_names()) // 2 and res["fibres"] == len(spec.links_of_kind("optical"))
    assert 0 < res["connected_s"] <= res["discovery_s"]
    assert 0 < res["cpu_share"] < 2.0  # at most both cores
    assert res["rss_mb"] > 10
    assert res["monitor_cost"]["per_ts"], res["monitor_cost"]  # the monitor polled during the window
    # the controller learns the datapaths and links while Mininet builds the lab: 0.0-0.8 s are left after it
    assert 0 <= res["controller_discovery_s"] <= res["discovery_s"]
    assert res["graph_problems"] == [], res["graph_problems"]  # the vendor file agrees with what the switches say
    # a restarted controller rediscovers the built network: every datapath and link again
    redo = res["rediscovery"]
    assert 0 < redo["api_s"] <= redo["connected_s"] <= redo["discovery_s"], redo
    # the elephant stage: named on its hot spot, moved alone onto a new circuit over the fibres' detour,
    # verified, released once it had gone; the stage's own circuit taken down (no XCON left)
    el = res["elephant"]
    assert el["offloaded"] and el["released"], el
    assert el["moved"] == [f"udp {spec_ip(spec, el['src'])}:45200 -> {spec_ip(spec, el['dst'])}:5201"], el
    assert el["offload_circuit"] and 0 < el["decision_s"] and 0 < el["verified_s"], el
    loaded = res["loaded"]
    # a spanning tree, one circuit per fibre, each lit by its reservation; the 30 ride them
    assert loaded["backbone"]["uses"] == {"lights": res["pops"] - 1}, loaded["backbone"]
    assert loaded["backbone"]["active"] == res["pops"] - 1, loaded["backbone"]
    assert set(loaded["reservations"]["uses"]) == {"rides"}, loaded["reservations"]
    assert loaded["reservations"]["active"] == loaded["reservations"]["n"] == 30, loaded["reservations"]
    assert loaded["reservations"]["states"] == {"ACTIVE": 30}
    assert 0 < loaded["cpu_share"] < 2.0 and loaded["monitor_cost"]["per_ts"]
    # tagged UDP on every reservation at its booked rate while the cost was measured: it arrives
    # (quiet machine: 100 % of 3.0 Mbit/s; the share of what was *sent*, so a starved sender does not count)
    traffic = loaded["traffic"]
    assert traffic["flows"] == 30 and traffic["sent_mbps"] > 0, traffic
    assert traffic["delivered"] >= 0.9 and traffic["worst"] > 0.5, traffic
    # reservations arriving one by one while the traffic ran: each lit (ridden) after its start, then ended
    arrivals = loaded["arrivals"]
    assert "error" not in arrivals and arrivals["n"] >= 3 and arrivals["booked"] == arrivals["n"], arrivals
    assert arrivals["active"] == arrivals["finished"] == arrivals["n"], arrivals
    assert arrivals["states"] == {"FINISHED": arrivals["n"]}, arrivals
    print(f"MEASURED wan lab abilene: elephant offloaded {el['verified_s']} s after its start (placement "
          f"{el['decision_s']} s); arrivals {arrivals}")
    print(f"MEASURED wan lab abilene: 30 riders ACTIVE {loaded['reservations']['active_s']} s after their start; "
          f"rediscovery {redo}; traffic {traffic}; CPU idle {res['cpu_share']:.3f} -> loaded {loaded['cpu_share']:.3f}")
    assert json.loads((tmp_path / "results.json").read_text())["discovery_s"] == res["discovery_s"]


def spec_ip(spec, switch: str) -> str:  # noqa: ANN001
    """The IP address of the host on ``switch``."""
    return next(h.ip for h in spec.hosts if h.switch == switch)
