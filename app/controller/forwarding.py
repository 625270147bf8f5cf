"""Host-to-host forwarding over the LLDP-discovered packet links (OpenFlow 1.3 switches only).

- Hosts are learned from PACKET_INs on *edge* ports (up ports with no discovered link and not attached
  to an OTS port: a circuit that just came up, or changed its far end, carries other switches'
  traffic before LLDP has seen it — learning a host there moved h1 to B:1 during a router bypass).
- Rules are installed proactively along shortest-path trees (:mod:`app.controller.paths`),
  re-planned on every link / host / switch change; rules using a lost link are removed.
- ARP never floods through the switches: every ARP packet goes to the controller (a rule above the
  forwarding rules), so each host's IPv4 address is learnt; a request for a known host is answered
  by the controller (proxy ARP); otherwise the controller copies it to the edge ports of the
  switches reachable from the sender; a reply goes straight out of the asker's port. Nothing is delivered to a host the packet links cannot reach, so two clusters talk
  only once a circuit joins them.
- OTS datapaths never receive a rule from this app.
- A (re)connecting switch keeps its rules: they are read back (flow stats filtered by our cookie) and
  adopted as installed; deletions of adopted rules are held until the topology has settled (one
  ``link_timeout`` after the last switch entered), then hosts are inferred from adopted rules that
  output to edge ports and the plan is diffed as usual (:mod:`app.controller.reconcile`). A controller
  restart therefore changes no rule of a network that did not change.
"""
from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_ARP, ETH_TYPE_LLDP

from app.controller import events, ofmsg, reconcile
from app.controller.driver_errors import DriverError
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.model import PACKET, HostInfo, PortRef
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import FlowStat, OpenFlowSouthbound
from app.controller.paths import Plan, link_graph, plan, reachable
from app.controller.runtime import SETTINGS
from app.controller.services import Deadline
from monitor.probes import PROBE_ETHERTYPE
from topology import rule_plan

COOKIE_FWD = rule_plan.FORWARDING.cookie()  # shared by the forwarding app's three bands
FWD_PRIORITY = rule_plan.FORWARDING.priority()
# above the eth_dst rules: every ARP reaches the controller (IPv4 of every host learnt)
ARP_PRIORITY = rule_plan.ARP.priority()
MISS_PRIORITY = rule_plan.TABLE_MISS.priority()


#: frames of the controller's own (LLDP, latency probes), for other apps: never a host's
CONTROL_ETHERTYPES = frozenset({ETH_TYPE_LLDP, PROBE_ETHERTYPE})


def not_for_forwarding(data: bytes) -> bool:
    """A PACKET_IN forwarding has nothing to learn from: too short for Ethernet, or an untagged
    LLDP or probe frame (read from the raw bytes: on germany50 with its backbone lit the probes came
    in by the hundred a second, and parsing each with os-ken's packet library was most of
    forwarding's CPU)."""
    return len(data) < 14 or int.from_bytes(data[12:14], "big") in CONTROL_ETHERTYPES


@dataclass(frozen=True)
class EthHeader:
    """A frame's Ethernet header, read from the bytes: forwarding needs the addresses and, for ARP only, the
    ARP body. os-ken's full packet parse of every PACKET_IN (IP, TCP, IPv6 options) was 3.7 % of the loaded
    germany50 controller's samples, nearly all of it headers nothing here reads."""

    dst: str
    src: str
    ethertype: int

    @staticmethod
    def of(data: bytes) -> EthHeader:
        """The header of ``data`` (at least 14 bytes: :func:`not_for_forwarding` turned shorter ones away)."""
        return EthHeader(data[0:6].hex(":"), data[6:12].hex(":"), int.from_bytes(data[12:14], "big"))

    def arp_body(self, data: bytes) -> arp.arp | None:
        """The ARP packet this frame carries (untagged), None if it is no ARP or cut short."""
        if self.ethertype != ETH_TYPE_ARP:
            return None
        try:
            body, _, _ = arp.arp.parser(data[14:])
        except struct.error:  # cut short: no ARP (os-ken's packet parse stops there too)
            return None
        return body if isinstance(body, arp.arp) else None


@dataclass
class _RuleReadback:
    """A read-back of one switch's forwarding rules (flow stats filtered by our cookie), under way."""

    token: int  # tells this read-back's answer from an older one's (the switch reconnected meanwhile)
    touched: set[str] = field(default_factory=set)  # MACs we installed or deleted since it began


class EventRulesReadBack(osken_event.EventBase):
    """Internal: the answer to a rule read-back, posted by the greenthread that waited for it."""

    def __init__(self, dpid: int, token: int, stats: list[FlowStat] | None, error: str | None = None) -> None:
        super().__init__()
        self.dpid, self.token, self.stats, self.error = dpid, token, stats, error


