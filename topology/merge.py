"""Merge multi-layer graphs from several discovery sources into one, reporting conflicts.

Sources: the controller's live view (LLDP packet links, OTS ports from FEATURES_REPLY, adaptation
edges learnt by the optical scan), the static vendor file (the optical domain), a lab spec.

Precedence policy (docs/topology.md): **the graphs are ranked in the order given, first wins**;
callers pass observations before declarations: ``merge(live, static_file)``.
- Nodes are identified by dpid when known, else by id. A node called ``dp-<16 hex>`` in one source
  takes the real name another source gives the same dpid. Two names for one dpid: the first is kept.
- OTS ports are the union over the sources; a port's granularity comes from the first source that
  lists it (the live OTS enforces its own granularity, so a file that disagrees is reported).
- An XCON's ``active`` state comes from the first source that has that XCON (static files and
  specs never mark XCONs active, so they do not override the live state); a later source that says
  active where an earlier one says inactive, or that would put a port in two active XCONs, is
  reported and ignored.
- Edges (packet, adaptation, optical, access) are added source by source. An edge that would use a
  port already taken by a different edge from an earlier source is dropped and reported (e.g. the
  file says ``A:3-X:1`` but the scan saw ``A:4-X:1``: the scan wins). The same edge in two sources
  keeps the first one's attributes; differing capacity/latency are reported.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from topology.errors import TopologyError
from topology.graph import DEFAULT_SETUP_TIME, MultiLayerGraph, oport_id

_PLACEHOLDER = re.compile(r"^dp-[0-9a-f]{16}$")
#: Attributes whose disagreement between sources is not a conflict.
_SILENT = {"source", "active", "name"}


@dataclass(frozen=True)
class Conflict:
    """Two sources disagree; ``kept`` won by precedence, ``dropped`` was ignored."""

    what: str  # "node" | "port" | "xcon" | "edge" | "attribute"
    where: str  # node id, port or edge key
    kept: str
    dropped: str
    reason: str

    def __str__(self) -> str:
        return f"{self.what} {self.where}: kept {self.kept}, dropped {self.dropped} ({self.reason})"


@dataclass
class MergeResult:
    """The merged graph and every disagreement found on the way."""

    graph: MultiLayerGraph
    conflicts: list[Conflict] = field(default_factory=list)


def _label(i: int, names: Sequence[str] | None) -> str:
    return names[i] if names and i < len(names) else f"source {i + 1}"


def _canonical_names(graphs: Sequence[MultiLayerGraph], conflicts: list[Conflict],
                     names: Sequence[str] | None) -> list[dict[str, str | None]]:
    """Per source, map each packet/optical/host node id to its merged id (None = dropped)."""
    by_dpid: dict[int, str] = {}
    kind_of: dict[str, str] = {}
    for gi, g in enumerate(graphs):
        for n, d in sorted(g.g.nodes(data=True)):
            dpid = d.get("dpid")
            if d["kind"] in ("packet", "optical") and dpid is not None:
                have = by_dpid.get(dpid)
                if have is None or (_PLACEHOLDER.match(have) and not _PLACEHOLDER.match(n)):
                    by_dpid[dpid] = n
                elif have != n and not _PLACEHOLDER.match(n):
                    conflicts.append(Conflict("node", f"dpid {dpid:#x}", f"name {have}",
                                              f"name {n} from {_label(gi, names)}", "one dpid, two names"))
    maps: list[dict[str, str | None]] = []
    for gi, g in enumerate(graphs):
        m: dict[str, str | None] = {}
        for n, d in sorted(g.g.nodes(data=True)):
            if d["kind"] == "oport":
                continue
            dpid = d.get("dpid")
            target = by_dpid.get(dpid, n) if dpid is not None and d["kind"] in ("packet", "optical") else n
            prev_kind = kind_of.get(target)
            if prev_kind is not None and prev_kind != d["kind"]:
                conflicts.append(Conflict("node", target, f"{prev_kind} node", f"{d['kind']} node from "
                                          f"{_label(gi, names)}", "same id, different kinds"))
                m[n] = None
                continue
            kind_of[target] = d["kind"]
            m[n] = target
        for n, d in g.g.nodes(data=True):
            if d["kind"] == "oport":
                ots = m.get(d["ots"])
                m[n] = None if ots is None else oport_id(ots, d["port"])
        maps.append(m)
    return maps


def merge(*graphs: MultiLayerGraph, names: Sequence[str] | None = None) -> MergeResult:
    """Merge ``graphs`` (highest precedence first); ``names`` label the sources in conflicts."""
    conflicts: list[Conflict] = []
    maps = _canonical_names(graphs, conflicts, names)
    out = MultiLayerGraph()
    nodes: dict[str, dict[str, Any]] = {}
    ports: dict[str, dict[int, tuple[str, int]]] = {}  # ots -> port -> (granularity, source index)

    # nodes: first source wins, missing attributes filled from later sources
    for gi, g in enumerate(graphs):
        for n, d in sorted(g.g.nodes(data=True)):
            target = maps[gi][n]
            if target is None:
                continue
            if d["kind"] == "oport":
                ots = target.rsplit(":", 1)[0]
                have = ports.setdefault(ots, {}).get(d["port"])
                if have is None:
                    ports[ots][d["port"]] = (d["granularity"], gi)
                elif have[0] != d["granularity"]:
                    conflicts.append(Conflict("port", target, f"{have[0]} from {_label(have[1], names)}",
                                              f"{d['granularity']} from {_label(gi, names)}", "granularity differs"))
                continue
            merged = nodes.setdefault(target, {"kind": d["kind"]})
            for attr, value in d.items():
                if merged.get(attr) is None:
                    merged[attr] = value
                elif value is not None and merged[attr] != value and attr not in _SILENT:
                    conflicts.append(Conflict("attribute", f"{target}.{attr}", repr(merged[attr]),
                                              f"{value!r} from {_label(gi, names)}", "sources disagree"))
    for n, d in sorted(nodes.items()):
        if d["kind"] == "packet":
            out.add_packet_switch(n, d.get("dpid"))
            if d.get("ports"):  # every port the switch reported (the live source), edges or not
                out.g.nodes[n]["ports"] = d["ports"]
        elif d["kind"] == "host":
            out.add_host(n, d.get("ip"), d.get("mac"))
        elif d["kind"] == "optical":
            out.add_ots(n, d.get("dpid"), {p: gr for p, (gr, _) in ports.get(n, {}).items()},
                        d.get("unit_mbps") or 1.0, d.get("setup_time", DEFAULT_SETUP_TIME) or 0.0)

    # XCON sources and states: from the first source that has the XCON
    settled: set[str] = set()
    for gi, g in enumerate(graphs):
        for u, v, _, d in sorted(g.g.edges(keys=True, data=True), key=lambda e: e[2]):
            if d["kind"] != "xcon":
                continue
            a, b = maps[gi].get(u), maps[gi].get(v)
            if a is None or b is None:
                continue
            try:
                key = out.xcon_key(a, b)
            except TopologyError:
                continue  # granularity conflict already reported for these ports
            if key in settled:
                if d.get("active") and not out.g.edges[a, b, key]["active"]:
                    conflicts.append(Conflict("xcon", key, "inactive (earlier source)",
                                              f"active from {_label(gi, names)}", "XCON state differs"))
                continue
            settled.add(key)
            out.g.edges[a, b, key]["source"] = d.get("source", "spec")
            if d.get("active"):
                try:
                    out.set_xcon_active(a, b, True)
                except TopologyError as exc:
                    conflicts.append(Conflict("xcon", key, "the earlier active XCON",
                                              f"active {key} from {_label(gi, names)}", str(exc)))

    # the other edges, source by source
    for gi, g in enumerate(graphs):
        for u, v, k, d in sorted(g.g.edges(keys=True, data=True), key=lambda e: e[2]):
            if d["kind"] == "xcon":
                continue
            a, b = maps[gi].get(u), maps[gi].get(v)
            if a is None or b is None:
                conflicts.append(Conflict("edge", k, "nothing", f"{k} from {_label(gi, names)}",
                                          "an end node was dropped"))
                continue
            _merge_edge(out, d, u, v, a, b, gi, names, conflicts)
    return MergeResult(out, conflicts)


def _merge_edge(out: MultiLayerGraph, d: dict[str, Any], u: str, v: str, a: str, b: str, gi: int,
                names: Sequence[str] | None, conflicts: list[Conflict]) -> None:
    kind = d["kind"]
    if a == b:
        conflicts.append(Conflict("edge", f"{kind}:{u}-{v}", "nothing", f"from {_label(gi, names)}",
                                  "both ends are the same node after merging names"))
        return
    rename = {u: a, v: b}
    ports = {rename[n]: p for n, p in d.get("ports", {}).items()}
    ends: dict[str, int | None] = {n: ports.get(n) for n in (a, b)}
    if kind in ("packet", "adaptation", "access") and any(
            out.kind(n) == "packet" and ends[n] is None for n in (a, b)):
        conflicts.append(Conflict("edge", f"{kind}:{a}-{b}", "nothing", f"from {_label(gi, names)}",
                                  "packet end without a port number"))
        return
    key = out._key_for(kind, ends)
    src = d.get("source", "spec")
    if out.g.has_edge(a, b, key):
        kept = out.g.edges[a, b, key]
        for attr in ("capacity", "latency"):
            if attr in d and attr in kept and d[attr] != kept[attr]:
                conflicts.append(Conflict("attribute", f"{key}.{attr}", f"{kept[attr]!r} ({kept.get('source')})",
                                          f"{d[attr]!r} ({src}) from {_label(gi, names)}", "sources disagree"))
        return
    other = out.conflicting_edge(kind, ends)
    if other is not None:
        conflicts.append(Conflict("edge", key, f"{other} ({out.edge(other).get('source')})",
                                  f"{key} ({src}) from {_label(gi, names)}", "port already connected elsewhere"))
        return
    try:
        if kind == "packet":
            (n1, p1), (n2, p2) = sorted(ports.items())
            out.add_packet_link(n1, p1, n2, p2, d.get("capacity", 0.0), d.get("latency", 0.0), source=src)
        elif kind == "adaptation":
            sw, op = (a, b) if out.kind(a) == "packet" else (b, a)
            out.add_adaptation(sw, ports[sw], op, d.get("capacity"), source=src)
        elif kind == "optical":
            out.add_optical_link(a, b, d.get("capacity"), d.get("latency", 0.0), source=src)
        elif kind == "access":
            host, sw = (a, b) if out.kind(a) == "host" else (b, a)
            out.add_access(host, sw, ports[sw], d.get("capacity", 0.0), source=src)
    except TopologyError as exc:
        conflicts.append(Conflict("edge", key, "nothing", f"{key} ({src}) from {_label(gi, names)}", str(exc)))
