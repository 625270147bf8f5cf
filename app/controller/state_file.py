"""What the controller learnt and must not forget across a restart: the optical scan's adaptations.

The scan is the only source of the OTS-port <-> packet-port adaptations when no static file gives
them; a controller that forgets them after a crash sees its lit circuits as 10 Gbit/s copper and no
longer recognises them. They are kept in a small versioned JSON file (``[controller] state_file``,
``mlte controller --state-file``), written atomically after every scan and read at start.

Entries are keyed by node *names* (the names the lab / operator gives, stable across restarts); the
datapath ids are stored too and used when a name is not known at load time (nodes named after their
bridges only once they connect). Plain module (no os-ken): unit-tested alone.

Format (version 1)::

    {"format": "mlte-controller-state", "version": 1, "saved_at": 1764000000.0,
     "adaptations": [{"ots": "X", "ots_dpid": 3841, "oport": 1, "switch": "A", "switch_dpid": 161, "port": 3}],
     "dark": [{"ots": "X", "ots_dpid": 3841, "oport": 2}]}

``dark``: OTS ports the scan found attached to no packet port (a fibre, or nothing).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.controller.model import PortRef

FORMAT = "mlte-controller-state"
VERSION = 1

#: (OTS dpid, OTS port) -> the packet port the scan found behind it, or None (dark)
Attached = dict[tuple[int, int], PortRef | None]


class StateFileError(Exception):
    """The state file exists but cannot be used (not JSON, another format or version, bad entries)."""

    user_error = True


@dataclass(frozen=True)
class Adaptation:
    """One scanned OTS port, by names (and dpids as a fallback); ``switch`` None = dark."""

    ots: str
    ots_dpid: int
    oport: int
    switch: str | None = None
    switch_dpid: int | None = None
    port: int | None = None


def to_entries(attached: Mapping[tuple[int, int], PortRef | None], name_of: Callable[[int], str]) -> list[Adaptation]:
    """The scan result as name-keyed entries (``name_of(dpid)``: the node's current name)."""
    out = []
    for (odpid, oport), ref in sorted(attached.items(), key=lambda kv: kv[0]):
        if ref is None:
            out.append(Adaptation(name_of(odpid), odpid, oport))
        else:
            out.append(Adaptation(name_of(odpid), odpid, oport, name_of(ref.dpid), ref.dpid, ref.port_no))
    return out


def dumps(entries: list[Adaptation], now: float | None = None) -> str:
    adapt = [{"ots": e.ots, "ots_dpid": e.ots_dpid, "oport": e.oport, "switch": e.switch,
              "switch_dpid": e.switch_dpid, "port": e.port} for e in entries if e.switch is not None]
    dark = [{"ots": e.ots, "ots_dpid": e.ots_dpid, "oport": e.oport} for e in entries if e.switch is None]
    doc = {"format": FORMAT, "version": VERSION, "saved_at": time.time() if now is None else now,
           "adaptations": adapt, "dark": dark}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _int(entry: dict, key: str, where: str) -> int:
    v = entry.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise StateFileError(f"{where}: '{key}' must be a non-negative integer, got {v!r}")
    return v


def _name(entry: dict, key: str, where: str) -> str:
    v = entry.get(key)
    if not isinstance(v, str) or not v:
        raise StateFileError(f"{where}: '{key}' must be a non-empty string, got {v!r}")
    return v


def loads(text: str, source: str = "state file") -> list[Adaptation]:
    """Parse a state document; StateFileError (one line, naming the problem) if it is not one we wrote."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StateFileError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StateFileError(f"{source}: not an mlte controller state file (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise StateFileError(f"{source}: version {doc.get('version')!r}, this controller reads version {VERSION}")
    out: list[Adaptation] = []
    for key, dark in (("adaptations", False), ("dark", True)):
        items = doc.get(key, [])
        if not isinstance(items, list):
            raise StateFileError(f"{source}: '{key}' must be a list")
        for i, e in enumerate(items):
            where = f"{source}: {key}[{i}]"
            if not isinstance(e, dict):
                raise StateFileError(f"{where} must be an object")
            ots, odpid, oport = _name(e, "ots", where), _int(e, "ots_dpid", where), _int(e, "oport", where)
            if dark:
                out.append(Adaptation(ots, odpid, oport))
            else:
                out.append(Adaptation(ots, odpid, oport, _name(e, "switch", where), _int(e, "switch_dpid", where),
                                      _int(e, "port", where)))
    return out


def save(path: str | Path, entries: list[Adaptation]) -> None:
    """Write the entries atomically (:func:`write_atomic`)."""
    write_atomic(path, dumps(entries))


def write_atomic(path: str | Path, text: str) -> None:
    """Write atomically: a temporary file in the same directory, fsync, rename over the old one (a crash
    leaves the old file or the new one, never half of one). The TE loop's records use it too."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(str(p.parent), os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a power cut
    finally:
        os.close(dir_fd)


def load(path: str | Path) -> list[Adaptation] | None:
    """The entries of the state file, or None if there is none yet (the first start)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    return loads(text, str(p))


def resolve(entries: list[Adaptation], names: Mapping[int, str]) -> Attached:
    """Entries -> the scan's table keyed by dpids: a node's name wins (``names``: dpid -> name given by
    the lab/operator), else the dpid stored with it."""
    by_name: dict[str, int] = {}
    for dpid, name in names.items():
        by_name.setdefault(name, dpid)
    out: Attached = {}
    for e in entries:
        odpid = by_name.get(e.ots, e.ots_dpid)
        if e.switch is None:
            out[(odpid, e.oport)] = None
        else:
            out[(odpid, e.oport)] = PortRef(by_name.get(e.switch, e.switch_dpid or 0), e.port or 0)
    return out


def load_attached(path: str, names: Mapping[int, str]) -> Attached:
    """What the control API starts with: the saved scan result, {} without a state file (``""`` = off)."""
    if not path:
        return {}
    entries = load(path)
    return resolve(entries, names) if entries else {}


def save_attached(path: str, attached: Mapping[tuple[int, int], PortRef | None], name_of: Callable[[int], Any]) -> None:
    """After a scan: write its (merged) result; nothing when the state file is off (``""``)."""
    if path:
        save(path, to_entries(attached, lambda d: str(name_of(d))))
