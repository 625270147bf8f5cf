"""The optical scan never touches a port with an XCON and never scans an OTS it has not read back.

Plain planning (app/controller/scan_inference.py) and the scan loop (app/controller/scan_runner.py) over a fake OTS
that behaves like the virtual agent: an ADD of an XCON it already holds is accepted silently, which is
how a scan that did not know the live XCONs used to delete them (docs/controller.md, Reconciliation).
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.controller.model import OTS, PortInfo, SwitchInfo
from app.controller.network_view import NetworkView
from app.controller.ots_driver import XconResult
from app.controller.runtime import Settings
from app.controller.scan_inference import Probe, busy_ports, plan_ots, probe_allowed
from app.controller.scan_runner import run_scan

X = 0xF01
FIG2_X = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0"}
OVERLAP = {"type_name": "OFPET_FLOW_MOD_FAILED", "code_name": "OFPFMFC_OVERLAP"}


def probed_ports(plans) -> set[int]:
    return {p for plan in plans for probe in plan.probes for p in (probe.a, probe.b)}


def test_busy_ports_are_both_ends_of_every_xcon():
    assert busy_ports({1: 2, 2: 1}, {4: 5}) == {1, 2, 4, 5}
    assert busy_ports() == set()


def test_fig2_x_after_a_restart_probes_around_the_adopted_circuit():
    plans = plan_ots(FIG2_X, busy_ports({1: 2, 2: 1}), {})
    assert probed_ports(plans) == {3, 4, 5}  # the live X 1<->2 is never probed
    assert plan_ots(FIG2_X, set(), {}) and 1 in probed_ports(plan_ots(FIG2_X, set(), {}))


def test_a_busy_port_is_no_partner_either():
    known = {2: None, 3: None}  # fibres from the static file
    plans = plan_ots(FIG2_X, {2, 1}, known)
    assert all(probe.b == 3 for plan in plans for probe in plan.probes)


@given(st.sets(st.integers(1, 8)), st.dictionaries(st.integers(1, 8), st.none()), st.data())
def test_no_plan_ever_touches_a_busy_port(busy, known, data):
    groups = {p: data.draw(st.sampled_from(["ODU2", "ODU0"])) for p in range(1, 9)}
    assert not probed_ports(plan_ots(groups, busy, known)) & busy


def test_probe_allowed():
    assert probe_allowed(Probe(3, 4), {1, 2})
    assert not probe_allowed(Probe(3, 4), {4})


class FakeOts:
    """An OTS table as the agent keeps it, with the driver's bookkeeping and read-back state."""

    def __init__(self, live: dict[int, int], reconciled: str | None = None, known: bool = True):
        self.table = dict(live)  # what the OTS holds
        self.xcons = {X: dict(live) if known else {}}  # what the driver knows
        self.unknown: dict[int, dict[int, int]] = {}
        self.problem = reconciled
        self.installs: list[tuple[int, int]] = []
        self.removes: list[tuple[int, int | None]] = []
        self.waited: list[float] = []
        self.on_install = None
        self.on_remove = None
        self.batches: list[list[tuple[int, int]]] = []

    def wait_reconciled(self, dpid, timeout):
        self.waited.append(timeout)
        return self.problem

    def busy_ports(self, dpid):
        return busy_ports(self.xcons.get(dpid, {}), self.unknown.get(dpid, {}))

    def install(self, dpid, a, b, bidirectional=True):
        self.installs.append((a, b))
        if self.on_install:
            self.on_install(a, b)
        if a in self.table and self.table[a] != b or any(o == b and i != a for i, o in self.table.items()):
            return XconResult(False, "X", [], [OVERLAP], 1.0, None)
        self.table[a] = b  # the same XCON again: accepted, nothing changes (as the agent does)
        self.xcons[dpid][a] = b
        return XconResult(True, "X", [], [], 1.0, 1.1)

    def install_many(self, dpid, hops, bidirectional=True, remove_first=()):
        for a, b in remove_first:
            self.remove(dpid, a, False, only_to=b)
        if hops:
            self.batches.append(list(hops))
        return [self.install(dpid, a, b, bidirectional) for a, b in hops]

    def remove(self, dpid, a, bidirectional=True, only_to=None):
        self.removes.append((a, only_to))
        if self.on_remove:
            self.on_remove(a, only_to)
        if a in self.table and (only_to is None or self.table[a] == only_to):
            del self.table[a]
            self.xcons[dpid].pop(a, None)
        return XconResult(True, "X", [], [], 1.0, 1.1)


