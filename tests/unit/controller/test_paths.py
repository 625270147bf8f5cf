"""Forwarding plan: shortest-path trees per host, diffs, reachability."""
from app.controller.model import HostInfo, PacketLink, PortRef
from app.controller.paths import diff, link_graph, plan, reachable


def both(a, ap, b, bp):
    return [PacketLink(PortRef(a, ap), PortRef(b, bp)), PacketLink(PortRef(b, bp), PortRef(a, ap))]


RING = both(1, 2, 2, 1) + both(2, 2, 3, 2) + both(3, 3, 1, 3)
H1 = HostInfo("00:00:00:00:00:01", "10.0.0.1", PortRef(1, 1))
H3 = HostInfo("00:00:00:00:00:03", "10.0.0.3", PortRef(3, 1))


def test_plan_uses_shortest_paths():
    p = plan(link_graph([1, 2, 3], RING), [H1, H3])
    assert p[1] == {H1.mac: 1, H3.mac: 3}  # direct link 1:3 -> 3:3
    assert p[3] == {H3.mac: 1, H1.mac: 3}
    assert p[2] == {H1.mac: 1, H3.mac: 2}


def test_link_loss_reroutes_and_diff_touches_only_changes():
    g = link_graph([1, 2, 3], RING)
    before = plan(g, [H1, H3])
    after = plan(link_graph([1, 2, 3], both(1, 2, 2, 1) + both(2, 2, 3, 2)), [H1, H3])
    assert after[1][H3.mac] == 2 and after[3][H1.mac] == 2
    install, delete = diff(before, after)
    assert (1, H3.mac, 2) in install and (3, H1.mac, 2) in install
    assert all(d != 2 for d, _, _ in install)  # switch 2's rules did not change
    assert delete == []


def test_unreachable_switch_gets_no_rule_and_old_rules_are_deleted():
    connected = plan(link_graph([1, 2], both(1, 2, 2, 1)), [H1])
    split = plan(link_graph([1, 2], []), [H1])
    assert split == {1: {H1.mac: 1}, 2: {}}
    assert diff(connected, split) == ([], [(2, H1.mac)])


def test_parallel_links_pick_lowest_port_and_reachability():
    links = both(1, 4, 2, 2) + both(1, 3, 2, 1)
    g = link_graph([1, 2, 5], links)
    assert g.edges[1, 2]["port"] == 3
    assert reachable(g, 1) == {1, 2}
    assert reachable(g, 5) == {5}
    assert reachable(g, 9) == set()
