"""Metrics shim (thin os-ken app, always loaded): ``GET /metrics`` on the control API.

It wires the shared :class:`~app.controller.metrics.ControllerMetrics` (context ``mlte_metrics``) to
the objects it reads at scrape time (the view, the southbound, the mastership: a
:class:`~app.controller.metrics_collector.NetworkCollector`), to the plan runner (each finished
plan's outcome and step times) and to the bus (each ``EventDecision``); the monitor and the TE app
record their cycle and decision times into the same context. Like every control-API route,
``/metrics`` needs the bearer token (docs/monitor.md "Metrics": Prometheus sends it with
``authorization: credentials_file``).
"""
from __future__ import annotations

from typing import Any

from os_ken.base import app_manager
from os_ken.controller.handler import set_ev_cls

from app.controller import events
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes, Text
from app.controller.guard import loud
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.metrics import CONTENT_TYPE, CONTEXT, ControllerMetrics
from app.controller.metrics_collector import NetworkCollector
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_runner import CONTEXT as RUNNER
from app.controller.plan_runner import PlanRunner


class MetricsApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, RUNNER: PlanRunner,
                 MASTERSHIP: Mastership, CONTEXT: ControllerMetrics}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_metrics"
        self.metrics: ControllerMetrics = kwargs.get(CONTEXT) or ControllerMetrics()
        view: NetworkView = kwargs.get(VIEW) or NetworkView()
        southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.metrics.attach(NetworkCollector(view, southbound, kwargs.get(MASTERSHIP)))
        runner: PlanRunner | None = kwargs.get(RUNNER)
        if runner is not None and self.metrics.plan_finished not in runner.observers:
            runner.observers.append(self.metrics.plan_finished)
        routes = kwargs.get(ROUTES)
        self.routes: ApiRoutes = ApiRoutes() if routes is None else routes
        self.routes.add("GET", "/metrics", self.r_metrics)

    def r_metrics(self, q: dict, d: dict) -> Text:
        return Text(self.metrics.render(), CONTENT_TYPE)

    @set_ev_cls(events.EventDecision)
    @loud
    def _decision(self, ev: events.EventDecision) -> None:
        self.metrics.te_decision(str(ev.data.get("decision", "unknown")))
