"""Seed 004: load-aware flow→path mapping — RTT- and throughput-based path weights, FlowRemapping.

Whole flows are mapped to paths. Two estimators turn per-path measurements into weights w_i
(Σ w_i = 1):

* **RTT-based**: srtt = 0.8·srtt + 0.2·rtt; stage 1 = weighted mean of the last 16 srtt values
  (the 8 newest weigh 1, the 8 older 0.88 … 0.11 linearly); stage 2 = cycle detection with 5%
  thresholds (ascending when a value > current·1.05, descending when < current·0.95; a cycle
  ends at a trough) giving cycleAvg. load_i = (cycleAvg_i − minCycleAvg_i) / (maxRTT_i −
  minCycleAvg_i); w_i = 1 − load_i / Σ load, renormalised (for > 2 paths); equal weights if every
  load_i < 0.2 or every numerator < 5 ms (we also apply the 5-ms floor per path: load_i = 0).
* **Throughput-based**: bytes per srtt smoothed the same way; w_i = cycleAvgThroughput_i /
  nflows_i, normalised; equal weights if the weights differ by < 0.05.

:func:`limit_weights` applies the seed's limits (|Δw_i| ≤ 0.1 per remap, w_i ≥ 0.1) and
:class:`FlowRemapper` moves flows so path i carries ⌊w_i·N⌋ of them, taking flows away from
shrinking paths youngest (most recently remapped) first.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

#: Stage-1 weights, newest first: 8 × 1, then 0.88 … 0.11 linearly.
STAGE1_WEIGHTS = [1.0] * 8 + [0.88 - i * (0.88 - 0.11) / 7 for i in range(8)]


class CycleSmoother:
    """srtt smoothing + stage-1 weighted mean + stage-2 cycle average for one path's samples.

    A cycle runs from one trough to the next: it closes when the stage-1 value, after
    descending, rises more than ``band`` above the reference. Until the first cycle closes the
    running mean stands in for the cycle average.
    """

    def __init__(self, gain: float = 0.2, band: float = 0.05, max_cycle: int | None = None) -> None:
        if max_cycle is not None and max_cycle < 2:
            raise ValueError(f"max_cycle must be >= 2 samples, got {max_cycle}")
        self.gain, self.band, self.max_cycle = gain, band, max_cycle
        self.srtt: float | None = None
        self._recent: deque[float] = deque(maxlen=16)
        self.current: float | None = None  # stage-1 reference the 5% thresholds compare against
        self.direction = 0  # +1 ascending, -1 descending
        self._cycle: list[float] = []
        self.cycle_avg: float | None = None
        self.cycles = 0
        self.min_cycle_avg = math.inf
        self.max_value = 0.0

    def add(self, x: float) -> float:
        """Add one raw sample (RTT in ms, or bytes per srtt); return the current cycle average."""
        self.srtt = x if self.srtt is None else (1 - self.gain) * self.srtt + self.gain * x
        self.max_value = max(self.max_value, x)
        self._recent.appendleft(self.srtt)
        w = STAGE1_WEIGHTS[: len(self._recent)]
        s1 = sum(a * b for a, b in zip(w, self._recent, strict=True)) / sum(w)
        if self.current is None:
            self.current = s1
        elif s1 > self.current * (1 + self.band):
            if self.direction == -1 and self._cycle:  # the trough is behind us: one cycle complete
                self._close()
            self.direction, self.current = 1, s1
        elif s1 < self.current * (1 - self.band):
            self.direction, self.current = -1, s1
        self._cycle.append(s1)
        if self.max_cycle is not None and len(self._cycle) >= self.max_cycle:
            self._close()  # a long fall (or rise) must not leave the average of a cycle long past
        if self.cycle_avg is None:
            self.min_cycle_avg = min(self.min_cycle_avg, sum(self._cycle) / len(self._cycle))
        return self.value()  # type: ignore[return-value]

    def _close(self) -> None:
        self.cycle_avg = sum(self._cycle) / len(self._cycle)
        self.min_cycle_avg = min(self.min_cycle_avg, self.cycle_avg)
        self.cycles += 1
        self._cycle = []

    def value(self) -> float | None:
        if self.cycle_avg is not None:
            return self.cycle_avg
        return sum(self._cycle) / len(self._cycle) if self._cycle else None


def _equal(n: int) -> list[float]:
    return [1.0 / n] * n if n else []


def rtt_weights(paths: Sequence[CycleSmoother], min_load: float = 0.2, min_delta_ms: float = 5.0) -> list[float]:
    """RTT-based weights from each path's smoother (fed with RTT samples in ms)."""
    n = len(paths)
    vals = [p.value() for p in paths]
    if n < 2 or any(v is None for v in vals):
        return _equal(n)
    loads, nums = [], []
    for p, v in zip(paths, vals, strict=True):
        num = v - p.min_cycle_avg
        den = p.max_value - p.min_cycle_avg
        nums.append(num)
        # per-path noise floor: a path whose cycle average is < min_delta_ms above its minimum is
        # unloaded (otherwise an idle path's sub-ms jitter, divided by its sub-ms range, looks loaded)
        loads.append(min(1.0, max(0.0, num / den)) if den > 0 and num >= min_delta_ms else 0.0)
    total = sum(loads)
    if all(x < min_load for x in loads) or all(x < min_delta_ms for x in nums) or total <= 0:
        return _equal(n)
    raw = [1 - x / total for x in loads]
    s = sum(raw)
    return [r / s for r in raw] if s > 0 else _equal(n)


