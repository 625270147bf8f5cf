"""Lab specifications as plain data: what switches, OTSes, hosts and links a lab has.

One source of truth for a topology: the Mininet lab builds from a ``LabSpec``, the tests compare
discovery against :func:`spec_to_graph`, and :func:`spec_to_vendor_file` writes the static
optical-domain file. No Mininet import here, so everything works without root.
Ports are OpenFlow port numbers (= Mininet interface numbers); hosts use port 0 (``h1-eth0``).
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from topology import granularity as gran
from topology.errors import SpecError, TopologyError
from topology.graph import DEFAULT_SETUP_TIME, MultiLayerGraph, oport_id

LINK_KINDS = ("access", "packet", "adaptation", "optical")


@dataclass(frozen=True)
class SwitchSpec:
    """An OpenFlow 1.3 packet switch."""

    name: str
    dpid: int


@dataclass(frozen=True)
class OtsSpec:
    """A virtual optical transport switch: port number -> granularity (``"ODU2"``)."""

    name: str
    dpid: int
    ports: dict[int, str] = field(hash=False)


@dataclass(frozen=True)
class HostSpec:
    """An end host on packet switch ``switch`` port ``port``."""

    name: str
    switch: str
    port: int
    ip: str
    mac: str


@dataclass(frozen=True)
class LinkSpec:
    """A cable: ``access`` host-switch (a = host, a_port 0), ``packet`` switch-switch copper,
    ``adaptation`` switch port - OTS port (a = switch), ``optical`` OTS port - OTS port fibre."""

    a: str
    a_port: int
    b: str
    b_port: int
    kind: str
    mbps: float
    latency_ms: float = 0.0


@dataclass(frozen=True)
class LabSpec:
    """A whole lab; validated on construction (raises SpecError)."""

    name: str
    switches: tuple[SwitchSpec, ...]
    ots: tuple[OtsSpec, ...]
    hosts: tuple[HostSpec, ...]
    links: tuple[LinkSpec, ...]
    unit_mbps: float = 1.0

    def __post_init__(self) -> None:
        for attr in ("switches", "ots", "hosts", "links"):
            object.__setattr__(self, attr, tuple(getattr(self, attr)))
        validate(self)

    def switch(self, name: str) -> SwitchSpec:
        """The packet switch called ``name`` (KeyError if none)."""
        for s in self.switches:
            if s.name == name:
                return s
        raise KeyError(name)

    def ots_node(self, name: str) -> OtsSpec:
        """The OTS called ``name`` (KeyError if none)."""
        for o in self.ots:
            if o.name == name:
                return o
        raise KeyError(name)

    def dpid_names(self) -> dict[int, str]:
        """dpid -> name of every datapath (packet switches and OTSes): what the controller calls them."""
        return {s.dpid: s.name for s in self.switches} | {o.dpid: o.name for o in self.ots}

    def links_of_kind(self, kind: str) -> list[LinkSpec]:
        """Links of one kind, in spec order."""
        return [link for link in self.links if link.kind == kind]


# ---------------------------------------------------------------------- validation
def validate(spec: LabSpec) -> None:
    """Check names, dpids, granularities and that every port is cabled at most once."""
    if spec.unit_mbps <= 0:
        raise SpecError(f"lab {spec.name}: unit_mbps must be > 0, got {spec.unit_mbps!r}")
    names = [s.name for s in spec.switches] + [o.name for o in spec.ots] + [h.name for h in spec.hosts]
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise SpecError(f"lab {spec.name}: duplicate node names: {', '.join(sorted(dup))}")
    for n in names:
        if not n or ":" in n or not n.replace("_", "").replace("-", "").isalnum():
            raise SpecError(f"lab {spec.name}: bad node name {n!r} (letters, digits, '-', '_' only)")
    dpids = [(s.name, s.dpid) for s in spec.switches] + [(o.name, o.dpid) for o in spec.ots]
    seen: dict[int, str] = {}
    for n, d in dpids:
        if isinstance(d, bool) or not isinstance(d, int) or not 0 < d < 2**64:
            raise SpecError(f"lab {spec.name}: {n}: dpid must be an integer in (0, 2^64), got {d!r}")
        if d in seen:
            raise SpecError(f"lab {spec.name}: {n} and {seen[d]} share dpid {d:#x}")
        seen[d] = n
    ots_ports: dict[str, dict[int, str]] = {}
    for o in spec.ots:
        ports = {}
        for p, g in o.ports.items():
            if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
                raise SpecError(f"lab {spec.name}: OTS {o.name}: bad port number {p!r}")
            try:
                ports[p] = gran.normalize(g)
            except TopologyError as exc:
                raise SpecError(f"lab {spec.name}: OTS {o.name} port {p}: {exc}") from None
        ots_ports[o.name] = ports
    switches = {s.name for s in spec.switches}
    hosts = {h.name: h for h in spec.hosts}
    used: dict[tuple[str, int], str] = {}

    def claim(node: str, port: int, what: str) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or port < 0:
            raise SpecError(f"lab {spec.name}: {what}: bad port {port!r} on {node}")
        if (node, port) in used:
            raise SpecError(f"lab {spec.name}: port {node}:{port} used twice ({used[node, port]} and {what})")
        used[node, port] = what

    for h in spec.hosts:
        if h.switch not in switches:
            raise SpecError(f"lab {spec.name}: host {h.name} is on unknown switch {h.switch!r}")
        if h.port <= 0:
            raise SpecError(f"lab {spec.name}: host {h.name}: switch port must be > 0, got {h.port!r}")
    accessed: Counter[str] = Counter()
    for link in spec.links:
        what = f"{link.kind} link {link.a}:{link.a_port}-{link.b}:{link.b_port}"
        if link.kind not in LINK_KINDS:
            raise SpecError(f"lab {spec.name}: {what}: unknown kind (known: {', '.join(LINK_KINDS)})")
        if link.mbps <= 0 or link.latency_ms < 0:
            raise SpecError(f"lab {spec.name}: {what}: needs mbps > 0 and latency_ms >= 0")
        expect = {"access": ("host", "switch"), "packet": ("switch", "switch"),
                  "adaptation": ("switch", "ots"), "optical": ("ots", "ots")}[link.kind]
        for node, role in zip((link.a, link.b), expect, strict=True):
            known = {"host": hosts, "switch": switches, "ots": ots_ports}[role]
            if node not in known:
                raise SpecError(f"lab {spec.name}: {what}: {node!r} is not a known {role}")
        if link.kind == "access":
            h = hosts[link.a]
            if (link.b, link.b_port) != (h.switch, h.port):
                raise SpecError(f"lab {spec.name}: {what}: host {h.name} is declared on {h.switch}:{h.port}")
            accessed[h.name] += 1
        if link.kind == "packet" and link.a == link.b:
            raise SpecError(f"lab {spec.name}: {what}: a loop on one switch")
        for node, port, role in ((link.a, link.a_port, expect[0]), (link.b, link.b_port, expect[1])):
            if role == "ots" and port not in ots_ports[node]:
                raise SpecError(f"lab {spec.name}: {what}: OTS {node} has no port {port}")
            claim(node, port, what)
        if link.kind == "optical":
            if link.a == link.b:
                raise SpecError(f"lab {spec.name}: {what}: a fibre must join two different OTSes")
            ga, gb = ots_ports[link.a][link.a_port], ots_ports[link.b][link.b_port]
            if ga != gb:
                raise SpecError(f"lab {spec.name}: {what}: granularities differ ({ga} vs {gb})")
    for h in spec.hosts:
        if accessed[h.name] != 1:
            raise SpecError(f"lab {spec.name}: host {h.name} needs exactly one access link, has {accessed[h.name]}")


# ---------------------------------------------------------------------- the Fig. 2 testbed
def fig2_testbed(unit_mbps: float = 1.0) -> LabSpec:
    """The paper's Fig. 2 testbed, wired exactly as docs/contracts.md section 2."""
    odu2 = gran.capacity_mbps("ODU2", unit_mbps)
    odu0 = gran.capacity_mbps("ODU0", unit_mbps)
    access = 2 * odu2  # hosts are faster than one circuit, so the circuit is the bottleneck
    switches = (SwitchSpec("A", 0xA1), SwitchSpec("B", 0xB1), SwitchSpec("C", 0xC1))
    ots = (
        OtsSpec("X", 0x0F01, {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0"}),
        OtsSpec("Y", 0x0F02, {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"}),
        OtsSpec("Z", 0x0F03, {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0"}),
    )
    hosts = (
        HostSpec("h1", "A", 1, "10.0.0.1", "00:00:00:00:00:01"),
        HostSpec("h2", "A", 2, "10.0.0.2", "00:00:00:00:00:02"),
        HostSpec("h3", "C", 3, "10.0.0.3", "00:00:00:00:00:03"),
        HostSpec("h4", "C", 4, "10.0.0.4", "00:00:00:00:00:04"),
    )
    links = [LinkSpec(h.name, 0, h.switch, h.port, "access", access) for h in hosts]
    for a, ap, b, bp in (("A", 3, "X", 1), ("A", 4, "X", 4), ("B", 1, "Y", 2), ("B", 2, "Y", 3),
                         ("C", 1, "Z", 2), ("C", 2, "Z", 4)):
        links.append(LinkSpec(a, ap, b, bp, "adaptation", odu2))
    for a, ap, b, bp in (("X", 2, "Y", 1), ("X", 3, "Z", 3), ("X", 5, "Z", 5), ("Y", 4, "Z", 1)):
        links.append(LinkSpec(a, ap, b, bp, "optical", odu2))
    links.append(LinkSpec("X", 6, "Z", 6, "optical", odu0))
    return LabSpec("fig2", switches, ots, hosts, tuple(links), unit_mbps)


# ---------------------------------------------------------------------- generators
def _connected_edges(n: int, n_edges: int, rng: random.Random) -> list[tuple[int, int]]:
    """A random connected simple graph on n nodes with n_edges edges (random tree + chords)."""
    order = list(range(n))
    rng.shuffle(order)
    edges = set()
    for i in range(1, n):
        a, b = order[i], order[rng.randrange(i)]
        edges.add((min(a, b), max(a, b)))
    candidates = [(a, b) for a in range(n) for b in range(a + 1, n) if (a, b) not in edges]
    rng.shuffle(candidates)
    edges.update(candidates[: max(0, n_edges - len(edges))])
    return sorted(edges)


def _build(name: str, n_packet: int, fibres: list[tuple[int, int, float]], n_ots: int,
           attach: list[int], unit_mbps: float, uplinks: int, ots_names: list[str],
           sw_names: list[str]) -> LabSpec:
    """Assemble a generated lab: OTS k gets one ODU2 port per fibre and per uplink."""
    odu2 = gran.capacity_mbps("ODU2", unit_mbps)
    next_port = [1] * n_ots
    links: list[LinkSpec] = []
    for a, b, lat in fibres:
        links.append(LinkSpec(ots_names[a], next_port[a], ots_names[b], next_port[b], "optical", odu2, lat))
        next_port[a] += 1
        next_port[b] += 1
    switches, hosts = [], []
    for i in range(n_packet):
        sw = sw_names[i]
        switches.append(SwitchSpec(sw, 0x10000 + i + 1))
        hi, mid, lo = (i + 1) >> 16 & 255, (i + 1) >> 8 & 255, (i + 1) & 255
        host = HostSpec(f"h{i + 1}", sw, 1, f"10.{hi}.{mid}.{lo}", f"02:00:00:{hi:02x}:{mid:02x}:{lo:02x}")
        hosts.append(host)
        links.append(LinkSpec(host.name, 0, sw, 1, "access", 2 * odu2))
        k = attach[i]
        for u in range(uplinks):
            links.append(LinkSpec(sw, 2 + u, ots_names[k], next_port[k], "adaptation", odu2))
            next_port[k] += 1
    ots = [OtsSpec(ots_names[k], 0x0F0000 + k + 1, {p: "ODU2" for p in range(1, next_port[k])})
           for k in range(n_ots)]
    return LabSpec(name, tuple(switches), tuple(ots), tuple(hosts), tuple(links), unit_mbps)


def optical_mesh(n_packet: int, n_ots: int, degree: int = 3, seed: int = 0, unit_mbps: float = 1.0,
                 uplinks: int = 2) -> LabSpec:
    """N packet switches (one host each) over a random connected mesh of OTSes.

    The mesh has about ``n_ots * degree / 2`` fibres (at most a full mesh); packet switch i hangs
    off OTS ``i mod n_ots`` with ``uplinks`` adaptation links. All optical ports are ODU2.
    """
    if n_packet < 1 or n_ots < 1 or degree < 1 or uplinks < 1:
        raise SpecError("optical_mesh needs n_packet, n_ots, degree, uplinks >= 1")
    rng = random.Random(seed)
    edges = _connected_edges(n_ots, (n_ots * degree + 1) // 2, rng)
    fibres = [(a, b, 0.0) for a, b in edges]
    return _build(f"mesh-{n_packet}x{n_ots}-d{degree}-s{seed}", n_packet, fibres, n_ots,
                  [i % n_ots for i in range(n_packet)], unit_mbps, uplinks,
                  [f"O{k + 1}" for k in range(n_ots)], [f"S{i + 1}" for i in range(n_packet)])


#: Signal propagation in fibre: about 200 km per millisecond.
KM_PER_MS = 200.0


def from_topohub(name: str, unit_mbps: float = 1.0, uplinks: int = 2) -> LabSpec:
    """A lab from a topohub topology (``"sndlib/abilene"``, ``"topozoo/Abilene"``, ``"gabriel/25/0"``).

    Each topohub node becomes one OTS ``o<id>`` plus one packet switch ``s<id>`` (with host
    ``h<id+1>``); each topohub edge becomes a fibre with latency from its length when known.
    Short names keep Mininet interface names within 15 characters.
    """
    import topohub

    try:
        topo = topohub.get(name)
    except (KeyError, FileNotFoundError, ValueError):
        raise SpecError(f"unknown topohub topology {name!r} (e.g. sndlib/abilene, topozoo/Abilene)") from None
    ids = sorted(n["id"] for n in topo["nodes"])
    index = {nid: i for i, nid in enumerate(ids)}
    fibres: dict[tuple[int, int], float] = {}
    for e in topo.get("edges", topo.get("links", [])):
        a, b = index[e["source"]], index[e["target"]]
        if a == b:
            continue
        key = (min(a, b), max(a, b))
        dist = e.get("dist")
        lat = round(float(dist) / KM_PER_MS, 3) if isinstance(dist, (int, float)) else 0.0
        fibres.setdefault(key, lat)  # parallel edges in the source become one fibre
    n = len(ids)
    safe = name.replace("/", "-")
    return _build(f"topohub-{safe}", n, [(a, b, lat) for (a, b), lat in sorted(fibres.items())], n,
                  list(range(n)), unit_mbps, uplinks, [f"o{nid}" for nid in ids], [f"s{nid}" for nid in ids])


# ---------------------------------------------------------------------- conversions
def spec_to_graph(spec: LabSpec, setup_time: float = DEFAULT_SETUP_TIME) -> MultiLayerGraph:
    """The multi-layer graph of a lab with no XCON active: what discovery must reproduce."""
    g = MultiLayerGraph()
    for s in spec.switches:
        g.add_packet_switch(s.name, s.dpid)
    for o in spec.ots:
        g.add_ots(o.name, o.dpid, dict(o.ports), spec.unit_mbps, setup_time, source="spec")
    for h in spec.hosts:
        g.add_host(h.name, h.ip, h.mac)
    for link in spec.links:
        if link.kind == "access":
            g.add_access(link.a, link.b, link.b_port, link.mbps, source="spec")
        elif link.kind == "packet":
            g.add_packet_link(link.a, link.a_port, link.b, link.b_port, link.mbps, link.latency_ms, source="spec")
        elif link.kind == "adaptation":
            g.add_adaptation(link.a, link.a_port, oport_id(link.b, link.b_port), link.mbps, source="spec")
        else:
            g.add_optical_link(oport_id(link.a, link.a_port), oport_id(link.b, link.b_port), link.mbps,
                               link.latency_ms, source="spec")
    return g


def spec_to_vendor_file(spec: LabSpec, setup_time: float = DEFAULT_SETUP_TIME) -> dict[str, Any]:
    """The static optical-domain file of a lab (schema: docs/topology.md), as a plain document."""
    adapt = spec.links_of_kind("adaptation")
    used = {link.a for link in adapt}
    return {
        "version": 1,
        "unit_mbps": spec.unit_mbps,
        "packet_switches": [{"name": s.name, "dpid": f"{s.dpid:#06x}"} for s in spec.switches if s.name in used],
        "ots": [{"name": o.name, "dpid": f"{o.dpid:#06x}", "setup_time": setup_time,
                 "ports": {p: gran.normalize(g) for p, g in sorted(o.ports.items())}} for o in spec.ots],
        "fibres": [{"a": f"{link.a}:{link.a_port}", "b": f"{link.b}:{link.b_port}", "mbps": link.mbps,
                    "latency_ms": link.latency_ms} for link in spec.links_of_kind("optical")],
        "adaptations": [{"switch": link.a, "port": link.a_port, "oport": f"{link.b}:{link.b_port}",
                         "mbps": link.mbps} for link in adapt],
    }


_MESH = re.compile(r"^mesh-(\d+)x(\d+)(?:-d(\d+))?(?:-s(\d+))?$")


def spec_by_name(name: str, unit_mbps: float = 1.0) -> LabSpec:
    """A lab by name: ``fig2``, ``mesh-<packet>x<ots>[-d<degree>][-s<seed>]``, ``topohub:<key>``."""
    if name in ("fig2", "testbed"):
        return fig2_testbed(unit_mbps)
    m = _MESH.match(name)
    if m:
        n_packet, n_ots, degree, seed = m.groups()
        return optical_mesh(int(n_packet), int(n_ots), int(degree or 3), int(seed or 0), unit_mbps)
    if name.startswith("topohub:"):
        return from_topohub(name.split(":", 1)[1], unit_mbps)
    raise SpecError(f"unknown lab {name!r} (fig2, mesh-<packet>x<ots>[-d<degree>][-s<seed>], topohub:<key>)")
