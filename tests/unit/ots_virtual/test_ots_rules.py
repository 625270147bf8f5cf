"""The XCON checks: what an OTS accepts, what it refuses and with which OpenFlow error."""
from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10
from ots_virtual.rules import XconRejected, XconTable, exact_fields

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 6: "ODU0", 7: "ODU0"}


def fm(match=None, actions=None, command=ofp.OFPFC_ADD, **kw) -> of10.FlowMod:
    """Build the FLOW_MOD with os-ken, put it on the wire and decode it as the agent does."""
    msg = parser.OFPFlowMod(of10.DP, match if match is not None else parser.OFPMatch(in_port=1),
                            command=command,
                            actions=[parser.OFPActionOutput(2, 0)] if actions is None else actions, **kw)
    return of10.decode_flow_mod(of10.serialize(msg, 7))


def out(port: int):
    return parser.OFPActionOutput(port, 0)


def rejected(table: XconTable, flow_mod: of10.FlowMod) -> tuple[int, int]:
    before = list(table)
    with pytest.raises(XconRejected) as info:
        table.apply_flow_mod(flow_mod)
    assert list(table) == before, "a rejected FLOW_MOD must change nothing"
    return info.value.err_type, info.value.code


def test_plain_xcon_is_accepted():
    t = XconTable(PORTS)
    changes = t.apply_flow_mod(fm(cookie=42))
    assert [(c.op, c.xcon.in_port, c.xcon.out_port, c.xcon.cookie) for c in changes] == [("add", 1, 2, 42)]
    assert t.get(1).out_port == 2 and t.lit_ports() == {1, 2}


def test_reverse_direction_is_a_separate_rule():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=2), [out(1)]))[0].op == "add"
    assert len(t) == 2


@pytest.mark.parametrize("match", [
    parser.OFPMatch(in_port=1, dl_dst="00:00:00:00:00:02"),
    parser.OFPMatch(in_port=1, dl_type=0x0800, nw_dst="10.0.0.1"),
    parser.OFPMatch(in_port=1, dl_vlan=5),
    parser.OFPMatch(),
    parser.OFPMatch(in_port=9),
    parser.OFPMatch(in_port=ofp.OFPP_LOCAL),
])
def test_match_other_than_exact_in_port_is_unsupported(match):
    # OF1.0 has no BAD_MATCH type: FLOW_MOD_FAILED/UNSUPPORTED (see ots_virtual/rules.py)
    assert rejected(XconTable(PORTS), fm(match)) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED)


def test_nw_src_prefix_counts_as_a_match_field():
    assert exact_fields(ofp.OFPFW_ALL & ~ofp.OFPFW_IN_PORT) == set()
    wc = (ofp.OFPFW_ALL & ~ofp.OFPFW_NW_SRC_MASK) | (8 << ofp.OFPFW_NW_SRC_SHIFT)  # /24
    assert exact_fields(wc) == {"nw_src"}
    wc = ofp.OFPFW_ALL | (63 << ofp.OFPFW_NW_DST_SHIFT)  # >= 32 means fully wildcarded
    assert exact_fields(wc) == set()


@pytest.mark.parametrize("actions, code", [
    ([out(2), out(3)], ofp.OFPBAC_TOO_MANY),
    ([], ofp.OFPBAC_BAD_ARGUMENT),
    ([parser.OFPActionSetDlDst(b"\x00\x00\x00\x00\x00\x02"), out(2)], ofp.OFPBAC_BAD_TYPE),
    ([parser.OFPActionStripVlan()], ofp.OFPBAC_BAD_TYPE),
    ([out(ofp.OFPP_FLOOD)], ofp.OFPBAC_BAD_OUT_PORT),
    ([out(ofp.OFPP_CONTROLLER)], ofp.OFPBAC_BAD_OUT_PORT),
    ([out(ofp.OFPP_IN_PORT)], ofp.OFPBAC_BAD_OUT_PORT),
    ([out(1)], ofp.OFPBAC_BAD_OUT_PORT),  # hairpin to in_port
    ([out(5)], ofp.OFPBAC_BAD_OUT_PORT),  # no such port
])
def test_actions_other_than_one_output_are_bad_action(actions, code):
    assert rejected(XconTable(PORTS), fm(actions=actions)) == (ofp.OFPET_BAD_ACTION, code)


