"""Revert (docs/failures.md, "Revert"): a reservation restored around a cut goes back to its original path
once the fibre is repaired and the hold time passed, make-before-break, over the fake Fig. 2 network —
or stays on its restoration path, whole, and says why."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

from app.controller.model import OTS, PortInfo, SwitchInfo
from app.controller.reservation_circuits import circuit_for
from app.controller.reservation_manager import Original
from app.controller.revert_hold import RevertHold
from tests.unit.controller.test_reservations import Order, manager, net, stored_path  # noqa: F401
from tests.unit.controller.test_restoration import RestoringStore
from topology.spec import fig2_testbed, spec_to_graph

CUT = ("X:3", "Z:3")


@dataclass
class RevertStore(RestoringStore):
    stored: dict[int, dict] = field(default_factory=dict)  # the path the store holds now
    booked: dict[str, int] = field(default_factory=dict)  # optical port -> another reservation booking it

    def mark_restored(self, res_id, circuits, rules, path, restoration, now):
        self.stored[res_id] = path
        return super().mark_restored(res_id, circuits, rules, path, restoration, now)

    def mark_reverted(self, res_id, circuits, rules, path, restoration, now):
        self.stored[res_id] = path
        self.restorations.append({**restoration, "outcome": "reverted", "finished_ts": now})
        return self.mark_active(res_id, circuits, rules, now)

    def revert_refused(self, res_id, reason, restoration, now):
        self.restorations.append({**restoration, "outcome": "revert_failed", "reason": reason})
        return True

    def booked_elsewhere(self, res_id, oports, now):
        return {p: r for p, r in self.booked.items() if p in oports}


def _restored(net, store, **kw):  # noqa: F811
    """Reservation 7 lit on A:3–X:1⇒X:3–Z:3⇒Z:2–C:1, the fibre X:3–Z:3 cut, restored around it, repaired."""
    m, events = manager(net, store, revertive=True, **kw)
    order = stored_path(Order(7))
    assert m.provision(order).ok
    original = {(x.ots, p) for x in m.active[7].xcons for p in x.ports}
    net.cut_fibre(("X", 3))
    assert m.restore(order, "loss of light at X:3", 100.0, avoid=CUT).ok
    order.path = store.stored[7]
    assert order.path["original"]["edges"] == stored_path(Order(7)).path["edges"]  # it keeps knowing it
    assert not original & {(x.ots, p) for x in m.active[7].xcons for p in x.ports}  # kept off the original
    net.cut_fibre(("X", 3), repair=True)
    return m, events, order


def _xc(xcons) -> set:
    return {(x.ots, x.ports) for x in xcons}


def _flows(net) -> set:  # noqa: F811
    return {(r.switch, r.priority, r.match, r.out_port) for r in net.all_flows()}


def _lit(c) -> set:
    return {(r.switch, r.priority, r.match, r.out_port) for r in c.rules}


def test_a_restored_reservation_goes_back_to_its_original_path_without_loss(net):  # noqa: F811
    store = RevertStore()
    m, events, order = _restored(net, store)
    assert set(m.originals) == {7}
    lost, sent, stop = [0], [0], threading.Event()

    def traffic() -> None:  # the reservation's own traffic, both ways, all through the revert
        while not stop.wait(0.002):
            for src, dst in (("h1", "h3"), ("h3", "h1")):
                sent[0] += 1
                lost[0] += net.delivered_to(src, {"eth_dst": f"00:00:00:00:00:0{dst[1]}"}) != dst

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    try:
        out = m.revert(order, clear_since=200.0)
    finally:
        stop.set()
        t.join()
    assert out.ok and out.state == "ACTIVE", out
    assert lost[0] == 0 and sent[0] > 20  # make before break: not one packet lost
    back = circuit_for(spec_to_graph(fig2_testbed()), 7, "A:1", "C:3", stored_path(Order(7)).path["edges"])
    assert _xc(net.all_xcons()) == _xc(back.xcons)  # the original's XCONs, nothing of the restoration path
    assert _flows(net) == _lit(back)
    assert m.active[7].xcons == back.xcons and 7 not in m.originals
    assert store.stored[7]["edges"] == back_edges(order) and "original" not in store.stored[7]
    row = store.restorations[-1]
    assert row["outcome"] == "reverted" and row["cause"] == "revert" and row["detected_ts"] == 200.0
    assert row["new_path"] == back_edges(order) and "optical:X:5-Z:5" in row["old_path"]
    plan = store.plans[-1]
    assert plan["kind"] == "move" and plan["state"] == "done"
    at = {s["id"]: i for i, s in enumerate(plan["steps"])}
    first_remove = min(i for s, i in at.items() if s.startswith("xcon-"))
    assert max(i for s, i in at.items() if s.startswith("xcon+")) < at["verify"] < first_remove
    assert any(k == "reservation_reverted" for k, _ in events)
    assert m.runner.ports.reserved_ports == set(back.packet_ports)  # the restoration path's ports given back


def back_edges(order) -> list[str]:
    return order.path["original"]["edges"]


def test_a_revert_refused_for_lack_of_capacity_stays_on_the_restoration_path(net):  # noqa: F811
    store = RevertStore()
    held = {"X": set()}
    m, _, order = _restored(net, store, busy_ports=lambda ots: held.get(ots, set()))
    now = m.active[7]
    before = (net.all_xcons(), _flows(net))
    held["X"] = {1, 5, 4}  # X:1 (the original's) lit by another circuit since; X:4, X:5 are ours
    out = m.revert(order, clear_since=200.0)
    assert not out.ok and out.state == "ACTIVE" and "X:1" in out.reason and "held by another" in out.reason
    held["X"] = {5, 4}
    store.booked = {"Z:2": 12}  # the original's Z:2 booked by reservation 12 in our window
    out = m.revert(order, clear_since=200.0)
    assert not out.ok and "Z:2 (reservation 12)" in out.reason
    assert (net.all_xcons(), _flows(net)) == before and m.active[7] is now and 7 in m.originals
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    assert [r["outcome"] for r in store.restorations[-2:]] == ["revert_failed", "revert_failed"]


def test_a_failed_revert_plan_leaves_nothing_half_installed(net):  # noqa: F811
    store = RevertStore()
    m, events, order = _restored(net, store)
    now = m.active[7]
    before = (net.all_xcons(), _flows(net))
    net.refuse_flow("C")  # the original's rules at C cannot go in: after its XCONs were lit
    out = m.revert(order, clear_since=200.0)
    assert not out.ok and out.state == "ACTIVE" and "rolled back" in out.reason, out
    assert (net.all_xcons(), _flows(net)) == before  # the original's XCONs gone again, nothing else touched
    assert m.active[7] is now and 7 in m.originals
    assert m.runner.ports.reserved_ports == set(now.packet_ports)
    assert net.delivered_to("h1", {"eth_dst": "00:00:00:00:00:03"}) == "h3"
    assert net.delivered_to("h3", {"eth_dst": "00:00:00:00:00:01"}) == "h1"
    assert store.plans[-1]["state"] == "rolled_back" and store.restorations[-1]["outcome"] == "revert_failed"
    assert any(k == "reservation_revert_failed" for k, _ in events)


def test_a_protected_reservation_is_not_revertive(net):  # noqa: F811
    from tests.unit.controller.test_protected_circuits import protected_order

    store = RevertStore()
    m, _ = manager(net, store, revertive=True)
    order = protected_order(21)
    assert m.provision(order).ok
    working = [e for e in order.path["edges"] if e.startswith("optical:")][0][len("optical:"):].split("-")
    net.cut_fibre((working[0].split(":")[0], int(working[0].split(":")[1])))
    assert m.restore(order, "loss of light", 100.0, avoid=tuple(working)).ok
    assert 21 not in m.originals and "original" not in (store.stored.get(21) or {})


def test_the_hold_restarts_on_every_fault_and_backs_off_after_a_failed_try() -> None:
    h = RevertHold(30.0)
    h.observe(7, True, 100.0)
    h.observe(7, True, 110.0)
    assert h.due(129.0) == [] and h.due(130.0) == [7]
    h.observe(7, False, 131.0)  # a flap on the original path: the hold starts again when it is clear
    h.observe(7, True, 132.0)
    assert h.due(161.0) == [] and h.due(162.0) == [7]
    h.tried(7, False, 162.0)
    assert h.due(191.0) == [] and h.due(192.0) == [7]
    h.tried(7, False, 192.0)
    assert h.due(251.0) == [] and h.due(252.0) == [7]  # doubled
    h.tried(7, True, 252.0)
    assert h.due(1000.0) == [] and h.to_json() == {}
    h.observe(8, True, 0.0)
    h.keep([])
    assert h.due(1000.0) == []


def _app(monkeypatch, clock):
    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.network_view import NetworkView
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound
    from pce.reservation import PathRequest, compute_path

    view = NetworkView()
    view.add_switch(SwitchInfo(0xF01, OTS, 1, "X", {1: PortInfo(1, "p1", "00:00:00:00:00:00", False, admin_down=True),
                                                  3: PortInfo(3, "p3", "00:00:00:00:00:00", False, admin_down=True)}))
    app = reservations_app.ReservationsApp(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    app.writer = SimpleNamespace()  # a database is configured: answered by the fake _db below
    app.adopted = True
    app._db = lambda name, *a: []
    g = spec_to_graph(fig2_testbed())
    app.manager.graph = lambda: g
    original = stored_path(Order(5)).path
    detour = compute_path(g, PathRequest("A:1", "C:3", 5.0, 0, 3600, exclude=tuple(original["oports"]))).edges
    app.manager.active[5] = circuit_for(g, 5, "A:1", "C:3", detour, None)
    app.manager.originals[5] = Original("A:1", "C:3", original)
    app.reverts.hold_s = 30.0
    spawned: list = []
    monkeypatch.setattr(reservations_app.hub, "spawn", lambda fn, *a: spawned.append(a[0]))
    monkeypatch.setattr(reservations_app, "time", SimpleNamespace(time=lambda: clock[0]))
    return app, view, spawned


def test_the_app_reverts_after_the_hold_a_flap_restarts_it_and_a_freeze_or_off_holds_it(monkeypatch) -> None:
    clock = [100.0]
    app, view, spawned = _app(monkeypatch, clock)
    app._follow_once()
    clock[0] = 1000.0
    app._follow_once()
    assert spawned == [] and app.r_reservations({}, {})["revert"]["waiting"] == {}  # off (the default)
    app.revert_on = True
    clock[0] = 100.0
    app._follow_once()  # the original path is clear from now on
    assert app.r_reservations({}, {})["revert"]["waiting"]["5"]["due_at"] == 130.0
    clock[0] = 110.0
    view.set_port(0xF01, 3, PortInfo(3, "p3", "00:00:00:00:00:00", False), 110.0)  # X:3 fails: a flap
    app._network_changed(None)
    assert app.r_reservations({}, {})["revert"]["waiting"] == {}
    clock[0] = 111.0
    view.set_port(0xF01, 3, PortInfo(3, "p3", "00:00:00:00:00:00", False, admin_down=True), 111.0)  # back
    app._network_changed(None)
    clock[0] = 131.0
    app._follow_once()
    assert spawned == []  # the hold restarted at 111
    clock[0] = 141.5
    app.r_restoration({}, {"frozen": True, "reason": "maintenance"})
    app._follow_once()
    assert spawned == []  # frozen: nothing moves
    app.r_restoration({}, {"frozen": False})
    app._follow_once()
    assert spawned == [5] and 5 in app.busy
    app._follow_once()
    assert spawned == [5]  # being reverted


def test_revertive_mode_is_set_at_run_time_and_bad_input_is_refused(monkeypatch) -> None:
    from app.controller.control_api import ApiError

    app, _, _ = _app(monkeypatch, [100.0])
    assert app.r_restoration({}, {"revert": True, "revert_hold_s": 2}) == {"revert": True, "revert_hold_s": 2.0}
    assert app.manager.revertive is True and app.r_reservations({}, {})["revert"]["hold_s"] == 2.0
    for bad in ({"revert": "yes"}, {"revert_hold_s": -1}, {"revert_hold_s": True}, {"revert_hold_s": "2"}):
        try:
            app.r_restoration({}, bad)
        except ApiError as exc:
            assert exc.status == 400
        else:
            raise AssertionError(f"accepted {bad}")
    app.r_restoration({}, {"revert": False})
    assert app.revert_on is False and app.manager.revertive is False


def test_a_retry_that_lights_the_original_path_again_has_nothing_to_revert(net):  # noqa: F811
    store = RevertStore()
    m, _ = manager(net, store, revertive=True)
    order = stored_path(Order(8))
    assert m.provision(order).ok
    for p in (2, 3, 5, 6):  # every fibre of X: no path, DEGRADED
        net.cut_fibre(("X", p))
    assert m.restore(order, "loss of light at X:3", 100.0, avoid=("X:2", "X:3", "X:5", "X:6", "Y:1", "Z:3", "Z:5",
                                                                     "Z:6")).state == "DEGRADED"
    for p in (2, 3, 5, 6):
        net.cut_fibre(("X", p), repair=True)
    assert m.restore(order, "retry 2 after a failure", 100.0, avoid=(), attempt=2).ok
    assert store.stored[8]["edges"] == order.path["edges"] and "original" not in store.stored[8]
    assert 8 not in m.originals
