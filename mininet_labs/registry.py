"""The labs ``mlte lab list`` names and ``mlte lab run NAME`` runs.

Each lab module has ``run(out: Path, *, quick: bool, progress) -> dict``: it builds its network under
the machine-wide lock, cleans up however it ends, and writes ``out/results.json`` and its plots. A lab
may take more keyword options (``runs``, ``seeds``, ``seed``, ``te``, ``demo``); ``mlte lab run`` passes only
those its ``run`` declares and refuses the others.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lab:
    name: str
    module: str
    summary: str
    paper: str  # the figure or study it reproduces

    def runner(self) -> Any:
        return importlib.import_module(self.module).run


LABS: dict[str, Lab] = {lab.name: lab for lab in (
    Lab("reservation-lifecycle", "mininet_labs.reservation_lifecycle",
        "a reservation h1 -> h3 is lit at its start, carries its bandwidth and is released at its end",
        "OSCARS-TE reservations (Fig. 2 testbed)"),
    Lab("fibre-cut", "mininet_labs.fibre_cut",
        "cut fibres under a lit reservation probed at 1 packet/ms: detection, restoration on a new path, loss",
        "OSCARS-TE failure recovery (Fig. 2 testbed, mesh6)"),
    Lab("controller-failover", "mininet_labs.controller_failover",
        "three controllers elected through etcd: the leader killed, the next one frozen; takeover time, "
        "probe loss on a lit reservation, a reservation starting meanwhile, an offloaded elephant adopted and "
        "released, duplicate/orphan XCONs and rules",
        "OSCARS-TE control plane availability (Fig. 2 testbed, several controllers)"),
    Lab("soak", "mininet_labs.soak",
        "three controllers for 10 minutes (--quick: 2): reservations lit and released back to back, an elephant "
        "offloaded and released every 40 s, the leader killed every minute; controller RSS and file "
        "descriptors, nothing left over",
        "mlte operations (Fig. 2 testbed, several controllers)"),
    Lab("planned-vs-oneshot", "mininet_labs.planned_vs_oneshot",
        "move a 1 kHz UDP probe flow onto a new circuit: ordered plan vs all messages at once",
        "OSCARS-TE Fig. 6/8-9"),
    Lab("elastic-offload", "mininet_labs.elastic_offload",
        "an elephant among 16 small transfers is detected and moved onto an elastic circuit, then released",
        "OSCARS-TE Fig. 10"),
    Lab("placement-compare", "mininet_labs.placement_compare",
        "the elastic-offload workload plus an interactive flow, once per [te] placement (otter, joint, cspf): "
        "bytes, throughput, RTT, flows inside their tolerance",
        "OTTER tolerance-weighted placement on OSCARS-TE Fig. 2"),
    Lab("placement-mesh6", "mininet_labs.placement_mesh",
        "placement-compare on mesh6 (4 packet switches, 2 OTS): a lit detour over another pair's circuit "
        "or a dark circuit to light",
        "OTTER tolerance-weighted placement, two-site mesh"),
    Lab("xcon-downtime", "mininet_labs.xcon_downtime",
        "reconfigure node Y (router bypass and back) under a 1 kHz UDP probe: downtime CDF and break-down",
        "OSCARS-TE Fig. 7"),
    Lab("big-vs-small", "mininet_labs.big_vs_small",
        "one long TCP flow shares a circuit with C in {4, 8, 16, 32} small transfers, per congestion control",
        "OSCARS-TE Figs. 4-5"),
    Lab("multihoming", "mininet_labs.multihoming",
        "two multihomed sites, two paths, one loaded: static split vs throughput- and RTT-based flow mapping",
        "Multihoming (Sterca et al.) Tables 1-2"),
    Lab("path-change", "mininet_labs.path_change",
        "the controller moves a probed flow between two delayed paths; path-change detector vs rolling minimum",
        "Path persistence (Reda et al.) detector"),
    Lab("overlay", "mininet_labs.overlay",
        "direct path vs split-TCP relays chosen by the RTT/loss-cut rule: TCP throughput improvement",
        "CRONets (Cai et al.) relay rule and split overlay"),
    Lab("wan", "mininet_labs.wan",
        "a topohub backbone (--topology topohub:<key>), one packet switch + OTS per PoP: discovery time, "
        "controller CPU and RSS, monitor OpenFlow cost per Ts",
        "mlte at WAN scale (issue 25)"),
)}
