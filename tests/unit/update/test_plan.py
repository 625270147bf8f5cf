"""The plan graph (app/update/plan.py): checks, layers, roll-back order, JSON."""
from __future__ import annotations

import json

import pytest

from app.update.model import FlowRule, XconSpec
from app.update.plan import (
    ADD,
    INGRESS,
    ONE_SHOT,
    REMOVE,
    CircuitUpStep,
    DrainStep,
    FlowStep,
    Plan,
    PlanError,
    Step,
    VerifyStep,
    XconStep,
)

H3 = "00:00:00:00:00:03"


def r(sw: str, out: int, in_port: int = 1) -> FlowRule:
    return FlowRule(sw, "reservation", 7, 30000, {"in_port": in_port, "eth_dst": H3}, out)


def x(ots: str, a: int, b: int, deps: set[str] = frozenset(), op: str = ADD) -> XconStep:
    return XconStep(id=f"x{ots}", deps=frozenset(deps), op=op, xcon=XconSpec(ots, a, b))


def chain() -> Plan:
    """Two XCONs ∥ → circuit-up → two path rules ∥ → ingress overwrite → verify."""
    steps = [
        x("X", 4, 5), x("Z", 5, 4),
        CircuitUpStep(id="up", deps={"xX", "xZ"}, ports=[("A", 4), ("C", 2)], stable_s=0.01),
        FlowStep(id="pC", deps={"up"}, op=ADD, rule=r("C", 3, 2)),
        FlowStep(id="pB", deps={"up"}, op=ADD, rule=r("B", 2)),
        FlowStep(id="in", deps={"pC", "pB"}, op=ADD, rule=r("A", 4), restore=r("A", 3), role=INGRESS),
        VerifyStep(id="v", deps={"in"}, rules=[r("A", 4)]),
    ]
    return Plan(tuple(steps), "move", id="p1")


def test_layers_group_independent_steps():
    assert [[s.id for s in layer] for layer in chain().layers()] == [["xX", "xZ"], ["up"], ["pC", "pB"], ["in"],
                                                                        ["v"]]


@pytest.mark.parametrize("steps, words", [
    ([x("X", 1, 2, {"xY"}), x("Y", 1, 2, {"xX"})], "cycle"),
    ([x("X", 1, 2, {"xX"})], "itself"),
    ([x("X", 1, 2, {"nope"})], "unknown steps"),
    ([x("X", 1, 2), x("X", 3, 4)], "used twice"),
])
def test_bad_graphs_are_refused(steps, words):
    with pytest.raises(PlanError, match=words):
        Plan(tuple(steps), "custom")


def test_cycle_through_three_steps_is_found():
    steps = [x("X", 1, 2, {"xZ"}), x("Y", 1, 2, {"xX"}), x("Z", 1, 2, {"xY"}), x("W", 1, 2)]
    with pytest.raises(PlanError, match=r"cycle among \['xX', 'xY', 'xZ'\]"):
        Plan(tuple(steps), "custom")


def test_commit_and_mode_are_checked():
    with pytest.raises(PlanError, match="commit"):
        Plan((x("X", 1, 2),), "custom", commit=frozenset({"nope"}))
    with pytest.raises(PlanError, match="mode"):
        Plan((x("X", 1, 2),), "custom", mode="fast")
    up = CircuitUpStep(id="up", ports=[("A", 4)])
    with pytest.raises(PlanError, match="one-shot mode does not wait"):
        Plan((up,), "custom", mode=ONE_SHOT)


def test_step_checks():
    with pytest.raises(PlanError, match="restore"):
        FlowStep(id="f", op=ADD, rule=r("A", 4), restore=r("B", 3))
    with pytest.raises(PlanError, match="only an add"):
        FlowStep(id="f", op=REMOVE, rule=r("A", 4), restore=r("A", 3))
    with pytest.raises(PlanError, match="op"):
        XconStep(id="x", op="replace", xcon=XconSpec("X", 1, 2))
    with pytest.raises(PlanError, match="no rules"):
        VerifyStep(id="v", rules=[])
    with pytest.raises(PlanError, match="quiet_s"):
        DrainStep(id="d", rules=[r("B", 2)], quiet_s=1.0, timeout_s=0.5)
    with pytest.raises(PlanError, match="ports or links"):
        CircuitUpStep(id="up", ports=[])


