"""The fake network itself (tests/lib/fake_network.py): if it lied, the update tests would prove nothing."""
from __future__ import annotations

import time

from app.update.model import FlowRule, XconSpec
from app.update.southbound import Southbound
from tests.lib.fake_network import BLACKHOLE, LOOP, Traffic

H1, H3 = "00:00:00:00:00:01", "00:00:00:00:00:03"
PKT = {"eth_src": H1, "eth_dst": H3, "eth_type": 0x0800}


def fwd(sw: str, out: int, prio: int = 100, **match) -> FlowRule:
    return FlowRule(sw, "forwarding", 0, prio, {"eth_dst": H3, **match}, out)


def test_initial_path_carries_both_directions(fig2):
    net, sc = fig2()
    assert isinstance(net, Southbound)
    hops = net.trace(*sc.forward[:2])
    assert [h[0] for h in hops] == ["A", "X", "Y", "B", "Y", "Z", "C", "h3"]
    assert net.delivered_to(*sc.reverse[:2]) == "h1"
    assert net.port_up(("A", 3)) and net.port_up(("C", 1)) and not net.port_up(("A", 4))


def test_priority_match_and_output_for(make_net):
    net = make_net()
    net.preload(rules=[fwd("A", 3), FlowRule("A", "reservation", 1, 30000, {"in_port": 1, "eth_dst": H3}, 4)])
    assert net.output_for("A", {**PKT, "in_port": 1}) == 4  # higher priority wins
    assert net.output_for("A", {**PKT, "in_port": 2}) == 3  # in_port does not match: the low rule
    assert net.output_for("A", {"eth_dst": H1, "in_port": 1}) is None


def test_dark_port_and_missing_rule_are_black_holes_and_loops_are_found(make_net):
    net = make_net()
    net.preload(rules=[fwd("A", 4)])
    assert net.trace("h1", PKT) == BLACKHOLE  # A:4 is dark: no circuit
    net2 = make_net()
    net2.preload(xcons=[XconSpec("X", 4, 5), XconSpec("Z", 5, 4)], rules=[fwd("A", 4), fwd("C", 2)])
    assert net2.trace("h1", PKT) == LOOP  # A -> C -> A over the lit circuit
    net3 = make_net()
    net3.preload(xcons=[XconSpec("X", 4, 5), XconSpec("Z", 5, 4)], rules=[fwd("A", 4)])
    assert net3.trace("h1", PKT) == BLACKHOLE  # C has no rule


def test_circuit_ports_come_up_only_with_the_last_xcon_and_go_down_with_any(make_net):
    net = make_net(xcon_delay_s=0.01)
    t0 = time.time()
    assert net.install_xcon(XconSpec("X", 4, 5)).ok
    assert time.time() - t0 >= 0.01  # the barrier answers after the provisioning delay
    assert not net.port_up(("A", 4))
    assert net.install_xcon(XconSpec("Z", 5, 4)).ok
    assert net.port_up(("A", 4)) and net.port_up(("C", 2))
    assert net.wait_link(("A", 4), ("C", 2), 0.5).ok
    assert net.remove_xcon(XconSpec("X", 4, 5)).ok
    assert not net.port_up(("A", 4)) and not net.port_up(("C", 2))
    assert not net.wait_link(("A", 4), ("C", 2), 0.02).ok


def test_ots_refuses_overlaps_and_strict_removal_spares_other_xcons(make_net):
    net = make_net(xcon_delay_s=0.0)
    net.preload(xcons=[XconSpec("X", 1, 2)])
    out = net.install_xcon(XconSpec("X", 1, 3))
    assert not out.ok and not out.unknown and "OVERLAP" in out.error
    assert net.remove_xcon(XconSpec("X", 1, 3)).ok  # nothing there: no error, nothing removed
    assert net.xcons("X") == {XconSpec("X", 1, 2)}
    assert net.install_xcon(XconSpec("X", 1, 2)).ok  # identical add: a no-op


def test_counters_count_sends_survive_overwrites_and_freeze(make_net):
    net = make_net()
    net.preload(rules=[fwd("A", 1)])  # A: h3 traffic back out of... port 1 is h1: wrong host, still delivered
    for _ in range(3):
        net.send(("A", 2), PKT)
    r = fwd("A", 1)
    assert net.flow_packets(r) == 3
    assert net.install_flow(fwd("A", 2)).ok  # overwrite of the same entry keeps its counter
    assert net.flow_packets(r) == 3
    net.freeze_counters("A")
    net.send(("A", 1), PKT)
    assert net.flow_packets(r) == 3
    assert net.remove_flow(r).ok and net.flow_packets(r) is None


