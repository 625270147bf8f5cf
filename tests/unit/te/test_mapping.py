"""Load-aware mapping (seed 004): weights, bounded steps, youngest-first moves, rules that still deliver."""
from __future__ import annotations

import math

import pytest

from app.te.mapping import (
    KEEP,
    PLACE,
    REMAP,
    REMOVE,
    RTT,
    STATIC,
    THROUGHPUT,
    MappedFlow,
    MappingError,
    RateWindow,
    SiteMapper,
    flow_metrics,
    flow_rules,
    path_rates,
    path_rtt_ms,
    site_paths,
)
from app.update.executor import execute, sequential
from mininet_labs.multihoming import multihoming_spec
from tests.lib.fake_network import FakeNetwork
from topology import rule_plan
from topology.flow import FiveTuple
from topology.spec import spec_to_graph

SPEC = multihoming_spec(senders=2)


def _paths():
    return site_paths(spec_to_graph(SPEC), "A", "Z")


def _flow(i: int, src_host: int = 0) -> MappedFlow:
    s = SPEC.hosts[src_host]  # s1, s2 on A
    d = next(h for h in SPEC.hosts if h.name == f"d{src_host + 1}")
    return MappedFlow(FiveTuple(s.ip, d.ip, 6, 40000 + i, 5001), s.port, d.port)


def _placed(policy: str, n: int, t0: float = 0.0) -> SiteMapper:
    m = SiteMapper(_paths(), policy)
    for i in range(n):
        f = _flow(i, i % 2)
        d = m.add_flow(f, t0 + i)
        assert d.kind == PLACE
        m.done(d, True, f)
    return m


# ---------------------------------------------------------------------- paths and rules
def test_site_paths_are_the_two_uplinks_with_their_ports():
    p1, p2 = _paths()
    assert (p1.a, p1.a_out, p1.z, p1.z_in) == ("A", 5, "Z", 5)
    assert [(h.switch, h.in_port, h.out_port) for h in p1.transit] == [("P1", 1, 2)]
    assert (p2.a_out, p2.z_in) == (6, 6) and p2.transit[0].switch == "P2"
    assert p1.links == ("packet:A:5-P1:1", "packet:P1:2-Z:5")


def test_one_path_is_refused():
    g = spec_to_graph(SPEC)
    for key in [k for k in list(g.g.edges(keys=True)) if "P2" in k[2]]:
        g.g.remove_edge(*key)
    with pytest.raises(MappingError, match="1 link-disjoint path"):
        site_paths(g, "A", "Z")
    with pytest.raises(MappingError, match="policy 'ecmp'"):
        SiteMapper(_paths(), "ecmp")


def test_flow_rules_are_in_the_mapping_band_both_ways():
    rules = flow_rules(_flow(1), _paths()[0], ident=3)
    assert {r.band for r in rules.all} == {"mapping"}
    assert all(rule_plan.MAPPING.owns(r.cookie) for r in rules.all)
    fwd_in, rev_in = rules.ingress
    assert (fwd_in.switch, dict(fwd_in.match)["in_port"], fwd_in.out_port) == ("A", 1, 5)
    assert (rev_in.switch, dict(rev_in.match)["ipv4_src"], rev_in.out_port) == ("Z", SPEC.hosts[2].ip, 5)
    assert len(rules.path) == 4  # egress at Z and A, P1 both ways
    with pytest.raises(MappingError, match="only TCP and UDP"):
        MappedFlow(FiveTuple("10.0.0.1", "10.0.0.11", 1), 1, 1)


# ---------------------------------------------------------------------- weights
def test_static_stays_equal_whatever_it_measures():
    m = _placed(STATIC, 10)
    assert m.counts() == [5, 5]
    for _ in range(20):
        m.observe({0: 1.0, 1: 100.0})
    d = m.step(100.0)
    assert d.kind == KEEP and d.weights == (0.5, 0.5) and d.plan is None


def test_throughput_moves_toward_the_faster_path_in_bounded_steps():
    m = _placed(THROUGHPUT, 10)
    # 5 flows on each: path1 delivers 5 Mbit/s (1 per flow), path2 15 (3 per flow) -> estimate (0.25, 0.75)
    for _ in range(5):
        m.observe({0: 5.0, 1: 15.0})
    d = m.step(10.0)
    assert d.kind == REMAP
    assert d.estimate == pytest.approx((0.25, 0.75))
    assert d.weights == pytest.approx((0.4, 0.6))  # |dw| <= 0.1
    assert [(src, dst) for _f, src, dst in d.moves] == [(0, 1)]  # floor(0.4*10) = 4 on path1
    # youngest first: flows were placed at t = 0..9; path1 holds the even ones; the youngest is t=8
    assert d.moves[0][0] == str(_flow(8, 0).five)
    m.done(d, True)
    assert m.counts() == [4, 6] and m.weights == pytest.approx((0.4, 0.6))