def test_inverses():
    assert FlowStep(id="f", op=ADD, rule=r("A", 4), restore=r("A", 3)).inverse().rule == r("A", 3)
    assert FlowStep(id="f", op=ADD, rule=r("A", 4)).inverse().op == REMOVE
    assert FlowStep(id="f", op=REMOVE, rule=r("A", 4)).inverse().op == ADD
    assert x("X", 1, 2).inverse().op == REMOVE
    assert CircuitUpStep(id="up", ports=[("A", 4)]).inverse() is None


def test_undo_runs_in_reverse_dependency_order_and_restores_the_ingress_first():
    p = chain()
    back = p.undo({"xX", "xZ", "up", "pC", "pB", "in"})
    assert back.kind == "rollback" and back.id == "p1-rollback"
    assert [{s.id for s in layer} for layer in back.layers()] == [
        {"undo:in"}, {"undo:pC", "undo:pB"}, {"undo:xX", "undo:xZ"}]
    first = back.step("undo:in")
    assert first.op == ADD and first.rule == r("A", 3)  # the old ingress rule comes back
    # the XCON removals wait for both path removals, though the circuit-up step between is not repeated
    assert back.step("undo:xX").deps == {"undo:pC", "undo:pB"}
    assert all(s.op == REMOVE for s in back.steps if s.id != "undo:in")


def test_undo_of_a_partial_set_keeps_only_what_ran():
    back = chain().undo({"xX", "up"})
    assert [s.id for s in back.steps] == ["undo:xX"] and back.steps[0].deps == frozenset()


def test_undo_keeps_only_the_nearest_dependencies():
    steps = [FlowStep(id="pA", op=ADD, rule=r("A", 2)), FlowStep(id="pB", deps={"pA"}, op=ADD, rule=r("B", 2)),
             FlowStep(id="pC", deps={"pB"}, op=ADD, rule=r("C", 2))]
    back = Plan(tuple(steps), "custom").undo({"pA", "pB", "pC"})
    assert back.step("undo:pA").deps == {"undo:pB"} and back.step("undo:pB").deps == {"undo:pC"}


def test_undo_of_a_hop_by_hop_xcon_chain_removes_each_xcon_on_its_own():
    """XCONs set up one after the other (``POST /circuit``) come down independently: one that cannot be
    removed must not keep the others lit; a rule on the chain still goes before the XCONs under it."""
    steps = [x("X", 1, 2), x("Y", 1, 2, {"xX"}), FlowStep(id="pC", deps={"xY"}, op=ADD, rule=r("C", 2)),
             x("Z", 1, 2, {"pC"})]
    back = Plan(tuple(steps), "custom").undo({"xX", "xY", "pC", "xZ"})
    assert back.step("undo:xZ").deps == frozenset() and back.step("undo:pC").deps == {"undo:xZ"}
    assert back.step("undo:xY").deps == {"undo:pC"} and back.step("undo:xX").deps == {"undo:pC"}


def test_plan_json_round_trip():
    p = Plan(chain().steps + (DrainStep(id="d", deps={"v"}, rules=[r("B", 2)], quiet_s=0.05),),
             "move", id="p1", commit=frozenset({"d"}))
    d = json.loads(json.dumps(p.to_json()))
    assert d["layers"][0] == ["xX", "xZ"] and d["commit"] == ["d"]
    assert d["steps"][5]["restore"]["out_port"] == 3 and d["steps"][5]["role"] == INGRESS
    assert Plan.from_json(d) == p
    with pytest.raises(PlanError, match="unknown step type"):
        Step.from_json({"id": "s", "step": "teleport"})
