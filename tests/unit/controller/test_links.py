"""LinkTable: refresh, replacement on re-patching, expiry, port/switch loss."""
from app.controller.links import LinkTable
from app.controller.model import PacketLink, PortRef

AB = PacketLink(PortRef(1, 2), PortRef(2, 1))
BA = AB.reverse()


def test_new_then_refresh():
    t = LinkTable()
    assert t.seen(AB, 0.0) == (True, [])
    assert t.seen(AB, 1.0) == (False, [])
    assert t.last_seen(AB) == 1.0
    assert t.links() == [AB]


def test_expiry_only_of_stale_links():
    t = LinkTable()
    t.seen(AB, 0.0)
    t.seen(BA, 4.0)
    assert t.expire(5.5, timeout=5.0) == [AB]
    assert t.links() == [BA]
    assert t.expire(9.0, timeout=5.0) == []


def test_repatched_port_replaces_old_link():
    t = LinkTable()
    t.seen(AB, 0.0)
    ac = PacketLink(PortRef(1, 2), PortRef(3, 1))  # same source port, new far end (circuit moved)
    is_new, replaced = t.seen(ac, 1.0)
    assert is_new and replaced == [AB]
    assert t.links() == [ac]


def test_port_and_switch_loss():
    t = LinkTable()
    t.seen(AB, 0.0)
    t.seen(BA, 0.0)
    cd = PacketLink(PortRef(3, 1), PortRef(4, 1))
    t.seen(cd, 0.0)
    assert t.drop_port(PortRef(2, 1)) == sorted([AB, BA])
    assert t.ports_in_links() == {PortRef(3, 1), PortRef(4, 1)}
    assert t.drop_switch(4) == [cd]
    assert t.links() == []


def test_a_link_replaced_at_both_ends_and_the_ports_follow_every_change():
    t = LinkTable()
    t.seen(AB, 0.0)
    cd = PacketLink(PortRef(3, 1), PortRef(4, 1))
    t.seen(cd, 0.0)
    assert t.ports_in_links() == {PortRef(1, 2), PortRef(2, 1), PortRef(3, 1), PortRef(4, 1)}
    t.seen(AB, 1.0)  # a refresh keeps the same set
    assert t.ports_in_links() == {PortRef(1, 2), PortRef(2, 1), PortRef(3, 1), PortRef(4, 1)}
    ad = PacketLink(PortRef(1, 2), PortRef(4, 1))  # from AB's source into cd's destination: both go
    assert t.seen(ad, 2.0) == (True, sorted([AB, cd]))
    assert t.links() == [ad] and t.ports_in_links() == {PortRef(1, 2), PortRef(4, 1)}
    assert t.seen(AB, 3.0) == (True, [ad])  # and back
    assert t.expire(9.0, timeout=5.0) == [AB] and t.ports_in_links() == frozenset()


def test_the_sorted_links_and_the_generation_follow_the_set_of_links_not_its_sightings():
    t = LinkTable()
    g0 = t.generation
    t.seen(BA, 0.0)
    t.seen(AB, 0.0)
    g1 = t.generation
    assert g1 > g0 and t.links() == sorted([AB, BA])
    t.links().clear()  # a caller's copy: the table's own list is not touched
    assert t.links() == sorted([AB, BA])
    t.seen(AB, 1.0)  # a refresh: the same links
    assert t.generation == g1
    t.expire(5.5, timeout=5.0)  # BA, not seen since 0.0
    assert t.generation > g1 and t.links() == [AB]
    t.seen(AB, 6.0)
    g2 = t.generation
    t.drop_port(PortRef(1, 2))
    assert t.generation > g2 and t.links() == [] and t.ports_in_links() == frozenset()


def test_a_probe_confirms_a_known_link_only_and_says_which_ports_since_when():
    t = LinkTable()
    assert t.confirm(AB, 1.0) is False and t.links() == []  # never a new link: LLDP decides what is cabled
    t.seen(AB, 0.0)
    t.seen(BA, 0.0)
    assert t.confirm(AB, 2.0) is True and t.last_seen(AB) == 2.0
    assert t.confirm(AB, 1.5) and t.last_seen(AB) == 2.0  # never back in time
    assert t.confirmed_since(1.0) == {AB.src} and t.confirmed_since(1.5) == set()
    assert t.expire(6.5, timeout=5.0) == [BA]  # the confirmation kept AB
    t.drop_port(AB.src)
    assert t.confirmed_since(0.0) == set()
