"""The labs ``mlte lab list`` names and ``mlte lab run NAME`` runs.

Each lab module has ``run(out: Path, *, quick: bool, progress) -> dict`` (labs with seeds also take
``seeds: int``, which ``mlte lab run NAME --seeds N`` passes): it builds its network under
the machine-wide lock, cleans up however it ends, and writes ``out/results.json`` and its plots.
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
    Lab("planned-vs-oneshot", "mininet_labs.planned_vs_oneshot",
        "move a 1 kHz UDP probe flow onto a new circuit: ordered plan vs all messages at once",
        "OSCARS-TE Fig. 6/8-9"),
    Lab("multihoming", "mininet_labs.multihoming",
        "two multihomed sites, two paths, one loaded: static split vs throughput- and RTT-based flow mapping",
        "Sterca et al., Bandwidth Aggregation over Multihoming Links, Tables 1-2"),
)}
