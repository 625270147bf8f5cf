"""Offload gain: does moving a flow pay for the switch-over? (OSCARS-TE, §IV.2 and Fig. 7)

The paper: "Given a predicted flow size and expected switching time, we can calculate what would be
the gain in offloading a flow to a higher bandwidth path or keeping it in its current path" — and
warns that it only works as well as the prediction of the flow size. We predict what a flow still has
to send from what it sent so far: flow sizes on WANs are heavy-tailed, and for a Pareto tail with
shape ``alpha`` the expected remaining size of a flow that has sent ``s`` bytes is ``s / (alpha - 1)``
(``alpha`` = 2 by default: a flow is expected to send about as much again as it already did). A
short flow therefore has a small predicted remainder and is not moved.

    stay  = remaining / current_rate
    move  = switch_s + remaining / new_rate
    gain  = stay - move     (seconds the flow finishes sooner by moving)

A move pays when ``gain >= min_gain_s`` and the flow would finish at least ``min_speedup`` times
sooner (a margin against prediction error). Rates in Mbit/s, sizes in bytes, times in seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_ALPHA = 2.0
DEFAULT_MIN_GAIN_S = 1.0
DEFAULT_MIN_SPEEDUP = 1.2


@dataclass(frozen=True)
class GainEstimate:
    """The decision and the numbers behind it (an event carries them as its reason)."""

    pays: bool
    remaining_bytes: float
    stay_s: float
    move_s: float
    gain_s: float
    reason: str

    def as_dict(self) -> dict[str, float | bool | str]:
        return {"pays": self.pays, "remaining_bytes": round(self.remaining_bytes), "stay_s": round(self.stay_s, 3),
                "move_s": round(self.move_s, 3), "gain_s": round(self.gain_s, 3), "reason": self.reason}


def predicted_remaining(sent_bytes: float, alpha: float = DEFAULT_ALPHA) -> float:
    """Expected bytes still to come of a flow that sent ``sent_bytes`` (Pareto tail, shape ``alpha``)."""
    if not alpha > 1:
        raise ValueError(f"the Pareto shape alpha must be > 1 (a finite mean), got {alpha}")
    if sent_bytes < 0 or not math.isfinite(sent_bytes):
        raise ValueError(f"bytes sent must be a finite number >= 0, got {sent_bytes}")
    return sent_bytes / (alpha - 1)


def counted_average(sent_bytes: float, counted_s: float, min_counted_s: float = 1.0) -> float | None:
    """A flow's average Mbit/s since its count rule went in, or None while that spans less than
    ``min_counted_s`` (or nothing was counted): the reference of :func:`judged_rate` and :func:`slowing`."""
    if counted_s < min_counted_s or sent_bytes <= 0:
        return None
    return sent_bytes * 8 / 1e6 / counted_s


def judged_rate(named_mbps: float, count_mbps: float, sent_bytes: float, counted_s: float, *,
                min_counted_s: float = 1.0) -> float:
    """The current rate a waiting elephant is judged again at: the highest of the rate it was named at,
    its latest count's, and its average since it was first counted (``sent_bytes`` over ``counted_s``,
    once that spans ``min_counted_s``). Each of them reads low at times: a first sample spans only a few
    of a bursty flow's bursts, and a count whose interval straddles the flow's end is diluted by the idle
    rest. A rate read low makes staying look slow and a move look better than it is: a CI run moved a
    2.2-s burst at 6 Mbit/s judged at 4.1, its named rate and its last count's both low."""
    average = counted_average(sent_bytes, counted_s, min_counted_s)
    rates = [named_mbps, count_mbps] + ([average] if average is not None else [])
    return max(r for r in rates if math.isfinite(r))


SLOWING = 0.75  # a count below this fraction of the flow's average since counted shows it slowing


def slowing(count_mbps: float, sent_bytes: float, counted_s: float, *, factor: float = SLOWING,
            min_counted_s: float = 1.0) -> bool:
    """Whether a count shows a flow slowing: its interval's rate below ``factor`` times its average since
    it was first counted. Such a count may be the flow ending inside the interval; no move is decided on
    it (the next count tells: below the elephant rate, it ended). Why: judged at that average, a 2.2-s
    burst whose count was idle for half its interval still looked worth moving (the average is diluted
    by the idle rest too)."""
    average = counted_average(sent_bytes, counted_s, min_counted_s)
    return average is not None and count_mbps < factor * average


def offload_gain(sent_bytes: float, current_mbps: float, new_mbps: float, switch_s: float, *,
                 alpha: float = DEFAULT_ALPHA, min_gain_s: float = DEFAULT_MIN_GAIN_S,
                 min_speedup: float = DEFAULT_MIN_SPEEDUP, remaining_bytes: float | None = None) -> GainEstimate:
    """Whether moving a flow from ``current_mbps`` to a path where it gets ``new_mbps`` pays, after a
    switch-over of ``switch_s`` seconds (the new circuit's setup and the ordered update).
    ``remaining_bytes``: what it still has to send when predicted otherwise (a young elephant, from its
    rate: :mod:`app.te.young`); default: from ``sent_bytes`` (:func:`predicted_remaining`)."""
    for name, v in (("current rate", current_mbps), ("new rate", new_mbps)):
        if not v > 0 or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number of Mbit/s > 0, got {v}")
    if switch_s < 0 or not math.isfinite(switch_s):
        raise ValueError(f"switch-over time must be a finite number of seconds >= 0, got {switch_s}")
    if remaining_bytes is not None and not (remaining_bytes >= 0 and math.isfinite(remaining_bytes)):
        raise ValueError(f"remaining bytes must be a finite number >= 0, got {remaining_bytes}")
    remaining = predicted_remaining(sent_bytes, alpha) if remaining_bytes is None else remaining_bytes
    bits = remaining * 8
    stay = bits / (current_mbps * 1e6)
    move = switch_s + bits / (new_mbps * 1e6)
    gain = stay - move
    if gain < min_gain_s:
        why = (f"gain {gain:.2f} s < {min_gain_s:g} s: {remaining / 1e6:.1f} MB predicted to go would finish in "
               f"{stay:.2f} s where it is, {move:.2f} s after a {switch_s:.2f} s switch-over")
        return GainEstimate(False, remaining, stay, move, gain, why)
    if stay < min_speedup * move:
        why = f"only {stay / move:.2f}x sooner (< {min_speedup:g}x): not worth the risk of a wrong prediction"
        return GainEstimate(False, remaining, stay, move, gain, why)
    why = f"finishes {gain:.2f} s sooner ({stay:.2f} s where it is, {move:.2f} s moved)"
    return GainEstimate(True, remaining, stay, move, gain, why)
