"""Reconciliation decisions (app/controller/reconcile.py), plain: adoption, orphans, held deletions, hosts."""
from __future__ import annotations

from app.controller.model import HostInfo, PacketLink, PortRef
from app.controller.paths import diff, link_graph, plan
from app.controller.reconcile import (
    adopt_rules,
    adopt_xcons,
    held_changes,
    infer_hosts,
    orphan_xcons,
    settle_seconds,
)
from mininet_labs.circuits import FIG2_CIRCUITS
from topology.graph import oport_id
from topology.spec import fig2_testbed, spec_to_graph


def both(a, ap, b, bp):
    return [PacketLink(PortRef(a, ap), PortRef(b, bp)), PacketLink(PortRef(b, bp), PortRef(a, ap))]


RING = both(1, 2, 2, 1) + both(2, 2, 3, 2) + both(3, 3, 1, 3)
H1 = HostInfo("00:00:00:00:00:01", "10.0.0.1", PortRef(1, 1))
H3 = HostInfo("00:00:00:00:00:03", "10.0.0.3", PortRef(3, 1))
EDGES = {PortRef(1, 1), PortRef(2, 3), PortRef(3, 1)}  # up ports without an LLDP link


def test_settle_is_one_link_timeout_and_at_least_two_lldp_rounds():
    assert settle_seconds(5.0, 1.0) == 5.0
    assert settle_seconds(1.0, 2.0) == 4.0


# ---- OTS: adoption and orphans ------------------------------------------------------------------
def test_adopt_xcons_keeps_what_the_driver_changed_after_the_request():
    read = [(1, 2), (2, 1), (3, 4), (4, 3), (5, 5)]
    # 3 was deleted by us after the request left (touched), 4 is in an unknown state, 2 already applied
    assert adopt_xcons(read, applied={2: 1}, unknown={4: 3}, touched={3}) == {1: 2}
    assert adopt_xcons([], {}, {}, set()) == {}


def fig2_graph(*chains: list[tuple[str, int, int]]):
    g = spec_to_graph(fig2_testbed())
    for chain in chains:
        for ots, a, b in chain:
            g.set_xcon_active(oport_id(ots, a), oport_id(ots, b))
    return g


def both_ways(chain):
    out: dict[str, dict[int, int]] = {}
    for ots, a, b in chain:
        out.setdefault(ots, {}).update({a: b, b: a})
    return out


def test_xcons_of_a_lit_circuit_are_no_orphans_in_either_direction():
    initial = FIG2_CIRCUITS["initial"]
    assert orphan_xcons(fig2_graph(initial), both_ways(initial)) == set()


def test_a_chain_that_ends_dark_is_an_orphan():
    """X 4<->5 alone: X:4 is adapted (A:4) but the fibre X:5-Z:5 ends at a Z port with no XCON."""
    half = [("X", 4, 5)]
    g = fig2_graph(FIG2_CIRCUITS["initial"], half)
    assert orphan_xcons(g, both_ways(half)) == {("X", 4), ("X", 5)}
    # completed by Z 5<->4 it is the offload circuit A:4-C:2: no orphan any more
    offload = FIG2_CIRCUITS["offload"]
    assert orphan_xcons(fig2_graph(offload), both_ways(offload)) == set()


def test_without_adaptations_nothing_is_a_circuit():
    """The circuit needs its adaptations (scan / state file / static file): with none known, every
    XCON is on no known circuit."""
    initial = FIG2_CIRCUITS["initial"]
    g = fig2_graph(initial)
    for key in list(g.edges_of_kind("adaptation")):
        g.remove_edge(key)
    assert orphan_xcons(g, both_ways(initial)) == {(o, p) for o, t in both_ways(initial).items() for p in t}


