"""The controller's Prometheus metrics (``GET /metrics``, docs/monitor.md "Metrics"): plain code.

Why two halves: nearly every figure already lives in one object — the network view (switches, ports,
links, circuits, reserved ports), the southbound's counters (messages per type), the services table,
the database writer, the mastership — so :class:`~app.controller.metrics_collector.NetworkCollector`
reads them when Prometheus scrapes and nothing is counted twice. Only what no object keeps is
recorded here as it happens: each plan's outcome and step times (the plan runner hands us its
records), each monitor cycle, each TE decision and the time the decider took.

One :class:`ControllerMetrics` per controller, with its own ``CollectorRegistry`` (never the global
default), shared by the apps as the os-ken context :data:`CONTEXT`; unit tests build several in one
process.
"""
from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest

from app.update.executor import PlanRecord, StepRecord

CONTEXT = "mlte_metrics"
#: the classic text format (every metric name here is plain ASCII): Prometheus 2.x and 3.x both read it
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: plans and their steps: an XCON waits ~0.2 s for its provisioning delay, a rule ~1 ms
PLAN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: a monitor cycle: from the stats requests to the end of the tick (replies come in ~1 ms per switch)
CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: one TE decision (the issue's target: <= 100 ms on germany50 with 1,000 flows)
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


#: the plan kinds the planner makes (``app.update.planner``); a plan sent to ``POST /plan`` may name any
#: kind, so others are counted as ``other`` (a label must not take values from request bodies)
PLAN_KINDS = frozenset({"provision", "circuit", "release", "move"})


def _seconds(step: StepRecord) -> float | None:
    if step.started_at is None or step.finished_at is None:
        return None
    return max(0.0, step.finished_at - step.started_at)


class ControllerMetrics:
    """The registry ``GET /metrics`` renders, and the figures recorded as they happen."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        if process:  # process_cpu_seconds_total, process_resident_memory_bytes, ... of this controller
            ProcessCollector(registry=self.registry)
        r = self.registry
        self.plans = Counter("mlte_plans", "Update plans run, by who asked (source), the plan's kind and how "
                             "they ended (outcome)", ["source", "kind", "outcome"], registry=r)
        self.plan_seconds = Histogram("mlte_plan_duration_seconds", "Time from a plan's first step to its end",
                                      ["source", "kind"], buckets=PLAN_BUCKETS, registry=r)
        self.step_seconds = Histogram("mlte_plan_step_duration_seconds",
                                      "Time of each plan step that ran, by step kind and phase (forward, rollback)",
                                      ["kind", "phase"], buckets=PLAN_BUCKETS, registry=r)
        self.cycle_seconds = Histogram("mlte_monitor_cycle_duration_seconds",
                                       "Monitor cycles: from the statistics requests to the end of the tick",
                                       buckets=CYCLE_BUCKETS, registry=r)
        self.decisions = Counter("mlte_te_decisions", "TE decisions, by decision (offload, release, skip, grow, ...)",
                                 ["decision"], registry=r)
        self.decision_seconds = Histogram("mlte_te_decision_duration_seconds",
                                          "Time a TE decider took to decide on one monitor event",
                                          ["decider"], buckets=DECISION_BUCKETS, registry=r)
        self._collector: Any = None

    # ---- recorded as it happens ------------------------------------------------------------------------
    def plan_finished(self, record: PlanRecord, source: str) -> None:
        """A plan the runner ran (its ``source``: api, circuit, te, mapping, reservations, recovery)."""
        kind = record.kind if record.kind in PLAN_KINDS else "other"
        self.plans.labels(source, kind, record.state).inc()
        if record.started_at is not None and record.finished_at is not None:
            self.plan_seconds.labels(source, kind).observe(max(0.0, record.finished_at - record.started_at))
        for phase, steps in (("forward", record.steps), ("rollback", record.rollback)):
            for step in steps:
                took = _seconds(step)
                if took is not None:
                    self.step_seconds.labels(step.kind, phase).observe(took)

    def monitor_cycle(self, seconds: float) -> None:
        self.cycle_seconds.observe(max(0.0, seconds))

    def te_decision(self, decision: str) -> None:
        self.decisions.labels(decision).inc()

    def te_decided(self, decider: str, seconds: float) -> None:
        self.decision_seconds.labels(decider).observe(max(0.0, seconds))

    # ---- read at scrape time ---------------------------------------------------------------------------
    def attach(self, collector: Any) -> None:
        """Register the scrape-time collector (once: the first app that wires the controller's objects)."""
        if self._collector is None:
            self._collector = collector
            self.registry.register(collector)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (``Content-Type``: :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)
