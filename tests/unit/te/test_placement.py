"""app/te/placement.py: flows from monitor/reservations, PER + PATHPIN state, the update plan."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.te.placement import PlacementPolicy, flows_from_monitor, flows_from_reservations, placement_plan
from app.update.plan import CircuitUpStep, FlowStep, XconStep
from pce.otter.graph_flows import ClassRules
from tests.lib.otter_helpers import short_plus_circuit, two_links
from topology.flow import FiveTuple


@dataclass
class Rate:
    key: FiveTuple
    mbps: float
    vlan: int | None = None


SSH = FiveTuple("10.0.0.1", "10.0.0.2", 6, 40000, 22)
BULK = FiveTuple("10.0.0.1", "10.0.0.2", 6, 40001, 5001)


def test_monitor_flows_are_classified_and_unknown_hosts_skipped() -> None:
    g = short_plus_circuit()
    flows, skipped = flows_from_monitor(g, [Rate(SSH, 4.0), Rate(BULK, 8.0), Rate(FiveTuple("9.9.9.9", "10.0.0.2", 17), 1.0)],
                                        ClassRules())
    assert [(f.id, f.cls, f.src, f.src_port, f.dst, f.dst_port) for f in flows] == [
        (str(SSH), "interactive", "A", 1, "B", 1), (str(BULK), "bulk", "A", 1, "B", 1)]
    assert len(skipped) == 1 and "9.9.9.9" in skipped[0]


def test_reservations_in_their_window_only() -> None:
    g = short_plus_circuit()
    resv = [{"id": 7, "src": "A:1", "dst": "B:1", "bandwidth": 3.0, "start_ts": 10.0, "end_ts": 20.0, "src_vlan": 300}]
    rules = ClassRules(vlans={300: "interactive"})
    (f,) = flows_from_reservations(g, resv, 15.0, rules)
    assert (f.id, f.bw, f.cls, f.reservation, f.src_port) == ("resv:7", 3.0, "interactive", "7", 1)
    assert flows_from_reservations(g, resv, 25.0, rules) == []


def test_plan_lights_the_circuit_then_steers_both_directions() -> None:
    g = short_plus_circuit()
    flows, _ = flows_from_monitor(g, [Rate(SSH, 4.0), Rate(BULK, 8.0)], ClassRules())
    policy = PlacementPolicy("otter")
    placement = policy.place(g, flows, now=0.0)
    plan = placement_plan(placement, ident=5)
    xcons = [s.xcon for s in plan.steps if isinstance(s, XconStep)]
    assert sorted((x.ots, x.in_port, x.out_port) for x in xcons) == [("X", 1, 2), ("Y", 2, 1)]
    up = next(s for s in plan.steps if isinstance(s, CircuitUpStep))
    assert set(up.ports) == {("A", 3), ("B", 3)}
    rules = {(s.rule.switch, dict(s.rule.match)["tcp_dst"] if dict(s.rule.match).get("ipv4_src") == "10.0.0.1"
              else -dict(s.rule.match)["tcp_src"], s.rule.out_port, s.role)
             for s in plan.steps if isinstance(s, FlowStep)}
    # ssh (dport 22) on the lit link A:2-B:2; bulk (5001) on the circuit A:3-B:3; reverse keyed by -sport
    assert rules == {("A", 22, 2, "ingress"), ("B", 22, 1, "path"), ("B", -22, 2, "ingress"), ("A", -22, 1, "path"),
                     ("A", 5001, 3, "ingress"), ("B", 5001, 1, "path"), ("B", -5001, 3, "ingress"),
                     ("A", -5001, 1, "path")}
    ingress = [s for s in plan.steps if isinstance(s, FlowStep) and s.role == "ingress"]
    assert all(up.id in _ancestors(plan, s.id) for s in ingress)  # traffic moves only once the circuit is up


def _ancestors(plan, sid: str) -> set[str]:
    by = {s.id: s for s in plan.steps}
    seen, todo = set(), list(by[sid].deps)
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo += list(by[d].deps)
    return seen


def test_per_pathpin_state_keeps_a_flow_and_plans_nothing_for_it() -> None:
    g = two_links(11.0)  # the 11 ms link gains only 0.025 to the 1 ms one
    fl = FiveTuple("10.0.0.1", "10.0.0.2", 6, 40000, 22)
    from pce.otter.graph_flows import GraphFlow

    flow = GraphFlow(str(fl), "A", "B", 1.0, "interactive", 1, 1, (fl.src, fl.dst, fl.proto, fl.sport, fl.dport))
    policy = PlacementPolicy("otter", period_s=30.0)
    policy.paths[flow.id] = ("A:2-B:2",)  # installed there earlier
    assert policy.due(0.0)
    placement = policy.place(g, [flow], now=0.0)
    assert not policy.due(10.0) and policy.due(30.0)
    (p,) = placement.flows
    assert p.pinned and p.path.key == ("A:2-B:2",)
    assert placement_plan(placement, 1) is None
    policy.options["pin_gain"] = 0.01
    moved = policy.place(g, [flow], now=30.0)
    assert moved.flows[0].moved and placement_plan(moved, 2) is not None
    policy.done(moved)
    assert policy.paths[flow.id] == ("A:4-B:4",)


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown placement policy"):
        PlacementPolicy("magic")