def test_weights_never_fall_below_the_floor():
    m = _placed(THROUGHPUT, 10)
    for k in range(8):
        for _ in range(5):
            m.observe({0: 0.01, 1: 50.0})
        d = m.step(20.0 + k)
        m.done(d, True)
        assert min(m.weights) >= 0.1 - 1e-9
        assert all(abs(a - b) <= 0.1 + 1e-9 for a, b in zip(d.weights_before, d.weights, strict=True))
    assert m.weights == pytest.approx((0.1, 0.9)) and m.counts() == [1, 9]


def test_rtt_policy_favours_the_path_without_queueing():
    m = _placed(RTT, 10)
    for i in range(200):
        m.observe({0: 40 + 60 * abs(math.sin(math.pi * i / 50)), 1: 40 + (i % 2) * 0.5})
    d = m.step(50.0)
    assert d.kind == REMAP and d.estimate[1] > 0.7 > d.estimate[0]
    assert d.weights == pytest.approx((0.4, 0.6))


def test_waits_for_samples_before_moving_anything():
    m = _placed(THROUGHPUT, 4)
    m.observe({0: 1.0, 1: 9.0})
    d = m.step(5.0)
    assert d.kind == KEEP and "waiting for 3 samples" in d.reason


def test_new_flows_fill_the_path_furthest_below_its_share():
    m = _placed(THROUGHPUT, 10)
    m.weights = (0.3, 0.7)
    d = m.add_flow(_flow(50), 60.0)
    # N becomes 11: path1 0.3*11 - 5 = -1.7, path2 0.7*11 - 5 = 2.7 -> path2
    assert d.moves[0][2] == 1


def test_a_failed_plan_changes_nothing():
    m = _placed(THROUGHPUT, 10)
    for _ in range(5):
        m.observe({0: 5.0, 1: 15.0})
    d = m.step(10.0)
    m.done(d, False)
    assert m.weights == (0.5, 0.5) and m.counts() == [5, 5]


# ---------------------------------------------------------------------- measurements and metrics
def test_path_rates_from_rule_counters():
    prev = {"r1": 1_000_000, "r2": 0}
    rates, nxt = path_rates(prev, {"r1": (0, 2_000_000), "r2": (1, 500_000), "r3": (1, 250_000)}, dt=2.0)
    assert rates == pytest.approx({0: 4.0, 1: 3.0})
    assert nxt == {"r1": 2_000_000, "r2": 500_000, "r3": 250_000}
    rates, _ = path_rates({"r1": 9_000_000}, {"r1": (0, 1_000_000)}, dt=1.0)  # replaced rule: from 0
    assert rates == pytest.approx({0: 8.0})
    with pytest.raises(MappingError):
        path_rates({}, {}, 0)


def test_rate_window_spans_whole_counter_updates():
    """OVS copies datapath counters into its rules every 0.5 s: reads every 0.25 s see the bytes in
    steps. Over a 1-s span the rate is the true 10 Mbit/s at every read; two consecutive reads would
    alternate 0 and 20."""
    w = RateWindow(1.0)
    per_update = 625_000  # 10 Mbit/s for 0.5 s
    got = []
    for k in range(12):
        t = 0.25 * k
        updates = int(t / 0.5 + 1e-9)  # counter steps at t = 0.5, 1.0, ... (the revalidator)
        got.append(w.add(t, {"r1": (1, updates * per_update)}))
    assert got[0] == {}  # no earlier read
    assert [g[1] for g in got[1:4]] == pytest.approx([0.0, 10.0, 20 / 3])  # the span is still short
    assert all(g[1] == pytest.approx(10.0) for g in got[4:])
    naive = [path_rates({"r1": a}, {"r1": (1, b)}, 0.25)[0][1]
             for a, b in zip([int(0.25 * k / 0.5 + 1e-9) * per_update for k in range(11)],
                             [int(0.25 * k / 0.5 + 1e-9) * per_update for k in range(1, 12)], strict=True)]
    assert set(round(x) for x in naive) == {0, 20}
    # a flow placed during the span counts from 0; one gone loses its bytes; time must move forward
    w = RateWindow(1.0)
    w.add(0.0, {"a": (0, 1_000_000)})
    assert w.add(1.0, {"a": (0, 2_250_000), "b": (1, 500_000)}) == pytest.approx({0: 10.0, 1: 4.0})
    with pytest.raises(MappingError, match="forward"):
        w.add(1.0, {})
    with pytest.raises(MappingError):
        RateWindow(0)


def test_path_rtt_adds_its_links():
    p1 = _paths()[0]
    assert path_rtt_ms(p1, {"packet:A:5-P1:1": 1.5, "packet:P1:2-Z:5": 30.0}) == pytest.approx(31.5)
    assert path_rtt_ms(p1, {"packet:A:5-P1:1": 1.5}) is None


