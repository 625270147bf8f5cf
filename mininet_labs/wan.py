"""WAN lab (issue 25, item 1; first stage): a topohub backbone at lab scale and what the control plane costs.

Each PoP of the topology is a packet switch plus an OTS (``topology.spec.from_topohub``), fibres from the
topology's edges. The controller discovers the optical domain from the vendor file; the lab records how
long it takes until every datapath is connected and every copper link is seen, then samples the
controller process from ``/proc`` (CPU share of one core, RSS) and the monitor's ``GET /monitor/cost``
(OpenFlow messages and bytes, coarse and fine) over a window at the monitor interval Ts = 1 s.

Not yet done (see the report of branch ``wanlab``): the lit backbone, gravity traffic, reservations,
elephants and the TE loop's decision time.

``results.json``: ``topology``, ``pops``, ``fibres``, ``discovery_s``, ``window_s``, ``cpu_share`` (of one
core), ``rss_mb``, ``monitor_cost`` (first and last ``/monitor/cost`` and the per-Ts growth).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_TOPOLOGY = "sndlib/abilene"


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (``VmRSS``)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return round(kb / 1024, 1)


def per_ts(first: dict[str, Any], last: dict[str, Any], seconds: float, ts: float) -> dict[str, float]:
    """Growth per Ts of every numeric counter of ``/monitor/cost`` between two readings."""
    if seconds <= 0:
        raise ValueError("need a window > 0 s")
    out: dict[str, float] = {}
    for key, value in last.items():
        before = first.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(before, (int, float)):
            out[key] = round((value - before) * ts / seconds, 2)
    return out


def run(out: Path, *, quick: bool = False, topology: str | None = None,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the WAN lab on ``topology`` (a topohub key, default sndlib/abilene); write ``out/results.json``."""
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from topology.spec import from_topohub, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    key = (topology or DEFAULT_TOPOLOGY).removeprefix("topohub:")
    if key in ("fig2", "mesh6"):
        raise ValueError("the WAN lab takes --topology topohub:<key> (e.g. topohub:sndlib/abilene)")
    spec = from_topohub(key)
    out = Path(out).resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    static = out / "wan-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=0.1), static)
    ts = 1.0
    (work / "mlte.toml").write_text(f"[monitor]\ninterval = {ts}\n")
    window = 10.0 if quick else 60.0
    res: dict[str, Any] = {"lab": "wan", "quick": quick, "topology": key, "ts_s": ts, "window_s": window}
    with net_lock():
        session = LabSession(spec, work, static_file=str(static), config_file=str(work / "mlte.toml"))
        t0 = time.monotonic()
        try:
            session.start(timeout=300.0)
            res["connected_s"] = round(time.monotonic() - t0, 2)
            session.wait_links(timeout=120.0)
            res["discovery_s"] = round(time.monotonic() - t0, 2)
            pops = len(spec.dpid_names()) // 2  # each PoP: one packet switch + one OTS
            res["pops"] = pops
            res["datapaths"] = len(spec.dpid_names())
            res["fibres"] = len(spec.links_of_kind("optical"))
            progress(f"wan {key}: {pops} PoPs, discovery {res['discovery_s']} s")
            assert session.controller is not None
            pid = session.controller.pid
            cost0 = session.client.request("GET", "/monitor/cost")
            cpu0, w0 = proc_cpu_s(pid), time.monotonic()
            time.sleep(window)
            cpu1, w1 = proc_cpu_s(pid), time.monotonic()
            cost1 = session.client.request("GET", "/monitor/cost")
            res["cpu_share"] = round((cpu1 - cpu0) / (w1 - w0), 4)
            res["rss_mb"] = proc_rss_mb(pid)
            res["monitor_cost"] = {"first": cost0, "last": cost1, "per_ts": per_ts(cost0, cost1, w1 - w0, ts)}
            res["controller_errors"] = session.controller_errors()
            progress(f"wan {key}: CPU {100 * res['cpu_share']:.1f} % of a core, RSS {res['rss_mb']} MB")
        finally:
            session.stop()
    (out / "results.json").write_text(json.dumps(res, indent=2, default=str))
    return res
