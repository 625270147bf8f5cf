"""monitor.flowstats: learn/count rule planning, cookies, rates from flow-stats replies."""
from __future__ import annotations

import pytest

from monitor import flowstats as fs
from monitor.sflow.encoder import build_frame
from topology.flow import FiveTuple

H3 = "00:00:00:00:00:03"
H1 = "00:00:00:00:00:01"
UDP = FiveTuple("10.0.0.1", "10.0.0.3", 17, 45000, 5201)
TCP = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 80)


def frame(key: FiveTuple) -> bytes:
    """A learn-rule copy: the switch rewrote eth_dst to LEARN_MAC."""
    return build_frame(key, 100, dst_mac=bytes.fromhex(fs.LEARN_MAC.replace(":", "")))


def test_cookies_round_trip_and_stay_in_the_mlte_space():
    c = fs.cookie(fs.KIND_COUNT, 0x123456)
    assert c == 0x4D4C544512345631
    assert fs.cookie_kind(c) == fs.KIND_COUNT and fs.cookie_id(c) == 0x123456
    assert fs.cookie_kind(0x4D4C544500000002) == 0x02  # the forwarding rules' cookie is not ours
    assert fs.cookie_kind(0x1234) is None
    # one delete by ALL_MASK covers learn and count rules, never the other MLTE cookies
    for kind in (fs.KIND_LEARN, fs.KIND_COUNT):
        assert fs.cookie(kind, 77) & fs.ALL_MASK == fs.cookie(fs.KIND_LEARN, 0) & fs.ALL_MASK
    for other in (0x4D4C544500000001, 0x4D4C544500000002, 0x4D4C544500000010, 0x4D4C544500000020):
        assert other & fs.ALL_MASK != fs.cookie(fs.KIND_LEARN, 0) & fs.ALL_MASK


def test_enable_mirrors_forwarding_with_learn_rules():
    fc = fs.FlowCounting()
    ops = fc.enable("A", {H3: 3, H1: 1})
    assert [(o.op, o.kind, o.eth_dst, o.port) for o in ops] == [
        ("add", fs.KIND_LEARN, H1, 1), ("add", fs.KIND_LEARN, H3, 3)]
    assert len({o.cookie for o in ops}) == 2
    assert fc.enable("A", {H3: 3, H1: 1}) == []  # idempotent
    assert fc.rules("A") == {"learn": 2, "count": 0} and fc.enabled == {"A"}


def learn_cookie(fc: fs.FlowCounting, switch: str, mac: str) -> int:
    _port, ident = fc.switches[switch].learn[mac]
    return fs.cookie(fs.KIND_LEARN, ident)


def test_first_copy_of_a_flow_installs_one_count_rule():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3})
    ck = learn_cookie(fc, "A", H3)
    op = fc.learned("A", ck, frame(UDP))
    assert op is not None and (op.op, op.kind, op.key, op.eth_dst, op.port) == ("add", fs.KIND_COUNT, UDP, H3, 3)
    assert fc.learned("A", ck, frame(UDP)) is None  # copies in flight: no second rule
    assert fc.learned("B", ck, frame(UDP)) is None  # fine monitoring is not on at B
    assert fc.learned("A", fs.cookie(fs.KIND_COUNT, 1), frame(TCP)) is None  # not a learn cookie
    assert fc.learned("A", ck, b"\xff" * 20) is None  # not IPv4
    assert fc.rules("A") == {"learn": 1, "count": 1}


def test_count_rule_budget():
    fc = fs.FlowCounting(max_flows=1)
    fc.enable("A", {H3: 3})
    ck = learn_cookie(fc, "A", H3)
    assert fc.learned("A", ck, frame(UDP)) is not None
    assert fc.learned("A", ck, frame(TCP)) is None and fc.not_counted == 1


def installed(fc, switch, key) -> int:
    c = fc.switches[switch].counts[key]
    return fs.cookie(fs.KIND_COUNT, c.ident)


