"""Build the controller's live multi-layer graph from plain discovery state (no os-ken here).

Live = connected datapaths (packet switches; OTSes with their virtual ports from FEATURES_REPLY /
VENDOR capabilities) + LLDP packet links (a circuit as wide as its optical containers, copper as its
slower port's reported speed) + adaptations learnt by the optical scan + active XCONs +
hosts the forwarding app learnt at edge ports (``access`` edges as wide as the switch port's speed).
The static vendor file is merged *after* it (``topology.merge``: observations win over the file).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.controller.model import OTS, PACKET, HostInfo, PacketLink, PortRef, SwitchInfo, host_label
from topology import granularity as gran
from topology.errors import TopologyError
from topology.graph import DEFAULT_SETUP_TIME, MultiLayerGraph, oport_id
from topology.merge import MergeResult, merge

LIVE_SOURCE = "openflow"
HOST_SOURCE = "learning"  # hosts and access edges: learnt from their packets at edge ports
DEFAULT_ACCESS_MBPS = 1000.0  # [controller] access_default_mbps: a port that reports no speed
DEFAULT_LINK_MBPS = 1000.0  # [controller] link_default_mbps: a copper link whose ports report no speed


def port_speed_mbps(sw: SwitchInfo, port_no: int) -> float:
    """The port's reported current speed in Mbit/s (PORT_DESC ``curr_speed`` / OF1.0 ``curr`` bits); 0 = none."""
    port = sw.ports.get(port_no)
    return port.speed_kbps / 1000.0 if port is not None and port.speed_kbps > 0 else 0.0


def link_speed_mbps(sa: SwitchInfo, pa: int, sb: SwitchInfo, pb: int, default_mbps: float) -> float:
    """Capacity of a copper packet link: the minimum of the speeds its two ports report (one end if only
    one reports), else ``default_mbps`` — never 0, which the PCE would read as "no capacity"."""
    speeds = [s for s in (port_speed_mbps(sa, pa), port_speed_mbps(sb, pb)) if s > 0]
    return min(speeds) if speeds else default_mbps


def ots_ports(sw: SwitchInfo) -> dict[int, str]:
    """Port number -> granularity of an OTS: from its VENDOR capabilities, else its port names."""
    caps = sw.capabilities.get("ports") or {}
    out: dict[int, str] = {}
    for port_no, info in sw.ports.items():
        g = (caps.get(str(port_no)) or {}).get("granularity") or gran.from_port_name(info.name)
        if g:
            out[port_no] = g
    return out


def live_graph(
    switches: Iterable[SwitchInfo],
    links: Iterable[PacketLink],
    adaptations: dict[tuple[int, int], PortRef],
    xcons: dict[int, dict[int, int]],
    unit_mbps: float = 1.0,
    hosts: Iterable[HostInfo] = (),
    host_names: Mapping[str, str] | None = None,
    access_default_mbps: float = DEFAULT_ACCESS_MBPS,
    link_default_mbps: float = DEFAULT_LINK_MBPS,
) -> tuple[MultiLayerGraph, list[str]]:
    """(graph, problems): ``adaptations`` maps (OTS dpid, OTS port) -> packet port (from the scan);
    ``host_names`` maps a host MAC to its node id (else :func:`host_label`). An LLDP link that is a
    circuit is as wide as its optical containers; any other as its slower port's reported speed, else
    ``link_default_mbps``."""
    g = MultiLayerGraph()
    problems: list[str] = []
    names: dict[int, str] = {}
    switches = list(switches)
    switches_by_dpid = {sw.dpid: sw for sw in switches}
    for sw in sorted(switches, key=lambda s: s.name):
        names[sw.dpid] = sw.name
        if sw.kind == PACKET:
            g.add_packet_switch(sw.name, sw.dpid)
            # every port the switch reported (the inventory keeps physical ports only), not only those on
            # an edge: a reservation may start at a port no host has been heard from yet (a controller
            # just restarted has heard from none)
            g.g.nodes[sw.name]["ports"] = sorted(sw.ports)
        elif sw.kind == OTS:
            caps = sw.capabilities
            setup = DEFAULT_SETUP_TIME
            if caps.get("setup_time_min") is not None and caps.get("setup_time_max") is not None:
                setup = round((caps["setup_time_min"] + caps["setup_time_max"]) / 2, 6)
            g.add_ots(sw.name, sw.dpid, ots_ports(sw), caps.get("unit_mbps") or unit_mbps, setup,
                      source=LIVE_SOURCE)
    for (odpid, oport), ref in sorted(adaptations.items()):
        if odpid not in names or ref.dpid not in names:
            continue
        try:
            g.add_adaptation(names[ref.dpid], ref.port_no, oport_id(names[odpid], oport), source="scan")
        except TopologyError as exc:
            problems.append(f"scan adaptation {ref} - {names[odpid]}:{oport}: {exc}")
    adapt_cap = {(names[r.dpid], r.port_no): (odpid, op) for (odpid, op), r in adaptations.items()
                 if odpid in names and r.dpid in names}
    done: set[tuple[PortRef, PortRef]] = set()
    for link in sorted(links):
        a, b = sorted((link.src, link.dst))
        if (a, b) in done or a.dpid not in names or b.dpid not in names:
            continue
        done.add((a, b))
        na, nb = names[a.dpid], names[b.dpid]
        # an adaptation whose OTS port is not in the graph yet (its ports or capabilities not read:
        # the problem is listed above) gives no width: the link counts as copper until they arrive
        onodes = [oport_id(names[o[0]], o[1]) for o in (adapt_cap.get((na, a.port_no)), adapt_cap.get((nb, b.port_no)))
                  if o is not None]
        widths = [g.g.nodes[n]["capacity"] for n in onodes if n in g.g.nodes]
        if widths:
            cap = min(widths)  # a circuit: as wide as its optical containers
        else:  # copper: as fast as the slower port
            cap = link_speed_mbps(switches_by_dpid[a.dpid], a.port_no, switches_by_dpid[b.dpid], b.port_no,
                                  link_default_mbps)
        try:
            g.add_packet_link(na, a.port_no, nb, b.port_no, cap, source="lldp")
        except TopologyError as exc:
            problems.append(f"LLDP link {na}:{a.port_no}-{nb}:{b.port_no}: {exc}")
    for dpid, table in sorted(xcons.items()):  # one direction is enough to light both ports
        if dpid not in names:
            continue
        for in_port, out_port in sorted(table.items()):
            try:
                g.set_xcon_active(oport_id(names[dpid], in_port), oport_id(names[dpid], out_port), True)
            except TopologyError as exc:
                problems.append(f"XCON {names[dpid]}:{in_port}->{out_port}: {exc}")
    _add_hosts(g, problems, switches_by_dpid, hosts, host_names or {}, access_default_mbps)
    return g, problems


