"""The make-before-break property on the Fig. 2 move (A-X-Y-B-Y-Z-C → A-X-Z-C), checked after every
single change the fake network applies; one-shot mode, with messages landing in their own order,
black-holes traffic in the same scenario (the paper's regular vs planned update)."""
from __future__ import annotations

import random
import time

import pytest

from app.update import planner
from app.update.executor import DONE, execute, threaded
from tests.lib.fake_network import BLACKHOLE, Traffic
from tests.unit.update.helpers import Watch, fig2_plan, norm_xcons

LATENCY = {"A": 0.001, "B": 0.008, "C": 0.003, "X": 0.002, "Y": 0.0, "Z": 0.005}  # per-node message latency


def slow_net(fig2, **kw):
    net, sc = fig2(xcon_delay_s=0.02, seed=3, **kw)
    for node, lat in LATENCY.items():
        net.set_latency(node, lat, jitter_s=0.002)
    return net, sc


def test_ordered_move_delivers_after_every_single_change(fig2):
    net, sc = slow_net(fig2)
    watch = Watch(net, [sc.forward, sc.reverse])
    with Traffic(net, [sc.forward, sc.reverse]) as tr:
        rec = execute(fig2_plan(sc), net, run_parallel=threaded)
    assert rec.state == DONE, rec.error
    # 2 XCON adds, 2 path rules, 2 ingress overwrites, 4 rule removals, 4 XCON removals
    assert len(watch.states) == 14
    assert watch.broken() == []
    assert tr.lost == tr.looped == tr.misdelivered == 0 and tr.delivered > 50
    assert [h[0] for h in net.trace(*sc.forward[:2])] == ["A", "X", "Z", "C", "h3"]
    assert [h[0] for h in net.trace(*sc.reverse[:2])] == ["C", "Z", "X", "A", "h1"]
    assert set(net.all_flows()) == {c.new for c in sc.ingress} | set(sc.new_rules)
    assert norm_xcons(net.all_xcons()) == norm_xcons(sc.new_xcons)
    assert not net.port_up(("A", 3)) and not net.port_up(("C", 1))  # the old circuit is dark


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_ordered_move_is_safe_whatever_the_latencies(fig2, seed):
    rng = random.Random(seed)
    net, sc = fig2(xcon_delay_s=rng.uniform(0.005, 0.03), seed=seed)
    for node in LATENCY:
        net.set_latency(node, rng.uniform(0.0, 0.01), jitter_s=rng.uniform(0.0, 0.005))
    watch = Watch(net, [sc.forward, sc.reverse])
    with Traffic(net, [sc.forward, sc.reverse]):
        rec = execute(fig2_plan(sc), net, run_parallel=threaded)
    assert rec.state == DONE, rec.error
    assert len(watch.states) == 14 and watch.broken() == []


def test_one_shot_with_reordered_messages_black_holes_traffic(fig2):
    net, sc = slow_net(fig2)
    watch = Watch(net, [sc.forward, sc.reverse])
    with Traffic(net, [sc.forward, sc.reverse]):
        rec = execute(planner.one_shot(fig2_plan(sc)), net, run_parallel=threaded)
    assert rec.state == DONE, rec.error  # it ends on the new path ...
    assert net.delivered_to(*sc.forward[:2]) == "h3"
    broken = watch.broken()  # ... but on the way traffic fell into black holes
    assert any(t == BLACKHOLE for _, _, t in broken), watch.states
    applied = [m.node for m in sorted(net.messages, key=lambda m: m.applied_at or 0.0)]
    sent = [m.node for m in net.messages]
    assert applied != sent  # the messages landed in an order of their own


def test_a_barrier_reply_alone_does_not_make_the_new_path_live(fig2):
    """C answers the barrier 30 ms before its datapath uses the rule: without settling, the ingress
    swap at A lands first and traffic falls into the gap; settling past the lag closes it."""
    def run(settle_ms):
        net, sc = fig2(xcon_delay_s=0.01)
        net.set_dataplane_lag("C", 0.03)
        watch = Watch(net, [sc.forward, sc.reverse])
        rec = execute(fig2_plan(sc, settle_ms=settle_ms, verify=False, drain=False), net, run_parallel=threaded)
        assert rec.state == DONE, rec.error
        return watch.broken()

    gaps = run(0)
    assert gaps and all(t == BLACKHOLE for _, _, t in gaps)
    assert gaps[0][:2] == ("A: flow A/reservation#7 p30000 [in_port=1,eth_dst=00:00:00:00:00:03] -> 4 added", "h3")
    assert run(40) == []


def test_release_leaves_empty_tables(fig2):
    net, sc = fig2(xcon_delay_s=0.01)
    plan = planner.release(sc.old_xcons, sc.old_rules, sc.old_ingress, quiet_ms=30)
    watch = Watch(net, [sc.forward, sc.reverse])
    with Traffic(net, [sc.forward, sc.reverse]) as tr:
        time.sleep(0.01)
        rec = execute(plan, net, run_parallel=threaded)
    assert rec.state == DONE, rec.error
    assert net.all_flows() == [] and net.all_xcons() == set()
    assert not net.port_up(("A", 3)) and not net.port_up(("C", 1))
    # the ingress rules go first: from then on packets stop at the ingress switch, and nothing loops
    first = watch.states[0][0]
    assert first.startswith(("A: flow A/reservation#7 p30000 [in_port=1", "C: flow C/reservation#7 p30000 [in_port=3"))
    assert all(t == BLACKHOLE for _, _, t in watch.broken())
    assert tr.lost > 0 and tr.looped == 0


def test_provision_then_release_on_an_empty_network(make_net):
    from tests.lib.fake_network import fig2_move
    sc = fig2_move()
    net = make_net(xcon_delay_s=0.01)
    ingress = [c.new for c in sc.ingress]
    plan = planner.provision(sc.new_xcons, sc.new_ports, sc.new_links, sc.new_rules, ingress, stable_ms=10)
    with Traffic(net, [sc.forward, sc.reverse]) as tr:
        rec = execute(plan, net, run_parallel=threaded)
        assert rec.state == DONE, rec.error
        assert net.delivered_to(*sc.forward[:2]) == "h3" and net.delivered_to(*sc.reverse[:2]) == "h1"
        delivered = tr.delivered
        rec = execute(planner.release(sc.new_xcons, sc.new_rules, ingress, quiet_ms=20), net,
                      run_parallel=threaded)
    assert rec.state == DONE, rec.error
    assert delivered > 0 and tr.looped == 0
    assert net.all_flows() == [] and net.all_xcons() == set()
