"""Plan builders (app/update/planner.py): lower layers first, ingress last, removal in reverse order."""
from __future__ import annotations

import pytest

from app.update import planner
from app.update.model import FlowRule, IngressChange, XconSpec
from app.update.plan import (
    ADD,
    INGRESS,
    ONE_SHOT,
    PATH,
    REMOVE,
    CircuitUpStep,
    DrainStep,
    FlowStep,
    Plan,
    PlanError,
    VerifyStep,
    XconStep,
)
from tests.lib.fake_network import fig2_move

H1, H3 = "00:00:00:00:00:01", "00:00:00:00:00:03"


def of(plan: Plan, cls: type, op: str | None = None, role: str | None = None) -> list:
    return [s for s in plan.steps if isinstance(s, cls) and (op is None or s.op == op)
            and (role is None or s.role == role)]


def before(plan: Plan, first, then) -> bool:
    """Every step of ``first`` is a (transitive) dependency of every step of ``then``."""
    return all(a.id in plan.ancestors(b.id) for a in first for b in then)


def fig2_plan(**kw) -> Plan:
    sc = fig2_move()
    return planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons, sc.new_ports, sc.new_links, sc.new_rules,
                        sc.ingress, **kw)


def test_move_orders_layers_make_before_break():
    p = fig2_plan()
    sc = fig2_move()
    xadd, xdel = of(p, XconStep, ADD), of(p, XconStep, REMOVE)
    (up,), (verify,), (drain,) = of(p, CircuitUpStep), of(p, VerifyStep), of(p, DrainStep)
    path_add, path_del = of(p, FlowStep, ADD, PATH), of(p, FlowStep, REMOVE, PATH)
    ingress = of(p, FlowStep, role=INGRESS)
    assert {s.xcon for s in xadd} == set(sc.new_xcons) and {s.xcon for s in xdel} == set(sc.old_xcons)
    assert {s.rule for s in path_add} == set(sc.new_rules) and {s.rule for s in path_del} == set(sc.old_rules)
    assert [(s.rule, s.restore) for s in ingress] == [(c.new, c.old) for c in sc.ingress]
    # XCONs → circuit-up → path → ingress → verify → drain → old rules → old XCONs
    assert before(p, xadd, [up]) and before(p, [up], path_add) and before(p, path_add, ingress)
    assert before(p, ingress, [verify]) and before(p, [verify], [drain])
    assert before(p, [drain], path_del) and before(p, path_del, xdel)
    # the ingress swap is the last change before verification: nothing that adds waits for it
    assert not any(i.id in p.ancestors(s.id) for i in ingress for s in xadd + path_add)
    # steps of a layer are independent: new XCONs in parallel, old XCONs in parallel
    assert all(s.deps == frozenset() for s in xadd)
    assert len({s.deps for s in xdel}) == 1
    assert up.ports == (("A", 4), ("C", 2)) and up.links == ((("A", 4), ("C", 2)),)
    assert up.stable_s == pytest.approx(0.05)  # D = 50 ms by default
    assert verify.timeout_s == 2.0 and set(verify.rules) == {c.new for c in sc.ingress} | set(sc.new_rules)
    assert set(drain.rules) == set(sc.old_rules)  # the overwritten ingress rules now count new traffic
    assert p.commit == {"drain"} and p.kind == "move"


def test_move_parameters_reach_the_steps():
    p = fig2_plan(stable_ms=20, verify_timeout_s=0.5, min_packets=3, quiet_ms=40, drain_timeout_s=1.0,
                  settle_ms=2, plan_id="m1")
    assert p.id == "m1"
    assert p.step("circuit-up").stable_s == pytest.approx(0.02)
    assert (p.step("verify").timeout_s, p.step("verify").min_packets) == (0.5, 3)
    assert (p.step("drain").quiet_s, p.step("drain").timeout_s) == (pytest.approx(0.04), 1.0)
    assert {s.settle_s for s in of(p, FlowStep, ADD)} == {0.002}


