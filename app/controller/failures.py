"""What is broken in the network, from the ports' last reported states (plain logic, no os-ken).

The virtual OTS reports loss of light the way real gear does (docs/ots.md, "Loss of light"): a port
it darkens itself (unused, being provisioned, or darkened because its cross-connect partner lost
light) is *administratively* down; a port that is down while it should carry light is *link* down
with its admin state up — that is a fault at that port (a cut fibre or cable, a dead neighbour).
On a packet switch a port somebody set administratively down (``ip link set … down``) is a fault;
one that is only link down is dark because the circuit behind it is (loss of light travelled to it),
which restoration repairs. An OTS that is not connected cannot be programmed: new paths avoid it,
but its circuits are not restored because of that alone (its cross-connects stay lit, as on
hardware whose agent died; a powered-off OTS darkens its neighbours, which report the fault).

:func:`failures_of` reads the view's switches into a :class:`Failures`; :func:`broken_by` says whether
a lit circuit crosses one (and names the cause); :meth:`Failures.exclude` lists the optical ports a
new path must avoid.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.controller.model import OTS, SwitchInfo
from app.update.model import XconSpec
from topology.graph import MultiLayerGraph, oport_id

Port = tuple[str, int]


@dataclass(frozen=True)
class Failures:
    """Failed ports (switch name, port) with what failed, and the OTSes the controller cannot reach."""

    ports: Mapping[Port, str] = field(default_factory=dict)
    unreachable: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.ports or self.unreachable)

    def exclude(self, g: MultiLayerGraph) -> tuple[str, ...]:
        """Optical ports of ``g`` a new path must not use: failed ones, those cabled to a failed packet
        port, the far ends of failed fibres, and every port of an unreachable OTS."""
        out: set[str] = set()
        attached = {at: node for node in g.nodes_of_kind("oport") if (at := g.adaptation_at(node)) is not None}
        for sw, port in self.ports:
            node = oport_id(sw, port)
            if node in g:
                out.add(node)
                if (peer := g.fibre_peer(node)) is not None:
                    out.add(peer)
            elif (sw, port) in attached:
                out.add(attached[(sw, port)])
        for ots in self.unreachable:
            out.update(n for n in g.nodes_of_kind("oport") if g.g.nodes[n].get("ots") == ots)
        return tuple(sorted(out))


def port_fault(sw: SwitchInfo, port_no: int) -> str | None:
    """Why port ``port_no`` of ``sw`` counts as failed (None: it does not)."""
    p = sw.ports.get(port_no)
    if p is None or p.up:
        return None
    if sw.kind == OTS:
        return None if p.admin_down else f"loss of light at {sw.name}:{port_no}"
    return f"{sw.name}:{port_no} administratively down" if p.admin_down else None


def failures_of(switches: Iterable[SwitchInfo], expected_ots: Iterable[str] = ()) -> Failures:
    """The failures the connected ``switches`` report; ``expected_ots``: OTS names the graph knows
    (from the static file), those not connected are unreachable."""
    switches = list(switches)
    ports: dict[Port, str] = {}
    for sw in switches:
        for port_no in sw.ports:
            why = port_fault(sw, port_no)
            if why is not None:
                ports[(sw.name, port_no)] = why
    connected = {sw.name for sw in switches}
    return Failures(ports, frozenset(set(expected_ots) - connected))


def broken_by(xcons: Iterable[XconSpec], packet_ports: Iterable[Port], f: Failures) -> str | None:
    """The first failure a lit circuit (its XCONs and the packet ports at its ends) crosses, else None."""
    for x in xcons:
        for port in (x.in_port, x.out_port):
            if (why := f.ports.get((x.ots, port))) is not None:
                return why
    for p in packet_ports:
        if (why := f.ports.get((p[0], int(p[1])))) is not None:
            return why
    return None


def path_fault(xcons: Iterable[XconSpec], packet_ports: Iterable[Port], f: Failures,
               g: MultiLayerGraph) -> str | None:
    """The first failure on a path that is not lit (a restored reservation's original path, before a
    revert): one of its ports failed, or it needs a port a new path would avoid (the far end of a
    failed fibre, a port of an unreachable OTS). None: the path is clear."""
    xcons = list(xcons)
    if (why := broken_by(xcons, packet_ports, f)) is not None:
        return why
    avoid = set(f.exclude(g))
    for x in xcons:
        if x.ots in f.unreachable:
            return f"OTS {x.ots} unreachable"
        for port in (x.in_port, x.out_port):
            if f"{x.ots}:{port}" in avoid:
                return f"{x.ots}:{port} is at a failed fibre"
    return None
