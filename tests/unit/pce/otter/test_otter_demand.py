import numpy as np
import pytest

from pce.errors import InvalidInputError
from pce.otter.demand import (
    EPS,
    IGNORE,
    LINEAR,
    RATIONAL,
    STEP,
    bw_tolerance,
    linear,
    rational,
    score,
    step,
    tolerance,
)


def test_step_is_one_up_to_breakpoint_then_eps():
    assert step(100, 100) == 1.0
    assert step(100.01, 100) == EPS
    assert step(0, 5) == 1.0


def test_linear_matches_paper_example():
    # paper §4: 1 below 100 ms, −σ/100 + 2 between 100 and 200 ms, ε beyond
    assert linear(80, 100) == 1.0
    assert linear(150, 100) == pytest.approx(0.5)
    assert linear(199, 100) == pytest.approx(0.01)
    assert linear(200, 100) == EPS  # clamped at ε, never 0
    assert linear(500, 100) == EPS


def test_rational_is_a_over_sigma_floored():
    assert rational(50, 100) == 1.0
    assert rational(400, 100) == pytest.approx(0.25)
    assert rational(0, 1e-6) == 1.0  # a lossless path satisfies any loss demand
    assert rational(1e9, 1) == EPS


def test_shapes_are_monotone_non_increasing_and_in_range():
    sig = np.linspace(0, 10, 101)
    for shape in (STEP, LINEAR, RATIONAL):
        v = tolerance(shape, 3.0, sig)
        assert np.all(np.diff(v) <= 1e-12)
        assert v.min() >= EPS and v.max() <= 1.0


def test_ignored_metric_counts_one_and_bw_rule():
    assert tolerance(IGNORE, 1.0, 1e9) == 1.0
    assert bw_tolerance(10, 10) == 1.0
    assert bw_tolerance(10, 9.9) == EPS


def test_score_sums_four_metrics_with_loss_in_percent():
    shapes = np.array([STEP, IGNORE, STEP])
    bps = np.array([50.0, 1.0, 1e-3])  # RTT ≤ 50 ms, loss rate ≤ 0.1%
    good = np.array([40.0, 5.0, 0.05, 100.0])  # 0.05 % = 5e-4 ≤ 1e-3
    bad = np.array([60.0, 5.0, 0.5, 100.0])  # 0.5 % = 5e-3 > 1e-3
    assert score(shapes, bps, np.array(10.0), good) == pytest.approx(4.0)
    assert score(shapes, bps, np.array(10.0), bad) == pytest.approx(2 + 2 * EPS)


def test_unknown_shape_code_rejected():
    with pytest.raises(InvalidInputError):
        tolerance(7, 1.0, 1.0)
