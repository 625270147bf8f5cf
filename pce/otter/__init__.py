"""OTTER's multi-WAN 5G flow placement LP (seed 000), its baselines and a flow-arrival simulator.

Modules: profiles (Table 5), demand (tolerance functions), scenario (Table 4 instances),
aggregate (top-n destinations, flow aggregates), problem (LP data), model (PuLP), matrix
(highspy), baselines (GREEDY / PER / OPT and pinning), sim (event-driven simulator).
"""
from pce.otter.aggregate import candidates
from pce.otter.matrix import build_matrix, solve_problem
from pce.otter.model import build_model
from pce.otter.problem import LpSolution, OtterProblem, make_problem
from pce.otter.scenario import FlowSet, Network, generate_flows, generate_network
from pce.otter.sim import PolicyResult, simulate

__all__ = [
    "FlowSet", "LpSolution", "Network", "OtterProblem", "PolicyResult", "build_matrix", "build_model",
    "candidates", "generate_flows", "generate_network", "make_problem", "simulate", "solve_problem",
]
