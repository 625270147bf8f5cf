"""Demand (tolerance) functions: map a path metric to a coefficient in (0, 1] (paper §4, digest).

Shapes, with breakpoint ``a`` and floor ``EPS``:
  step      1 if σ ≤ a else ε
  linear    1 if σ ≤ a; 2 − σ/a for a < σ ≤ 2a; ε beyond (clamped at ε)
  rational  min(1, a/σ), floored at ε   (σ = 0 → 1)
A metric a flow ignores (shape ``IGNORE``) counts 1. Bandwidth: 1 if σ_bw ≥ bw_f else ε.
Everything is vectorised so the simulator scores 10⁵ flows × 10² paths at once.
"""
from __future__ import annotations

import numpy as np

from pce.errors import InvalidInputError

EPS = 1e-3
IGNORE, STEP, LINEAR, RATIONAL = -1, 0, 1, 2
SHAPE_NAMES = {IGNORE: "ignore", STEP: "step", LINEAR: "linear", RATIONAL: "rational"}
SHAPES = {v: k for k, v in SHAPE_NAMES.items()}
#: Metric columns of ``Network.path_metrics`` and of flow breakpoints (bw is handled apart).
METRICS = ("rtt", "jitter", "loss")
N_METRICS = 4  # rtt, jitter, loss, bw: the objective sums all four with equal weight


def step(sigma, a):
    """Step tolerance: 1 up to the breakpoint, ε beyond."""
    sigma, a = np.asarray(sigma, float), np.asarray(a, float)
    return np.where(sigma <= a, 1.0, EPS)


def linear(sigma, a):
    """Linear tolerance: 1 up to a, falling linearly to 0 at 2a, never below ε."""
    sigma, a = np.asarray(sigma, float), np.asarray(a, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = 2.0 - sigma / a
    return np.where(sigma <= a, 1.0, np.maximum(mid, EPS))


def rational(sigma, a):
    """Rational tolerance min(1, a/σ), floored at ε."""
    sigma, a = np.asarray(sigma, float), np.asarray(a, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sigma > 0, a / np.where(sigma > 0, sigma, 1.0), 1.0)
    return np.clip(ratio, EPS, 1.0)


def tolerance(shape, a, sigma):
    """Vectorised 𝒟(σ) for arrays of shapes (IGNORE/STEP/LINEAR/RATIONAL), breakpoints and metrics."""
    shape = np.asarray(shape)
    if np.any((shape < IGNORE) | (shape > RATIONAL)):
        raise InvalidInputError(f"unknown demand shape code in {np.unique(shape).tolist()}")
    a = np.asarray(a, float)
    sigma = np.asarray(sigma, float)
    out = np.ones(np.broadcast_shapes(shape.shape, a.shape, sigma.shape))
    out = np.where(shape == STEP, step(sigma, a), out)
    out = np.where(shape == LINEAR, linear(sigma, a), out)
    out = np.where(shape == RATIONAL, rational(sigma, a), out)
    return out


def bw_tolerance(bw_flow, bw_path):
    """Digest rule for the bandwidth metric: the path must carry the whole request."""
    return np.where(np.asarray(bw_path, float) >= np.asarray(bw_flow, float), 1.0, EPS)


def score(shapes: np.ndarray, breakpoints: np.ndarray, bw: np.ndarray, path_metrics: np.ndarray) -> np.ndarray:
    """Σ_m 𝒟_f^m(σ_p^m) for flows × paths.

    ``shapes``/``breakpoints``: (..., 3) per flow (rtt ms, jitter ms, loss rate); ``bw``: (...);
    ``path_metrics``: (..., 4) per path (rtt ms, jitter ms, loss %, bw Mbit/s), broadcast against the
    flow arrays (e.g. flows (N,1,3) with paths (N,C,4)). Path loss is converted from percent to a rate.
    """
    pm = np.asarray(path_metrics, float)
    total = tolerance(shapes[..., 0], breakpoints[..., 0], pm[..., 0])
    total = total + tolerance(shapes[..., 1], breakpoints[..., 1], pm[..., 1])
    total = total + tolerance(shapes[..., 2], breakpoints[..., 2], pm[..., 2] / 100.0)
    return total + bw_tolerance(bw, pm[..., 3])
