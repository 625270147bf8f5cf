"""The controller's one network view: every input of the merged multi-layer graph, owned in one object.

Why one object: the control API, the monitor, the DB feed and the reservation follower all need the
same graph. Before, each rebuilt it through the HTTP app every interval and reached into other apps
by name. Now the apps that *observe* the network write into this view (inventory: switches and
ports; LLDP: links; forwarding: hosts; OTS driver: XCONs; the scan and the static file: optical
adaptations) and every reader asks :meth:`NetworkView.graph`, which rebuilds only when something
changed.

Plain code (no os-ken, no HTTP): the os-ken apps share one instance through ``_CONTEXTS``
(:data:`CONTEXT`), unit tests build one directly. Everything runs on the controller's hub, one
handler at a time, so no locking is needed.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.controller.graph_view import DEFAULT_ACCESS_MBPS, DEFAULT_LINK_MBPS, combined, live_graph, strip
from app.controller.journal import JOURNAL, Journal
from app.controller.links import LinkTable
from app.controller.model import OTS, HostInfo, PortRef, SwitchInfo, dpid_label
from app.controller.runtime import SETTINGS, Settings
from app.controller.scan import busy_ports
from topology.graph import MultiLayerGraph
from topology.vendor_file import load_vendor_graph

#: the ``_CONTEXTS`` key under which the apps share the view
CONTEXT = "mlte_network_view"
SOURCES = ("lldp", "scan", "static", "static-fibres", "hosts")
DEFAULT_SOURCES = ("lldp", "scan", "static", "hosts")


class UnknownSource(ValueError):
    """A graph source name that does not exist."""


class NetworkView:
    """Switches, links, hosts, XCONs, scan results and the static file; the merged graph on demand."""

    def __init__(self, settings: Settings | None = None, journal: Journal | None = None) -> None:
        self.settings = settings or SETTINGS
        self.journal = journal or JOURNAL
        self.switches: dict[int, SwitchInfo] = {}  # connected datapaths (inventory)
        self.links = LinkTable()  # directed LLDP packet links (lldp)
        self.hosts: dict[str, HostInfo] = {}  # MAC -> host learnt at an edge port (forwarding)
        # dpid -> {host MAC: output port}: the forwarding app's installed eth_dst rules (the monitor's
        # counting rules follow them)
        self.forwarding_rules: dict[int, dict[str, int]] = {}
        self.xcons: dict[int, dict[int, int]] = {}  # OTS dpid -> {in_port: out_port}, applied (OTS driver)
        # 5-tuple -> FlowCount: per-flow bytes and rates of the monitor's fine data (flowstats backend; the
        # TE loop's offload gain reads them)
        self.fine_flows: dict[Any, Any] = {}
        # packet edge key -> Mbit/s, the monitor's moving average of port counters (every link, each Ts)
        self.link_loads: dict[str, float] = {}
        self.unknown_xcons: dict[int, dict[int, int]] = {}  # sent, barrier timed out: maybe applied
        self.scan_attached: dict[tuple[int, int], PortRef | None] = {}  # (OTS dpid, port) -> packet port
        self.static_graph: MultiLayerGraph | None = None
        self.static_path = ""
        self.last_scan: dict[str, Any] | None = None
        self.scanning = False  # an optical scan is probing: the graph is in flux
        # owner -> packet ports of circuits lit by plans and reservations: default forwarding keeps other
        # traffic off them (:meth:`reserve`)
        self._reserved: dict[str, frozenset[tuple[str, int]]] = {}
        self._version = 0
        self._cache: dict[tuple[str, ...], tuple[tuple[int, int], MultiLayerGraph, list[str]]] = {}
        self._adaptation_cache: tuple[tuple[int, int], set[PortRef]] | None = None

    # ---- lookups ---------------------------------------------------------------------------------
    def by_name(self, name: str) -> SwitchInfo | None:
        """A switch by name, ``dp-…`` label or dpid number (``"0xa1"``, ``"161"``)."""
        for sw in self.switches.values():
            if sw.name == name or dpid_label(sw.dpid) == name:
                return sw
        try:
            return self.switches.get(int(name, 0))
        except ValueError:
            return None

    def of_kind(self, kind: str) -> list[SwitchInfo]:
        return [sw for sw in self.switches.values() if sw.kind == kind]

    def name_of(self, dpid: int) -> str:
        sw = self.switches.get(dpid)
        return sw.name if sw is not None else f"{dpid:x}"

    def has_link(self, a: tuple[str, int], b: tuple[str, int]) -> bool:
        """LLDP saw the packet link ``a``–``b`` (either direction)."""
        sa, sb = self.by_name(a[0]), self.by_name(b[0])
        if sa is None or sb is None:
            return False
        ra, rb = PortRef(sa.dpid, a[1]), PortRef(sb.dpid, b[1])
        return any({link.src, link.dst} == {ra, rb} for link in self.links.links())

    def busy_ots_ports(self, dpid: int) -> set[int]:
        """Ports of an OTS in an XCON (applied, adopted or unknown): never to be probed or reused."""
        return busy_ports(self.xcons.get(dpid, {}), self.unknown_xcons.get(dpid, {}))

    @property
    def reserved_ports(self) -> set[tuple[str, int]]:
        """Packet ports (switch name, port) default forwarding must not use."""
        return {p for ports in self._reserved.values() for p in ports}

    def reserve(self, owner: str, ports: Iterable[tuple[str, int]]) -> bool:
        """Keep default forwarding off ``ports`` for ``owner``; True if the reserved set changed."""
        before = self.reserved_ports
        self._reserved[owner] = frozenset((str(s), int(p)) for s, p in ports)
        return self.reserved_ports != before

    def unreserve(self, owner: str) -> bool:
        before = self.reserved_ports
        self._reserved.pop(owner, None)
        return self.reserved_ports != before

    def reservations_of(self, prefix: str) -> dict[str, frozenset[tuple[str, int]]]:
        return {o: p for o, p in self._reserved.items() if o.startswith(prefix)}

    def usable_links(self) -> list:
        """LLDP links default forwarding may use: none with an end on a reserved port."""
        reserved = self.reserved_ports
        links = self.links.links()
        if not reserved:
            return links
        return [x for x in links if (self.name_of(x.src.dpid), x.src.port_no) not in reserved
                and (self.name_of(x.dst.dpid), x.dst.port_no) not in reserved]

    # ---- changes the view itself owns ---------------------------------------------------------
    def changed(self) -> None:
        """Something the graph depends on changed outside the journal: rebuild on the next read."""
        self._version += 1

    def rename(self, names: Mapping[int, str], host_names: Mapping[str, str] = {}) -> None:  # noqa: B006
        self.settings.names.update(names)
        self.settings.host_names.update(host_names)
        for dpid, name in names.items():
            if dpid in self.switches:
                self.switches[dpid].name = name
        self.changed()

    def load_static(self, path: str) -> None:
        """Load (``""``: drop) the static vendor file merged into the graph; errors leave the old one."""
        graph = load_vendor_graph(path) if path else None
        self.static_graph, self.static_path = graph, path
        self.changed()

    def set_scan(self, attached: Mapping[tuple[int, int], PortRef | None], result: dict[str, Any]) -> None:
        self.scan_attached.update(attached)
        self.last_scan = result
        self.changed()

    # ---- the merged graph ------------------------------------------------------------------------
    def graph(self, sources: Iterable[str] = DEFAULT_SOURCES) -> tuple[MultiLayerGraph, list[str]]:
        """(graph, problems) from the chosen sources; cached until the journal or the view changes.

        The graph is shared between readers: treat it as read-only (``.copy()`` to modify it)."""
        sources = tuple(sources)
        bad = [s for s in sources if s not in SOURCES]
        if bad:
            raise UnknownSource(f"unknown source(s) {bad} (known: {', '.join(SOURCES)})")
        key = (self.journal.last_seq, self._version)
        hit = self._cache.get(sources)
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        graph, problems = self._build(sources)
        self._cache[sources] = (key, graph, problems)
        return graph, problems

    def _build(self, sources: tuple[str, ...]) -> tuple[MultiLayerGraph, list[str]]:
        ctl = self.settings.controller
        links = self.links.links() if "lldp" in sources else []
        adapt = {k: v for k, v in self.scan_attached.items() if v is not None} if "scan" in sources else {}
        live, problems = live_graph(self.switches.values(), links, adapt, self.xcons,
                                    float(self.settings.ots["unit_mbps"]),
                                    self.hosts.values() if "hosts" in sources else (),
                                    self.settings.host_names,
                                    float(ctl.get("access_default_mbps", DEFAULT_ACCESS_MBPS)),
                                    float(ctl.get("link_default_mbps", DEFAULT_LINK_MBPS)))
        static = None
        if self.static_graph is not None and "static" in sources:
            static = self.static_graph
        elif self.static_graph is not None and "static-fibres" in sources:
            static = strip(self.static_graph, ["adaptation"])
        result = combined(live, static)
        return result.graph, problems + [str(c) for c in result.conflicts]

    def adaptation_ports(self) -> set[PortRef]:
        """Packet ports attached to an OTS port (static file or scan): whatever arrives on one came through
        a circuit from another packet switch, so no host lives there, even while LLDP knows no link."""
        key = (self.journal.last_seq, self._version)  # as the graph: PACKET_INs (asked per packet) add no entry
        if self._adaptation_cache is not None and self._adaptation_cache[0] == key:
            return self._adaptation_cache[1]
        refs = {ref for ref in self.scan_attached.values() if ref is not None}
        refs |= {ref for ref in self.known_far_ends().values() if ref is not None}
        self._adaptation_cache = (key, refs)
        return refs

    def known_far_ends(self) -> dict[tuple[int, int], PortRef | None]:
        """OTS ports whose far end the static file already gives (fibre: None; adaptation: the port)."""
        known: dict[tuple[int, int], PortRef | None] = {}
        g = self.static_graph
        if g is None:
            return known
        by_name = {sw.name: sw.dpid for sw in self.switches.values()}
        for node in g.nodes_of_kind("oport"):
            attrs = g.g.nodes[node]
            odpid = by_name.get(attrs["ots"])
            if odpid is None or self.switches[odpid].kind != OTS:
                continue
            att = g.adaptation_at(node)
            if att is not None and att[0] in by_name:
                known[(odpid, attrs["port"])] = PortRef(by_name[att[0]], att[1])
            elif g.fibre_peer(node) is not None:
                known[(odpid, attrs["port"])] = None
        return known
