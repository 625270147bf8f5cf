"""Bring-your-own OTTER instances: a JSON document ↔ (``Network``, ``FlowSet``).

Why a file format: the generated Table 4 scenarios are one family; an operator has measured
paths and real flows. The schema (docs/otter.md, "Instance files") names everything — sources,
destinations, links, paths, flows — so an error can point at the field (``flows[3].rtt.shape``)
and an exported scenario is readable and editable. Units: Mbit/s, ms; path loss in percent, a
flow's loss breakpoint as a rate (1e-3 = 0.1%), as in the paper's Tables 4 and 5.

Validation raises :class:`InvalidInputError` with one line ``<where>: <field path>: <problem>``
before anything is built, so a bad file never yields a half-made instance.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pce.errors import InvalidInputError
from pce.otter.demand import IGNORE, METRICS, SHAPE_NAMES, SHAPES
from pce.otter.profiles import PROFILES
from pce.otter.scenario import RESOURCES, FlowSet, Network

SCHEMA_VERSION = 1
TOLERANCE_SHAPES = ("step", "linear", "rational")
PROFILE_INDEX = {p.name: i for i, p in enumerate(PROFILES)}


@dataclass
class Instance:
    """A validated instance and the names the file gave (index = the arrays' index)."""

    network: Network
    flows: FlowSet
    source_names: list[str]
    dest_names: list[str]
    flow_ids: list[str]


class Fields:
    """Typed reads of one JSON object with the field path in every error message."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, problem: str) -> InvalidInputError:
        return InvalidInputError(f"{self.where}: {path}: {problem}")

    def obj(self, value: Any, path: str, allowed: tuple[str, ...] | None = None) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {type(value).__name__}")
        if allowed is not None:
            extra = sorted(set(value) - set(allowed))
            if extra:
                raise self.fail(f"{path}.{extra[0]}" if path else extra[0],
                                f"unknown field (allowed: {', '.join(allowed)})")
        return value

    def array(self, value: Any, path: str, *, non_empty: bool = False) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        if non_empty and not value:
            raise self.fail(path, "must not be empty")
        return value

    def name(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {value!r}")
        return value

    def number(self, value: Any, path: str, *, positive: bool = False, null_is: float | None = None,
               signed: bool = False) -> float:
        """A finite number ≥ 0 (> 0 with ``positive``, any with ``signed``); null → ``null_is`` if given."""
        if value is None and null_is is not None:
            return null_is
        if value is None:  # a missing field: name it as missing, not as "got None"
            raise self.fail(path, "missing (or null); give a finite number")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(path, f"expected a finite number, got {value!r}")
        if (value < 0 and not signed) or (positive and value == 0):
            raise self.fail(path, f"must be {'> 0' if positive else '≥ 0'}, got {value!r}")
        return float(value)

    def ref(self, value: Any, path: str, index: Mapping[str, int], what: str) -> int:
        name = self.name(value, path)
        if name not in index:
            raise self.fail(path, f"unknown {what} {name!r}")
        return index[name]

    def unique_names(self, items: list[Any], path: str, key: str | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, item in enumerate(items):
            p = f"{path}[{i}]" + (f".{key}" if key else "")
            n = self.name(item[key] if key else item, p)
            if n in out:
                raise self.fail(p, f"duplicate name {n!r}")
            out[n] = i
        return out

    def tolerance(self, value: Any, path: str) -> tuple[int, float]:
        """(shape code, breakpoint) of ``{"shape": step|linear|rational, "at": number > 0}``; null → ignored."""
        if value is None:
            return IGNORE, 1.0
        t = self.obj(value, path, ("shape", "at"))
        shape = t.get("shape")
        if shape not in TOLERANCE_SHAPES:
            raise self.fail(f"{path}.shape", f"unknown shape {shape!r} (choose from {', '.join(TOLERANCE_SHAPES)})")
        return SHAPES[shape], self.number(t.get("at"), f"{path}.at", positive=True)


def read_json(path: str | Path) -> Any:
    """The parsed JSON document of ``path``; a missing or malformed file is one-line bad input."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"{path}: no such file")
    try:
        return json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{path}: not valid JSON ({exc})") from None


def write_json(path: str | Path, doc: Any) -> None:
    """Write ``doc`` whole or not at all (a temporary file renamed over the target)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InvalidInputError(f"{path}: cannot write ({exc.strerror})") from None


TOP_FIELDS = ("version", "description", "sources", "destinations", "links", "paths", "flows")
DEST_FIELDS = ("name", *RESOURCES)
PATH_FIELDS = ("src", "dst", "links", "rtt_ms", "jitter_ms", "loss_pct", "bw_mbps")
FLOW_FIELDS = ("id", "src", "bw_mbps", *RESOURCES, *METRICS, "profile", "arrival_s", "duration_s")


def instance_from_doc(doc: Any, where: str = "instance") -> Instance:
    """Validate a parsed instance document and build its arrays (schema: docs/otter.md)."""
    f = Fields(where)
    top = f.obj(doc, "", TOP_FIELDS)
    version = top.get("version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise f.fail("version", f"unsupported version {version!r} (this build reads {SCHEMA_VERSION})")
    sources = f.array(top.get("sources"), "sources", non_empty=True)
    src_index = f.unique_names(sources, "sources")
    dests = f.array(top.get("destinations"), "destinations", non_empty=True)
    for i, d in enumerate(dests):
        f.obj(d, f"destinations[{i}]", DEST_FIELDS)
    dst_index = f.unique_names(dests, "destinations", "name")
    dest_caps: list[tuple[float, float, float] | None] = []
    for i, d in enumerate(dests):
        caps = tuple(f.number(d.get(r), f"destinations[{i}].{r}", null_is=math.inf) for r in RESOURCES)
        dest_caps.append(caps if any(math.isfinite(c) for c in caps) else None)
    links = f.array(top.get("links"), "links")
    for i, link in enumerate(links):
        f.obj(link, f"links[{i}]", ("name", "capacity_mbps"))
    link_index = f.unique_names(links, "links", "name")
    link_cap = {link["name"]: f.number(link.get("capacity_mbps"), f"links[{i}].capacity_mbps", null_is=math.inf)
                for i, link in enumerate(links)}
    paths = f.array(top.get("paths"), "paths", non_empty=True)
    rows = []
    for i, p in enumerate(paths):
        at = f"paths[{i}]"
        p = f.obj(p, at, PATH_FIELDS)
        s = f.ref(p.get("src"), f"{at}.src", src_index, "source")
        d = f.ref(p.get("dst"), f"{at}.dst", dst_index, "destination")
        names = [links[f.ref(n, f"{at}.links[{j}]", link_index, "link")]["name"]
                 for j, n in enumerate(f.array(p.get("links", []), f"{at}.links"))]
        bottleneck = min((link_cap[n] for n in names), default=math.inf)
        if p.get("bw_mbps") is None and not math.isfinite(bottleneck):
            raise f.fail(f"{at}.bw_mbps", "needed: the path crosses no link of finite capacity")
        bw = f.number(p.get("bw_mbps"), f"{at}.bw_mbps", null_is=bottleneck)
        rows.append((s, d, names, f.number(p.get("rtt_ms"), f"{at}.rtt_ms"),
                     f.number(p.get("jitter_ms", 0.0), f"{at}.jitter_ms"),
                     f.number(p.get("loss_pct", 0.0), f"{at}.loss_pct"), bw))
        if rows[-1][5] > 100:
            raise f.fail(f"{at}.loss_pct", f"a percentage must be ≤ 100, got {p['loss_pct']!r}")
    network = Network.from_paths(len(sources), rows, link_cap, dest_caps)
    flows = f.array(top.get("flows"), "flows")
    flow_rows, ids = [], []
    for i, fl in enumerate(flows):
        at = f"flows[{i}]"
        fl = f.obj(fl, at, FLOW_FIELDS)
        row: dict[str, Any] = {
            "src": f.ref(fl.get("src"), f"{at}.src", src_index, "source"),
            "bw": f.number(fl.get("bw_mbps"), f"{at}.bw_mbps", positive=True),
            "res": tuple(f.number(fl.get(r, 0.0), f"{at}.{r}") for r in RESOURCES),
            "arrival": f.number(fl.get("arrival_s", 0.0), f"{at}.arrival_s", signed=True),
            "duration": f.number(fl.get("duration_s", 0.0), f"{at}.duration_s"),
        }
        for m in METRICS:
            code, a = f.tolerance(fl.get(m), f"{at}.{m}")
            row[m] = None if code == IGNORE else (SHAPE_NAMES[code], a)
        prof = fl.get("profile")
        if prof is not None and prof not in PROFILE_INDEX:
            raise f.fail(f"{at}.profile", f"unknown profile {prof!r} (choose from {', '.join(PROFILE_INDEX)})")
        row["profile"] = PROFILE_INDEX.get(prof, -1)
        ids.append(f.name(fl["id"], f"{at}.id") if "id" in fl else f"f{i}")
        flow_rows.append(row)
    if len(set(ids)) != len(ids):
        dup = next(i for i, v in enumerate(ids) if ids.index(v) != i)
        raise f.fail(f"flows[{dup}].id", f"duplicate id {ids[dup]!r}")
    flowset = FlowSet.from_rows(flow_rows) if flow_rows else _empty_flows()
    return Instance(network, flowset, list(src_index), list(dst_index), ids)


def _empty_flows() -> FlowSet:
    z = np.zeros(0)
    return FlowSet(np.zeros(0, np.int64), np.zeros((0, 3), np.int8), np.zeros((0, 3)), z, np.zeros((0, 3)),
                   np.zeros(0, np.int64), z, z)


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file (errors name the file and the field)."""
    return instance_from_doc(read_json(path), str(path))


def _num(v: float) -> float | None:
    """JSON has no infinity: unlimited capacities are written as null."""
    return float(v) if math.isfinite(v) else None


def instance_to_doc(network: Network, flows: FlowSet, description: str = "") -> dict[str, Any]:
    """The instance document of arrays (e.g. a generated scenario); loading it gives the same LP."""
    names = network.link_names or [f"l{i}" for i in range(network.n_links)]
    dests = []
    for d in range(network.n_dests):
        entry: dict[str, Any] = {"name": f"d{d}"}
        if network.dest_is_edge[d]:
            entry.update({r: _num(network.dest_cap[d, j]) for j, r in enumerate(RESOURCES)})
        dests.append(entry)
    paths = []
    for p in range(network.n_paths):
        rtt, jit, loss, bw = (float(v) for v in network.path_metrics[p])
        paths.append({"src": f"s{network.path_src[p]}", "dst": f"d{network.path_dst[p]}",
                      "links": [names[j] for j in network.path_links[p] if j >= 0],
                      "rtt_ms": rtt, "jitter_ms": jit, "loss_pct": loss, "bw_mbps": bw})
    out_flows = []
    for i in range(len(flows)):
        row: dict[str, Any] = {"id": f"f{i}", "src": f"s{flows.src[i]}", "bw_mbps": float(flows.bw[i])}
        row.update({r: float(flows.res[i, j]) for j, r in enumerate(RESOURCES)})
        for j, m in enumerate(METRICS):
            code = int(flows.shapes[i, j])
            row[m] = None if code == IGNORE else {"shape": SHAPE_NAMES[code], "at": float(flows.breakpoints[i, j])}
        if flows.profile[i] >= 0:
            row["profile"] = PROFILES[int(flows.profile[i])].name
        if flows.arrival[i] or flows.duration[i]:
            row["arrival_s"], row["duration_s"] = float(flows.arrival[i]), float(flows.duration[i])
        out_flows.append(row)
    doc: dict[str, Any] = {"version": SCHEMA_VERSION}
    if description:
        doc["description"] = description
    doc.update({
        "sources": [f"s{s}" for s in range(network.n_sources)],
        "destinations": dests,
        "links": [{"name": n, "capacity_mbps": _num(c)} for n, c in zip(names, network.link_cap, strict=True)],
        "paths": paths,
        "flows": out_flows,
    })
    return doc
