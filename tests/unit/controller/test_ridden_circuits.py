"""The TE loop leaves the circuits live reservations ride alone (grooming, issue 28): no imbalance or
growth named on such a circuit moves their traffic, and no TE plan releases or re-programs one of its
XCONs — checked on plain values and through the TE app's executor path over the fake Fig. 2 network."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.controller.journal import JOURNAL
from app.controller.plan_runner import PlanRunner
from app.controller.reservation_circuits import LIT_CONTEXT, LitReservations, ReservationCircuit, circuit_for
from app.controller.ridden_circuits import (
    held_share,
    link_riders,
    plan_refusal,
    ridden_xcons,
    shared_circuits,
)
from app.controller.runtime import SETTINGS
from app.update import planner
from app.update.model import XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import ELEPHANT_GONE
from tests.unit.controller.test_groomed_reservations import groomed_orders
from tests.unit.te.test_placement_app import _View, imbalance, net, with_traffic  # noqa: F401
from topology.spec import fig2_testbed, spec_to_graph

A_B = (XconSpec("X", 1, 2), XconSpec("Y", 1, 2))  # Fig. 2's "initial" circuit A:3–B:1


def riders_of(xcons: tuple[XconSpec, ...], ends, ids=(1, 2)) -> dict[int, ReservationCircuit]:  # noqa: ANN001
    return {i: ReservationCircuit(i, xcons, (ends,), (xcons,), (), (), 10.0) for i in ids}


def test_plan_refusal_and_link_riders_on_plain_values() -> None:
    g = spec_to_graph(fig2_testbed())
    lit = {o.id: circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan) for o in groomed_orders(3)}
    assert ridden_xcons(lit) == {("X", frozenset({1, 3})): [1, 2, 3], ("Z", frozenset({2, 3})): [1, 2, 3]}
    release = planner.release([XconSpec("Z", 2, 3)], [], [], drain=False)  # either direction is the same XCON
    why = plan_refusal(release, lit)
    assert why is not None and "Z 2<->3" in why and "1, 2, 3" in why
    assert plan_refusal(release, {}) is None
    assert plan_refusal(planner.release([XconSpec("X", 4, 5)], [], [], drain=False), lit) is None
    assert link_riders("packet:A:3-C:1", lit) == [1, 2, 3] and link_riders("packet:A:3-B:1", lit) == []
    # the placement holds a third of the circuit for each sharer (not the whole of it three times)
    alone = riders_of(A_B, (("A", 3), ("B", 1)), ids=(9,))
    assert held_share({**lit, **alone}) == {1: 10 / 3, 2: 10 / 3, 3: 10 / 3, 9: 10.0}
    # what the control API lists: the circuit the three share (the lone one is no unit of several)
    (shared,) = shared_circuits({**lit, **alone})
    assert shared["reservations"] == [1, 2, 3] and shared["ends"] == ["A:3", "C:1"] and len(shared["xcons"]) == 2


def make_app(monkeypatch, fabric, lit: LitReservations):  # noqa: ANN001, ANN201
    from app.controller import te_app

    monkeypatch.setattr(te_app, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    monkeypatch.setattr(SETTINGS, "te", {"stable_ms": 5.0, "verify_timeout": 2.0}, raising=False)
    view = _View()
    app = te_app.TeApp(mlte_network_view=view, mlte_plan_runner=PlanRunner(fabric, view), **{LIT_CONTEXT: lit})
    app.adopted = True
    return app


def lit_xcons(fabric) -> set:  # noqa: ANN001
    return {(x.ots, x.ports) for x in fabric.all_xcons()}


def test_the_placement_holds_a_share_of_a_shared_circuit_for_each_rider(monkeypatch, net) -> None:  # noqa: F811
    from app.te.placement import PlacementDecider

    g = spec_to_graph(fig2_testbed())
    lit = LitReservations({o.id: circuit_for(g, o.id, o.src, o.dst, o.path["edges"], o.src_vlan)
                           for o in groomed_orders(3)})
    monkeypatch.setattr(SETTINGS, "te", {"stable_ms": 5.0, "verify_timeout": 2.0, "placement": "otter"}, raising=False)
    from app.controller import te_app

    app = te_app.TeApp(mlte_network_view=_View(), mlte_plan_runner=PlanRunner(net, _View()), **{LIT_CONTEXT: lit})
    assert isinstance(app.decider, PlacementDecider)
    held = app.decider.reservations(0.0)
    assert sorted(h["id"] for h in held) == [1, 2, 3] and sum(h["bandwidth"] for h in held) == pytest.approx(10.0)


def test_an_imbalance_on_a_circuit_reservations_ride_moves_nothing(monkeypatch, net) -> None:  # noqa: F811
    lit = LitReservations(riders_of(A_B, (("A", 3), ("B", 1))))
    app = make_app(monkeypatch, net, lit)
    before = lit_xcons(net)
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: app._monitor(imbalance()))  # named on packet:A:3-B:1
    (d,) = JOURNAL.since(since, "te_decision")
    assert d["decision"] == "skip" and "carries reservation(s) 1, 2" in d["reason"], d
    assert app.decider.offloads == {} and lit_xcons(net) == before and not JOURNAL.since(since, "te_done")


def test_a_te_release_never_takes_down_an_xcon_a_reservation_rides(monkeypatch, net) -> None:  # noqa: F811
    lit = LitReservations()
    app = make_app(monkeypatch, net, lit)
    with_traffic(net, lambda: app._monitor(imbalance()))  # nobody rides A:3–B:1: the elephant is offloaded
    (off,) = app.decider.offloads.values()
    assert set(off.xcons) and {(x.ots, x.ports) for x in off.xcons} <= lit_xcons(net)
    lit.update(riders_of(off.xcons, off.ends, ids=(5,)))  # say a reservation rides that circuit now
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    from monitor.events import Event

    (rel,) = app.decider.on_event(Event(50.0, off.circuit_id, ELEPHANT_GONE, off.flows, {}), app.view.g, 50.0)
    app._run(rel)
    (d,) = JOURNAL.since(since, "te_decision")
    assert d["decision"] == "skip" and "reservation(s) 5 ride" in d["reason"], d
    assert {(x.ots, x.ports) for x in off.xcons} <= lit_xcons(net) and not JOURNAL.since(since, "te_done")
    lit.clear()  # the reservation ended: the release runs
    app._run(rel)
    (done,) = JOURNAL.since(since, "te_done")
    assert done["ok"] and not {(x.ots, x.ports) for x in off.xcons} & lit_xcons(net)
    assert lit_xcons(net) == {(o, frozenset({p, q})) for o, p, q in FIG2_CIRCUITS["initial"]}