class EventSettled(osken_event.EventBase):
    """Internal: no switch entered for the settle time; held deletions may go (sent to ourselves)."""


def forwarding_rule(st: FlowStat) -> tuple[str, int] | None:
    """(MAC, out port) of a read-back rule that is one of our ``eth_dst -> output`` rules, else None."""
    if st.priority != FWD_PRIORITY or st.cookie != COOKIE_FWD or st.table != 0:
        return None
    mac = st.match.get("eth_dst")
    if set(st.match) != {"eth_dst"} or not isinstance(mac, str) or len(st.out_ports) != 1:
        return None
    return mac.lower(), st.out_ports[0]


def base_rules() -> list:
    """Table-miss and ARP to the controller (ADD overwrites an identical rule: no gap). ARP is handled
    by the controller (proxy replies, replies delivered to the asker's port): a reply following the
    asker's eth_dst rule would hide the replier's IPv4 address from us."""
    return [ofmsg.flow_add(COOKIE_FWD, MISS_PRIORITY, {}, [ofmsg.to_controller()]),
            ofmsg.flow_add(COOKIE_FWD, ARP_PRIORITY, {"eth_type": ETH_TYPE_ARP}, [ofmsg.to_controller()])]


def forwarding_flow_mod(mac: str, port: int | None):
    """The ``eth_dst=mac -> output:port`` rule, or (``port`` None) the strict delete of it."""
    if port is None:
        return ofmsg.flow_delete_strict(COOKIE_FWD, FWD_PRIORITY, {"eth_dst": mac})
    return ofmsg.flow_add(COOKIE_FWD, FWD_PRIORITY, {"eth_dst": mac}, [ofmsg.output(port)])


