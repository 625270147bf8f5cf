"""Defaults of graph mode, apart from ``pce.otter.graph`` so the CLI parser can show them without
importing networkx, numpy and PuLP (commands build every parser at start)."""
from __future__ import annotations

#: Candidate paths per flow aggregate and kind (existing links / through one new circuit).
DEFAULT_K = 4
#: Candidate XCON chains per switch pair (``pce.circuits.candidate_circuits``).
DEFAULT_PER_PAIR = 8
#: Latency a hop counts at least (ms, one way): a graph without latencies still prefers fewer hops.
HOP_FLOOR_MS = 0.1
#: Relative price of a path through an unlit circuit in the LP objective.
CIRCUIT_PRICE = 0.02
#: PATHPIN: a flow leaves its current path only for at least this gain of satisfaction (0..1).
DEFAULT_PIN_GAIN = 0.05
#: Candidate paths: column generation (the LP over all paths) or the k shortest of each kind.
PATH_MODES = ("colgen", "k")
DEFAULT_PATHS = "colgen"
LIGHTING = ("priced", "joint")
POLICIES = ("otter", "joint", "cspf")
