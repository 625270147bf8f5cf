"""Real network topologies and traffic matrices for the PCE: topohub data sets and local JSON files.

One place turns every topology source into the same undirected ``nx.Graph`` so that the path
computation, the WAN TE LPs and the labs never deal with source formats:

* nodes are strings: the node's name when every node of the topology has a distinct name
  (SNDlib, Topology Zoo, Gabriel graphs), otherwise the topohub integer id as a string (CAIDA and
  backbone graphs have unnamed or duplicate names); node attributes ``name``, ``pos`` (lon, lat —
  planar coordinates for Gabriel graphs) and ``type`` (backbone graphs) are kept when present;
* edges carry ``capacity`` (Mbit/s), ``latency`` (ms, propagation in fibre at 200 km/ms, from the
  link length or from the node coordinates) and ``dist`` (km) when known.

topohub ships no link capacities, so ``capacity`` is required for its topologies and is applied to
every link. Demands come from SNDlib matrices when the topology has one, otherwise from a gravity
model (see :func:`load_demands`).
"""
from __future__ import annotations

import difflib
import functools
import importlib.resources
import json
import math
import os
from collections.abc import Iterable
from typing import Any

import networkx as nx
import numpy as np

from pce.errors import InvalidInputError, UnknownTopologyError

#: topohub groups, in the order they are listed.
SOURCES = ("sndlib", "topozoo", "caida", "backbone", "gabriel")

#: Propagation speed of light in fibre, km per millisecond (about 2/3 of c).
FIBRE_KM_PER_MS = 200.0

#: Load factor used by the gravity model when neither ``total`` nor ``load`` is given.
DEFAULT_GRAVITY_LOAD = 0.5

#: backbone node types that neither send nor receive traffic (cable junctions in the sea).
_TRANSIT_ONLY_TYPES = frozenset({"Seacable Waypoint"})

_EARTH_RADIUS_KM = 6371.0


# --------------------------------------------------------------------------------------------- names

@functools.lru_cache(maxsize=1)
def _topohub_index() -> tuple[str, ...]:
    """All topohub keys (``group/name``), sorted; read from the package data directory."""
    root = importlib.resources.files("topohub") / "data"
    keys: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".json"):
                keys.append(prefix + child.name[: -len(".json")])

    walk(root, "")
    return tuple(sorted(keys, key=_natural_key))


def _natural_key(key: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p.lower() for p in key.replace("/", " / ").split())


def available(source: str | None = None) -> list[str]:
    """Names accepted by :func:`load_topology` (topohub keys), optionally of one source only."""
    if source is not None and source not in SOURCES:
        raise UnknownTopologyError(f"unknown topology source {source!r} (known: {', '.join(SOURCES)})")
    keys = _topohub_index()
    return [k for k in keys if source is None or k.split("/", 1)[0] == source]


def resolve_name(name: str) -> str:
    """Canonical topohub key of ``name`` (case-insensitive); UnknownTopologyError with close matches."""
    keys = _topohub_index()
    if name in keys:
        return name
    lowered = {k.lower(): k for k in keys}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(lowered[c] for c in close)}?" if close else ""
    group = name.split("/", 1)[0]
    if group not in SOURCES and not close:
        hint = f"; names look like {', '.join(s + '/...' for s in SOURCES)} or a JSON file path"
    raise UnknownTopologyError(f"unknown topology {name!r}{hint} (list them with `mlte pce topologies`)")


def _is_file_name(name: str) -> bool:
    return name.endswith(".json") or os.path.isfile(name)


@functools.lru_cache(maxsize=8)
def _raw_topohub(key: str) -> dict:
    """The node-link dict of a topohub key, cached (callers must not mutate it)."""
    import topohub

    try:
        return topohub.get(key)
    except KeyError as exc:  # pragma: no cover - resolve_name checked the key exists
        raise UnknownTopologyError(f"topohub has no topology {key!r}") from exc


