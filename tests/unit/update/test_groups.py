"""Fast-failover groups in plans: the value, the step, its place in provision and release, the fake network."""
from __future__ import annotations

import pytest

from app.update import planner
from app.update.executor import execute
from app.update.model import FlowRule, GroupSpec, ModelError, XconSpec
from app.update.plan import INGRESS, REMOVE, FlowStep, GroupStep, Plan, XconStep
from topology import rule_plan

RES = rule_plan.RESERVATION
X = XconSpec("X", 1, 3)


def ingress(group: int | None = 7) -> FlowRule:
    return FlowRule("A", RES.name, 7, RES.low, (("in_port", 1),), 3, group=group)


def transit() -> FlowRule:
    return FlowRule("C", RES.name, 7, RES.low, (("in_port", 1),), 3)


def test_group_spec_and_rule_values():
    g = GroupSpec("A", 7, [3, 4])
    assert g.ports == (3, 4) and GroupSpec.from_json(g.to_json()) == g
    assert g.target() == "A/group 7 ff[3,4]"
    for bad in (("A", 7, ()), ("A", 7, (3, 3)), ("A", -1, (3,)), ("", 7, (3,)), ("A", 7, (0,))):
        with pytest.raises(ModelError):
            GroupSpec(*bad)
    r = ingress()
    assert FlowRule.from_json(r.to_json()) == r and r.to_json()["group"] == 7
    assert "group 7" in r.target()
    assert "group" not in ingress(None).to_json()
    with pytest.raises(ModelError):
        ingress(rule_plan.GROUP_MAX + 1)
    assert rule_plan.reservation_group(7) == 7


def test_provision_sets_the_group_before_the_ingress_rule_and_release_removes_it_after():
    g = GroupSpec("A", 7, (3, 4))
    plan = planner.provision([X], [("A", 3), ("C", 1)], [], [transit()], [ingress()], groups=[g], verify=False)
    (gs,) = [s for s in plan.steps if isinstance(s, GroupStep)]
    (ing,) = [s for s in plan.steps if isinstance(s, FlowStep) and s.role == INGRESS]
    assert gs.id in plan.ancestors(ing.id) and "circuit-up" in plan.ancestors(gs.id)
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.undo([gs.id]).steps[0].kind == "group_remove"
    rel = planner.release([X], [transit()], [ingress()], groups=[g], drain=False)
    (gr,) = [s for s in rel.steps if isinstance(s, GroupStep)]
    (ing_rm,) = [s for s in rel.steps if isinstance(s, FlowStep) and s.role == INGRESS]
    (x_rm,) = [s for s in rel.steps if isinstance(s, XconStep)]
    assert gr.op == REMOVE and ing_rm.id in rel.ancestors(gr.id) and gr.id in rel.ancestors(x_rm.id)
    with pytest.raises(ValueError, match="listed twice"):
        planner.provision([X], [("A", 3)], [], [], [ingress()], groups=[g, g])


def test_a_failed_plan_rolls_its_group_back(make_net):
    net = make_net()
    g = GroupSpec("A", 7, (3, 4))
    net.refuse_flow("A")  # the ingress rule is refused after the group went in
    rec = execute(planner.provision([], [], [], [], [ingress()], groups=[g], verify=False), net)
    assert rec.state == "rolled_back" and net.groups.get("A", {}) == {}
    assert [s.kind for s in rec.rollback] == ["group_remove"]


def test_a_group_that_overwrites_another_restores_it_on_undo():
    old, new = GroupSpec("A", 7, (3, 4)), GroupSpec("A", 7, (4, 3))
    plan = planner.provision([], [], [], [], [ingress()], groups=[new], old_groups=[old], verify=False)
    (gs,) = [s for s in plan.steps if isinstance(s, GroupStep)]
    assert gs.restore == old and Plan.from_json(plan.to_json()) == plan
    (back,) = plan.undo([gs.id]).steps
    assert (back.kind, back.group) == ("group_add", old)  # set back, never deleted with its rules
    with pytest.raises(ValueError, match="only the one it overwrites"):
        GroupStep(id="g", op="add", group=new, restore=GroupSpec("C", 7, (1,)))
    with pytest.raises(ValueError, match="only a set restores"):
        GroupStep(id="g", op=REMOVE, group=new, restore=old)
