"""Host-to-host forwarding over the LLDP-discovered packet links (OpenFlow 1.3 switches only).

- Hosts are learned from PACKET_INs on *edge* ports (up ports with no discovered link).
- Rules are installed proactively along shortest-path trees (:mod:`app.controller.paths`),
  re-planned on every link / host / switch change; rules using a lost link are removed.
- ARP never floods through the switches: every ARP packet goes to the controller (a rule above the
  forwarding rules), so each host's IPv4 address is learnt; a request for a known host is answered
  by the controller (proxy ARP); otherwise the controller copies it to the edge ports of the
  switches reachable from the sender; a reply goes straight out of the asker's port. Nothing is delivered to a host the packet links cannot reach, so two clusters talk
  only once a circuit joins them.
- OTS datapaths never receive a rule from this app.
"""
from __future__ import annotations

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_ARP, ETH_TYPE_LLDP

from app.controller import events, rule_plan
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.model import PACKET, HostInfo, PortRef
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.of13 import add_flow, delete_flows
from app.controller.paths import Plan, diff, link_graph, plan, reachable

COOKIE_FWD = rule_plan.FORWARDING.cookie()  # shared by the forwarding app's three bands
FWD_PRIORITY = rule_plan.FORWARDING.priority()
# above the eth_dst rules: every ARP reaches the controller (IPv4 of every host learnt)
ARP_PRIORITY = rule_plan.ARP.priority()
MISS_PRIORITY = rule_plan.TABLE_MISS.priority()


