"""The executor (app/update/executor.py) over the fake network: parallelism, roll-back, events, records."""
from __future__ import annotations

import json
import time

import pytest

from app.update import planner
from app.update.executor import DONE, FAILED, ROLLED_BACK, PlanRecord, execute, sequential, threaded
from app.update.model import Outcome, XconSpec
from app.update.plan import ONE_SHOT
from tests.lib.fake_network import Traffic
from tests.unit.update.helpers import Watch, fig2_plan, norm_xcons

BYPASS = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]  # one XCON on each OTS


def test_parallel_xcons_finish_in_about_one_provisioning_delay(make_net):
    def run(runner):
        net = make_net(xcon_delay_s=0.05)
        plan = planner.provision(BYPASS, [], [(("A", 3), ("C", 1))], [], [], verify=False, stable_ms=5)
        rec = execute(plan, net, run_parallel=runner)
        assert rec.state == DONE, rec.error
        assert net.port_up(("A", 3)) and net.port_up(("C", 1))  # the bypass circuit is lit
        xs = [rec.step(s.id) for s in plan.steps if s.kind == "xcon_add"]
        return xs, max(s.finished_at for s in xs) - min(s.started_at for s in xs)

    xs, span = run(threaded)
    assert 0.05 <= span < 0.1  # one delay, not three
    assert max(s.started_at for s in xs) < min(s.finished_at for s in xs)  # the three really overlap
    _, span_seq = run(sequential)
    assert span_seq >= 0.15


def rollback_case(fig2, inject, **plan_kw):
    """Run the Fig. 2 move with a failure injected; check that the old path is intact in every state."""
    net, sc = fig2(xcon_delay_s=0.02, barrier_timeout_s=0.1)
    before_flows, before_xcons = set(net.all_flows()), norm_xcons(net.all_xcons())
    inject(net, sc)
    watch = Watch(net, [sc.forward, sc.reverse])
    events: list[dict] = []
    with Traffic(net, [sc.forward, sc.reverse]) as tr:
        rec = execute(fig2_plan(sc, **plan_kw), net, run_parallel=threaded, on_event=events.append)
    assert rec.state == ROLLED_BACK, rec.to_json()
    assert watch.broken() == []  # no black hole, no loop, at any moment, roll-back included
    assert tr.lost == tr.looped == tr.misdelivered == 0 and tr.delivered > 0
    assert net.delivered_to(*sc.forward[:2]) == "h3" and net.delivered_to(*sc.reverse[:2]) == "h1"
    assert [h[0] for h in net.trace(*sc.forward[:2])][:3] == ["A", "X", "Y"]  # still the old path
    assert set(net.all_flows()) == before_flows  # nothing of the new path left, the old ingress back
    assert norm_xcons(net.all_xcons()) == before_xcons
    failed = [e for e in events if e["event"] == "step_failed"]
    (back,) = [e for e in events if e["event"] == "plan_rolled_back"]
    assert back["step"] == rec.failed_step == failed[0]["step"] and back["reason"] == failed[0]["reason"]
    assert back["complete"] is True and events[-1]["event"] == "plan_done"
    assert events[-1]["state"] == ROLLED_BACK
    return net, sc, rec, events


def test_refused_xcon_rolls_back_and_leaves_the_refused_one_alone(fig2):
    net, sc, rec, events = rollback_case(fig2, lambda net, sc: net.refuse_xcon("Z"))
    assert rec.failed_step == "xcon+Z:5-4" and "OFPBAC_BAD_OUT_PORT" in rec.error
    assert [r.id for r in rec.rollback] == ["undo:xcon+X:4-5"]  # nothing to undo on Z: it refused
    assert not [m for m in net.messages if m.node == "Z" and m.op == "xcon_remove"]
    assert rec.step("circuit-up").ok is None  # never ran


def test_barrier_timeout_rolls_back_the_xcon_that_may_have_gone_in(fig2):
    net, sc, rec, events = rollback_case(fig2, lambda net, sc: net.drop_barriers("Z", count=1))
    assert rec.failed_step == "xcon+Z:5-4" and "BARRIER_REPLY" in rec.error
    assert {r.id for r in rec.rollback} == {"undo:xcon+X:4-5", "undo:xcon+Z:5-4"}
    assert [m for m in net.messages if m.node == "Z" and m.op == "xcon_add"][0].applied_at is not None


