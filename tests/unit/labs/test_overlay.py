"""overlay lab without Mininet: the CRONets rule, relay path maths, the choice, the case summary, ping
parsing, the cases' design and the plot (the Mininet run: tests/integration/test_labs_overlay_pathchange.py)."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from mininet_labs import overlay as ov
from mininet_labs.registry import LABS


def _p(rtt: float, loss: float) -> dict:
    return {"rtt_ms": rtt, "loss": loss}


def test_the_rule_needs_both_cuts_at_the_papers_thresholds() -> None:
    direct = _p(100.0, 0.10)
    assert ov.cuts(direct, _p(89.5, 0.0879))["passes"]  # exactly 10.5% and 12.1%
    assert not ov.cuts(direct, _p(89.6, 0.05))["passes"]  # RTT cut 10.4%
    assert not ov.cuts(direct, _p(50.0, 0.0880))["passes"]  # loss cut 12.0%
    got = ov.cuts(direct, _p(150.0, 0.0))
    assert got["rtt_cut"] == -0.5 and got["loss_cut"] == 1.0 and not got["passes"]
    clean = ov.cuts(_p(100.0, 0.0), _p(10.0, 0.0))  # nothing to cut on a loss-free direct path
    assert clean["loss_cut"] is None and not clean["passes"]
    with pytest.raises(ValueError, match="direct RTT"):
        ov.cuts(_p(0.0, 0.1), _p(1.0, 0.1))


def test_a_relay_path_adds_rtts_and_multiplies_deliveries() -> None:
    r = ov.relay_path(_p(20.0, 0.01), _p(30.0, 0.02))
    assert r["rtt_ms"] == 50.0 and r["loss"] == pytest.approx(1 - 0.99 * 0.98)


def test_choose_takes_the_best_passing_relay_else_names_a_candidate() -> None:
    direct = _p(60.0, 0.04)
    relays = {"r1": _p(40.0, 0.008), "r2": _p(30.0, 0.02), "r3": _p(100.0, 0.001)}
    got = ov.choose(direct, relays)
    assert got["rule"]["r3"]["passes"] is False  # longer
    assert got["relay"] == "r1" and got["relay_used"]  # 40*sqrt(.008)=3.6 < 30*sqrt(.02)=4.2
    none = ov.choose(_p(20.0, 0.004), {"r1": _p(40.0, 0.04), "r2": _p(80.0, 0.02)})
    assert none["relay"] is None and not none["relay_used"] and none["candidate"] == "r1"
    with pytest.raises(ValueError):
        ov.choose(direct, {})


def test_mathis_model() -> None:
    assert ov.mathis_mbps(100.0, 0.01) == pytest.approx(1448 * 8 / (0.1 * 0.1) * 1.2247 / 1e6, rel=1e-3)
    assert ov.mathis_mbps(50.0, 0.0) is None


def _paths(direct: tuple[float, float], legs: tuple[tuple[float, float], tuple[float, float]]) -> dict:
    return {"direct": _p(*direct), "r1": ov.relay_path(_p(*legs[0]), _p(*legs[1]))}


def test_case_summary_and_whether_the_rule_was_right() -> None:
    paths = _paths((60.0, 0.04), ((20.0, 0.004), (20.0, 0.004)))
    dec = ov.choose(paths["direct"], {"r1": paths["r1"]})
    case = ov.summarise_case("x", paths, dec, [2.0, 3.0], [10.0, 12.0])
    assert case["improvement_factor"] == pytest.approx(4.4) and case["relay_used"] and case["rule_right"]
    assert case["rtt_ratio"] == pytest.approx(40 / 60, abs=1e-4)
    assert case["mathis_mbps"]["relay_split"] > case["mathis_mbps"]["relay_plain"] > case["mathis_mbps"]["direct"]
    wrong = ov.summarise_case("y", paths, dec, [10.0], [5.0])  # the relay was used and was slower
    assert wrong["improvement_factor"] == 0.5 and not wrong["rule_right"]
    with pytest.raises(ValueError):
        ov.summarise_case("z", paths, dec, [], [1.0])


def test_ping_summary() -> None:
    text = ("64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=50.1 ms\n64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 "
            "time=50.3 ms\n64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=50.2 ms\n\n--- 10.0.0.2 ping statistics "
            "---\n4 packets transmitted, 3 received, 25% packet loss, time 15ms\nrtt min/avg/max/mdev = "
            "50.1/50.2/50.3/0.1 ms\n")
    assert ov.parse_ping_summary(text) == {"sent": 4, "received": 3, "loss": 0.25, "rtt_ms": 50.2}
    with pytest.raises(ValueError, match="no ping summary"):
        ov.parse_ping_summary("connect: Network is unreachable")


def _nominal(case: dict) -> dict:
    """Round-trip RTT and loss each path would have with exactly the configured wires."""
    def leg(w: str) -> dict:
        delay, loss = case[w]
        return _p(2 * delay, 1 - (1 - loss) ** 2)
    return {"direct": leg("wd"), **{r: ov.relay_path(leg(a), leg(b)) for r, (a, b) in ov.LEGS.items()}}


def test_the_cases_put_one_relay_on_each_side_of_the_rule() -> None:
    helps = _nominal(ov.CASES["lossy_direct"])
    dec = ov.choose(helps["direct"], {r: helps[r] for r in ov.RELAYS})
    assert dec["relay"] == "r1" and not dec["rule"]["r2"]["passes"]
    # margins wide enough that ping's loss estimate (1000 probes) cannot flip the decision
    assert dec["rule"]["r1"]["rtt_cut"] > 0.3 and dec["rule"]["r1"]["loss_cut"] > 0.4
    good = _nominal(ov.CASES["good_direct"])
    dec = ov.choose(good["direct"], {r: good[r] for r in ov.RELAYS})
    assert dec["relay"] is None and all(r["rtt_cut"] < -0.5 for r in dec["rule"].values())
    # the Mathis model agrees with the rule in both cases (split legs vs direct)
    for case, better in (("lossy_direct", True), ("good_direct", False)):
        n = _nominal(ov.CASES[case])
        cand = "r1"
        split = min(ov.mathis_mbps(x["rtt_ms"], x["loss"]) for x in n[cand]["legs"])
        assert (split > ov.mathis_mbps(n["direct"]["rtt_ms"], n["direct"]["loss"])) is better


def test_plot_from_synthetic_cases(tmp_path: Path) -> None:
    cases = []
    for name, d, r in (("lossy_direct", [2.5], [12.0]), ("good_direct", [15.0], [6.0])):
        paths = _nominal(ov.CASES[name])
        dec = ov.choose(paths["direct"], {x: paths[x] for x in ov.RELAYS})
        cases.append(ov.summarise_case(name, paths, dec, d, r))
    assert [c["rule_right"] for c in cases] == [True, True]
    png = ov.plot({"cases": cases}, tmp_path / "o.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    json.dumps(cases)


def test_topology_registry_and_mn_topo() -> None:
    spec = ov.overlay_spec()
    assert [s.name for s in spec.switches] == ["S", "D", "R1", "R2"]
    assert len(ov.wire_links()) == 10
    ports = [(sw, p) for a, ap, b, bp in ov.WIRES.values() for sw, p in ((a, ap), (b, bp))]
    assert len(ports) == len(set(ports))  # no switch port is used twice
    assert set(ov.CASES["lossy_direct"]) == set(ov.WIRES) == set(ov.CASES["good_direct"])
    lab = LABS["overlay"]
    assert lab.runner() is ov.run and "seed" in inspect.signature(ov.run).parameters
    with pytest.raises(ValueError, match="unknown overlay cases"):
        ov.run("/nonexistent", cases=("nope",))
    with pytest.raises(ValueError, match="congestion control 'nope'"):
        ov.run("/nonexistent", cc="nope")  # refused before any directory or network is made
    pytest.importorskip("mininet")
    topo = ov.topos["overlay"]()
    assert sorted(topo.hosts()) == sorted(["src", "dst", "r1", "r2", *ov.WIRES])
    assert len(topo.links()) == 4 + 2 * len(ov.WIRES)
    with pytest.raises(ValueError, match="unknown case"):
        ov.topos["overlay"](case="nope")


def test_paths_are_pinged_at_once_into_files_and_combined(tmp_path) -> None:
    """_measure_paths with local pings (every lab address mapped to 127.0.0.1): one file per ping,
    relay paths from their two legs."""
    import shutil
    import subprocess

    if shutil.which("ping") is None:
        pytest.skip("no ping here")

    class Node:
        def popen(self, args, **kw):
            return subprocess.Popen(["127.0.0.1" if a in ov.IPS.values() else a for a in args], **kw)

    lab = type("Lab", (), {"node": lambda self, _name: Node()})()
    paths = ov._measure_paths(lab, 20, 0.01, tmp_path / "ping-case")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ping-case-direct.txt", "ping-case-r1.leg1.txt", "ping-case-r1.leg2.txt",
        "ping-case-r2.leg1.txt", "ping-case-r2.leg2.txt"]
    assert paths["direct"]["sent"] == 20 and paths["direct"]["loss"] == 0.0
    for r in ov.RELAYS:
        legs = paths[r]["legs"]
        assert paths[r]["rtt_ms"] == pytest.approx(legs[0]["rtt_ms"] + legs[1]["rtt_ms"], abs=1e-3)