def test_strict_flow_removal_needs_the_cookie(make_net):
    net = make_net()
    mine = FlowRule("A", "reservation", 7, 30000, {"eth_dst": H3}, 3)
    theirs = FlowRule("A", "reservation", 8, 30000, {"eth_dst": H3}, 3)
    net.preload(rules=[mine])
    assert net.remove_flow(theirs).ok and net.flows("A") == [mine]


def test_barrier_drop_applies_but_times_out_and_refusal_applies_nothing(make_net):
    net = make_net(xcon_delay_s=0.0, barrier_timeout_s=0.05)
    net.drop_barriers("Z")
    out = net.install_xcon(XconSpec("Z", 5, 4))
    assert not out.ok and out.unknown and "BARRIER_REPLY" in out.error
    assert net.xcons("Z") == {XconSpec("Z", 4, 5)}
    net.refuse_xcon("X", error="OFPBAC_BAD_OUT_PORT")
    out = net.install_xcon(XconSpec("X", 4, 5))
    assert not out.ok and not out.unknown and net.xcons("X") == set()


def test_without_barrier_messages_land_by_latency(make_net):
    net = make_net()
    net.set_latency("A", 0.03)
    net.set_latency("C", 0.0)
    assert net.install_flow(fwd("A", 3), barrier=False).ok
    assert net.install_flow(fwd("C", 3), barrier=False).ok
    time.sleep(0.06)
    applied = sorted((m.applied_at, m.node) for m in net.messages)
    assert [n for _, n in applied] == ["C", "A"]


def test_dataplane_lag_answers_before_the_rule_is_live(make_net):
    net = make_net()
    net.set_dataplane_lag("A", 0.03)
    assert net.install_flow(fwd("A", 3)).ok
    assert net.output_for("A", {**PKT, "in_port": 1}) is None  # the barrier came back; the datapath lags
    time.sleep(0.05)
    assert net.output_for("A", {**PKT, "in_port": 1}) == 3


def test_ports_wait_for_stability_and_flaps_reset_it(make_net):
    net = make_net()
    net.preload(xcons=[XconSpec("X", 4, 5), XconSpec("Z", 5, 4)])
    assert net.wait_ports_up([("A", 4), ("C", 2)], 0.01, 0.1).ok
    # A:4 after each toggle, and when (on a busy machine a fixed sleep may miss the down, and the
    # toggles may come late: the wait is judged against when they came)
    states: list[tuple[float, bool]] = []
    net.observe(lambda n, ch: states.append((ch.t, n.port_up(("A", 4)))) if "flap" in ch.what else None)
    net.flap(("A", 4), times=4, period_s=0.01)
    deadline = time.time() + 5.0
    while len(states) < 4 and time.time() < deadline:  # every toggle has happened
        time.sleep(0.001)
    assert [up for _t, up in states] == [False, True, False, True]
    assert net.wait_ports_up([("A", 4)], 0.03, 5.0).ok
    assert time.time() - states[-1][0] >= 0.03 - 0.005  # up for 30 ms since the last toggle
    net.break_port(("C", 2))
    out = net.wait_ports_up([("A", 4), ("C", 2)], 0.01, 0.05)
    assert not out.ok and "down: C:2" in out.error


def test_traffic_counts_fates(fig2):
    net, sc = fig2()
    with Traffic(net, [sc.forward, sc.reverse], interval_s=0.001) as tr:
        time.sleep(0.03)
    assert tr.sent > 0 and tr.delivered == tr.sent and tr.lost == 0
    assert net.flow_packets(sc.old_rules[0]) > 0


def test_observers_see_every_change(make_net):
    net = make_net(xcon_delay_s=0.0)
    seen = []
    net.observe(lambda n, c: seen.append((c.node, c.what, c.ports)))
    net.install_xcon(XconSpec("X", 4, 5))
    net.install_xcon(XconSpec("Z", 5, 4))
    assert seen[0][:2] == ("X", "xcon X:4<->5 added") and seen[1][2] == [(("A", 4), True), (("C", 2), True)]
