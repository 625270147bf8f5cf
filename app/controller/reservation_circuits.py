"""What a reservation needs in the network: its XCONs, its circuit's packet ports, its packet rules.

Plain code (no os-ken): a reservation's stored path (``pce.reservation.PathResult``: edge keys of
the multi-layer graph, from the source port to the destination port) is walked once and turned
into :class:`ReservationCircuit`, which the update planner orders (XCONs, circuit up, transit
rules, ingress rules last) and the release plan undoes.

The rules carry the reservation's traffic only: everything entering at an endpoint port (or only
its VLAN when one is given) goes onto the circuit, and what comes back off the circuit goes out of
that port. They sit in the ``reservation`` band of :mod:`topology.rule_plan` with the
reservation id in the cookie, above forwarding, so the whole endpoint port (or VLAN) belongs to
the reservation for its window. The forwarding app keeps other traffic off the circuit's packet
ports (:attr:`ReservationCircuit.packet_ports`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from app.update.model import FlowRule, Port, XconSpec
from topology import rule_plan
from topology.graph import MultiLayerGraph

OFPVID_PRESENT = 0x1000


XconId = tuple[str, frozenset[int]]  # (OTS, its two ports): the same XCON whatever its direction


def xcon_id(x: XconSpec | tuple[str, int, int]) -> XconId:
    if isinstance(x, XconSpec):
        return x.ots, x.ports
    return str(x[0]), frozenset((int(x[1]), int(x[2])))


class ReservationPathError(ValueError):
    """The stored path cannot be turned into network state (the message says why)."""


@dataclass(frozen=True)
class ReservationCircuit:
    """Everything one reservation installs: one plan provisions it, the reverse plan releases it."""

    ident: int
    xcons: tuple[XconSpec, ...]
    segments: tuple[tuple[Port, Port], ...]  # each lit circuit: its two packet-switch end ports
    segment_xcons: tuple[tuple[XconSpec, ...], ...]  # the XCONs of each segment, in path order
    transit: tuple[FlowRule, ...]  # every rule but the two ingress rules
    ingress: tuple[FlowRule, ...]  # the rules that take traffic in at the endpoint ports
    capacity: float  # Mbit/s: the narrowest optical container on the path

    @property
    def rules(self) -> tuple[FlowRule, ...]:
        return self.transit + self.ingress

    @cached_property
    def segment_keys(self) -> tuple[frozenset[XconId], ...]:
        """Each segment as the set of its XCONs (:func:`xcon_id`): the identity of a circuit in the network
        (grooming compares them against every lit reservation's for each new one; computed once per
        circuit, not per comparison)."""
        return tuple(frozenset(xcon_id(x) for x in xs) for xs in self.segment_xcons)

    @property
    def packet_ports(self) -> tuple[Port, ...]:
        """The packet ports of the reservation's circuits (default forwarding must not use them)."""
        return tuple(p for seg in self.segments for p in seg)

    def to_json(self) -> dict:
        return {"id": self.ident, "capacity": self.capacity,
                "xcons": [x.to_json() for x in self.xcons],
                "segments": [[list(a), list(b)] for a, b in self.segments],
                "rules": [r.to_json() for r in self.rules]}


def _endpoint(name: str) -> Port:
    sw, sep, port = name.rpartition(":")
    if not sep or not port.isdigit():
        raise ReservationPathError(f"endpoint {name!r} is not switch:port")
    return sw, int(port)


def check_vlan(vlan: int | None) -> int | None:
    """``vlan`` if it can be matched (1..4094) or None; ReservationPathError otherwise."""
    if vlan is not None and not 1 <= vlan <= 4094:
        raise ReservationPathError(f"VLAN {vlan} out of range 1..4094")
    return vlan


