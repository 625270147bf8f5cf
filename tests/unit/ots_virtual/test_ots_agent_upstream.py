"""The agent's OpenFlow 1.0 face, driven by a test controller over TCP on 127.0.0.1 (no OVS, no root).

The OVS side stays unconnected, so ports never report carrier; what is checked here is the
protocol: replies, errors, the light model's config bits, barrier ordering and reconnection.
"""
from __future__ import annotations

import struct
import time

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10, protocol
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import delete_xcon, error_of, xcon

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 6: "ODU0"}
DELAY = 0.3


@pytest.fixture
def agent(start_agent):
    return start_agent("ut-ots", 0x0F01, PORTS, delay_min=DELAY, delay_max=DELAY, unit_mbps=1.0)


def test_features_reply_lists_virtual_ports_dark(ctl, agent):
    f = ctl.features()
    assert f.datapath_id == 0x0F01 and f.n_buffers == 0
    assert sorted(f.ports) == [1, 2, 3, 4, 6]
    p3, p6 = f.ports[3], f.ports[6]
    assert p3.name == b"ODU2-3" and p6.name == b"ODU0-6"
    assert p3.curr & ofp.OFPPF_10MB_FD and p3.curr & ofp.OFPPF_FIBER
    assert p3.config & ofp.OFPPC_PORT_DOWN and p3.state & ofp.OFPPS_LINK_DOWN
    assert protocol.port_granularity(p6.name) == "ODU0"


def test_xcon_lights_ports_before_the_barrier_reply(ctl, agent):
    start = ctl.mark()
    t0 = time.monotonic()
    for a, b in ((1, 2), (2, 1)):
        ctl.send(xcon(a, b))
    barrier = ctl.barrier()
    assert barrier.at - t0 >= DELAY  # the reply waited for the provisioning delay
    before = [r for r in ctl.received[start:] if r.at <= barrier.at]
    assert not [r for r in before if r.header.msg_type == ofp.OFPT_ERROR]
    lit = {r.msg.desc.port_no for r in before
           if r.header.msg_type == ofp.OFPT_PORT_STATUS and not r.msg.desc.config & ofp.OFPPC_PORT_DOWN}
    assert lit == {1, 2}
    f = ctl.features()
    assert not f.ports[1].config & ofp.OFPPC_PORT_DOWN and f.ports[3].config & ofp.OFPPC_PORT_DOWN
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert sorted((s.match.in_port, s.actions[0].port) for s in flows) == [(1, 2), (2, 1)]
    # delete: the ports go dark again
    mark = ctl.mark()
    ctl.send(delete_xcon(1))
    ctl.send(delete_xcon(2, strict=True))
    ctl.barrier()
    dark = {s.desc.port_no for s in ctl.port_statuses(mark) if s.desc.config & ofp.OFPPC_PORT_DOWN}
    assert dark == {1, 2}
    assert ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE)) == []


def test_non_xcon_flow_mods_get_errors_and_change_nothing(ctl, agent):
    ctl.send(xcon(3, 4))
    ctl.barrier()
    cases = [
        (parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=1, dl_dst="00:00:00:00:00:02"),
                           actions=[parser.OFPActionOutput(2, 0)]),
         (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED)),
        (parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=1),
                           actions=[parser.OFPActionOutput(2, 0), parser.OFPActionOutput(3, 0)]),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_TOO_MANY)),
        (xcon(3, 2), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP)),  # busy in_port
        (xcon(1, 6), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)),  # ODU2 -> ODU0
    ]
    for msg, expected in cases:
        xid = ctl.send(msg)
        reply = ctl.reply(xid)
        etype, code, data = error_of(reply)
        assert (etype, code) == expected
        assert data == of10.serialize(msg)[:64]  # first 64 bytes of the offending message
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert [(s.match.in_port, s.actions[0].port) for s in flows] == [(3, 4)]


def test_capabilities_vendor_message(ctl, agent):
    reply = ctl.request(protocol.caps_request(of10.DP))
    assert protocol.is_caps_reply(reply)
    caps = protocol.parse_caps_reply(reply)
    assert caps.dpid == 0x0F01 and caps.switch_type == "ots" and caps.one_rule_per_port
    assert caps.ports[6].granularity == "ODU0" and caps.ports[6].capacity_mbps == 1.25
    assert caps.ports[1].capacity_units == 10.0 and caps.table_capacity == 5
    assert (caps.setup_time_min, caps.setup_time_max) == (DELAY, DELAY)