def test_ports_that_never_come_up_roll_back_at_the_circuit_barrier(fig2):
    net, sc, rec, _ = rollback_case(fig2, lambda net, sc: net.break_port(("C", 2)), circuit_timeout_s=0.15)
    assert rec.failed_step == "circuit-up" and "down: C:2" in rec.error
    assert rec.step("path+C.1").ok is None and {r.id for r in rec.rollback} == {"undo:xcon+X:4-5",
                                                                                 "undo:xcon+Z:5-4"}


def test_flapping_ports_never_pass_the_circuit_barrier(fig2):
    def flap(net, sc):
        net.flap(("A", 4), times=40, period_s=0.008)
    # stable 100 ms: a busy machine can hold the flapping thread back 20 ms (it failed so once), never
    # 100 ms in all 40 flips; the port flaps for 320 ms, past the 200-ms timeout
    net, sc, rec, _ = rollback_case(fig2, flap, circuit_timeout_s=0.2, stable_ms=100)
    assert rec.failed_step == "circuit-up" and "not up and stable" in rec.error


def test_verification_without_packets_rolls_back_ingress_first(fig2):
    net, sc, rec, _ = rollback_case(fig2, lambda net, sc: net.freeze_counters("C"), verify_timeout_s=0.15)
    assert rec.failed_step == "verify" and "no traffic on the new path" in rec.error
    assert "C/reservation#7" in rec.error
    ing = [r for r in rec.rollback if r.id.startswith("undo:ingress")]
    rest = [r for r in rec.rollback if not r.id.startswith("undo:ingress")]
    assert len(ing) == 2 and rest and max(r.finished_at for r in ing) <= min(r.started_at for r in rest)


def test_a_step_that_raises_is_rolled_back_as_unknown(fig2):
    net, sc = fig2(xcon_delay_s=0.0)

    class Broken:
        """The fake, except that C's switch connection dies on its first rule."""

        def __getattr__(self, name):
            return getattr(net, name)

        def install_flow(self, r, barrier=True):
            if r.switch == "C":
                net.install_flow(r, barrier)  # it went out before the connection died
                raise ConnectionResetError("switch C disconnected")
            return net.install_flow(r, barrier)

    events = []
    rec = execute(fig2_plan(sc), Broken(), run_parallel=threaded, on_event=events.append)
    assert rec.state == ROLLED_BACK and rec.failed_step == "path+C.1"
    assert "ConnectionResetError: switch C disconnected" in rec.error
    assert "undo:path+C.1" in {r.id for r in rec.rollback}
    assert set(net.all_flows()) == set(sc.old_state_rules)


def test_failure_after_the_commit_point_is_not_rolled_back(fig2):
    net, sc = fig2(xcon_delay_s=0.01, barrier_timeout_s=0.05)
    net.drop_barriers("Y")  # the old circuit's Y removals time out
    events = []
    with Traffic(net, [sc.forward, sc.reverse]):
        rec = execute(fig2_plan(sc), net, run_parallel=threaded, on_event=events.append)
    assert rec.state == FAILED and rec.failed_step.startswith("xcon-Y") and not rec.rollback
    assert not [e for e in events if e["event"] == "plan_rolled_back"]
    assert [h[0] for h in net.trace(*sc.forward[:2])] == ["A", "X", "Z", "C", "h3"]  # the new path stays
    assert rec.step("xcon-X:1-2").ok and rec.step("xcon-Z:1-2").ok  # the other removals went on
    assert not net.xcons("Y")  # applied anyway: only the replies were lost


def test_events_and_record_of_a_successful_move(fig2):
    net, sc = fig2(xcon_delay_s=0.01)
    events = []
    plan = fig2_plan(sc)
    with Traffic(net, [sc.forward, sc.reverse]):
        rec = execute(plan, net, run_parallel=threaded, on_event=events.append)
    assert rec.state == DONE and rec.error == "" and rec.failed_step is None
    assert events[0] == {"event": "plan_started", "plan": plan.id, "t": events[0]["t"], "kind": "move",
                         "mode": "ordered"}
    assert [e["step"] for e in events if e["event"] == "step_done"] == [s.id for s in rec.steps]
    assert events[-1]["event"] == "plan_done" and events[-1]["state"] == DONE
    for s in plan.steps:  # a step starts only after its dependencies finished
        r = rec.step(s.id)
        assert r.ok and r.started_at <= r.finished_at
        assert all(rec.step(d).finished_at <= r.started_at for d in s.deps)
    assert rec.step("verify").detail["packets"]  # what verification saw, per rule


