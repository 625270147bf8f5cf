"""Multi-layer circuit planning (pce/circuits.py): model structure, optimality, relaxation bounds."""
from __future__ import annotations

import itertools
import random

import pulp
import pytest

from pce.circuits import (
    Demand,
    build_circuit_model,
    candidate_circuits,
    plan_circuits,
)
from pce.errors import InvalidInputError, UnknownTopologyError
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph


@pytest.fixture(scope="module")
def fig2():
    return spec_to_graph(fig2_testbed())


def test_candidates_are_valid_xcon_chains(fig2):
    cands = candidate_circuits(fig2, per_pair=8)
    assert {(c.a, c.b) for c in cands} == {("A", "B"), ("A", "C"), ("B", "C")}
    for c in cands:
        assert fig2.adaptation_at(c.oports[0]) == (c.a, c.a_port)
        assert fig2.adaptation_at(c.oports[-1]) == (c.b, c.b_port)
        assert len(c.xcons) == len(c.oports) // 2
        for a, b in c.xcons:
            fig2.xcon_key(a, b)  # raises if not a potential XCON (same OTS, same granularity)
        assert c.capacity == 10.0 and c.setup_time > 0
    assert not any("X:6" in c.oports for c in cands)  # ODU0 ports cannot join ODU2 ones


def test_active_xcon_ports_are_not_candidates(fig2):
    g = fig2.copy()
    g.set_xcon_active("X:1", "X:3")
    assert not any({"X:1", "X:3"} & set(c.oports) for c in candidate_circuits(g, per_pair=8))


def test_model_structure_without_solving(fig2):
    cands = candidate_circuits(fig2, per_pair=4)
    dem = [Demand("d1", "h1", "h3", 8), Demand("d2", "A", "B", 4, deadline=0.05)]
    m = build_circuit_model(fig2, dem, cands)
    assert m.problem.status == 0  # not solved
    assert all(v.cat == pulp.LpInteger for v in m.y.values())
    # d2's deadline (50 ms) is shorter than any XCON setup (185 ms): no flow variable on circuits
    assert not [k for k in m.flow if k[0] == "d2"]
    assert len([k for k in m.flow if k[0] == "d1"]) == 2 * len(cands)
    rows = m.problem.constraints() if callable(m.problem.constraints) else list(m.problem.constraints.values())
    ports = [c for c in rows if c.name.startswith("port_")]
    assert ports  # candidates share ports, so exclusivity rows exist
    relaxed = build_circuit_model(fig2, dem, cands, integer=False)
    assert all(v.cat == pulp.LpContinuous for v in relaxed.y.values())


def test_fig2_two_circuits_for_two_demands(fig2):
    plan = plan_circuits(fig2, [Demand("d1", "h1", "h3", 8), Demand("d2", "A", "C", 5)],
                         circuits=candidate_circuits(fig2, per_pair=8))
    assert plan.served == {"d1": 8.0, "d2": 5.0}
    assert len(plan.lit) == 2  # 13 Mbit/s do not fit one ODU2 circuit
    used = [p for c in plan.lit for p in c.oports]
    assert len(used) == len(set(used))  # ports taken whole


def test_deadline_shorter_than_setup_forbids_new_circuits(fig2):
    plan = plan_circuits(fig2, [Demand("d1", "A", "C", 5, deadline=0.1)])
    assert plan.served["d1"] == 0 and plan.lit == []
    plan = plan_circuits(fig2, [Demand("d1", "A", "C", 5, deadline=1.0)])
    assert plan.served["d1"] == 5 and len(plan.lit) == 1


def test_existing_packet_capacity_is_used_before_lighting(fig2):
    g = fig2.copy()
    g.add_packet_link("A", 7, "C", 7, capacity=6, latency=1.0, source="static")
    plan = plan_circuits(g, [Demand("d1", "A", "C", 5, deadline=0.0)])
    assert plan.served["d1"] == 5 and plan.lit == []
    plan = plan_circuits(g, [Demand("d1", "A", "C", 12)])
    assert plan.served["d1"] == 12 and len(plan.lit) == 1  # 6 on copper + 6 on one circuit


def exhaustive(graph, demands, cands):
    """Best objective over every port-compatible subset of circuits (routing LP per subset)."""
    best = None
    for r in range(len(cands) + 1):
        for subset in itertools.combinations(cands, r):
            ports = [p for c in subset for p in c.oports]
            if len(ports) != len(set(ports)):
                continue
            m = build_circuit_model(graph, demands, cands, integer=False)
            m.fix(c.id for c in subset)
            obj = m.solve().objective
            best = obj if best is None else min(best, obj)
    return best


def tiny_instance(seed: int):
    g = spec_to_graph(optical_mesh(3, 3, degree=2, seed=seed, uplinks=1))
    rng = random.Random(seed)
    sws = g.nodes_of_kind("packet")
    dem = [Demand(f"d{i}", a, b, rng.choice([3, 6, 9, 12]), rng.choice([None, 0.1, 1.0]))
           for i, (a, b) in enumerate(rng.sample(list(itertools.combinations(sws, 2)), 2))]
    return g, dem, candidate_circuits(g, per_pair=2)


@pytest.mark.parametrize("seed", range(6))
def test_mip_equals_exhaustive_enumeration(seed):
    g, dem, cands = tiny_instance(seed)
    assert 0 < len(cands) <= 8
    mip = plan_circuits(g, dem, circuits=cands, method="integer")
    assert mip.objective == pytest.approx(exhaustive(g, dem, cands), abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_lp_bound_below_mip_below_rounding(seed):
    g, dem, cands = tiny_instance(seed)
    mip = plan_circuits(g, dem, circuits=cands, method="integer")
    rel = plan_circuits(g, dem, circuits=cands, method="relax")
    assert rel.lp_bound <= mip.objective + 1e-6
    assert mip.objective <= rel.objective + 1e-6
    used = [p for c in rel.lit for p in c.oports]
    assert len(used) == len(set(used))


def test_cbc_and_highs_agree(fig2):
    dem = [Demand("d1", "h1", "h3", 8), Demand("d2", "A", "B", 4)]
    a = plan_circuits(fig2, dem, solver="highs")
    b = plan_circuits(fig2, dem, solver="cbc")
    assert a.objective == pytest.approx(b.objective, abs=1e-6)


@pytest.mark.parametrize("dem,exc", [
    ([Demand("d", "A", "C", -1)], InvalidInputError),
    ([Demand("d", "A", "A", 1)], InvalidInputError),
    ([Demand("d", "A", "Q", 1)], UnknownTopologyError),
    ([Demand("d", "A", "X:1", 1)], InvalidInputError),
    ([Demand("d", "A", "C", 1), Demand("d", "A", "B", 1)], InvalidInputError),
])
def test_bad_demands(fig2, dem, exc):
    with pytest.raises(exc):
        build_circuit_model(fig2, dem, [])


def test_unknown_method(fig2):
    with pytest.raises(InvalidInputError):
        plan_circuits(fig2, [Demand("d", "A", "C", 1)], method="magic")
