"""Run the optical scan against live OTS nodes (called from a control-API greenthread).

For each OTS, ports are grouped by granularity; the free ports with unknown far ends are probed
one XCON at a time (:mod:`app.controller.scan_inference` plans and reads them): install the probe and wait
for its barrier (= applied), wait until packet-layer PORT_STATUS settles, note which packet ports
came up, remove the probe and wait until those ports are down again. OTS nodes are probed one
after the other so every port that comes up can only be due to the current probe.
Every probe XCON is removed, also when a step fails.

The port-ups and the settling are read from the network view's changes (:class:`ProbeWatch`, a
listener for the length of the scan), and only a packet port's change counts as activity: what the
controller does meanwhile (the LLDP bursts an OTS port-up sets off, links found, log lines) says
nothing about which packet ports the probe lit. The barrier reply leaves the OTS after it lit the
probe's ports, whose packet PORT_STATUS follow within milliseconds (docs/ots.md), well inside
``scan_settle``.

Never on a live circuit: an OTS whose XCONs are not read back yet (a controller that just restarted)
is waited for, at most ``reconcile_wait`` s, then skipped with an error — never probed blind; ports
that carry an XCON (applied, unknown, adopted) are neither probed nor used as partners, checked again
before every probe; and a probe is removed with a delete that matches only the probe itself.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from os_ken.lib import hub

from app.controller.journal import JOURNAL
from app.controller.live_graph import ots_ports
from app.controller.model import OTS, PACKET, PortRef
from app.controller.network_view import NetworkView
from app.controller.ots_driver import DriverError, XconResult
from app.controller.runtime import SETTINGS
from app.controller.scan_inference import Attachment, Probe, infer_group, plan_ots, probe_allowed
from app.controller.view_changes import PortChanged, ViewChange

LOG = logging.getLogger("mlte.controller.scan")


@dataclass
class ScanReport:
    attached: dict[tuple[int, int], Attachment] = field(default_factory=dict)  # (ots dpid, port) -> packet port
    ambiguous: dict[tuple[int, int], list[PortRef]] = field(default_factory=dict)
    unscannable: list[tuple[int, int]] = field(default_factory=list)
    probes: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


class ScanDriver(Protocol):
    """What the scan needs of :class:`app.controller.ots_driver.OtsDriver`."""

    def wait_reconciled(self, dpid: int, timeout: float) -> str | None: ...

    def busy_ports(self, dpid: int) -> set[int]: ...

    def install(self, ots: int, in_port: int, out_port: int, bidirectional: bool = True) -> XconResult: ...

    def remove(self, ots: int, in_port: int, bidirectional: bool = True, only_to: int | None = None) -> XconResult: ...


class ProbeWatch:
    """The view's listener during a scan: the packet ports that came up since the current probe began
    (:meth:`start`) and have not gone down since, and ``activity``, a count of packet port changes
    (the settle window stays open while it moves)."""

    def __init__(self) -> None:
        self.activity = 0
        self._up: dict[PortRef, bool] = {}

    def start(self) -> None:
        """A new probe: what the previous ones lit is forgotten."""
        self._up = {}

    def __call__(self, change: ViewChange) -> None:
        if not isinstance(change, PortChanged) or change.switch.kind != PACKET:
            return
        self.activity += 1
        up = change.new is not None and change.new.up
        if up and not (change.old is not None and change.old.up):
            self._up[PortRef(change.switch.dpid, change.port_no)] = True
        elif not up:
            self._up[PortRef(change.switch.dpid, change.port_no)] = False

    @property
    def ups(self) -> set[PortRef]:
        return {r for r, up in self._up.items() if up}


def _wait_settled(watch: ProbeWatch, settle: float, limit: float) -> set[PortRef]:
    """Wait until no packet PORT_STATUS arrived for ``settle`` s (at most ``limit`` s)."""
    start = time.monotonic()
    last = watch.activity
    quiet_since = time.monotonic()
    while time.monotonic() - start < limit:
        hub.sleep(0.02)
        if watch.activity != last:
            last = watch.activity
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle:
            break
    return watch.ups


def _wait_down(view: NetworkView, ports: set[PortRef], limit: float) -> None:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if not any(
            (sw := view.switches.get(r.dpid)) and (p := sw.ports.get(r.port_no)) and p.up for r in ports
        ):
            return
        hub.sleep(0.02)


class PortBusy(Exception):
    """A probe's port got an XCON after the plan was made (e.g. a circuit set up during the scan)."""


