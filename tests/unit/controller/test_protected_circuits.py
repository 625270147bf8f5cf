"""1+1 protected reservations: both paths lit, fast-failover groups at the ends (app/controller/protected_circuits.py).

Through the fake flow table (the controller's real OpenFlow applied by fake switches wired like Fig. 2): a
probe from A's host port reaches C's host port on the working path; once A's working port is down in
the fake table the same probe leaves on the protection path, with no controller message in between.
Through the fake network: the reservation manager provisions, verifies and releases a 1+1 order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from app.controller import protected_circuits as pcs
from app.controller import reservation_manager as rv
from app.controller.ots_driver import OtsDriver
from app.controller.reservation_circuits import ReservationPathError
from app.update.executor import execute
from app.update.model import GroupSpec, XconSpec
from app.update.plan import INGRESS, FlowStep, GroupStep, VerifyStep, XconStep
from pce.protection import protected_paths, reprotect
from pce.reservation import PathRequest
from tests.lib.offabric import OFFabric
from tests.unit.controller.test_reservations import FakeStore, Order, manager, net  # noqa: F401
from topology import rule_plan
from topology.spec import fig2_testbed, spec_to_graph

TCP = {"ip_proto": 6, "tcp_src": 40000, "tcp_dst": 5001}


def pair(ident: int = 9) -> pcs.ProtectedCircuit:
    g = spec_to_graph(fig2_testbed())
    pp = protected_paths(g, PathRequest("A:1", "C:3", 5, 0, 3600))
    return pcs.protected_circuit(g, ident, "A:1", "C:3", pp.working.edges, pp.protection.edges)


def test_both_paths_become_one_circuit_with_a_failover_group_at_each_end():
    pc = pair()
    assert pc.groups == (GroupSpec("A", 9, (3, 4)), GroupSpec("C", 9, (1, 2)))
    assert {(r.switch, r.match_dict()["in_port"], r.group, r.out_port) for r in pc.circuit.ingress} == {
        ("A", 1, 9, 3), ("C", 3, 9, 1)}
    # at each far end a rule for both arrival ports
    assert {(r.switch, r.match_dict()["in_port"], r.out_port) for r in pc.circuit.transit} == {
        ("C", 1, 3), ("C", 2, 3), ("A", 3, 1), ("A", 4, 1)}
    assert set(pc.circuit.xcons) == {XconSpec("X", 1, 3), XconSpec("Z", 3, 2), XconSpec("X", 4, 5),
                                     XconSpec("Z", 5, 4)}
    assert pc.circuit.segments == ((("A", 3), ("C", 1)), (("A", 4), ("C", 2)))
    assert pcs.groups_of(pc.circuit) == pc.groups  # read back from the circuit alone (after a restart)
    g = spec_to_graph(fig2_testbed())
    working = protected_paths(g, PathRequest("A:1", "C:3", 5, 0, 3600)).working.edges
    with pytest.raises(ReservationPathError, match="not disjoint"):
        pcs.protected_circuit(g, 9, "A:1", "C:3", working, working)


def test_the_plan_sets_the_groups_before_the_ingress_and_verifies_on_the_working_path():
    pc = pair()
    plan = pcs.provision_plan(pc, stable_ms=5)
    groups = [s for s in plan.steps if isinstance(s, GroupStep)]
    ingress = [s for s in plan.steps if isinstance(s, FlowStep) and s.role == INGRESS]
    assert len(groups) == 2 and all(g.id in plan.ancestors(i.id) for g in groups for i in ingress)
    (verify,) = [s for s in plan.steps if isinstance(s, VerifyStep)]
    assert set(verify.rules) == set(pc.circuit.ingress) | set(pc.working.transit)
    assert not set(verify.rules) & set(pc.protection.transit)  # no traffic there while the working path is up


def sent(fabric: OFFabric) -> int:
    return sum(len(dp.sent) for dp in fabric.dps.values())


def test_the_ingress_switch_fails_over_by_itself_when_the_working_port_goes_down():
    fabric = OFFabric(fig2_testbed())
    OtsDriver(**fabric.contexts())  # the XCONs go through the controller's OTS driver
    fabric.auto_links = True  # the plan waits for both circuits' links: let the view follow the light
    live = fabric.live()
    pc = pair(9)
    rec = execute(pcs.provision_plan(pc, verify=False, stable_ms=5, circuit_timeout_s=1.0), live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    h1_h3, h3_h1 = fabric.packet("h1", "h3", **TCP), fabric.packet("h3", "h1", **TCP)
    assert fabric.path("h1", h1_h3) == [("A", 1, 3), ("C", 1, 3)]  # the working path
    assert fabric.path("h3", h3_h1) == [("C", 3, 1), ("A", 3, 1)]
    before = sent(fabric)
    fabric.table("A").port_down(3)  # the working fibre is cut: A:3 loses light
    assert fabric.path("h1", h1_h3) == [("A", 1, 4), ("C", 2, 3)]  # out on the protection path
    fabric.table("C").port_down(1)
    assert fabric.path("h3", h3_h1) == [("C", 3, 2), ("A", 4, 1)]
    assert sent(fabric) == before  # no controller message was needed for either switch-over
    fabric.table("A").port_down(3, down=False)
    assert fabric.path("h1", h1_h3) == [("A", 1, 3), ("C", 1, 3)]  # back on the working path once it is up
    rec = execute(rv_release_plan(pc), live, sleep=time.sleep)
    assert rec.state == "done", rec.error
    for sw in ("A", "C"):
        assert fabric.table(sw).groups == {}
        assert fabric.table(sw).rules_with(rule_plan.RESERVATION.cookie(9), rule_plan.RESERVATION.mask(True)) == []
    assert fabric.far_end(("A", 3)) is None and fabric.far_end(("A", 4)) is None


def test_after_a_cut_the_pair_is_protected_again_on_a_new_disjoint_path():
    """Working path A:3 … X:3–Z:3 … C:1 cut: the switches fail over to A:4/C:2, pce finds a new path
    around the survivor and the cut (by Y), the re-protection plans light it, and a second cut on the
    survivor fails over to it, again with no controller message."""
    fabric = OFFabric(fig2_testbed())
    OtsDriver(**fabric.contexts())
    fabric.auto_links = True
    live = fabric.live()
    g = spec_to_graph(fig2_testbed())
    req = PathRequest("A:1", "C:3", 5, 0, 3600)
    pp = protected_paths(g, req)
    pc = pcs.protected_circuit(g, 9, "A:1", "C:3", pp.working.edges, pp.protection.edges)
    assert execute(pcs.provision_plan(pc, verify=False, stable_ms=5, circuit_timeout_s=1.0), live,
                   sleep=time.sleep).state == "done"
    fabric.table("A").port_down(3)  # fibre X:3–Z:3 cut: both ends of the working circuit go dark
    fabric.table("C").port_down(1)
    h1_h3 = fabric.packet("h1", "h3", **TCP)
    assert fabric.path("h1", h1_h3) == [("A", 1, 4), ("C", 2, 3)]
    new_path = reprotect(g, req, pp.protection.edges, failed=["optical:X:3-Z:3"])
    assert "optical:X:2-Y:1" in new_path.edges  # it reuses X:1 and Z:2 of the failed path
    new = pcs.protected_circuit(g, 9, "A:1", "C:3", pp.protection.edges, new_path.edges)
    down, up = pcs.reprotect_plans(pc.circuit, new, verify=False, stable_ms=5, circuit_timeout_s=1.0)
    assert {s.xcon for s in down.steps if isinstance(s, XconStep)} == {XconSpec("X", 1, 3), XconSpec("Z", 3, 2)}
    for plan in (down, up):
        rec = execute(plan, live, sleep=time.sleep)
        assert rec.state == "done", rec.error
    assert fabric.table("A").live_bucket(9).watch_port == 4  # the survivor first now
    assert [b.watch_port for b in fabric.table("C").groups[9]] == [2, 1]
    fabric.table("A").port_down(3, down=False)  # the new circuit lights A:3 and C:1 again
    fabric.table("C").port_down(1, down=False)
    assert fabric.path("h1", h1_h3) == [("A", 1, 4), ("C", 2, 3)]  # traffic stayed on the survivor
    before = sent(fabric)
    fabric.table("A").port_down(4)  # now the survivor is cut too
    assert fabric.path("h1", h1_h3) == [("A", 1, 3), ("C", 1, 3)]  # onto the new protection path (by Y)
    assert fabric.far_end(("A", 3)) == ("C", 1) and sent(fabric) == before
    assert pcs.groups_of(new.circuit) == new.groups


def test_a_failed_reprotection_puts_the_old_groups_back():
    pc = pair(9)
    g = spec_to_graph(fig2_testbed())
    req = PathRequest("A:1", "C:3", 5, 0, 3600)
    pp = protected_paths(g, req)
    new = pcs.protected_circuit(g, 9, "A:1", "C:3", pp.protection.edges,
                                reprotect(g, req, pp.protection.edges, failed=["optical:X:3-Z:3"]).edges)
    _down, up = pcs.reprotect_plans(pc.circuit, new, stable_ms=5)
    sets = [s for s in up.steps if isinstance(s, GroupStep)]
    assert {s.restore for s in sets} == set(pc.groups)
    assert {s.inverse().group for s in sets} == set(pc.groups)  # undo re-sets them, never deletes


def rv_release_plan(pc: pcs.ProtectedCircuit):
    from app.update import planner

    c = pc.circuit
    return planner.release(c.xcons, list(c.transit), list(c.ingress), drain=False, groups=pcs.groups_of(c))


@dataclass
class ProtectedOrder(Order):
    protection: str = "1+1"


def protected_order(ident: int) -> ProtectedOrder:
    g = spec_to_graph(fig2_testbed())
    return ProtectedOrder(ident, path=protected_paths(g, PathRequest("A:1", "C:3", 5, 0, 3600)).to_dict())


def test_the_manager_lights_both_paths_and_the_data_plane_survives_the_cut(net):  # noqa: F811
    store = FakeStore()
    m, _events = manager(net, store)
    out = m.provision(protected_order(7))
    assert out.ok and store.states[7] == "ACTIVE", out
    assert len(net.all_xcons()) == 4 and net.groups == {"A": {7: (3, 4)}, "C": {7: (1, 2)}}
    inst = store.installed[7]
    assert [(c.a_end, c.z_end) for c in inst.circuits] == [("A:3", "C:1"), ("A:4", "C:2")]
    assert sum("group" in r.actions[-1] for r in inst.rules) == 2 and len(inst.rules) == 6
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    assert net.trace("h1", {})[0] == ("A", 1, 3)
    net.break_port(("A", 3))
    assert net.trace("h1", {})[0] == ("A", 1, 4) and net.delivered_to("h1", {}) == "h3"
    back = rv.installed_circuit(inst)  # after a restart: the groups come back from the stored rules
    assert pcs.groups_of(back) == pcs.groups_of(m.active[7])
    out = m.release(inst)
    assert out.ok and net.all_xcons() == set() and net.all_flows() == []
    assert net.groups == {"A": {}, "C": {}}


def test_a_protected_order_whose_pair_is_taken_gets_a_new_pair_or_fails(net):  # noqa: F811
    store = FakeStore()
    busy = {"X": {5}}  # another circuit holds X:5, on the stored protection path
    m, _events = manager(net, store, busy_ports=lambda ots: busy.get(ots, set()))
    out = m.provision(protected_order(8))
    assert out.ok, out
    assert not any(x.ots == "X" and 5 in x.ports for x in net.all_xcons())
    assert any(x.ots == "Y" for x in net.all_xcons())  # the new protection path goes round by Y
    assert m.release(store.installed[8]).ok
    busy["X"] = {2, 5}  # and X:2: no way round any more
    out = m.provision(protected_order(9))
    assert not out.ok and "no other pair" in store.reasons[9] and "1+1 protection" in store.reasons[9]
    assert net.all_xcons() == set() and net.all_flows() == []


def test_reprotection_picks_the_survivor_and_routes_around_the_failure_and_other_circuits():
    g = spec_to_graph(fig2_testbed())
    order = protected_order(9)
    pc = pcs.protected_circuit(g, 9, "A:1", "C:3", order.path["edges"], order.path["protection"]["edges"])
    held = {"X": {1, 3, 4, 5}, "Z": {2, 3, 4, 5}}  # this reservation's own XCONs

    def busy(ots, more=None):
        return held.get(ots, set()) | (more or {}).get(ots, set())

    r = pcs.reprotection(g, order, pc.circuit, ["X:3", "Z:3"], busy, verify=False)  # the working fibre
    assert r.path["nodes"] == order.path["protection"]["nodes"]  # the protection path is the working one now
    assert "optical:X:2-Y:1" in r.path["protection"]["edges"] and "X:1" in r.path["protection"]["oports"]
    assert {s.xcon for s in r.down.steps if isinstance(s, XconStep)} == {XconSpec("X", 1, 3), XconSpec("Z", 3, 2)}
    assert r.new.groups == (GroupSpec("A", 9, (4, 3)), GroupSpec("C", 9, (2, 1)))
    r = pcs.reprotection(g, order, pc.circuit, ["X:5"], busy)  # the protection fibre: the working path stays
    assert r.path["nodes"] == order.path["nodes"] and "X:5" not in r.path["protection"]["oports"]
    assert r.new.groups == pc.groups
    with pytest.raises(ReservationPathError, match="both paths"):
        pcs.reprotection(g, order, pc.circuit, ["X:3", "X:5"], busy)
    with pytest.raises(ReservationPathError, match="re-protection"):  # Y is another circuit's: no way round
        pcs.reprotection(g, order, pc.circuit, ["X:3"], lambda ots: busy(ots, {"Y": {1, 4}}))
