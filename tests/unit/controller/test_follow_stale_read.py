"""The reservation app does not start a reservation again from a database read that began before its
last provision ended (germany50: a backbone reservation lit at t was provisioned a second time from a
read begun just before t, failed on its own ports and ended FAILED, and its circuit was released)."""
from __future__ import annotations

from types import SimpleNamespace


def _app(monkeypatch):  # noqa: ANN001, ANN202
    from app.controller import reservations_app
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.network_view import NetworkView
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound

    app = reservations_app.ReservationsApp(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound(),
                                               ROUTES: ApiRoutes()})
    app.writer = SimpleNamespace()
    app.adopted = True
    spawned: list = []
    monkeypatch.setattr(reservations_app.hub, "spawn", lambda fn, *a: spawned.append(a[0]))
    return app, spawned


def test_a_provision_that_ends_while_the_due_read_runs_is_not_started_again(monkeypatch) -> None:
    app, spawned = _app(monkeypatch)
    order = SimpleNamespace(id=50)
    done = SimpleNamespace(to_json=lambda: {"state": "ACTIVE"})
    reads: list[str] = []

    def db(name, *a):  # noqa: ANN001, ANN002, ANN202
        reads.append(name)
        dues = reads.count("due")
        if name == "due" and dues == 1:
            app._guarded(50, lambda _o: done, order)  # the running provision ends while the read runs
            return [order]  # ... which still saw the row as due
        if name == "due" and dues == 2:
            return [order]  # a read begun after the end: still due (e.g. its provision failed): retried
        return []

    app._db = db
    app.busy.add(50)  # being provisioned when the pass begins
    app._follow_once()
    assert spawned == [] and 50 not in app.busy
    app._follow_once()
    assert spawned == [50] and 50 in app.busy
    assert app._ended == {}  # forgotten once a later read has seen it
