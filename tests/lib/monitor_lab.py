"""The Fig. 2 lab as the monitor's integration tests use it (shared by their module fixtures)."""
from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from mininet_labs.netlock import net_lock
from monitor.drops import OvsShapedQueue


def band_rules(lab, switch: str, band) -> list[str]:  # noqa: ANN001 - a LabSession and a rule_plan.Band
    """The rules of one ``rule_plan`` band on a switch of the lab, as ``ovs-ofctl`` prints them."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", lab.lab.bridge(switch),
                          f"cookie={band.cookie():#x}/{band.mask():#x}"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return [line.strip() for line in out.splitlines() if "cookie=" in line]


@contextlib.contextmanager
def fig2_monitor_lab(work: Path, monitor_toml: str, traffic_script: str, circuit: str = "initial") -> Iterator:
    """Controller + Fig. 2 lab with ``[monitor]`` set to ``monitor_toml``, ``circuit`` (FIG2_CIRCUITS) lit,
    h1 reaching h3, and A:3's egress behind the bounded 10 Mbit/s queue that counts drops
    (docs/monitor.md). Yields the LabSession (with ``a3`` and ``work`` set); everything is removed
    afterwards, and the controller's error log must be empty."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.session import LabSession
    from mininet_labs.spec import fig2_testbed, spec_to_vendor_file
    from mininet_labs.testbed import wait_ping
    from topology.vendor_file import write_vendor_file

    spec = fig2_testbed()
    static = work / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=0.185), static)
    conf = work / "mlte.toml"
    conf.write_text("[monitor]\n" + monitor_toml)
    (work / "traffic.py").write_text(traffic_script)
    with net_lock():
        session = LabSession(spec, work, static_file=str(static), config_file=str(conf))
        shaper = OvsShapedQueue()
        try:
            session.start(timeout=60)
            session.client.circuit(FIG2_CIRCUITS[circuit])
            session.wait_links(directed(FIG2_CIRCUIT_LINKS[circuit]), timeout=30)
            assert wait_ping(session.lab.node("h1"), "10.0.0.3", 30)
            a3 = f"{session.prefix}A-eth3"
            subprocess.run(["tc", "qdisc", "del", "dev", a3, "root"], capture_output=True)  # Mininet's HTB
            shaper.apply(a3, max_rate=10_000_000, limit=16)
            session.a3 = a3
            session.work = work
            yield session
            assert session.controller_errors() == "", session.controller_errors()
        finally:
            if getattr(session, "a3", None):
                with contextlib.suppress(Exception):
                    shaper.remove(session.a3)
            session.stop()
