"""Event classifier for circuits: hot spots, balanced growth, unconstrained imbalance, elephant gone.

Fed once per interval per circuit with the coarse sample (smoothed utilization, drops in the
interval) and, while the circuit is hot, the fine per-flow rates. Thresholds (``[monitor]``):

* **hot spot** — drops in the interval, or smoothed utilization > ``growth_threshold``. Fine
  monitoring is turned on for the circuit's switches (:mod:`monitor.fine`). Cleared after
  ``clear_intervals`` calm intervals (no drops and below the threshold).
* **balanced demand growth** — smoothed utilization > ``growth_threshold`` (0.70) and no flow
  carries more than ``dominant_share`` (0.5) of the circuit's sampled traffic.
* **unconstrained imbalance** — drops while smoothed utilization < ``imbalance_util_max``
  (0.60), and fine data shows elephants (rate > ``elephant_fraction`` (0.10) × capacity) sharing
  the circuit with at least ``min_small_flows`` (2) other flows. The event names the elephants.
  A sampled rate from n samples has a relative standard error of about 1/√n, so a flow counts as an
  elephant only if its rate's lower confidence bound, rate·(1 − z/√n) with z =
  ``elephant_confidence_z`` (1.96, ~95%), is above the threshold (rates without a sample count,
  e.g. from sFlow-RT, are taken as exact). Measured: at 1-in-16 sampling, 10 flows of 0.6 Mbit/s
  gave 1-s estimates up to 1.47 Mbit/s (11 samples) — "elephants" without this bound.
* **elephant gone** — a flow reported as an elephant stayed below the elephant rate of the
  circuit it was found on for ``elephant_gone_intervals`` (3) consecutive intervals.

Each event fires once per episode (again only if the elephant set changes or after clearing).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from topology.flow import FiveTuple

HOT_SPOT = "hot_spot"
HOT_SPOT_CLEARED = "hot_spot_cleared"
BALANCED_GROWTH = "balanced_growth"
UNCONSTRAINED_IMBALANCE = "unconstrained_imbalance"
ELEPHANT_GONE = "elephant_gone"


class FlowLike(Protocol):
    key: FiveTuple

    @property
    def mbps(self) -> float: ...


def lower_bound(flow: FlowLike, z: float) -> float:
    """``mbps·(1 − z/√samples)`` when the flow carries a sample count, else ``mbps``."""
    n = getattr(flow, "samples", 0) or 0
    return flow.mbps * max(0.0, 1 - z / n**0.5) if n > 0 else flow.mbps


@dataclass(frozen=True)
class Thresholds:
    growth_threshold: float = 0.70
    imbalance_util_max: float = 0.60
    elephant_fraction: float = 0.10
    elephant_gone_intervals: int = 3
    dominant_share: float = 0.5
    min_small_flows: int = 2
    clear_intervals: int = 3
    elephant_confidence_z: float = 1.96

    @classmethod
    def from_config(cls, monitor_cfg: Mapping[str, Any]) -> Thresholds:
        return cls(**{k: monitor_cfg[k] for k in cls.__dataclass_fields__ if k in monitor_cfg})


@dataclass(frozen=True)
class Event:
    """What the classifier found; ``flows`` are the elephants for imbalance / elephant gone."""

    t: float
    circuit: str
    kind: str
    flows: tuple[FiveTuple, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"t": self.t, "circuit": self.circuit, "kind": self.kind,
                "flows": [f.as_dict() for f in self.flows], "detail": self.detail}


@dataclass
class _Circuit:
    hot: bool = False
    calm: int = 0
    growth_reported: bool = False
    elephants_reported: frozenset[FiveTuple] = frozenset()


@dataclass
class _Tracked:
    circuit: str
    threshold_mbps: float
    below: int = 0


class EventClassifier:
    """Per-circuit state machine; plain code, time passed in as ``now``."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.th = thresholds or Thresholds()
        self._circuits: dict[str, _Circuit] = {}
        self.tracked: dict[FiveTuple, _Tracked] = {}

    def is_hot(self, circuit: str) -> bool:
        c = self._circuits.get(circuit)
        return bool(c and c.hot)

    def forget(self, circuit: str) -> bool:
        """``circuit`` left the graph: drop its state (one of that name lit later starts a new episode).
        True if it was hot, i.e. its hot spot must be cleared by the caller."""
        st = self._circuits.pop(circuit, None)
        return bool(st and st.hot)

    def observe(self, circuit: str, now: float, util: float, drops: int, capacity_mbps: float,
                flows: Sequence[FlowLike] | None = None) -> list[Event]:
        """One interval of ``circuit``: smoothed utilization, drops counted, fine flows (None = no fine data)."""
        th, st = self.th, self._circuits.setdefault(circuit, _Circuit())
        events: list[Event] = []
        busy = util > th.growth_threshold
        if drops > 0 or busy:
            st.calm = 0
            if not st.hot:
                st.hot = True
                events.append(Event(now, circuit, HOT_SPOT, detail={"util": round(util, 4), "drops": drops}))
        elif st.hot:
            st.calm += 1
            if st.calm >= th.clear_intervals:
                self._circuits[circuit] = _Circuit()
                events.append(Event(now, circuit, HOT_SPOT_CLEARED, detail={"util": round(util, 4)}))
                return events
        if not st.hot or flows is None:
            return events
        return events + self._classify_flows(circuit, st, now, util, drops, busy, capacity_mbps, flows)

    def name_elephants(self, circuit: str, now: float, util: float, drops: int, capacity_mbps: float,
                       flows: Sequence[FlowLike]) -> list[Event]:
        """Early look at a hot circuit's first fine data (shorter than an interval), with the coarse
        sign (``util``, ``drops``) of the interval that made it hot: only *unconstrained imbalance*
        can fire; the hot/calm state is not touched (that stays with :meth:`observe`)."""
        st = self._circuits.get(circuit)
        if st is None or not st.hot or drops <= 0:
            return []
        return self._classify_flows(circuit, st, now, util, drops, False, capacity_mbps, flows)

    def _classify_flows(self, circuit: str, st: _Circuit, now: float, util: float, drops: int, busy: bool,
                        capacity_mbps: float, flows: Sequence[FlowLike]) -> list[Event]:
        th = self.th
        events: list[Event] = []
        limit = th.elephant_fraction * capacity_mbps
        z = th.elephant_confidence_z
        elephants = sorted((f for f in flows if lower_bound(f, z) > limit), key=lambda f: (-f.mbps, f.key))
        small = [f for f in flows if lower_bound(f, z) <= limit]
        total = sum(f.mbps for f in flows)
        if drops > 0 and util < th.imbalance_util_max and elephants and len(small) >= th.min_small_flows:
            keys = frozenset(f.key for f in elephants)
            if keys != st.elephants_reported:
                st.elephants_reported = keys
                for f in elephants:
                    self.tracked[f.key] = _Tracked(circuit, limit)
                events.append(Event(now, circuit, UNCONSTRAINED_IMBALANCE, tuple(f.key for f in elephants), {
                    "util": round(util, 4), "drops": drops, "small_flows": len(small),
                    "elephant_mbps": [round(f.mbps, 3) for f in elephants], "threshold_mbps": round(limit, 3)}))
        elif busy and not st.growth_reported and flows:
            top = max(f.mbps for f in flows)
            if total > 0 and top <= th.dominant_share * total:
                st.growth_reported = True
                events.append(Event(now, circuit, BALANCED_GROWTH, detail={
                    "util": round(util, 4), "flows": len(flows), "top_share": round(top / total, 4)}))
        return events

    def track(self, key: FiveTuple, circuit: str, threshold_mbps: float) -> None:
        """Watch an (e.g. offloaded) flow for *elephant gone*."""
        self.tracked[key] = _Tracked(circuit, threshold_mbps)

    def observe_flows(self, now: float, rates: Mapping[FiveTuple, float] | Iterable[FlowLike]) -> list[Event]:
        """One interval of fine data for tracked elephants; a tracked flow not in ``rates`` counts as 0."""
        if not isinstance(rates, Mapping):
            rates = {f.key: f.mbps for f in rates}
        events = []
        for key, tr in list(self.tracked.items()):
            rate = rates.get(key, 0.0)
            tr.below = tr.below + 1 if rate < tr.threshold_mbps else 0
            if tr.below >= self.th.elephant_gone_intervals:
                del self.tracked[key]
                events.append(Event(now, tr.circuit, ELEPHANT_GONE, (key,), {
                    "last_mbps": round(rate, 3), "threshold_mbps": round(tr.threshold_mbps, 3)}))
        return events