def test_rates_from_byte_count_and_duration_max_over_switches():
    fc = fs.FlowCounting(min_duration=0.2, stale=3.0)
    for sw in ("A", "B"):
        fc.enable(sw, {H3: 3})
        fc.learned(sw, learn_cookie(fc, sw, H3), frame(UDP))
    a, b = installed(fc, "A", UDP), installed(fc, "B", UDP)
    fc.stats("A", [(a, 50_000, 0.1)], now=10.0)  # too young for a first rate
    assert fc.flow_rates(10.0) == []
    fc.stats("A", [(a, 550_000, 1.1)], now=11.0)  # 500 kB in 1 s = 4 Mbit/s
    fc.stats("B", [(b, 400_000, 1.0)], now=11.0)  # first sample: 400 kB since install
    rates = fc.flow_rates(11.0)
    assert len(rates) == 1 and rates[0].key == UDP and rates[0].samples == 0
    assert rates[0].mbps == pytest.approx(4.0)
    assert {p[0] for p in rates[0].points} == {"A", "B"}
    assert fc.flow_rates(11.0, agents={"B"})[0].mbps == pytest.approx(3.2)
    assert fc.flow_rates(20.0) == []  # stale


def test_ports_only_for_tcp_and_udp():
    assert fs.flow_key(frame(UDP)) == UDP and fs.flow_key(frame(TCP)) == TCP
    assert fs.flow_key(frame(FiveTuple("10.0.0.1", "10.0.0.3", 132, 7, 9))) == FiveTuple("10.0.0.1", "10.0.0.3", 132)


def test_ipv6_is_not_counted():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3})
    assert fc.learned("A", learn_cookie(fc, "A", H3), frame(FiveTuple("fd00::1", "fd00::3", 17, 1, 2))) is None


def test_rule_missing_from_reply_is_forgotten_and_relearnt():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3})
    ck = learn_cookie(fc, "A", H3)
    fc.learned("A", ck, frame(UDP))
    fc.stats("A", [(installed(fc, "A", UDP), 1000, 1.0)], now=1.0)
    fc.stats("A", [], now=2.0)  # idled out in the switch
    assert fc.rules("A")["count"] == 0
    assert fc.learned("A", ck, frame(UDP)) is not None


def test_rule_installed_after_the_request_is_kept_until_sampled():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3})
    fc.learned("A", learn_cookie(fc, "A", H3), frame(UDP))
    fc.stats("A", [], now=1.0)
    assert fc.rules("A")["count"] == 1


def test_sync_follows_a_reroute_and_removed_hosts():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3, H1: 1})
    fc.learned("A", learn_cookie(fc, "A", H3), frame(UDP))
    ops = fc.sync("A", {H3: 4, H1: 1})  # the path to h3 now leaves on port 4
    assert {(o.op, o.kind, o.eth_dst, o.port) for o in ops} == {
        ("add", fs.KIND_LEARN, H3, 4), ("add", fs.KIND_COUNT, H3, 4)}
    ops = fc.sync("A", {H1: 1})  # h3 unreachable: its learn and count rules go
    assert {(o.op, o.kind) for o in ops} == {("delete", fs.KIND_LEARN), ("delete", fs.KIND_COUNT)}
    assert fc.rules("A") == {"learn": 1, "count": 0}


def test_disable_forgets_the_switch():
    fc = fs.FlowCounting()
    fc.enable("A", {H3: 3})
    assert fc.disable("A") and not fc.disable("A")
    assert fc.enabled == set() and fc.sync("A", {H3: 3}) == [] and fc.flow_rates(0.0) == []


