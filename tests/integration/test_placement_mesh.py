"""Lab ``placement-mesh6 --quick``: the placement comparison where the policies can part (an elephant
from A to C has a lit detour A-B-D-C and dark circuits; docs/labs.md, ``placement-mesh6``).

Asserted on what was measured: OTTER moves the elephant (in the runs so far: onto the lit detour)
and releases what it set up, and its tolerance-weighted allocation is at least each other policy's
within the same ``NOISE`` as on Fig. 2 (over 3 runs: otter 7.11–8.41 MB, cspf 7.65–8.48, joint
2.93–3.07). A long lab run (three fresh six-datapath networks): ``make test-labs``."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.long_lab, pytest.mark.timeout(2400)]

ELEPHANT = "udp 10.0.0.1:45000 -> 10.0.0.3:5201"
NOISE = 0.10


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from mininet_labs.placement_compare import compare

    return compare(tmp_path_factory.mktemp("mesh6"), "mesh6", quick=True, progress=print)


def test_otter_moves_the_elephant_and_leads_on_tolerance_weighted_allocation(results):
    by = results["placement"]
    run = by["otter"]["runs"][0]
    assert ELEPHANT in run["moved_flows"] and run["released"], run["decisions"]
    assert all(r["controller_errors"] == "" for r in by.values()), {p: r["controller_errors"] for p, r in by.items()}
    lines = [f"{p}: weighted {r['weighted_bytes'] / 1e6:.3f} / allocated {r['allocated_bytes'] / 1e6:.3f} MB, "
             f"inside {r['inside_fraction']:.2f}, moved {r['moved_flows']}, interactive RTT p95 by pair "
             f"{r['interactive_rtt_p95_by_pair']} ms" for p, r in by.items()]
    print("\n".join(lines))
    for policy in ("joint", "cspf"):
        assert by["otter"]["weighted_bytes"] >= (1 - NOISE) * by[policy]["weighted_bytes"], lines
