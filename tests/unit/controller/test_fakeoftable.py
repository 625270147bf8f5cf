"""The fake flow table applies the messages :mod:`app.controller.ofmsg` builds as a switch would."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp10
from os_ken.ofproto import ofproto_v1_3 as ofp13
from os_ken.ofproto import ofproto_v1_3_parser as parser13

from app.controller import ofmsg
from app.controller.monitor_app import counting_messages
from monitor import flowstats
from monitor.flowstats import RuleOp
from monitor.sflow.encoder import build_frame
from monitor.sflow.records import FiveTuple
from tests.lib.fakeoftable import CONTROLLER, OF10, FakeDatapath, FakeOFTable, FlowModError, packet_fields
from topology import rule_plan

H1, H2 = "00:00:00:00:00:01", "00:00:00:00:00:02"
TCP = {"in_port": 1, "eth_src": H1, "eth_dst": H2, "eth_type": 0x0800, "ipv4_src": "10.0.0.1",
       "ipv4_dst": "10.0.0.2", "ip_proto": 6, "tcp_src": 40000, "tcp_dst": 5001}


def table(*msgs) -> FakeOFTable:
    t = FakeOFTable(ports=(1, 2, 3, 4))
    for m in msgs:
        t.apply(m)
    return t


def test_an_empty_table_drops_and_the_table_miss_rule_sends_to_the_controller():
    assert table().outputs(TCP) == set()
    t = table(ofmsg.flow_add(1, 0, {}, [ofmsg.to_controller()]))
    assert t.to_controller(TCP) and t.outputs(TCP) == {CONTROLLER}


def test_the_highest_priority_match_wins_and_masks_count():
    t = table(ofmsg.flow_add(1, 100, {"eth_dst": H2}, [ofmsg.output(2)]),
              ofmsg.flow_add(2, 200, {"eth_type": 0x0800, "ip_proto": 6, "tcp_src": (0x9c00, 0xff00)},
                             [ofmsg.output(3)]))
    assert t.outputs(TCP) == {3}  # 40000 = 0x9c40: inside the masked range
    assert t.outputs({**TCP, "tcp_src": 1234}) == {2}
    assert t.outputs({**TCP, "eth_dst": "00:00:00:00:00:09", "tcp_src": 1}) == set()


def test_add_overwrites_the_same_match_and_priority():
    t = table(ofmsg.flow_add(1, 100, {"eth_dst": H2}, [ofmsg.output(2)]),
              ofmsg.flow_add(1, 100, {"eth_dst": H2}, [ofmsg.output(4)]))
    assert len(t.rules) == 1 and t.outputs(TCP) == {4}


def test_delete_strict_takes_one_rule_and_delete_takes_a_cookie_family():
    fwd = rule_plan.FORWARDING
    t = table(ofmsg.flow_add(fwd.cookie(), 100, {"eth_dst": H2}, [ofmsg.output(2)]),
              ofmsg.flow_add(fwd.cookie(), 100, {"eth_dst": H1}, [ofmsg.output(1)]),
              ofmsg.flow_add(rule_plan.LLDP.cookie(), 65000, {"eth_type": 0x88CC}, [ofmsg.to_controller()]))
    t.apply(ofmsg.flow_delete_strict(fwd.cookie(), 100, {"eth_dst": H2}))
    assert t.outputs(TCP) == set() and len(t.rules) == 2
    t.apply(ofmsg.flow_delete_strict(rule_plan.STEER.cookie(), 100, {"eth_dst": H1}))  # another cookie: stays
    assert len(t.rules) == 2
    t.apply(ofmsg.flow_delete(fwd.cookie(), fwd.mask()))
    assert [r.cookie for r in t.rules] == [rule_plan.LLDP.cookie()]  # the other app's rule survives


def test_a_delete_with_a_match_takes_only_the_rules_it_covers():
    t = table(ofmsg.flow_add(7, 100, {"eth_dst": H2}, [ofmsg.output(2)]),
              ofmsg.flow_add(7, 100, {"eth_type": 0x0800, "ipv4_dst": "10.0.0.2"}, [ofmsg.output(3)]))
    t.apply(ofmsg.flow_delete(7, rule_plan.ALL_BITS, {"eth_type": 0x0800}))
    assert [r.match for r in t.rules] == [{"eth_dst": (int(H2.replace(":", ""), 16), -1)}]


def test_meters_goto_and_write_actions():
    t = table(ofmsg.meter_mod(5, 1000, "add"),
              parser13.OFPFlowMod(None, cookie=1, priority=10, match=parser13.OFPMatch(),
                                  instructions=[parser13.OFPInstructionGotoTable(1)]),
              ofmsg.flow_add(1, 10, {"in_port": 1}, [ofmsg.output(2)], table=1, meter=5))
    res = t.lookup(TCP)
    assert res.ports == {2} and res.meters == [5]
    t.apply(ofmsg.meter_mod(5, 2000, "modify"))
    assert t.meters == {5: 2000}
    t.apply(ofmsg.meter_mod(5, None, "delete"))  # a meter's rules go with it
    assert t.outputs(TCP) == set()
    with pytest.raises(FlowModError, match="UNKNOWN_METER"):
        t.apply(ofmsg.flow_add(1, 10, {"in_port": 1}, [ofmsg.output(2)], meter=9))


def test_prerequisites_are_checked_as_a_switch_does():
    with pytest.raises(FlowModError, match="BAD_PREREQ"):
        table(parser13.OFPFlowMod(None, cookie=1, priority=1, match=parser13.OFPMatch(ipv4_dst="10.0.0.2"),
                                  instructions=[]))


def test_a_packet_never_leaves_on_its_own_in_port_unless_told_to():
    t = table(ofmsg.flow_add(1, 10, {}, [ofmsg.output(1)]))
    assert t.outputs(TCP) == set()
    t.apply(ofmsg.flow_add(1, 10, {}, [ofmsg.output(ofp13.OFPP_IN_PORT)]))
    assert t.outputs(TCP) == {1}
    t.apply(ofmsg.flow_add(1, 10, {}, [ofmsg.output(ofp13.OFPP_FLOOD)]))
    assert t.outputs(TCP) == {2, 3, 4}


def test_packet_out_to_a_port_and_through_the_table():
    t = table(ofmsg.flow_add(1, 10, {"in_port": 3}, [ofmsg.output(4)]))
    frame = bytes.fromhex("000000000002" "000000000001" "88b6") + b"x" * 46
    t.apply(ofmsg.packet_out(2, frame))
    t.apply(ofmsg.packet_out_table(3, frame))
    assert [r.ports for r in t.packet_outs] == [{2}, {4}]
    assert packet_fields(frame, 3) == {"in_port": 3, "eth_src": H1, "eth_dst": H2, "eth_type": 0x88B6}


def test_ots_xcons_add_and_delete_strict_by_out_port():
    t = FakeOFTable(OF10)
    for a, b in ((1, 2), (2, 1)):
        t.apply(ofmsg.xcon_flow_mod(ofp10.OFPFC_ADD, a, b, rule_plan.XCON.cookie()))
    assert t.xcons() == {1: 2, 2: 1} and t.outputs({"in_port": 1}) == {2}
    t.apply(ofmsg.xcon_flow_mod(ofp10.OFPFC_DELETE_STRICT, 1, None, 0, only_to=3))  # joined to 2, not 3
    assert t.xcons() == {1: 2, 2: 1}
    t.apply(ofmsg.xcon_flow_mod(ofp10.OFPFC_DELETE_STRICT, 1, None, 0, only_to=2))
    assert t.xcons() == {2: 1}
    with pytest.raises(FlowModError, match="XCONs only"):
        t.apply(ofmsg.xcon_flow_mod(ofp10.OFPFC_ADD, 3, 4, 0, fields={"dl_type": 0x800}))


def test_the_fake_datapath_serializes_and_answers_barriers_and_flow_stats():
    got: list = []
    dp = FakeDatapath(0xA, on_barrier=lambda dpid, xid: got.append(("barrier", xid)),
                      on_flow_stats=lambda dpid, xid, version, body, more: got.append(("stats", len(body))))
    for m in (ofmsg.flow_add(rule_plan.FORWARDING.cookie(), 100, {"eth_dst": H2}, [ofmsg.output(2)]),
              ofmsg.barrier(ofp13.OFP_VERSION), ofmsg.flow_stats_request(ofp13.OFP_VERSION)):
        m.datapath = dp
        dp.send_msg(m)
    assert got == [("barrier", 2), ("stats", 1)]
    assert all(m.buf for m in dp.sent)  # every message encoded


def test_the_monitors_learn_and_count_rules_forward_count_and_copy_to_the_controller():
    five = FiveTuple("10.0.0.1", "10.0.0.2", 6, 40000, 5001)
    learn = RuleOp(flowstats.ADD, flowstats.KIND_LEARN, flowstats.cookie(flowstats.KIND_LEARN, 0), H2, 2)
    count = RuleOp(flowstats.ADD, flowstats.KIND_COUNT, flowstats.cookie(flowstats.KIND_COUNT, 1), H2, 2, five)
    t = table(*counting_messages([learn], 10))
    res = t.lookup(TCP)
    assert [p for p, _ in res.outputs] == [2, CONTROLLER]
    assert res.outputs[1][1]["eth_dst"] == int(flowstats.LEARN_MAC.replace(":", ""), 16)  # the copy is marked
    (learn_rule,) = counting_messages([learn], 10)
    (copy,) = [a for a in learn_rule.instructions[0].actions if getattr(a, "port", None) == ofp13.OFPP_CONTROLLER]
    assert copy.max_len == flowstats.LEARN_COPY_BYTES  # the headers only, not the whole packet
    assert flowstats.flow_key(build_frame(five, 1400)[:flowstats.LEARN_COPY_BYTES]) == five  # enough for the 5-tuple
    for m in counting_messages([count], 10):
        t.apply(m)
    assert t.outputs(TCP) == {2} and t.lookup(TCP).rules[0].idle_timeout == 10
    assert t.outputs({**TCP, "tcp_src": 1}) == {2, CONTROLLER}  # another flow: still learnt
    t.apply(counting_messages([RuleOp(flowstats.DELETE, flowstats.KIND_COUNT, count.cookie, H2, key=five)], 10)[0])
    assert t.outputs(TCP) == {2, CONTROLLER}
