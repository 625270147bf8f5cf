"""The OTS driver reads XCONs back when an OTS (re)connects and adopts them (no switch: the messages
are the virtual agent's own wire encoding, parsed by os-ken as on a real connection)."""
from __future__ import annotations

from os_ken.ofproto import ofproto_parser, ofproto_v1_0, ofproto_v1_0_parser

from app.controller import events
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PortInfo, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.ots_driver import EventXconReadBack, OtsDriver
from mininet_labs.circuits import FIG2_CIRCUITS
from ots_virtual import of10
from topology import rule_plan
from topology.graph import oport_id
from topology.spec import fig2_testbed, spec_to_graph

X = 0xF01
COOKIE = rule_plan.XCON.cookie()


class AgentDp:
    """A datapath that answers like the virtual OTS agent: flow-stats requests from its XCON table
    (the agent's own decoder and encoder), through the southbound as os-ken would deliver them."""

    ofproto, ofproto_parser = ofproto_v1_0, ofproto_v1_0_parser

    def __init__(self, dpid: int, southbound: OpenFlowSouthbound, table: dict[int, int], refuse: bool = False):
        self.id = dpid
        self.southbound, self.table, self.refuse = southbound, table, refuse
        self.sent: list = []
        self._xid = 100
        self.per_message = 1  # one XCON per reply message: the multipart path is exercised

    def set_xid(self, msg) -> int:
        self._xid += 1
        msg.set_xid(self._xid)
        return self._xid

    def send_msg(self, msg) -> None:
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        self.sent.append(msg)
        if isinstance(msg, ofproto_v1_0_parser.OFPFlowStatsRequest):
            self._answer(bytes(msg.buf), msg.xid)

    def _answer(self, raw: bytes, xid: int) -> None:
        req = of10.decode_stats_request(raw)
        if self.refuse:
            err = self.receive(of10.error(xid, ofproto_v1_0.OFPET_BAD_REQUEST, ofproto_v1_0.OFPBRC_BAD_STAT, raw[:64]))
            self.southbound.on_error(self.id, err.xid, err.type, err.code)
            return
        everything = req.match.wildcards & ofproto_v1_0.OFPFW_IN_PORT and req.table_id == 0xFF \
            and req.out_port == ofproto_v1_0.OFPP_NONE
        xcons = sorted(self.table.items()) if everything else []
        entries = [of10.flow_stats(a, b, 1.5, 0x8000, COOKIE, 10, 1000) for a, b in xcons]
        chunks = [entries[i:i + self.per_message] for i in range(0, len(entries), self.per_message)] or [[]]
        for n, chunk in enumerate(chunks):
            raw_reply = of10.stats_replies(xid, ofproto_v1_0.OFPST_FLOW, chunk)[0]
            msg = self.receive(raw_reply)
            self.southbound.on_flow_stats(self.id, msg.xid, 1, list(msg.body), more=n < len(chunks) - 1)

    def receive(self, raw: bytes):
        """Parse bytes the agent sends, as os-ken does for a live datapath."""
        version, msg_type, msg_len, xid = ofproto_parser.header(raw)
        return ofproto_parser.msg(self, version, msg_type, msg_len, xid, raw)