def test_flow_counts_give_the_bytes_counted_so_far_max_over_switches():
    fc = fs.FlowCounting(min_duration=0.2, stale=3.0)
    for sw in ("A", "B"):
        fc.enable(sw, {H3: 3})
        fc.learned(sw, learn_cookie(fc, sw, H3), frame(UDP))
    assert fc.flow_counts(10.0) == {}  # installed, never sampled: nothing counted yet
    fc.stats("A", [(installed(fc, "A", UDP), 550_000, 1.1)], now=11.0)
    fc.stats("B", [(installed(fc, "B", UDP), 400_000, 1.0)], now=11.0)
    counts = fc.flow_counts(11.0)
    assert set(counts) == {UDP} and counts[UDP].bytes == 550_000 and counts[UDP].t == 11.0
    assert counts[UDP].mbps == pytest.approx(550_000 * 8 / 1e6 / 1.1)
    assert counts[UDP].seconds == 1.1  # how long the rule counted: the TE loop's average rate
    assert fc.flow_counts(20.0) == {}  # stale: no longer reported


def test_samples_closer_than_min_span_give_no_rate_so_a_counter_refresh_step_is_not_read_as_one():
    """Userspace OVS refreshes a rule's byte count every ~0.5 s; the early windows read every 0.1 s. A
    3.7-Mbit/s elephant's count: 0 bytes at 0.3 s (not refreshed yet), then 0.4 s of bytes at 0.4 s.
    Without min_span that step read as 0.4 s of bytes in 0.1 s: ~14.8 Mbit/s."""
    fc = fs.FlowCounting(min_duration=0.2, stale=3.0, min_span=0.5)
    fc.enable("A", {H3: 3})
    fc.learned("A", learn_cookie(fc, "A", H3), frame(UDP))
    rule = installed(fc, "A", UDP)
    per_s = 3.7e6 / 8
    fc.stats("A", [(rule, 0, 0.3)], now=10.3)  # the first sample: a rate since install (0: not refreshed)
    assert fc.flow_rates(10.3)[0].mbps == 0.0
    fc.stats("A", [(rule, int(0.4 * per_s), 0.4)], now=10.4)  # 0.1 s on: too close, the rate stays
    assert fc.flow_rates(10.4)[0].mbps == 0.0
    assert fc.flow_counts(10.4)[UDP].bytes == int(0.4 * per_s)  # the bytes counted so far are the newest
    assert fc.flow_counts(10.4)[UDP].t == 10.4  # a newer count (the TE loop judges it again), same rate
    fc.stats("A", [(rule, int(0.9 * per_s), 0.9)], now=10.9)  # 0.6 s after the reference (0.3 s)
    assert fc.flow_rates(10.9)[0].mbps == pytest.approx(3.7 * 0.9 / 0.6)  # the refresh step spread over 0.6 s
    unlimited = fs.FlowCounting(min_duration=0.2, stale=3.0)
    unlimited.enable("A", {H3: 3})
    unlimited.learned("A", learn_cookie(unlimited, "A", H3), frame(UDP))
    rule = installed(unlimited, "A", UDP)
    unlimited.stats("A", [(rule, 0, 0.3)], now=10.3)
    unlimited.stats("A", [(rule, int(0.4 * per_s), 0.4)], now=10.4)
    assert unlimited.flow_rates(10.4)[0].mbps == pytest.approx(14.8)  # what the early windows saw


def test_a_young_rule_without_a_rate_takes_its_average_since_install_between_close_samples():
    fc = fs.FlowCounting(min_duration=0.2, stale=3.0, min_span=0.5)
    fc.enable("A", {H3: 3})
    fc.learned("A", learn_cookie(fc, "A", H3), frame(UDP))
    rule = installed(fc, "A", UDP)
    fc.stats("A", [(rule, 10_000, 0.1)], now=10.1)  # too young for a rate
    assert fc.flow_rates(10.1) == []
    fc.stats("A", [(rule, 150_000, 0.3)], now=10.3)  # 0.2 s on: since install, 150 kB in 0.3 s = 4 Mbit/s
    assert fc.flow_rates(10.3)[0].mbps == pytest.approx(4.0)