def test_move_without_verify_or_drain_commits_at_the_swap():
    p = fig2_plan(verify=False, drain=False)
    assert not of(p, VerifyStep) and not of(p, DrainStep)
    ingress = of(p, FlowStep, role=INGRESS)
    assert p.commit == {s.id for s in ingress}
    assert before(p, ingress, of(p, FlowStep, REMOVE))


def test_move_refuses_what_cannot_be_made_before_break():
    sc = fig2_move()
    direct = [XconSpec("X", 1, 3), XconSpec("Z", 3, 2)]  # reuses X:1 and Z:2 of the initial circuit
    with pytest.raises(PlanError, match="X:1 held by old XCON X:1<->2"):
        planner.move(sc.old_xcons, sc.old_rules, direct, [("A", 3), ("C", 1)], [], [], sc.ingress)
    clash = FlowRule("B", "reservation", 7, 30000, {"in_port": 1, "eth_dst": H3}, 3)  # old B rule, other port
    with pytest.raises(PlanError, match="overwrites old rule"):
        planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons, sc.new_ports, sc.new_links, [clash], sc.ingress)
    with pytest.raises(PlanError, match="listed twice"):
        planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons * 2, sc.new_ports, sc.new_links, sc.new_rules,
                     sc.ingress)
    shadow = IngressChange(FlowRule("A", "reservation", 7, 30005, {"in_port": 1, "eth_dst": H3}, 4),
                           sc.ingress[0].old)
    with pytest.raises(PlanError, match="overwrites the old ingress rule"):  # a swap hidden in the path layer
        planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons, sc.new_ports, sc.new_links,
                     [*sc.new_rules, sc.ingress[0].new], [shadow, sc.ingress[1]])
    with pytest.raises(PlanError, match="also a path rule"):
        planner.move([], [], [], [], [], [sc.ingress[0].new], sc.ingress)


def test_shared_rules_and_xcons_are_left_alone():
    sc = fig2_move()
    shared_rule, shared_x = sc.old_rules[0], sc.old_xcons[0]
    p = planner.move(sc.old_xcons, sc.old_rules, [*sc.new_xcons, shared_x], sc.new_ports, sc.new_links,
                     [*sc.new_rules, shared_rule], sc.ingress)
    assert shared_rule not in {s.rule for s in of(p, FlowStep)}
    assert shared_x not in {s.xcon for s in of(p, XconStep)}
    assert shared_rule not in p.step("drain").rules


def test_old_rules_listing_the_ingress_are_handled_by_the_ingress_change():
    sc = fig2_move()
    p = planner.move(sc.old_xcons, sc.old_rules + sc.old_ingress, sc.new_xcons, sc.new_ports, sc.new_links,
                     sc.new_rules, sc.ingress)
    assert not {r.key() for r in sc.old_ingress} & {s.rule.key() for s in of(p, FlowStep, REMOVE)}


def rule(sw: str, prio: int, out: int, band: str = "reservation") -> FlowRule:
    return FlowRule(sw, band, 7 if band != "forwarding" else 0, prio, {"eth_dst": H3}, out)


def test_ingress_that_shadows_the_old_rule_removes_it_after_the_drain():
    old = rule("A", 100, 3, "forwarding")
    new = rule("A", 30000, 4)
    p = planner.move([], [], [], [], [], [], [IngressChange(new, old)])
    add, gone = p.step("ingress+A.1"), p.step("ingress-A.1")
    assert add.op == ADD and add.restore is None and gone.op == REMOVE and gone.rule == old
    assert p.step("drain").rules == (old,) and "drain" in gone.deps


