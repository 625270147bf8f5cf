"""The apps' periodic work runs as services (app.controller.services): the monitor's poll ends on its
last reply or on the reply deadline, its early windows follow, the settle timers are deadlines, and
every run goes through the one failure policy (logged, counted, swallowed)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.controller import (
    db_writer,
    guard,
    monitor_app,
    ots_driver,
    reservations_app,
    services,
    topology_publisher,
)
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.forwarding import EventSettled, Forwarding
from app.controller.model import OTS, PACKET, PortInfo, SwitchInfo
from app.controller.monitor_app import (
    EventEarlyWindow,
    EventEchoRound,
    EventMonitorPoll,
    EventProbeRound,
    EventRepliesDue,
    MonitorApp,
)
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.ots_driver import EventOrphanCheck, OtsDriver
from app.controller.services import Service
from tests.lib.timers import FakeTimers
from tests.unit.controller.test_forwarding_arp import FakeDp


@pytest.fixture
def failures():
    """guard.failures as the test left it, restored afterwards."""
    before = len(guard.failures)
    yield guard.failures
    del guard.failures[before:]


# ---- the monitor's poll ----------------------------------------------------------------------------
class Monitor:
    def __init__(self, monkeypatch) -> None:  # noqa: ANN001
        self.timers = FakeTimers(100.0)
        monkeypatch.setattr(monitor_app, "time", SimpleNamespace(monotonic=self.timers.clock, time=time.time,
                                                                 monotonic_ns=time.monotonic_ns))
        view, sb = NetworkView(), OpenFlowSouthbound()
        view.add_switch(SwitchInfo(0xA1, PACKET, 4, "A", {1: PortInfo(1, "A-eth1", "00:00:00:00:00:0a", True)}))
        self.dp = FakeDp(0xA1)
        sb.datapaths[0xA1] = self.dp
        app = self.app = MonitorApp(**{VIEW: view, SOUTHBOUND: sb, ROUTES: ApiRoutes()})
        app.interval, app.reply_timeout, app.first_window = 1.0, 0.4, 0.3
        app.services = self.timers.scheduler(app.name, monitor_app.services(app.interval, 0.0))
        app._replies_due = self.timers.deadline(EventRepliesDue)
        app.core = SimpleNamespace(fresh=False, fresh_since=lambda: None)  # the early windows' question only (the tick is faked)
        self.ticks: list[float] = []
        self.early: list[float] = []
        monkeypatch.setattr(app, "_tick", lambda: self.ticks.append(self.timers.t - 100.0))
        monkeypatch.setattr(app, "_early", lambda: self.early.append(round(self.timers.t - 100.0, 6)))
        self.handlers = {EventMonitorPoll: app._poll, EventRepliesDue: app._replies_late,
                         EventEarlyWindow: app._early_window}

    def reply(self, kind: str) -> None:
        msg = SimpleNamespace(datapath=self.dp, buf=b"x" * 16, flags=0, body=[], xid=0)
        {"queue": self.app._queue_stats, "port": self.app._port_stats}[kind](SimpleNamespace(msg=msg))

    def drain(self) -> list:
        return self.timers.drain(self.handlers)


@pytest.fixture
def mon(monkeypatch):
    return Monitor(monkeypatch)


def test_the_poll_asks_every_switch_and_ticks_on_its_last_reply(mon):
    mon.app._poll(EventMonitorPoll())
    assert len(mon.dp.sent) == 2 and mon.app._poll_open  # queue stats, then port stats
    mon.reply("queue")
    assert mon.ticks == []
    mon.reply("port")
    assert mon.ticks == [0.0] and not mon.app._poll_open  # at once: no fixed wait
    mon.drain()  # the reply deadline fires later and finds the poll done
    assert mon.ticks == [0.0] and mon.app.cost["replies_late"] == 0
    assert mon.app.services.status()["mlte_monitor.poll"]["runs"] == 1


def test_an_ots_is_not_polled(mon):
    """The monitor's circuits are packet links: an OTS's port counters fed nothing."""
    ots = FakeDp(0xF1)
    mon.app.view.add_switch(SwitchInfo(0xF1, OTS, 4, "X", {1: PortInfo(1, "X-1", "00:00:00:00:00:f1", True)}))
    mon.app.southbound.datapaths[0xF1] = ots
    mon.app._poll(EventMonitorPoll())
    assert ots.sent == [] and len(mon.dp.sent) == 2


def test_a_poll_whose_replies_are_late_ticks_at_the_reply_deadline(mon):
    mon.app._poll(EventMonitorPoll())
    mon.reply("queue")
    mon.drain()
    assert mon.ticks == [pytest.approx(0.4)]  # min(reply_timeout, interval / 2)
    assert mon.app.cost["replies_late"] == 1
    mon.reply("port")  # counts into the next tick's data, ticks nothing now
    assert len(mon.ticks) == 1


def test_the_reply_deadline_is_at_most_half_an_interval(mon):
    mon.app.reply_timeout = 5.0
    mon.app._poll(EventMonitorPoll())
    mon.drain()
    assert mon.ticks == [pytest.approx(0.5)]


def test_early_windows_follow_a_tick_that_found_a_fresh_hot_circuit(mon):
    mon.app.core.fresh = True
    mon.app._poll(EventMonitorPoll())
    mon.timers.spawned.clear()  # the reply deadline's thread: every reply comes (its clock would run ahead)
    mon.reply("queue")
    mon.reply("port")
    mon.drain()
    # the first after first_window, then every 0.1 s while within 0.85 interval of the poll's start
    assert mon.early == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])


def test_early_windows_stop_once_the_elephants_are_named(mon, monkeypatch):
    mon.app.core.fresh = True
    monkeypatch.setattr(mon.app, "_early", lambda: (mon.early.append(mon.timers.t),
                                                    setattr(mon.app.core, "fresh", len(mon.early) < 2)))
    mon.app._poll(EventMonitorPoll())
    mon.timers.spawned.clear()  # the reply deadline's thread: every reply comes (its clock would run ahead)
    mon.reply("queue")
    mon.reply("port")
    mon.drain()
    assert len(mon.early) == 2


def test_an_early_window_of_an_older_poll_is_dropped(mon):
    mon.app._polls = 3
    mon.app._early_window(EventEarlyWindow(2))
    assert mon.early == []
    mon.app._early_window(EventEarlyWindow(3))
    assert mon.early == [0.0]


def test_a_poll_still_open_ticks_before_the_next_begins(mon):
    mon.app._poll(EventMonitorPoll())
    mon.app._poll(EventMonitorPoll())
    assert mon.ticks == [0.0] and mon.app.cost["replies_late"] == 2 and mon.app._poll_open


def test_a_failing_tick_is_logged_counted_and_the_poll_goes_on(mon, monkeypatch, failures):
    monkeypatch.setattr(mon.app, "_tick", lambda: 1 / 0)
    mon.app._poll(EventMonitorPoll())
    mon.reply("queue")
    mon.reply("port")  # the reply handler itself does not fail
    st = mon.app.services.status()["mlte_monitor.poll"]
    assert st["failures"] == 1 and "ZeroDivisionError" in st["last_error"]
    assert failures[-1].startswith("mlte_monitor.poll")
    assert mon.app.services.tick("poll")  # the next period is posted


def test_the_monitor_services():
    rows = {s.name: s for s in monitor_app.services(2.0, 1.0)}
    assert (rows["poll"].interval, rows["poll"].jitter, rows["poll"].first) == (2.0, 0.05, 0.0)
    assert (rows["echo"].event, rows["echo"].first) == (EventEchoRound, 0.5)
    assert (rows["probe"].event, rows["probe"].first) == (EventProbeRound, 1.0)
    assert {s.name for s in monitor_app.services(2.0, 0.0)} == {"poll"}  # no latency probes


def test_the_echo_and_probe_rounds_run_under_the_failure_policy(monkeypatch, failures):
    app = MonitorApp(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    timers = FakeTimers()
    app.services = timers.scheduler(app.name, monitor_app.services(1.0, 1.0))
    done: list[str] = []
    monkeypatch.setattr(app, "_echo_round", lambda: done.append("echo"))
    monkeypatch.setattr(app, "_probe_round", lambda: 1 / 0)
    app._echo_period(EventEchoRound())
    app._probe_period(EventProbeRound())
    st = app.services.status()
    assert done == ["echo"] and st["mlte_monitor.echo"]["runs"] == 1 and st["mlte_monitor.probe"]["failures"] == 1


# ---- settle timers ---------------------------------------------------------------------------------
def test_forwarding_settles_once_after_the_last_switch_entered():
    timers = FakeTimers()
    app = Forwarding(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound()})
    app._running = True
    app._settled_due = timers.deadline(EventSettled)
    app._hold(0.0)
    app._hold(1.0)  # another switch: later still
    assert len(timers.spawned) == 1
    settled: list[float] = []
    timers.drain({EventSettled: lambda ev: settled.append(timers.t)})
    assert settled == [pytest.approx(1.0 + app.settle)]


def test_the_ots_driver_decides_orphans_after_the_settle_time(monkeypatch):
    timers = FakeTimers(100.0)
    monkeypatch.setattr(ots_driver, "time", SimpleNamespace(monotonic=timers.clock, time=time.time))
    driver = OtsDriver(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound()})
    driver._running = True
    driver._orphan_timer = timers.deadline(EventOrphanCheck)
    driver.orphans_decided = False
    driver._schedule_orphan_check()
    timers.drain({EventOrphanCheck: driver._orphan_check})
    assert driver.orphans_decided and timers.t >= driver._orphan_due


# ---- the DB feed and the DB writer's pump -----------------------------------------------------------
def test_the_db_feed_tick_is_a_service(monkeypatch, failures):
    app = topology_publisher.TopologyPublisher(**{VIEW: NetworkView()})
    app.services = FakeTimers().scheduler(app.name, [Service("tick", topology_publisher.EventFeedTick, topology_publisher.POLL)])
    seen: list[float] = []
    monkeypatch.setattr(app, "_tick", seen.append)
    app._periodic(topology_publisher.EventFeedTick())
    monkeypatch.setattr(app, "_tick", lambda now: 1 / 0)
    app._periodic(topology_publisher.EventFeedTick())
    st = app.services.status()["mlte_topology_publisher.tick"]
    assert len(seen) == 1 and st["runs"] == 2 and st["failures"] == 1


class FakeWriter:
    def __init__(self) -> None:
        self.pumped = 0
        self._closing = False
        self.queued = 1

    def pump(self, logger, failures) -> int:  # noqa: ANN001
        self.pumped += 1
        return 0

    def pending(self) -> int:
        return self.queued


def test_the_db_writer_pump_runs_every_period_until_the_writer_closed():
    timers = FakeTimers()
    writer = FakeWriter()
    sched = db_writer.pump_service(writer, timers.spawn, timers.sleep)  # type: ignore[arg-type]
    sched.start()
    (drive, args), = timers.spawned
    timers.after = {3: lambda: setattr(writer, "_closing", True),  # the last user released it
                    5: lambda: setattr(writer, "queued", 0)}  # everything written
    drive(*args)
    assert timers.slept[0] == db_writer.PUMP_S and not sched.active
    assert writer.pumped == 5 + 1  # one per period, and a last one once closed and drained
    assert sched.status()["db_writer.pump"]["runs"] == 5


# ---- the reservation probes -------------------------------------------------------------------------
def test_the_reservation_probes_back_off_to_every_eighth_period_until_the_plan_ended(monkeypatch):
    view, sb = NetworkView(), OpenFlowSouthbound()
    view.add_switch(SwitchInfo(0xA1, PACKET, 4, "A", {1: PortInfo(1, "A-eth1", "00:00:00:00:00:0a", True)}))
    dp = FakeDp(0xA1)
    sb.datapaths[0xA1] = dp
    app = reservations_app.ReservationsApp(**{VIEW: view, SOUTHBOUND: sb, ROUTES: ApiRoutes()})
    timers = FakeTimers()
    app._spawn, app._sleep = timers.spawn, timers.sleep
    ingress = SimpleNamespace(switch="A", match_dict=lambda: {"in_port": 1})
    halt = app._probes(SimpleNamespace(ingress=[ingress]))
    (drive, args), = timers.spawned
    sched = services.RUNNING[-1]  # the plan's own scheduler
    timers.after = {40: halt}  # the plan ended while the driver slept: nothing more is sent
    drive(*args)
    assert timers.slept == [reservations_app.PROBE_INTERVAL] * 40
    # 39 periods ran: probes after gaps of 1, 2, 4, then every PROBE_MAX_GAP (8) periods: ticks 0 1 3 7 15 23 31
    assert reservations_app.PROBE_MAX_GAP == 8
    assert len(dp.sent) == 7 and sched not in services.RUNNING


def _fresh_flowstats(mon) -> None:  # noqa: ANN001
    """A fresh hot circuit on A with counting rules on (flowstats), its fine data due from A."""
    from monitor.flowstats import FlowCounting

    mon.app.counting = FlowCounting()
    mon.app.counting.enable("A", {})
    mon.app.core = SimpleNamespace(fresh=True, fresh_switches=lambda: ["A"] if mon.app.core.fresh else [],
                                   switches=lambda cid: ("A",), fresh_since=lambda: None, early_span=1.5)
    sent = mon.dp.sent

    def send_msg(msg) -> None:  # noqa: ANN001  (a datapath numbers each request, as os-ken's does)
        msg.xid = len(sent) + 1
        sent.append(msg)

    mon.dp.send_msg = send_msg


def _flow_reply(mon, xid: int) -> None:  # noqa: ANN001
    msg = SimpleNamespace(datapath=mon.dp, buf=b"x" * 16, flags=0, body=[], xid=xid)
    mon.app._flow_stats(SimpleNamespace(msg=msg))


def _poll_all(mon) -> None:  # noqa: ANN001
    """A poll whose every reply comes: queue, port and the counting rules' flow stats."""
    mon.app._poll(EventMonitorPoll())
    mon.timers.spawned.clear()
    poll_req = mon.dp.sent[-1]
    assert type(poll_req).__name__ == "OFPFlowStatsRequest"
    mon.reply("queue")
    mon.reply("port")
    _flow_reply(mon, poll_req.xid)
    assert not mon.app._poll_open


