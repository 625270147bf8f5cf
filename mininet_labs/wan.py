"""WAN lab (issue 25, item 1): a topohub backbone at lab scale and what the control plane costs.

Each PoP of the topology is a packet switch plus an OTS (``topology.spec.from_topohub``), fibres from the
topology's edges. The controller discovers the optical domain from the vendor file; the lab records how
long it takes until every datapath is connected and every copper link is seen, then samples the
controller process from ``/proc`` (CPU share of one core, RSS) and the monitor's ``GET /monitor/cost``
(OpenFlow messages and bytes, coarse and fine) over a window at the monitor interval Ts = 1 s.

The elephant stage (:mod:`mininet_labs.wan_elephant`, with the loaded stage): on the unlit lab, a
best-effort circuit between two PoPs, an elephant among small flows over it, and the TE loop (OTTER
placement) moving the elephant onto a new circuit, verified and released; the stage's circuit goes after.

The loaded stage (:mod:`mininet_labs.wan_load`, skipped with ``load=False``): a backbone of circuits
over a spanning tree of the fibres is lit by reservations, the reservation service books ``n`` small
reservations that start together and ride the backbone (grooming), and the lab records how long each
took to be ACTIVE; then tagged UDP on every reservation at its booked rate, reservations arriving one by
one (a Poisson process), and the controller's CPU, RSS and monitor cost over a window with all of it lit
and the TE loop on.

Discovery is timed twice: with the lab (Mininet builds it while the controller runs, so the build
dominates: ~40 s on germany50, most of it Mininet creating namespaces, links and bridges), and again on
the built network (``rediscovery``, the lab's last stage): the controller is restarted (SIGTERM) on the same ports, as on a real
WAN whose switches exist, and timed from its start until every datapath is connected again and every
copper link is seen (the switches' reconnection back-off included).

``results.json``: ``topology``, ``pops``, ``fibres``, ``uplinks``, ``graph_problems``, ``discovery_s``, ``rediscovery``,
``window_s``, ``cpu_share``
(of one core), ``rss_mb``, ``monitor_cost`` (first and last ``/monitor/cost`` and the per-Ts growth);
``elephant`` (:mod:`mininet_labs.wan_elephant`); ``loaded``: ``backbone`` and ``reservations`` (each: ``n``,
``booked_s``, ``uses`` (circuits lit / ridden), ``active``, ``active_s`` and ``active_median_s`` after their
common start, ``states``), ``arrivals`` (:func:`mininet_labs.wan_load.book_arrivals`), ``traffic``,
``cpu_share``, ``rss_mb``, ``monitor_cost``.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_TOPOLOGY = "sndlib/abilene"

#: The lab's controller: the monitor at Ts, fine data by counting rules at hot spots, the TE loop on with
#: OTTER's placement (a moved flow held 5 s, as in the Fig. 2 placement lab).
WAN_CONFIG = ('[monitor]\ninterval = {ts}\nfine_backend = "flowstats"\n'
              '[te]\nenabled = true\nplacement = "otter"\nmin_hold_s = 5.0\n')


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


def window_cost(session: Any, seconds: float, ts: float) -> dict[str, Any]:
    """The controller's CPU share of one core, RSS and monitor cost per Ts over ``seconds``."""
    assert session.controller is not None
    pid = session.controller.pid
    cost0 = session.client.request("GET", "/monitor/cost")
    cpu0, w0 = proc_cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    cpu1, w1 = proc_cpu_s(pid), time.monotonic()
    cost1 = session.client.request("GET", "/monitor/cost")
    return {"cpu_share": round((cpu1 - cpu0) / (w1 - w0), 4), "rss_mb": proc_rss_mb(pid),
            "monitor_cost": {"first": cost0, "last": cost1, "per_ts": per_ts(cost0, cost1, w1 - w0, ts)}}


def rediscover(session: Any, timeout: float = 120.0) -> dict[str, float]:
    """Restart the controller (SIGTERM) on the lab as built and time, from its start, every datapath
    connected again (``connected_s``) and every copper link seen (``discovery_s``); ``api_s``: its API up."""
    started = session.restart_controller(kill=False)
    api = time.time() - started
    session.wait_connected(timeout)
    connected = time.time() - started
    session.wait_links(timeout=timeout)
    return {"api_s": round(api, 2), "connected_s": round(connected, 2), "discovery_s": round(time.time() - started, 2)}


