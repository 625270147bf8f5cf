"""A lab's switches as :class:`tests.lib.fakeoftable.FakeDatapath` s behind the controller's real southbound.

Built from a ``topology.spec.LabSpec`` (one source of truth for topologies): every packet switch is
an OpenFlow 1.3 fake datapath, every OTS an OpenFlow 1.0 one, all connected to one
:class:`OpenFlowSouthbound` and described in one :class:`NetworkView`, so the controller's apps and
managers run unchanged and everything they send lands in fake tables. :meth:`OFFabric.reach` then
follows a packet through the tables, copper links and lit circuits (adaptation → XCONs → fibres →
adaptation) to the hosts it reaches.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp13

from app.controller.live_southbound import LiveSouthbound
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from tests.lib.fakeoftable import CONTROLLER, OF10, OF13, FakeDatapath, FakeOFTable, packet_fields

Port = tuple[str, int]
Hop = tuple[str, int, int]  # (switch, in_port, out_port)
MAX_HOPS = 64


class OFFabric:
    """Fake datapaths wired like a lab; the controller's view and southbound over them."""

    def __init__(self, spec: Any) -> None:
        self.view = NetworkView()
        self.southbound = OpenFlowSouthbound(barrier_timeout=0.5)
        self.dps: dict[str, FakeDatapath] = {}
        self.hosts = {h.name: h for h in spec.hosts}
        self.host_at = {(h.switch, h.port): h.name for h in spec.hosts}
        self.copper: dict[Port, Port] = {}
        self.adapt: dict[Port, Port] = {}  # packet port -> OTS port
        self.adapt_rev: dict[Port, Port] = {}
        self.fibre: dict[Port, Port] = {}
        self.auto_links = False  # True: XCON changes update the view's links without LLDP (:meth:`discover`)
        self._followed: dict[str, int] = {}  # switch -> PACKET_OUTs already followed by :meth:`deliver`
        ports: dict[str, set[int]] = {s.name: set() for s in spec.switches}
        for h in spec.hosts:
            ports[h.switch].add(h.port)
        for link in spec.links:
            a, b = (link.a, link.a_port), (link.b, link.b_port)
            if link.kind == "packet":
                self.copper[a], self.copper[b] = b, a
                ports[a[0]].add(a[1])
                ports[b[0]].add(b[1])
            elif link.kind == "adaptation":
                self.adapt[a], self.adapt_rev[b] = b, a
                ports[a[0]].add(a[1])
            elif link.kind == "optical":
                self.fibre[a], self.fibre[b] = b, a
        for i, s in enumerate(spec.switches):
            self._add(s.name, 0xA00 + i, PACKET, OF13, ports[s.name])
        for i, o in enumerate(spec.ots):
            self._add(o.name, 0xF00 + i, OTS, OF10, set(o.ports))
        # what a scan finds: which packet port each OTS port feeds
        self.view.set_scan({(self.dpid(oport[0]), oport[1]): PortRef(self.dpid(pport[0]), pport[1])
                            for pport, oport in self.adapt.items()})

    def _add(self, name: str, dpid: int, kind: str, version: int, ports: set[int]) -> None:
        dp = FakeDatapath.for_southbound(self.southbound, dpid, version, ports)
        dp.after_apply = self._applied
        self.dps[name] = dp
        infos = {p: PortInfo(p, f"{name}-eth{p}", f"02:00:00:00:{dpid & 0xFF:02x}:{p:02x}", True) for p in ports}
        self.view.add_switch(SwitchInfo(dpid, kind, version, name, infos))

    # ---- lookups ---------------------------------------------------------------------------------
    def dpid(self, name: str) -> int:
        return self.dps[name].id

    def table(self, name: str) -> FakeOFTable:
        return self.dps[name].table

    def switch(self, name: str) -> SwitchInfo:
        return self.view.switches[self.dpid(name)]

    def contexts(self) -> dict[str, Any]:
        """The os-ken contexts an app of ours takes (``App(**fabric.contexts())``)."""
        return {VIEW: self.view, SOUTHBOUND: self.southbound}

    def live(self) -> LiveSouthbound:
        """The update executor's southbound over this fabric (the running controller's adapter)."""
        return LiveSouthbound(self.southbound, self.view)

    # ---- light and links -------------------------------------------------------------------------
    def far_end(self, port: Port) -> Port | None:
        """The packet port a lit circuit joins ``port`` to (None if dark), following the XCON tables."""
        o = self.adapt.get(port)
        seen: set[Port] = set()
        while o is not None and o not in seen:
            seen.add(o)
            out = self.table(o[0]).xcons().get(o[1])
            if out is None:
                return None
            if (o[0], out) in self.adapt_rev:
                return self.adapt_rev[o[0], out]
            o = self.fibre.get((o[0], out))
        return None

    def packet_links(self) -> list[PacketLink]:
        """Every directed packet link LLDP would see now: copper and lit circuits."""
        ends = dict(self.copper)
        ends.update({p: far for p in self.adapt if (far := self.far_end(p)) is not None})
        return [PacketLink(PortRef(self.dpid(a[0]), a[1]), PortRef(self.dpid(b[0]), b[1])) for a, b in ends.items()]

    def _applied(self, dp: FakeDatapath, msg: Any) -> None:
        """With :attr:`auto_links`, after an XCON change the view's links follow the light at once (as if
        LLDP ran): a plan's waits for its circuit links then pass."""
        if self.auto_links and dp.table.version == OF10 and type(msg).__name__ == "OFPFlowMod":
            self.discover()

    def discover(self, now: float = 0.0) -> list[PacketLink]:
        """Put the links LLDP would see into the view's link table (dropping circuits gone dark)."""
        links = self.packet_links()
        for old in set(self.view.links.links()) - set(links):
            self.view.remove_port_links(old.src)
        for link in links:
            self.view.add_link(link, now)
        return links

    # ---- packets ---------------------------------------------------------------------------------
    def packet(self, src: str, dst: str, **fields: Any) -> dict[str, Any]:
        """An Ethernet packet from host ``src`` to host ``dst`` (IPv4 when ``fields`` name IP fields)."""
        a, b = self.hosts[src], self.hosts[dst]
        pkt: dict[str, Any] = {"eth_src": a.mac, "eth_dst": b.mac, "eth_type": 0x0800}
        pkt.update(ipv4_src=a.ip, ipv4_dst=b.ip)
        pkt.update(fields)
        return pkt

    def reach(self, start: str | Port, pkt: Mapping[str, Any]) -> set[str]:
        """Where ``pkt`` ends up, sent by host ``start`` (or into a switch port): the host names it reaches
        and ``controller@<switch>`` for each copy to the controller (an empty set: dropped)."""
        return {end for end, _hops in self.walk(self._port(start), pkt)}

    def path(self, start: str | Port, pkt: Mapping[str, Any]) -> list[Hop]:
        """The ``(switch, in_port, out_port)`` hops of a packet that reaches exactly one place."""
        ends = self.walk(self._port(start), pkt)
        assert len(ends) == 1, f"the packet went to {sorted(e for e, _ in ends)}, not one place"
        return ends[0][1]

    def _port(self, start: str | Port) -> Port:
        return (self.hosts[start].switch, self.hosts[start].port) if isinstance(start, str) else start

    def wire(self, port: Port) -> Port | None:
        """The packet port at the other end of ``port``'s copper link or lit circuit (None: a host or dark)."""
        return self.copper.get(port) or self.far_end(port)

    def walk(self, port: Port, pkt: Mapping[str, Any]) -> list[tuple[str, list[Hop]]]:
        """Every end a packet entering at ``port`` reaches, each with its ``(switch, in_port, out_port)`` hops."""
        out: list[tuple[str, list[Hop]]] = []
        todo = [(port, dict(pkt), [])]
        seen: set[Port] = set()
        while todo:
            (sw, in_port), fields, hops = todo.pop()
            if (sw, in_port) in seen or len(hops) > MAX_HOPS:
                out.append(("loop", hops))
                continue
            seen.add((sw, in_port))
            res = self.table(sw).lookup({**fields, "in_port": in_port}, count=True)
            for p, left in res.outputs:
                here = [*hops, (sw, in_port, p)]
                if p == CONTROLLER:
                    out.append((f"controller@{sw}", here))
                elif (sw, p) in self.host_at:
                    out.append((self.host_at[sw, p], here))
                elif (nxt := self.wire((sw, p))) is not None:
                    todo.append((nxt, left, here))
        return out

    def inject(self, start: str | Port, frame: bytes, apps: Sequence[Any]) -> list[tuple[str, bytes]]:
        """Send a frame from host ``start`` (or into a port) and let the controller answer.

        The frame follows the tables and wires; each copy to the controller becomes a PACKET_IN to every
        app in ``apps`` (its ``_packet_in`` handler, called as os-ken would), and the PACKET_OUTs they
        send are followed in turn (:meth:`deliver`). Returns ``(host, frame)`` for every frame a host got."""
        return self.deliver(apps, [(self._port(start), frame)])

    def deliver(self, apps: Sequence[Any], frames: Sequence[tuple[Port, bytes]] = ()) -> list[tuple[str, bytes]]:
        """Follow ``frames`` (entering switch ports) and every PACKET_OUT not followed yet, until no new
        one comes; PACKET_INs go to ``apps``. Returns ``(host, frame)`` for every frame a host got."""
        delivered: list[tuple[str, bytes]] = []
        queue = list(frames)
        while True:
            for name, dp in self.dps.items():
                outs = dp.packets_out()
                for m in outs[self._followed.get(name, 0):]:
                    for act in m.actions:
                        if act.port == ofp13.OFPP_TABLE:
                            queue.append(((name, m.in_port), bytes(m.data)))
                        elif (name, act.port) in self.host_at:
                            delivered.append((self.host_at[name, act.port], bytes(m.data)))
                        elif (nxt := self.wire((name, act.port))) is not None:
                            queue.append((nxt, bytes(m.data)))
                self._followed[name] = len(outs)
            if not queue:
                return delivered
            port, data = queue.pop(0)
            for end, hops in self.walk(port, packet_fields(data, port[1])):
                if end.startswith("controller@"):
                    sw, in_port, _out = hops[-1]
                    msg = SimpleNamespace(datapath=self.dps[sw], data=data, match={"in_port": in_port})
                    for app in apps:
                        app._packet_in(SimpleNamespace(msg=msg))
                elif end in self.hosts:
                    delivered.append((end, data))
