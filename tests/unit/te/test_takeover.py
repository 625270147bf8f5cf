"""Restart and takeover of the TE loop (app/te/takeover.py, app/te/store.py) on the Fig. 2 testbed.

An offload (or a grown circuit) is really provisioned on the fake network (tests/lib/fake_network.py);
then a "new controller" — a fresh decider — gets the stored records and what the switches hold, and
:func:`adopt` decides. Each release plan it returns is executed on the same fake network, so the
tests check what the switches hold afterwards, not what the plan says."""
from __future__ import annotations

import json

import pytest

from app.te.damping import Damper
from app.te.decisions import OFFLOAD, RELEASE, OffloadDecider
from app.te.growth import GrowthDecider
from app.te.store import FileTeStore, MemoryTeStore, StaleEpoch, StoreError, open_store, te_state_path
from app.te.takeover import (
    LIT,
    OPENING,
    RELEASING,
    TE_BANDS,
    SwitchState,
    TeRecord,
    adopt,
    circuits_by_end,
    growth_record,
    offload_record,
    rule_from_stat,
    with_state,
)
from app.update.executor import execute, threaded
from app.update.model import FlowRule, XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import ELEPHANT_GONE, Event
from tests.unit.te import test_decisions as fig2
from tests.unit.te import test_growth as fig2_direct

INITIAL = {XconSpec(*x) for x in FIG2_CIRCUITS["initial"]}
DIRECT = {XconSpec(*x) for x in FIG2_CIRCUITS["direct"]}


def hops(xs) -> set:
    """XCONs as (OTS, ports): the fake network lists each with its lower port first."""
    return {(x.ots, x.ports) for x in xs}


def state_of(net, circuits=None) -> SwitchState:
    """What a new controller reads back from the fake network: every switch's TE-band rules (as its
    flow stats give them: cookie, priority, match, outputs), every OTS's XCON directions."""
    rules = {}
    for sw in sorted(net.switches):
        rules[sw] = [rule_from_stat(sw, r.cookie, r.priority, dict(r.match), [r.out_port])
                     for r in net.flows(sw) if any(b.owns(r.cookie) for b in TE_BANDS)]
    xcons = {o: {**{x.in_port: x.out_port for x in net.xcons(o)}, **{x.out_port: x.in_port for x in net.xcons(o)}}
             for o in net.ots}
    return SwitchState(rules, xcons, circuits or {})


def te_rules(net) -> list[FlowRule]:
    return [r for r in net.all_flows() if r.band in ("steer", "split")]


def offloaded(net):
    """An elephant offloaded onto a new circuit by the first controller; its LIT record."""
    d = OffloadDecider(Damper(min_hold_s=30), stable_ms=5, verify_timeout_s=1.0)
    (dec,) = d.on_event(fig2.imbalance(fig2.ELEPHANT), fig2.live_graph(), now=10.0,
                        loads_mbps={"packet:A:3-B:1": 4.0}, flow_bytes=lambda f: 50e6)
    assert dec.kind == OFFLOAD, dec.reason
    assert fig2.run(net, dec).state == "done"
    return dec.offload, offload_record(dec.offload, state=LIT, since=1000.0, threshold_mbps=1.0, epoch=3)


def the_circuit(off) -> dict:
    """The offload's lit circuit as the shim gives it (by end port)."""
    return circuits_by_end([(off.ends[0], off.ends[1], [(x.ots, x.in_port, x.out_port) for x in off.xcons])])


def run_all(net, releases) -> None:
    for rel in releases:
        rec = execute(rel.plan, net, run_parallel=threaded)
        assert rec.state == "done", rec.to_json()


def test_a_consistent_record_is_adopted_and_released_later_by_the_new_decider():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        result = adopt([rec], state_of(net, the_circuit(off)))
        assert [r.key for r in result.keep] == [(OFFLOAD, off.ident)]
        assert result.release == [] and result.forget == [] and result.deferred == []
        assert result.max_ident == {OFFLOAD: off.ident}
        # the new controller's decider owns it: new ids above it, and "elephant gone" releases it
        d2 = OffloadDecider(Damper(min_hold_s=30))
        d2.adopt(result.keep[0].body, moved_at=5.0)
        d2.skip_ids(result.max_ident[OFFLOAD])
        assert next(d2._ids) == off.ident + 1
        assert d2.damper.why_not(fig2.ELEPHANT, 6.0)  # held: it moved at 5.0
        (rel,) = d2.on_event(Event(40.0, off.circuit_id, ELEPHANT_GONE, off.flows, {}), fig2.live_graph(), now=40.0)
        assert rel.kind == RELEASE
        assert execute(rel.plan, net, run_parallel=threaded).state == "done"
        assert te_rules(net) == [] and hops(net.all_xcons()) == hops(INITIAL)
    finally:
        net.close()


