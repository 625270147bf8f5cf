"""The multihoming lab's plain parts: topology, flows, schedule, result maths, plot (no OVS, no Mininet run)."""
from __future__ import annotations

import inspect
import json

import pytest

from mininet_labs import multihoming as mh
from mininet_labs.registry import LABS
from topology.spec import spec_to_graph


def test_the_topology_has_two_loaded_and_unloaded_paths():
    spec = mh.multihoming_spec(senders=4, path_mbps=20.0)
    assert [s.name for s in spec.switches] == ["A", "P1", "P2", "Z"]
    packet = {(x.a, x.a_port, x.b, x.b_port, x.mbps) for x in spec.links_of_kind("packet")}
    # one bottleneck per path, P -> Z; A's uplinks are fast like the hosts' access links
    assert packet == {("A", 5, "P1", 1, 100.0), ("P1", 2, "Z", 5, 20.0), ("A", 6, "P2", 1, 100.0),
                      ("P2", 2, "Z", 6, 20.0)}
    hosts = {h.name: (h.switch, h.port) for h in spec.hosts}
    # every host, the background senders and bgz included, has a fast access link: the only
    # shaped bottleneck is P -> Z, shared by the mapped and the background flows
    access = {x.a: x.mbps for x in spec.links_of_kind("access")}
    assert set(access.values()) == {100.0} and {"bg1a", "bg1b", "bg2a", "bg2b", "bgz"} <= set(access)
    # background: two senders per path on their own access links; bg1* cross P1 -> Z only, bg2* P2 -> Z
    assert hosts["bg1a"] == ("P1", 3) and hosts["bg1b"] == ("P1", 4) and hosts["bgz"] == ("Z", 7)
    assert hosts["bg2a"] == ("P2", 3) and hosts["bg2b"] == ("P2", 4)
    assert len({h.ip for h in spec.hosts}) == len(spec.hosts) == 13
    # probes go one way per link, from the end named first: A -> P -> Z, the data direction
    keys = sorted(k for _u, _v, k, d in spec_to_graph(spec).g.edges(keys=True, data=True) if d["kind"] == "packet")
    assert keys == ["packet:A:5-P1:1", "packet:A:6-P2:1", "packet:P1:2-Z:5", "packet:P2:2-Z:6"]
    with pytest.raises(ValueError, match="senders must be 1..4"):
        mh.multihoming_spec(senders=5)


def test_background_is_dealt_over_each_paths_senders():
    sch = mh.schedule(3, quick=True, n_flows=8)
    n_bg = sch["base_flows"] + sch["extra_flows"]
    _, bg_ports = mh.ports_for(0, 8, n_bg)
    plans = mh.background_plans(sch, bg_ports)
    assert set(plans) == {"bg1a", "bg1b", "bg2a", "bg2b"}
    ports = {name: [int(x.split("@")[0]) for x in plan] for name, plan in plans.items()}
    # path 1: its 8 base flows and every extra one, half on each sender; path 2: 8 base flows, 4 + 4
    assert sorted(ports["bg1a"] + ports["bg1b"]) == list(bg_ports)
    assert abs(len(ports["bg1a"]) - len(ports["bg1b"])) <= 1
    assert sorted(ports["bg2a"] + ports["bg2b"]) == list(bg_ports[:8]) and len(ports["bg2a"]) == 4
    # the extra flows start at random times over the first extra_spread s of the load (the paper:
    # 448 flows at random times over 10 s), not at one instant
    extra = [float(x.split("@")[1]) for n in ("bg1a", "bg1b") for x in plans[n] if int(x.split("@")[0]) >= bg_ports[8]]
    assert len(extra) == sch["extra_flows"] and sorted(extra) == sch["extra_starts"]
    spread = mh.QUICK["extra_spread"]
    assert all(sch["bg_start"] <= t <= sch["bg_start"] + spread for t in extra) and len(set(extra)) > len(extra) // 2
    assert max(extra) - min(extra) > spread / 2
    with pytest.raises(ValueError, match="background ports"):
        mh.background_plans(sch, bg_ports[:-1])