class Forwarding(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, MASTERSHIP: Mastership}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_forwarding"
        # several controllers: a follower plans nothing and sends nothing; it takes over when elected
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.hosts: Mapping[str, HostInfo] = self.view.hosts  # the view owns them; we learn them
        self.installed: Plan = {}
        # dpid -> {mac: port}: rules read back from the switch, not (re)installed by us since; their
        # deletion is held until the topology settled
        self.adopted: Plan = {}
        self._readback: dict[int, _RuleReadback] = {}
        self._tokens = itertools.count(1)
        self.barrier_timeout = float(SETTINGS.controller["barrier_timeout"])
        self.settle = reconcile.settle_seconds(SETTINGS.controller["link_timeout"], SETTINGS.controller["lldp_interval"])
        # a takeover: the switches are connected already and LLDP probes every port at once (lldp.py), so
        # two LLDP rounds see every link; hosts are inferred then, not one link_timeout later (the web
        # refused reservations on host ports for that long after each takeover)
        self.takeover_settle = min(self.settle, 2.0 * float(SETTINGS.controller["lldp_interval"]))
        self.settle_at = 0.0  # time.monotonic() before which adopted rules are held
        self._switch_macs: set[str] = set()  # every switch port's own MAC (never a host), per view version
        self._macs_at = -1
        self._settled_due = Deadline(lambda ev: self.send_event(self.name, ev), EventSettled,
                                     spawn=hub.spawn, sleep=hub.sleep)
        self._running = False
        self._graph = link_graph([], [])

    def start(self):
        self._running = True  # timers only in a running controller (unit tests call handlers directly)
        return super().start()

    def stop(self):
        self._running = False
        self._settled_due.stop()
        super().stop()

    @property
    def installed(self) -> Plan:
        """The installed eth_dst rules, kept in the network view (the monitor's counting rules read them)."""
        return self._installed

    @installed.setter
    def installed(self, plan: Plan) -> None:
        self._installed = plan
        self.view.set_forwarding_rules(plan)


    # ---- planning --------------------------------------------------------------------------------
    def _packet_dpids(self) -> list[int]:
        return [sw.dpid for sw in self.view.of_kind(PACKET)]

    def holding(self, now: float | None = None) -> bool:
        """True until the topology settled after the last switch (re)connected."""
        return (time.monotonic() if now is None else now) < self.settle_at

    def _port_up(self, ref: PortRef) -> bool:
        sw = self.view.switches.get(ref.dpid)
        port = sw.ports.get(ref.port_no) if sw is not None else None
        return port is not None and port.up

    @set_ev_cls(events.EventReservedPorts)
    @loud
    def _reserved_changed(self, ev: events.EventReservedPorts) -> None:
        self._replan()

    def _replan(self) -> None:
        if not self.mastership.acting():
            return
        t0 = time.monotonic()
        links = self.view.usable_links()  # never over a circuit a plan or a reservation holds
        self._graph = link_graph(self._packet_dpids(), links)
        link_ports = self.view.links.ports_in_links()
        for mac, host in list(self.hosts.items()):  # a "host" seen on what is now a link port was not one
            if host.port in link_ports:
                self.view.remove_host(mac)
        new = plan(self._graph, self.hosts.values())
        held = {d: set(rules) for d, rules in self.adopted.items() if rules} if self.holding() else {}
        outs = {PortRef(d, self.installed[d][m]) for d, macs in held.items() for m in macs if m in self.installed.get(d, {})}
        dead = {ref for ref in outs if not self._port_up(ref)}  # a held rule into a down port delivers nothing
        install, delete, after = reconcile.held_changes(self.installed, new, held, dead)
        for dpid, mac in delete:
            self._flow(dpid, mac, None)
        for dpid, mac, port in install:
            self._flow(dpid, mac, port)
        self.installed = after
        if install or delete:  # how long the hub was busy planning: the downtime break-down reads it
            JOURNAL.add("replan", ms=round((time.monotonic() - t0) * 1000, 2), install=len(install), delete=len(delete))

    def _flow(self, dpid: int, mac: str, port: int | None) -> None:
        self.adopted.get(dpid, {}).pop(mac, None)  # ours from now on (or gone)
        rb = self._readback.get(dpid)
        if rb is not None:
            rb.touched.add(mac)  # newer than what the read-back under way will say
        dp = self.southbound.datapath(dpid)
        if dp is None:
            return
        self.southbound.send(dp, [forwarding_flow_mod(mac, port)], kind="forwarding")

    # ---- topology events ---------------------------------------------------------------------------
    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        if ev.switch.kind != PACKET:
            return
        if not self.mastership.acting():  # a follower: what the switch holds is read when we take over
            self.installed[ev.switch.dpid] = {}
            self.adopted[ev.switch.dpid] = {}
            return
        self._take_switch(ev.switch.dpid)

    @set_ev_cls(events.EventMastership)
    @loud
    def _mastership(self, ev: events.EventMastership) -> None:
        """Elected: every packet switch is read back and adopted as if it had just connected (held until
        the topology settled), then planned; deposed: nothing more leaves (the gate is closed)."""
        if ev.master:
            for dpid in self._packet_dpids():
                if self.southbound.datapath(dpid) is not None:
                    self._take_switch(dpid, self.takeover_settle)

    def _take_switch(self, dpid: int, settle: float | None = None) -> None:
        dp = self.southbound.datapath(dpid)
        # no wipe: the switch keeps forwarding with the rules it has (a controller restart must not
        # cut traffic); read them back and adopt them, held until the topology settled
        rb = self._readback[dpid] = _RuleReadback(next(self._tokens))
        if self._running:  # unit tests deliver EventRulesReadBack themselves
            hub.spawn(self._read_back, dpid, rb.token)
        self.southbound.send(dp, base_rules(), kind="forwarding")
        self.installed[dpid] = {}  # unknown until the read-back answers
        self.adopted[dpid] = {}
        self._hold(time.monotonic(), settle)
        self._replan()

    # ---- read-back, adoption, settling -----------------------------------------------------------
    def _hold(self, now: float, settle: float | None = None) -> None:
        """A switch (re)connected: the topology is not settled before ``now + settle``."""
        self.settle_at = max(self.settle_at, now + (self.settle if settle is None else settle))
        if self._running:
            self._settled_due.push(self.settle_at)

    def _read_back(self, dpid: int, token: int) -> None:
        """Greenthread: our rules on the switch (flow stats by cookie), posted to ourselves."""
        try:
            stats = self.southbound.flow_stats(dpid, COOKIE_FWD, rule_plan.ALL_BITS, timeout=self.barrier_timeout)
            ev = EventRulesReadBack(dpid, token, stats)
        except DriverError as exc:  # no answer (BarrierTimeout is one), refused, disconnected
            ev = EventRulesReadBack(dpid, token, None, str(exc))
        self.send_event(self.name, ev)

    @set_ev_cls(EventRulesReadBack)
    @loud
    def _rules_read_back(self, ev: EventRulesReadBack) -> None:
        rb = self._readback.get(ev.dpid)
        if rb is None or rb.token != ev.token:
            return  # an older read-back's answer, or the switch left
        if ev.stats is None:  # rules we cannot see: start clean as far as our rules go (the old way)
            del self._readback[ev.dpid]
            JOURNAL.add("rules_adopted", dpid=ev.dpid, rules=0, error=ev.error)
            dp = self.southbound.datapath(ev.dpid)
            if dp is not None:  # the cookie spares other apps' rules
                self.southbound.send(dp, [ofmsg.flow_delete(COOKIE_FWD), *base_rules()], kind="forwarding")
                self.installed[ev.dpid] = {}
                self.adopted[ev.dpid] = {}
                self._replan()
            return
        entries = [r for st in ev.stats if (r := forwarding_rule(st)) is not None]
        self._adopt(ev.dpid, rb, entries)

    def _adopt(self, dpid: int, rb: _RuleReadback, entries: list[tuple[str, int]]) -> None:
        del self._readback[dpid]
        mine = self.installed.setdefault(dpid, {})
        new = reconcile.adopt_rules(entries, mine, rb.touched)
        mine.update(new)
        self.adopted.setdefault(dpid, {}).update(new)
        sw = self.view.switches.get(dpid)
        JOURNAL.add("rules_adopted", node=sw.name if sw else None, dpid=dpid, rules=len(new),
                    held=self.holding())
        if not self.holding():  # a late answer: the topology is known, settle this switch now
            self._settle()

    @set_ev_cls(EventSettled)
    @loud
    def _settled(self, ev: EventSettled) -> None:
        if self.holding():
            return  # another switch entered meanwhile: its own timer follows
        self._settle()

    def _settle(self) -> None:
        """The topology settled: learn the hosts the adopted rules point to, then plan without holding
        (adopted rules the plan does not want go now)."""
        known = set(self.hosts)
        edges = set(self._edge_ports({sw.dpid for sw in self.view.of_kind(PACKET)}))
        found = reconcile.infer_hosts(self.adopted, edges, known)
        for mac, ref in found.items():
            host = HostInfo(mac=mac, ip=None, port=ref)
            self.view.add_host(host)
            JOURNAL.add("host", mac=mac, ip=None, port=str(ref), adopted=True)
        self._replan()
        self.adopted = {d: {} for d in self.adopted}

    @set_ev_cls(events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev: events.EventSwitchLeave) -> None:
        self.installed.pop(ev.switch.dpid, None)
        self.adopted.pop(ev.switch.dpid, None)
        self._readback.pop(ev.switch.dpid, None)
        for mac, host in list(self.hosts.items()):
            if host.port.dpid == ev.switch.dpid:
                self.view.remove_host(mac)
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
        ref = PortRef(ev.switch.dpid, ev.port_no)
        gone = [mac for mac, h in self.hosts.items() if h.port == ref]
        for mac in gone:
            self.view.remove_host(mac)
        if gone:
            self._replan()

    # ---- packets -----------------------------------------------------------------------------------
    def _edge_ports(self, dpids: set[int]) -> list[PortRef]:
        link_ports = self.view.links.ports_in_links() | self.view.adaptation_ports()
        out = []
        for dpid in sorted(dpids):
            sw = self.view.switches.get(dpid)
            if sw is None or sw.kind != PACKET:
                continue
            for p in sorted(sw.ports.values(), key=lambda p: p.port_no):
                ref = PortRef(dpid, p.port_no)
                if p.up and ref not in link_ports:
                    out.append(ref)
        return out

    def _packet_out(self, ref: PortRef, data: bytes) -> None:
        if not self.mastership.acting():
            return
        dp = self.southbound.datapath(ref.dpid)
        if dp is None:
            return
        self.southbound.send(dp, [ofmsg.packet_out(ref.port_no, data)], kind="forwarding")

    def _may_be_a_host(self, mac: str, ref: PortRef) -> bool:
        """Whether a frame from ``mac`` at edge port ``ref`` may come from a host. Not a switch port's own
        frame (the kernel's IPv6 neighbour discovery on a port that just came up carries the port's
        MAC), and, while an optical scan probes, nothing new at a port with no known host: a port the
        scan lit is an adaptation not decoded yet (germany50's scan learnt 1-2 'hosts' that way)."""
        if self._macs_at != self.view.version:
            self._switch_macs = {p.hw_addr.lower() for sw in self.view.switches.values() for p in sw.ports.values()}
            self._macs_at = self.view.version
        if mac.lower() in self._switch_macs:
            return False
        return not self.view.scanning or any(h.port == ref for h in self.hosts.values())

    def _learn(self, mac: str, ip: str | None, ref: PortRef) -> None:
        old = self.hosts.get(mac)
        host = HostInfo(mac=mac, ip=ip or (old.ip if old else None), port=ref)
        if old == host:
            return
        self.view.add_host(host)
        JOURNAL.add("host", mac=mac, ip=host.ip, port=str(ref))
        if old is None or old.port != ref:
            self._replan()

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @loud
    def _packet_in(self, ev) -> None:
        msg = ev.msg
        dp = msg.datapath
        inv = self.view
        sw = inv.switches.get(dp.id)
        if sw is None or sw.kind != PACKET or not_for_forwarding(msg.data):
            return
        eth = EthHeader.of(msg.data)
        ref = PortRef(dp.id, msg.match["in_port"])
        if ref in self.view.links.ports_in_links() or ref in self.view.adaptation_ports():
            return  # transit traffic with no rule yet (or a circuit LLDP has not seen yet); edges learn, links do not
        if not self._may_be_a_host(eth.src, ref):
            return
        arp_pkt = eth.arp_body(msg.data)
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
