"""Lab ``placement-compare --quick`` on the Fig. 2 testbed: the same workload (16 small transfers, an
interactive flow from port 5060, an elephant) once per ``[te] placement``, measured.

Asserted on what was measured: every policy offloads the elephant (alone: the interactive flow and
the small flows keep their path) and releases it; OTTER's tolerance-weighted allocation is at least
each other policy's where they chose differently (tests/lib/placement_checks.py). On Fig. 2 the three
policies make the same move (one dark circuit from A to C), so what differs is only when the offload
lands (the offload gain passes on the first byte count or one count later): OTTER's ratio to another
policy ranged 0.94-1.13 over 10 comparisons on 2026-11-27 on a quiet machine (docs/labs.md,
``placement-compare``), lower with both cores busy; it is printed, not asserted."""
from __future__ import annotations

import json

import pytest

from tests.lib.placement_checks import assert_otter_leads

# In `make test` (~2 min of lab time). The fresh-clone CI run of 2026-11-27 (morning) failed here with
# OTTER at 0.80 x joint: the placement deciders judged the offload gain with the default 1-s bar
# instead of the lab's [te] min_gain_s = 0.3, so OTTER's move came a count or two later; fixed in
# te_app (tests/unit/te/test_placement_app.py), after which it passed 2 of 2 runs.
# Since 2026-11-28 a long_lab (`make test-labs`, not `make test`): on Fig. 2 the three policies make the
# same move, so it adds ~80 s to `make test` for what placement-mesh6 (where they part) and
# test_te_placement (OTTER's offload on Fig. 2) already check there.
pytestmark = [pytest.mark.integration, pytest.mark.lab("placement-compare"), pytest.mark.long_lab,
              pytest.mark.timeout(1500)]  # the lab lock may be held for minutes

ELEPHANT = "udp 10.0.0.1:45000 -> 10.0.0.3:5201"


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
    lines = [f"{p}: weighted {r['weighted_bytes'] / 1e6:.3f} / allocated {r['allocated_bytes'] / 1e6:.3f} MB, "
             f"inside {r['inside_fraction']:.2f}, elephant {r['elephant_mbps']} Mbit/s, small {r['small_mbps']} "
             f"Mbit/s, interactive p95 {r['interactive_rtt_p95_ms']} ms" for p, r in by.items()]
    print("\n".join(lines))
    assert_otter_leads(by, lines)
