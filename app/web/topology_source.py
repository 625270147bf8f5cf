"""Where the web service gets the multi-layer graph from — always a source chosen on purpose.

``controller`` (default): the newest snapshot in ``topology_snapshots``, written by the controller's
``topology_publisher`` app (503 with an explanation until there is one — the web service never talks to the
controller process); ``fig2``: the paper's Fig. 2 lab testbed (``topology.spec``, imported only
when asked for by name: not the live network); or a ``*.json`` file in ``MultiLayerGraph.to_json()``
format. There is no fallback: what is served is described (:meth:`TopologySource.describe`), with its age, in
the UI banner, ``GET /api/v1/topology`` (``source``) and the start-up line.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.web.errors import ApiError
from app.web.models import TopologySnapshot

if TYPE_CHECKING:
    from topology.graph import MultiLayerGraph


SOURCES = ("controller", "fig2")
LABS = ("fig2",)  # named lab topologies (built in; not the live network)

NO_SNAPSHOT = ("no topology yet: the controller has not written one to this database (start `mlte controller "
               "--db-url` with the same database; it writes a snapshot once the switches connect), or serve a "
               "fixed topology with `mlte web --topology fig2|FILE.json`")


class TopologyUnavailable(ApiError):
    status = 503


class TopologySource:
    """Loads and caches the graph; thread-safe (waitress serves requests from several threads)."""

    def __init__(self, source: str = "controller", unit_mbps: float = 1.0) -> None:
        if source == "auto":
            raise ApiError("topology 'auto' is gone (it fell back to the Fig. 2 lab without saying so): choose "
                           "controller, fig2 or a MultiLayerGraph JSON file", field="topology")
        self.source = source
        self.unit_mbps = unit_mbps
        self._lock = threading.Lock()
        self._static: MultiLayerGraph | None = None
        self._snapshot: tuple[int, MultiLayerGraph] | None = None
        self._file_mtime: float | None = None
        if source not in SOURCES:
            self._static = load_graph_file(source)  # a bad file fails the start, not every request
            self._file_mtime = Path(source).stat().st_mtime

    def describe(self, session: Session | None = None, now: float | None = None) -> dict[str, Any]:
        """What is served: ``kind`` (controller | lab | file), ``name``, ``as_of`` (epoch s of the
        snapshot or the file's mtime; None for a lab, or no snapshot yet), ``age_seconds`` and ``text``."""
        import time

        t = time.time() if now is None else now
        if self.source == "controller":
            ts = None
            if session is not None:
                ts = session.execute(select(TopologySnapshot.ts).order_by(TopologySnapshot.id.desc()).limit(1)).scalar()
            text = ("the controller's snapshot" + (f", {_age(t - ts)} old" if ts is not None
                                                   else ": none written yet"))
            return {"kind": "controller", "name": "controller", "as_of": ts,
                    "age_seconds": None if ts is None else max(0.0, t - ts), "text": text}
        if self.source in LABS:
            return {"kind": "lab", "name": self.source, "as_of": None, "age_seconds": None,
                    "text": f"the built-in lab topology {self.source} (not the live network)"}
        return {"kind": "file", "name": self.source, "as_of": self._file_mtime,
                "age_seconds": None if self._file_mtime is None else max(0.0, t - self._file_mtime),
                "text": f"the file {self.source} (as loaded at start; written {_age(t - (self._file_mtime or t))} before now)"}

    def graph(self, session: Session) -> MultiLayerGraph:
        from topology.graph import MultiLayerGraph

        if self.source == "controller":  # the id only: the graph is parsed once per snapshot
            newest = session.execute(
                select(TopologySnapshot.id).order_by(TopologySnapshot.id.desc()).limit(1)).scalar()
            if newest is None:
                raise TopologyUnavailable(NO_SNAPSHOT, field=None)
            with self._lock:
                if self._snapshot is None or self._snapshot[0] != newest:
                    data = session.execute(select(TopologySnapshot.graph).where(TopologySnapshot.id == newest)).scalar()
                    self._snapshot = (newest, MultiLayerGraph.from_dict(data))
                return self._snapshot[1]
        with self._lock:
            if self._static is None:  # a lab topology, asked for by name
                from topology.spec import fig2_testbed, spec_to_graph

                self._static = spec_to_graph(fig2_testbed(unit_mbps=self.unit_mbps))
            return self._static


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


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
    """Port numbers of ``switch``: those the switch reported (the live graph's node ``ports``) and
    those on some edge of the graph."""
    ports: set[int] = {int(p) for p in graph.g.nodes[switch].get("ports") or ()} if switch in graph.g else set()
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


def endpoint_choices(graph: MultiLayerGraph) -> list[dict[str, str]]:
    """What the reservation form offers to pick as an endpoint, from the served topology: every host
    (as the switch port it hangs off, the endpoint the API takes) and every port of a packet switch
    that appears on an edge, each saying what is attached there. ``value`` goes into the field,
    ``label`` is what a person picks by, ``group`` is ``hosts`` or ``ports``; sorted for reading."""
    attached: dict[tuple[str, int], list[str]] = {}
    hosts: list[dict[str, str]] = []
    for u, v, data in graph.g.edges(data=True):
        kind = data.get("kind")
        for sw, port in (data.get("ports") or {}).items():
            if port is None or node_kind(graph, sw) != "packet":
                continue
            other = v if sw == u else u
            if kind == "access":
                hosts.append({"value": f"{sw}:{port}", "label": f"{other} (at {sw}:{port})", "group": "hosts"})
                what = f"host {other}"
            elif kind == "adaptation":
                what = f"optical port {other}"
            else:
                peer = (data.get("ports") or {}).get(other)
                what = f"{kind} link to {other}" + (f":{peer}" if peer is not None else "")
            attached.setdefault((sw, int(port)), []).append(what)
    ports = [{"value": f"{sw}:{port}", "label": f"{sw}:{port} — {', '.join(sorted(whats))}", "group": "ports"}
             for (sw, port), whats in sorted(attached.items())]
    return sorted(hosts, key=lambda h: h["label"]) + ports
