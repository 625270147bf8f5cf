"""Fast-failover groups: built by ofmsg, sent by the live southbound, applied by the fake flow table."""
from __future__ import annotations

import pytest

from app.controller import ofmsg
from app.controller.live_southbound import LiveSouthbound
from app.controller.model import PACKET, PortInfo, SwitchInfo
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.update.model import FlowRule, GroupSpec
from app.update.southbound import Southbound
from tests.lib.fakeoftable import FakeDatapath, FakeOFTable, FlowModError
from topology import rule_plan

RES = rule_plan.RESERVATION
PKT = {"in_port": 1, "eth_type": 0x0800, "ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.3"}


def table(*msgs) -> FakeOFTable:
    t = FakeOFTable(ports=(1, 2, 3, 4))
    for m in msgs:
        t.apply(m)
    return t


def protected(group: int = 7) -> list:
    return [ofmsg.failover_group(group, [3, 4], "add"),
            ofmsg.band_rule(RES, 7, RES.low, {"in_port": 1}, 3, group=group)]


def test_the_first_live_bucket_carries_the_packet_without_the_controller():
    t = table(*protected())
    assert t.outputs(PKT) == {3}
    sent = len(t.applied)
    t.port_down(3)  # the working port loses light
    assert t.outputs(PKT) == {4}
    t.port_down(4)
    assert t.outputs(PKT) == set()  # both down: dropped
    t.port_down(3, down=False)
    assert t.outputs(PKT) == {3}  # the working port is preferred again once it is back
    assert len(t.applied) == sent  # nothing was sent to the switch for any of it


def test_a_plain_output_to_a_down_port_is_lost():
    t = table(ofmsg.band_rule(RES, 7, RES.low, {"in_port": 1}, 3))
    t.port_down(3)
    assert t.outputs(PKT) == set()


def test_group_mods_are_checked_as_a_switch_does():
    with pytest.raises(FlowModError, match="BAD_OUT_GROUP"):  # the rule before its group
        table(ofmsg.band_rule(RES, 7, RES.low, {"in_port": 1}, 3, group=7))
    with pytest.raises(FlowModError, match="GROUP_EXISTS"):
        table(*protected(), ofmsg.failover_group(7, [4, 3], "add"))
    with pytest.raises(FlowModError, match="UNKNOWN_GROUP"):
        table(ofmsg.failover_group(7, [4, 3], "modify"))
    t = table(*protected(), ofmsg.failover_group(7, [4, 3], "modify"))
    assert t.outputs(PKT) == {4}
    t.apply(ofmsg.failover_group(7, [], "delete"))
    assert t.groups == {} and t.rules == []  # deleting a group deletes the rules that use it
    t.apply(ofmsg.failover_group(7, [], "delete"))  # absent: nothing to do


def view_with_switch() -> tuple[LiveSouthbound, FakeDatapath]:
    sb = OpenFlowSouthbound(barrier_timeout=0.2)
    dp = FakeDatapath.for_southbound(sb, 0xA1, ports=(1, 3, 4))
    view = NetworkView()
    view.add_switch(SwitchInfo(0xA1, PACKET, 4, "A", {p: PortInfo(p, f"A-eth{p}", f"02:00:00:00:a1:{p:02x}", True)
                                                       for p in (1, 3, 4)}))
    return LiveSouthbound(sb, view), dp


def test_the_live_southbound_adds_then_modifies_and_removes_groups():
    live, dp = view_with_switch()
    assert isinstance(live, Southbound)
    g = GroupSpec("A", 7, (3, 4))
    rule = FlowRule("A", RES.name, 7, RES.low, (("in_port", 1),), 3, group=7)
    assert not live.install_flow(rule).ok  # no group yet: the switch refuses the rule
    assert live.set_group(g).ok and live.install_flow(rule).ok
    assert dp.table.outputs(PKT) == {3}
    assert live.set_group(GroupSpec("A", 7, (4, 3))).ok  # a second set modifies
    assert dp.table.outputs(PKT) == {4}
    assert [type(m).__name__ for m in dp.sent if type(m).__name__ == "OFPGroupMod"] == ["OFPGroupMod"] * 2
    assert live.remove_flow(rule).ok and live.remove_group(g).ok
    assert dp.table.groups == {} and dp.table.rules == []
    assert live.set_group(g).ok  # gone: added again
    restarted = LiveSouthbound(live.sb, live.view)  # a new adapter (a restart) knows no group of the switch
    assert restarted.set_group(GroupSpec("A", 7, (4, 3))).ok  # ADD → GROUP_EXISTS → MODIFY
    assert dp.table.live_bucket(7).watch_port == 4
