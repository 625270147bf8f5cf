"""The multi-layer graph shared by the controller, the PCE and the web service.

See docs/graph-model.md for the contract. ``MultiLayerGraph`` is a thin class around a
``networkx.MultiGraph`` (``.g``) that enforces the invariants a discovery source could break:
typed nodes, typed edges between the right kinds of node, at most one physical attachment per
port, potential XCONs only between ports of the same granularity, at most one active XCON per
optical port. Keys are stable strings so every part names a link the same way.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import networkx as nx

from topology import granularity as gran
from topology.errors import TopologyError

NODE_KINDS = ("packet", "optical", "oport", "host")
EDGE_KINDS = ("packet", "adaptation", "optical", "xcon", "access")

#: Default XCON provisioning time (s): the middle of the virtual OTS's 150-220 ms range.
DEFAULT_SETUP_TIME = 0.185


def dpid_name(dpid: int) -> str:
    """Node id of a switch discovered without a name (``"dp-000000000000000a"``)."""
    return f"dp-{dpid:016x}"


def oport_id(ots: str, port: int) -> str:
    """Node id of virtual optical port ``port`` of OTS ``ots`` (``"X:3"``)."""
    return f"{ots}:{int(port)}"


def edge_key(kind: str, end_a: str, end_b: str) -> str:
    """Stable key of an edge: kind and the two ends (``"A:2"`` / ``"X:1"`` / ``"h1"``), sorted."""
    lo, hi = sorted((end_a, end_b))
    return f"{kind}:{lo}-{hi}"


class MultiLayerGraph:
    """Packet switches, OTSes with their virtual ports, hosts, and the typed edges between them."""

    def __init__(self) -> None:
        self.g: nx.MultiGraph = nx.MultiGraph()
        self._key_index: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------ nodes
    def _check_new_node(self, node: str, kind: str) -> None:
        if not isinstance(node, str) or not node:
            raise TopologyError(f"node id must be a non-empty string, got {node!r}")
        if node in self.g:
            have = self.g.nodes[node]["kind"]
            raise TopologyError(f"node {node!r} already exists (as {have})")
        if kind != "oport" and ":" in node:
            raise TopologyError(f"{kind} node name {node!r} must not contain ':' (reserved for ports)")

    def _check_dpid(self, dpid: int | None) -> None:
        if dpid is None:
            return
        if isinstance(dpid, bool) or not isinstance(dpid, int) or not 0 <= dpid < 2**64:
            raise TopologyError(f"dpid must be an integer in [0, 2^64), got {dpid!r}")
        other = self.node_by_dpid(dpid)
        if other is not None:
            raise TopologyError(f"dpid {dpid:#x} is already used by node {other!r}")

    def add_packet_switch(self, name: str, dpid: int | None = None) -> str:
        """Add an OpenFlow packet switch; returns its node id."""
        self._check_new_node(name, "packet")
        self._check_dpid(dpid)
        self.g.add_node(name, kind="packet", dpid=dpid, name=name)
        return name

    def add_ots(
        self,
        name: str,
        dpid: int | None = None,
        ports: dict[int, str] | None = None,
        unit_mbps: float = 1.0,
        setup_time: float = DEFAULT_SETUP_TIME,
        source: str = "spec",
    ) -> str:
        """Add an optical transport switch, one ``oport`` node per virtual port and the potential
        XCON edges between every pair of its ports of the same granularity (``source`` is recorded
        on those XCONs: who reported the ports)."""
        self._check_new_node(name, "optical")
        self._check_dpid(dpid)
        if unit_mbps <= 0:
            raise TopologyError(f"OTS {name}: unit_mbps must be > 0, got {unit_mbps!r}")
        if setup_time < 0:
            raise TopologyError(f"OTS {name}: setup_time must be >= 0, got {setup_time!r}")
        clean: dict[int, str] = {}
        for port, g in (ports or {}).items():
            if isinstance(port, bool) or not isinstance(port, int) or port <= 0:
                raise TopologyError(f"OTS {name}: port numbers must be positive integers, got {port!r}")
            try:
                clean[port] = gran.normalize(g)
            except TopologyError as exc:
                raise TopologyError(f"OTS {name} port {port}: {exc}") from None
        self.g.add_node(name, kind="optical", dpid=dpid, name=name, unit_mbps=float(unit_mbps),
                        setup_time=float(setup_time))
        for port in sorted(clean):
            self._add_oport(name, port, clean[port], source)
        return name

    def add_ots_port(self, ots: str, port: int, granularity: str, source: str = "spec") -> str:
        """Add one virtual port to an existing OTS (a port learnt later), with its potential XCONs."""
        self._require(ots, "optical")
        if isinstance(port, bool) or not isinstance(port, int) or port <= 0:
            raise TopologyError(f"OTS {ots}: port numbers must be positive integers, got {port!r}")
        if oport_id(ots, port) in self.g:
            raise TopologyError(f"OTS {ots} already has port {port}")
        try:
            g = gran.normalize(granularity)
        except TopologyError as exc:
            raise TopologyError(f"OTS {ots} port {port}: {exc}") from None
        return self._add_oport(ots, port, g, source)

    def _add_oport(self, ots: str, port: int, granularity: str, source: str) -> str:
        attrs = self.g.nodes[ots]
        node = oport_id(ots, port)
        cap = gran.capacity_mbps(granularity, attrs["unit_mbps"])
        peers = [p for p in self.oports(ots) if self.g.nodes[p]["granularity"] == granularity]
        self.g.add_node(node, kind="oport", ots=ots, port=port, granularity=granularity, capacity=cap)
        for peer in peers:
            key = edge_key("xcon", node, peer)
            self.g.add_edge(node, peer, key=key, kind="xcon", active=False,
                            setup_time=attrs["setup_time"], capacity=cap, source=source)
        return node

    def add_host(self, name: str, ip: str | None = None, mac: str | None = None) -> str:
        """Add an end host (labs add them; discovery does not need them)."""
        self._check_new_node(name, "host")
        self.g.add_node(name, kind="host", ip=ip, mac=mac)
        return name

    # ------------------------------------------------------------------ edges
    def _require(self, node: str, *kinds: str) -> dict[str, Any]:
        if node not in self.g:
            raise TopologyError(f"unknown node {node!r}")
        attrs = self.g.nodes[node]
        if attrs["kind"] not in kinds:
            raise TopologyError(f"node {node!r} is {attrs['kind']}, expected {' or '.join(kinds)}")
        return attrs

    @staticmethod
    def _check_port(node: str, port: int) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or port < 0:
            raise TopologyError(f"port of {node} must be a non-negative integer, got {port!r}")

    @staticmethod
    def _check_capacity(capacity: float, latency: float) -> None:
        if capacity is None or capacity < 0:
            raise TopologyError(f"capacity must be >= 0 Mbit/s, got {capacity!r}")
        if latency is None or latency < 0:
            raise TopologyError(f"latency must be >= 0 ms, got {latency!r}")

    def edges_at_port(self, node: str, port: int, kinds: Iterable[str] = EDGE_KINDS) -> list[str]:
        """Keys of the edges attached to packet switch ``node`` port ``port`` (of the given kinds)."""
        kinds = set(kinds)
        out = []
        if node not in self.g:
            return out
        for _, _, key, data in self.g.edges(node, keys=True, data=True):
            if data["kind"] in kinds and data.get("ports", {}).get(node) == port:
                out.append(key)
        return sorted(out)

    def _oport_edges(self, oport: str, kinds: Iterable[str]) -> list[str]:
        kinds = set(kinds)
        return sorted(k for _, _, k, d in self.g.edges(oport, keys=True, data=True) if d["kind"] in kinds)

    def conflicting_edge(self, kind: str, ends: dict[str, int | None]) -> str | None:
        """Key of an existing edge that occupies a port a new edge of ``kind`` would use, or None.

        ``ends`` maps each end node to its port (None for oports and hosts). Rules: a packet port
        has at most one attachment (access or adaptation) and at most one packet link, and an access
        port carries no packet link; an oport has at most one attachment (adaptation or fibre).
        An edge with the same key is not a conflict.
        """
        key = self._key_for(kind, ends)
        for node, port in ends.items():
            nkind = self.g.nodes[node]["kind"] if node in self.g else None
            busy: list[str] = []
            if nkind == "packet" and port is not None:
                if kind == "adaptation":
                    busy = self.edges_at_port(node, port, ("access", "adaptation"))
                elif kind == "access":
                    busy = self.edges_at_port(node, port, ("access", "adaptation", "packet"))
                elif kind == "packet":
                    busy = self.edges_at_port(node, port, ("packet", "access"))
            elif nkind == "oport" and kind in ("adaptation", "optical"):
                busy = self._oport_edges(node, ("adaptation", "optical"))
            for other in busy:
                if other != key:
                    return other
        return None

    def _key_for(self, kind: str, ends: dict[str, int | None]) -> str:
        labels = [n if p is None else f"{n}:{p}" for n, p in ends.items()]
        return edge_key(kind, *labels)

    def _add_typed_edge(self, kind: str, ends: dict[str, int | None], replace: bool, **attrs: Any) -> str:
        key = self._key_for(kind, ends)
        (a, _), (b, _) = ends.items()
        if self.g.has_edge(a, b, key):
            raise TopologyError(f"edge {key} already exists")
        while True:
            other = self.conflicting_edge(kind, ends)
            if other is None:
                break
            if not replace:
                raise TopologyError(f"cannot add {key}: a port is already used by {other}")
            self.remove_edge(other)
        self.g.add_edge(a, b, key=key, kind=kind, **attrs)
        return key

    def add_packet_link(self, a: str, a_port: int, b: str, b_port: int, capacity: float = 0.0,
                        latency: float = 0.0, source: str = "lldp", replace: bool = False) -> str:
        """Add a packet-layer link (copper, or a circuit through the optical layer seen by LLDP).

        ``replace=True`` first removes packet links that used either port (a circuit moved).
        """
        self._require(a, "packet")
        self._require(b, "packet")
        self._check_port(a, a_port)
        self._check_port(b, b_port)
        if a == b:
            raise TopologyError(f"packet link {a}:{a_port}-{b}:{b_port} is a loop on one switch")
        self._check_capacity(capacity, latency)
        return self._add_typed_edge("packet", {a: a_port, b: b_port}, replace,
                                    ports={a: a_port, b: b_port}, capacity=float(capacity),
                                    latency=float(latency), source=source)

    def add_adaptation(self, switch: str, port: int, oport: str, capacity: float | None = None,
                       source: str = "scan", replace: bool = False) -> str:
        """Add a packet switch port ↔ virtual optical port edge (capacity defaults to the oport's)."""
        self._require(switch, "packet")
        oattrs = self._require(oport, "oport")
        self._check_port(switch, port)
        cap = oattrs["capacity"] if capacity is None else capacity
        self._check_capacity(cap, 0.0)
        return self._add_typed_edge("adaptation", {switch: port, oport: None}, replace,
                                    ports={switch: port}, capacity=float(cap), source=source)

    def add_optical_link(self, a: str, b: str, capacity: float | None = None, latency: float = 0.0,
                         source: str = "static", replace: bool = False) -> str:
        """Add a fibre between virtual ports of two different OTSes (same granularity)."""
        aa = self._require(a, "oport")
        ba = self._require(b, "oport")
        if aa["ots"] == ba["ots"]:
            raise TopologyError(f"fibre {a}-{b} joins two ports of one OTS (use an XCON)")
        if aa["granularity"] != ba["granularity"]:
            raise TopologyError(
                f"fibre {a}-{b} joins ports of different granularity ({aa['granularity']} vs {ba['granularity']})")
        cap = min(aa["capacity"], ba["capacity"]) if capacity is None else capacity
        self._check_capacity(cap, latency)
        return self._add_typed_edge("optical", {a: None, b: None}, replace, capacity=float(cap),
                                    latency=float(latency), source=source)

    def add_access(self, host: str, switch: str, port: int, capacity: float = 0.0, source: str = "spec",
                   replace: bool = False) -> str:
        """Attach a host to packet switch ``switch`` port ``port``."""
        self._require(host, "host")
        self._require(switch, "packet")
        self._check_port(switch, port)
        self._check_capacity(capacity, 0.0)
        return self._add_typed_edge("access", {host: None, switch: port}, replace,
                                    ports={switch: port}, capacity=float(capacity), source=source)

    def remove_edge(self, key: str) -> None:
        """Remove a non-XCON edge by key (XCONs are permanent potentials: deactivate them instead)."""
        u, v = self._ends_of(key)
        if self.g.edges[u, v, key]["kind"] == "xcon":
            raise TopologyError(f"{key} is a potential XCON; use set_xcon_active(..., False)")
        self.g.remove_edge(u, v, key)

    def _ends_of(self, key: str) -> tuple[str, str]:
        # A key -> ends cache, checked on use and rebuilt when stale, because callers may also
        # change ``.g`` directly (networkx has no index by edge key).
        cache = self._key_index
        ends = cache.get(key)
        if ends is not None and self.g.has_edge(ends[0], ends[1], key):
            return ends
        cache.clear()
        cache.update({k: (u, v) for u, v, k in self.g.edges(keys=True)})
        if key not in cache:
            raise TopologyError(f"unknown edge {key!r}")
        return cache[key]

    def edge(self, key: str) -> dict[str, Any]:
        """Attributes of edge ``key`` (the live attribute dict: changes to it change the graph)."""
        u, v = self._ends_of(key)
        return self.g.edges[u, v, key]

    def edge_ends(self, key: str) -> tuple[str, str]:
        """The two node ids of edge ``key``, sorted."""
        return tuple(sorted(self._ends_of(key)))  # type: ignore[return-value]

    # ------------------------------------------------------------------ XCONs
    def xcon_key(self, a: str, b: str) -> str:
        """Key of the potential XCON between two oports; TopologyError if there is none."""
        aa = self._require(a, "oport")
        ba = self._require(b, "oport")
        key = edge_key("xcon", a, b)
        if not self.g.has_edge(a, b, key):
            if aa["ots"] != ba["ots"]:
                raise TopologyError(f"no XCON between {a} and {b}: ports of different OTSes")
            raise TopologyError(
                f"no XCON between {a} and {b}: granularities differ ({aa['granularity']} vs {ba['granularity']})")
        return key

    def active_xcon_at(self, oport: str) -> str | None:
        """Key of the active XCON using ``oport``, or None."""
        for _, _, k, d in self.g.edges(oport, keys=True, data=True):
            if d["kind"] == "xcon" and d["active"]:
                return k
        return None

    def set_xcon_active(self, a: str, b: str, active: bool = True, source: str | None = None) -> str:
        """Mark the XCON between oports ``a`` and ``b`` active or inactive; returns its key.

        One rule per port: activating fails if either port is already in another active XCON.
        """
        key = self.xcon_key(a, b)
        if active:
            for port in (a, b):
                other = self.active_xcon_at(port)
                if other is not None and other != key:
                    raise TopologyError(f"cannot activate {key}: {port} is already in active {other}")
        data = self.g.edges[a, b, key]
        data["active"] = bool(active)
        if source is not None:
            data["source"] = source
        return key

    def active_xcons(self) -> list[str]:
        """Keys of the active XCONs, sorted."""
        return sorted(k for _, _, k, d in self.g.edges(keys=True, data=True)
                      if d["kind"] == "xcon" and d["active"])

    # ------------------------------------------------------------------ lookups
    def nodes_of_kind(self, kind: str) -> list[str]:
        """Node ids of one kind, sorted."""
        return sorted(n for n, d in self.g.nodes(data=True) if d["kind"] == kind)

    def edges_of_kind(self, kind: str) -> list[str]:
        """Edge keys of one kind, sorted."""
        return sorted(k for _, _, k, d in self.g.edges(keys=True, data=True) if d["kind"] == kind)

    def node_by_dpid(self, dpid: int) -> str | None:
        """The packet or optical node with this datapath id, or None."""
        for n, d in self.g.nodes(data=True):
            if d["kind"] in ("packet", "optical") and d.get("dpid") == dpid:
                return n
        return None

    def kind(self, node: str) -> str:
        """Kind of node ``node`` (TopologyError if unknown)."""
        if node not in self.g:
            raise TopologyError(f"unknown node {node!r}")
        return self.g.nodes[node]["kind"]

    def oport(self, ots: str, port: int) -> str:
        """Node id of port ``port`` of OTS ``ots``; TopologyError if the OTS has no such port."""
        self._require(ots, "optical")
        node = oport_id(ots, port)
        if node not in self.g:
            raise TopologyError(f"OTS {ots} has no port {port}")
        return node

    def oports(self, ots: str) -> list[str]:
        """Virtual ports of OTS ``ots``, by port number."""
        found = [(d["port"], n) for n, d in self.g.nodes(data=True) if d["kind"] == "oport" and d["ots"] == ots]
        return [n for _, n in sorted(found)]

    def peer_at_port(self, node: str, port: int, kinds: Iterable[str] = ("access", "adaptation", "packet")
                     ) -> str | None:
        """Node at the other end of packet switch ``node`` port ``port``: the oport of an adaptation
        edge, the host of an access edge or the peer switch of a packet link (first kind found)."""
        for kind in kinds:
            keys = self.edges_at_port(node, port, (kind,))
            if keys:
                u, v = self._ends_of(keys[0])
                return v if u == node else u
        return None

    def adaptation_at(self, oport: str) -> tuple[str, int] | None:
        """(packet switch, port) attached to ``oport`` by an adaptation edge, or None."""
        for u, v, d in self.g.edges(oport, data=True):
            if d["kind"] == "adaptation":
                sw = v if u == oport else u
                return sw, d["ports"][sw]
        return None

    def fibre_peer(self, oport: str) -> str | None:
        """The oport at the far end of the fibre on ``oport``, or None."""
        for u, v, d in self.g.edges(oport, data=True):
            if d["kind"] == "optical":
                return v if u == oport else u
        return None

    # ------------------------------------------------------------------ layer views
    def _view(self, node_kinds: set[str], edge_kinds: set[str], active_only: bool = False) -> nx.MultiGraph:
        def keep_node(n: str) -> bool:
            return self.g.nodes[n]["kind"] in node_kinds

        def keep_edge(u: str, v: str, k: str) -> bool:
            d = self.g.edges[u, v, k]
            if d["kind"] not in edge_kinds:
                return False
            return not (active_only and d["kind"] == "xcon" and not d["active"])

        return nx.subgraph_view(self.g, filter_node=keep_node, filter_edge=keep_edge)

    def packet_layer(self) -> nx.MultiGraph:
        """Read-only view: packet switches and hosts with packet and access edges."""
        return self._view({"packet", "host"}, {"packet", "access"})

    def optical_layer(self, active_only: bool = False) -> nx.MultiGraph:
        """Read-only view: OTSes and their oports with fibres and XCONs (only active ones if asked)."""
        return self._view({"optical", "oport"}, {"optical", "xcon"}, active_only)

    def physical(self) -> nx.MultiGraph:
        """Read-only view of the physical wiring plus active XCONs (what light can actually cross)."""
        return self._view(set(NODE_KINDS), {"access", "adaptation", "optical", "xcon"}, active_only=True)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """Node-link dict, nodes and links sorted so equal graphs give equal dicts.

        Link ends are ``u``/``v`` (sorted), because ``source`` is the edge's discovery source.
        """
        nodes = [{"id": n, **_plain(d)} for n, d in sorted(self.g.nodes(data=True), key=lambda x: x[0])]
        links = []
        for u, v, k, d in self.g.edges(keys=True, data=True):
            s, t = sorted((u, v))
            links.append({"u": s, "v": t, "key": k, **_plain(d)})
        links.sort(key=lambda x: x["key"])
        return {"directed": False, "multigraph": True, "nodes": nodes, "links": links}

    def to_json(self, indent: int | None = None) -> str:
        """JSON text of :meth:`to_dict` (what the controller stores and ``GET /topology`` returns)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiLayerGraph:
        """Rebuild a graph from :meth:`to_dict` output, checking kinds and ends."""
        if not isinstance(data, dict) or "nodes" not in data or "links" not in data:
            raise TopologyError("graph JSON must be an object with 'nodes' and 'links'")
        out = cls()
        for raw in data["nodes"]:
            attrs = dict(raw)
            try:
                node = attrs.pop("id")
                kind = attrs["kind"]
            except (KeyError, TypeError):
                raise TopologyError(f"graph JSON node without id/kind: {raw!r}") from None
            if kind not in NODE_KINDS:
                raise TopologyError(f"graph JSON node {node!r}: unknown kind {kind!r}")
            out.g.add_node(node, **attrs)
        for raw in data["links"]:
            attrs = dict(raw)
            try:
                u, v, key, kind = attrs.pop("u"), attrs.pop("v"), attrs.pop("key"), attrs["kind"]
            except (KeyError, TypeError):
                raise TopologyError(f"graph JSON link without u/v/key/kind: {raw!r}") from None
            if kind not in EDGE_KINDS:
                raise TopologyError(f"graph JSON link {key!r}: unknown kind {kind!r}")
            if u not in out.g or v not in out.g:
                raise TopologyError(f"graph JSON link {key!r}: unknown end node")
            if "ports" in attrs:
                attrs["ports"] = {n: int(p) for n, p in attrs["ports"].items()}
            out.g.add_edge(u, v, key=key, **attrs)
        return out

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> MultiLayerGraph:
        """Parse :meth:`to_json` output (a dict is accepted too)."""
        if isinstance(text, dict):
            return cls.from_dict(text)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TopologyError(f"graph JSON is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def copy(self, node_kinds: Iterable[str] | None = None, edge_kinds: Iterable[str] | None = None
             ) -> MultiLayerGraph:
        """Deep copy (attribute dicts included): the graph ``from_dict(to_dict())`` gives — nodes sorted,
        links by key with sorted ends, attributes as in :meth:`to_dict` — without the round trip's
        checks (this graph already passed them; the TE loop copies a WAN graph per decision).
        ``node_kinds`` / ``edge_kinds``: only those (and links between kept nodes), in the same order."""
        nk = None if node_kinds is None else set(node_kinds)
        ek = None if edge_kinds is None else set(edge_kinds)
        out = MultiLayerGraph()
        add_node, add_edge = out.g.add_node, out.g.add_edge
        for n, d in sorted(self.g.nodes(data=True), key=lambda x: x[0]):
            if nk is None or d.get("kind") in nk:
                add_node(n, **{k: v for k, v in _plain(d).items() if k != "id"})
        links = [(k, *sorted((u, v)), d) for u, v, k, d in self.g.edges(keys=True, data=True)
                 if (ek is None or d.get("kind") in ek) and (nk is None or (u in out.g and v in out.g))]
        links.sort(key=lambda x: x[0])
        for k, u, v, d in links:
            attrs = {a: x for a, x in _plain(d).items() if a not in ("u", "v", "key")}
            if "ports" in attrs:
                attrs["ports"] = {n: int(p) for n, p in attrs["ports"].items()}
            add_edge(u, v, key=k, **attrs)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiLayerGraph) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Iterator[str]:
        return iter(self.g)

    def __contains__(self, node: object) -> bool:
        return node in self.g

    def __repr__(self) -> str:
        counts = {k: len(self.nodes_of_kind(k)) for k in NODE_KINDS}
        return (f"MultiLayerGraph(packet={counts['packet']}, optical={counts['optical']}, "
                f"oports={counts['oport']}, hosts={counts['host']}, edges={self.g.number_of_edges()})")


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """Attribute dict with JSON-friendly values (ports dicts copied, tuples as lists)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = dict(v)
        elif isinstance(v, tuple):
            out[k] = list(v)
        else:
            out[k] = v
    return out