def test_flows_and_schedule_are_reproducible_per_seed():
    spec = mh.multihoming_spec()
    flows = mh.flows_for(spec, per_sender=2)
    assert len(flows) == 8 and {f["to"] for f in flows} == {"d1", "d2", "d3", "d4"}
    assert len({(f["src"], f["sport"]) for f in flows}) == 8
    a, b = mh.schedule(3, quick=True, n_flows=8), mh.schedule(3, quick=True, n_flows=8)
    assert a == b and a != mh.schedule(4, quick=True, n_flows=8)
    assert 0 < a["bg_start"] < a["window"][0] < a["window"][1] < a["bg_end"] <= a["seconds"]
    assert len(a["starts"]) == 8 and a["base_flows"] == 8 and len(a["base_starts"]) == 16
    # the paper: 64 + 64 background beside 64 mapped, 448 = 7 x 64 extra; here 7 x N
    assert a["extra_flows"] == 7 * 8 and len(a["extra_starts"]) == 7 * 8
    # --quick is the default size's first seed
    assert mh.schedule(0, quick=True, n_flows=8) == mh.schedule(0, quick=False, n_flows=8)


def test_each_run_has_its_own_source_ports():
    ports = [mh.ports_for(i, 16, 128) for i in range(15)]
    mapped = [p for m, _b in ports for p in m]
    bg = [p for _m, b in ports for p in b]
    assert len(set(mapped)) == 15 * 16 and len(set(bg)) == 15 * 128 and not set(mapped) & set(bg)
    assert max(mapped + bg) < 32768  # not the kernel's ephemeral range
    with pytest.raises(ValueError):
        mh.ports_for(0, 201, 1)


def test_flow_throughputs_count_only_whole_bins_inside_the_window():
    recv = {"t0": 0.0, "bin_s": 0.5, "flows": {"10.0.1.1:40001": [[0, 10**6], [4, 1_250_000], [5, 1_250_000]],
                                                 "10.0.1.2:40001": [[3, 500_000], [20, 10**9]]}}
    got = mh.flow_throughputs(recv, (2.0, 4.0))  # bins 4-7 only
    assert got["10.0.1.1:40001"] == pytest.approx(2_500_000 * 8 / 1e6 / 2.0)
    assert got["10.0.1.2:40001"] == 0.0
    with pytest.raises(ValueError):
        mh.flow_throughputs(recv, (3.0, 3.0))


def _run(policy: str, xs: list[float]) -> dict:
    from app.te.mapping import flow_metrics

    return {"policy": policy, "metrics": flow_metrics(xs)}


def test_summary_compares_with_static_like_the_paper():
    runs = {"static": [_run("static", [1, 3]), _run("static", [1, 3])],
            "throughput": [_run("throughput", [2, 3]), _run("throughput", [2, 4])]}
    s = mh.summarise(runs)
    assert s["static"]["avgt_mbps"] == pytest.approx(2.0) and s["static"]["mmr"] == pytest.approx(1 / 3)
    t = s["throughput"]
    assert t["avgt_mbps"] == pytest.approx(2.75)
    assert t["vs_static_pct"]["avgt"] == pytest.approx(37.5)
    # STD: static 1.0; throughput (0.5 + 1.0) / 2 = 0.75 -> a 25% decrease
    assert t["vs_static_pct"]["std_decrease"] == pytest.approx(25.0)
    assert t["avgt_mbps_sd"] == pytest.approx(0.3535533906)


