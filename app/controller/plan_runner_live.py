"""The shared :class:`~app.controller.plan_runner.PlanRunner` wired to the hub (its os-ken side).

The runner is an os-ken context (``_CONTEXTS = {RUNNER: PlanRunner}``), created bare by the app
manager; the first app that asks for it binds it to the live southbound over the shared view and
southbound, with the hub's time (``hub.sleep``, steps as greenthreads, 20 ms counter polls). Its news
goes on the bus as :class:`EventPlan`, sent by that first app (a change of the reserved ports is
announced by the network view itself): every
app that uses the runner lists :data:`RUNNER_EVENTS` in its ``_EVENTS``, so any of them reaches every
observer.
"""
from __future__ import annotations

from typing import Any

from os_ken.base import app_manager
from os_ken.lib import hub

from app.controller import events
from app.controller.live_southbound import LiveSouthbound, green_parallel
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.plan_runner import CONTEXT as RUNNER
from app.controller.plan_runner import PLAN, PlanRunner

__all__ = ["POLL_S", "RUNNER", "RUNNER_EVENTS", "PlanRunner", "shared_runner"]

POLL_S = 0.02  # how often a verify or drain step reads the counters (a flow-stats round trip each)
RUNNER_EVENTS = [events.EventPlan]


def shared_runner(kwargs: dict[str, Any], app: app_manager.OSKenApp, view: NetworkView,
                  southbound: OpenFlowSouthbound) -> PlanRunner:
    """The runner context from an app's ``kwargs`` (a private one when the app runs alone, as in unit
    tests), bound to the live network if no app did so yet."""
    runner = kwargs.get(RUNNER) or PlanRunner()

    def notify(kind: str, data: dict[str, Any]) -> None:
        if kind == PLAN:
            app.send_event_to_observers(events.EventPlan(dict(data)))

    if not runner.bound:
        runner.bind(LiveSouthbound(southbound, view), view, notify, run_parallel=green_parallel, sleep=hub.sleep,
                    poll_s=POLL_S)
    return runner
