"""LLDP discovery of packet links on OpenFlow 1.3 switches, refreshed and expired.

Our own small app rather than ``os_ken.topology.switches``: that app treats every datapath as a
packet switch (it would send LLDP PACKET_OUTs and an LLDP FLOW_MOD to the OTS nodes, which accept
only XCONs) and its refresh loop relies on ``hub.Event.wait(timeout)`` (broken on the native hub).
Here LLDP goes only to packet switches, a port coming up is probed at once (circuits appear within
milliseconds), and links expire after ``[controller] link_timeout`` seconds without a sighting.

An OTS port coming up (an XCON was lit) also probes every up packet port at once: a circuit can change
where a packet port leads without that port ever going down (a router bypass at Y re-joins A:3 to C:1
while A:3 and C:1 stay up), and waiting for the next periodic round cost up to ``lldp_interval``
(1 s) of extra downtime per optical change.

That burst is followed by a few more (``FOLLOW_UP_S`` after it): a port-up report does not prove the
data plane forwards yet (the userspace datapath can apply the XCON's light a moment later), and one
burst lost that way left a router bypass undiscovered for a whole round, dark for 1.1 s in a CI run.
"""
from __future__ import annotations

import functools
import struct
import time
from collections.abc import Set

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, lldp, packet
from os_ken.lib.packet.ether_types import ETH_TYPE_LLDP

from app.controller import events, ofmsg
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.model import PACKET, PacketLink, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.runtime import SETTINGS
from app.controller.services import Service, app_scheduler
from topology import rule_plan

CHASSIS_PREFIX = b"mlte:"
TLV_END, TLV_CHASSIS_ID, TLV_PORT_ID, TLV_TTL = 0, 1, 2, 3  # IEEE 802.1AB TLV types (an LLDPDU's first three, its last)
TLV_ORG = 127  # organizationally specific (OUI + subtype: at least 4 bytes)
TLV_KNOWN = frozenset((*range(9), TLV_ORG))  # the basic TLVs and the organizationally specific one
FOLLOW_UP_S = (0.02, 0.1, 0.3)  # after an OTS-triggered burst (s): probe again, in case it raced the light
LLDP_PRIORITY = rule_plan.LLDP.priority()
COOKIE_LLDP = rule_plan.LLDP.cookie()


def lldp_trap():
    """Every LLDP frame to the controller, above every other rule."""
    return ofmsg.flow_add(COOKIE_LLDP, LLDP_PRIORITY, {"eth_type": ETH_TYPE_LLDP}, [ofmsg.to_controller()])


@functools.lru_cache(maxsize=16384)
def lldp_frame(dpid: int, port_no: int, hw_addr: str) -> bytes:
    """An LLDP frame naming (dpid, port_no) as its origin (the same bytes every round: built once, 36 µs
    with os-ken's packet library, for each of germany50's ~600 up ports every second)."""
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, hw_addr, ETH_TYPE_LLDP))
    tlvs = (
        lldp.ChassisID(subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED, chassis_id=CHASSIS_PREFIX + b"%016x" % dpid),
        lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=struct.pack("!I", port_no)),
        lldp.TTL(ttl=120),
        lldp.End(),
    )
    pkt.add_protocol(lldp.lldp(tlvs))
    pkt.serialize()
    return bytes(pkt.data)