def test_xcons_without_steer_rules_are_released_once():
    """The issue's case: the circuit's XCONs are on the OTSes but its rules are not (lost, or removed
    by hand): the record is inconsistent, so what is there — the XCONs — is released; a second pass
    over what is left finds nothing more (the record is forgotten)."""
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        for r in off.ingress + off.egress:
            assert net.remove_flow(r).ok
        result = adopt([rec], state_of(net, the_circuit(off)))
        assert result.keep == [] and len(result.release) == 1
        rel = result.release[0]
        assert rel.record == rec and rel.owner == f"te:{off.ident}" and "rule" in rel.reason
        assert {s.kind for s in rel.plan.steps} == {"xcon_remove"} and len(rel.plan.steps) == len(off.xcons)
        run_all(net, result.release)
        assert hops(net.all_xcons()) == hops(INITIAL)
        again = adopt([rec], state_of(net))
        assert again.release == [] and again.keep == [] and again.forget == [rec]
    finally:
        net.close()


def test_rules_without_their_xcons_are_released():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        net.remove_xcon(off.xcons[0])
        result = adopt([rec], state_of(net))
        (rel,) = result.release
        assert "XCON" in rel.reason
        kinds = [s.kind for s in rel.plan.steps]
        assert kinds.count("flow_remove") == len(off.ingress) + len(off.egress)
        assert kinds.count("xcon_remove") == len(off.xcons) - 1
        run_all(net, result.release)
        assert te_rules(net) == [] and hops(net.all_xcons()) == hops(INITIAL)
    finally:
        net.close()


@pytest.mark.parametrize("state", [OPENING, RELEASING])
def test_a_plan_that_did_not_finish_is_released(state):
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        (rel,) = adopt([with_state(rec, state)], state_of(net)).release
        assert "did not finish" in rel.reason
        # the ingress rules go first (the flow falls back), the XCONs last
        first = [s for s in rel.plan.steps if not s.deps]
        assert first and all(s.kind == "flow_remove" and s.rule in off.ingress for s in first)
        run_all(net, [rel])
        assert te_rules(net) == [] and hops(net.all_xcons()) == hops(INITIAL)
    finally:
        net.close()


def test_orphan_rules_without_a_record_go_with_the_circuit_they_steer_into():
    """No record (a controller without a state file, a lost store): the TE rules on the switches are
    orphans, released per cookie id together with the lit circuit their ingress rules output into;
    the lit circuit 'initial', which no TE rule leads into, stays."""
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, _rec = offloaded(net)
        initial_ends = [(("A", 3), ("B", 1), [("X", 1, 2), ("Y", 1, 2)])]
        circuits = circuits_by_end(initial_ends + [(off.ends[0], off.ends[1],
                                                    [(x.ots, x.in_port, x.out_port) for x in off.xcons])])
        result = adopt([], state_of(net, circuits))
        (rel,) = result.release
        assert rel.record is None and "orphan steer" in rel.reason and result.max_ident == {OFFLOAD: off.ident}
        first = {s.rule for s in rel.plan.steps if not s.deps}
        assert first == {r for r in off.ingress}  # the rules into the circuit first
        run_all(net, [rel])
        assert te_rules(net) == [] and hops(net.all_xcons()) == hops(INITIAL)
    finally:
        net.close()


def test_an_orphan_never_takes_a_held_circuit_down():
    """A circuit a reservation (or default forwarding) uses is left out of the circuits: only the rules go."""
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, _rec = offloaded(net)
        chain = [(x.ots, x.in_port, x.out_port) for x in off.xcons]
        circuits = circuits_by_end([(off.ends[0], off.ends[1], chain)], held=[off.ends[1]])
        assert circuits == {}
        (rel,) = adopt([], state_of(net, circuits)).release
        run_all(net, [rel])
        assert te_rules(net) == [] and hops(off.xcons) <= hops(net.all_xcons())
    finally:
        net.close()


def test_a_record_on_a_node_that_did_not_answer_waits():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        st = state_of(net)
        partial = SwitchState({k: v for k, v in st.rules.items() if k != "C"}, st.xcons)
        result = adopt([rec], partial)
        assert result.deferred == [rec] and result.release == [] and result.keep == []
    finally:
        net.close()


