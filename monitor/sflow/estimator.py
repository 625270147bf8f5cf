"""Per-flow rate estimates from sFlow packet samples.

Each sample stands for ``sampling_rate`` packets of about its ``frame_length``, so the estimated
bytes of a flow in a window are Σ frame_length × sampling_rate over its samples, and its rate is
that sum divided by the window. The same flow is sampled at every switch and port it crosses;
summing those would count it once per hop, so the estimate is kept per observation point
(agent, data source) and a flow's rate is the maximum over the points that saw it. With ``n``
samples the relative standard error is about 1/√n (sFlow sampling theory), so each estimate also
carries its sample count.
"""
from __future__ import annotations

import threading
from collections import defaultdict, deque
from dataclasses import dataclass

from monitor.sflow.records import FlowSample
from topology.flow import FiveTuple

Point = tuple[str, int]  # (agent address, data source index)


@dataclass(frozen=True)
class FlowRate:
    """A flow's estimated rate over the window."""

    key: FiveTuple
    bytes_per_s: float
    samples: int
    points: tuple[Point, ...]

    @property
    def mbps(self) -> float:
        return self.bytes_per_s * 8 / 1e6

    def as_dict(self) -> dict:
        return {"flow": self.key.as_dict(), "mbps": round(self.mbps, 6), "samples": self.samples,
                "points": [f"{a}/{i}" for a, i in self.points]}


class FlowRateEstimator:
    """Sliding-window flow-rate estimator (thread-safe; time is passed in as ``now``)."""

    def __init__(self, window: float = 5.0) -> None:
        if window <= 0:
            raise ValueError("window must be > 0")
        self.window = window
        self._samples: deque[tuple[float, Point, FiveTuple, int]] = deque()
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def mark_start(self, agent: str, now: float) -> None:
        """Sampling just started at ``agent``: until a full window has passed, its rates are
        divided by the time since ``now`` instead of the whole window (no underestimate while
        fine monitoring warms up). At least 0.2 s is used, so one early sample cannot explode."""
        with self._lock:
            self._started[agent] = now

    def _span(self, agent: str, now: float) -> float:
        start = self._started.get(agent)
        if start is None:
            return self.window
        return min(self.window, max(0.2, now - start))

    def add(self, sample: FlowSample, now: float) -> None:
        """Record one sample; samples without an IP 5-tuple are ignored."""
        if sample.key is None or sample.sampling_rate <= 0:
            return
        est = sample.frame_length * sample.sampling_rate
        with self._lock:
            self._samples.append((now, (sample.agent, sample.source_id_index), sample.key, est))
            self._expire(now)

    def _expire(self, now: float) -> None:
        cutoff = now - self.window
        while self._samples and self._samples[0][0] <= cutoff:
            self._samples.popleft()

    def rates(self, now: float, agents: set[str] | None = None) -> list[FlowRate]:
        """Flow rates over ``(now - window, now]``, largest first; ``agents`` limits the points used."""
        per_point: dict[FiveTuple, dict[Point, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        with self._lock:
            self._expire(now)
            for _t, point, key, est in self._samples:
                if agents is not None and point[0] not in agents:
                    continue
                acc = per_point[key][point]
                acc[0] += est
                acc[1] += 1
        out = []
        for key, points in per_point.items():
            rates = {p: (acc[0] / self._span(p[0], now), acc[1]) for p, acc in points.items()}
            best = max(rates.values())
            out.append(FlowRate(key, best[0], best[1], tuple(sorted(points))))
        out.sort(key=lambda r: (-r.bytes_per_s, r.key))
        return out
