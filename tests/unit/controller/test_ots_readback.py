"""The OTS driver reads XCONs back when an OTS (re)connects and adopts them (no switch: the messages
are the virtual agent's own wire encoding, parsed by os-ken as on a real connection)."""
from __future__ import annotations

from types import SimpleNamespace

from os_ken.ofproto import ofproto_parser, ofproto_v1_0, ofproto_v1_0_parser

from app.controller import events, rule_plan
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PortInfo, SwitchInfo
from app.controller.ots_driver import OtsDriver
from mininet_labs.circuits import FIG2_CIRCUITS
from mininet_labs.spec import fig2_testbed, spec_to_graph
from ots_virtual import of10
from topology.graph import oport_id

X = 0xF01
COOKIE = rule_plan.XCON.cookie()


class FakeDp:
    ofproto, ofproto_parser = ofproto_v1_0, ofproto_v1_0_parser

    def __init__(self, dpid: int):
        self.id = dpid
        self.sent: list = []
        self._xid = 100

    def set_xid(self, msg) -> int:
        self._xid += 1
        msg.set_xid(self._xid)
        return self._xid

    def send_msg(self, msg) -> None:
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        self.sent.append(msg)

    def receive(self, raw: bytes):
        """Parse bytes the agent would send, as os-ken does for a live datapath."""
        version, msg_type, msg_len, xid = ofproto_parser.header(raw)
        return ofproto_parser.msg(self, version, msg_type, msg_len, xid, raw)


def make_driver():
    dp = FakeDp(X)
    ports = {p: PortInfo(p, f"ODU2-{p}", "02:00:00:00:0f:01", False) for p in range(1, 6)}
    sw = SwitchInfo(X, OTS, 1, "X", ports)
    inv = SimpleNamespace(switches={X: sw}, datapath=lambda d: dp if d == X else None)
    driver = OtsDriver()
    driver._inventory = lambda: inv
    return driver, dp, sw


def reply(dp: FakeDp, xid: int, xcons: list[tuple[int, int]], per_message: int = 100) -> list:
    """The agent's OFPST_FLOW answer (several messages when ``per_message`` is small)."""
    msgs = []
    for i in range(0, max(len(xcons), 1), per_message):
        chunk = [of10.flow_stats(a, b, 1.5, 0x8000, COOKIE, 10, 1000) for a, b in xcons[i:i + per_message]]
        raw = of10.stats_replies(xid, ofproto_v1_0.OFPST_FLOW, chunk)[0]
        msgs.append(raw)
    parsed = []
    for n, raw in enumerate(msgs):
        if n < len(msgs) - 1:  # all but the last carry REPLY_MORE
            raw = raw[:10] + ofproto_v1_0.OFPSF_REPLY_MORE.to_bytes(2, "big") + raw[12:]
        parsed.append(dp.receive(raw))
    return parsed


def readback_request(dp: FakeDp):
    (req,) = [m for m in dp.sent if isinstance(m, ofproto_v1_0_parser.OFPFlowStatsRequest)]
    return req


def test_a_connecting_ots_is_asked_for_all_its_xcons_and_is_reconciling_until_it_answers():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    req = readback_request(dp)
    # the agent reads the request as "every XCON": in_port wildcarded, any table, any output
    decoded = of10.decode_stats_request(bytes(req.buf))
    assert decoded.stats_type == ofproto_v1_0.OFPST_FLOW
    assert decoded.match.wildcards & ofproto_v1_0.OFPFW_IN_PORT
    assert decoded.table_id == 0xFF and decoded.out_port == ofproto_v1_0.OFPP_NONE
    assert driver.reconciling(X)
    assert "not read back" in driver.wait_reconciled(X, 0)


def test_the_reply_is_adopted_and_journalled():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    since = JOURNAL.last_seq
    for msg in reply(dp, readback_request(dp).xid, [(1, 2), (2, 1), (3, 4), (4, 3)], per_message=1):
        assert driver.reconciling(X)  # not before the last part
        driver._flow_stats(SimpleNamespace(msg=msg))
    assert driver.xcons[X] == {1: 2, 2: 1, 3: 4, 4: 3} and driver.adopted[X] == {1, 2, 3, 4}
    assert not driver.reconciling(X) and driver.wait_reconciled(X, 0) is None
    assert driver.busy_ports(X) == {1, 2, 3, 4}
    (ev,) = JOURNAL.since(since, "xcon_adopted")
    assert ev["ots"] == "X" and ev["xcons"] == [[1, 2], [2, 1], [3, 4], [4, 3]]


def test_other_replies_are_not_taken_for_the_read_back():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    (msg,) = reply(dp, readback_request(dp).xid + 7, [(1, 2)])  # e.g. someone else's flow stats
    driver._flow_stats(SimpleNamespace(msg=msg))
    assert driver.reconciling(X) and driver.xcons[X] == {}


def test_changes_made_while_the_read_back_is_under_way_win():
    """A delete of port 3 sent after the request left: the (older) reply must not bring it back."""
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._touch(X, [3])
    (msg,) = reply(dp, readback_request(dp).xid, [(1, 2), (3, 4)])
    driver._flow_stats(SimpleNamespace(msg=msg))
    assert driver.xcons[X] == {1: 2}


def test_an_ots_that_refuses_the_read_back_stays_unreconciled():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    xid = readback_request(dp).xid
    err = dp.receive(of10.error(xid, ofproto_v1_0.OFPET_BAD_REQUEST, ofproto_v1_0.OFPBRC_BAD_STAT, b"x" * 12))
    driver._error(SimpleNamespace(msg=err))
    problem = driver.wait_reconciled(X, 0)
    assert driver.reconciling(X) and "refused the XCON read-back" in problem and "OFPBRC_BAD_STAT" in problem


def test_reconnect_starts_a_new_read_back_and_leave_forgets_it():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    driver._switch_leave(events.EventSwitchLeave(sw))
    assert not driver.reconciling(X) and X not in driver.xcons and X not in driver.adopted


def test_get_xcon_marks_adopted_xcons_and_orphans_and_reports_orphans_once():
    driver, dp, sw = make_driver()
    driver._switch_enter(events.EventSwitchEnter(sw))
    (msg,) = reply(dp, readback_request(dp).xid, [(1, 2), (2, 1), (4, 5), (5, 4)])
    driver._flow_stats(SimpleNamespace(msg=msg))
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