def parse_lldp(data: bytes) -> PortRef | None:
    """The origin of one of our LLDP frames, or None for anything else. Read straight from the bytes
    (Ethernet, an optional 802.1Q tag, then the LLDPDU: Chassis ID, Port ID, TTL, ..., End, as IEEE
    802.1AB orders them): os-ken's packet library took 52 µs a frame, every LLDP PACKET_IN of every round."""
    off = 12
    if data[off:off + 2] == b"\x81\x00":
        off += 4
    if data[off:off + 2] != b"\x88\xcc":
        return None
    off += 2
    values: list[tuple[int, bytes]] = []
    while True:
        if off + 2 > len(data):
            return None  # no End TLV
        (head,) = struct.unpack_from("!H", data, off)
        kind, length = head >> 9, head & 0x1FF
        value = data[off + 2:off + 2 + length]
        if len(value) != length or kind not in TLV_KNOWN or (kind == TLV_ORG and length < 4):
            return None
        off += 2 + length
        if kind == TLV_END:
            break
        values.append((kind, value))
    if len(values) < 3 or [k for k, _ in values[:3]] != [TLV_CHASSIS_ID, TLV_PORT_ID, TLV_TTL] \
            or len(values[2][1]) < 2:
        return None
    cid, pid = values[0][1][1:], values[1][1][1:]  # after each TLV's subtype
    if not cid.startswith(CHASSIS_PREFIX) or len(pid) != 4:
        return None
    try:
        dpid = int(cid[len(CHASSIS_PREFIX):], 16)
    except ValueError:
        return None
    return PortRef(dpid, struct.unpack("!I", pid)[0])


class EventLldpRound(osken_event.EventBase):
    """Period of ``[controller] lldp_interval``: probe every up packet port, expire unseen links."""


class EventLldpBurst(osken_event.EventBase):
    """An OTS-triggered burst (``follow_up`` 0) or its ``follow_up``-th follow-up of burst ``burst``."""

    def __init__(self, burst: int = 0, follow_up: int = 0) -> None:
        super().__init__()
        self.burst, self.follow_up = burst, follow_up


def services(interval: float) -> list[Service]:
    """The LLDP app's periodic work (:mod:`app.controller.services`): the first round at once."""
    return [Service("round", EventLldpRound, interval, first=0.0), Service("burst", EventLldpBurst, None)]