def test_a_flowstats_early_window_reads_the_counting_rules_first_and_looks_when_they_are_in(mon):
    _fresh_flowstats(mon)
    _poll_all(mon)
    mon.drain()  # runs to the first early window (0.3 s): a FLOW_STATS request, no look yet
    assert mon.early == []
    req = mon.dp.sent[-1]
    assert type(req).__name__ == "OFPFlowStatsRequest" and list(mon.app._early_xids.values()) == [(0xA1, True)]
    mon.timers.t += 0.02  # the switch answers
    _flow_reply(mon, req.xid)
    assert mon.early == [pytest.approx(0.32)]  # the look follows the reply, not the last poll's data
    assert mon.app.cost["fine_received"] == 32  # the poll's reply and the early one
    mon.drain()  # fresh still: the next window fine_early_step (0.1 s) later asks again
    assert type(mon.dp.sent[-1]).__name__ == "OFPFlowStatsRequest" and mon.dp.sent[-1] is not req


def test_without_fine_early_poll_the_early_window_looks_at_the_polls_data(mon):
    _fresh_flowstats(mon)
    mon.app.early_fine_poll = False
    _poll_all(mon)
    sent = len(mon.dp.sent)
    mon.drain()
    assert mon.early == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]) and len(mon.dp.sent) == sent


