"""The controller's one network view: every input of the merged multi-layer graph, owned in one object.

Why one object: the control API, the monitor, the DB feed and the reservation follower all need the
same graph. Before, each rebuilt it through the HTTP app every interval and reached into other apps
by name. Now the apps that *observe* the network change this view through its methods (inventory:
switches and ports; LLDP: links; forwarding: hosts; OTS driver: XCONs; the scan and the static file:
optical adaptations) and every reader asks :meth:`NetworkView.graph`, which rebuilds only when the
view's version moved. Each change is announced once, as a :mod:`app.controller.view_changes` value,
to the view's listeners (the change bus, docs/controller.md); the journal is a log only.

Plain code (no os-ken, no HTTP): the os-ken apps share one instance through ``_CONTEXTS``
(:data:`CONTEXT`), unit tests build one directly. Everything runs on the controller's hub, one
handler at a time, so no locking is needed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from app.controller.links import LinkReader, LinkTable
from app.controller.live_graph import DEFAULT_ACCESS_MBPS, DEFAULT_LINK_MBPS, combined, live_graph, strip
from app.controller.model import OTS, HostInfo, PacketLink, PortInfo, PortRef, SwitchInfo, dpid_label
from app.controller.runtime import SETTINGS, Settings
from app.controller.scan_inference import busy_ports
from app.controller.view_changes import (
    AdaptationsChanged,
    CapabilitiesChanged,
    HostAdded,
    HostRemoved,
    LinkAdded,
    LinkDeleted,
    NamesChanged,
    PortChanged,
    ReservedPortsChanged,
    StaticLoaded,
    SwitchEntered,
    SwitchLeft,
    ViewChange,
    XconsChanged,
)
from topology.graph import MultiLayerGraph
from topology.vendor_file import load_vendor_graph

#: the ``_CONTEXTS`` key under which the apps share the view
CONTEXT = "mlte_network_view"
SOURCES = ("lldp", "scan", "static", "static-fibres", "hosts")
DEFAULT_SOURCES = ("lldp", "scan", "static", "hosts")


class UnknownSource(ValueError):
    """A graph source name that does not exist."""


Listener = Callable[[ViewChange], None]
K = TypeVar("K")
V = TypeVar("V")


class ReadOnly(Generic[K, V]):
    """A table of the view that readers see as a read-only mapping (``view.hosts`` shows ``view._hosts``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = f"_{name}"

    def __get__(self, view: NetworkView, owner: type | None = None) -> Mapping[K, V]:
        return MappingProxyType(getattr(view, self.attr))

    def __set__(self, view: NetworkView, value: object) -> None:
        raise AttributeError(f"{self.attr[1:]} changes only through the NetworkView's methods")


class NetworkView:
    """Switches, links, hosts, XCONs, scan results and the static file; the merged graph on demand.

    The view changes only through its methods: each one that changes an input of the graph bumps
    :attr:`version` (the graph caches are keyed on it) and hands one :mod:`~app.controller.view_changes`
    value to every listener (:meth:`subscribe`). Readers get read-only mappings."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or SETTINGS
        self._switches: dict[int, SwitchInfo] = {}  # connected datapaths (inventory)
        self._named: dict[str, int] = {}  # by_name's answers, checked again on each use
        self._links = LinkTable()  # directed LLDP packet links (lldp)
        self._hosts: dict[str, HostInfo] = {}  # MAC -> host learnt at an edge port (forwarding)
        # dpid -> {host MAC: output port}: the forwarding app's installed eth_dst rules (the monitor's
        # counting rules follow them); the forwarding app's own table, shown read-only
        self._forwarding_rules: dict[int, dict[str, int]] = {}
        self._xcons: dict[int, dict[int, int]] = {}  # OTS dpid -> {in_port: out_port}, applied (OTS driver)
        self._unknown_xcons: dict[int, dict[int, int]] = {}  # sent, barrier timed out: maybe applied
        # 5-tuple -> FlowCount: per-flow bytes and rates of the monitor's fine data (flowstats backend; the
        # TE loop's offload gain reads them)
        self._fine_flows: dict[Any, Any] = {}
        # packet edge key -> Mbit/s, the monitor's moving average of port counters (every link, each Ts)
        self._link_loads: dict[str, float] = {}
        self._scan_attached: dict[tuple[int, int], PortRef | None] = {}  # (OTS dpid, port) -> packet port
        self._static_graph: MultiLayerGraph | None = None
        self._static_path = ""
        self._last_scan: dict[str, Any] | None = None
        self._scanning = False  # an optical scan is probing: the graph is in flux
        # owner -> packet ports of circuits lit by plans and reservations: default forwarding keeps other
        # traffic off them (:meth:`reserve`)
        self._reserved: dict[str, frozenset[tuple[str, int]]] = {}
        self._version = 0
        self.announced: dict[str, int] = {}  # changes announced, by kind (their class): the view's churn
        self.graph_builds = 0  # merged graphs built (one per version asked for, per source set)
        self._listeners: list[Listener] = []
        self._cache: dict[tuple[str, ...], tuple[int, MultiLayerGraph, list[str]]] = {}
        self._adaptation_cache: tuple[int, set[PortRef]] | None = None
        self._far_ends_cache: tuple[int, dict[tuple[int, int], PortRef | None]] | None = None

    # ---- read access -----------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """Moves on every change of a graph input: equal versions, equal graphs."""
        return self._version

    switches: ReadOnly[int, SwitchInfo] = ReadOnly()
    hosts: ReadOnly[str, HostInfo] = ReadOnly()
    forwarding_rules: ReadOnly[int, dict[str, int]] = ReadOnly()
    xcons: ReadOnly[int, dict[int, int]] = ReadOnly()
    unknown_xcons: ReadOnly[int, dict[int, int]] = ReadOnly()
    fine_flows: ReadOnly[Any, Any] = ReadOnly()
    link_loads: ReadOnly[str, float] = ReadOnly()
    scan_attached: ReadOnly[tuple[int, int], PortRef | None] = ReadOnly()

    @property
    def links(self) -> LinkReader:
        return self._links

    @property
    def static_graph(self) -> MultiLayerGraph | None:
        return self._static_graph

    @property
    def static_path(self) -> str:
        return self._static_path

    @property
    def last_scan(self) -> dict[str, Any] | None:
        return self._last_scan

    @property
    def scanning(self) -> bool:
        return self._scanning

    # ---- lookups ---------------------------------------------------------------------------------
    def by_name(self, name: str) -> SwitchInfo | None:
        """A switch by name, ``dp-…`` label or dpid number (``"0xa1"``, ``"161"``). Remembered answers go
        first (a scan formats every switch's label: the plans, probes and counter reads of a 100-switch
        WAN ask for names all the time), each checked again, so a rename or a leave is never missed."""
        known = self._named.get(name)
        if known is not None:
            sw = self._switches.get(known)
            if sw is not None and (sw.name == name or dpid_label(sw.dpid) == name or _number(name) == sw.dpid):
                return sw
            del self._named[name]
        found = next((sw for sw in self._switches.values() if sw.name == name or dpid_label(sw.dpid) == name), None)
        if found is None:
            number = _number(name)
            found = self._switches.get(number) if number is not None else None
        if found is not None:
            if len(self._named) > 4 * len(self._switches) + 64:
                self._named.clear()  # names of switches long gone
            self._named[name] = found.dpid
        return found

    def of_kind(self, kind: str) -> list[SwitchInfo]:
        return [sw for sw in self._switches.values() if sw.kind == kind]

    def name_of(self, dpid: int) -> str:
        sw = self._switches.get(dpid)
        return sw.name if sw is not None else f"{dpid:x}"

    def has_link(self, a: tuple[str, int], b: tuple[str, int]) -> bool:
        """LLDP saw the packet link ``a``–``b`` (either direction)."""
        sa, sb = self.by_name(a[0]), self.by_name(b[0])
        if sa is None or sb is None:
            return False
        ra, rb = PortRef(sa.dpid, a[1]), PortRef(sb.dpid, b[1])
        return any({link.src, link.dst} == {ra, rb} for link in self._links.links())

    def settled_xcons(self) -> dict[str, dict[int, int]]:
        """OTS name -> its applied XCONs, for every OTS read back (none held as "maybe applied"): what a
        takeover may trust the OTSes hold."""
        return {sw.name: dict(self._xcons.get(sw.dpid, {})) for sw in self._switches.values()
                if sw.kind == OTS and not self._unknown_xcons.get(sw.dpid)}

    def dark_adaptation_ports(self) -> set[PortRef]:
        """Packet ports attached (scan or static file) to an OTS port in no XCON, applied or maybe applied,
        of a connected OTS whose XCONs were read back: nothing sent there can reach another packet switch
        (LLDP's periodic rounds skip them: on germany50 they were ~45 % of its frames; a circuit lit on one
        is probed by the burst its ports' PORT_STATUS start)."""
        attached = {k: v for k, v in self._scan_attached.items() if v is not None}
        for k, v in self._known_far_ends().items():
            if v is not None:
                attached.setdefault(k, v)
        dark: set[PortRef] = set()
        busy: dict[int, set[int]] = {}
        for (odpid, oport), ref in attached.items():
            sw = self._switches.get(odpid)
            if sw is None or sw.kind != OTS or odpid not in self._xcons:
                continue  # not connected, or its XCONs not read back yet: it may carry anything
            if odpid not in busy:
                busy[odpid] = self.busy_ots_ports(odpid)
            if oport not in busy[odpid]:
                dark.add(ref)
        return dark

    def busy_ots_ports(self, dpid: int) -> set[int]:
        """Ports of an OTS in an XCON (applied, adopted or unknown): never to be probed or reused."""
        return busy_ports(self._xcons.get(dpid, {}), self._unknown_xcons.get(dpid, {}))

    @property
    def reserved_ports(self) -> set[tuple[str, int]]:
        """Packet ports (switch name, port) default forwarding must not use."""
        return {p for ports in self._reserved.values() for p in ports}

    def reservations_of(self, prefix: str) -> dict[str, frozenset[tuple[str, int]]]:
        return {o: p for o, p in self._reserved.items() if o.startswith(prefix)}

    def usable_links(self) -> list:
        """LLDP links default forwarding may use: none with an end on a reserved port."""
        reserved = self.reserved_ports
        links = self._links.links()
        if not reserved:
            return links
        return [x for x in links if (self.name_of(x.src.dpid), x.src.port_no) not in reserved
                and (self.name_of(x.dst.dpid), x.dst.port_no) not in reserved]

    # ---- the change bus --------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(change)`` after every change (the inventory app bridges them to os-ken)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener`` (ValueError if it is not subscribed)."""
        listeners = list(self._listeners)  # a new list: an announcement under way calls the old one to the end
        listeners.remove(listener)
        self._listeners = listeners

    def _emit(self, change: ViewChange) -> None:
        if change.graph:
            self._version += 1
        kind = type(change).__name__
        self.announced[kind] = self.announced.get(kind, 0) + 1
        for listener in self._listeners:
            listener(change)

    # ---- switches and ports (inventory; capabilities: the OTS driver) ----------------------------
    def add_switch(self, sw: SwitchInfo) -> None:
        self._switches[sw.dpid] = sw
        self._emit(SwitchEntered(sw))

    def remove_switch(self, dpid: int) -> SwitchInfo | None:
        """Forget a disconnected datapath; the switch it was, if known."""
        sw = self._switches.pop(dpid, None)
        if sw is not None:
            self._emit(SwitchLeft(sw))
        return sw

    def set_port(self, dpid: int, port_no: int, new: PortInfo | None, at: float) -> PortChanged | None:
        """A port as last reported (``new`` None: deleted); the change, or None if nothing changed."""
        sw = self._switches.get(dpid)
        if sw is None:
            return None
        old = sw.ports.get(port_no)
        if new is None:
            sw.ports.pop(port_no, None)
        else:
            sw.ports[port_no] = new
        if old == new:
            return None
        change = PortChanged(sw, old, new, at)
        self._emit(change)
        return change

    def set_capabilities(self, dpid: int, capabilities: dict, name: str | None = None) -> SwitchInfo | None:
        """An OTS's VENDOR capabilities and, if given, its own name; the switch, if known."""
        sw = self._switches.get(dpid)
        if sw is None:
            return None
        sw.capabilities = capabilities
        if name is not None:
            sw.name = name
        self._emit(CapabilitiesChanged(sw))
        return sw

    def rename(self, names: Mapping[int, str], host_names: Mapping[str, str] = {}) -> None:  # noqa: B006
        """Name switches (by dpid) and hosts (by MAC); a change only if some name is new."""
        new = [d for d, n in names.items()
               if self.settings.names.get(d) != n or (d in self._switches and self._switches[d].name != n)]
        if not new and all(self.settings.host_names.get(m) == n for m, n in host_names.items()):
            return
        self.settings.names.update(names)
        self.settings.host_names.update(host_names)
        for dpid, name in names.items():
            if dpid in self._switches:
                self._switches[dpid].name = name
        self._emit(NamesChanged(dict(names), dict(host_names)))

    # ---- packet links (LLDP) ---------------------------------------------------------------------
    def add_link(self, link: PacketLink, now: float) -> tuple[bool, list[PacketLink]]:
        """Record an LLDP sighting; (is_new, links it replaced). Only a new or replaced link is a change."""
        is_new, replaced = self._links.seen(link, now)
        for old in replaced:
            self._emit(LinkDeleted(old))
        if is_new:
            self._emit(LinkAdded(link))
        return is_new, replaced

    def confirm_link(self, link: PacketLink, now: float) -> bool:
        """A latency probe crossed ``link``: as good as an LLDP sighting of a known link (no change; LLDP's
        next round may skip its port). True if the link is known."""
        return self._links.confirm(link, now)

    def expire_links(self, now: float, timeout: float) -> list[PacketLink]:
        """Drop and return the links not seen for longer than ``timeout`` seconds."""
        return self._links_gone(self._links.expire(now, timeout))

    def remove_port_links(self, port: PortRef) -> list[PacketLink]:
        """A port went down or vanished: drop and return every link touching it."""
        return self._links_gone(self._links.drop_port(port))

    def remove_switch_links(self, dpid: int) -> list[PacketLink]:
        return self._links_gone(self._links.drop_switch(dpid))

    def _links_gone(self, links: list[PacketLink]) -> list[PacketLink]:
        for link in links:
            self._emit(LinkDeleted(link))
        return links

    # ---- hosts and forwarding rules (forwarding) -------------------------------------------------
    def add_host(self, host: HostInfo) -> bool:
        """Learn (or move, or complete) a host; True if it is new or changed."""
        if self._hosts.get(host.mac) == host:
            return False
        self._hosts[host.mac] = host
        self._emit(HostAdded(host))
        return True

    def remove_host(self, mac: str) -> HostInfo | None:
        host = self._hosts.pop(mac, None)
        if host is not None:
            self._emit(HostRemoved(host))
        return host

    def set_forwarding_rules(self, rules: dict[int, dict[str, int]]) -> None:
        """Show the forwarding app's installed rules (its own table, which it keeps current) read-only."""
        self._forwarding_rules = rules

    # ---- XCONs (OTS driver, live southbound) -----------------------------------------------------
    def set_xcons(self, dpid: int, pairs: Mapping[int, int]) -> bool:
        """XCON directions ``in_port -> out_port`` applied on OTS ``dpid`` (confirmed or read back)."""
        table = self._xcons.setdefault(dpid, {})
        if all(table.get(a) == b for a, b in pairs.items()):
            return False
        table.update(pairs)
        self._emit(XconsChanged(dpid))
        return True

    def mark_unknown(self, dpid: int, pairs: Iterable[tuple[int, int]]) -> None:
        """XCON directions sent without a confirmation (barrier timed out, or one-shot): maybe applied.
        Not a graph input: kept so they are never probed and a roll-back can remove them."""
        self._unknown_xcons.setdefault(dpid, {}).update(pairs)

    def settle_unknown(self, dpid: int, in_ports: Iterable[int]) -> None:
        """A barrier answered for these directions: their state is known again."""
        table = self._unknown_xcons.get(dpid, {})
        for p in in_ports:
            table.pop(p, None)

    def remove_xcons(self, dpid: int, in_ports: Iterable[int], only_to: int | None = None) -> bool:
        """XCON directions deleted on OTS ``dpid`` (applied or unknown); ``only_to``: only those that
        output to that port. True if the applied XCONs changed."""
        applied, unknown = self._xcons.get(dpid, {}), self._unknown_xcons.get(dpid, {})
        changed = False
        for p in in_ports:
            if only_to is None or unknown.get(p) == only_to:
                unknown.pop(p, None)
            if p in applied and (only_to is None or applied[p] == only_to):
                del applied[p]
                changed = True
        if changed:
            self._emit(XconsChanged(dpid))
        return changed

    def hold_xcons(self, dpid: int) -> None:
        """OTS ``dpid`` left (or is back but not read back yet): its applied XCONs become "maybe applied".

        An OTS whose agent or control channel died keeps its cross-connects lit, as hardware does, so its
        ports must never look free meanwhile; the read-back after it reconnects settles each one
        (:meth:`settle_unknown`, :meth:`set_xcons`). Not a graph input any more: nothing is planned
        through an OTS the controller cannot program."""
        applied = self._xcons.pop(dpid, None)
        if applied:
            self._unknown_xcons.setdefault(dpid, {}).update(applied)
            self._emit(XconsChanged(dpid))

    def clear_xcons(self, dpid: int) -> None:
        """Forget every XCON of OTS ``dpid`` (it connected anew, or left): the read-back tells again."""
        had = bool(self._xcons.pop(dpid, None))
        self._unknown_xcons.pop(dpid, None)
        if had:
            self._emit(XconsChanged(dpid))

    # ---- optical adaptations and the static file (control API, scan) -----------------------------
    def set_scanning(self, scanning: bool) -> None:
        """An optical scan started or ended probing (the DB feed writes nothing in between)."""
        self._scanning = scanning

    def set_scan(self, attached: Mapping[tuple[int, int], PortRef | None],
                 result: dict[str, Any] | None = None) -> None:
        """Far ends the scan found (``result``: its report for ``GET /scan``; None: restored from the
        state file, the last report stays)."""
        if result is not None:
            self._last_scan = result
        if all(k in self._scan_attached and self._scan_attached[k] == v for k, v in attached.items()):
            return
        self._scan_attached.update(attached)
        self._emit(AdaptationsChanged(dict(attached)))

    def load_static(self, path: str) -> None:
        """Load (``""``: drop) the static vendor file merged into the graph; errors leave the old one."""
        graph = load_vendor_graph(path) if path else None
        self._static_graph, self._static_path = graph, path
        self._emit(StaticLoaded(path))

    # ---- reservations (plans, TE, reservations) --------------------------------------------------
    def reserve(self, owner: str, ports: Iterable[tuple[str, int]]) -> bool:
        """Keep default forwarding off ``ports`` for ``owner``; True (and announced) if the reserved set changed."""
        before = self.reserved_ports
        self._reserved[owner] = frozenset((str(s), int(p)) for s, p in ports)
        return self._reserved_changed(before)

    def unreserve(self, owner: str) -> bool:
        before = self.reserved_ports
        self._reserved.pop(owner, None)
        return self._reserved_changed(before)

    def _reserved_changed(self, before: set[tuple[str, int]]) -> bool:
        if self.reserved_ports == before:
            return False
        self._emit(ReservedPortsChanged())
        return True

    # ---- the monitor's measurements (not graph inputs: no version, no change) --------------------
    def set_fine_flows(self, flows: Mapping[Any, Any]) -> None:
        """Per-flow counts of the monitor's fine data (the TE loop's offload gain reads them)."""
        self._fine_flows = dict(flows)

    def set_link_loads(self, loads: Mapping[str, float]) -> None:
        """Mbit/s per packet edge, the monitor's moving average of port counters (TE placement reads them)."""
        self._link_loads = dict(loads)

    # ---- the merged graph ------------------------------------------------------------------------
    def graph(self, sources: Iterable[str] = DEFAULT_SOURCES) -> tuple[MultiLayerGraph, list[str]]:
        """(graph, problems) from the chosen sources; cached until the view's :attr:`version` moves.

        The graph is shared between readers: treat it as read-only (``.copy()`` to modify it)."""
        sources = tuple(sources)
        bad = [s for s in sources if s not in SOURCES]
        if bad:
            raise UnknownSource(f"unknown source(s) {bad} (known: {', '.join(SOURCES)})")
        key = self._version
        hit = self._cache.get(sources)
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        graph, problems = self._build(sources)
        self.graph_builds += 1
        self._cache[sources] = (key, graph, problems)
        return graph, problems

    def _build(self, sources: tuple[str, ...]) -> tuple[MultiLayerGraph, list[str]]:
        ctl = self.settings.controller
        links = self._links.links() if "lldp" in sources else []
        adapt = {k: v for k, v in self._scan_attached.items() if v is not None} if "scan" in sources else {}
        live, problems = live_graph(self._switches.values(), links, adapt, self._xcons,
                                    float(self.settings.ots["unit_mbps"]),
                                    self._hosts.values() if "hosts" in sources else (),
                                    self.settings.host_names,
                                    float(ctl.get("access_default_mbps", DEFAULT_ACCESS_MBPS)),
                                    float(ctl.get("link_default_mbps", DEFAULT_LINK_MBPS)))
        static = None
        if self._static_graph is not None and "static" in sources:
            static = self._static_graph
        elif self._static_graph is not None and "static-fibres" in sources:
            static = strip(self._static_graph, ["adaptation"])
        result = combined(live, static)
        return result.graph, problems + [str(c) for c in result.conflicts]

    def adaptation_ports(self) -> set[PortRef]:
        """Packet ports attached to an OTS port (static file or scan): whatever arrives on one came through
        a circuit from another packet switch, so no host lives there, even while LLDP knows no link."""
        key = self._version  # as the graph: asked per PACKET_IN, rebuilt only on a change
        if self._adaptation_cache is not None and self._adaptation_cache[0] == key:
            return self._adaptation_cache[1]
        refs = {ref for ref in self._scan_attached.values() if ref is not None}
        refs |= {ref for ref in self._known_far_ends().values() if ref is not None}
        self._adaptation_cache = (key, refs)
        return refs

    def known_far_ends(self) -> dict[tuple[int, int], PortRef | None]:
        """OTS ports whose far end the static file already gives (fibre: None; adaptation: the port)."""
        return dict(self._known_far_ends())

    def _known_far_ends(self) -> dict[tuple[int, int], PortRef | None]:
        """:meth:`known_far_ends`, kept until the view's version moves (switches, names and the static file
        all move it): LLDP asks every round, and walking the static file's ports was 2.5 % of the loaded
        germany50 controller's samples. Read-only."""
        key = self._version
        if self._far_ends_cache is not None and self._far_ends_cache[0] == key:
            return self._far_ends_cache[1]
        known = self._walk_far_ends()
        self._far_ends_cache = (key, known)
        return known

    def _walk_far_ends(self) -> dict[tuple[int, int], PortRef | None]:
        known: dict[tuple[int, int], PortRef | None] = {}
        g = self._static_graph
        if g is None:
            return known
        by_name = {sw.name: sw.dpid for sw in self._switches.values()}
        for node in g.nodes_of_kind("oport"):
            attrs = g.g.nodes[node]
            odpid = by_name.get(attrs["ots"])
            if odpid is None or self._switches[odpid].kind != OTS:
                continue
            att = g.adaptation_at(node)
            if att is not None and att[0] in by_name:
                known[(odpid, attrs["port"])] = PortRef(by_name[att[0]], att[1])
            elif g.fibre_peer(node) is not None:
                known[(odpid, attrs["port"])] = None
        return known


def _number(name: str) -> int | None:
    """``name`` as a dpid number (``"0xa1"``, ``"161"``), None if it is not one."""
    try:
        return int(name, 0)
    except ValueError:
        return None