class LldpDiscovery(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, MASTERSHIP: Mastership}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_lldp"
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()  # a follower sends no LLDP
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.interval = float(SETTINGS.controller["lldp_interval"])
        self.timeout = float(SETTINGS.controller["link_timeout"])
        self.services = app_scheduler(self, services(self.interval))
        self._burst_pending = False  # an OTS-triggered probe of every packet port is scheduled
        self._bursts = 0  # OTS-triggered bursts started: a newer one takes over the older's follow-ups
        self._round_at = float("inf")  # when the previous periodic round began (none yet: skip nothing)

    def start(self):
        thread = super().start()
        self.services.start()
        return thread

    def stop(self):
        self.services.stop()
        super().stop()

    # ---- periodic probing and expiry -----------------------------------------------------------
    @set_ev_cls(EventLldpRound)
    def _periodic(self, ev: EventLldpRound) -> None:
        self.services.run("round", self._round)

    def _round(self) -> None:
        """LLDP out of every up packet port but the dark ones and those whose link a latency probe
        crossed since the previous round (the monitor probes one direction of every link in turn: on
        germany50 each every ~0.5 s, and LLDP sent 94-99 frames a second instead of 148). A link is then
        seen at least every other round, well inside ``link_timeout``."""
        now = time.time()
        skip = self.view.dark_adaptation_ports() | self.view.links.confirmed_since(self._round_at)
        self._round_at = now
        self._probe_all(skip=skip)
        for link in self.view.expire_links(now, self.timeout):
            self._deleted(link, "expired")

    def _probe_all(self, skip: Set[PortRef] = frozenset()) -> int:
        """Send an LLDP frame out of every up packet port but ``skip``; return how many were sent."""
        n = 0
        for sw in self.view.of_kind(PACKET):
            for port in sw.ports.values():
                if port.up and (not skip or PortRef(sw.dpid, port.port_no) not in skip):
                    self._send(sw.dpid, port.port_no, port.hw_addr)
                    n += 1
        return n

    def _schedule_burst(self) -> None:
        """Probe every up packet port once, soon: the port-up reports of one XCON batch (both ends, and
        the neighbours' ports whose carrier follows) arrive within milliseconds and share one burst
        (posted behind the PORT_STATUS messages already queued)."""
        if self._burst_pending:
            return
        self._burst_pending = True
        self.services.later(0, EventLldpBurst())

    @set_ev_cls(EventLldpBurst)
    def _burst(self, ev: EventLldpBurst) -> None:
        """The burst (follow-up 0) or one of its follow-ups (``FOLLOW_UP_S`` after it); a newer burst
        takes over the older's follow-ups."""
        self.services.run("burst", lambda: self._burst_step(ev))

    def _burst_step(self, ev: EventLldpBurst) -> None:
        if ev.follow_up == 0:
            self._burst_pending = False
            self._bursts += 1
            mine = self._bursts
            JOURNAL.add("lldp_burst", frames=self._probe_all())  # when the probes left: the downtime break-down
        else:
            mine = ev.burst
            if self._bursts != mine:
                return
            JOURNAL.add("lldp_burst", frames=self._probe_all(), follow_up=ev.follow_up)
        if ev.follow_up < len(FOLLOW_UP_S):
            at = FOLLOW_UP_S[ev.follow_up]
            gap = at - (FOLLOW_UP_S[ev.follow_up - 1] if ev.follow_up else 0.0)
            self.services.later(gap, EventLldpBurst(mine, ev.follow_up + 1))

    def _send(self, dpid: int, port_no: int, hw_addr: str) -> None:
        dp = self.southbound.datapath(dpid)
        if dp is None or not self.mastership.acting():
            return
        self.southbound.send(dp, [ofmsg.packet_out(port_no, lldp_frame(dpid, port_no, hw_addr))], kind="lldp")

    def _deleted(self, link: PacketLink, why: str) -> None:
        JOURNAL.add("link_delete", src=str(link.src), dst=str(link.dst), why=why)  # the view announced it

    # ---- events ------------------------------------------------------------------------------------
    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        if ev.switch.kind != PACKET or not self.mastership.acting():
            return
        self._take_switch(ev.switch)

    def _take_switch(self, sw: SwitchInfo) -> None:
        self.southbound.send(sw.dpid, [lldp_trap()], kind="lldp")
        for port in sw.ports.values():
            if port.up:
                self._send(sw.dpid, port.port_no, port.hw_addr)

    @set_ev_cls(events.EventMastership)
    @loud
    def _mastership(self, ev: events.EventMastership) -> None:
        """Elected: trap and probe every packet switch now (a follower learnt no links: it sent no LLDP)."""
        if ev.master:
            for sw in self.view.of_kind(PACKET):
                if self.southbound.datapath(sw.dpid) is not None:
                    self._take_switch(sw)

    @set_ev_cls(events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev: events.EventSwitchLeave) -> None:
        for link in self.view.remove_switch_links(ev.switch.dpid):
            self._deleted(link, "switch left")

    @set_ev_cls(events.EventPortChange)
    @loud
    def _port_change(self, ev: events.EventPortChange) -> None:
        if ev.switch.kind != PACKET:
            if ev.new is not None and ev.new.up and not (ev.old is not None and ev.old.up):
                self._schedule_burst()  # a circuit was lit: packet ports may lead somewhere new
            return
        if ev.new is not None and ev.new.up:
            self._send(ev.switch.dpid, ev.new.port_no, ev.new.hw_addr)  # a circuit may just have come up
            return
        port_no = ev.port_no
        for link in self.view.remove_port_links(PortRef(ev.switch.dpid, port_no)):
            self._deleted(link, "port down")

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @loud
    def _packet_in(self, ev) -> None:
        msg = ev.msg
        dp = msg.datapath
        if dp.ofproto.OFP_VERSION != 4:
            return
        if len(msg.data) < 14 or struct.unpack_from("!H", msg.data, 12)[0] != ETH_TYPE_LLDP:
            return
        src = parse_lldp(msg.data)
        if src is None:
            return
        src_sw = self.view.switches.get(src.dpid)
        dst_sw = self.view.switches.get(dp.id)
        if src_sw is None or dst_sw is None or src_sw.kind != PACKET:
            return
        link = PacketLink(src, PortRef(dp.id, msg.match["in_port"]))
        is_new, replaced = self.view.add_link(link, time.time())
        for old in replaced:
            self._deleted(old, "replaced")
        if is_new:
            JOURNAL.add("link_add", src=str(link.src), dst=str(link.dst))