def test_a_new_poll_drops_the_early_windows_outstanding_reply(mon):
    _fresh_flowstats(mon)
    _poll_all(mon)
    mon.drain()
    req = mon.dp.sent[-1]
    mon.app._poll(EventMonitorPoll())  # the next poll, before the early reply came
    _flow_reply(mon, req.xid)  # late: no early look, and it is not the poll's flow reply
    assert mon.early == [] and (0xA1, "flow") in mon.app._awaiting


def test_the_drop_watch_reads_the_watched_ends_queues_and_a_rise_starts_the_early_windows(mon):
    from app.controller.monitor_app import EventDropWatch
    from monitor.core import TickResult
    from monitor.events import HOT_SPOT, Event

    mon.app.services = mon.timers.scheduler(mon.app.name, monitor_app.services(1.0, 0.0, 0.25))
    readings: list = []

    def watch_drops(now, drops):  # noqa: ANN001, ANN202
        readings.append((round(now - 100.0, 6), dict(drops)))
        mon.app.core.fresh = bool(drops.get(("A", 1)))
        return TickResult(events=[Event(now, "A-B", HOT_SPOT)] if mon.app.core.fresh else [])

    mon.app.core = SimpleNamespace(fresh=False, watched_points=lambda: [("A", 1)], watch_drops=watch_drops,
                                   fresh_since=lambda: None)
    mon.app._publish = lambda ev: None
    mon.timers.t += 0.25
    mon.app._watch(EventDropWatch())
    req = mon.dp.sent[-1]
    assert type(req).__name__ == "OFPQueueStatsRequest"  # one per switch with a watched end
    req.xid = 7  # numbered by the datapath
    mon.app._watch_xids[0xA1] = {7}
    body = [SimpleNamespace(port_no=1, queue_id=0, tx_errors=5), SimpleNamespace(port_no=2, queue_id=0, tx_errors=9)]
    mon.app._queue_stats(SimpleNamespace(msg=SimpleNamespace(datapath=mon.dp, buf=b"x" * 16, flags=0, body=body,
                                                             xid=7)))
    assert readings == [(0.25, {("A", 1): 5})] and mon.app.queue_drops == {}  # watched ends; not the poll's data
    assert mon.app.cost["coarse_received"] == 16
    mon.drain()
    assert mon.early[0] == pytest.approx(0.55)  # first_window (0.3 s) after the watch's hot spot


