"""Value types (app/update/model.py): rules stay inside their rule_plan band, matches are valid OXM."""
from __future__ import annotations

import json

import pytest

from app.update.model import FlowRule, IngressChange, ModelError, Outcome, XconSpec
from topology import rule_plan

H3 = "00:00:00:00:00:03"


def rule(**kw) -> FlowRule:
    args = {"switch": "A", "band": "reservation", "ident": 7, "priority": 30000,
            "match": (("eth_dst", H3), ("in_port", 1)), "out_port": 4}
    args.update(kw)
    return FlowRule(**args)


def test_cookie_and_priority_come_from_rule_plan():
    r = rule()
    assert r.cookie == rule_plan.RESERVATION.cookie(7)
    assert rule_plan.band_of(r.cookie) is rule_plan.RESERVATION and rule_plan.cookie_id(r.cookie) == 7
    f = FlowRule("B", "forwarding", 0, 100, {"eth_dst": H3}, 2)
    assert f.cookie == rule_plan.FORWARDING.cookie()


def test_match_is_normalised_in_oxm_order_and_mac_case():
    r = rule(match={"eth_dst": H3.upper(), "in_port": 1})
    assert r.match == (("in_port", 1), ("eth_dst", H3))
    assert r == rule()  # same value however the match was written
    assert r.match_dict() == {"in_port": 1, "eth_dst": H3}


@pytest.mark.parametrize("kw, words", [
    ({"band": "nope"}, "unknown band"),
    ({"band": "xcon"}, "XconSpec"),
    ({"priority": 31000}, "outside band"),
    ({"priority": 100}, "outside band"),
    ({"band": "forwarding", "priority": 100, "ident": 3}, "carry no id"),
    ({"ident": 1 << 24}, "out of range"),
    ({"table": 1}, "table 0"),
    ({"out_port": 0}, "port 0"),
    ({"out_port": 1}, "own in_port"),
    ({"match": {"nw_dst": "10.0.0.3"}}, "unknown match field"),
    ({"match": {"ipv4_dst": "10.0.0.3"}}, "eth_type=0x0800"),
    ({"match": {"eth_type": 0x0800, "tcp_dst": 80}}, "ip_proto=6"),
    ({"match": {"eth_type": 0x0800, "ip_proto": 6, "udp_dst": 53}}, "ip_proto=17"),
    ({"match": {"eth_dst": "00:00:00:00:03"}}, "MAC"),
    ({"match": {"eth_type": 0x0800, "ipv4_dst": "10.0.0.300"}}, "IPv4"),
    ({"match": (("in_port", 1), ("in_port", 2))}, "twice"),
])
def test_rules_a_switch_would_refuse_are_refused(kw, words):
    with pytest.raises(ModelError, match=words):
        rule(**kw)


def test_full_5_tuple_match_is_accepted():
    r = rule(band="steer", priority=40010, ident=12,
             match={"eth_type": 0x0800, "ip_proto": 6, "ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.3",
                    "tcp_src": 5001, "tcp_dst": 80})
    assert [k for k, _ in r.match] == ["eth_type", "ipv4_src", "ipv4_dst", "ip_proto", "tcp_src", "tcp_dst"]


def test_flow_rule_json_round_trip_and_cookie_check():
    r = rule(band="steer", priority=40010, ident=12, match={"eth_type": 0x0800, "ipv4_dst": "10.0.0.3"})
    d = json.loads(json.dumps(r.to_json()))
    assert d["cookie"] == f"{rule_plan.STEER.cookie(12):#018x}"
    assert FlowRule.from_json(d) == r
    d["cookie"] = f"{rule_plan.RESERVATION.cookie(12):#018x}"
    with pytest.raises(ModelError, match="cookie"):
        FlowRule.from_json(d)


def test_key_ignores_output_and_cookie():
    assert rule(out_port=3).key() == rule(out_port=4).key()
    assert rule().key() != rule(priority=30001).key()


def test_xcon_spec_checks_and_json():
    x = XconSpec("X", 4, 5)
    assert XconSpec.from_json(json.loads(json.dumps(x.to_json()))) == x
    assert x.target() == "X:4<->5" and x.ports == {4, 5}
    assert x.cookie == rule_plan.XCON.cookie()
    for bad in (("X", 4, 4), ("", 1, 2), ("X", 0, 2), ("X", 1, 0xFF01)):
        with pytest.raises(ModelError):
            XconSpec(*bad)


def test_outcome_unknown_only_for_timeouts():
    assert Outcome.timed_out("no reply").unknown
    assert not Outcome.refused("OVERLAP").unknown
    assert not Outcome.done(1.0).unknown
    o = Outcome.refused("x", 2.0, errors=["E"])
    assert Outcome.from_json(json.loads(json.dumps(o.to_json()))) == o


def test_ingress_change_kinds():
    old = rule(out_port=3)
    assert IngressChange(rule(), old).overwrites
    assert not IngressChange(rule(priority=30005), old).overwrites
    with pytest.raises(ModelError, match="undefined order"):
        IngressChange(rule(match={"in_port": 1, "eth_dst": "00:00:00:00:00:04"}), old)
    with pytest.raises(ModelError, match="old rule on B"):
        IngressChange(rule(), rule(switch="B"))
    c = IngressChange(rule(), old)
    assert IngressChange.from_json(json.loads(json.dumps(c.to_json()))) == c
