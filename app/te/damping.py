"""Damping for the TE loop: never flap a flow, never move too much at once.

- *hold time*: a flow that was moved stays where it is for ``min_hold_s`` (no ping-pong);
- *cap*: at most ``max_moves`` moves per ``interval_s`` (a burst of events cannot reshuffle the network);
- *hysteresis*: a flow is moved onto a path when the trigger exceeds ``on`` and back only when it falls
  below ``off`` (< ``on``).

Plain state, time passed in as ``now``. Every refusal comes with its reason, so a skipped decision
can be an event like a taken one.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class Damper:
    min_hold_s: float = 10.0
    max_moves: int = 2
    interval_s: float = 1.0
    on: float = 0.9  # e.g. utilization that triggers a move
    off: float = 0.6  # ... and the level below which the move is undone
    _moved_at: dict[Hashable, float] = field(default_factory=dict)
    _recent: deque[float] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if not 0 <= self.off < self.on:
            raise ValueError(f"hysteresis needs 0 <= off < on, got off={self.off}, on={self.on}")
        if self.max_moves < 1 or self.interval_s <= 0 or self.min_hold_s < 0:
            raise ValueError("max_moves >= 1, interval_s > 0 and min_hold_s >= 0 are required")

    def why_not(self, flow: Hashable, now: float) -> str | None:
        """None if ``flow`` may move now, else why not."""
        last = self._moved_at.get(flow)
        if last is not None and now - last < self.min_hold_s:
            return f"held: moved {now - last:.1f} s ago (hold {self.min_hold_s:g} s)"
        while self._recent and now - self._recent[0] >= self.interval_s:
            self._recent.popleft()
        if len(self._recent) >= self.max_moves:
            return f"cap: {len(self._recent)} moves in the last {self.interval_s:g} s (max {self.max_moves})"
        return None

    def moved(self, flow: Hashable, now: float) -> None:
        self._moved_at[flow] = now
        self._recent.append(now)

    def forget(self, flow: Hashable) -> None:
        self._moved_at.pop(flow, None)

    def triggers(self, level: float, moved: bool) -> bool:
        """Hysteresis: an unmoved flow moves above ``on``; a moved one comes back only below ``off``."""
        return level >= self.on if not moved else level < self.off
