"""Elastic reservations: one unit at the start, a unit more while the demand presses on the meter, never
beyond the grant, a unit less after calm polls. The policy alone, then the reservation manager over the
fake Fig. 2 network (meters, byte counters) with an in-memory store."""
from __future__ import annotations

import pytest

from app.te.elastic import GROW, HOLD, SHRINK, ElasticState, kbps, rate_mbps
from tests.unit.controller.test_reservations import FakeStore, Order, manager, net, stored_path  # noqa: F401
from topology import rule_plan


def test_grows_a_unit_at_a_time_never_beyond_the_grant_and_shrinks_when_calm():
    s = ElasticState(grant_mbps=5.0, unit_mbps=1.25, min_hold_s=2.0)
    assert s.provisioned_mbps == 1.25
    seen = []
    t = 0.0
    for _ in range(6):  # demand 8 Mbit/s, more than the grant: +1 unit each poll, then "at the grant"
        t += 1.0
        d = s.observe(8.0, t)
        seen.append((d.action, d.after_mbps))
        s.applied(d, t)
    assert seen == [(GROW, 2.5), (GROW, 3.75), (GROW, 5.0), (HOLD, 5.0), (HOLD, 5.0), (HOLD, 5.0)]
    assert "at the grant" in s.observe(8.0, t + 1).reason and s.provisioned_mbps == 5.0
    # a rate between shrink_at x (one unit less) and grow_at x provisioned: hold (hysteresis)
    d = s.observe(3.0, t + 2)
    assert d.action == HOLD and "fits" in d.reason
    # calm: 0.5 Mbit/s < 0.5 x (one unit less) for 3 polls -> one unit less, and again, down to one unit
    acts = []
    for k in range(3, 12):
        d = s.observe(0.5, t + k)
        acts.append(d.action)
        s.applied(d, t + k)
    assert acts[:3] == [HOLD, HOLD, SHRINK] and s.provisioned_mbps == 1.25
    assert acts.count(SHRINK) == 3  # 5 -> 3.75 -> 2.5 -> 1.25, each after 3 calm polls
    d = s.observe(0.0, t + 20)
    assert d.action == HOLD and d.reason == "at one unit"
    # 1 Mbit/s on 2.5 would be 0.8 of one unit less (1.25): too tight to shrink
    s2 = ElasticState(grant_mbps=5.0, unit_mbps=1.25, provisioned_mbps=2.5, calm_intervals=1, min_hold_s=0)
    assert s2.observe(1.0, 1.0).action == HOLD


def test_calm_but_held_and_bad_settings():
    s = ElasticState(grant_mbps=10.0, unit_mbps=2.0, provisioned_mbps=6.0, min_hold_s=10.0, calm_intervals=1)
    s.applied(s.observe(9.0, 0.0), 0.0)  # grow to 8 at t=0
    d = s.observe(0.5, 1.0)
    assert d.action == HOLD and "held" in d.reason
    assert s.observe(0.5, 11.0).action == SHRINK
    with pytest.raises(ValueError):
        ElasticState(grant_mbps=5.0, unit_mbps=1.0, grow_at=0.5, shrink_at=0.6)
    with pytest.raises(ValueError):
        ElasticState(grant_mbps=0.0, unit_mbps=1.0)
    assert ElasticState(grant_mbps=0.5, unit_mbps=1.25).provisioned_mbps == 0.5  # a grant below one unit
    assert rate_mbps(None, 1.0, 100) is None and rate_mbps((0.0, 0), 2.0, 250_000) == 1.0
    assert kbps(1.25) == 1250


class ElasticStore(FakeStore):
    provisioned: dict

    def __init__(self) -> None:
        super().__init__()
        self.provisioned = {}

    def set_provisioned(self, res_id, mbps, now):
        self.provisioned.setdefault(res_id, []).append(mbps)
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def send_mbps(network, mbps: float, seconds: float = 1.0) -> None:
    """``mbps`` of h1 -> h3 traffic for ``seconds`` (1250-byte packets through A's ingress rule)."""
    n = int(round(mbps * 1e6 * seconds / 8 / 1250))
    for _ in range(n):
        network.send("h1", {"eth_type": 0x0800, "size": 1250})


def test_an_elastic_reservation_is_metered_grows_with_its_counters_and_shrinks(net):  # noqa: F811
    store, clock = ElasticStore(), Clock()
    m, events = manager(net, store, clock=clock, elastic={"min_hold_s": 2.0})
    order = stored_path(Order(31, bandwidth=5.0, mode="elastic"))
    out = m.provision(order)
    assert out.ok, out.reason
    meter = rule_plan.reservation_meter(31)
    c = m.active[31]
    assert all(r.meter == meter for r in c.ingress) and all(r.meter is None for r in c.transit)
    assert net.meters["A"][meter] == net.meters["C"][meter] == 1250  # one unit: ODU0 at 1 Mbit/s per unit
    assert store.provisioned[31] == [1.25]
    # the stored ingress rules keep their meter (re-read after a restart)
    stored = {r.switch: r for r in store.installed[31].rules if r.actions[0].get("meter") == meter}
    assert set(stored) == {"A", "C"}
    m.elastic_tick()  # the first reading: no rate yet
    steps = []
    for _ in range(6):  # 4.5 Mbit/s offered: grows a unit per poll up to the grant, then holds
        clock.t += 1.0
        send_mbps(net, 4.5)
        (res, d), = m.elastic_tick()
        steps.append((d.action, d.after_mbps))
    assert steps[:3] == [(GROW, 2.5), (GROW, 3.75), (GROW, 5.0)]
    assert all(a == HOLD and p == 5.0 for a, p in steps[3:])
    assert net.meters["A"][meter] == 5000 and max(store.provisioned[31]) == 5.0  # never beyond the grant
    # the demand goes away: a unit less after 3 calm polls (hold 2 s), down to one unit
    acts = []
    for _ in range(12):
        clock.t += 1.0
        send_mbps(net, 0.2)
        (_res, d), = m.elastic_tick()
        acts.append(d.action)
    assert acts.count(SHRINK) == 3 and m.elastic[31].provisioned_mbps == 1.25
    assert net.meters["A"][meter] == 1250 and store.provisioned[31][-1] == 1.25
    assert [k for k, _d in events].count("reservation_elastic") == 6
    # release: rules, XCONs and then the meters go
    rel = m.release_circuit(31, c)
    assert rel.ok and not net.all_flows() and meter not in net.meters.get("A", {}) and 31 not in m.elastic


def test_a_refused_meter_fails_the_reservation_and_leaves_nothing(net):  # noqa: F811
    store = ElasticStore()
    m, _ = manager(net, store)
    net.refuse_flow("A", "OFPMMFC_UNKNOWN_METER")
    out = m.provision(stored_path(Order(32, bandwidth=3.0, mode="elastic")))
    assert not out.ok and store.states[32] == "FAILED"
    assert not net.all_flows() and not net.all_xcons() and not any(net.meters.values())