def _add_hosts(g: MultiLayerGraph, problems: list[str], switches: dict[int, SwitchInfo], hosts: Iterable[HostInfo],
               host_names: Mapping[str, str], default_mbps: float) -> None:
    """One ``host`` node + ``access`` edge per learnt host on a connected packet switch."""
    for h in sorted(hosts, key=lambda h: h.mac):
        sw = switches.get(h.port.dpid)
        if sw is None or sw.kind != PACKET:
            continue
        node = host_names.get(h.mac.lower()) or host_label(h.mac)
        port = sw.ports.get(h.port.port_no)
        speed = port.speed_kbps if port is not None else 0
        cap = speed / 1000.0 if speed > 0 else default_mbps
        added = False
        try:
            g.add_host(node, h.ip, h.mac)
            added = True
            g.add_access(node, sw.name, h.port.port_no, cap, source=HOST_SOURCE)
        except TopologyError as exc:  # e.g. two MACs on one port (a hub, VMs): the first one keeps it
            problems.append(f"host {h.mac} at {sw.name}:{h.port.port_no}: {exc}")
            if added:
                g.g.remove_node(node)


def strip(g: MultiLayerGraph, kinds: Iterable[str]) -> MultiLayerGraph:
    """A copy of ``g`` without the edges of ``kinds``."""
    out = g.copy()
    kinds = set(kinds)
    out.g.remove_edges_from([(u, v, k) for u, v, k, d in out.g.edges(keys=True, data=True) if d["kind"] in kinds])
    return out


def combined(live: MultiLayerGraph, static: MultiLayerGraph | None) -> MergeResult:
    """The merged view: live observations first, then the static vendor file; LLDP links whose ports
    turn out to be adapted (the file's adaptations) are circuits (:func:`circuit_capacities`)."""
    if static is None:
        result = merge(live, names=["controller"])
    else:
        result = merge(live, static, names=["controller", "static file"])
    circuit_capacities(result.graph)
    return result


def circuit_capacities(g: MultiLayerGraph) -> None:
    """Give every LLDP packet link with an adapted end the narrowest adaptation's capacity.

    :func:`live_graph` can only tell a circuit from copper by the scan's adaptations; when they come
    from the static file instead, the link got its ports' speed (veth: 10 Gbit/s) — far wider than
    the optical container it crosses."""
    adapted: dict[tuple[str, int], float] = {}
    for _u, _v, d in g.g.edges(data=True):
        if d["kind"] == "adaptation" and d.get("capacity"):
            for node, port in d["ports"].items():
                adapted[(node, port)] = float(d["capacity"])
    for _u, _v, d in g.g.edges(data=True):
        if d["kind"] != "packet" or d.get("source") != "lldp":
            continue
        caps = [adapted[end] for end in d["ports"].items() if end in adapted]
        if caps:
            d["capacity"] = min(caps)
