"""Optical-scan inference under the light model: a probe XCON lights both of its ports."""
from hypothesis import given
from hypothesis import strategies as st

from app.controller.model import PortRef
from app.controller.scan_inference import GroupPlan, infer_group, plan_group


def lit_sets(plan: GroupPlan, truth: dict[int, PortRef | None]) -> list[frozenset[PortRef]]:
    """What the packet layer shows for each probe: the attachments of both lit ports."""
    return [frozenset(x for x in (truth[p.a], truth[p.b]) if x is not None) for p in plan.probes]


def test_fig2_x_without_prior_knowledge():
    truth = {1: PortRef(0xA1, 3), 2: None, 3: None, 4: PortRef(0xA1, 4), 5: None}
    plan = plan_group(truth, {})
    assert len(plan.probes) == 4 and plan.anchor == 1
    out = infer_group(plan, lit_sets(plan, truth))
    assert out.attached == truth and not out.ambiguous


def test_known_partner_needs_one_probe_per_unknown_port():
    truth = {1: PortRef(0xA1, 3), 4: PortRef(0xA1, 4)}
    known = {2: None, 3: None}  # fibres, from the static file
    plan = plan_group([1, 4], known)
    assert [(p.a, p.b) for p in plan.probes] == [(1, 2), (4, 2)]
    out = infer_group(plan, lit_sets(plan, {**truth, **known}))
    assert out.attached == truth


def test_two_unknown_ports_alone_are_ambiguous_unless_dark():
    plan = plan_group([1, 2], {})
    both = {1: PortRef(1, 1), 2: PortRef(2, 1)}
    out = infer_group(plan, lit_sets(plan, both))
    assert set(out.ambiguous) == {1, 2} and not out.attached
    dark = infer_group(plan, lit_sets(plan, {1: None, 2: None}))
    assert dark.attached == {1: None, 2: None}


def test_single_port_group_is_unscannable():
    plan = plan_group([6], {})
    assert plan.probes == []
    assert infer_group(plan, []).unscannable == [6]


@given(st.lists(st.booleans(), min_size=3, max_size=12), st.data())
def test_inference_recovers_any_attachment_pattern(attached_flags, data):
    """With >= 3 unknown ports every pattern of attachments (each packet port used once) is recovered."""
    ports = list(range(1, len(attached_flags) + 1))
    truth = {p: (PortRef(0x100 + p, data.draw(st.integers(1, 48))) if flag else None)
             for p, flag in zip(ports, attached_flags, strict=True)}
    plan = plan_group(ports, {})
    out = infer_group(plan, lit_sets(plan, truth))
    assert out.attached == truth and not out.ambiguous
    assert len(plan.probes) == len(ports) - 1
