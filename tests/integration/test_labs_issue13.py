"""The paper's experiments as labs (issue 13), each in its CI size (``--quick``) on the Fig. 2 testbed,
asserting on what the lab measured, not only that it ran."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration
# each lab waits for the machine-wide network lock first: the timeouts include that wait


@pytest.mark.lab("xcon-downtime")
@pytest.mark.timeout(1500)
def test_xcon_downtime_is_the_provisioning_delay_plus_a_little(tmp_path):
    from mininet_labs.xcon_downtime import run

    res = run(tmp_path, quick=True, progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    changes = res["changes"]
    assert len(changes) == 2 * res["reps"] and res["reps"] >= 15
    for i, c in enumerate(changes):  # every change interrupted the probe, for at least the emulated provisioning
        # delay, and the probe came through again before the next change began (the lab waits for it)
        around = changes[max(0, i - 1):i + 1]  # with the change before it: a failure says what led to it
        assert c["provisioning_ms"] is not None, around
        assert c["traffic_ms"] is not None, around
        assert c["downtime_ms"] >= c["provisioning_ms"] - 2.0, around  # 1-ms probe: a packet either side
    # ... and the traffic came back after each one, before the next (a change left dark into the next
    # would make one loss run of both, and the next change none: the assertion above). How little more
    # than the delay it takes (median +15..18 ms, 0 of 120 over +50 ms on a quiet machine; up to +2.2 s
    # with two busy loops and other labs on the 2 cores) is a figure of the lab's results and
    # docs/labs.md, not asserted here: make test must pass on a busy machine (issue 26)
    assert all(c.get("dark_to") is not None for c in changes), changes
    over = sorted(c["downtime_ms"] - c["provisioning_ms"] for c in changes)
    print(f"downtime over the provisioning delay: median {over[len(over) // 2]:.0f} ms, max {over[-1]:.0f} ms")
    assert 150.0 <= res["min_ms"], res["min_ms"]
    for key in ("mean_ms", "p95_ms", "controller_overhead_ms_max"):  # recorded for the docs
        assert res.get(key) is not None, key
    assert json.loads((tmp_path / "results.json").read_text())["downtime_ms"] == res["downtime_ms"]
    assert (tmp_path / "xcon_downtime.png").stat().st_size > 10_000


@pytest.mark.lab("big-vs-small")
@pytest.mark.timeout(1500)
def test_the_long_flows_share_falls_as_small_transfers_grow(tmp_path):
    from mininet_labs.big_vs_small import run

    res = run(tmp_path, quick=True, progress=lambda _line: None)
    assert res["controller_errors"] == "", res["controller_errors"]
    runs = {r["c"]: r for r in res["runs"]}
    assert set(runs) == {4, 32}
    assert all(r["small_done"] > 0 for r in runs.values()), runs
    # the long flow ran; at C = 32 it may be starved outright (0.32 Mbit/s on a quiet machine, 17 % of the
    # loaded pings lost: one CI run on a busy machine measured 0 after the warm-up, its RTO backed off past
    # the 8-s run), which is the lab's point, not a failure: its share falling is asserted below
    assert runs[4]["long_flow_mbps"] > 0 and runs[32]["long_flow_mbps"] >= 0, runs
    # they are *small* transfers: even at C = 32 every slot turned over at least once within the run (at
    # the paper's 512 KB-4 MB on this 10 Mbit/s circuit none of 32 did in 15 s: C long flows instead)
    assert runs[32]["small_done"] >= 32, runs[32]
    assert runs[32]["long_share"] < runs[4]["long_share"], runs
    assert all(res["share_falls"].values()) and res["share_falls"]
    assert all(0.5 <= r["utilization"] <= 1.05 for r in runs.values()), runs  # the 10 Mbit/s circuit is busy
    assert (tmp_path / "big_vs_small.png").stat().st_size > 10_000