def test_no_drop_watch_while_a_polls_replies_are_due(mon):
    from app.controller.monitor_app import EventDropWatch

    mon.app.services = mon.timers.scheduler(mon.app.name, monitor_app.services(1.0, 0.0, 0.25))
    mon.app.core = SimpleNamespace(fresh=False, watched_points=lambda: [("A", 1)], fresh_since=lambda: None)
    mon.app._poll(EventMonitorPoll())
    sent = len(mon.dp.sent)
    mon.app._watch(EventDropWatch())
    assert len(mon.dp.sent) == sent


def test_an_early_look_publishes_the_counts_before_its_events(mon):
    """The TE loop judges an elephant named in an early window on its count: the count must be in the
    view when the event goes out (it found none and skipped the offload gain)."""
    from monitor.core import TickResult
    from monitor.events import UNCONSTRAINED_IMBALANCE, Event
    from tests.unit.monitor.test_flowstats import H3, UDP, frame, installed, learn_cookie

    _fresh_flowstats(mon)
    counting = mon.app.counting
    counting.enable("A", {H3: 3})
    counting.learned("A", learn_cookie(counting, "A", H3), frame(UDP))
    counting.stats("A", [(installed(counting, "A", UDP), 150_000, 0.3)], now=mon.timers.t)
    mon.app.core.early = lambda now: TickResult(events=[Event(now, "A-B", UNCONSTRAINED_IMBALANCE, (UDP,))])
    seen: list = []
    mon.app._publish = lambda ev: seen.append((ev.kind, dict(mon.app.view.fine_flows)))
    MonitorApp._early(mon.app)
    ((kind, counts),) = seen
    assert kind == UNCONSTRAINED_IMBALANCE and counts[UDP].bytes == 150_000


