"""Run the optical scan against live OTS nodes (called from a control-API greenthread).

Two ways, ``[controller] scan_parallel`` (docs/topology.md, "The optical scan"):

- *coded rounds* (default, ``0`` = every OTS at once, ``N >= 2`` = at most N OTSes per batch):
  :mod:`app.controller.scan_rounds` gives every unknown port a code (the rounds it is lit in); each
  round installs all its probes at once (one barrier per OTS, the OTSes in parallel), waits until
  packet PORT_STATUS settles, notes which packet ports came up, removes its probes and waits until
  those ports are down again; then the signatures are decoded and the ports left undecided get
  single follow-up probes;
- *one probe at a time* (``1``, the scan before the rounds): for each OTS and granularity group
  the free ports with unknown far ends are probed one XCON at a time
  (:mod:`app.controller.scan_inference`), one OTS after the other.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from os_ken.lib import hub

from app.controller.journal import JOURNAL
from app.controller.live_graph import ots_ports
from app.controller.live_southbound import green_parallel
from app.controller.model import OTS, PACKET, PortRef
from app.controller.network_view import NetworkView
from app.controller.ots_driver import BarrierTimeout, DriverError, XconResult
from app.controller.runtime import SETTINGS
from app.controller.scan_inference import (
    Attachment,
    GroupPlan,
    Probe,
    ScanOutcome,
    infer_group,
    plan_ots,
    probe_allowed,
)
from app.controller.scan_rounds import (
    Decoded,
    Key,
    decode,
    finish,
    followup_plans,
    merge_passes,
    one_probe_count,
    plan_rounds,
    port_groups,
    undecided_groups,
)
from app.controller.view_changes import PortChanged, ViewChange

LOG = logging.getLogger("mlte.controller.scan")


@dataclass
class ScanReport:
    attached: dict[tuple[int, int], Attachment] = field(default_factory=dict)  # (ots dpid, port) -> packet port
    ambiguous: dict[tuple[int, int], list[PortRef]] = field(default_factory=dict)
    unscannable: list[tuple[int, int]] = field(default_factory=list)
    probes: int = 0
    rounds: int = 0  # probe rounds (coded scan: many probes each; one-probe scan: one per probe)
    followups: int = 0  # single probes for ports the rounds left undecided
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


class ScanDriver(Protocol):
    """What the scan needs of :class:`app.controller.ots_driver.OtsDriver`."""

    def wait_reconciled(self, dpid: int, timeout: float) -> str | None: ...

    def busy_ports(self, dpid: int) -> set[int]: ...

    def install(self, ots: int, in_port: int, out_port: int, bidirectional: bool = True) -> XconResult: ...

    def install_many(self, ots: int, hops: list[tuple[int, int]], bidirectional: bool = True,
                     remove_first: Sequence[tuple[int, int]] = ()) -> list[XconResult | BarrierTimeout]: ...

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
             reconcile_wait: float | None = None, parallel: int | None = None) -> ScanReport:
    """Scan every connected OTS; ``known`` holds attachments already known (skipped, used as partners).
    ``reconcile_wait``: how long to wait for an OTS's XCON read-back (default ``barrier_timeout``);
    ``parallel``: ``[controller] scan_parallel`` unless given (1 = one probe at a time, 0 = coded
    rounds over every OTS at once, N = coded rounds over batches of N OTSes)."""
    if parallel is None:
        parallel = int(SETTINGS.controller.get("scan_parallel", 0))
    if parallel < 0:
        raise ValueError(f"scan_parallel must be >= 0, not {parallel}")
    watch = ProbeWatch()
    view.subscribe(watch)
    try:
        if parallel == 1:
            return _scan(view, driver, known, settle, reconcile_wait, watch)
        return _scan_coded(view, driver, known, settle, reconcile_wait, watch, parallel)
    finally:
        view.unsubscribe(watch)


def _ready_ots(view: NetworkView, driver: ScanDriver, reconcile_wait: float | None, report: ScanReport) -> list:
    """The OTS nodes whose XCONs are read back (the others are reported, never probed blind)."""
    wait = float(SETTINGS.controller["barrier_timeout"]) if reconcile_wait is None else reconcile_wait
    ready = []
    for sw in sorted(view.of_kind(OTS), key=lambda s: s.name):
        problem = driver.wait_reconciled(sw.dpid, wait)
        if problem is not None:
            report.errors.append(f"{sw.name}: not scanned: {problem}")
        else:
            ready.append(sw)
    return ready


def _scan_coded(view: NetworkView, driver: ScanDriver, known: dict[tuple[int, int], Attachment], settle: float,
                reconcile_wait: float | None, watch: ProbeWatch, parallel: int) -> ScanReport:
    report = ScanReport()
    t0 = time.monotonic()
    ready = _ready_ots(view, driver, reconcile_wait, report)
    size = parallel or max(1, len(ready))
    for i in range(0, len(ready), size):
        batch = ready[i:i + size]
        names = {sw.dpid: sw.name for sw in batch}
        groups = port_groups({sw.dpid: ots_ports(sw) for sw in batch}, {d: driver.busy_ports(d) for d in names}, known)
        plan = plan_rounds(groups)
        if len(plan.rounds) >= one_probe_count(groups):  # e.g. one OTS alone: coding buys nothing
            _one_probe_at_a_time(view, driver, known, settle, watch, batch, report)
            continue
        report.unscannable.extend(plan.unscannable)
        lit, seen = _rounds(view, driver, watch, plan.rounds, settle, report, names)
        decoded = decode(plan, lit, seen, known)
        _log_unexplained(decoded)
        if decoded.undecided:  # a second coded pass when it beats probing them one by one
            again, now = undecided_groups(plan, decoded, {d: driver.busy_ports(d) for d in names}, known)
            plan2 = plan_rounds(again)
            if plan2.rounds and len(plan2.rounds) < one_probe_count(again):
                lit2, seen2 = _rounds(view, driver, watch, plan2.rounds, settle, report, names)
                second = decode(plan2, lit2, seen2, now)
                _log_unexplained(second)
                decoded = merge_passes(decoded, second)
        outcomes: list[tuple[int, ScanOutcome]] = []
        for dpid, gplan in followup_plans(plan, decoded, {d: driver.busy_ports(d) for d in names}, known):
            outcome = _probe_group(view, driver, watch, dpid, names[dpid], gplan, settle, report, followup=True)
            if outcome is not None:
                outcomes.append((dpid, outcome))
        result = finish(decoded, outcomes)
        busy = {(d, p) for d in names for p in driver.busy_ports(d)}  # a circuit set up meanwhile: not ours to read
        report.attached.update({k: a for k, a in result.attached.items() if k not in busy})
        report.ambiguous.update({k: c for k, c in result.ambiguous.items() if k not in busy})
        report.unscannable.extend(result.unscannable)
    report.seconds = time.monotonic() - t0
    _done(report)
    return report


def _log_unexplained(decoded: Decoded) -> None:
    if decoded.unexplained:
        LOG.info("scan: %d packet port(s) with a signature no code has (late or lost PORT_STATUS?): %s",
                 len(decoded.unexplained), ", ".join(map(str, sorted(decoded.unexplained))))


Placed = dict[int, list[Probe]]  # per OTS: the probes (maybe) in place


def _rounds(view: NetworkView, driver: ScanDriver, watch: ProbeWatch, rounds: list[list[tuple[int, Probe]]],
            settle: float, report: ScanReport, names: dict[int, str]) -> tuple[list[set[Key]], list[set[PortRef]]]:
    """Run the rounds back to back; every probe is out again when this returns (also on an error).
    Returns, per round, the OTS ports lit and the packet ports that came up."""
    placed: Placed = {}
    lit: list[set[Key]] = []
    seen: list[set[PortRef]] = []
    try:
        for n, probes in enumerate(rounds):
            placed, on, ups = _round(driver, watch, n, probes, placed, settle, report, names)
            lit.append(on)
            seen.append(ups)
    finally:
        _clear(view, driver, watch, placed, report)
    return lit, seen


def _ports_of(probes: list[Probe]) -> set[int]:
    return {p for probe in probes for p in (probe.a, probe.b)}


def _round(driver: ScanDriver, watch: ProbeWatch, n: int, probes: list[tuple[int, Probe]], placed: Placed,
           settle: float, report: ScanReport, names: dict[int, str]) -> tuple[Placed, set[Key], set[PortRef]]:
    """One round: per OTS one batch behind one barrier — the previous round's probes out, this round's
    in (the OTSes in parallel) — then read the packet ports that came up. The batch darkens every port
    it touches before it lights the new probes, so a port lit in two rounds in a row goes down and up
    again and every round's port-ups are its own. Returns (probes in place, OTS ports lit, packet
    ports seen)."""
    report.rounds += 1
    want: Placed = {}
    for dpid, probe in probes:  # checked again: a circuit set up meanwhile (our own probes aside)
        if probe_allowed(probe, driver.busy_ports(dpid) - _ports_of(placed.get(dpid, []))):
            want.setdefault(dpid, []).append(probe)
        else:
            report.errors.append(f"{names[dpid]}: port {probe.a} or {probe.b} got an XCON during the scan")
    now: Placed = {}
    on: set[Key] = set()
    watch.start()

    def swap(dpid: int) -> None:
        old, new = placed.get(dpid, []), want.get(dpid, [])
        report.probes += len(new)
        try:
            results = driver.install_many(dpid, [(p.a, p.b) for p in new], bidirectional=False,
                                          remove_first=[(p.a, p.b) for p in old])
        except DriverError as exc:  # nothing confirmed: whatever was sent may be in place
            report.errors.append(f"{names[dpid]}: round {n + 1}: {exc}")
            now[dpid] = old + new
            return
        timed_out = any(isinstance(r, BarrierTimeout) for r in results)
        ok = [p for p, r in zip(new, results, strict=True) if isinstance(r, XconResult) and r.ok]
        for p, r in zip(new, results, strict=True):
            if not (isinstance(r, XconResult) and r.ok):
                report.errors.append(f"probe {dpid:x}:{p.a}->{p.b} refused: {getattr(r, 'errors', r)}")
        placed_now = [p for p, r in zip(new, results, strict=True) if not isinstance(r, XconResult) or r.ok]
        replaced = {p.a for p in placed_now}  # an ADD on a probe's in_port replaced it anyway
        busy = driver.busy_ports(dpid)
        still = old if timed_out else [p for p in old if p.a in busy and p.a not in replaced]
        now[dpid] = still + placed_now
        on.update((dpid, port) for p in ok for port in (p.a, p.b))

    green_parallel([lambda d=d: swap(d) for d in sorted(set(placed) | set(want))])
    ups = _wait_settled(watch, settle, limit=max(2.0, 8 * settle)) if want else set()
    JOURNAL.add("scan_round", round=n + 1, probes=sum(len(m) for m in want.values()), lit=[str(r) for r in sorted(ups)])
    return {d: ps for d, ps in now.items() if ps}, on, ups


def _clear(view: NetworkView, driver: ScanDriver, watch: ProbeWatch, placed: Placed, report: ScanReport) -> None:
    """Take every probe out (one batch per OTS, then one by one what is still there) and wait until
    the packet ports they lit are down again."""
    ups = watch.ups

    def out(dpid: int) -> None:
        try:
            driver.install_many(dpid, [], bidirectional=False, remove_first=[(p.a, p.b) for p in placed[dpid]])
        except DriverError as exc:
            report.errors.append(f"probe removal on {dpid:x}: {exc}")
        left = [p for p in placed[dpid] if p.a in driver.busy_ports(dpid)]
        if left:
            _take_out(driver, dpid, left, report)

    green_parallel([lambda d=d: out(d) for d in placed])
    _wait_down(view, ups, limit=2.0)


def _take_out(driver: ScanDriver, dpid: int, probes: list[Probe], report: ScanReport) -> None:
    """Remove one OTS's probes, each with a delete that matches only the probe."""
    for p in probes:
        try:
            res = driver.remove(dpid, p.a, bidirectional=False, only_to=p.b)
            if not res.ok:
                report.errors.append(f"probe {dpid:x}:{p.a}->{p.b} removal failed: {res.errors}")
        except DriverError as exc:
            report.errors.append(f"probe {dpid:x}:{p.a}->{p.b} removal failed: {exc}")