def test_granularity_mismatch_is_refused():
    t = XconTable(PORTS)
    assert rejected(t, fm(actions=[out(6)])) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)
    assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=6), [out(7)]))[0].op == "add"  # ODU0 <-> ODU0 is fine


def test_second_rule_on_busy_in_port_is_overlap_and_keeps_the_first():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    assert rejected(t, fm(actions=[out(3)])) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP)
    assert t.get(1).out_port == 2


def test_two_inputs_into_one_output_is_overlap():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    assert rejected(t, fm(parser.OFPMatch(in_port=3), [out(2)])) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP)


def test_identical_add_is_idempotent():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    assert t.apply_flow_mod(fm(cookie=9)) == []
    assert t.get(1).cookie == 9 and len(t) == 1


def test_modify_moves_the_output():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    (change,) = t.apply_flow_mod(fm(actions=[out(3)], command=ofp.OFPFC_MODIFY))
    assert (change.op, change.old.out_port, change.xcon.out_port) == ("modify", 2, 3)
    assert t.lit_ports() == {1, 3}
    assert t.apply_flow_mod(fm(actions=[out(3)], command=ofp.OFPFC_MODIFY_STRICT)) == []


def test_modify_of_a_free_port_adds():
    t = XconTable(PORTS)
    assert t.apply_flow_mod(fm(command=ofp.OFPFC_MODIFY))[0].op == "add"


@pytest.mark.parametrize("kw, err", [
    ({"idle_timeout": 10}, (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)),
    ({"hard_timeout": 1}, (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)),
    ({"flags": ofp.OFPFF_EMERG}, (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)),
    ({"buffer_id": 3}, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BUFFER_UNKNOWN)),
    ({"command": 9}, (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND)),
])
def test_other_flow_mod_fields(kw, err):
    assert rejected(XconTable(PORTS), fm(**kw)) == err


def test_delete_by_in_port_and_strict():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    t.apply_flow_mod(fm(parser.OFPMatch(in_port=2), [out(1)]))
    (change,) = t.apply_flow_mod(fm(actions=[], command=ofp.OFPFC_DELETE_STRICT))
    assert (change.op, change.xcon.in_port) == ("delete", 1)
    assert t.lit_ports() == {1, 2}  # 2 -> 1 still uses both
    assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=2), [], command=ofp.OFPFC_DELETE))[0].xcon.out_port == 1
    assert len(t) == 0 and t.lit_ports() == set()


def test_delete_all_and_filters():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    t.apply_flow_mod(fm(parser.OFPMatch(in_port=3), [out(4)]))
    # a match on another field matches no XCON; strict with wildcard in_port neither
    assert t.apply_flow_mod(fm(parser.OFPMatch(dl_type=0x800), [], command=ofp.OFPFC_DELETE)) == []
    assert t.apply_flow_mod(fm(parser.OFPMatch(), [], command=ofp.OFPFC_DELETE_STRICT)) == []
    # out_port filter
    (c,) = t.apply_flow_mod(fm(parser.OFPMatch(), [], command=ofp.OFPFC_DELETE, out_port=4))
    assert c.xcon.in_port == 3
    assert [c.xcon.in_port for c in t.apply_flow_mod(fm(parser.OFPMatch(), [], command=ofp.OFPFC_DELETE))] == [1]
    assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=1), [], command=ofp.OFPFC_DELETE)) == []


def test_output_freed_by_delete_can_be_reused():
    t = XconTable(PORTS)
    t.apply_flow_mod(fm())
    t.apply_flow_mod(fm(actions=[], command=ofp.OFPFC_DELETE))
    assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=3), [out(2)]))[0].op == "add"


def test_rules_module_imports_no_controller_framework():
    import subprocess
    import sys

    code = "import sys, ots_virtual.rules; bad=[m for m in sys.modules if m.startswith(('os_ken.controller','os_ken.base','flask','app'))]; print(bad)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


def test_delete_strict_of_a_port_without_xcon_is_harmless():
    """The controller's roll-back deletes XCONs whose barrier timed out: maybe never applied."""
    t = XconTable(PORTS)
    t.apply_flow_mod(fm(parser.OFPMatch(in_port=3), [out(4)]))
    for port in (1, 2, 6):  # free ports: no error, no change, nothing to provision
        assert t.apply_flow_mod(fm(parser.OFPMatch(in_port=port), [], command=ofp.OFPFC_DELETE_STRICT)) == []
    assert [(x.in_port, x.out_port) for x in t] == [(3, 4)]