def circuit_for(g: MultiLayerGraph, ident: int, src: str, dst: str, edges: Sequence[str],
                vlan: int | None = None) -> ReservationCircuit:
    """Walk ``edges`` (a stored path's edge keys, source to destination) over ``g``.

    ``src`` and ``dst`` are the endpoint ports (``"A:1"``); ``vlan`` restricts the reservation to one
    VLAN at both ends (the rules match it; no translation)."""
    check_vlan(vlan)
    (cur, in_port), (dst_sw, dst_port) = _endpoint(src), _endpoint(dst)
    hops: list[tuple[str, int, int]] = []
    xcons: list[XconSpec] = []
    segments: list[tuple[Port, Port]] = []
    seg_xcons: list[tuple[XconSpec, ...]] = []
    first_xcon = 0
    caps: list[float] = []
    seg_start: Port | None = None
    for key in edges:
        try:
            d = g.edge(key)
            u, v = g.edge_ends(key)
        except Exception as exc:  # noqa: BLE001 - any lookup failure: the graph no longer has it
            raise ReservationPathError(f"the path's edge {key} is not in the network ({exc})") from None
        kind = d["kind"]
        if kind == "access":
            continue
        if cur not in (u, v):
            raise ReservationPathError(f"the path's edge {key} does not continue from {cur}")
        other = v if u == cur else u
        if kind == "packet":
            hops.append((cur, in_port, int(d["ports"][cur])))
            cur, in_port = other, int(d["ports"][other])
        elif kind == "adaptation":
            if g.kind(cur) == "oport":  # leaving the optical layer at a packet switch port
                port = int(d["ports"][other])
                if seg_start is None:
                    raise ReservationPathError(f"the path leaves the optical layer at {key} without entering it")
                segments.append((seg_start, (other, port)))
                seg_xcons.append(tuple(xcons[first_xcon:]))
                first_xcon = len(xcons)
                seg_start, cur, in_port = None, other, port
            else:
                out = int(d["ports"][cur])
                hops.append((cur, in_port, out))
                seg_start, cur = (cur, out), other
        elif kind == "xcon":
            a, b = g.g.nodes[cur], g.g.nodes[other]
            xcons.append(XconSpec(str(a["ots"]), int(a["port"]), int(b["port"])))
            caps.append(float(min(a.get("capacity") or 0.0, b.get("capacity") or 0.0)))
            cur = other
        elif kind == "optical":
            cur = other
        else:
            raise ReservationPathError(f"the path's edge {key} has unknown kind {kind!r}")
    if cur != dst_sw:
        raise ReservationPathError(f"the path ends at {cur}, not at the destination switch {dst_sw}")
    hops.append((cur, in_port, dst_port))
    if not xcons:
        raise ReservationPathError("the path crosses no optical circuit: nothing to light")
    band = rule_plan.RESERVATION
    extra = {"vlan_vid": OFPVID_PRESENT | vlan} if vlan is not None else {}
    prio = band.priority(1 if vlan is not None else 0)  # a VLAN rule is more specific than a port rule

    def rule(sw: str, i: int, o: int) -> FlowRule:
        return FlowRule(sw, band.name, ident, prio, (("in_port", i), *extra.items()), o)

    forward = [rule(sw, i, o) for sw, i, o in hops]
    backward = [rule(sw, o, i) for sw, i, o in reversed(hops)]
    ingress = (forward[0], backward[0])
    transit = tuple(forward[1:] + backward[1:])
    return ReservationCircuit(ident, tuple(xcons), tuple(segments), tuple(seg_xcons), transit, ingress, min(caps))


#: the ``_CONTEXTS`` key of :class:`LitReservations`
LIT_CONTEXT = "mlte_lit_reservations"


def held_oports(g: MultiLayerGraph, busy_ports: Callable[[str], set[int]]) -> set[str]:
    """The optical ports of ``g`` (node ids, ``"X:3"``) that a circuit holds now: a new path avoids them."""
    otss = {d["ots"] for _n, d in g.g.nodes(data=True) if d.get("kind") == "oport"}
    return {f"{o}:{p}" for o in otss for p in busy_ports(o) if f"{o}:{p}" in g.g}


def without_circuit_links(g: MultiLayerGraph) -> MultiLayerGraph:
    """``g`` without the packet links that are lit circuits (LLDP sees a lit circuit as a packet link
    between its ends): a reservation lights a circuit of its own, and nothing lights a path that only
    crosses another's circuit ("the path crosses no optical circuit"), so a new path must not use one."""
    from app.controller.lit_circuits import lit_circuits

    ends = [(c.a_end, c.z_end) for c in lit_circuits(g)]
    if not ends:
        return g
    out = g.copy()
    for a_end, z_end in ends:
        sw, port = a_end.rsplit(":", 1)
        z_sw, z_port = z_end.rsplit(":", 1)
        for key in out.edges_at_port(sw, int(port), kinds=("packet",)):
            if key in out.edges_at_port(z_sw, int(z_port), kinds=("packet",)):
                out.remove_edge(key)
    return out


class LitReservations(dict[int, ReservationCircuit]):
    """The reservations lit now (reservation id -> circuit): the reservations app's manager keeps it, the
    TE loop's placement reads it (their circuits are held where they are). Shared as an os-ken context so
    that no app looks another up by name or reads its attributes."""

