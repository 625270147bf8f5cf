"""The topologies lab ``placement-compare`` runs on, and how each is brought up for the TE loop.

Why a scenario: the comparison is the same on every topology — a hot circuit behind the bounded
queue that counts drops, an elephant, small transfers and interactive flows on it, maybe background
traffic elsewhere — only the spec, the circuits lit at the start and who sends to whom change.
"""
from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_labs.monitor_lab import A3_LIMIT, A3_RATE, SETUP_S
from topology.spec import LabSpec


@dataclass(frozen=True)
class Flows:
    """Who sends what: (src host, dst host) pairs; ``interactive`` flows are probes from port 5060."""

    elephant: tuple[str, str]
    small: tuple[tuple[str, str], ...]
    interactive: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Scenario:
    """A topology, what is lit at the start, the hot port (switch, port) and the workload's hosts."""

    name: str
    spec: Callable[[], LabSpec]
    circuits: dict[str, list[tuple[str, int, int]]]
    links: tuple[tuple[str, int, str, int], ...]  # packet links that must be up (circuits and copper)
    hot: tuple[str, int]
    flows: Flows
    title: str


def _fig2() -> Scenario:
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS
    from topology.spec import fig2_testbed

    return Scenario("fig2", fig2_testbed, {"initial": FIG2_CIRCUITS["initial"]}, tuple(FIG2_CIRCUIT_LINKS["initial"]),
                    ("A", 3), Flows(("h1", "h3"), (("h2", "h4"),), (("h1", "h3"),)),
                    "the Fig. 2 testbed (one dark circuit A:4-C:2 for A -> C)")


def _mesh6() -> Scenario:
    from mininet_labs.mesh_spec import MESH6_CIRCUIT_LINKS, MESH6_CIRCUITS, MESH6_COPPER, mesh6

    links = tuple(x for v in MESH6_CIRCUIT_LINKS.values() for x in v) + tuple(MESH6_COPPER)
    return Scenario("mesh6", mesh6, MESH6_CIRCUITS, links, ("A", 3),
                    Flows(("h1", "h3"), (("h2", "h4"), ("h5", "h6")), (("h1", "h3"), ("h5", "h6"))),
                    "mesh6 (A-C and B-D lit, lit detour A-B-D-C, dark circuits over fibre 7)")


SCENARIOS: dict[str, Callable[[], Scenario]] = {"fig2": _fig2, "mesh6": _mesh6}


@contextlib.contextmanager
def scenario_lab(work: Path, sc: Scenario, config_toml: str, *, timeout: float = 60.0) -> Iterator[Any]:
    """Controller (config ``config_toml``) + the scenario's lab, its circuits lit, every sending host
    reaching its receiver, the hot port behind the bounded 10 Mbit/s queue that counts drops
    (:mod:`mininet_labs.monitor_lab`). Yields the LabSession; everything is removed afterwards."""
    from mininet_labs.circuits import directed
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from mininet_labs.testbed import wait_ping
    from monitor.drops import OvsShapedQueue
    from topology.spec import spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    spec = sc.spec()
    static = work / f"{sc.name}-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=SETUP_S), static)
    conf = work / "mlte.toml"
    conf.write_text(config_toml)
    ips = {h.name: h.ip for h in spec.hosts}
    pairs = {sc.flows.elephant, *sc.flows.small, *sc.flows.interactive}
    with net_lock():
        session = LabSession(spec, work, static_file=str(static), config_file=str(conf))
        shaper = OvsShapedQueue()
        hot = ""
        try:
            session.start(timeout=timeout)
            for hops in sc.circuits.values():
                session.client.circuit(hops)
            session.wait_links(directed(list(sc.links)), timeout=30)
            for src, dst in sorted(pairs):
                if not wait_ping(session.lab.node(src), ips[dst], 30):
                    raise TimeoutError(f"{src} does not reach {dst} on {sc.name}")
            hot = f"{session.prefix}{sc.hot[0]}-eth{sc.hot[1]}"
            subprocess.run(["tc", "qdisc", "del", "dev", hot, "root"], capture_output=True)  # Mininet's HTB
            shaper.apply(hot, max_rate=A3_RATE, limit=A3_LIMIT)
            session.ips = ips
            yield session
        finally:
            if hot:
                with contextlib.suppress(Exception):
                    shaper.remove(hot)
            session.stop()
