"""The optical scan learns what its probes lit from the network view's changes, not from the journal.

A real :class:`NetworkView` and a fake OTS that lights like the virtual agent (docs/ots.md: an OTS port
in a probe XCON brings up the packet port cabled to it, a moment after the barrier reply) drive
:func:`app.controller.scan_runner.run_scan`; only packet port changes keep a probe's settle window open.
"""
from __future__ import annotations

import time

import pytest
from os_ken.lib import hub

from app.controller import scan_runner
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import NetworkView
from app.controller.ots_driver import XconResult
from app.controller.runtime import Settings
from app.controller.scan_runner import ProbeWatch, run_scan

A, C, X, Y = 0xA1, 0xC1, 0xF01, 0xF02
A3, C1, A4, C2 = PortRef(A, 3), PortRef(C, 1), PortRef(A, 4), PortRef(C, 2)
# Fig. 2's X: ODU2 ports 1-5 (1 cabled to A:3, 3 to C:1, the others fibres or nothing), ODU0 port 6;
# a second OTS Y of the same shape (2 cabled to C:2, 4 to A:4) for the rounds that light both at once
GRAN = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0"}
CABLED = {(X, 1): A3, (X, 3): C1, (Y, 2): C2, (Y, 4): A4}


def port(n: int, up: bool, name: str = "") -> PortInfo:
    return PortInfo(n, name or f"eth{n}", "00:00:00:00:00:0a", up)


def lab_view(with_y: bool = False) -> NetworkView:
    view = NetworkView(Settings())
    view.add_switch(SwitchInfo(A, PACKET, 4, "A", {3: port(3, False), 4: port(4, False)}))
    view.add_switch(SwitchInfo(C, PACKET, 4, "C", {1: port(1, False), 2: port(2, False)}))
    for dpid, name in [(X, "X"), (Y, "Y")][: 2 if with_y else 1]:
        view.add_switch(SwitchInfo(dpid, OTS, 1, name, {p: port(p, False, f"{g}-{p}") for p, g in GRAN.items()}))
    return view


class LitOts:
    """An OTS whose probe lights the packet ports cabled to its two ends ``light_s`` after the barrier
    reply, and darkens them when the probe goes."""

    def __init__(self, view: NetworkView, light_s: float = 0.03) -> None:
        self.view, self.light_s = view, light_s
        self.installs: list[tuple[int, int]] = []
        self.batches: list[tuple[int, int]] = []  # (OTS, probes) per install_many

    def wait_reconciled(self, dpid: int, timeout: float) -> str | None:
        return None

    def busy_ports(self, dpid: int) -> set[int]:
        return set()

    def _light(self, ots: int, ends: tuple[int, int], up: bool) -> None:
        for p in ends:
            self.view.set_port(ots, p, port(p, up, f"{GRAN[p]}-{p}"), time.time())  # the OTS's own ports
            if (ref := CABLED.get((ots, p))) is not None:
                self.view.set_port(ref.dpid, ref.port_no, port(ref.port_no, up), time.time())

    def install(self, ots: int, in_port: int, out_port: int, bidirectional: bool = True) -> XconResult:
        self.installs.append((in_port, out_port))
        hub.spawn_after(self.light_s, self._light, ots, (in_port, out_port), True)
        return XconResult(True, "X", [], [], 1.0, 1.1)

    def install_many(self, ots: int, hops: list[tuple[int, int]], bidirectional: bool = True,
                     remove_first: list[tuple[int, int]] = ()) -> list:
        """One barrier for the batch: the removals darken at once, every probe lights ``light_s`` after
        the reply."""
        for a, b in remove_first:
            self.remove(ots, a, False, only_to=b)
        if hops:
            self.batches.append((ots, len(hops)))
        return [self.install(ots, a, b, bidirectional) for a, b in hops]

    def remove(self, ots: int, in_port: int, bidirectional: bool = True, only_to: int | None = None) -> XconResult:
        self._light(ots, (in_port, only_to or in_port), False)
        return XconResult(True, "X", [], [], 1.0, 1.1)


def test_the_scan_reads_each_probes_port_ups_from_the_views_changes():
    view = lab_view()
    ots = LitOts(view)
    report = run_scan(view, ots, {}, settle=0.1, reconcile_wait=0.5, parallel=1)
    assert ots.installs == [(1, 2), (1, 3), (1, 4), (1, 5)]  # anchor X:1 with every other ODU2 port
    assert report.errors == [] and report.probes == 4
    assert report.attached == {(X, 1): A3, (X, 2): None, (X, 3): C1, (X, 4): None, (X, 5): None}
    assert report.unscannable == [(X, 6)] and report.ambiguous == {}
    lit = [e["lit"] for e in JOURNAL.since(0, "scan_probe")][-4:]
    assert lit == [[str(A3)], [str(A3), str(C1)], [str(A3)], [str(A3)]]  # each probe's own ports only