def throughput_weights(paths: Sequence[CycleSmoother], nflows: Sequence[int], min_diff: float = 0.05) -> list[float]:
    """Throughput-based weights: cycle-average throughput per flow, normalised."""
    n = len(paths)
    vals = [p.value() for p in paths]
    if n < 2 or any(v is None for v in vals):
        return _equal(n)
    raw = [max(0.0, v) / max(1, k) for v, k in zip(vals, nflows, strict=True)]
    s = sum(raw)
    if s <= 0:
        return _equal(n)
    w = [r / s for r in raw]
    return _equal(n) if max(w) - min(w) < min_diff else w


def limit_weights(old: Sequence[float], new: Sequence[float], max_step: float = 0.1, floor: float = 0.1) -> list[float]:
    """Clamp each change to ±max_step and each weight to ≥ floor, keeping Σ w = 1."""
    n = len(new)
    if n == 0:
        return []
    floor = min(floor, 1.0 / n)
    w = [min(max(nw, ow - max_step), ow + max_step) for ow, nw in zip(old, new, strict=True)]
    w = [max(floor, x) for x in w]
    for _ in range(50):  # renormalise while respecting the floor
        excess = sum(w) - 1.0
        if abs(excess) < 1e-12:
            break
        free = [i for i, x in enumerate(w) if x > floor + 1e-12] if excess > 0 else list(range(n))
        if not free:
            break
        share = excess / len(free)
        for i in free:
            w[i] = max(floor, w[i] - share)
    return w


@dataclass
class _Assign:
    path: int
    since: float


@dataclass(frozen=True)
class Move:
    flow: Hashable
    src: int
    dst: int


class FlowRemapper:
    """Seed 004 FlowRemapping: ⌊w_i·N⌋ flows per path (remainders to the largest fractions)."""

    def __init__(self, npaths: int) -> None:
        self.npaths = npaths
        self.assign: dict[Hashable, _Assign] = {}

    def add_flow(self, flow: Hashable, path: int, now: float) -> None:
        self.assign[flow] = _Assign(path, now)

    def remove_flow(self, flow: Hashable) -> None:
        self.assign.pop(flow, None)

    def counts(self) -> list[int]:
        c = [0] * self.npaths
        for a in self.assign.values():
            c[a.path] += 1
        return c

    def targets(self, weights: Sequence[float]) -> list[int]:
        n = len(self.assign)
        exact = [w * n for w in weights]
        t = [math.floor(x) for x in exact]
        order = sorted(range(self.npaths), key=lambda i: (-(exact[i] - t[i]), i))
        for i in order[: n - sum(t)]:
            t[i] += 1
        return t

    def remap(self, weights: Sequence[float], now: float) -> list[Move]:
        """Move flows toward ``weights``; shrinking paths give up their youngest flows first."""
        if len(weights) != self.npaths:
            raise ValueError("one weight per path")
        target, count = self.targets(weights), self.counts()
        freed: list[tuple[Hashable, int]] = []
        for p in range(self.npaths):
            surplus = count[p] - target[p]
            if surplus > 0:
                mine = sorted((f for f, a in self.assign.items() if a.path == p),
                              key=lambda f: self.assign[f].since, reverse=True)
                freed += [(f, p) for f in mine[:surplus]]
        moves = []
        for p in range(self.npaths):
            while count[p] < target[p] and freed:
                f, src = freed.pop(0)
                self.assign[f] = _Assign(p, now)
                count[p] += 1
                count[src] -= 1
                moves.append(Move(f, src, p))
        return moves


def weights_from_mapping(m: Mapping[int, float], npaths: int) -> list[float]:
    return [m.get(i, 0.0) for i in range(npaths)]
