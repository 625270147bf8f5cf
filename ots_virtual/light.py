"""Loss of light (LOS) in the virtual OTS: which ports a fault darkens (pure: no OVS, no threads, no clock).

On real gear a cut fibre raises LOS at the port it enters; the cross-connect passes the failure on
(AIS, then a shut laser on the client side) so it travels hop by hop to both ends of the circuit.
Here light is a veth's carrier: the agent admin-downs the XCON partner of a faulted port, its peer
loses carrier, the next OTS does the same, and the packet ports at the circuit's ends go down.

A port is *faulted* (a LOS source) when it is in an applied XCON, not being provisioned, not darkened
by LOS itself (no loops), and either someone else took it admin-down (``held``: an operator's
``ip link set down``; the agent never lights it again until it comes up) or it had light since the
agent last lit it and has lost it (a *loss*: a lit port whose peer has never been lit — a scan probe
towards a dark fibre, an XCON whose next hop is still being provisioned — is no fault, so a probe
or a set-up still lights what it always lit). Its XCON partners are darkened while every fault
that darkens them lasts; deleting an XCON ends the LOS of its ports.

The agent keeps one :class:`PortSense` per port: :func:`command` when it asks OVS for a light
state, :func:`observe` for every OVS report; :func:`next_los` gives the new LOS set.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class PortSense:
    """What the agent knows about the light of one bridge port."""

    lit: bool = False  # the admin state the agent last asked for (True = up)
    seen: bool = False  # light seen (admin up and carrier) since the agent last turned it on
    held: bool = False  # taken admin-down by someone else while lit; not turned on again until it comes up


def command(sense: PortSense, lit: bool) -> PortSense:
    """The agent asks for ``lit``: turning a dark port on forgets the light seen before (what OVS still
    reports about it predates the command)."""
    if lit and not sense.lit:
        return replace(sense, lit=True, seen=False)
    return replace(sense, lit=lit)


def observe(sense: PortSense, admin_up: bool, link_up: bool) -> PortSense:
    """An OVS report of the port. Admin-down on a port the agent lit and saw lit is someone else's doing."""
    held = sense.held
    if admin_up:
        held = False
    elif sense.lit and sense.seen:
        held = True
    seen = sense.seen or (sense.lit and admin_up and link_up)
    return PortSense(sense.lit, seen, held)


def lost(sense: PortSense, admin_up: bool, link_up: bool) -> bool:
    """True when the port is a fault: held down by someone else, or lit, once seen lit, and dark now."""
    return sense.held or (sense.lit and sense.seen and not (admin_up and link_up))


def partners(xcons: Iterable[tuple[int, int]]) -> dict[int, set[int]]:
    """Port -> the ports it is cross-connected with (either direction of an XCON)."""
    out: dict[int, set[int]] = {}
    for a, b in xcons:
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return out


def next_los(xcons: Iterable[tuple[int, int]], provisioning: set[int], faulted: set[int], los: set[int]) -> set[int]:
    """The ports to hold dark for LOS, given the applied XCONs (in_port, out_port), the ports a batch
    holds dark, the ports whose OVS view is a fault (:func:`lost`) and the current LOS set.

    A LOS port is never a source (a fault cannot come back to darken its own cause), nor is a port
    being provisioned; a source is never darkened itself (it is down already, and lighting it later
    would undo an operator's cut)."""
    peers = partners(xcons)
    sources = {p for p in faulted if p in peers and p not in provisioning and p not in los}
    return {q for p in sources for q in peers[p]} - sources - provisioning


def adopt(xcons: Iterable[tuple[int, int]], ovs: Mapping[int, tuple[bool, bool]]) -> dict[int, PortSense]:
    """Senses of the ports of XCONs found on the bridge by a restarted agent, from OVS's (admin_up,
    link_up) of each port, so that LOS picks up where the old agent left it:

    - an admin-up port is lit; it counts as once seen lit if it has carrier or a partner is dark
      (the old agent darkened that partner because of it);
    - an admin-down port whose partner is up with carrier was taken down by someone else (held);
    - an admin-down port whose partner is up without carrier was darkened for LOS: it stays dark
      (:func:`next_los` darkens it again from its partner);
    - an admin-down port whose partners are all down too cannot be told apart (a batch in progress, or
      a cut and its LOS): it is lit again.
    Ports OVS does not report are left out.
    """
    peers = partners(xcons)
    out: dict[int, PortSense] = {}
    for p, qs in peers.items():
        if p not in ovs:
            continue
        admin, link = ovs[p]
        views = [ovs[q] for q in qs if q in ovs]
        if admin:
            out[p] = PortSense(lit=True, seen=link or any(not a for a, _ in views))
        elif any(a and up for a, up in views):
            out[p] = PortSense(lit=True, seen=True, held=True)
        elif any(a for a, _ in views):
            out[p] = PortSense(lit=False)
        else:
            out[p] = PortSense(lit=True)
    return out
