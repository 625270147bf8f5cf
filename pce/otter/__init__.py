"""OTTER's multi-WAN 5G flow placement LP (seed 000), its baselines and a flow-arrival simulator.

Modules: profiles (Table 5), demand (tolerance functions), scenario (Table 4 instances),
aggregate (top-n destinations, flow aggregates), problem (LP data), model (PuLP), matrix
(highspy), baselines (GREEDY / PER / OPT and pinning), sim (event-driven simulator).

The names below are loaded on first use (PEP 562), so importing a light submodule such as
``pce.otter.calibration`` — which ``mlte``'s argument parser does for every command — does not
pull in numpy, scipy, highspy and PuLP. (Loaded eagerly they made ``mlte --help`` slow and, in
``mlte controller``, created numpy's RNG lock before eventlet's monkey patch: "1 RLock(s) were
not greened".)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "candidates": "aggregate",
    "build_matrix": "matrix", "solve_problem": "matrix",
    "build_model": "model",
    "LpSolution": "problem", "OtterProblem": "problem", "make_problem": "problem",
    "FlowSet": "scenario", "Network": "scenario", "generate_flows": "scenario", "generate_network": "scenario",
    "PolicyResult": "sim", "simulate": "sim",
}

__all__ = [
    "FlowSet", "LpSolution", "Network", "OtterProblem", "PolicyResult", "build_matrix", "build_model",
    "candidates", "generate_flows", "generate_network", "make_problem", "simulate", "solve_problem",
]

if TYPE_CHECKING:
    from pce.otter.aggregate import candidates
    from pce.otter.matrix import build_matrix, solve_problem
    from pce.otter.model import build_model
    from pce.otter.problem import LpSolution, OtterProblem, make_problem
    from pce.otter.scenario import FlowSet, Network, generate_flows, generate_network
    from pce.otter.sim import PolicyResult, simulate


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
