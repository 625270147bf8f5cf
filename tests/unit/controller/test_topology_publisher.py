"""The DB feed follows the view's change events (not the journal): a burst of changes is written once,
after ``DEBOUNCE`` s of quiet (at the latest ``MAX_DELAY`` s after the first), never while scanning."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.controller import events, topology_publisher
from app.controller.journal import JOURNAL
from app.controller.model import PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.runtime import Settings
from app.controller.topology_publisher import DEBOUNCE, MAX_DELAY, POLL, Debounce, TopologyPublisher


class FakeWriter:
    def __init__(self) -> None:
        self.jobs: list[str] = []

    def submit(self, kind, resource, job, on_error=None) -> None:  # noqa: ANN001
        self.jobs.append(kind)


@pytest.fixture
def feed(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(topology_publisher, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    app = TopologyPublisher(**{VIEW: NetworkView(Settings())})
    app.writer = FakeWriter()
    app.clock = clock
    return app


def run(app, until: float) -> list[float]:
    """Tick every ``POLL`` s up to ``until``; the times a write was queued."""
    out = []
    while app.clock[0] < until - 1e-9:
        app.clock[0] = round(app.clock[0] + POLL, 6)
        writes = app.writes
        app._tick(app.clock[0])
        if app.writes != writes:
            out.append(round(app.clock[0] - 100.0, 6))
    return out


def change(app, n: int) -> None:
    sw = SwitchInfo(n, PACKET, 4, f"S{n}", {1: PortInfo(1, "eth1", "00:00:00:00:00:0a", True)})
    app.view.add_switch(sw)
    app._graph_changed(events.EventSwitchEnter(sw))


def test_a_burst_is_written_once_after_the_quiet_time(feed):
    for n in range(1, 4):  # three changes 0.1 s apart
        change(feed, n)
        run(feed, feed.clock[0] + 0.1)
    assert feed.writes == 0
    assert run(feed, 101.0) == [pytest.approx(0.2 + DEBOUNCE, abs=POLL)]
    assert feed.writer.jobs == ["snapshot", "snapshot"]  # the graph and the lit circuits, queued once


def test_changes_that_never_rest_are_written_after_the_max_delay(feed):
    times = []
    for n in range(1, 40):
        change(feed, n)
        times += run(feed, feed.clock[0] + 0.2)
    assert times[0] == pytest.approx(MAX_DELAY, abs=POLL + 0.2)


def test_nothing_is_written_while_scanning_nor_for_a_journal_entry(feed):
    JOURNAL.add("link_add", src="a1:1", dst="b1:1")  # the journal is a log: nobody follows it
    assert run(feed, 101.0) == []
    feed.view.set_scanning(True)
    change(feed, 1)
    assert run(feed, 103.0) == []
    feed.view.set_scanning(False)
    assert len(run(feed, 103.5)) == 1


def test_a_failed_write_is_written_again():
    d = Debounce()
    assert not d.due(5.0)
    d.again(5.0)
    assert d.due(5.0) and not d.due(5.1)


def test_the_feed_subscribes_to_every_graph_event():
    handled = TopologyPublisher._graph_changed.callers
    assert set(handled) == set(events.GRAPH_EVENTS)
    link = PacketLink(PortRef(1, 1), PortRef(2, 1))
    assert events.event_of(events.view_changes.LinkAdded(link)).__class__ in handled


class RecordingFeed:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, dict]] = []

    def event(self, kind, message, *, severity="info", **detail) -> None:  # noqa: ANN001
        self.rows.append((kind, severity, message, detail))


class RunningWriter(FakeWriter):
    """Runs each job against a recording feed (what the writer thread does with the real one)."""

    def __init__(self) -> None:
        super().__init__()
        self.feed = RecordingFeed()

    def submit(self, kind, resource, job, on_error=None) -> None:  # noqa: ANN001
        super().submit(kind, resource, job, on_error)
        job(self.feed)


def test_faults_repairs_and_te_decisions_become_events_rows(feed):
    """docs/failures.md: the events page tells what failed and came back, and what the TE loop did."""
    from app.controller.model import OTS

    feed.writer = RunningWriter()
    ports = {3: PortInfo(3, "ODU2-3", "02:0f:00:00:0f:01", True)}
    feed.view.add_switch(SwitchInfo(0xF01, OTS, 1, "X", ports))
    feed._faults_changed(None)
    assert feed.writer.feed.rows == []
    feed.view.set_port(0xF01, 3, PortInfo(3, "ODU2-3", "02:0f:00:00:0f:01", False), 1.0)  # cut at X:3
    feed._faults_changed(None)
    feed._faults_changed(None)  # the same fault again: one row only
    feed.view.set_port(0xF01, 3, PortInfo(3, "ODU2-3", "02:0f:00:00:0f:01", False, admin_down=True), 2.0)  # repaired
    feed._faults_changed(None)
    assert [(k, s) for k, s, _m, _d in feed.writer.feed.rows] == [("network.fault", "warning"), ("network.repair", "info")]
    assert feed.writer.feed.rows[0][2] == "X:3: loss of light at X:3" and feed.writer.feed.rows[0][3] == {"port": "X:3"}
    feed._te_decision(events.EventDecision({"decision": "release", "reason": "failure (loss of light at Z:3)",
                                            "flows": ["a"], "plan": "release1", "offload": 1}))
    kind, severity, message, detail = feed.writer.feed.rows[-1]
    assert (kind, severity, message) == ("te.release", "info", "failure (loss of light at Z:3)")
    assert detail == {"flows": ["a"], "plan": "release1", "offload": 1}
    assert feed.writer.jobs.count("event") == 3