def test_coded_rounds_light_both_otses_at_once_and_tell_their_ports_apart():
    view = lab_view(with_y=True)
    ots = LitOts(view)
    known = {(d, p): None for d in (X, Y) for p in (5, 6)}  # fibres, from the static file
    report = run_scan(view, ots, known, settle=0.1, reconcile_wait=0.5, parallel=0)
    assert report.errors == [] and report.followups == 0
    assert report.probes == len(ots.installs) and report.rounds == 5  # the one-probe scan: 8 probes, one each
    assert {d for d, _n in ots.batches} == {X, Y} and len(ots.batches) > report.rounds  # both OTSes in a round
    assert report.attached == {(X, 1): A3, (X, 2): None, (X, 3): C1, (X, 4): None,
                               (Y, 1): None, (Y, 2): C2, (Y, 3): None, (Y, 4): A4}
    assert report.unscannable == [] and report.ambiguous == {}
    rounds = JOURNAL.since(0, "scan_round")[-report.rounds:]
    assert [e["round"] for e in rounds] == list(range(1, report.rounds + 1))
    assert view.switches[A].ports[3].up is False and view.switches[C].ports[1].up is False  # all dark again


def test_the_scan_listens_only_while_it_runs(monkeypatch):
    view = lab_view()
    heard: list = []
    subscribe, unsubscribe = view.subscribe, view.unsubscribe
    monkeypatch.setattr(view, "subscribe", lambda listener: (heard.append(listener), subscribe(listener)))
    monkeypatch.setattr(view, "unsubscribe", lambda listener: (heard.remove(listener), unsubscribe(listener)))

    class Broken(LitOts):
        def wait_reconciled(self, dpid: int, timeout: float) -> str | None:
            assert heard, "the scan listens before it probes"
            raise RuntimeError("a bug")

    run_scan(view, LitOts(view), {}, settle=0.0, reconcile_wait=0.5)
    assert heard == []
    with pytest.raises(RuntimeError):
        run_scan(view, Broken(view), {}, settle=0.0, reconcile_wait=0.5)
    assert heard == []  # also when the scan failed


def changes_in(view: NetworkView, calls: list) -> ProbeWatch:
    watch = ProbeWatch()
    view.subscribe(watch)
    for call in calls:
        call(view)
    return watch


def test_the_watch_keeps_packet_ports_that_came_up_and_stayed_up():
    view = lab_view()
    watch = changes_in(view, [
        lambda v: v.set_port(A, 3, port(3, True), 1.0),
        lambda v: v.set_port(C, 1, port(1, True), 1.0),
        lambda v: v.set_port(C, 1, port(1, False), 1.1),  # up and down again: not lit by the probe
        lambda v: v.set_port(X, 1, port(1, True, "ODU2-1"), 1.0),  # an OTS port: not a packet port-up
    ])
    assert watch.ups == {A3} and watch.activity == 3
    view.set_port(A, 3, port(3, True, "renamed"), 1.2)  # a modify of an up port: still up, still activity
    assert watch.ups == {A3} and watch.activity == 4
    view.set_port(A, 3, None, 1.3)  # deleted
    assert watch.ups == set()
    view.set_port(A, 3, port(3, True), 1.4)
    watch.start()  # the next probe forgets the previous one's ports
    assert watch.ups == set()


def test_non_packet_changes_and_log_lines_are_no_activity():
    view = lab_view()
    watch = changes_in(view, [
        lambda v: v.set_port(X, 2, port(2, True, "ODU2-2"), 1.0),
        lambda v: v.add_link(PacketLink(A3, C1), 1.0),
        lambda v: v.set_xcons(X, {1: 2}),
    ])
    JOURNAL.add("lldp_burst", frames=2)
    assert watch.activity == 0 and watch.ups == set()


def busy_for(view: NetworkView, seconds: float, change) -> None:
    """Every 20 ms for ``seconds``: ``change(view, n)``."""
    def run() -> None:
        end, n = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            change(view, n)
            n += 1
            hub.sleep(0.02)
    hub.spawn(run)


def settle_time(view: NetworkView, settle: float) -> float:
    watch = ProbeWatch()
    view.subscribe(watch)
    t0 = time.monotonic()
    scan_runner._wait_settled(watch, settle, limit=2.0)
    return time.monotonic() - t0


def test_lldp_bursts_links_and_ots_ports_do_not_hold_the_settle_window_open():
    view = lab_view()

    def noise(v: NetworkView, n: int) -> None:  # what an OTS port-up sets off, and more
        JOURNAL.add("lldp_burst", frames=2, follow_up=n)
        v.set_port(X, 2, port(2, n % 2 == 0, "ODU2-2"), time.time())
        v.add_link(PacketLink(A3, C1), float(n))

    busy_for(view, 1.0, noise)
    assert settle_time(view, 0.1) < 0.6  # the journal-polling scan waited for the whole second


def test_packet_port_changes_hold_it_open():
    view = lab_view()
    busy_for(view, 0.4, lambda v, n: v.set_port(A, 3, port(3, n % 2 == 0), time.time()))
    assert settle_time(view, 0.1) >= 0.45