def test_a_grown_circuit_is_adopted_and_shrinks_later():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.01)
    try:
        fwd = []
        for _ip, mac, sw, port in fig2_direct.HOSTS.values():
            fwd.append(FlowRule(sw, "forwarding", 0, 100, (("eth_dst", mac),), port))
            other = "C" if sw == "A" else "A"
            fwd.append(FlowRule(other, "forwarding", 0, 100, (("eth_dst", mac),), 1 if other == "C" else 3))
        net.preload(DIRECT, fwd)
        d = GrowthDecider(Damper(min_hold_s=5.0, on=0.7, off=0.4), stable_ms=5, calm_intervals=3)
        (dec,) = d.on_event(fig2_direct.growth_event(), fig2_direct.live_graph(), now=10.0)
        assert execute(dec.plan, net, run_parallel=threaded).state == "done"
        rec = growth_record(dec.growth, state=LIT, since=1000.0)
        back = TeRecord.from_json(json.loads(json.dumps(rec.to_json())))
        result = adopt([back], state_of(net))
        assert [r.key for r in result.keep] == [("growth", dec.growth.ident)]
        d2 = GrowthDecider(Damper(min_hold_s=5.0, on=0.7, off=0.4), calm_intervals=3)
        d2.adopt(result.keep[0].body, grown_at=0.0)
        shrink = [d2.observe(fig2_direct.LINK, 1.0, now=t) for t in (20.0, 21.0, 22.0)][-1]
        assert shrink is not None and shrink.kind == "shrink"
        assert execute(shrink.plan, net, run_parallel=threaded).state == "done"
        assert te_rules(net) == [] and hops(net.all_xcons()) == hops(DIRECT)
    finally:
        net.close()


# ---- records and the store ----------------------------------------------------------------------------
def test_an_offload_record_round_trips_through_json():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
    finally:
        net.close()
    back = TeRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back.to_json() == rec.to_json()
    assert back.body.flows == off.flows and back.ingress == off.ingress and back.xcons == off.xcons
    assert back.epoch == 3 and back.threshold_mbps == 1.0 and back.owner == f"te:{off.ident}"


def records_for_store():
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        return offloaded(net)[1]
    finally:
        net.close()


def test_the_file_store_survives_a_restart_and_fences_old_epochs(tmp_path):
    rec = records_for_store()
    path = te_state_path(str(tmp_path / "controller-state.json"))
    assert path == str(tmp_path / "controller-state.te.json")
    store = open_store(str(tmp_path / "controller-state.json"))
    assert isinstance(store, FileTeStore) and store.load() == []
    store.put(rec)
    again = FileTeStore(path)  # a new process
    assert [r.to_json() for r in again.load()] == [rec.to_json()] and again.epoch == 3
    with pytest.raises(StaleEpoch):  # a deposed leader (epoch 2) cannot write after epoch 3
        again.put(with_state(rec, RELEASING, epoch=2))
    with pytest.raises(StaleEpoch):
        again.remove(rec.kind, rec.ident, epoch=2)
    assert FileTeStore(path).load()[0].state == LIT
    again.remove(rec.kind, rec.ident, epoch=4)
    assert FileTeStore(path).load() == [] and FileTeStore(path).epoch == 4
    assert list(tmp_path.iterdir()) == [tmp_path / "controller-state.te.json"]  # no temporary file left


def test_no_state_file_keeps_records_in_memory_only():
    store = open_store("")
    assert isinstance(store, MemoryTeStore) and not isinstance(store, FileTeStore)
    rec = records_for_store()
    store.put(rec)
    assert store.load() == [rec]


@pytest.mark.parametrize("text, why", [
    ("{", "not JSON"), ('{"format": "other"}', "not an mlte TE state file"),
    ('{"format": "mlte-te-state", "version": 9}', "version 9"),
    ('{"format": "mlte-te-state", "version": 1, "records": [{"kind": "offload"}]}', "records[0]"),
    ('{"format": "mlte-te-state", "version": 1, "records": [{"kind": "teleport", "body": {}}]}', "teleport"),
])
def test_a_bad_store_file_is_a_one_line_error(tmp_path, text, why):
    p = tmp_path / "s.te.json"
    p.write_text(text)
    with pytest.raises(StoreError) as err:
        FileTeStore(p)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_an_orphan_rule_never_takes_a_recorded_circuit_down():
    """A stray steer rule of another id that outputs into a recorded offload's circuit: the rule goes,
    the circuit stays with its record."""
    net = fig2.FakeNetwork.from_spec(fig2.fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload(INITIAL, [])
        off, rec = offloaded(net)
        stray = FlowRule("A", "steer", off.ident + 5, off.ingress[0].priority,
                         (("in_port", 2), ("eth_type", 0x0800), ("ipv4_dst", "10.0.0.4")), off.ends[0][1])
        assert net.install_flow(stray).ok
        result = adopt([rec], state_of(net, the_circuit(off)))
        assert [r.key for r in result.keep] == [rec.key]
        (rel,) = result.release
        assert rel.record is None and [s.kind for s in rel.plan.steps] == ["flow_remove"]
        assert result.max_ident[OFFLOAD] == off.ident + 5
    finally:
        net.close()


def test_the_controller_refuses_a_bad_te_state_file_in_one_line(tmp_path, capsys):
    from app.cli.main import main

    (tmp_path / "state.json").write_text('{"format": "mlte-controller-state", "version": 1}')
    (tmp_path / "state.te.json").write_text('{"format": "mlte-te-state", "version": 1, "records": 3}')
    assert main(["controller", "--state-file", str(tmp_path / "state.json"), "--of-port", "1", "--api-port", "2"]) == 2
    err = capsys.readouterr().err
    assert "TE state file" in err and "'records' must be a list" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