class Forwarding(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView}
    _EVENTS = [events.EventHostAdd]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_forwarding"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.hosts: dict[str, HostInfo] = self.view.hosts  # the view owns them; we learn them
        self.installed: Plan = {}
        self._graph = link_graph([], [])

    @property
    def installed(self) -> Plan:
        """The installed eth_dst rules, kept in the network view (the monitor's counting rules read them)."""
        return self.view.forwarding_rules

    @installed.setter
    def installed(self, plan: Plan) -> None:
        self.view.forwarding_rules = plan

    def _inventory(self):
        return app_manager.lookup_service_brick("mlte_inventory")

    def _lldp(self):
        return app_manager.lookup_service_brick("mlte_lldp")

    # ---- planning --------------------------------------------------------------------------------
    def _packet_dpids(self) -> list[int]:
        return [sw.dpid for sw in self._inventory().of_kind(PACKET)]

    def _replan(self) -> None:
        links = self._lldp().table.links()
        self._graph = link_graph(self._packet_dpids(), links)
        link_ports = self._lldp().table.ports_in_links()
        for mac, host in list(self.hosts.items()):  # a "host" seen on what is now a link port was not one
            if host.port in link_ports:
                del self.hosts[mac]
        new = plan(self._graph, self.hosts.values())
        install, delete = diff(self.installed, new)
        for dpid, mac in delete:
            self._flow(dpid, mac, None)
        for dpid, mac, port in install:
            self._flow(dpid, mac, port)
        self.installed = new

    def _flow(self, dpid: int, mac: str, port: int | None) -> None:
        dp = self._inventory().datapath(dpid)
        if dp is None:
            return
        match = dp.ofproto_parser.OFPMatch(eth_dst=mac)
        if port is None:
            delete_flows(dp, COOKIE_FWD, match, priority=FWD_PRIORITY)
        else:
            add_flow(dp, COOKIE_FWD, FWD_PRIORITY, match, [dp.ofproto_parser.OFPActionOutput(port)])

    # ---- topology events ---------------------------------------------------------------------------
    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        if ev.switch.kind != PACKET:
            return
        dp = self._inventory().datapath(ev.switch.dpid)
        parser, ofp = dp.ofproto_parser, dp.ofproto
        # start from a clean table as far as our rules go (the cookie spares LLDP's trap rule)
        delete_flows(dp, COOKIE_FWD, parser.OFPMatch())
        to_controller = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        add_flow(dp, COOKIE_FWD, MISS_PRIORITY, parser.OFPMatch(), to_controller)
        # ARP is handled by the controller (proxy replies, replies delivered to the asker's port): a
        # reply following the asker's eth_dst rule would hide the replier's IPv4 address from us
        add_flow(dp, COOKIE_FWD, ARP_PRIORITY, parser.OFPMatch(eth_type=ETH_TYPE_ARP), to_controller)
        self.installed.pop(ev.switch.dpid, None)
        self._replan()

    @set_ev_cls(events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev: events.EventSwitchLeave) -> None:
        self.installed.pop(ev.switch.dpid, None)
        for mac, host in list(self.hosts.items()):
            if host.port.dpid == ev.switch.dpid:
                del self.hosts[mac]
        self._replan()

    @set_ev_cls(events.EventLinkAdd)
    @loud
    def _link_add(self, ev: events.EventLinkAdd) -> None:
        self._replan()

    @set_ev_cls(events.EventLinkDelete)
    @loud
    def _link_delete(self, ev: events.EventLinkDelete) -> None:
        self._replan()

    @set_ev_cls(events.EventPortChange)
    @loud
    def _port_change(self, ev: events.EventPortChange) -> None:
        if ev.switch.kind != PACKET or (ev.new is not None and ev.new.up):
            return
        ref = PortRef(ev.switch.dpid, (ev.new or ev.old).port_no)
        gone = [mac for mac, h in self.hosts.items() if h.port == ref]
        for mac in gone:
            del self.hosts[mac]
        if gone:
            self._replan()

    # ---- packets -----------------------------------------------------------------------------------
    def _edge_ports(self, dpids: set[int]) -> list[PortRef]:
        link_ports = self._lldp().table.ports_in_links()
        out = []
        for dpid in sorted(dpids):
            sw = self._inventory().switches.get(dpid)
            if sw is None or sw.kind != PACKET:
                continue
            for p in sorted(sw.ports.values(), key=lambda p: p.port_no):
                ref = PortRef(dpid, p.port_no)
                if p.up and ref not in link_ports:
                    out.append(ref)
        return out

    def _packet_out(self, ref: PortRef, data: bytes) -> None:
        dp = self._inventory().datapath(ref.dpid)
        if dp is None:
            return
        parser, ofp = dp.ofproto_parser, dp.ofproto
        dp.send_msg(
            parser.OFPPacketOut(
                datapath=dp,
                buffer_id=ofp.OFP_NO_BUFFER,
                in_port=ofp.OFPP_CONTROLLER,
                actions=[parser.OFPActionOutput(ref.port_no)],
                data=data,
            )
        )

    def _learn(self, mac: str, ip: str | None, ref: PortRef) -> None:
        old = self.hosts.get(mac)
        host = HostInfo(mac=mac, ip=ip or (old.ip if old else None), port=ref)
        if old == host:
            return
        self.hosts[mac] = host
        JOURNAL.add("host", mac=mac, ip=host.ip, port=str(ref))
        self.send_event_to_observers(events.EventHostAdd(host))
        if old is None or old.port != ref:
            self._replan()

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @loud
    def _packet_in(self, ev) -> None:
        msg = ev.msg
        dp = msg.datapath
        inv = self._inventory()
        sw = inv.switches.get(dp.id)
        if sw is None or sw.kind != PACKET:
            return
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None or eth.ethertype == ETH_TYPE_LLDP:
            return
        ref = PortRef(dp.id, msg.match["in_port"])
        if ref in self._lldp().table.ports_in_links():
            return  # transit traffic with no rule yet; edges learn, links do not
        arp_pkt = pkt.get_protocol(arp.arp) if eth.ethertype == ETH_TYPE_ARP else None
        src_is_unicast = not (int(eth.src.split(":")[0], 16) & 1)
        if src_is_unicast:
            self._learn(eth.src, arp_pkt.src_ip if arp_pkt else None, ref)
        scope = reachable(self._graph, dp.id)
        if arp_pkt is not None:
            self._handle_arp(eth, arp_pkt, ref, scope, msg.data)
            return
        dst = self.hosts.get(eth.dst)
        if dst is not None and dst.port.dpid in scope:
            self._packet_out(dst.port, msg.data)  # first packet of a flow whose rules are being installed

    def _handle_arp(self, eth, arp_pkt, ref: PortRef, scope: set[int], data: bytes) -> None:
        if arp_pkt.opcode == arp.ARP_REQUEST:
            target = next((h for h in self.hosts.values() if h.ip == arp_pkt.dst_ip), None)
            if target is not None and target.port.dpid in scope:
                self._packet_out(ref, self._arp_reply(arp_pkt, target.mac))
                return
            for edge in self._edge_ports(scope):
                if edge != ref:
                    self._packet_out(edge, data)
            return
        dst = self.hosts.get(eth.dst)
        if dst is not None and dst.port.dpid in scope:
            self._packet_out(dst.port, data)

    @staticmethod
    def _arp_reply(req, mac: str) -> bytes:
        pkt = packet.Packet()
        pkt.add_protocol(ethernet.ethernet(req.src_mac, mac, ETH_TYPE_ARP))
        pkt.add_protocol(
            arp.arp(opcode=arp.ARP_REPLY, src_mac=mac, src_ip=req.dst_ip, dst_mac=req.src_mac, dst_ip=req.src_ip)
        )
        pkt.serialize()
        return bytes(pkt.data)
