"""Reconciliation after a controller (re)start: adopt what the switches hold instead of wiping it.

A controller that restarts finds the network running: OTS nodes with lit XCONs, packet switches with
the forwarding rules of the previous process (both keep them while no controller is connected:
fail-mode secure). Throwing that away costs outages (a scan that probed "free" ports deleted live
XCONs; forwarding deleted its rules and rebuilt them only once LLDP and host learning caught up).
Instead both apps read their rules back (OpenFlow flow stats) and *adopt* them. The decisions are
plain functions here, unit-tested without os-ken:

- :func:`adopt_xcons` / :func:`adopt_rules`: what a read-back adds to a table without overriding a
  change the controller made after the request left (``touched``);
- :func:`orphan_xcons`: adopted XCONs on no lit circuit (reported, never deleted by the controller);
- :func:`held_changes`: a forwarding plan diff that keeps adopted rules until the topology settled;
- :func:`infer_hosts`: hosts read off adopted rules that output to edge ports.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.controller.lit_circuits import lit_circuits
from app.controller.model import PortRef
from app.controller.paths import Plan, diff
from topology.graph import MultiLayerGraph


def settle_seconds(link_timeout: float, lldp_interval: float) -> float:
    """How long after the last switch (re)connected the topology counts as settled: one ``link_timeout``
    (LLDP deletes a link it has not seen for that long, so by then every link that exists has been
    seen), and at least two LLDP rounds."""
    return max(float(link_timeout), 2.0 * float(lldp_interval))


# ---- OTS nodes ------------------------------------------------------------------------------------
def adopt_xcons(read: Iterable[tuple[int, int]], applied: Mapping[int, int], unknown: Mapping[int, int],
                touched: set[int]) -> dict[int, int]:
    """XCONs (in_port -> out_port) of a flow-stats read-back to adopt: every one the driver does not know
    yet, except on ports it changed itself after sending the request (its own record is newer)."""
    out: dict[int, int] = {}
    for a, b in read:
        if a in touched or a in applied or a in unknown or a == b:
            continue
        out[a] = b
    return out


def orphan_xcons(g: MultiLayerGraph, xcons: Mapping[str, Mapping[int, int]]) -> set[tuple[str, int]]:
    """(OTS name, in_port) of the XCONs in ``xcons`` (OTS name -> {in_port: out_port}) that lie on no lit
    circuit of ``g`` (a chain from an adaptation to an adaptation, :func:`lit_circuits.lit_circuits`);
    either direction of a hop counts."""
    on_circuit: set[tuple[str, int, int]] = set()
    for c in lit_circuits(g):
        for ots, a, b in c.xcons:
            on_circuit |= {(ots, a, b), (ots, b, a)}
    return {(ots, a) for ots, table in xcons.items() for a, b in table.items() if (ots, a, b) not in on_circuit}


# ---- packet switches --------------------------------------------------------------------------------
def adopt_rules(read: Iterable[tuple[str, int]], installed: Mapping[str, int], touched: set[str]) -> dict[str, int]:
    """Forwarding rules (eth_dst MAC -> out port) of one switch's read-back to adopt: those the app has
    not installed or deleted itself since the request left. A MAC read twice (should not happen:
    one rule per MAC) keeps its first rule."""
    out: dict[str, int] = {}
    for mac, port in read:
        mac = mac.lower()
        if mac in touched or mac in installed or mac in out:
            continue
        out[mac] = port
    return out


def held_changes(installed: Plan, new: Plan, held: Mapping[int, set[str]], dead: set[PortRef]
                 ) -> tuple[list[tuple[int, str, int]], list[tuple[int, str]], Plan]:
    """The plan diff while adopted rules are held: (install, delete, what is installed afterwards).

    ``held``: dpid -> MACs whose adopted rule must not be deleted yet (the topology has not settled,
    so a missing rule in ``new`` may only mean a link or host is not known *yet*). A held rule whose
    output port is in ``dead`` (known down) is deleted anyway: it can deliver nothing. Installs are
    never held: they only replace a rule with one over links seen right now.
    """
    install, delete = diff(installed, new)
    keep = [(d, m) for d, m in delete if m in held.get(d, ()) and PortRef(d, installed[d][m]) not in dead]
    kept = set(keep)
    after: Plan = {d: dict(rules) for d, rules in new.items()}
    for d, m in keep:
        after.setdefault(d, {})[m] = installed[d][m]
    return install, [x for x in delete if x not in kept], after


def infer_hosts(adopted: Mapping[int, Mapping[str, int]], edge_ports: set[PortRef], known: set[str]
                ) -> dict[str, PortRef]:
    """Hosts read off adopted rules: the plan outputs to a non-link port only on the host's own switch,
    so a rule ``eth_dst=M -> p`` with ``p`` an edge port (up, no LLDP link: decide only once LLDP has
    settled) says M is at that port. A MAC already known, a multicast MAC, or one that points to two
    edge ports is left to learning."""
    where: dict[str, set[PortRef]] = {}
    for dpid, rules in adopted.items():
        for mac, port in rules.items():
            ref = PortRef(dpid, port)
            if ref in edge_ports:
                where.setdefault(mac.lower(), set()).add(ref)
    return {mac: next(iter(refs)) for mac, refs in sorted(where.items())
            if len(refs) == 1 and mac not in known and not int(mac.split(":")[0], 16) & 1}