def test_flow_metrics_hand_computed():
    m = flow_metrics([2.0, 4.0, 6.0])
    assert m["avgt_mbps"] == pytest.approx(4.0)
    assert m["std_mbps"] == pytest.approx(math.sqrt(8 / 3))
    assert m["mmr"] == pytest.approx(1 / 3)
    assert m["jain"] == pytest.approx(144 / (3 * 56))
    assert flow_metrics([3.0, 3.0])["jain"] == pytest.approx(1.0)
    with pytest.raises(MappingError):
        flow_metrics([])


# ---------------------------------------------------------------------- the plans on a simulated network
def _packets(f: MappedFlow) -> tuple[dict, dict]:
    t = f.five
    fwd = {"eth_type": 0x0800, "ipv4_src": t.src, "ipv4_dst": t.dst, "ip_proto": 6, "tcp_src": t.sport,
           "tcp_dst": t.dport}
    rev = {"eth_type": 0x0800, "ipv4_src": t.dst, "ipv4_dst": t.src, "ip_proto": 6, "tcp_src": t.dport,
           "tcp_dst": t.sport}
    return fwd, rev


def _host(ip: str) -> str:
    return next(h.name for h in SPEC.hosts if h.ip == ip)


def test_every_flow_still_reaches_its_destination_after_remapping():
    net = FakeNetwork.from_spec(SPEC)
    try:
        m = SiteMapper(_paths(), THROUGHPUT, drain=False)
        flows = [_flow(i, i % 2) for i in range(10)]
        for i, f in enumerate(flows):
            d = m.add_flow(f, float(i))
            rec = execute(d.plan, net, run_parallel=sequential)
            assert rec.state == "done", rec.error
            m.done(d, True, f)
        assert sorted(net.all_flows(), key=lambda r: r.key()) == sorted(m.rules(), key=lambda r: r.key())
        moved = set()
        for k in range(6):  # path2 is three times as fast per flow, every round
            for _ in range(4):
                m.observe({0: 1.0 * m.counts()[0], 1: 3.0 * m.counts()[1]})
            d = m.step(100.0 + k)
            if d.plan is not None:
                rec = execute(d.plan, net, run_parallel=sequential)
                assert rec.state == "done", rec.error
                moved |= {name for name, _s, _d in d.moves}
            m.done(d, True)
            # the switches hold exactly the mapper's rules, and every flow is delivered both ways
            assert {r.key() for r in net.all_flows()} == {r.key() for r in m.rules()}
            for f in flows:
                fwd, rev = _packets(f)
                hops = net.trace(_host(f.five.src), fwd)
                assert hops[-1][0] == _host(f.five.dst)
                assert hops[1][0] == ("P1", "P2")[m.path_of(f.five)]  # on the path the mapper says
                assert net.delivered_to(_host(f.five.dst), rev) == _host(f.five.src)
        assert moved and m.counts()[1] > m.counts()[0]
        d = m.remove_flow(flows[0].five, 200.0)
        assert d.kind == REMOVE and execute(d.plan, net, run_parallel=sequential).state == "done"
        m.done(d, True)
        assert len(net.all_flows()) == len(m.rules()) == 9 * 6
    finally:
        net.close()



#: per-path Mbit/s, one sample a second, as the multihoming lab measured them (throughput policy, seed 0,
#: 10 Mbit/s paths, 8 flows 4/4): the background starts on path 1 at the 7th; path 2 dips when flows move
LAB_SAMPLES = [(5.6, 3.7), (9.5, 9.4), (9.4, 8.9), (9.8, 9.7), (9.7, 9.3), (9.3, 9.8), (5.5, 2.1), (3.7, 3.2),
               (3.5, 2.5), (3.6, 5.7), (3.6, 8.8), (3.3, 9.3), (3.4, 9.4), (3.6, 9.2), (3.6, 4.4), (3.4, 9.2),
               (4.0, 7.9), (3.5, 2.5), (3.3, 3.5), (3.2, 7.3), (3.2, 9.5), (3.0, 9.6)]


def test_after_a_move_the_mapper_settles_on_fresh_samples():
    """Replayed, those samples made the mapper flip a flow between the paths at every sample (4/4 -> 5/3
    -> 4/4 ...: each estimate divided an average measured with the old flow set by the new count, and
    each move caused the next dip). Now, after a move, the sample spanning it is dropped and the weights
    wait for 3 fresh samples per path: a flow never moves back within 4 samples of a move."""
    m = _placed(THROUGHPUT, 8)
    moved_at: list[int] = []
    for k, (a, b) in enumerate(LAB_SAMPLES):
        m.observe({0: a, 1: b})
        d = m.step(100.0 + k)
        if d.moves:
            moved_at.append(k)
            assert all(k - j >= 4 for j in moved_at[:-1]), moved_at
        elif k and moved_at and k - moved_at[-1] < 4:
            assert d.kind == KEEP and "waiting for 3 samples" in d.reason
        m.done(d, True)
    assert len(moved_at) <= 3, moved_at
    assert m.counts()[0] <= 4  # path 1, loaded from the 7th sample on, does not end with more flows
