"""Young elephants: a flow's remaining bytes predicted from its rate, not from what it sent so far.

The offload gain (:mod:`app.te.gain`) predicts what a flow still has to send from the bytes its count
rule saw: about as much again (a Pareto tail). That is a lower bound on a *young* elephant — its count
rule went in when its circuit turned hot, a fraction of a second before — so a long transfer waits
until it has been counted for a second or two before a move pays (issue 25: 2.33 s median from its
start to its offload being verified on Fig. 2).

With ``[te] young_horizon_s`` > 0 (off by default) a flow the gain turns down on its bytes is judged
once more as a young elephant: predicted to send, for ``young_horizon_s`` more seconds, at the lowest
rate it showed over its last ``min_samples`` fine counts. Its guards against a mouse or a burst:

- *evidence*: at least ``min_samples`` (2) consecutive fine counts — distinct replies, so two switch
  counter refreshes —, every one at or above the monitor's elephant threshold: a burst that fills one
  count is not judged young; a count below the threshold starts the evidence again;
- *damping*: the lowest of those rates, not the highest, makes the prediction (the rate it stays at
  is still the highest it has shown, :func:`app.te.gain.judged_rate`: both err towards staying);
- *held down where it is*: only on an imbalance with drops on its circuit (its path leaves it less
  than it sends in its bursts: moving can speed it up); no elephant threshold known, no judgement;
- the move must still pay as any other: ``min_gain_s`` sooner and 1.2x sooner, after the switch-over.

Plain state, counts passed in (the TE app gives the monitor's fine data, ``NetworkView.fine_flows``).
"""
from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

YOUNG_MIN_SAMPLES = 2
MAX_FLOWS = 4096  # flows whose recent counts are kept (the oldest go first)


@dataclass(frozen=True)
class YoungPrediction:
    """What a young elephant is predicted to still send, and the evidence behind it."""

    remaining_bytes: float
    mbps: float  # the rate the prediction is made at (the lowest of the samples)
    samples: tuple[float, ...]  # the consecutive counts' Mbit/s, oldest first
    horizon_s: float

    def as_dict(self) -> dict[str, float | list[float]]:
        return {"young_mbps": round(self.mbps, 3), "young_samples": [round(s, 3) for s in self.samples],
                "young_horizon_s": self.horizon_s}


class YoungElephants:
    """The recent fine counts of each flow the decider judged, and the young-elephant prediction."""

    def __init__(self, horizon_s: float = 0.0, min_samples: int = YOUNG_MIN_SAMPLES,
                 max_flows: int = MAX_FLOWS) -> None:
        if not math.isfinite(horizon_s) or horizon_s < 0:
            raise ValueError(f"young_horizon_s must be a finite number of seconds >= 0, got {horizon_s}")
        if min_samples < 2:
            raise ValueError(f"a young elephant needs at least 2 counts as evidence, got {min_samples}")
        self.horizon_s = horizon_s
        self.min_samples = min_samples
        self.max_flows = max_flows
        self._counts: dict[Hashable, list[tuple[float, float]]] = {}  # flow -> [(reply time, Mbit/s)]

    @property
    def enabled(self) -> bool:
        return self.horizon_s > 0

    def note(self, flow: Hashable, t: float, mbps: float) -> None:
        """A fine count of ``flow`` (``t``: the reply that brought it); the same reply again is no news."""
        if not self.enabled or not math.isfinite(mbps):
            return
        seen = self._counts.pop(flow, [])  # re-inserted last: the dict's order is the flows' recency
        if not seen or t > seen[-1][0]:
            seen.append((t, mbps))
        self._counts[flow] = seen[-self.min_samples:]
        while len(self._counts) > self.max_flows:
            del self._counts[next(iter(self._counts))]

    def forget(self, flow: Hashable) -> None:
        self._counts.pop(flow, None)

    def predict(self, flow: Hashable, threshold_mbps: float, drops: float) -> YoungPrediction | None:
        """The prediction for ``flow``, or None without enough evidence (see the module docstring)."""
        if not self.enabled or not threshold_mbps > 0 or not drops > 0:
            return None
        seen = self._counts.get(flow, [])
        if len(seen) < self.min_samples:
            return None
        rates = tuple(r for _t, r in seen[-self.min_samples:])
        if min(rates) < threshold_mbps:
            return None
        mbps = min(rates)
        return YoungPrediction(mbps * 1e6 / 8 * self.horizon_s, mbps, rates, self.horizon_s)