def _scan(view: NetworkView, driver: ScanDriver, known: dict[tuple[int, int], Attachment], settle: float,
          reconcile_wait: float | None, watch: ProbeWatch) -> ScanReport:
    """One probe at a time, one OTS after the other (``scan_parallel = 1``)."""
    report = ScanReport()
    t0 = time.monotonic()
    _one_probe_at_a_time(view, driver, known, settle, watch, _ready_ots(view, driver, reconcile_wait, report), report)
    report.seconds = time.monotonic() - t0
    _done(report)
    return report


def _done(report: ScanReport) -> None:
    JOURNAL.add("scan_done", probes=report.probes, rounds=report.rounds, followups=report.followups,
                found=sum(1 for a in report.attached.values() if a), ambiguous=len(report.ambiguous),
                errors=report.errors)


def _one_probe_at_a_time(view: NetworkView, driver: ScanDriver, known: dict[tuple[int, int], Attachment],
                         settle: float, watch: ProbeWatch, switches: list, report: ScanReport) -> None:
    for sw in switches:
        mine = {p: a for (d, p), a in known.items() if d == sw.dpid}
        for plan in plan_ots(ots_ports(sw), driver.busy_ports(sw.dpid), mine):
            outcome = _probe_group(view, driver, watch, sw.dpid, sw.name, plan, settle, report)
            if outcome is None:
                continue
            for p, att in outcome.attached.items():
                report.attached[(sw.dpid, p)] = att
            for p, cands in outcome.ambiguous.items():
                report.ambiguous[(sw.dpid, p)] = cands
            report.unscannable.extend((sw.dpid, p) for p in outcome.unscannable)


def _probe_group(view: NetworkView, driver: ScanDriver, watch: ProbeWatch, dpid: int, name: str, plan: GroupPlan,
                 settle: float, report: ScanReport, followup: bool = False) -> ScanOutcome | None:
    """Probe one group's plan one probe at a time and read it; None (the error reported) if the OTS
    stops answering or a port got an XCON meanwhile (the other groups and OTSes go on)."""
    lit = []
    try:
        for probe in plan.probes:
            if not probe_allowed(probe, driver.busy_ports(dpid)):
                raise PortBusy(f"port {probe.a} or {probe.b} got an XCON during the scan")
            if followup:
                report.followups += 1
            else:
                report.rounds += 1
            lit.append(frozenset(_probe(view, driver, watch, dpid, probe, settle, report)))
    except (DriverError, PortBusy) as exc:
        report.errors.append(f"{name}: {exc}")
        return None
    return infer_group(plan, lit)


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
