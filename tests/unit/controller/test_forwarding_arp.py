"""The forwarding app traps ARP so that every host's IPv4 address is learnt (fake datapath, no switch)."""
from __future__ import annotations

from types import SimpleNamespace

from os_ken.lib.packet import arp, ethernet, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_ARP
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

from app.controller import events
from app.controller.forwarding import ARP_PRIORITY, FWD_PRIORITY, Forwarding
from app.controller.model import PACKET, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound

H1, H2 = "00:00:00:00:00:01", "00:00:00:00:00:02"


class FakeDp:
    ofproto, ofproto_parser = ofproto_v1_3, ofproto_v1_3_parser

    def __init__(self, dpid: int):
        self.id = dpid
        self.sent: list = []

    def send_msg(self, msg) -> None:
        self.sent.append(msg)


def make_app():
    dp = FakeDp(0xA1)
    sw = SwitchInfo(0xA1, PACKET, 4, "A", {p: PortInfo(p, f"A-eth{p}", "00:00:00:00:00:0a", True) for p in (1, 2)})
    view, southbound = NetworkView(), OpenFlowSouthbound()
    view.add_switch(sw)
    southbound.datapaths[0xA1] = dp
    app = Forwarding(**{VIEW: view, SOUTHBOUND: southbound})
    app.send_event_to_observers = lambda ev: None
    return app, dp, sw


def arp_frame(opcode: int, src_mac: str, src_ip: str, dst_mac: str, dst_ip: str) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst_mac if opcode == arp.ARP_REPLY else "ff:ff:ff:ff:ff:ff", src_mac,
                                       ETH_TYPE_ARP))
    pkt.add_protocol(arp.arp(opcode=opcode, src_mac=src_mac, src_ip=src_ip, dst_mac=dst_mac, dst_ip=dst_ip))
    pkt.serialize()
    return bytes(pkt.data)


def packet_in(app, dp, port: int, data: bytes) -> None:
    msg = SimpleNamespace(datapath=dp, data=data, match={"in_port": port})
    app._packet_in(SimpleNamespace(msg=msg))


def test_arp_trap_rule_is_installed_above_the_forwarding_rules():
    app, dp, sw = make_app()
    app._switch_enter(events.EventSwitchEnter(sw))
    arp_rules = [m for m in dp.sent if getattr(m, "priority", None) == ARP_PRIORITY]
    assert len(arp_rules) == 1 and ARP_PRIORITY > FWD_PRIORITY
    rule = arp_rules[0]
    assert rule.match["eth_type"] == ETH_TYPE_ARP
    (action,) = rule.instructions[0].actions
    assert action.port == ofproto_v1_3.OFPP_CONTROLLER


def test_a_reply_teaches_the_repliers_ip_even_when_it_was_known_without_one():
    app, dp, sw = make_app()
    app._switch_enter(events.EventSwitchEnter(sw))
    # h2 first seen without an IPv4 address (e.g. IPv6 neighbour discovery)
    app._learn(H2, None, PortRef(0xA1, 2))
    packet_in(app, dp, 1, arp_frame(arp.ARP_REQUEST, H1, "10.0.0.1", "00:00:00:00:00:00", "10.0.0.2"))
    assert app.hosts[H1].ip == "10.0.0.1"
    dp.sent.clear()
    packet_in(app, dp, 2, arp_frame(arp.ARP_REPLY, H2, "10.0.0.2", H1, "10.0.0.1"))
    assert app.hosts[H2].ip == "10.0.0.2"
    outs = [m for m in dp.sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)]
    assert [m.actions[0].port for m in outs] == [1]  # delivered to the asker's port by the controller


def test_no_host_is_learnt_on_a_port_attached_to_an_ots():
    """A packet arriving on an adaptation port came through a circuit (LLDP may not have seen it yet):
    during a router bypass h1's own probe reached B:1 and h1 was 'learnt' there."""
    app, dp, sw = make_app()
    app._switch_enter(events.EventSwitchEnter(sw))
    assert app.view.adaptation_ports() == set()
    app.view.set_scan({(0xF01, 1): PortRef(0xA1, 2)}, {})  # the scan found A:2 cabled to OTS port X:1
    packet_in(app, dp, 2, arp_frame(arp.ARP_REQUEST, H1, "10.0.0.1", "00:00:00:00:00:00", "10.0.0.2"))
    assert H1 not in app.hosts
    packet_in(app, dp, 1, arp_frame(arp.ARP_REQUEST, H2, "10.0.0.2", "00:00:00:00:00:00", "10.0.0.9"))
    assert app.hosts[H2].port == PortRef(0xA1, 1)
    outs = [m for m in dp.sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)]
    assert all(m.actions[0].port != 2 for m in outs)  # an unknown target's ARP is not copied into the circuit


