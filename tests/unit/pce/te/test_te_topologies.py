"""pce.topologies: topohub loading, file loading, demands and the errors users see."""
from __future__ import annotations

import json

import networkx as nx
import pytest

from pce.errors import InvalidInputError, UnknownTopologyError
from pce.topologies import (
    FIBRE_KM_PER_MS,
    available,
    gravity_demands,
    haversine_km,
    load_demands,
    load_topology,
    min_hop_load,
    resolve_name,
)


@pytest.mark.parametrize(
    ("name", "nodes", "links"),
    [
        ("sndlib/geant", 22, 36),
        ("topozoo/Abilene", 11, 14),
        ("caida/2024-08/7018", 594, 1674),
        ("gabriel/25/0", 25, 40),
    ],
)
def test_topohub_topologies_load_with_uniform_capacity(name: str, nodes: int, links: int) -> None:
    g = load_topology(name, capacity=1000)
    assert (g.number_of_nodes(), g.number_of_edges()) == (nodes, links)
    assert all(d["capacity"] == 1000.0 for _, _, d in g.edges(data=True))
    assert all(isinstance(n, str) for n in g.nodes)
    # latency from link length: propagation in fibre
    u, v, d = next(iter(g.edges(data=True)))
    assert d["latency"] == pytest.approx(d["dist"] / FIBRE_KM_PER_MS)


def test_backbone_world_loads_and_is_connected() -> None:
    g = load_topology("backbone/world", capacity=100_000)
    assert g.number_of_nodes() == 3815
    assert nx.is_connected(g)


def test_sndlib_nodes_are_named() -> None:
    g = load_topology("sndlib/geant", capacity=1)
    assert "at1.at" in g and "de1.de" in g


def test_names_are_case_insensitive() -> None:
    assert resolve_name("topozoo/abilene") == "topozoo/Abilene"


def test_unknown_topology_lists_close_matches() -> None:
    with pytest.raises(UnknownTopologyError, match="sndlib/geant"):
        load_topology("sndlib/geamt", capacity=1)
    with pytest.raises(UnknownTopologyError, match="caida/2024-08/7018"):
        load_topology("caida/7018", capacity=1)
    assert UnknownTopologyError.user_error


def test_missing_and_invalid_capacity_are_clear_errors() -> None:
    with pytest.raises(InvalidInputError, match="--capacity"):
        load_topology("sndlib/geant")
    with pytest.raises(InvalidInputError, match="positive"):
        load_topology("sndlib/geant", capacity=-5)
    with pytest.raises(InvalidInputError, match="positive"):
        load_topology("sndlib/geant", capacity=0)


def test_available_lists_sources() -> None:
    sndlib = available("sndlib")
    assert "sndlib/geant" in sndlib and len(sndlib) == 26
    assert all(k.startswith("sndlib/") for k in sndlib)
    assert "backbone/world" in available()
    with pytest.raises(UnknownTopologyError):
        available("nope")


def test_local_json_file_with_capacities_and_coordinates(tmp_path) -> None:
    path = tmp_path / "tri.json"
    path.write_text(json.dumps({
        "nodes": [{"id": "a", "pos": [0.0, 0.0]}, {"id": "b", "pos": [1.0, 0.0]}, {"id": "c"}],
        "edges": [
            {"source": "a", "target": "b", "capacity": 10},
            {"source": "b", "target": "c", "capacity": 20, "latency": 3.5},
        ],
        "graph": {"demands": [{"source": "a", "target": "c", "demand": 4}]},
    }))
    g = load_topology(str(path))
    assert g.edges["a", "b"]["capacity"] == 10
    # 1 degree of longitude on the equator is ~111.2 km
    assert g.edges["a", "b"]["latency"] == pytest.approx(haversine_km((0, 0), (1, 0)) / FIBRE_KM_PER_MS)
    assert g.edges["a", "b"]["dist"] == pytest.approx(111.19, abs=0.01)
    assert g.edges["b", "c"]["latency"] == 3.5 and "dist" not in g.edges["b", "c"]
    assert load_demands(str(path), g) == {("a", "c"): 4.0}
    # --capacity overrides the file's capacities uniformly
    assert load_topology(str(path), capacity=7).edges["b", "c"]["capacity"] == 7


