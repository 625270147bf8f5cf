"""A latency change point is a path change only where the light path changed or is unknown
(monitor/path_corroboration.py): the demo's two "path change" warnings on circuits nobody touched
(issue 26) were the userspace switches' load moving the probes' latency by ~1 ms."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from monitor.path_corroboration import LATENCY_SHIFT, RouteMemory
from monitor.probes import PATH_CHANGE

XY = (("X", 1, 2), ("Y", 1, 2))
XZ = (("X", 1, 3), ("Z", 3, 2))


def test_an_unchanged_light_path_makes_a_latency_shift_and_a_changed_one_a_path_change():
    m = RouteMemory()
    m.seen("packet:A:3-B:1", XY)
    kind, detail = m.judge("packet:A:3-B:1", XY)
    assert kind == LATENCY_SHIFT and detail["route"] == "unchanged" and detail["hops"] == [["X", 1, 2], ["Y", 1, 2]]
    kind, detail = m.judge("packet:A:3-B:1", XZ)  # restoration re-routed the circuit under the link
    assert kind == PATH_CHANGE and detail["hops_before"] == [["X", 1, 2], ["Y", 1, 2]]
    assert m.judge("packet:A:3-B:1", XZ)[0] == LATENCY_SHIFT  # the new path is the base now


def test_a_link_whose_path_the_controller_does_not_know_is_the_seeds_case():
    m = RouteMemory()
    m.seen("packet:A:2-Z:2", None)
    assert m.judge("packet:A:2-Z:2", None) == (PATH_CHANGE, {"route": "unknown"})
    m.seen("packet:A:3-B:1", None)  # probed before the circuit was known as one of ours
    assert m.judge("packet:A:3-B:1", XY)[0] == PATH_CHANGE


def test_seen_keeps_the_path_of_the_base_and_forgotten_links_start_afresh():
    m = RouteMemory()
    m.seen("l", XY)
    m.seen("l", XZ)  # later probes do not move the remembered path: only a change point does
    assert m.judge("l", XZ)[0] == PATH_CHANGE
    m.forget_except([])
    m.seen("l", XY)
    assert m.judge("l", XY)[0] == LATENCY_SHIFT


def test_the_monitor_app_reports_a_shift_on_an_untouched_circuit_as_info_not_a_path_change(monkeypatch, caplog):
    from app.controller.api_routes import CONTEXT as ROUTES
    from app.controller.api_routes import ApiRoutes
    from app.controller.monitor_app import MonitorApp
    from app.controller.network_view import CONTEXT as VIEW
    from app.controller.network_view import NetworkView
    from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
    from app.controller.openflow_southbound import OpenFlowSouthbound
    from mininet_labs.circuits import FIG2_CIRCUITS
    from monitor.latency import ChangePoint
    from topology.spec import fig2_testbed, spec_to_graph

    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["initial"]:
        g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
    g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
    g.add_packet_link("B", 2, "C", 1, 10.0, source="lldp")
    view = NetworkView()
    monkeypatch.setattr(view, "graph", lambda: (g, []))
    app = MonitorApp(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    published: list = []
    app.send_event_to_observers = lambda ev: published.append(ev.event)
    paths = app._light_paths()
    assert set(paths) == {"packet:A:3-B:1", "packet:B:2-C:1"}
    route = paths["packet:A:3-B:1"]
    app.path_memory.seen("packet:A:3-B:1", route)
    with caplog.at_level(logging.INFO, logger="mlte.controller.monitor"):
        app._path_change("packet:A:3-B:1", ChangePoint(20.0, 1.13, 2.05), route)  # the demo's figures
        app._path_change("packet:A:9-Q:1", ChangePoint(21.0, 1.0, 4.0), None)
    kinds = [(e.circuit, e.kind) for e in published]
    assert kinds == [("packet:A:3-B:1", LATENCY_SHIFT), ("packet:A:9-Q:1", PATH_CHANGE)]
    levels = {r.getMessage().split(" on ")[0]: r.levelno for r in caplog.records if "monitor event" in r.getMessage()}
    assert levels == {"monitor event latency_shift": logging.INFO, "monitor event path_change": logging.WARNING}
    assert SimpleNamespace(**published[0].detail).route == "unchanged"