def test_a_switch_ports_own_frame_is_not_a_host():
    """The kernel's IPv6 neighbour discovery on a port that just came up carries the port's own MAC."""
    app, dp, sw = make_app()
    app._switch_enter(events.EventSwitchEnter(sw))
    packet_in(app, dp, 1, arp_frame(arp.ARP_REQUEST, "00:00:00:00:00:0A", "10.0.0.7", "00:00:00:00:00:00", "10.0.0.2"))
    assert app.hosts == {}


def test_no_new_host_is_learnt_while_the_optical_scan_probes_but_known_ones_are_kept():
    """A packet port a scan round lit is an adaptation not decoded yet (germany50: 1-2 'hosts' per scan)."""
    app, dp, sw = make_app()
    app._switch_enter(events.EventSwitchEnter(sw))
    app._learn(H1, "10.0.0.1", PortRef(0xA1, 1))
    app.view.set_scanning(True)
    packet_in(app, dp, 2, arp_frame(arp.ARP_REQUEST, H2, "10.0.0.2", "00:00:00:00:00:00", "10.0.0.1"))
    assert H2 not in app.hosts
    packet_in(app, dp, 1, arp_frame(arp.ARP_REQUEST, H1, "10.0.0.1", "00:00:00:00:00:00", "10.0.0.2"))
    assert app.hosts[H1].port == PortRef(0xA1, 1)  # a known host's port still answers
    app.view.set_scanning(False)
    packet_in(app, dp, 2, arp_frame(arp.ARP_REQUEST, H2, "10.0.0.2", "00:00:00:00:00:00", "10.0.0.1"))
    assert app.hosts[H2].port == PortRef(0xA1, 2)


def test_lldp_probe_and_runt_frames_are_not_for_forwarding():
    from app.controller.forwarding import not_for_forwarding
    from monitor.probes import probe_frame

    assert not_for_forwarding(probe_frame(7, 1))
    assert not_for_forwarding(b"\x01\x80\xc2\x00\x00\x0e" + b"\x02" * 6 + b"\x88\xcc" + b"\x00" * 46)  # LLDP
    assert not_for_forwarding(b"\xff" * 13)
    assert not not_for_forwarding(b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28)  # ARP
    assert not not_for_forwarding(b"\xff" * 6 + b"\x02" * 6 + b"\x81\x00\x00\x65\x88\xb5" + b"\x00" * 40)  # tagged


def test_the_ethernet_header_read_from_the_bytes_agrees_with_os_kens_parse():
    """Forwarding reads addresses (and ARP only) from the raw frame instead of parsing every header."""
    from os_ken.lib.packet import ipv4, tcp, vlan

    from app.controller.forwarding import EthHeader

    def frame(*protos) -> bytes:
        pkt = packet.Packet()
        for p in protos:
            pkt.add_protocol(p)
        pkt.serialize()
        return bytes(pkt.data)

    req = arp.arp(opcode=arp.ARP_REQUEST, src_mac="02:AB:00:00:00:01", src_ip="10.0.0.1",
                  dst_mac="00:00:00:00:00:00", dst_ip="10.0.0.2")
    frames = [
        frame(ethernet.ethernet("ff:ff:ff:ff:ff:ff", "02:ab:00:00:00:01", ETH_TYPE_ARP), req),
        frame(ethernet.ethernet(H2, H1, 0x0800), ipv4.ipv4(src="10.0.0.1", dst="10.0.0.2", proto=6),
              tcp.tcp(src_port=1, dst_port=2)),
        frame(ethernet.ethernet(H2, H1, 0x8100), vlan.vlan(vid=7, ethertype=ETH_TYPE_ARP), req),
    ]
    for data in frames + [frames[0][:30]]:  # and an ARP cut short
        pkt = packet.Packet(data)
        eth, ours = pkt.get_protocol(ethernet.ethernet), EthHeader.of(data)
        assert (ours.dst, ours.src, ours.ethertype) == (eth.dst, eth.src, eth.ethertype)
        theirs = pkt.get_protocol(arp.arp) if eth.ethertype == ETH_TYPE_ARP else None
        mine = ours.arp_body(data)
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert (mine.opcode, mine.src_mac, mine.src_ip, mine.dst_ip) == (
                theirs.opcode, theirs.src_mac, theirs.src_ip, theirs.dst_ip)
    assert EthHeader.of(frames[0]).arp_body(frames[0]).src_ip == "10.0.0.1"
