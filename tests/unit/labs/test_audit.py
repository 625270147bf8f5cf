"""The HA labs' read-back of the switches (mininet_labs/audit.py), on ``ovs-ofctl`` text as OVS prints it:
XCONs, rules of one band by cookie, their packet counters, and a flow lit twice under two cookies."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mininet_labs import audit
from topology import rule_plan
from topology.spec import fig2_testbed

STEER = rule_plan.STEER.cookie(3)
RES = rule_plan.RESERVATION.cookie(7)
DUMPS = {
    "sX": " cookie=0x0, duration=9.1s, table=0, n_packets=0, n_bytes=0, priority=0 actions=drop\n"
          " cookie=0x0, duration=3.2s, table=0, n_packets=12, n_bytes=900, priority=100,in_port=4 actions=output:3\n",
    "sA": f" cookie={STEER:#x}, duration=2.0s, table=0, n_packets=311, n_bytes=311000, priority=40000,udp,in_port=1,"
          "nw_src=10.0.0.1,nw_dst=10.0.0.3,tp_src=45000,tp_dst=5201 actions=output:4\n"
          f" cookie={RES:#x}, duration=2.0s, table=0, n_packets=5, n_bytes=500, priority=30000,in_port=2 actions=output:3\n"
          " cookie=0x1, duration=5.0s, table=0, n_packets=9, n_bytes=900, priority=1 actions=CONTROLLER:65535\n",
    "sC": f" cookie={STEER:#x}, duration=2.0s, table=0, n_packets=300, n_bytes=300000, priority=40000,udp,in_port=2,"
          "nw_src=10.0.0.1,nw_dst=10.0.0.3,tp_src=45000,tp_dst=5201 actions=output:3\n"
          f" cookie={rule_plan.STEER.cookie(4):#x}, duration=1.0s, table=0, n_packets=0, n_bytes=0, priority=40000,udp,"
          "in_port=2,nw_src=10.0.0.1,nw_dst=10.0.0.3,tp_src=45000,tp_dst=5201 actions=output:3\n",
}


@pytest.fixture
def ha(monkeypatch):
    monkeypatch.setattr(audit, "_dump", lambda _ha, name, *args: DUMPS.get(f"s{name}", ""))
    return SimpleNamespace(spec=fig2_testbed(), lab=SimpleNamespace(bridge=lambda n: f"s{n}"))


def test_xcons_leave_out_the_table_miss(ha):
    assert audit.bridge_xcons(ha) == [("X", 4, 3)]


def test_rules_of_a_band_by_cookie_with_their_ids_and_counters(ha):
    assert audit.reservation_rules(ha) == [("A", 7, "in_port=2")]
    steer = audit.steer_rules(ha)
    assert [(sw, i) for sw, i, _m in steer] == [("A", 3), ("C", 3), ("C", 4)]
    assert audit.band_packets(ha, "A", rule_plan.STEER) == [(steer[0][2], 311)]
    assert audit.duplicates(steer) == [f"C:{steer[1][2]}"]  # one flow under two cookies on C: lit twice