def _named_in_the_first_window(mon, follow: bool) -> list:  # noqa: ANN001
    """The first early window's reply names the elephant; returns the FLOW_STATS sent after it."""
    from monitor.core import TickResult
    from monitor.events import UNCONSTRAINED_IMBALANCE, Event
    from tests.unit.monitor.test_flowstats import H3, UDP, frame, learn_cookie

    _fresh_flowstats(mon)
    mon.app.early_follow = follow
    counting = mon.app.counting
    counting.enable("A", {H3: 3})
    counting.learned("A", learn_cookie(counting, "A", H3), frame(UDP))

    def early(now):  # noqa: ANN001, ANN202
        if not mon.app.core.fresh:
            return TickResult()
        mon.app.core.fresh = False
        return TickResult(events=[Event(now, "A-B", UNCONSTRAINED_IMBALANCE, (UDP,))])

    mon.app.core.early = early
    mon.app._early = MonitorApp._early.__get__(mon.app)
    mon.app._publish = lambda ev: None
    _poll_all(mon)
    mon.drain()
    req = mon.dp.sent[-1]
    _flow_reply(mon, req.xid)  # named here
    sent = len(mon.dp.sent)
    for _ in range(3):
        mon.drain()
        if len(mon.dp.sent) > sent and mon.app._early_xids:
            _flow_reply(mon, mon.dp.sent[-1].xid)
    return [m for m in mon.dp.sent[sent:] if type(m).__name__ == "OFPFlowStatsRequest"]


