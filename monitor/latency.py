"""Latency monitoring: active-probe bookkeeping and the seed-001 path-change detector.

Seed 001 ("path persistence in the cloud"): probe every 200 ms; each 1-s interval yields the
minimum of its probes; slide a 4-s window over those minima; the window is *stable* if at least
3 of its 4 minima lie within 0.5 ms of the window minimum. A stable window whose minimum is more
than 0.5 ms away from the current base latency is a path change (the window minimum becomes the
new base); unstable windows are ignored (queueing noise). The rolling-minimum baseline (minimum
of the last k = 20 one-second minima, a change whenever it moves by more than the tolerance) is
kept for comparison: the seed measured ≥ 7.69% false positives for it.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChangePoint:
    t: float  # end of the 1-s interval at which the change was recognised
    old_ms: float | None
    new_ms: float


class _Bucketer:
    """Groups (t, value) into consecutive ``bucket``-second intervals and yields their minima."""

    def __init__(self, bucket: float) -> None:
        self.bucket = bucket
        self._idx: int | None = None
        self._min = math.inf

    def add(self, t: float, v: float) -> list[tuple[float, float]]:
        idx = math.floor(t / self.bucket)
        closed: list[tuple[float, float]] = []
        if self._idx is not None and idx > self._idx:
            if self._min < math.inf:
                closed.append(((self._idx + 1) * self.bucket, self._min))
            self._min = math.inf
        if self._idx is None or idx >= self._idx:
            self._idx = idx
            self._min = min(self._min, v)
        return closed  # a late sample (idx < current) is dropped

    def flush(self) -> list[tuple[float, float]]:
        if self._idx is None or self._min == math.inf:
            return []
        out = [((self._idx + 1) * self.bucket, self._min)]
        self._min = math.inf
        return out


class _IntervalDetector:
    """Shared plumbing: raw probes -> per-interval minima -> the subclass's ``_interval(t, minimum)``,
    which decides the level and hands it to :meth:`_move_base`."""

    def __init__(self, bucket: float, minima: int, tolerance_ms: float) -> None:
        self._bucketer = _Bucketer(bucket)
        self._minima: deque[float] = deque(maxlen=minima)
        self.tol = tolerance_ms
        self.base: float | None = None

    def add(self, t: float, latency_ms: float) -> list[ChangePoint]:
        return [c for bt, m in self._bucketer.add(t, latency_ms) if (c := self._interval(bt, m))]

    def flush(self) -> list[ChangePoint]:
        return [c for bt, m in self._bucketer.flush() if (c := self._interval(bt, m))]

    def _move_base(self, t: float, level: float) -> ChangePoint | None:
        """Take ``level`` as the base; a change point if it moved more than the tolerance."""
        if self.base is None:
            self.base = level
            return None
        if abs(level - self.base) > self.tol:
            change = ChangePoint(t, self.base, level)
            self.base = level
            return change
        return None


class PathChangeDetector(_IntervalDetector):
    """Seed 001's detector; feed raw probe latencies with :meth:`add`, get change points back."""

    def __init__(self, bucket: float = 1.0, window: int = 4, stable: int = 3, tolerance_ms: float = 0.5) -> None:
        if not 1 <= stable <= window:
            raise ValueError("need 1 <= stable <= window")
        super().__init__(bucket, window, tolerance_ms)
        self.window, self.stable = window, stable

    def _interval(self, t: float, minimum: float) -> ChangePoint | None:
        self._minima.append(minimum)
        if len(self._minima) < self.window:
            return None
        wmin = min(self._minima)
        if sum(1 for m in self._minima if m - wmin <= self.tol) < self.stable:
            return None  # unstable window: ignore
        return self._move_base(t, wmin)


class RollingMinBaseline(_IntervalDetector):
    """Comparison detector: base = minimum of the last ``k`` one-second minima."""

    def __init__(self, k: int = 20, bucket: float = 1.0, tolerance_ms: float = 0.5) -> None:
        super().__init__(bucket, k, tolerance_ms)

    def _interval(self, t: float, minimum: float) -> ChangePoint | None:
        self._minima.append(minimum)
        return self._move_base(t, min(self._minima))


def run_detector(detector: PathChangeDetector | RollingMinBaseline,
                 series: Iterable[tuple[float, float]]) -> list[ChangePoint]:
    out: list[ChangePoint] = []
    for t, v in series:
        out += detector.add(t, v)
    return out + detector.flush()


def precision_recall(detected: Sequence[float], truth: Sequence[float], tolerance_s: float) -> tuple[float, float]:
    """Match each true change to at most one detection within ``tolerance_s`` after it (greedy in time).

    A detection can only come after the change, and the seed-001 detector needs the 4-s window to
    fill with the new latency, so ``tolerance_s`` should be ≥ window + 1 s.
    """
    used: set[int] = set()
    hits = 0
    for tc in sorted(truth):
        for i, td in enumerate(detected):
            if i not in used and tc <= td <= tc + tolerance_s:
                used.add(i)
                hits += 1
                break
    precision = hits / len(detected) if detected else 1.0
    recall = hits / len(truth) if truth else 1.0
    return precision, recall


@dataclass
class _Probe:
    path: str
    sent: float


class ProbeBook:
    """Active-probe bookkeeping: match replies to probes by id, report RTT, count losses.

    The probe transport (PACKET_OUT/PACKET_IN in the controller, host pings in labs) calls
    :meth:`sent` and :meth:`received`; probes older than ``timeout`` are lost.
    """

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._pending: dict[int, _Probe] = {}
        self.lost: dict[str, int] = {}
        self.received_count: dict[str, int] = {}
        self._next = 1

    def sent(self, path: str, now: float) -> int:
        pid = self._next
        self._next = (self._next + 1) & 0xFFFFFFFF or 1
        self._pending[pid] = _Probe(path, now)
        return pid

    def received(self, probe_id: int, now: float) -> tuple[str, float] | None:
        """(path, RTT in ms) for a known probe; None for unknown/late/duplicate replies."""
        self.expire(now)
        p = self._pending.pop(probe_id, None)
        if p is None:
            return None
        self.received_count[p.path] = self.received_count.get(p.path, 0) + 1
        return p.path, (now - p.sent) * 1000.0

    def pending(self, probe_id: int) -> bool:
        return probe_id in self._pending

    def cancel(self, probe_id: int) -> None:
        """Forget a probe without counting it (e.g. it came back at the wrong place)."""
        self._pending.pop(probe_id, None)

    def expire(self, now: float) -> None:
        for pid, p in list(self._pending.items()):
            if now - p.sent > self.timeout:
                del self._pending[pid]
                self.lost[p.path] = self.lost.get(p.path, 0) + 1

    def loss_rate(self, path: str) -> float:
        lost, ok = self.lost.get(path, 0), self.received_count.get(path, 0)
        return lost / (lost + ok) if lost + ok else 0.0
