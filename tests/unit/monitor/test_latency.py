"""Path-change detector (seed 001) on synthetic latency series with known change points."""
from __future__ import annotations

import random

import pytest

from monitor.latency import (
    PathChangeDetector,
    ProbeBook,
    RollingMinBaseline,
    precision_recall,
    run_detector,
)


def synthetic(seed: int, duration: float = 900.0, probe: float = 0.2):
    """Piecewise-constant base latency (changes ≥ 1 ms apart, every 15–60 s) plus queueing noise:
    exponential jitter on every probe, 3% spikes of 2–20 ms, and 2-s congestion bursts (+3 ms)."""
    rng = random.Random(seed)
    changes, levels = [], [rng.uniform(5, 40)]
    t = rng.uniform(15, 60)
    while t < duration - 10:
        new = levels[-1]
        while abs(new - levels[-1]) < 1.0:
            new = rng.uniform(5, 40)
        changes.append(t)
        levels.append(new)
        t += rng.uniform(15, 60)
    bursts = [rng.uniform(0, duration) for _ in range(int(duration / 30))]
    series, i, t = [], 0, 0.0
    while t < duration:
        while i < len(changes) and t >= changes[i]:
            i += 1
        v = levels[i] + rng.expovariate(1 / 0.15)
        if rng.random() < 0.03:
            v += rng.uniform(2, 20)
        if any(b <= t < b + 2.0 for b in bursts):
            v += 3.0 + rng.expovariate(1.0)
        series.append((t, v))
        t += probe
    return series, changes


def test_detector_finds_known_change_points_precision_recall():
    tot_pc = {"seed001": [0, 0, 0], "rolling_min": [0, 0, 0]}  # hits, detections, truths
    for seed in range(5):
        series, truth = synthetic(seed)
        for name, det in (("seed001", PathChangeDetector()), ("rolling_min", RollingMinBaseline(k=20))):
            found = [c.t for c in run_detector(det, series)]
            p, r = precision_recall(found, truth, tolerance_s=6.0)
            hits = round(r * len(truth))
            acc = tot_pc[name]
            acc[0] += hits
            acc[1] += len(found)
            acc[2] += len(truth)
    report = {n: (h / d if d else 1.0, h / t) for n, (h, d, t) in tot_pc.items()}
    for n, (p, r) in report.items():
        print(f"{n}: precision={p:.3f} recall={r:.3f} over {tot_pc[n][2]} true changes")
    p, r = report["seed001"]
    assert p >= 0.95 and r >= 0.95
    pb, rb = report["rolling_min"]
    assert (2 * p * r / (p + r)) > (2 * pb * rb / (pb + rb))


def test_exact_change_time_and_unstable_window_ignored():
    det = PathChangeDetector()
    series = [(i * 0.2, 10.0) for i in range(50)] + [(10 + i * 0.2, 12.0) for i in range(50)]
    changes = run_detector(det, series)
    assert len(changes) == 1
    c = changes[0]
    assert (c.old_ms, c.new_ms) == (10.0, 12.0) and c.t == 14.0  # 4 one-second minima of 12 ms
    det = PathChangeDetector()
    noisy = [(i * 0.2, 10.0) for i in range(30)]
    noisy += [(6 + i * 0.2, 10.0 + (i // 5 % 2) * 3 + (i // 5) * 0.7) for i in range(20)]
    noisy += [(10 + i * 0.2, 10.0) for i in range(30)]
    assert run_detector(det, noisy) == []


def test_detector_rejects_bad_params():
    with pytest.raises(ValueError):
        PathChangeDetector(window=2, stable=3)


def test_probe_book_rtt_and_loss():
    book = ProbeBook(timeout=1.0)
    a = book.sent("A-C", 0.0)
    b = book.sent("A-C", 0.1)
    assert book.received(a, 0.0125) == ("A-C", pytest.approx(12.5))
    assert book.received(a, 0.02) is None  # duplicate
    assert book.received(b, 5.0) is None  # too late: lost
    assert book.lost == {"A-C": 1} and book.loss_rate("A-C") == 0.5