def test_after_naming_the_early_windows_keep_reading_the_elephants_count_for_fine_early_span(mon):
    """The TE loop's gain judges a named elephant again on each newer count: with fine_early_follow its
    count keeps coming every fine_early_step (its rule alone, by cookie), across polls, until
    fine_early_span (1.5 s here) after the naming."""
    from monitor import flowstats
    from tests.unit.monitor.test_flowstats import UDP, installed

    follows = _named_in_the_first_window(mon, follow=True)
    assert len(follows) >= 3
    rule = installed(mon.app.counting, "A", UDP)
    assert {(m.cookie, m.cookie_mask) for m in follows} == {(rule, flowstats.EXACT_MASK)}
    assert mon.app._follow == {"A": {UDP}}
    _poll_all(mon)
    assert mon.app._follow == {"A": {UDP}}  # a poll within the span: still followed
    sent = len(mon.dp.sent)
    mon.drain()
    assert (mon.dp.sent[-1].cookie, mon.dp.sent[-1].cookie_mask) == (rule, flowstats.EXACT_MASK) and len(mon.dp.sent) > sent
    mon.timers.t += 2.0
    _poll_all(mon)
    assert mon.app._follow == {}  # past the span: the poll's counts take over


def test_without_fine_early_follow_naming_ends_the_early_windows(mon):
    assert _named_in_the_first_window(mon, follow=False) == []


def test_echoes_go_only_to_the_probed_links_ends_within_the_budget(monkeypatch):
    from monitor.probes import probed_links

    assert monitor_app.probe_limit(0.2, 100.0) == 20 and monitor_app.probe_limit(0.2, 0.0) is None
    assert monitor_app.probe_limit(0.2, 1.0) == 1  # at least one a round
    app = MonitorApp(**{VIEW: NetworkView(), SOUTHBOUND: OpenFlowSouthbound(), ROUTES: ApiRoutes()})
    echoed: list[list[str]] = []
    monkeypatch.setattr(app, "_echo", lambda names: echoed.append(list(names)))
    app._echo_round()
    assert echoed == [[]]  # no packet link between switches (a WAN before its circuits): no echo at all
    app.probe_limit = 2
    app.latency.set_links(probed_links([("A", 3, "B", 1), ("B", 2, "C", 1)]))
    app._echo_round()
    app._echo_round()
    assert echoed[1:] == [["A", "B"], ["C", "A"]]  # the three ends, two a round, in turn


def test_a_probe_back_where_it_was_sent_confirms_its_link_for_lldp():
    """The monitor's latency probe crossed A:3 -> B:1: the view's link is seen as by LLDP, and LLDP's next
    round may skip A:3 (a probe that arrives elsewhere confirms nothing)."""
    from os_ken.ofproto import ofproto_v1_3_parser

    from app.controller.model import PacketLink, PortRef
    from app.controller.monitor_app import COOKIE_PROBE
    from monitor.probes import parse_probe

    view, southbound = NetworkView(), OpenFlowSouthbound()
    dps = {}
    for dpid, name in ((0xA1, "A"), (0xB1, "B")):
        view.add_switch(SwitchInfo(dpid, PACKET, 4, name, {p: PortInfo(p, f"{name}-eth{p}", "00:00:00:00:00:0a", True)
                                                           for p in (1, 2, 3)}))
        dps[dpid] = southbound.datapaths[dpid] = FakeDp(dpid)
    ab = PacketLink(PortRef(0xA1, 3), PortRef(0xB1, 1))
    view.add_link(ab, 100.0)
    view.add_link(ab.reverse(), 100.0)
    app = MonitorApp(**{VIEW: view, SOUTHBOUND: southbound, ROUTES: ApiRoutes()})
    app._probe_round()
    outs = [m for m in dps[0xA1].sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)]
    assert len(outs) == 1 and outs[0].actions[0].port == 3  # one direction per link: A:3 -> B:1
    frame = outs[0].data

    def arrive(dpid: int, in_port: int):
        msg = SimpleNamespace(datapath=dps[dpid], cookie=COOKIE_PROBE, data=frame, match={"in_port": in_port})
        app._packet_in(SimpleNamespace(msg=msg))

    assert parse_probe(frame) is not None
    arrive(0xB1, 2)  # at the wrong port: misdelivered, no confirmation
    assert view.links.confirmed_since(0.0) == set() and view.links.last_seen(ab) == 100.0
    app._probe_round()
    frame = [m for m in dps[0xA1].sent if isinstance(m, ofproto_v1_3_parser.OFPPacketOut)][-1].data
    before = time.time()
    arrive(0xB1, 1)
    assert view.links.confirmed_since(before - 1) == {ab.src} and view.links.last_seen(ab) >= before
    assert view.links.last_seen(ab.reverse()) == 100.0  # the other direction still needs LLDP
