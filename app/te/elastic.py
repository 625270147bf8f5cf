"""Elastic reservations: provisioned one unit at a time, up to what admission control granted.

OSCARS-TE lets a reservation say ``mode: elastic``: admission control books the whole bandwidth it
asked for (the *grant*, so growing never fails for lack of capacity), but the network gives it only
what it uses. The reservation starts with one *unit* (the smallest ODU container at the lab scale,
ODU0 = 1.25 units, unless configured) enforced by an OpenFlow 1.3 meter on its ingress rules, and
follows its measured demand:

- *grow* by one unit when the measured rate reached ``grow_at`` × the provisioned rate for
  ``busy_intervals`` polls — never beyond the grant (then *hold*, "at the grant");
- *shrink* by one unit when the rate stayed below ``shrink_at`` × the rate one unit lower for
  ``calm_intervals`` polls and the last change is at least ``min_hold_s`` old — never below one unit.

``grow_at`` > ``shrink_at`` is the hysteresis: a rate between the two changes nothing. The measured
rate comes from the reservation's ingress rule byte counters; OVS counts a packet on the rule before
its meter drops it, so the counters see the offered demand, not only what the meter let through.

Plain code: a rate in, a :class:`ElasticDecision` (grow / shrink / hold, with its reason) out; the
reservation manager sets the meter and records the provisioned bandwidth.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.update.model import FlowRule, Outcome

GROW, SHRINK, HOLD = "grow", "shrink", "hold"
HISTORY = 120  # rate samples kept per reservation (for GET /reservations)


class MeterSouthbound(Protocol):
    """What elastic reservations need from the southbound besides plans (LiveSouthbound, FakeNetwork)."""

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome: ...

    def remove_meter(self, switch: str, meter_id: int) -> Outcome: ...

    def flow_bytes(self, r: FlowRule) -> int | None: ...


@dataclass(frozen=True)
class ElasticDecision:
    action: str  # grow | shrink | hold
    reason: str
    rate_mbps: float
    before_mbps: float
    after_mbps: float

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason, "rate_mbps": round(self.rate_mbps, 3),
                "before_mbps": self.before_mbps, "after_mbps": self.after_mbps}


@dataclass
class ElasticState:
    """One elastic reservation: its grant, its unit, what is provisioned now and the recent rates."""

    grant_mbps: float
    unit_mbps: float
    grow_at: float = 0.9
    shrink_at: float = 0.5
    busy_intervals: int = 1
    calm_intervals: int = 3
    min_hold_s: float = 5.0
    provisioned_mbps: float = 0.0  # 0: one unit (set in __post_init__)
    changed_at: float = -math.inf
    busy: int = 0
    calm: int = 0
    history: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    last: dict[str, Any] | None = None  # the last decision (as_dict), for the API

    def __post_init__(self) -> None:
        for name in ("grant_mbps", "unit_mbps"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number of Mbit/s > 0, got {v!r}")
        if not 0 < self.shrink_at < self.grow_at <= 1:
            raise ValueError(f"hysteresis needs 0 < shrink_at < grow_at <= 1, got {self.shrink_at}, {self.grow_at}")
        if self.busy_intervals < 1 or self.calm_intervals < 1 or self.min_hold_s < 0:
            raise ValueError("busy_intervals, calm_intervals >= 1 and min_hold_s >= 0 are required")
        if self.provisioned_mbps <= 0:
            self.provisioned_mbps = self.floor_mbps
        self.provisioned_mbps = min(self.provisioned_mbps, self.grant_mbps)

    @property
    def floor_mbps(self) -> float:
        """One unit (or the whole grant when it is smaller than a unit)."""
        return min(self.unit_mbps, self.grant_mbps)

    def observe(self, rate_mbps: float, now: float) -> ElasticDecision:
        """One poll's measured rate: grow, shrink or hold (with why). Does not change ``provisioned_mbps``:
        :meth:`applied` does, once the meter took the new rate."""
        if rate_mbps < 0 or not math.isfinite(rate_mbps):
            raise ValueError(f"a measured rate must be a finite number >= 0, got {rate_mbps!r}")
        self.history.append((now, rate_mbps))
        p = self.provisioned_mbps

        def hold(why: str) -> ElasticDecision:
            return ElasticDecision(HOLD, why, rate_mbps, p, p)

        if rate_mbps >= self.grow_at * p:
            self.calm = 0
            self.busy += 1
            if p >= self.grant_mbps:
                return hold(f"at the grant: {rate_mbps:.2f} Mbit/s wants more, {self.grant_mbps:g} Mbit/s granted")
            if self.busy < self.busy_intervals:
                return hold(f"busy {self.busy}/{self.busy_intervals} polls")
            new = min(self.grant_mbps, p + self.unit_mbps)
            return ElasticDecision(GROW, f"demand {rate_mbps:.2f} Mbit/s >= {self.grow_at:g} x {p:g}: one unit more "
                                         f"(+{new - p:g} Mbit/s, grant {self.grant_mbps:g})", rate_mbps, p, new)
        self.busy = 0
        lower = max(self.floor_mbps, p - self.unit_mbps)
        if lower >= p or rate_mbps >= self.shrink_at * lower:
            self.calm = 0
            why = "at one unit" if lower >= p else f"{rate_mbps:.2f} Mbit/s fits {p:g} Mbit/s"
            return hold(why)
        self.calm += 1
        if self.calm < self.calm_intervals:
            return hold(f"calm {self.calm}/{self.calm_intervals} polls")
        if now - self.changed_at < self.min_hold_s:
            return hold(f"calm but held: changed {now - self.changed_at:.1f} s ago (hold {self.min_hold_s:g} s)")
        return ElasticDecision(SHRINK, f"calm for {self.calm} polls: {rate_mbps:.2f} Mbit/s < {self.shrink_at:g} x "
                                       f"{lower:g}: one unit less", rate_mbps, p, lower)

    def applied(self, d: ElasticDecision, now: float) -> None:
        """The meter now enforces ``d.after_mbps``."""
        if d.action == HOLD:
            return
        self.provisioned_mbps = min(d.after_mbps, self.grant_mbps)
        self.changed_at = now
        self.busy = self.calm = 0

    def to_json(self) -> dict[str, Any]:
        return {"grant_mbps": self.grant_mbps, "unit_mbps": self.unit_mbps, "provisioned_mbps": self.provisioned_mbps,
                "last": self.last, "rates": [[round(t, 3), round(r, 3)] for t, r in list(self.history)[-20:]]}


def rate_mbps(prev: tuple[float, int] | None, now: float, total_bytes: int) -> float | None:
    """Mbit/s between two byte-counter readings (None for the first; a counter that went back: 0)."""
    if prev is None:
        return None
    t0, b0 = prev
    return max(total_bytes - b0, 0) * 8 / 1e6 / max(now - t0, 1e-6)


def kbps(mbps: float) -> int:
    """An OpenFlow meter rate (kbit/s, an integer) for ``mbps``."""
    return max(int(round(mbps * 1000)), 1)