def test_ingress_under_the_old_rule_goes_in_first_and_the_swap_is_the_delete():
    old = rule("A", 30005, 3)
    new = rule("A", 30000, 4)
    p = planner.move([], [], [], [], [], [], [IngressChange(new, old)])
    pre, swap = p.step("path+A.1"), p.step("ingress-A.1")
    assert pre.op == ADD and pre.rule == new and pre.role == PATH
    assert swap.op == REMOVE and swap.rule == old and swap.role == INGRESS and pre.id in swap.deps
    assert swap.inverse().op == ADD and swap.inverse().rule == old  # roll-back puts the old one back
    assert p.step("verify").rules == (new,) and "drain" not in {s.id for s in p.steps}


def test_provision_orders_layers_and_verifies_every_new_rule():
    sc = fig2_move()
    p = planner.provision(sc.new_xcons, [], sc.new_links, sc.new_rules, [c.new for c in sc.ingress])
    (up,) = of(p, CircuitUpStep)
    assert up.ports == (("A", 4), ("C", 2))  # the ends of the links
    xadd, path, ingress = of(p, XconStep), of(p, FlowStep, role=PATH), of(p, FlowStep, role=INGRESS)
    assert before(p, xadd, [up]) and before(p, [up], path) and before(p, path, ingress)
    assert before(p, ingress, of(p, VerifyStep))
    assert set(p.step("verify").rules) == set(sc.new_rules) | {c.new for c in sc.ingress}
    assert p.commit == frozenset() and p.kind == "provision"
    quiet = planner.provision(sc.new_xcons, [], sc.new_links, sc.new_rules, [], verify=False)
    assert not of(quiet, VerifyStep) and of(quiet, FlowStep)


def test_provision_needs_ports_for_new_xcons():
    with pytest.raises(PlanError, match="packet ports"):
        planner.provision([XconSpec("X", 4, 5)], [], [], [], [])


def test_release_runs_in_reverse_order():
    sc = fig2_move()
    p = planner.release(sc.old_xcons, sc.old_rules, sc.old_ingress, quiet_ms=30)
    ingress, path, xdel = of(p, FlowStep, role=INGRESS), of(p, FlowStep, role=PATH), of(p, XconStep)
    (drain,) = of(p, DrainStep)
    assert all(s.op == REMOVE for s in ingress + path + xdel)
    assert all(s.deps == frozenset() for s in ingress)
    assert before(p, ingress, [drain]) and before(p, [drain], path) and before(p, path, xdel)
    assert p.commit == {s.id for s in ingress} and p.kind == "release"
    assert not of(planner.release(sc.old_xcons, sc.old_rules, sc.old_ingress, drain=False), DrainStep)


def test_one_shot_keeps_the_messages_and_drops_the_order():
    p = fig2_plan()
    o = planner.one_shot(p)
    writes = [s for s in o.steps if s.writes]
    assert o.mode == ONE_SHOT and o.id == f"{p.id}-one-shot"
    assert [s.to_json()["target"] for s in writes] == [s.to_json()["target"] for s in p.steps if s.writes]
    assert all(s.deps == frozenset() for s in writes) and all(s.settle_s == 0 for s in of(o, FlowStep))
    assert not of(o, CircuitUpStep) and not of(o, DrainStep)
    (verify,) = of(o, VerifyStep)
    assert verify.deps == {s.id for s in writes}
    assert not of(planner.one_shot(p, verify=False), VerifyStep)
    assert len(o.layers()) == 2


def test_cross_connect_is_hop_by_hop_or_all_at_once():
    hops = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]
    chain = planner.cross_connect(hops)
    assert chain.kind == "circuit" and [s.deps for s in chain.steps] == [
        frozenset(), {"xcon+X:1-2"}, {"xcon+Y:1-4"}]
    assert [s.id for s in chain.undo({"xcon+X:1-2", "xcon+Y:1-4"}).steps] == ["undo:xcon+Y:1-4", "undo:xcon+X:1-2"]
    assert all(not s.deps for s in planner.cross_connect(hops, parallel=True).steps)
    with pytest.raises(PlanError, match="listed twice"):
        planner.cross_connect([hops[0], hops[0]])