def run(out: Path, *, quick: bool = False, topology: str | None = None, load: bool = True,
        reservations: int | None = None, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the WAN lab on ``topology`` (a topohub key, default sndlib/abilene); write ``out/results.json``.
    ``load``: also the loaded stage (backbone, traffic, ``reservations`` starting together: default 30
    with ``quick``, else 100)."""
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from mininet_labs.wan_load import uplinks_needed
    from mininet_labs.workdir import FIG2_DELAY
    from topology.spec import from_topohub, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    key = (topology or DEFAULT_TOPOLOGY).removeprefix("topohub:")
    if key in ("fig2", "mesh6"):
        raise ValueError("the WAN lab takes --topology topohub:<key> (e.g. topohub:sndlib/abilene)")
    spec = from_topohub(key)
    spec = from_topohub(key, uplinks=max(2, uplinks_needed(spec)))  # the backbone's tree + one spare
    out = Path(out).resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    static = out / "wan-optical.json"
    delay = FIG2_DELAY  # the OTS agents' provisioning delay (as the Fig. 2 labs); the file says its mean, as they do
    write_vendor_file(spec_to_vendor_file(spec, setup_time=sum(delay) / 2), static)  # (else one merge problem per OTS)
    ts = 1.0
    (work / "mlte.toml").write_text(WAN_CONFIG.format(ts=ts))
    window = 10.0 if quick else 60.0
    res: dict[str, Any] = {"lab": "wan", "quick": quick, "topology": key, "ts_s": ts, "window_s": window}
    db = work / "mlte.db"
    with net_lock():
        session = LabSession(spec, work, delay=delay, static_file=str(static), config_file=str(work / "mlte.toml"),
                             controller_args=("--db-url", f"sqlite:///{db}"))
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        try:
            session.start(timeout=300.0, timings=phases)
            res["connected_s"] = round(time.monotonic() - t0, 2)
            session.wait_links(timeout=120.0)
            res["discovery_s"] = round(time.monotonic() - t0, 2)
            # what is left for the controller once the lab is built (Mininet, OVS bridges, OTS agents): the
            # datapaths connect and links are seen while it builds, so this is often ~0
            res["phases"] = {**phases, "links_s": round(res["discovery_s"] - res["connected_s"], 2)}
            res["controller_discovery_s"] = round(phases["connect_s"] + res["phases"]["links_s"], 2)
            pops = len(spec.dpid_names()) // 2  # each PoP: one packet switch + one OTS
            res["pops"] = pops
            res["datapaths"] = len(spec.dpid_names())
            res["fibres"] = len(spec.links_of_kind("optical"))
            res["uplinks"] = len(spec.links_of_kind("adaptation")) // pops
            # what the controller could not merge (GET /topology "problems", metric mlte_graph_problems)
            res["graph_problems"] = session.client.topology().get("problems", [])
            progress(f"wan {key}: {pops} PoPs, discovery {res['discovery_s']} s in all: lab built in "
                     f"{phases['lab_build_s']} s, then every datapath connected and link seen in "
                     f"{res['controller_discovery_s']} s")
            res.update(window_cost(session, window, ts))
            progress(f"wan {key}: idle: CPU {100 * res['cpu_share']:.1f} % of a core, RSS {res['rss_mb']} MB")
            if load:
                from mininet_labs.wan_elephant import run_elephant
                from mininet_labs.wan_load import run_loaded
                res["elephant"] = run_elephant(session, spec, work, progress=progress)
                res["loaded"] = run_loaded(session, spec, db, work, quick=quick, ts=ts, window=window,
                                           reservations=reservations, progress=progress)
            res["controller_errors"] = session.controller_errors()
            # last: the stages above measure the controller of the lab's first start
            res["rediscovery"] = rediscover(session)
            progress(f"wan {key}: the controller restarted on the built network: every datapath connected "
                     f"{res['rediscovery']['connected_s']} s and every link seen {res['rediscovery']['discovery_s']} s "
                     f"after its start")
        finally:
            session.stop()
    (out / "results.json").write_text(json.dumps(res, indent=2, default=str))
    return res
