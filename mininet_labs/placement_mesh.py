"""Lab ``placement-mesh6``: lab ``placement-compare`` on the ``mesh6`` topology (:mod:`mininet_labs.mesh_spec`).

Why a second topology: on Fig. 2 an elephant from A to C has one way out, so the policies cannot
part; on mesh6 it has a lit detour (A-B-D-C, over the B-D circuit that carries B -> D traffic) and
dark circuits to light. Workload: the elephant h1 -> h3, 16 small transfers and an interactive
probe on each site pair (h2 -> h4 and h1 -> h3 over the hot circuit A:3-C:3; h5 -> h6 over B-D).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mininet_labs.placement_compare import compare


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print, runs: int = 1,
        seed: int = 1, placement: str = "all") -> dict[str, Any]:
    """Run the comparison on mesh6; write ``results.json`` and ``placement_compare.png``."""
    return compare(out, "mesh6", quick=quick, progress=progress, runs=runs, seed=seed, placement=placement)