def fig2_x_view(ports: dict[int, str] = FIG2_X) -> NetworkView:
    """A network view holding OTS X of Fig. 2 (or one with ``ports``), every port dark."""
    view = NetworkView(Settings())
    view.add_switch(SwitchInfo(X, OTS, 1, "X", {p: PortInfo(p, f"{g}-{p}", "02:00:00:00:0f:01", False)
                                                for p, g in ports.items()}))
    return view


BOTH = pytest.mark.parametrize("parallel", [0, 1], ids=["coded", "one-probe"])


@BOTH
def test_scan_leaves_a_live_circuit_alone(parallel):
    ots = FakeOts({1: 2, 2: 1})
    report = run_scan(fig2_x_view(), ots, {}, settle=0.0, reconcile_wait=0.5, parallel=parallel)
    assert ots.table == {1: 2, 2: 1}
    assert not {p for i in ots.installs for p in i} & {1, 2}
    assert all(only_to is not None for _, only_to in ots.removes)  # every removal names its probe
    assert report.probes == len(ots.installs) and report.errors == []
    assert report.attached == {(X, 3): None, (X, 4): None, (X, 5): None}


@BOTH
def test_a_scan_that_does_not_know_the_live_xcons_deletes_them(parallel):
    """What the restarted controller did before the read-back: the same OTS, the driver's table empty.
    (The read-back makes ``known`` true; this documents why it is needed.)"""
    ots = FakeOts({1: 2, 2: 1}, known=False)
    run_scan(fig2_x_view(), ots, {}, settle=0.0, reconcile_wait=0.5, parallel=parallel)
    assert ots.table != {1: 2, 2: 1}


@BOTH
def test_an_ots_still_reconciling_is_skipped_not_probed_blind(parallel):
    ots = FakeOts({1: 2, 2: 1}, reconciled="XCONs not read back after 0.5s (reconciling)", known=False)
    report = run_scan(fig2_x_view(), ots, {}, settle=0.0, reconcile_wait=0.5, parallel=parallel)
    assert ots.installs == [] and ots.removes == [] and ots.waited == [0.5]
    assert report.errors == ["X: not scanned: XCONs not read back after 0.5s (reconciling)"]
    assert ots.table == {1: 2, 2: 1}


def test_a_port_that_gets_an_xcon_during_the_scan_is_not_probed():
    ots = FakeOts({})

    def operator_sets_up_a_circuit(a, b):  # while the first probe is in, X 4<->5 is set up
        if not ots.table and (a, b) == (1, 2):
            ots.xcons[X].update({4: 5, 5: 4})
            ots.table.update({4: 5, 5: 4})

    ots.on_install = operator_sets_up_a_circuit
    report = run_scan(fig2_x_view(), ots, {}, settle=0.0, reconcile_wait=0.5, parallel=1)
    assert ots.table == {4: 5, 5: 4}
    assert not {p for i in ots.installs[1:] for p in i} & {4, 5}
    assert any("got an XCON during the scan" in e for e in report.errors)


def test_a_circuit_set_up_between_rounds_is_never_probed():
    """Coded rounds: the busy check runs before every round; ports busy at the end are not reported."""
    circuit: list[int] = []

    class CircuitAfterRoundOne(FakeOts):
        def install_many(self, dpid, hops, bidirectional=True, remove_first=()):
            out = super().install_many(dpid, hops, bidirectional, remove_first)
            if len(self.batches) == 1 and not circuit:  # the operator sets up a circuit on two idle ports
                idle = sorted(set(range(1, 12)) - {p for hop in hops for p in hop})[:2]
                circuit.extend(idle)
                self.xcons[X].update({idle[0]: idle[1], idle[1]: idle[0]})
                self.table.update({idle[0]: idle[1], idle[1]: idle[0]})
            return out

    ots = CircuitAfterRoundOne({})
    wide = {p: "ODU2" for p in range(1, 13)}  # 11 unknown ports and a fibre: 6 rounds beat 11 probes
    report = run_scan(fig2_x_view(wide), ots, {(X, 12): None}, settle=0.0, reconcile_wait=0.5, parallel=0)
    assert report.rounds < 11 and len(circuit) == 2
    a, b = circuit
    assert ots.table == {a: b, b: a}  # every probe gone, the circuit untouched
    later = [hop for batch in ots.batches[1:] for hop in batch]
    assert later and not {p for hop in later for p in hop} & {a, b}
    assert any("got an XCON during the scan" in e for e in report.errors)
    assert not {(X, a), (X, b)} & set(report.attached)  # not read from half its rounds