def run_scan(view: NetworkView, driver: ScanDriver, known: dict[tuple[int, int], Attachment], settle: float,
             reconcile_wait: float | None = None) -> ScanReport:
    """Scan every connected OTS; ``known`` holds attachments already known (skipped, used as partners).
    ``reconcile_wait``: how long to wait for an OTS's XCON read-back (default ``barrier_timeout``)."""
    watch = ProbeWatch()
    view.subscribe(watch)
    try:
        return _scan(view, driver, known, settle, reconcile_wait, watch)
    finally:
        view.unsubscribe(watch)


def _scan(view: NetworkView, driver: ScanDriver, known: dict[tuple[int, int], Attachment], settle: float,
          reconcile_wait: float | None, watch: ProbeWatch) -> ScanReport:
    if reconcile_wait is None:
        reconcile_wait = float(SETTINGS.controller["barrier_timeout"])
    report = ScanReport()
    t0 = time.monotonic()
    for sw in sorted(view.of_kind(OTS), key=lambda s: s.name):
        problem = driver.wait_reconciled(sw.dpid, reconcile_wait)
        if problem is not None:
            report.errors.append(f"{sw.name}: not scanned: {problem}")
            continue
        mine = {p: a for (d, p), a in known.items() if d == sw.dpid}
        for plan in plan_ots(ots_ports(sw), driver.busy_ports(sw.dpid), mine):
            lit = []
            try:
                for probe in plan.probes:
                    if not probe_allowed(probe, driver.busy_ports(sw.dpid)):
                        raise PortBusy(f"port {probe.a} or {probe.b} got an XCON during the scan")
                    lit.append(frozenset(_probe(view, driver, watch, sw.dpid, probe, settle, report)))
            except (DriverError, PortBusy) as exc:  # an OTS that stops answering: report it, scan the others
                report.errors.append(f"{sw.name}: {exc}")
                continue
            outcome = infer_group(plan, lit)
            for p, att in outcome.attached.items():
                report.attached[(sw.dpid, p)] = att
            for p, cands in outcome.ambiguous.items():
                report.ambiguous[(sw.dpid, p)] = cands
            report.unscannable.extend((sw.dpid, p) for p in outcome.unscannable)
    report.seconds = time.monotonic() - t0
    JOURNAL.add("scan_done", probes=report.probes, found=sum(1 for a in report.attached.values() if a),
                ambiguous=len(report.ambiguous), errors=report.errors)
    return report


def _probe(view: NetworkView, driver: ScanDriver, watch: ProbeWatch, dpid: int, probe: Probe, settle: float,
           report: ScanReport) -> set[PortRef]:
    a, b = probe.a, probe.b
    report.probes += 1
    watch.start()
    installed = False
    try:
        try:
            res = driver.install(dpid, a, b, bidirectional=False)
        except DriverError:
            installed = True  # state unknown (no barrier reply): try to remove it anyway
            raise
        if not res.ok:
            report.errors.append(f"probe {dpid:x}:{a}->{b} refused: {res.errors}")
            return set()
        installed = True
        ups = _wait_settled(watch, settle, limit=max(2.0, 8 * settle))
        JOURNAL.add("scan_probe", dpid=dpid, a=a, b=b, lit=[str(r) for r in sorted(ups)])
        return ups
    finally:
        if installed:
            try:
                res = driver.remove(dpid, a, bidirectional=False, only_to=b)  # the probe, nothing else
                if not res.ok:
                    report.errors.append(f"probe {dpid:x}:{a}->{b} removal failed: {res.errors}")
            except DriverError as exc:
                report.errors.append(f"probe {dpid:x}:{a}->{b} removal failed: {exc}")
            _wait_down(view, watch.ups, limit=2.0)