def test_record_json_round_trip(fig2):
    net, sc = fig2(xcon_delay_s=0.0)
    net.refuse_xcon("X")
    rec = execute(fig2_plan(sc), net, run_parallel=threaded)
    d = json.loads(json.dumps(rec.to_json()))
    assert set(d) >= {"id", "kind", "mode", "state", "error", "started_at", "finished_at", "steps"}
    assert set(d["steps"][0]) >= {"id", "kind", "target", "deps", "started_at", "finished_at", "ok", "error"}
    assert d["state"] == ROLLED_BACK and d["steps"][0]["target"] == "X:4<->5"
    assert PlanRecord.from_json(d) == rec


def test_one_shot_sends_everything_at_once_without_barriers(fig2):
    net, sc = fig2(xcon_delay_s=0.02)
    plan = planner.one_shot(fig2_plan(sc))
    with Traffic(net, [sc.forward, sc.reverse]):
        rec = execute(plan, net, run_parallel=threaded)
    assert rec.mode == ONE_SHOT and rec.state == DONE, rec.error
    writes = [r for r in rec.steps if r.kind != "verify"]
    assert max(r.finished_at for r in writes) - min(r.started_at for r in writes) < 0.015  # < one XCON delay
    assert all(not m.barrier for m in net.messages)
    assert rec.step("verify").started_at >= max(r.finished_at for r in writes)


def test_one_shot_failures_are_reported_not_rolled_back(fig2):
    net, sc = fig2(xcon_delay_s=0.0)

    class Refusing:
        def __getattr__(self, name):
            return getattr(net, name)

        def install_xcon(self, x, barrier=True):
            return Outcome.refused("X is not connected") if x.ots == "X" else net.install_xcon(x, barrier)

    rec = execute(planner.one_shot(fig2_plan(sc), verify=False), Refusing(), run_parallel=sequential)
    assert rec.state == FAILED and rec.failed_step == "xcon+X:4-5" and not rec.rollback
    assert all(r.ok is not None for r in rec.steps)  # everything else was still sent


def test_a_listener_that_raises_does_not_stop_the_plan(fig2, caplog):
    net, sc = fig2(xcon_delay_s=0.0)

    def bad(event):
        raise RuntimeError("listener bug")

    rec = execute(fig2_plan(sc, verify=False, drain=False), net, run_parallel=sequential, on_event=bad)
    assert rec.state == DONE
    assert "listener bug" in caplog.text


@pytest.mark.parametrize("runner", [sequential, threaded])
def test_both_runners_reach_the_same_state(fig2, runner):
    net, sc = fig2(xcon_delay_s=0.005)
    with Traffic(net, [sc.forward, sc.reverse]):
        t0 = time.time()
        rec = execute(fig2_plan(sc), net, run_parallel=runner)
    assert rec.state == DONE and time.time() - t0 < 2
    assert set(net.all_flows()) == {c.new for c in sc.ingress} | set(sc.new_rules)


def test_a_roll_back_that_fails_too_is_reported(fig2):
    net, sc = fig2(xcon_delay_s=0.0, barrier_timeout_s=0.05)
    net.drop_barriers("Z")  # Z never answers: its add and the roll-back's delete both time out
    events = []
    rec = execute(fig2_plan(sc), net, run_parallel=threaded, on_event=events.append)
    assert rec.state == FAILED and rec.failed_step == "xcon+Z:5-4"
    assert "roll-back incomplete" in rec.error and "undo:xcon+Z:5-4" in rec.error
    (back,) = [e for e in events if e["event"] == "plan_rolled_back"]
    assert back["complete"] is False
    assert rec.step("undo:xcon+X:4-5").ok  # the rest of the roll-back still ran


def test_verification_of_a_rule_that_never_appears_fails_at_its_timeout(fig2):
    from app.update.model import FlowRule
    from app.update.plan import Plan, VerifyStep
    net, sc = fig2()
    ghost = FlowRule("B", "reservation", 9, 30000, {"in_port": 1}, 2)
    plan = Plan((VerifyStep(id="verify", rules=(sc.old_rules[0], ghost), timeout_s=0.05),), "custom")
    with Traffic(net, [sc.forward]):
        t0 = time.time()
        rec = execute(plan, net)
    assert rec.state == ROLLED_BACK and time.time() - t0 >= 0.05  # nothing to undo: rolled back at once
    assert "not on their switch: B/reservation#9" in rec.error and "counted <" not in rec.error


