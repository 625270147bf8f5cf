"""The one send path: binds, counts, gates; confirm and flow_stats leave through it too (fake datapaths)."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp13

from app.controller import ofmsg
from app.controller.driver_errors import DriverError
from app.controller.live_southbound import LiveSouthbound
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import GateClosed, OpenFlowSouthbound
from app.update.southbound import Southbound
from tests.lib.fake_network import FakeNetwork
from tests.lib.fakeoftable import FakeDatapath
from topology import rule_plan

H2 = "00:00:00:00:00:02"
V13 = ofp13.OFP_VERSION


def southbound() -> tuple[OpenFlowSouthbound, FakeDatapath]:
    sb = OpenFlowSouthbound(barrier_timeout=0.2)
    return sb, FakeDatapath.for_southbound(sb, 0xA1, ports=(1, 2))


def rule() -> object:
    return ofmsg.flow_add(rule_plan.FORWARDING.cookie(), 100, {"eth_dst": H2}, [ofmsg.output(2)])


def test_send_binds_counts_and_applies_in_order():
    sb, dp = southbound()
    sb.send(0xA1, [rule(), ofmsg.barrier(V13)], kind="forwarding")
    sb.send(dp, [ofmsg.echo_request(b"x")], kind="monitor_echo")
    assert [type(m).__name__ for m in dp.sent] == ["OFPFlowMod", "OFPBarrierRequest", "OFPEchoRequest"]
    assert all(m.datapath is dp for m in dp.sent)
    assert sb.sent_by_type == {"OFPFlowMod": 1, "OFPBarrierRequest": 1, "OFPEchoRequest": 1}
    assert sb.sent_by_dpid == {0xA1: 3}
    assert sb.sent_by_kind == {"forwarding": 2, "monitor_echo": 1}
    assert dp.table.outputs({"in_port": 1, "eth_dst": H2}) == {2}


def test_a_closed_gate_refuses_changes_whole_and_lets_reads_through():
    sb, dp = southbound()
    sb.gate = lambda: False
    with pytest.raises(GateClosed) as err:
        sb.send(0xA1, [ofmsg.barrier(V13), rule()])
    assert err.value.status == 503 and dp.sent == []  # the whole batch: not even the barrier left
    with pytest.raises(GateClosed):
        sb.send(0xA1, [ofmsg.packet_out(1, b"\x00" * 60)])
    with pytest.raises(GateClosed):
        sb.confirm(0xA1, [ofmsg.meter_mod(1, 1000, "add")])
    assert sb.refused_by_type == {"OFPBarrierRequest": 2, "OFPFlowMod": 1, "OFPPacketOut": 1,
                                  "OFPMeterMod": 1}
    reads = [ofmsg.echo_request(b"x"), ofmsg.port_desc_request(), ofmsg.port_stats_request(V13),
             ofmsg.queue_stats_request(), ofmsg.role_request("slave", 3), ofmsg.barrier(V13)]
    sb.send(0xA1, reads)
    assert len(dp.sent) == len(reads)
    assert sb.flow_stats(0xA1) == []  # a read: it leaves and is answered
    sb.gate = lambda: True
    assert sb.confirm(0xA1, [rule()]).ok


def test_confirm_and_flow_stats_go_through_send():
    sb, dp = southbound()
    done = sb.confirm(0xA1, [rule()], kind="plan")
    assert done.ok and sb.sent_by_kind == {"plan": 2} and sb.sent_by_type["OFPBarrierRequest"] == 1
    (st,) = sb.flow_stats(0xA1, rule_plan.FORWARDING.cookie(), rule_plan.ALL_BITS)
    assert (st.priority, st.match, st.out_ports) == (100, {"eth_dst": H2}, (2,))
    assert sb.sent_by_kind["flow_stats"] == 1


def test_an_unconnected_dpid_is_a_driver_error():
    sb, _dp = southbound()
    with pytest.raises(DriverError):
        sb.send(0xB1, [rule()])


def test_the_live_adapter_and_the_fake_network_implement_the_whole_southbound_protocol():
    sb, _dp = southbound()
    assert isinstance(LiveSouthbound(sb, NetworkView()), Southbound)
    net = FakeNetwork()
    try:
        assert isinstance(net, Southbound)
    finally:
        net.close()
    assert {"flow_bytes", "set_meter", "remove_meter"} <= set(dir(Southbound))