def make_driver(table: dict[int, int] | None = None, refuse: bool = False):
    southbound = OpenFlowSouthbound()
    dp = AgentDp(X, southbound, dict(table or {}), refuse)
    southbound.connected(dp)
    ports = {p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:0f:01", False) for p in range(1, 6)}
    sw = SwitchInfo(X, OTS, 1, "X", ports)
    view = NetworkView()
    view.add_switch(sw)
    driver = OtsDriver(**{SOUTHBOUND: southbound, VIEW: view})
    posted: list = []
    driver.send_event = lambda name, ev: posted.append(ev)
    return driver, dp, sw, posted


def read_back(driver, posted) -> None:
    """What the running controller does: the greenthread asks, its answer is handled as an event."""
    driver._read_back(X, driver.readback[X].token)
    (ev,) = posted
    posted.clear()
    driver._read_back_done(ev)


def test_a_connecting_ots_is_reconciling_until_its_xcons_are_read_back():
    driver, dp, sw, posted = make_driver({1: 2, 2: 1, 3: 4, 4: 3})
    driver._switch_enter(events.EventSwitchEnter(sw))
    assert driver.reconciling(X) and "not read back" in driver.wait_reconciled(X, 0)
    since = JOURNAL.last_seq
    read_back(driver, posted)
    assert driver.xcons[X] == {1: 2, 2: 1, 3: 4, 4: 3} and driver.adopted[X] == {1, 2, 3, 4}
    assert not driver.reconciling(X) and driver.wait_reconciled(X, 0) is None
    assert driver.busy_ports(X) == {1, 2, 3, 4}
    (ev,) = JOURNAL.since(since, "xcon_adopted")
    assert ev["ots"] == "X" and ev["xcons"] == [[1, 2], [2, 1], [3, 4], [4, 3]] and ev["read"] == 4


def test_an_older_read_backs_answer_is_ignored():
    driver, dp, sw, posted = make_driver({1: 2})
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._read_back(X, driver.readback[X].token)
    driver._switch_enter(events.EventSwitchEnter(sw))  # the OTS reconnected: a new read-back begins
    driver._read_back_done(posted.pop())
    assert driver.reconciling(X) and driver.xcons.get(X, {}) == {}


def test_changes_made_while_the_read_back_is_under_way_win():
    """A delete of port 3 sent after the read-back began: the (older) answer must not bring it back."""
    driver, dp, sw, posted = make_driver({1: 2, 3: 4})
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._touch(X, [3])
    read_back(driver, posted)
    assert driver.xcons[X] == {1: 2}


def test_an_ots_that_refuses_the_read_back_stays_unreconciled():
    driver, dp, sw, posted = make_driver({1: 2}, refuse=True)
    driver._switch_enter(events.EventSwitchEnter(sw))
    read_back(driver, posted)
    problem = driver.wait_reconciled(X, 0)
    assert driver.reconciling(X) and "read-back failed" in problem and driver.xcons.get(X, {}) == {}


def test_a_read_back_that_timed_out_is_tried_again_by_the_next_scan():
    driver, dp, sw, posted = make_driver({1: 2})
    driver._switch_enter(events.EventSwitchEnter(sw))
    token = driver.readback[X].token
    driver._read_back_done(EventXconReadBack(X, token, None, "no answer to the XCON read-back within 5s", retry=True))
    assert "no answer" in driver.readback[X].error
    assert "not read back" in driver.wait_reconciled(X, 0)  # a new read-back began
    assert driver.readback[X].token != token
    read_back(driver, posted)
    assert driver.wait_reconciled(X, 0) is None and driver.xcons[X] == {1: 2}


def test_reconnect_starts_a_new_read_back_and_leave_forgets_it():
    driver, dp, sw, _ = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._switch_leave(events.EventSwitchLeave(sw))
    assert not driver.reconciling(X) and X not in driver.xcons and X not in driver.adopted


def test_get_xcon_marks_adopted_xcons_and_orphans_and_reports_orphans_once():
    driver, dp, sw, posted = make_driver({1: 2, 2: 1, 4: 5, 5: 4})
    driver._switch_enter(events.EventSwitchEnter(sw))
    read_back(driver, posted)
    g = spec_to_graph(fig2_testbed())  # adaptations and fibres of Fig. 2
    for ots, a, b in FIG2_CIRCUITS["initial"] + [("X", 4, 5)]:
        g.set_xcon_active(oport_id(ots, a), oport_id(ots, b))
    driver._graph = lambda: g
    assert {x["orphan"] for x in driver.active()} == {None}  # not decided until the switches settled
    since = JOURNAL.last_seq
    driver._orphan_due = 0.0
    driver._orphan_check(None)
    assert [(e["in_port"], e["out_port"]) for e in JOURNAL.since(since, "xcon_orphan")] == [(4, 5), (5, 4)]
    entries = {(x["in_port"], x["out_port"]): x for x in driver.active()}
    assert entries[(1, 2)] == {"ots": "X", "in_port": 1, "out_port": 2, "adopted": True, "orphan": False}
    assert entries[(4, 5)]["orphan"] and entries[(5, 4)]["orphan"]
    assert driver.report_orphans() == []  # reported once


def test_an_ots_that_left_keeps_its_ports_busy_until_the_read_back_settles_them():
    """Issue 23 item 5: no amnesia. An OTS whose agent died keeps its XCONs lit, so while it is away and
    until it is read back again its ports are busy; the read-back then says which are still lit (kept,
    adopted) and which are gone (a powered-off OTS lost them: free again)."""
    driver, dp, sw, posted = make_driver({1: 2, 2: 1, 3: 4, 4: 3})
    driver._switch_enter(events.EventSwitchEnter(sw))
    read_back(driver, posted)
    driver._switch_leave(events.EventSwitchLeave(sw))
    assert driver.busy_ports(X) == {1, 2, 3, 4} and X not in driver.xcons  # busy, but no graph input
    dp.table = {1: 2, 2: 1}  # back, but it lost 3<->4 meanwhile
    driver._switch_enter(events.EventSwitchEnter(sw))
    assert driver.busy_ports(X) == {1, 2, 3, 4} and driver.reconciling(X)
    read_back(driver, posted)
    assert driver.xcons[X] == {1: 2, 2: 1} and driver.busy_ports(X) == {1, 2}


def test_the_orphan_check_waits_for_every_read_back():
    """Seen in CI on a loaded machine: the read-backs took longer than the settle time, and an XCON whose
    chain ran through an OTS not read back yet was journalled an orphan. The check now waits for the
    last read-back to answer; only then are orphans decided (and the lit circuit's XCONs are none)."""
    driver, dp, sw, posted = make_driver({1: 2, 2: 1, 4: 5, 5: 4})
    driver._switch_enter(events.EventSwitchEnter(sw))
    g = spec_to_graph(fig2_testbed())
    for ots, a, b in FIG2_CIRCUITS["initial"] + [("X", 4, 5)]:
        g.set_xcon_active(oport_id(ots, a), oport_id(ots, b))
    driver._graph = lambda: g
    since = JOURNAL.last_seq
    driver._orphan_due = 0.0  # the settle time is over, the read-back has not answered
    driver._orphan_check(None)
    assert not driver.orphans_decided and JOURNAL.since(since, "xcon_orphan") == []
    read_back(driver, posted)  # its answer runs the deferred check
    assert driver.orphans_decided
    assert [(e["in_port"], e["out_port"]) for e in JOURNAL.since(since, "xcon_orphan")] == [(4, 5), (5, 4)]


def test_an_ots_leaving_during_its_read_back_lets_the_deferred_orphan_check_run():
    driver, dp, sw, posted = make_driver({1: 2})
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._orphan_due = 0.0
    driver._orphan_check(None)
    assert not driver.orphans_decided
    driver._switch_leave(events.EventSwitchLeave(sw))
    assert driver.orphans_decided


def test_a_failed_read_back_does_not_hold_the_orphan_check():
    driver, dp, sw, posted = make_driver({1: 2}, refuse=True)
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._orphan_due = 0.0
    driver._orphan_check(None)
    assert not driver.orphans_decided
    read_back(driver, posted)
    assert driver.orphans_decided and driver.reconciling(X)