def test_verification_reads_every_rule_together_and_a_risen_rule_no_more(fig2):
    from app.update.plan import Plan, VerifyStep
    net, sc = fig2()
    ghost = sc.old_rules[0].__class__("B", "reservation", 9, 30000, {"in_port": 1}, 2)
    reads: list[list[str]] = []
    batch = net.flow_packets_many

    def counted(rules):  # noqa: ANN001, ANN202
        reads.append([r.target() for r in rules])
        return batch(rules)

    net.flow_packets_many = counted  # type: ignore[method-assign]
    live = sc.old_rules[0]
    plan = Plan((VerifyStep(id="verify", rules=(live, ghost), timeout_s=0.2),), "custom")
    with Traffic(net, [sc.forward]):
        rec = execute(plan, net)
    assert rec.state == ROLLED_BACK and "not on their switch: B/reservation#9" in rec.error
    assert reads[0] == [live.target(), ghost.target()] == reads[1]  # the base, then the first poll: both
    risen = next(i for i, r in enumerate(reads) if i > 0 and r == [ghost.target()])
    assert all(r == [ghost.target()] for r in reads[risen:]), reads  # the counted rule is not read again


def test_verification_reads_further_apart_up_to_a_cap_and_still_ends_at_its_timeout(fig2):
    """A counter moves only when the switch refreshes it: the gaps between reads grow by half, to 4 polls."""
    from app.update.executor import VERIFY_GAP_MAX
    from app.update.plan import Plan, VerifyStep
    net, sc = fig2()
    ghost = sc.old_rules[0].__class__("B", "reservation", 9, 30000, {"in_port": 1}, 2)
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    plan = Plan((VerifyStep(id="verify", rules=(ghost,), timeout_s=1.0),), "custom")
    rec = execute(plan, net, clock=lambda: now[0], sleep=sleep, poll_s=0.02)
    assert rec.state == ROLLED_BACK and "not on their switch" in (rec.error or "")
    assert slept[:4] == pytest.approx([0.02, 0.03, 0.045, 0.0675])
    assert max(slept) == pytest.approx(VERIFY_GAP_MAX * 0.02)
    assert sum(slept) == pytest.approx(1.0)  # the last read at the deadline, not after it
    assert len(slept) < 1.0 / 0.02 / 2  # fewer than half the reads of a fixed 20-ms poll


class _SlowPath:
    """A path whose rules begin to count one after another, ``hop_s`` of (fake) time apart, the first
    ones only (``reach``): probes advancing along a long, slow path — or stopping where it is broken."""

    def __init__(self, rules, hop_s: float, reach: int) -> None:
        self.t, self.hop_s, self.reach = 0.0, hop_s, reach
        self.index = {r.target(): i for i, r in enumerate(rules)}

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(s, 0.01)

    def flow_packets_many(self, rules):  # noqa: ANN001, ANN201
        return [5 if (i := self.index[r.target()]) < self.reach and self.t >= (i + 1) * self.hop_s else 0
                for r in rules]


def _verify_on(path: _SlowPath, rules, timeout_s: float = 3.0) -> PlanRecord:
    from app.update.plan import Plan, VerifyStep

    plan = Plan((VerifyStep(id="verify", rules=tuple(rules), timeout_s=timeout_s),), "custom")
    return execute(plan, path, clock=path.clock, sleep=path.sleep, poll_s=0.05)


def _path_rules(n: int):
    from app.update.model import FlowRule

    return [FlowRule(f"s{i}", "reservation", 7, 30001, {"in_port": 3, "vlan_vid": 4345}, 2) for i in range(n)]


def test_verification_waits_while_the_probes_still_advance_along_a_slow_path():
    """22 hops, one more counting every 0.3 s: the far end counts after 6.6 s, past the 3-s timeout,
    but no 3 s ever passed without a new rule counting (the germany50 arrivals that failed so)."""
    rules = _path_rules(22)
    path = _SlowPath(rules, hop_s=0.3, reach=22)
    rec = _verify_on(path, rules)
    assert rec.state == DONE, rec.error
    assert 6.6 <= path.t < 7.5


def test_verification_fails_timeout_s_after_the_last_rule_began_to_count():
    rules = _path_rules(22)
    path = _SlowPath(rules, hop_s=0.3, reach=10)  # broken after the 10th hop (3.0 s in)
    rec = _verify_on(path, rules)
    assert rec.state == ROLLED_BACK and rec.failed_step == "verify"
    assert "12 rule(s) counted < 1 packet(s)" in rec.error and "s10/reservation#7" in rec.error
    assert "the last rule began to count 3.0" in rec.error, rec.error
    assert 6.0 <= path.t < 6.5


def test_verification_of_a_path_that_advances_too_slowly_stops_at_four_timeouts():
    rules = _path_rules(30)
    path = _SlowPath(rules, hop_s=1.0, reach=30)  # would need 30 s
    rec = _verify_on(path, rules)
    assert rec.state == ROLLED_BACK and "(12.0" in rec.error, rec.error
    assert 12.0 <= path.t < 12.5
