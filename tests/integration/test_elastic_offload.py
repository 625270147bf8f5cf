"""Lab ``elastic-offload`` in its short form (``--quick``): the demo's workload on the Fig. 2 testbed.

16 small transfers h2 → h4 and, after a warm-up, an elephant h1 → h3 on the static circuit; the TE
loop must move only the elephant onto an elastic circuit (verified on its rule counters), the
elephant must get more there, and everything of the offload must be released once it ended. The
lab's baseline (same seed, loop off) runs too: the small flows must not lose with the loop on."""
from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.lab("elastic-offload")]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from mininet_labs.elastic_offload import run

    out = tmp_path_factory.mktemp("elastic")
    res = run(out, quick=True, progress=print)
    assert json.loads((out / "results.json").read_text())["offload_delay_s"] == res["offload_delay_s"]
    assert (out / "elastic_offload.png").stat().st_size > 10_000
    return res


def test_the_elephant_alone_is_offloaded_verified_and_released(results):
    r = results
    assert r["offload_delay_s"] is not None, r["decisions"]
    assert r["elephant_start_s"] < r["detected_s"] <= r["offloaded_s"] < r["verified_s"], r
    assert r["moved_flows"] == ["udp 10.0.0.1:45000 -> 10.0.0.3:5201"] and r["small_flows_moved"] == 0
    assert r["released"] is True
    b = r["breakdown"]
    assert b["plan"].startswith("offload") and b["xcon_delay_barrier_s"] > 0 and b["verification_s"] > 0, b
    assert r["controller_errors"] == ""
    print(f"offloaded and verified {r['offload_delay_s']:.2f} s after the elephant started; breakdown "
          f"{ {k: v for k, v in b.items() if k != 'steps'} }")


def test_the_elephant_gains_and_the_small_flows_do_not_lose(results):
    r = results
    assert r["elephant_mbps_after"] > 1.5 * r["elephant_mbps_before"], r
    base = r["baseline"]
    assert base["offload_delay_s"] is None and base["small_flows_moved"] == 0  # the loop was off
    assert r["small_mbps_after"] >= 0.95 * base["small_mbps_after"], (r["small_mbps_after"], base)
    print(f"elephant {r['elephant_mbps_before']} -> {r['elephant_mbps_after']} Mbit/s; small flows "
          f"{r['small_mbps_after']} (loop off: {base['small_mbps_after']}) Mbit/s")