def test_local_json_file_errors(tmp_path) -> None:
    with pytest.raises(UnknownTopologyError):
        load_topology(str(tmp_path / "missing.json"))
    bad = tmp_path / "neg.json"
    bad.write_text(json.dumps({"nodes": [{"id": 1}, {"id": 2}], "edges": [{"source": 1, "target": 2, "capacity": -1}]}))
    with pytest.raises(InvalidInputError, match="positive"):
        load_topology(str(bad))
    nocap = tmp_path / "nocap.json"
    nocap.write_text(json.dumps({"nodes": [{"id": 1}, {"id": 2}], "edges": [{"source": 1, "target": 2}]}))
    with pytest.raises(InvalidInputError, match="capacity"):
        load_topology(str(nocap))
    assert load_topology(str(nocap), capacity=5).edges["1", "2"]["capacity"] == 5


def test_sndlib_demand_matrix() -> None:
    g = load_topology("sndlib/geant", capacity=1)
    d = load_demands("sndlib/geant", g)
    assert len(d) == 22 * 21  # a full directed matrix
    assert all(s in g and t in g and s != t and v > 0 for (s, t), v in d.items())
    scaled = load_demands("sndlib/geant", g, total=1000.0)
    assert sum(scaled.values()) == pytest.approx(1000.0)
    # shape is kept when scaling
    k = next(iter(d))
    assert scaled[k] / 1000.0 == pytest.approx(d[k] / sum(d.values()))


def test_gravity_model_is_proportional_to_capacity_products() -> None:
    g = nx.Graph()
    g.add_edge("a", "b", capacity=10.0)
    g.add_edge("b", "c", capacity=30.0)
    d = gravity_demands(g, ["a", "b", "c"], total=1.0)
    # masses: a=10, b=40, c=30 ; pairs (ordered): ab 400, ac 300, bc 1200 (x2 directions)
    norm = 2 * (400 + 300 + 1200)
    assert d[("a", "b")] == pytest.approx(400 / norm)
    assert d[("b", "c")] == pytest.approx(1200 / norm)
    assert d[("c", "a")] == pytest.approx(300 / norm)
    assert sum(d.values()) == pytest.approx(1.0)


def test_gravity_demands_scaled_to_load_factor() -> None:
    g = load_topology("topozoo/Abilene", capacity=1000)
    d = load_demands("topozoo/Abilene", g, load=0.8)
    assert len(d) == 11 * 10
    assert min_hop_load(g, d) == pytest.approx(0.8)
    # a ring by hand: 4 nodes, capacity 1 per link => 8 arcs of capacity 1
    ring = nx.cycle_graph(["a", "b", "c", "d"])
    nx.set_edge_attributes(ring, 1.0, "capacity")
    assert min_hop_load(ring, {("a", "c"): 2.0, ("a", "b"): 1.0}) == pytest.approx((2 * 2 + 1) / 8)


def test_backbone_demands_skip_sea_waypoints_and_honour_endpoint_limit() -> None:
    g = load_topology("backbone/world", capacity=1000)
    d = load_demands("backbone/world", g, endpoints=50)
    ends = {s for s, _ in d}
    assert len(ends) == 50 and len(d) == 50 * 49
    assert all(g.nodes[n]["type"] != "Seacable Waypoint" for n in ends)


def test_demand_errors() -> None:
    g = load_topology("topozoo/Abilene", capacity=10)
    with pytest.raises(InvalidInputError, match="no demand matrix"):
        load_demands("topozoo/Abilene", g, kind="sndlib")
    with pytest.raises(InvalidInputError, match="unknown demand kind"):
        load_demands("topozoo/Abilene", g, kind="bogus")
    with pytest.raises(InvalidInputError, match="positive"):
        load_demands("topozoo/Abilene", g, total=-3)
    with pytest.raises(InvalidInputError, match="either"):
        load_demands("topozoo/Abilene", g, total=3, load=0.5)


def test_random_demands_depend_on_seed() -> None:
    g = load_topology("gabriel/10/0", capacity=10)
    a = load_demands("gabriel/10/0", g, kind="random", seed=1, total=100)
    b = load_demands("gabriel/10/0", g, kind="random", seed=1, total=100)
    c = load_demands("gabriel/10/0", g, kind="random", seed=2, total=100)
    assert a == b and a != c


def test_te_library_imports_no_controller_or_web_code() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pce.topologies, pce.te.solve, pce.te.pop, pce.cli_te\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('os_ken', 'flask', 'app')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
