"""Ordered, make-before-break multi-layer updates as a plain library (no os-ken, no Flask).

``planner`` builds plans (values), ``executor`` runs them through a ``Southbound`` (the os-ken shim,
or ``tests/lib/fake_network.py``), rolls back on failure and returns a JSON record. docs/updates.md.
"""
from app.update.executor import PlanRecord, StepRecord, execute, sequential, threaded
from app.update.model import FlowRule, IngressChange, ModelError, Outcome, XconSpec
from app.update.plan import (
    CircuitUpStep,
    DrainStep,
    FlowStep,
    Plan,
    PlanError,
    Step,
    VerifyStep,
    XconStep,
)
from app.update.planner import cross_connect, move, one_shot, provision, release
from app.update.southbound import Southbound

__all__ = [
    "CircuitUpStep", "DrainStep", "FlowRule", "FlowStep", "IngressChange", "ModelError", "Outcome", "Plan",
    "PlanError", "PlanRecord", "Southbound", "Step", "StepRecord", "VerifyStep", "XconSpec", "XconStep",
    "cross_connect", "execute", "move", "one_shot", "provision", "release", "sequential", "threaded",
]
