"""The WAN lab's pure pieces: /proc readings, the per-Ts cost growth, the --topology check."""
from __future__ import annotations

import argparse
import os

import pytest


def test_proc_readings_of_this_process_are_positive() -> None:
    from mininet_labs.wan import proc_cpu_s, proc_rss_mb

    sum(i * i for i in range(200_000))  # burn a little CPU
    assert proc_cpu_s(os.getpid()) > 0
    assert proc_rss_mb(os.getpid()) > 1


def test_per_ts_scales_the_growth_of_numeric_counters_only() -> None:
    from mininet_labs.wan import per_ts

    first = {"backend": "sflow", "coarse_bytes": 100, "polls": 2, "ok": True}
    last = {"backend": "sflow", "coarse_bytes": 1100, "polls": 12, "ok": True}
    assert per_ts(first, last, 10.0, 1.0) == {"coarse_bytes": 100.0, "polls": 1.0}
    with pytest.raises(ValueError):
        per_ts(first, last, 0.0, 1.0)


@pytest.mark.parametrize(("lab", "topology", "ok"), [
    ("wan", "topohub:sndlib/abilene", True), ("wan", "fig2", False),
    ("fibre-cut", "mesh6", True), ("fibre-cut", "topohub:sndlib/abilene", False)])
def test_topology_option_is_checked_per_lab(lab: str, topology: str, ok: bool) -> None:
    from app.cli.lab import LabError, _lab_options
    from mininet_labs.registry import LABS

    args = argparse.Namespace(runs=None, seeds=None, seed=None, te=None, demo=False, placement=None,
                              paper_sizes=False, topology=topology, quick=False)
    if ok:
        assert _lab_options(args, lab, LABS[lab].runner())["topology"] == topology
    else:
        with pytest.raises(LabError, match="--topology"):
            _lab_options(args, lab, LABS[lab].runner())
