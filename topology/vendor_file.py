"""The static vendor topology file: the optical domain described by its operator (JSON or YAML).

The optical scan cannot see fibres between OTSes and does not scale, so an operator may supply the
optical domain as a file (schema version 1, documented with an example in docs/topology.md):

    version: 1
    unit_mbps: 1.0                       # optional, lab scale (1 unit = this many Mbit/s)
    packet_switches: [{name: A, dpid: 0xa1}]          # optional, needed by adaptations
    ots: [{name: X, dpid: 0x0f01, setup_time: 0.185, ports: {1: ODU2, 6: ODU0}}]
    fibres: [{a: "X:2", b: "Y:1", mbps: 10, latency_ms: 0}]      # mbps, latency_ms optional
    adaptations: [{switch: A, port: 3, oport: "X:1", mbps: 10}]  # optional, mbps optional

Errors name the file, the place in the document (``fibres[2].b``) and the reason.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from topology import granularity as gran
from topology.errors import TopologyError, VendorFileError
from topology.graph import DEFAULT_SETUP_TIME, MultiLayerGraph, oport_id

SCHEMA_VERSION = 1
SOURCE = "static"

_TOP_KEYS = {"version": True, "unit_mbps": False, "packet_switches": False, "ots": True, "fibres": False,
             "adaptations": False}
_ITEM_KEYS = {
    "packet_switches": ({"name", "dpid"}, set()),
    "ots": ({"name", "dpid", "ports"}, {"setup_time"}),
    "fibres": ({"a", "b"}, {"mbps", "latency_ms"}),
    "adaptations": ({"switch", "port", "oport"}, {"mbps"}),
}


class _Checker:
    """Type checks that raise VendorFileError with the file and document path."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, path: str, reason: str) -> VendorFileError:
        return VendorFileError(self.file, path, reason)

    def keys(self, obj: Any, path: str, required: set[str], optional: set[str]) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(path, f"must be a mapping, got {type(obj).__name__}")
        for k in obj:
            if k not in required | optional:
                raise self.fail(f"{path}.{k}" if path else str(k),
                                f"unknown key (allowed: {', '.join(sorted(required | optional))})")
        for k in sorted(required):
            if k not in obj:
                raise self.fail(path or "<top>", f"missing required key {k!r}")
        return obj

    def name(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or not v or ":" in v:
            raise self.fail(path, f"must be a non-empty name without ':', got {v!r}")
        return v

    def dpid(self, v: Any, path: str) -> int:
        if isinstance(v, str):
            try:
                v = int(v, 0)
            except ValueError:
                raise self.fail(path, f"not an integer or hex string: {v!r}") from None
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
            raise self.fail(path, f"dpid must be an integer in [0, 2^64) (or a string like '0x0f01'), got {v!r}")
        return v

    def port(self, v: Any, path: str) -> int:
        if isinstance(v, str) and v.isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise self.fail(path, f"port must be a positive integer, got {v!r}")
        return v

    def number(self, v: Any, path: str, positive: bool) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (v <= 0 if positive else v < 0):
            raise self.fail(path, f"must be a number {'> 0' if positive else '>= 0'}, got {v!r}")
        return float(v)

    def oport_ref(self, v: Any, path: str) -> tuple[str, int]:
        if not isinstance(v, str) or v.count(":") != 1:
            raise self.fail(path, f"must be '<ots>:<port>' like 'X:3', got {v!r}")
        ots, port = v.split(":")
        return self.name(ots, path), self.port(port, path)

    def oport_text(self, v: Any, path: str) -> str:
        return oport_id(*self.oport_ref(v, path))

    def items(self, doc: dict[str, Any], section: str) -> list[tuple[str, dict[str, Any]]]:
        raw = doc.get(section, [])
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise self.fail(section, f"must be a list, got {type(raw).__name__}")
        req, opt = _ITEM_KEYS[section]
        return [(f"{section}[{i}]", self.keys(item, f"{section}[{i}]", req, opt)) for i, item in enumerate(raw)]


def parse_vendor_document(doc: Any, file: str = "<document>") -> dict[str, Any]:
    """Validate a parsed document and return it normalised (ints, canonical granularities, defaults).

    Checks types and keys here, and the cross references (unknown OTS or port, granularity
    mismatch, a port cabled twice) by building the graph; every error says where it is.
    """
    c = _Checker(file)
    c.keys(doc, "", {k for k, r in _TOP_KEYS.items() if r}, {k for k, r in _TOP_KEYS.items() if not r})
    if doc["version"] != SCHEMA_VERSION:
        raise c.fail("version", f"unsupported schema version {doc['version']!r} (supported: {SCHEMA_VERSION})")
    unit = c.number(doc.get("unit_mbps", 1.0), "unit_mbps", positive=True)
    out: dict[str, Any] = {"version": SCHEMA_VERSION, "unit_mbps": unit, "packet_switches": [], "ots": [],
                           "fibres": [], "adaptations": []}
    for path, item in c.items(doc, "packet_switches"):
        out["packet_switches"].append({"name": c.name(item["name"], f"{path}.name"),
                                       "dpid": c.dpid(item["dpid"], f"{path}.dpid")})
    ots_items = c.items(doc, "ots")
    if not ots_items:
        raise c.fail("ots", "must list at least one OTS")
    for path, item in ots_items:
        ports_raw = item["ports"]
        if not isinstance(ports_raw, dict) or not ports_raw:
            raise c.fail(f"{path}.ports", "must be a non-empty mapping port -> granularity (e.g. {1: ODU2})")
        ports: dict[int, str] = {}
        for p, g in ports_raw.items():
            pn = c.port(p, f"{path}.ports.{p}")
            if pn in ports:
                raise c.fail(f"{path}.ports.{p}", f"port {pn} listed twice")
            try:
                ports[pn] = gran.normalize(g)
            except TopologyError as exc:
                raise c.fail(f"{path}.ports.{p}", str(exc)) from None
        out["ots"].append({"name": c.name(item["name"], f"{path}.name"), "dpid": c.dpid(item["dpid"], f"{path}.dpid"),
                           "setup_time": c.number(item.get("setup_time", DEFAULT_SETUP_TIME),
                                                  f"{path}.setup_time", positive=False),
                           "ports": dict(sorted(ports.items()))})
    for path, item in c.items(doc, "fibres"):
        f = {"a": c.oport_text(item["a"], f"{path}.a"), "b": c.oport_text(item["b"], f"{path}.b"),
             "mbps": None if item.get("mbps") is None else c.number(item["mbps"], f"{path}.mbps", positive=True),
             "latency_ms": c.number(item.get("latency_ms", 0.0), f"{path}.latency_ms", positive=False)}
        out["fibres"].append(f)
    for path, item in c.items(doc, "adaptations"):
        out["adaptations"].append({
            "switch": c.name(item["switch"], f"{path}.switch"), "port": c.port(item["port"], f"{path}.port"),
            "oport": c.oport_text(item["oport"], f"{path}.oport"),
            "mbps": None if item.get("mbps") is None else c.number(item["mbps"], f"{path}.mbps", positive=True)})
    _build(out, c)  # cross-reference checks
    return out


def _build(doc: dict[str, Any], c: _Checker) -> MultiLayerGraph:
    g = MultiLayerGraph()

    def at(path: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TopologyError as exc:
            raise c.fail(path, str(exc)) from None

    for i, s in enumerate(doc["packet_switches"]):
        at(f"packet_switches[{i}]", g.add_packet_switch, s["name"], s["dpid"])
    for i, o in enumerate(doc["ots"]):
        at(f"ots[{i}]", g.add_ots, o["name"], o["dpid"], o["ports"], doc["unit_mbps"], o["setup_time"],
           source=SOURCE)
    for i, f in enumerate(doc["fibres"]):
        for end in ("a", "b"):
            ots, port = f[end].split(":")
            if g.g.nodes.get(ots, {}).get("kind") != "optical":
                raise c.fail(f"fibres[{i}].{end}", f"unknown OTS {ots!r} (not in 'ots')")
            at(f"fibres[{i}].{end}", g.oport, ots, int(port))
        at(f"fibres[{i}]", g.add_optical_link, f["a"], f["b"], f["mbps"], f["latency_ms"], source=SOURCE)
    for i, a in enumerate(doc["adaptations"]):
        if g.g.nodes.get(a["switch"], {}).get("kind") != "packet":
            raise c.fail(f"adaptations[{i}].switch", f"unknown packet switch {a['switch']!r} (list it in 'packet_switches')")
        ots, port = a["oport"].split(":")
        if g.g.nodes.get(ots, {}).get("kind") != "optical":
            raise c.fail(f"adaptations[{i}].oport", f"unknown OTS {ots!r} (not in 'ots')")
        at(f"adaptations[{i}].oport", g.oport, ots, int(port))
        at(f"adaptations[{i}]", g.add_adaptation, a["switch"], a["port"], oport_id(ots, int(port)), a["mbps"],
           source=SOURCE)
    return g


def vendor_to_graph(doc: dict[str, Any], file: str = "<document>") -> MultiLayerGraph:
    """The multi-layer graph described by a vendor document (edges have ``source="static"``)."""
    return _build(parse_vendor_document(doc, file), _Checker(file))


def read_vendor_file(path: str | Path) -> dict[str, Any]:
    """Read and validate a vendor file; ``.json`` is JSON, anything else YAML (a JSON superset)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise VendorFileError(str(p), "", "file not found") from None
    except OSError as exc:
        raise VendorFileError(str(p), "", f"cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise VendorFileError(str(p), f"line {line} column {col}",
                              f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8") from None
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VendorFileError(str(p), f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    else:
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
            reason = getattr(exc, "problem", None) or str(exc)
            raise VendorFileError(str(p), where, f"invalid YAML: {reason}") from None
    return parse_vendor_document(doc, str(p))


def load_vendor_graph(path: str | Path) -> MultiLayerGraph:
    """Read, validate and convert a vendor file to a graph in one call."""
    doc = read_vendor_file(path)
    return _build(doc, _Checker(str(path)))


def write_vendor_file(doc: dict[str, Any], path: str | Path) -> None:
    """Write a vendor document as JSON (``.json``) or YAML (anything else), after validating it."""
    p = Path(path)
    parse_vendor_document(doc, str(p))
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(doc, indent=2) + "\n")
    else:
        import yaml

        p.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