# ---- packet switches: adoption, hold, hosts --------------------------------------------------------
def test_adopt_rules_skips_macs_touched_or_installed_since_the_request():
    read = [("00:00:00:00:00:01", 1), ("00:00:00:00:00:03", 3), ("00:00:00:00:00:05", 2),
            ("00:00:00:00:00:01", 4)]
    out = adopt_rules(read, installed={"00:00:00:00:00:03": 2}, touched={"00:00:00:00:00:05"})
    assert out == {"00:00:00:00:00:01": 1}


def test_held_adopted_rules_survive_a_half_known_topology():
    """Right after a restart no host and no link is known: the plan is empty. Without the hold the
    diff deletes every adopted rule (the old behaviour: an outage until hosts are learnt again)."""
    before = plan(link_graph([1, 2, 3], RING), [H1, H3])
    empty = plan(link_graph([1, 2, 3], []), [])
    held = {d: set(rules) for d, rules in before.items()}
    install, delete, after = held_changes(before, empty, held, dead=set())
    assert install == [] and delete == [] and after == before
    install, delete, after = held_changes(before, empty, {}, dead=set())  # not holding
    assert len(delete) == sum(len(r) for r in before.values()) and after == empty


def test_a_held_rule_into_a_down_port_is_deleted():
    before = plan(link_graph([1, 2, 3], RING), [H1, H3])
    held = {d: set(rules) for d, rules in before.items()}
    _, delete, after = held_changes(before, plan(link_graph([1, 2, 3], []), []), held, dead={PortRef(1, 3)})
    assert delete == [(1, H3.mac)]  # 1 -> 3 went out of port 3, which is down
    assert H3.mac not in after[1] and after[3] == before[3]


def test_a_lost_link_during_the_hold_reroutes_exactly_the_affected_destinations():
    before = plan(link_graph([1, 2, 3], RING), [H1, H3])
    held = {d: set(rules) for d, rules in before.items()}
    without_13 = plan(link_graph([1, 2, 3], both(1, 2, 2, 1) + both(2, 2, 3, 2)), [H1, H3])
    install, delete, after = held_changes(before, without_13, held, dead=set())
    assert install == [(1, H3.mac, 2), (3, H1.mac, 2)] and delete == []
    assert after == without_13


def test_infer_hosts_from_rules_to_edge_ports():
    adopted = plan(link_graph([1, 2, 3], RING), [H1, H3])
    assert infer_hosts(adopted, EDGES, known=set()) == {H1.mac: H1.port, H3.mac: H3.port}
    assert infer_hosts(adopted, EDGES, known={H1.mac}) == {H3.mac: H3.port}
    # before LLDP settled every up port looks like an edge: two edge ports for one MAC -> not inferred
    all_up = EDGES | {PortRef(1, 2), PortRef(1, 3), PortRef(2, 1), PortRef(2, 2), PortRef(3, 2), PortRef(3, 3)}
    assert infer_hosts(adopted, all_up, known=set()) == {}
    assert infer_hosts({1: {"01:00:5e:00:00:01": 1}}, EDGES, set()) == {}  # multicast is no host


def test_a_restart_of_a_settled_network_changes_no_rule():
    """The whole sequence in plain functions: adopt everything, links and hosts come back one by one
    while holding, settle, infer hosts, plan: the diff against the adopted rules is empty."""
    switches = [1, 2, 3]
    rules = plan(link_graph(switches, RING), [H1, H3])
    installed = {d: dict(r) for d, r in rules.items()}  # adopted from the read-back
    held = {d: set(r) for d, r in rules.items()}
    sent: list = []
    known: list[PacketLink] = []
    for link in RING:  # LLDP finds the links one at a time, hosts still unknown
        known.append(link)
        install, delete, installed = held_changes(installed, plan(link_graph(switches, known), []), held, set())
        sent += install + delete
    hosts = infer_hosts(rules, EDGES, known=set())
    final = plan(link_graph(switches, known), [HostInfo(m, None, p) for m, p in hosts.items()])
    assert sent == [] and diff(installed, final) == ([], [])