def test_plot_from_synthetic_series(tmp_path):
    runs = {p: [_run(p, [1.0 + i, 2.0 + i, 3.0]) for i in range(3)] for p in ("static", "throughput", "rtt")}
    tl = {p: [{"t": float(t), "weights": [0.5 - 0.01 * t * (p != "static"), 0.5]} for t in range(30)]
          for p in runs}
    png = mh.plot(mh.summarise(runs), tl, tmp_path / "m.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    json.dumps(mh.summarise(runs))  # results.json material


def test_registered_with_seeds_and_usable_by_mn():
    lab = LABS["multihoming"]
    assert lab.runner() is mh.run and "seeds" in inspect.signature(mh.run).parameters
    with pytest.raises(ValueError, match="unknown mapping policies"):
        mh.run("/nonexistent", policies=("ecmp",))
    pytest.importorskip("mininet")
    topo = mh.topos["multihoming"](senders=2)  # builds the node and link lists only: no OVS is touched
    assert sorted(topo.switches()) == ["A", "P1", "P2", "Z"]
    assert sorted(topo.hosts()) == ["bg1a", "bg1b", "bg2a", "bg2b", "bgz", "d1", "d2", "s1", "s2"]
    assert len(topo.links()) == 9 + 4


def test_per_path_diagnostics():
    spec = mh.multihoming_spec()
    ip = {h.name: h.ip for h in spec.hosts}
    # bgz's receiver keys connections by the sender's ip:port; only background senders count
    per_conn = {f"{ip['bg1a']}:20001": 1.0, f"{ip['bg1b']}:20002": 0.5, f"{ip['bg2a']}:20003": 2.0,
                f"{ip['bg2b']}:20004": 3.25, f"{ip['s1']}:10001": 9.0}
    assert mh.background_by_path(spec, per_conn) == [1.5, 5.25]
    timeline = [{"t": t, "mbps": [t, 10 - t]} for t in (1.0, 2.0, 3.0, 4.0, 9.0)]
    assert mh.window_means(timeline, (2.0, 4.0)) == [3.0, 7.0]
    assert mh.window_means(timeline, (5.0, 8.0)) is None
    counts = [{"t": 1.0, "counts": [4, 4]}, {"t": 2.0, "counts": [2, 6]}, {"t": 3.0, "counts": [1, 7]}]
    assert mh.window_means(counts, (1.5, 3.0), "counts") == [1.5, 6.5]


def test_every_sender_mixes_the_congestion_controls():
    """Mapped and background flows alike take the paper's loss-based mixture, not the kernel's
    default (BBR here): each plan item is ``port@start@cc`` and every sender host gets both."""
    sch = mh.schedule(0, quick=True, n_flows=8)
    _, bg_ports = mh.ports_for(0, 8, sch["base_flows"] + sch["extra_flows"])
    for name, plan in mh.background_plans(sch, bg_ports).items():
        ccs = [x.split("@")[2] for x in plan]
        assert set(ccs) == set(mh.CC_MIX), name
        assert abs(ccs.count("cubic") - ccs.count("reno")) <= 1, name
    assert mh.plan_item(40001, 0.25, 0) == "40001@0.25@cubic" and mh.plan_item(40002, 0.5, 1).endswith("@reno")


def test_a_kernel_without_the_mix_is_refused_before_the_network(tmp_path, monkeypatch):
    import mininet_labs.big_vs_small as bvs

    monkeypatch.setattr(bvs, "available_ccs", lambda: ["bbr", "reno"])
    with pytest.raises(ValueError, match="does not offer TCP cubic"):
        mh.run(tmp_path / "out", quick=True)
    assert not (tmp_path / "out" / "results.json").exists()


def test_the_cli_passes_seed_and_seeds_and_the_lab_refuses_a_negative_first_seed(tmp_path):
    """`mlte lab run multihoming --seed 3 --seeds 2` runs seeds 3 and 4 (the issue's `[--seed N]`)."""
    import argparse

    from app.cli.lab import _lab_options

    args = argparse.Namespace(runs=None, seeds=2, seed=3, te=None, demo=False, placement=None, paper_sizes=False, topology=None,
                              quick=False)
    assert _lab_options(args, "multihoming", mh.run) == {"seeds": 2, "seed": 3}
    with pytest.raises(ValueError, match="first seed >= 0"):
        mh.run(tmp_path / "out", seed=-1)
    assert not (tmp_path / "out").exists()
