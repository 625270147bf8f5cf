"""Loss of light decisions (:mod:`ots_virtual.light`), pure."""
from __future__ import annotations

from ots_virtual.light import PortSense, adopt, command, lost, next_los, observe

PAIR = [(1, 3), (3, 1)]  # one bidirectional circuit 1<->3


def lit_and_seen() -> PortSense:
    return observe(command(PortSense(), True), admin_up=True, link_up=True)


def test_a_lit_port_that_had_light_and_loses_carrier_is_a_fault():
    s = lit_and_seen()
    assert s.seen and not s.held
    assert lost(s, admin_up=True, link_up=False)
    assert not lost(s, admin_up=True, link_up=True)


def test_a_lit_port_that_never_had_light_is_no_fault():
    # a scan probe towards a dark fibre, or a next hop still being provisioned
    s = observe(command(PortSense(), True), admin_up=True, link_up=False)
    assert not s.seen and not lost(s, admin_up=True, link_up=False)


def test_stale_reports_after_lighting_are_no_fault():
    """OVS still reports the admin-down the agent itself asked for before lighting the port again."""
    s = command(lit_and_seen(), False)  # darkened (a batch or LOS)
    s = observe(s, admin_up=False, link_up=False)
    assert not s.held
    s = command(s, True)  # lit again: what OVS reported before is forgotten
    assert not s.seen and not lost(s, admin_up=False, link_up=False)
    s = observe(s, admin_up=False, link_up=False)  # the stale report
    assert not s.held and not lost(s, admin_up=False, link_up=False)


def test_someone_elses_admin_down_is_held_until_the_port_comes_up():
    s = observe(lit_and_seen(), admin_up=False, link_up=False)  # ip link set down
    assert s.held and lost(s, admin_up=False, link_up=False)
    s = command(command(s, False), True)  # a batch re-uses the port: still held
    assert s.held and lost(s, admin_up=False, link_up=False)
    s = observe(s, admin_up=True, link_up=True)  # ip link set up
    assert not s.held and s.seen and not lost(s, admin_up=True, link_up=True)


def test_a_fault_darkens_its_partner_until_it_clears():
    assert next_los(PAIR, set(), {3}, set()) == {1}
    assert next_los(PAIR, set(), {3}, {1}) == {1}  # stable
    assert next_los(PAIR, set(), set(), {1}) == set()  # repaired


def test_a_los_port_is_never_a_source():
    # port 1 is down because LOS darkened it: it must not darken port 3 back
    assert next_los(PAIR, set(), {1, 3}, {1}) == {1}
    assert next_los(PAIR, set(), {1}, {1}) == set()


def test_both_ends_faulted_darken_neither_and_one_repair_darkens_it():
    assert next_los(PAIR, set(), {1, 3}, set()) == set()
    assert next_los(PAIR, set(), {3}, set()) == {1}


def test_provisioning_ports_are_neither_sources_nor_darkened():
    assert next_los(PAIR, {3}, {3}, set()) == set()
    assert next_los(PAIR, {1}, {3}, set()) == set()


def test_deleting_the_xcon_ends_the_los():
    assert next_los([], set(), {3}, {1}) == set()
    assert next_los([(2, 4), (4, 2)], set(), {3}, {1}) == set()


def test_a_port_in_two_xcons_darkens_both_partners():
    assert next_los([(1, 2), (2, 3)], set(), {2}, set()) == {1, 3}


def test_only_the_partners_of_the_fault_go_dark():
    xcons = PAIR + [(2, 4), (4, 2)]
    assert next_los(xcons, set(), {3}, set()) == {1}


def test_adopt_lit_circuit():
    senses = adopt(PAIR, {1: (True, True), 3: (True, True)})
    assert senses == {1: PortSense(True, True), 3: PortSense(True, True)}
    assert not any(lost(s, True, True) for s in senses.values())


def test_adopt_picks_up_a_los_in_progress():
    # X:3 lost carrier, the old agent darkened X:1
    ovs = {1: (False, False), 3: (True, False)}
    senses = adopt(PAIR, ovs)
    assert senses[1] == PortSense(lit=False) and senses[3].seen
    faulted = {p for p, s in senses.items() if lost(s, *ovs[p])}
    assert faulted == {3} and next_los(PAIR, set(), faulted, set()) == {1}


def test_adopt_keeps_an_operator_cut_down():
    # X:3 taken down by ip link set down, X:1 still lit (the old agent died before darkening it)
    ovs = {1: (True, True), 3: (False, False)}
    senses = adopt(PAIR, ovs)
    assert senses[3].held
    faulted = {p for p, s in senses.items() if lost(s, *ovs[p])}
    assert next_los(PAIR, set(), faulted, set()) == {1}


def test_adopt_lights_a_circuit_that_is_dark_at_both_ends():
    ovs = {1: (False, False), 3: (False, False)}
    senses = adopt(PAIR, ovs)
    assert senses == {1: PortSense(lit=True), 3: PortSense(lit=True)}
    assert not any(lost(s, *ovs[p]) for p, s in senses.items())


def test_adopt_skips_ports_ovs_does_not_report():
    assert adopt(PAIR, {1: (True, True)}) == {1: PortSense(True, True)}
