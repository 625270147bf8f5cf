"""big-vs-small arithmetic and plot from synthetic receiver data (the Mininet run is an integration test)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mininet_labs import big_vs_small as bvs


def got(long_mbps: float, small_mbps: float, seconds: float = 10.0, bin_s: float = 0.1) -> dict:
    n = int(seconds / bin_s) + 1
    return {"bin_s": bin_s, "mbps": {"long": [long_mbps] * n, "small": [small_mbps] * n},
            "small_done": [{"start": 0.0, "bytes": 1, "end": 1.0}] * 3}


def test_a_run_is_summarised_after_the_warm_up() -> None:
    g = got(2.0, 7.0)
    g["mbps"]["long"][:20] = [50.0] * 20  # slow start noise in the first 2 s is left out
    r = bvs.summarise_run(g, 16, "cubic", 0.4, 10.0)
    assert r["long_flow_mbps"] == 2.0 and r["small_flows_mbps"] == 7.0
    assert r["long_share"] == pytest.approx(2 / 9, abs=1e-4) and r["utilization"] == 0.9 and r["small_done"] == 3


def test_share_falls_is_judged_per_congestion_control() -> None:
    runs = [bvs.summarise_run(got(lm, sm), c, cc, None, 10.0)
            for cc, c, lm, sm in (("cubic", 4, 5, 5), ("cubic", 32, 1, 9), ("reno", 4, 3, 7), ("reno", 32, 4, 6))]
    assert bvs.share_falls(runs) == {"cubic": True, "reno": False}


def test_bad_settings_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="congestion controls"):
        bvs.run(tmp_path, ccs=["no-such-cc"])
    with pytest.raises(ValueError, match="duration"):
        bvs.run(tmp_path, duration=1.0)
    with pytest.raises(ValueError, match="small_kb"):
        bvs.run(tmp_path, small_kb=(64, 16))
    assert not (tmp_path / "work").exists()


def test_the_kernel_offers_reno_at_least() -> None:
    assert "reno" in bvs.available_ccs()


def test_plot(tmp_path: Path) -> None:
    runs = [bvs.summarise_run(got(8 / c, 9 - 8 / c), c, "cubic", None, 10.0) for c in (4, 8, 16, 32)]
    bvs.plot({"ccs": ["cubic"], "cs": [4, 8, 16, 32], "capacity_mbps": 10.0, "runs": runs}, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_small_transfers_fit_the_circuit() -> None:
    """Even at C = 32, a small transfer at its fair share of the circuit ends within the measured part
    of a quick run (of the paper's 512 KB-4 MB, sized for 10 Gbit/s, 0 of 32 ended in 15 s here)."""
    fair_kbytes_s = bvs.CAPACITY_MBPS * 1e6 / 8 / 1024 / 33
    assert bvs.SMALL_KB[1] / fair_kbytes_s < 8.0 - bvs.WARMUP_S


def test_paper_sizes_is_not_a_quick_size(tmp_path: Path, capsys, monkeypatch) -> None:
    """`--paper-sizes` (the paper's U(512 KB, 4 MB), 100-s runs) is refused with --quick, by run() and
    by the CLI (one line, exit 2, before any network), and by labs that do not take it."""
    import os
    import shutil

    from app.cli.main import main

    with pytest.raises(ValueError, match="not a quick size"):
        bvs.run(tmp_path, quick=True, paper_sizes=True)
    assert not (tmp_path / "work").exists()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    assert main(["lab", "run", "big-vs-small", "--paper-sizes", "--quick", "--out", str(tmp_path)]) == 2
    assert "not a --quick size" in capsys.readouterr().err
    assert main(["lab", "run", "overlay", "--paper-sizes", "--out", str(tmp_path)]) == 2
    assert "lab overlay does not take --paper-sizes" in capsys.readouterr().err
    assert bvs.PAPER_SMALL_KB == (512, 4096) and bvs.SMALL_KB[1] * 32 == bvs.PAPER_SMALL_KB[1]


def test_completion_times_of_the_transfers_that_ended() -> None:
    done = [{"start": 1.0, "bytes": 2 * 2**20, "end": 3.0}, {"start": 0.5, "bytes": 2**20, "end": 10.5},
            {"start": 2.0, "bytes": 3 * 2**20, "end": 6.0}]
    assert bvs.completion_stats(done) == {"p50_s": 4.0, "p90_s": 10.0, "max_s": 10.0, "mean_mb": 2.0}
    assert bvs.completion_stats([])["p50_s"] is None
    r = bvs.summarise_run(got(2.0, 7.0), 4, "reno", 0.0, 10.0, sent={"small_started": 5, "errors": 0})
    assert r["small_started"] == 5 and r["small_done"] == 3 and r["small_completion"]["p50_s"] == 1.0


def test_loaded_rtt_from_ping_output() -> None:
    out = ("64 bytes from 10.0.0.3: icmp_seq=1 ttl=64 time=12.5 ms\n"
           "64 bytes from 10.0.0.3: icmp_seq=3 ttl=64 time=300 ms\n"
           "64 bytes from 10.0.0.3: icmp_seq=4 ttl=64 time=40.1 ms\n\n"
           "--- 10.0.0.3 ping statistics ---\n4 packets transmitted, 3 received, 25% packet loss, time 1503ms\n")
    assert bvs.loaded_rtt(out) == {"p50": 40.1, "p90": 300.0, "loss": 0.25}
    assert bvs.loaded_rtt("") == {"p50": None, "p90": None, "loss": None}