def test_other_requests(ctl, agent):
    xid = ctl.send(parser.OFPEchoRequest(of10.DP, b"ping"))
    assert ctl.reply(xid).msg.data == b"ping"
    ctl.send(parser.OFPSetConfig(of10.DP, ofp.OFPC_FRAG_DROP, 200))
    cfg = ctl.request(parser.OFPGetConfigRequest(of10.DP))
    assert (cfg.flags, cfg.miss_send_len) == (ofp.OFPC_FRAG_DROP, 200)
    (desc,) = ctl.stats(parser.OFPDescStatsRequest(of10.DP, 0))
    assert desc.mfr_desc == b"mlte" and desc.dp_desc == b"ut-ots"
    ports = ctl.stats(parser.OFPPortStatsRequest(of10.DP, 0, ofp.OFPP_NONE))
    assert sorted(p.port_no for p in ports) == [1, 2, 3, 4, 6]
    (table,) = ctl.stats(parser.OFPTableStatsRequest(of10.DP, 0))
    assert table.max_entries == 5 and table.active_count == 0
    (agg,) = ctl.stats(parser.OFPAggregateStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert agg.flow_count == 0


@pytest.mark.parametrize("raw, expected", [
    # PACKET_OUT: nothing to inject a packet into on an optical node
    (of10.serialize(parser.OFPPacketOut(of10.DP, 0xFFFFFFFF, ofp.OFPP_NONE,
                                        [parser.OFPActionOutput(1, 0)], b"\x00" * 60), 77),
     (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)),
    (of10.serialize(xcon(1, 2), 79)[:72] + struct.pack("!HH", ofp.OFPAT_OUTPUT, 3) + b"\x00" * 4,
     (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_LEN)),
    (of10.message(ofp.OFPT_STATS_REQUEST, 81, struct.pack("!HH", 77, 0)), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_STAT)),
    (of10.vendor(82, 0x2320, b"\x00" * 8), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_SUBTYPE)),  # Nicira, not a role
    (of10.vendor(86, 0x00ABCDEF, b"\x00" * 8), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VENDOR)),
    (of10.vendor(83, protocol.MLTE_VENDOR_ID, protocol.vendor_payload(99)), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_SUBTYPE)),
    (of10.message(ofp.OFPT_PORT_MOD, 84, b"\x00" * 24), (ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_PORT)),
    (of10.message(ofp.OFPT_FEATURES_REPLY, 85, b"\x00" * 24), (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)),
])
def test_bad_messages_get_errors_and_the_agent_keeps_working(ctl, agent, raw, expected):
    xid = of10.parse_header(raw).xid
    ctl.send(raw)
    etype, code, data = error_of(ctl.reply(xid))
    assert (etype, code) == expected and data == raw[:64]
    assert ctl.request(parser.OFPEchoRequest(of10.DP, b"x")).data == b"x"


def wait_until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_reconnects_after_disconnect_and_after_garbage(ctl, agent):
    ctl.send(xcon(1, 2))
    ctl.barrier()
    ctl.disconnect()
    wait_until(lambda: ctl.connections == 2)
    ctl.wait_connected()
    # state survives the controller's absence
    assert ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(in_port=1), 0xFF, ofp.OFPP_NONE))
    ctl.send(b"\x01\x00\x00\x02\x00\x00\x00\x01")  # length 2 < 8: the stream cannot be resynchronised
    wait_until(lambda: ctl.connections == 3)
    ctl.wait_connected()
    assert ctl.features().datapath_id == 0x0F01


def test_teardown_of_one_direction_does_not_blink_shared_ports(ctl, agent):
    ctl.send(xcon(1, 2))
    ctl.send(xcon(2, 1))
    ctl.barrier()
    mark = ctl.mark()
    ctl.send(delete_xcon(1))
    ctl.barrier()
    assert ctl.port_statuses(mark) == []  # 2 -> 1 still uses both ports
    ctl.send(delete_xcon(2))
    ctl.barrier()
    assert {s.desc.port_no for s in ctl.port_statuses(mark) if s.desc.config & ofp.OFPPC_PORT_DOWN} == {1, 2}


def test_modify_moves_light_to_the_new_output(ctl, agent):
    ctl.send(xcon(1, 2))
    ctl.barrier()
    mark = ctl.mark()
    ctl.send(xcon(1, 3, command=ofp.OFPFC_MODIFY))
    ctl.barrier()
    last = {s.desc.port_no: s.desc.config for s in ctl.port_statuses(mark)}
    assert last == {1: 0, 2: ofp.OFPPC_PORT_DOWN, 3: 0}
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert [(s.match.in_port, s.actions[0].port) for s in flows] == [(1, 3)]


def test_flow_removed_on_delete_when_asked(ctl, agent):
    ctl.send(xcon(3, 4, cookie=0xABC, flags=ofp.OFPFF_SEND_FLOW_REM))
    ctl.barrier()
    mark = ctl.mark()
    ctl.send(delete_xcon(3))
    removed = ctl.wait_for(lambda r: r.header.msg_type == ofp.OFPT_FLOW_REMOVED, start=mark).msg
    assert (removed.match.in_port, removed.cookie, removed.reason) == (3, 0xABC, ofp.OFPRR_DELETE)


def test_hello_below_1_0_is_refused_and_the_session_closed(ctl, agent):
    ctl.send(struct.pack("!BBHI", 0, ofp.OFPT_HELLO, 8, 4242))
    etype, code, _ = error_of(ctl.reply(4242))
    assert (etype, code) == (ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE)
    wait_until(lambda: ctl.connections == 2)  # it reconnects after the backoff


def test_failed_claim_closes_the_listener():
    """A bridge that does not exist: start() raises a user error and leaves no listening socket."""
    import socket

    from ots_virtual.ovs import OvsError

    a = OtsAgent("mlte-no-such-br", 0x0F09, PORTS, ("127.0.0.1", 9), ovs_wait=0)
    port = a.ovs_port
    with pytest.raises(OvsError) as err:
        a.start()
    assert err.value.user_error
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