def _raw(name: str) -> tuple[dict, str]:
    """The node-link dict of a topology name or file, and its source label."""
    if _is_file_name(name):
        try:
            with open(name, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError as exc:
            raise UnknownTopologyError(f"topology file {name!r} does not exist") from exc
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:  # not JSON, or not UTF-8 text
            raise InvalidInputError(f"cannot read topology file {name!r}: {exc}") from exc
        if not isinstance(data, dict) or "nodes" not in data or not ("edges" in data or "links" in data):
            raise InvalidInputError(
                f"topology file {name!r} is not a NetworkX node-link JSON (needs 'nodes' and 'edges')"
            )
        return data, "file"
    key = resolve_name(name)
    return _raw_topohub(key), key.split("/", 1)[0]


# --------------------------------------------------------------------------------------------- graph

def haversine_km(a: Iterable[float], b: Iterable[float]) -> float:
    """Great-circle distance in km between two (longitude, latitude) points in degrees."""
    lon1, lat1 = (math.radians(v) for v in a)
    lon2, lat2 = (math.radians(v) for v in b)
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * _EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def _node_ids(nodes: list[dict]) -> dict[Any, str]:
    """Map raw ids to our string ids: names when all present and distinct, else ``str(id)``."""
    names = [n.get("name") for n in nodes]
    if all(isinstance(x, str) and x for x in names) and len(set(names)) == len(names):
        return {n["id"]: n["name"] for n in nodes}
    return {n["id"]: str(n["id"]) for n in nodes}


def _positive(value: Any, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} must be a number, got {value!r}") from exc
    if not math.isfinite(v) or v <= 0:
        raise InvalidInputError(f"{what} must be positive, got {value!r}")
    return v


def load_topology(name: str, capacity: float | None = None) -> nx.Graph:
    """Load ``name`` (a topohub key such as ``sndlib/geant`` or a node-link JSON file) as a graph.

    ``capacity`` (Mbit/s) is set on every link when given; it is required when the source has no
    capacities (all of topohub). Raises UnknownTopologyError for unknown names and InvalidInputError
    for a non-positive capacity.
    """
    if capacity is not None:
        capacity = _positive(capacity, "capacity")
    raw, source = _raw(name)
    ids = _node_ids(raw["nodes"])
    g = nx.Graph(name=name, source=source)
    for n in raw["nodes"]:
        attrs = {k: v for k, v in n.items() if k in ("name", "pos", "type", "population")}
        g.add_node(ids[n["id"]], **attrs)
    geo = source != "gabriel"  # Gabriel graphs are planar, their coordinates are not lon/lat
    missing_capacity = 0
    for e in raw.get("edges", raw.get("links", [])):
        u, v = e["source"], e["target"]
        if u not in ids or v not in ids:
            raise InvalidInputError(f"topology {name!r}: edge {u!r}-{v!r} names an unknown node")
        u, v = ids[u], ids[v]
        if u == v:
            continue
        attrs: dict[str, Any] = {}
        if "dist" in e:
            attrs["dist"] = float(e["dist"])
        elif geo and "pos" in g.nodes[u] and "pos" in g.nodes[v]:
            attrs["dist"] = haversine_km(g.nodes[u]["pos"], g.nodes[v]["pos"])
        if "latency" in e:
            attrs["latency"] = float(e["latency"])
            if attrs["latency"] < 0:
                raise InvalidInputError(f"topology {name!r}: link {u}-{v} has negative latency")
        elif "dist" in attrs:
            attrs["latency"] = attrs["dist"] / FIBRE_KM_PER_MS
        if capacity is not None:
            attrs["capacity"] = capacity
        elif "capacity" in e:
            attrs["capacity"] = _positive(e["capacity"], f"capacity of link {u}-{v}")
        else:
            missing_capacity += 1
        if g.has_edge(u, v):  # parallel links in a file: one link with the summed capacity
            if "capacity" in attrs and capacity is None:
                g.edges[u, v]["capacity"] = g.edges[u, v].get("capacity", 0.0) + attrs["capacity"]
            continue
        g.add_edge(u, v, **attrs)
    if missing_capacity:
        raise InvalidInputError(
            f"topology {name!r} has no capacity on {missing_capacity} of its links: "
            "give a uniform one (capacity=..., --capacity MBPS)"
        )
    return g


def topology_info(name: str) -> dict[str, Any]:
    """Nodes, links and whether a demand matrix ships, without building the graph."""
    raw, source = _raw(name)
    return {
        "name": name,
        "source": source,
        "nodes": len(raw["nodes"]),
        "links": len(raw.get("edges", raw.get("links", []))),
        "demand_matrix": bool(raw.get("graph", {}).get("demands")),
    }


# --------------------------------------------------------------------------------------------- demands

def has_demand_matrix(name: str) -> bool:
    """True when the topology ships a traffic matrix (SNDlib, or a file with ``graph.demands``)."""
    raw, _ = _raw(name)
    return bool(raw.get("graph", {}).get("demands"))


def _matrix_demands(name: str, graph: nx.Graph) -> dict[tuple[str, str], float]:
    raw, source = _raw(name)
    ids = _node_ids(raw["nodes"])
    by_str = {str(k): v for k, v in ids.items()}
    spec = raw.get("graph", {}).get("demands") or {}
    out: dict[tuple[str, str], float] = {}

    def add(s: Any, t: Any, value: Any) -> None:
        s_id, t_id = by_str.get(str(s)), by_str.get(str(t))
        if s_id is None or t_id is None or s_id not in graph or t_id not in graph:
            raise InvalidInputError(f"demand {s!r}->{t!r} of {name!r} names an unknown node")
        v = float(value)
        if v < 0 or not math.isfinite(v):
            raise InvalidInputError(f"demand {s_id}->{t_id} of {name!r} is negative or not finite")
        if v > 0 and s_id != t_id:
            out[(s_id, t_id)] = out.get((s_id, t_id), 0.0) + v

    if isinstance(spec, dict):
        for s, row in spec.items():
            for t, value in row.items():
                add(s, t, value)
    else:  # a file may give a list of {"source", "target", "demand"}
        for item in spec:
            add(item["source"], item["target"], item.get("demand", item.get("value")))
    return out


def _masses(graph: nx.Graph, nodes: list[str]) -> np.ndarray:
    """Gravity mass of each node: total capacity of its links (its degree when no capacities)."""
    return np.array(
        [sum(d.get("capacity", 1.0) for _, _, d in graph.edges(n, data=True)) for n in nodes], dtype=float
    )


def traffic_endpoints(graph: nx.Graph, limit: int | None = None) -> list[str]:
    """Nodes that send and receive traffic: all but sea-cable waypoints; the ``limit`` heaviest.

    ``limit`` keeps the nodes of largest gravity mass (ties: node order), which keeps the number of
    demand pairs of the 3,815-node backbone graphs tractable.
    """
    nodes = [n for n, d in graph.nodes(data=True) if d.get("type") not in _TRANSIT_ONLY_TYPES]
    if limit is not None:
        if limit < 2:
            raise InvalidInputError(f"endpoint limit must be at least 2, got {limit}")
        if limit < len(nodes):
            mass = _masses(graph, nodes)
            order = np.argsort(-mass, kind="stable")[:limit]
            keep = set(int(i) for i in order)
            nodes = [n for i, n in enumerate(nodes) if i in keep]
    return nodes


def gravity_demands(graph: nx.Graph, nodes: list[str], total: float = 1.0) -> dict[tuple[str, str], float]:
    """Gravity model: ``D[s,t] = total * m_s * m_t / sum_{a != b} m_a * m_b`` over ``nodes``."""
    mass = _masses(graph, nodes)
    outer = np.outer(mass, mass)
    np.fill_diagonal(outer, 0.0)
    norm = outer.sum()
    if norm <= 0:
        raise InvalidInputError("gravity model needs at least two endpoints with links")
    scale = total / norm
    out: dict[tuple[str, str], float] = {}
    rows, cols = np.nonzero(outer)
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        out[(nodes[i], nodes[j])] = float(outer[i, j] * scale)
    return out


def min_hop_load(graph: nx.Graph, demands: dict[tuple[str, str], float]) -> float:
    """Average link utilization if every demand took a min-hop path: sum(D*hops) / sum(arc capacity).

    This is the load factor of :func:`load_demands`; each undirected link counts as two arcs.
    Unreachable pairs are ignored here (the TE solvers reject them with a clear error).
    """
    from scipy.sparse.csgraph import shortest_path

    if not demands:
        return 0.0
    index = {n: i for i, n in enumerate(graph.nodes)}
    adj = nx.to_scipy_sparse_array(graph, nodelist=list(graph.nodes), weight=None, format="csr")
    sources = sorted({index[s] for s, _ in demands})
    pos = {s: i for i, s in enumerate(sources)}
    hops = shortest_path(adj, method="D", unweighted=True, indices=sources)
    carried = 0.0
    for (s, t), v in demands.items():
        h = hops[pos[index[s]], index[t]]
        if math.isfinite(h):
            carried += v * h
    arc_capacity = 2.0 * sum(d.get("capacity", 0.0) for _, _, d in graph.edges(data=True))
    if arc_capacity <= 0:
        raise InvalidInputError("load factor needs link capacities")
    return carried / arc_capacity


def load_demands(
    name: str,
    graph: nx.Graph,
    kind: str = "auto",
    total: float | None = None,
    seed: int = 0,
    *,
    load: float | None = None,
    endpoints: int | None = None,
) -> dict[tuple[str, str], float]:
    """Directed demands ``{(src, dst): Mbit/s}`` for ``graph`` loaded from ``name``.

    ``kind``: ``sndlib`` (the topology's own matrix, an error when it has none), ``gravity``
    (:func:`gravity_demands` over :func:`traffic_endpoints`), ``uniform`` (every endpoint pair
    equal), ``random`` (pairs uniform in [0, 1), from ``seed``) or ``auto`` (the matrix when present,
    else gravity). The result is then scaled to ``total`` (sum of all demands) or to the load factor
    ``load`` (see :func:`min_hop_load`); a gravity/uniform/random matrix with neither given is
    scaled to load :data:`DEFAULT_GRAVITY_LOAD`, a shipped matrix is returned as is.
    """
    if total is not None and load is not None:
        raise InvalidInputError("give either total or load, not both")
    if total is not None:
        total = _positive(total, "total demand")
    if load is not None:
        load = _positive(load, "load factor")
    if kind == "auto":
        kind = "sndlib" if has_demand_matrix(name) else "gravity"
    if kind == "sndlib":
        demands = _matrix_demands(name, graph)
        if not demands:
            raise InvalidInputError(f"topology {name!r} has no demand matrix; use kind='gravity'")
    elif kind in ("gravity", "uniform", "random"):
        nodes = traffic_endpoints(graph, endpoints)
        if kind == "gravity":
            demands = gravity_demands(graph, nodes)
        else:
            rng = np.random.default_rng(seed)
            demands = {}
            for s in nodes:
                for t in nodes:
                    if s != t:
                        demands[(s, t)] = 1.0 if kind == "uniform" else float(rng.random())
        if total is None and load is None:
            load = DEFAULT_GRAVITY_LOAD
    else:
        raise InvalidInputError(f"unknown demand kind {kind!r} (auto, sndlib, gravity, uniform, random)")
    if total is not None:
        factor = total / sum(demands.values())
    elif load is not None:
        current = min_hop_load(graph, demands)
        if current <= 0:
            raise InvalidInputError("demands cannot be scaled to a load: no demand pair is connected")
        factor = load / current
    else:
        return demands
    return {k: v * factor for k, v in demands.items()}
