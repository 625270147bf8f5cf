"""The OpenFlow 1.3 rule helpers build the FLOW_MODs the packet-switch apps rely on (no switch)."""
from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from app.controller.of13 import ALL_COOKIE_BITS, add_flow, delete_flows


class FakeDatapath:
    ofproto, ofproto_parser = ofp, parser

    def __init__(self) -> None:
        self.sent: list = []
        self.xid = 0

    def set_xid(self, msg) -> None:
        self.xid += 1
        msg.set_xid(self.xid)

    def send_msg(self, msg) -> None:
        msg.datapath = self
        msg.serialize()  # must encode
        self.sent.append(msg)


def test_add_flow_applies_actions_in_table_0():
    dp = FakeDatapath()
    add_flow(dp, 0x42, 100, parser.OFPMatch(eth_dst="00:00:00:00:00:03"), [parser.OFPActionOutput(3)])
    (m,) = dp.sent
    assert (m.command, m.cookie, m.priority, m.table_id) == (ofp.OFPFC_ADD, 0x42, 100, 0)
    assert m.instructions[0].type == ofp.OFPIT_APPLY_ACTIONS and m.instructions[0].actions[0].port == 3


def test_delete_flows_touches_only_our_cookie():
    dp = FakeDatapath()
    delete_flows(dp, 0x42, parser.OFPMatch(eth_dst="00:00:00:00:00:03"), priority=100)
    delete_flows(dp, 0x42, parser.OFPMatch())
    strict, every = dp.sent
    assert (strict.command, strict.priority, strict.table_id) == (ofp.OFPFC_DELETE_STRICT, 100, 0)
    assert (every.command, every.table_id) == (ofp.OFPFC_DELETE, ofp.OFPTT_ALL)
    for m in (strict, every):
        assert (m.cookie, m.cookie_mask, m.out_port, m.out_group) == (0x42, ALL_COOKIE_BITS, ofp.OFPP_ANY, ofp.OFPG_ANY)
