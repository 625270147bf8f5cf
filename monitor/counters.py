"""Coarse monitoring: rates, drops and smoothed utilization from periodic counter snapshots.

The controller polls PORT_STATS (and queue stats, where drops are counted — see
:mod:`monitor.drops`) every Ts and feeds each monitored point (a switch port, usually one end
of a circuit) here with ``now``. Rates are counter deltas over the elapsed time; a counter that
goes backwards (switch restart, port re-created) restarts the point instead of producing a
negative rate. Utilization is the larger direction's rate over the circuit's provisioned
capacity, smoothed with an exponentially weighted moving average:

    s_t = α · x_t + (1 − α) · s_{t−1},   s_0 = x_0

With Ts = 1 s and the default α = 0.3 (``[monitor] ewma_alpha``) a step reaches 66% of its
height after 3 intervals and 97% after 10, so a burst shorter than ~2 s cannot on its own push a
circuit across the 70% growth threshold from a low load.
"""
from __future__ import annotations

from dataclasses import dataclass


class Ewma:
    """Exponentially weighted moving average with weight ``alpha`` on the newest sample."""

    def __init__(self, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.value: float | None = None

    def update(self, x: float) -> float:
        self.value = x if self.value is None else self.alpha * x + (1 - self.alpha) * self.value
        return self.value


@dataclass(frozen=True)
class PortSnapshot:
    """Cumulative counters of one monitored point at one time (from PORT_STATS / queue stats)."""

    tx_bytes: int
    rx_bytes: int
    tx_packets: int = 0
    rx_packets: int = 0
    drops: int = 0  # every drop counter that applies, summed (queue tx_errors, tx/rx_dropped)


@dataclass(frozen=True)
class PointSample:
    """Rates of one point over one interval, with the smoothed values."""

    point: str
    t: float
    dt: float
    tx_mbps: float
    rx_mbps: float
    drops: int  # drops counted during the interval
    drop_pps: float
    util: float | None  # max(tx, rx) / capacity, None if the capacity is unknown
    smoothed_mbps: float
    smoothed_util: float | None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class CounterTracker:
    """Turns cumulative snapshots into :class:`PointSample` per monitored point."""

    def __init__(self, alpha: float = 0.3) -> None:
        self.alpha = alpha
        self._last: dict[str, tuple[float, PortSnapshot]] = {}
        self._rate_avg: dict[str, Ewma] = {}
        self._util_avg: dict[str, Ewma] = {}
        self.capacity: dict[str, float] = {}

    def set_capacity(self, point: str, mbps: float | None) -> None:
        """Provisioned capacity of the circuit at ``point`` (Mbit/s); None forgets it."""
        if mbps is None or mbps <= 0:
            self.capacity.pop(point, None)
        else:
            self.capacity[point] = mbps

    def forget(self, point: str) -> None:
        for d in (self._last, self._rate_avg, self._util_avg):
            d.pop(point, None)

    def update(self, point: str, now: float, snap: PortSnapshot) -> PointSample | None:
        """Record ``snap`` taken at ``now``; return the interval's sample (None on the first one)."""
        prev = self._last.get(point)
        self._last[point] = (now, snap)
        if prev is None:
            return None
        t0, s0 = prev
        dt = now - t0
        d_tx, d_rx, d_drop = snap.tx_bytes - s0.tx_bytes, snap.rx_bytes - s0.rx_bytes, snap.drops - s0.drops
        if dt <= 0 or d_tx < 0 or d_rx < 0 or d_drop < 0:  # reset or clock glitch: restart the point
            return None
        tx, rx = d_tx * 8 / dt / 1e6, d_rx * 8 / dt / 1e6
        rate = max(tx, rx)
        smoothed = self._rate_avg.setdefault(point, Ewma(self.alpha)).update(rate)
        cap = self.capacity.get(point)
        util = rate / cap if cap else None
        s_util = self._util_avg.setdefault(point, Ewma(self.alpha)).update(util) if util is not None else None
        return PointSample(point, now, dt, tx, rx, d_drop, d_drop / dt, util, smoothed, s_util)
