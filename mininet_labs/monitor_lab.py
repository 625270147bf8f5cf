"""The Fig. 2 testbed as the monitor and the TE loop need it (labs, the demo and integration tests).

Circuit A:3–B:1 (the initial path's first hop, ODU2 = 10 Mbit/s at unit 1) gets the drop signal of
docs/monitor.md: A-eth3's Mininet HTB is replaced by an OVS linux-htb queue with a bounded leaf, so
the switch reports drops in OpenFlow queue stats.
"""
from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mininet_labs.netlock import net_lock
from monitor.drops import OvsShapedQueue

A3_RATE, A3_LIMIT = 10_000_000, 16  # bit/s and packets of the bounded queue on A-eth3
SETUP_S = 0.185  # the vendor file's XCON setup time (mean of the OTS provisioning delay)


def band_rules(lab: Any, switch: str, band: Any) -> list[str]:
    """The rules of one ``rule_plan`` band on a switch of the lab, as ``ovs-ofctl`` prints them."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", lab.lab.bridge(switch),
                          f"cookie={band.cookie():#x}/{band.mask():#x}"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return [line.strip() for line in out.splitlines() if "cookie=" in line]


@contextlib.contextmanager
def fig2_monitor_lab(work: Path, monitor_toml: str, *, check_errors: bool = True, circuit: str = "initial",
                     timeout: float = 60.0, **session_kw: Any) -> Iterator:
    """Controller + Fig. 2 lab with the config ``[monitor]`` + ``monitor_toml`` (which may go on
    with more sections), ``circuit`` (a FIG2_CIRCUITS name) lit, h1 reaching h3 (and h2 reaching h4), and A:3's
    egress behind the bounded 10 Mbit/s queue that counts drops. Yields the LabSession (with ``a3``
    and ``work`` set); everything is removed afterwards, by PID and by the lab's own names. With
    ``check_errors`` a non-empty controller error log fails the block. ``session_kw`` goes to
    :class:`LabSession` (e.g. ``controller_args``)."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.session import LabSession
    from mininet_labs.testbed import wait_ping
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    spec = fig2_testbed()
    static = work / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=SETUP_S), static)
    conf = work / "mlte.toml"
    conf.write_text("[monitor]\n" + monitor_toml)
    with net_lock():
        session = LabSession(spec, work, static_file=str(static), config_file=str(conf), **session_kw)
        shaper = OvsShapedQueue()
        try:
            session.start(timeout=timeout)
            session.client.circuit(FIG2_CIRCUITS[circuit])
            session.wait_links(directed(FIG2_CIRCUIT_LINKS[circuit]), timeout=30)
            for src, dst in (("h1", "10.0.0.3"), ("h2", "10.0.0.4")):
                if not wait_ping(session.lab.node(src), dst, 30):
                    raise TimeoutError(f"{src} does not reach {dst} over the {circuit} circuit")
            a3 = f"{session.prefix}A-eth3"
            subprocess.run(["tc", "qdisc", "del", "dev", a3, "root"], capture_output=True)  # Mininet's HTB
            shaper.apply(a3, max_rate=A3_RATE, limit=A3_LIMIT)
            session.a3 = a3
            session.work = work
            yield session
            if check_errors and session.controller_errors():
                raise AssertionError(f"controller handler errors:\n{session.controller_errors()}")
        finally:
            if getattr(session, "a3", None):
                with contextlib.suppress(Exception):
                    shaper.remove(session.a3)
            session.stop()
