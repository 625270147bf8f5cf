"""Where the web service gets the multi-layer graph from.

``auto`` (default): the newest snapshot the controller wrote, or the Fig. 2 testbed while there is
none; ``controller``: only the newest snapshot in ``topology_snapshots`` (written by the controller's
``db_feed`` app; 503 until there is one — the web service never talks to the controller process);
``fig2``: the Fig. 2 testbed from ``mininet_labs.spec``; or a ``*.json`` file in
``MultiLayerGraph.to_json()`` format.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.web.errors import ApiError
from app.web.models import TopologySnapshot

if TYPE_CHECKING:
    from topology.graph import MultiLayerGraph


SOURCES = ("auto", "controller", "fig2")


class TopologyUnavailable(ApiError):
    status = 503


class TopologySource:
    """Loads and caches the graph; thread-safe (waitress serves requests from several threads)."""

    def __init__(self, source: str = "auto", unit_mbps: float = 1.0) -> None:
        self.source = source
        self.unit_mbps = unit_mbps
        self._lock = threading.Lock()
        self._static: MultiLayerGraph | None = None
        self._snapshot: tuple[int, MultiLayerGraph] | None = None
        if source not in SOURCES:
            self._static = load_graph_file(source)  # a bad file fails the start, not every request

    def graph(self, session: Session) -> MultiLayerGraph:
        from topology.graph import MultiLayerGraph

        newest = None
        if self.source in ("controller", "auto"):  # the id only: the graph is parsed once per snapshot
            newest = session.execute(
                select(TopologySnapshot.id).order_by(TopologySnapshot.id.desc()).limit(1)).scalar()
            if newest is None and self.source == "controller":
                raise TopologyUnavailable("the controller has not written a topology yet", field=None)
        if newest is not None:
            with self._lock:
                if self._snapshot is None or self._snapshot[0] != newest:
                    data = session.execute(select(TopologySnapshot.graph).where(TopologySnapshot.id == newest)).scalar()
                    self._snapshot = (newest, MultiLayerGraph.from_dict(data))
                return self._snapshot[1]
        with self._lock:
            if self._static is None:
                if self.source in ("fig2", "auto"):
                    from mininet_labs.spec import fig2_testbed, spec_to_graph

                    self._static = spec_to_graph(fig2_testbed(unit_mbps=self.unit_mbps))
                else:
                    self._static = load_graph_file(self.source)
            return self._static


def load_graph_file(source: str) -> MultiLayerGraph:
    """Read a ``MultiLayerGraph.to_json()`` file; ApiError (one line, ``field="topology"``) if it is not one.

    It must hold at least one packet switch: reservations run between packet-switch ports.
    """
    from pce.cspf import RoutingView
    from pce.errors import PceError
    from topology.errors import TopologyError
    from topology.graph import MultiLayerGraph

    path = Path(source)
    if not path.is_file():
        raise ApiError(f"topology {source!r} is neither {', '.join(SOURCES)} nor an existing file", field="topology")
    try:
        data = json.loads(path.read_text())
        graph = MultiLayerGraph.from_dict(data)
    except OSError as exc:
        raise ApiError(f"topology file {source}: cannot read it ({exc.strerror or exc})", field="topology") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(f"topology file {source}: not JSON ({exc})", field="topology") from None
    except (TopologyError, TypeError, ValueError, AttributeError) as exc:
        raise ApiError(f"topology file {source}: not a MultiLayerGraph.to_json() graph ({exc})",
                       field="topology") from None
    if not any(d.get("kind") == "packet" for _, d in graph.g.nodes(data=True)):
        raise ApiError(f"topology file {source}: the graph has no packet switch, so no reservation endpoint",
                       field="topology")
    try:
        RoutingView.build(graph)  # what admission builds on every request: bad capacities show now
    except PceError as exc:
        raise ApiError(f"topology file {source}: {exc}", field="topology") from None
    return graph


def node_kind(graph: MultiLayerGraph, node: str) -> str | None:
    data = graph.g.nodes.get(node)
    return None if data is None else data.get("kind")


def switch_ports(graph: MultiLayerGraph, switch: str) -> set[int]:
    """Port numbers of ``switch`` that appear on some edge of the graph."""
    ports: set[int] = set()
    for _u, _v, data in graph.g.edges(switch, data=True):
        p = (data.get("ports") or {}).get(switch)
        if p is not None:
            ports.add(int(p))
    return ports


def check_endpoint_in_graph(graph: MultiLayerGraph, endpoint: str, field: str) -> None:
    """The endpoint must be a port of a packet switch of the current topology."""
    switch, _, port = endpoint.rpartition(":")
    kind = node_kind(graph, switch)
    if kind is None:
        raise ApiError(f"{field}: unknown switch {switch!r}", field=field)
    if kind != "packet":
        article = "an" if kind[:1] in "aeiou" else "a"
        raise ApiError(f"{field}: {switch!r} is {article} {kind} node, not a packet switch", field=field)
    known = switch_ports(graph, switch)
    if known and int(port) not in known:
        raise ApiError(f"{field}: switch {switch} has no port {port} (ports: {sorted(known)})", field=field)
