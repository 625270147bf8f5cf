"""A verify or drain step reads every rule of a path each poll: the reads go out together (one FLOW_STATS
per switch and cookie, the replies awaited together), not one round trip per rule after the other (an
arrival's 36 rules over an 18-switch path on germany50 took 1.5-9.6 s to verify under load)."""
from __future__ import annotations

from app.controller.driver_errors import DriverError
from app.controller.live_southbound import LiveSouthbound
from app.controller.model import PACKET, PortInfo, SwitchInfo
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.update.model import FlowRule
from tests.lib.fakeoftable import FakeDatapath
from topology.rule_plan import RESERVATION as RES


def _net() -> tuple[LiveSouthbound, OpenFlowSouthbound, dict[str, FakeDatapath]]:
    sb = OpenFlowSouthbound(barrier_timeout=0.2)
    view = NetworkView()
    dps = {}
    for name, dpid in (("A", 0xA1), ("B", 0xB1)):
        dps[name] = FakeDatapath.for_southbound(sb, dpid, ports=(1, 2, 3))
        ports = {p: PortInfo(p, f"{name}-eth{p}", f"02:00:00:00:{dpid:02x}:{p:02x}", True) for p in (1, 2, 3)}
        view.add_switch(SwitchInfo(dpid, PACKET, 4, name, ports))
    return LiveSouthbound(sb, view), sb, dps


def _rule(sw: str, ident: int, in_port: int, out: int) -> FlowRule:
    return FlowRule(sw, RES.name, ident, RES.low, (("in_port", in_port),), out)


def test_the_rules_of_a_switch_and_cookie_are_read_in_one_request_and_match_one_by_one_reads() -> None:
    live, sb, dps = _net()
    rules = [_rule("A", 7, 1, 2), _rule("A", 7, 2, 1), _rule("B", 7, 1, 3), _rule("A", 8, 3, 1)]
    for r in rules[:3]:
        assert live.install_flow(r).ok
    n = 0
    for dp in dps.values():
        for t in dp.table.rules:
            n += 10
            t.packets = n  # each rule its own count
    before = sb.sent_by_kind.get("flow_stats", 0)
    many = live.flow_packets_many([*rules, _rule("Z", 7, 1, 2)])
    # (A, 7), (B, 7), (A, 8): three requests for four rules; the rule on no known switch is not asked
    assert sb.sent_by_kind["flow_stats"] - before == 3
    assert many == [live.flow_packets(r) for r in rules] + [None]
    assert sorted(many[:3]) == [10, 20, 30] and many[3] is None  # type: ignore[type-var]  # (A, 8): not installed


def test_a_switch_that_is_not_connected_costs_its_own_rules_only() -> None:
    live, sb, dps = _net()
    a, b = _rule("A", 7, 1, 2), _rule("B", 7, 1, 3)
    assert live.install_flow(a).ok and live.install_flow(b).ok
    answers = sb.flow_stats_many([(0xA1, a.cookie, 0), (0xC1, 0, 0), (0xB1, b.cookie, 0)])
    assert [st.match for st in answers[0]] == [{"in_port": 1}]  # type: ignore[union-attr]
    assert isinstance(answers[1], DriverError) and "not connected" in str(answers[1])
    assert [st.match for st in answers[2]] == [{"in_port": 1}]  # type: ignore[union-attr]
    sb.disconnected(dps["B"])
    assert live.flow_packets_many([a, b]) == [0, None]
    assert not sb._waiters  # every waiter taken down


def test_a_send_that_fails_mid_batch_leaves_no_waiter_behind() -> None:
    live, sb, dps = _net()
    a, b = _rule("A", 7, 1, 2), _rule("B", 7, 1, 3)
    assert live.install_flow(a).ok and live.install_flow(b).ok
    real_send = sb.send

    def send(dp, msgs, kind="other"):  # type: ignore[no-untyped-def]
        if dp.id == 0xB1:
            raise DriverError("B's channel closed under the write")
        return real_send(dp, msgs, kind)

    sb.send = send  # type: ignore[method-assign]
    answers = sb.flow_stats_many([(0xA1, a.cookie, 0), (0xB1, b.cookie, 0)])
    assert [st.match for st in answers[0]] == [{"in_port": 1}]  # type: ignore[union-attr]
    assert isinstance(answers[1], DriverError) and "closed under the write" in str(answers[1])
    assert not sb._waiters
    try:
        sb.flow_stats(0xB1, b.cookie)
    except DriverError as exc:
        assert "closed under the write" in str(exc)
    else:
        raise AssertionError("flow_stats raised nothing for a failed send")
    assert not sb._waiters
