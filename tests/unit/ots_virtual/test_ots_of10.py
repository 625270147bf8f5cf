"""Switch-side OF1.0 encoders checked by parsing them back with os-ken; decoders fed os-ken's output and garbage."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10

PORT = of10.PhyPort(3, b"\x02\x0f\x0f\x01\x00\x03", "ODU2-3", ofp.OFPPC_PORT_DOWN, ofp.OFPPS_LINK_DOWN,
                    ofp.OFPPF_10MB_FD | ofp.OFPPF_FIBER, 1, 2, 0)


def test_features_reply_round_trip():
    msg = of10.parse(of10.features_reply(5, 0x0F01, [PORT]))
    assert (msg.xid, msg.datapath_id, msg.n_buffers, msg.n_tables) == (5, 0x0F01, 0, 1)
    p = msg.ports[3]
    assert (p.name, p.hw_addr, p.config, p.state, p.curr, p.advertised, p.supported) == (
        b"ODU2-3", "02:0f:0f:01:00:03", ofp.OFPPC_PORT_DOWN, ofp.OFPPS_LINK_DOWN,
        ofp.OFPPF_10MB_FD | ofp.OFPPF_FIBER, 1, 2)
    assert msg.capabilities & ofp.OFPC_PORT_STATS and msg.actions == 1 << ofp.OFPAT_OUTPUT


def test_port_status_round_trip():
    msg = of10.parse(of10.port_status(ofp.OFPPR_MODIFY, PORT))
    assert msg.reason == ofp.OFPPR_MODIFY and msg.desc.port_no == 3 and msg.desc.name == b"ODU2-3"


def test_error_carries_first_64_bytes_and_xid():
    offending = of10.serialize(parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=1), actions=[
        parser.OFPActionOutput(2, 0), parser.OFPActionOutput(3, 0)]), 0x1234)
    assert len(offending) > 64
    msg = of10.parse(of10.error(0x1234, ofp.OFPET_BAD_ACTION, ofp.OFPBAC_TOO_MANY, offending))
    assert (msg.xid, msg.type, msg.code, msg.data) == (0x1234, ofp.OFPET_BAD_ACTION, ofp.OFPBAC_TOO_MANY,
                                                       offending[:64])


def test_simple_replies():
    assert of10.parse(of10.echo_reply(9, b"abc")).data == b"abc"
    assert of10.parse(of10.barrier_reply(10)).xid == 10
    cfg = of10.parse(of10.get_config_reply(11, ofp.OFPC_FRAG_DROP, 256))
    assert (cfg.flags, cfg.miss_send_len) == (ofp.OFPC_FRAG_DROP, 256)
    q = of10.parse(of10.queue_get_config_reply(12, 4))
    assert q.port == 4 and q.queues == []
    v = of10.parse(of10.vendor(13, 0x004D4C54, b"\x00\x00\x00\x02{}"))
    assert (v.vendor, v.data) == (0x004D4C54, b"\x00\x00\x00\x02{}")


def test_flow_removed_round_trip():
    msg = of10.parse(of10.flow_removed(4, 77, 100, ofp.OFPRR_DELETE, 2.5, 10, 1500))
    assert (msg.match.in_port, msg.cookie, msg.priority, msg.reason, msg.duration_sec, msg.packet_count,
            msg.byte_count) == (4, 77, 100, ofp.OFPRR_DELETE, 2, 10, 1500)
    assert msg.duration_nsec == 500_000_000


def test_stats_bodies_round_trip():
    (desc_msg,) = of10.stats_replies(1, ofp.OFPST_DESC, [of10.desc_stats("mlte", "hw", "sw", "00ab", "X")])
    d = of10.parse(desc_msg).body
    assert (d.mfr_desc, d.hw_desc, d.sw_desc, d.serial_num, d.dp_desc) == (b"mlte", b"hw", b"sw", b"00ab", b"X")
    (flow_msg,) = of10.stats_replies(2, ofp.OFPST_FLOW, [of10.flow_stats(1, 2, 1.25, 100, 5, 7, 700),
                                                          of10.flow_stats(2, 1, 0.0, 100, 6, 0, 0)])
    f1, f2 = of10.parse(flow_msg).body
    assert (f1.match.in_port, f1.actions[0].port, f1.cookie, f1.packet_count, f1.byte_count) == (1, 2, 5, 7, 700)
    assert f1.match.wildcards == ofp.OFPFW_ALL & ~ofp.OFPFW_IN_PORT
    assert (f2.match.in_port, f2.actions[0].port) == (2, 1)
    (agg_msg,) = of10.stats_replies(3, ofp.OFPST_AGGREGATE, [of10.aggregate_stats(5, 600, 2)])
    (a,) = of10.parse(agg_msg).body
    assert (a.packet_count, a.byte_count, a.flow_count) == (5, 600, 2)
    (tbl_msg,) = of10.stats_replies(4, ofp.OFPST_TABLE, [of10.table_stats(0, "xcon", 6, 2, 0, 0)])
    (t,) = of10.parse(tbl_msg).body
    assert (t.name, t.max_entries, t.active_count) == (b"xcon", 6, 2)
    (port_msg,) = of10.stats_replies(5, ofp.OFPST_PORT, [of10.port_stats(3, {"rx_packets": 9, "tx_bytes": 99})])
    (p,) = of10.parse(port_msg).body
    assert (p.port_no, p.rx_packets, p.tx_bytes, p.collisions) == (3, 9, 99, 0)


def test_large_stats_reply_is_split_with_reply_more():
    entries = [of10.port_stats(i, {"rx_packets": i}) for i in range(1, 1001)]  # 104 kB
    msgs = of10.stats_replies(6, ofp.OFPST_PORT, entries)
    assert len(msgs) == 2 and all(len(m) <= 0xFFFF for m in msgs)
    parsed = [of10.parse(m) for m in msgs]
    assert [m.flags for m in parsed] == [ofp.OFPSF_REPLY_MORE, 0]
    assert [p.rx_packets for m in parsed for p in m.body] == list(range(1, 1001))


@pytest.mark.parametrize("req, expect", [
    (parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(in_port=3), 0xFF, 7),
     {"stats_type": ofp.OFPST_FLOW, "out_port": 7, "table_id": 0xFF}),
    (parser.OFPAggregateStatsRequest(of10.DP, 0, parser.OFPMatch(), 0, ofp.OFPP_NONE),
     {"stats_type": ofp.OFPST_AGGREGATE, "table_id": 0}),
    (parser.OFPPortStatsRequest(of10.DP, 0, 5), {"stats_type": ofp.OFPST_PORT, "port_no": 5}),
    (parser.OFPQueueStatsRequest(of10.DP, 0, 2, 9), {"stats_type": ofp.OFPST_QUEUE, "port_no": 2, "queue_id": 9}),
    (parser.OFPDescStatsRequest(of10.DP, 0), {"stats_type": ofp.OFPST_DESC}),
    (parser.OFPTableStatsRequest(of10.DP, 0), {"stats_type": ofp.OFPST_TABLE}),
])
def test_decode_stats_requests_serialised_by_os_ken(req, expect):
    got = of10.decode_stats_request(of10.serialize(req, 1))
    for key, value in expect.items():
        assert getattr(got, key) == value
    if expect["stats_type"] == ofp.OFPST_FLOW:
        assert got.match.in_port == 3 and not got.match.wildcards & ofp.OFPFW_IN_PORT


def test_decode_small_requests():
    assert of10.decode_set_config(of10.serialize(parser.OFPSetConfig(of10.DP, 1, 300), 1)) == (1, 300)
    assert of10.decode_queue_get_config_request(
        of10.serialize(parser.OFPQueueGetConfigRequest(of10.DP, 4), 1)) == 4
    vid, data = of10.decode_vendor(of10.vendor(1, 0x2320, b"abcd"))
    assert (vid, data) == (0x2320, b"abcd")
    with pytest.raises(of10.DecodeError):
        of10.decode_set_config(of10.message(ofp.OFPT_SET_CONFIG, 1, b"\x00"))


def test_decode_flow_mod_of_os_ken_output():
    msg = parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=2), cookie=3, command=ofp.OFPFC_MODIFY,
                            priority=7, out_port=9, flags=ofp.OFPFF_SEND_FLOW_REM,
                            actions=[parser.OFPActionOutput(4, 0), parser.OFPActionVlanVid(5)])
    fm = of10.decode_flow_mod(of10.serialize(msg, 99))
    assert (fm.xid, fm.match.in_port, fm.cookie, fm.command, fm.priority, fm.out_port, fm.flags) == (
        99, 2, 3, ofp.OFPFC_MODIFY, 7, 9, ofp.OFPFF_SEND_FLOW_REM)
    assert fm.actions == (of10.RawAction(ofp.OFPAT_OUTPUT, 8, 4), of10.RawAction(ofp.OFPAT_SET_VLAN_VID, 8, None))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_decode_flow_mod_never_crashes_on_garbage(tail):
    raw = of10.header(ofp.OFPT_FLOW_MOD, 8 + len(tail), 1) + tail
    try:
        fm = of10.decode_flow_mod(raw)
    except of10.DecodeError:
        return
    assert sum(a.length for a in fm.actions) == len(raw) - ofp.OFP_FLOW_MOD_SIZE


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=0xFFFF), st.binary(max_size=80))
def test_decode_stats_request_never_crashes(stype, tail):
    raw = of10.message(ofp.OFPT_STATS_REQUEST, 1, struct.pack("!HH", stype, 0) + tail)
    try:
        of10.decode_stats_request(raw)
    except of10.DecodeError:
        pass


def test_message_reader_reassembles_and_rejects_bad_length():
    msgs = [of10.echo_reply(1, b"x" * 10), of10.barrier_reply(2), of10.hello(3)]
    stream = b"".join(msgs)
    reader = of10.MessageReader()
    out = []
    for i in range(0, len(stream), 3):
        out.extend(reader.feed(stream[i:i + 3]))
    assert out == msgs
    with pytest.raises(of10.FramingError):
        list(of10.MessageReader().feed(b"\x01\x00\x00\x04\x00\x00\x00\x00"))
