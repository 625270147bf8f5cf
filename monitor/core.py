"""The monitor's plain core: circuits, coarse counters → events → fine-monitoring actions.

The os-ken shim (``app/controller/monitor_app.py``) feeds it port/queue statistics as they
arrive and calls :meth:`MonitorCore.tick` once per interval Ts with ``now``; the core returns
what happened (samples, events, fine actions) and the shim executes the actions. No os-ken here.

A *circuit* is a packet-layer link (``kind == "packet"`` in the multi-layer graph, e.g. the
A:3–B:1 link over the A↔X↔Y↔B optical path) with a provisioned capacity; it is monitored at the
egress ports of its two ends. Utilization = the larger end's smoothed rate / capacity; drops =
the drops counted at both ends during the interval.

A circuit's first interval (it just appeared, e.g. after a re-route) is not classified for drops:
its ports were dark during part of that interval and the switch counted what it could not send
there as ``tx_dropped`` (measured: 3 drops on A:3–C:1 right after re-routing to the bypass at Y,
a false hot spot). The drops are still reported in the tick's circuit values.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.counters import CounterTracker, PointSample, PortSnapshot
from monitor.events import (
    HOT_SPOT,
    HOT_SPOT_CLEARED,
    UNCONSTRAINED_IMBALANCE,
    Event,
    EventClassifier,
    Thresholds,
)
from monitor.fine import FineAction, FineMonitorManager
from monitor.sflow.estimator import FlowRate


@dataclass(frozen=True)
class WatchedLink:
    """A packet link the monitor classifies (a lit circuit or copper; the monitor calls both
    "circuits", after the paper): its id, its two egress ends and its capacity."""

    id: str
    ends: tuple[tuple[str, int], ...]  # (switch, egress port) at each end
    capacity_mbps: float

    @property
    def switches(self) -> tuple[str, ...]:
        return tuple(sorted({s for s, _ in self.ends}))


def circuits_from_graph(graph: Any) -> list[WatchedLink]:
    """Packet links of a ``MultiLayerGraph`` with their capacity.

    A link discovered by LLDP over a circuit may carry capacity 0 when its adaptations came from
    the static vendor file rather than the scan; its capacity is then the narrowest adaptation
    (optical container) at its ports. Links with no known capacity are not monitored.
    """
    adapt: dict[tuple[str, int], float] = {}
    for _u, _v, _k, d in graph.g.edges(keys=True, data=True):
        if d.get("kind") == "adaptation" and d.get("capacity"):
            for n, p in (d.get("ports") or {}).items():
                if p is not None:
                    adapt[(str(n), int(p))] = float(d["capacity"])
    out = []
    for _u, _v, key, d in graph.g.edges(keys=True, data=True):
        if d.get("kind") != "packet":
            continue
        ends = tuple(sorted((str(n), int(p)) for n, p in (d.get("ports") or {}).items()))
        cap = float(d.get("capacity") or 0.0)
        if not cap:
            caps = [adapt[e] for e in ends if e in adapt]
            cap = min(caps) if caps else 0.0
        if ends and cap > 0:
            out.append(WatchedLink(str(key), ends, cap))
    return sorted(out, key=lambda c: c.id)


class FineSource(Protocol):
    def flow_rates(self, now: float | None = None, agents: set[str] | None = None) -> list[FlowRate]: ...


@dataclass
class TickResult:
    circuits: dict[str, dict[str, float]] = field(default_factory=dict)  # id -> {util, drops, mbps}
    events: list[Event] = field(default_factory=list)
    actions: list[FineAction] = field(default_factory=list)
    samples: list[PointSample] = field(default_factory=list)


def point_id(switch: str, port: int) -> str:
    return f"{switch}:{port}"


class MonitorCore:
    def __init__(self, monitor_cfg: Mapping[str, Any], fine: FineSource | None = None,
                 agents: Mapping[str, str] | None = None) -> None:
        """``agents`` maps switch name → sFlow agent address (to read only a circuit's switches)."""
        self.cfg = dict(monitor_cfg)
        self.tracker = CounterTracker(float(self.cfg.get("ewma_alpha", 0.3)))
        self.classifier = EventClassifier(Thresholds.from_config(self.cfg))
        self.fine = fine
        self.agents = dict(agents or {})
        self.circuits: dict[str, WatchedLink] = {}
        self.manager = FineMonitorManager(lambda cid: self.circuits[cid].switches if cid in self.circuits else ())
        self._pending: dict[str, PointSample] = {}
        self._settled: set[str] = set()  # circuits classified at least once since they appeared
        # hot by drops, elephants not named yet: util, drops, since when (early() names them from fine data);
        # kept across ticks for fine_early_span s (default 1.5 Ts: a hot spot found by a tick keeps its windows
        # past the next one) after the hot spot, until named
        self._fresh: dict[str, tuple[float, int, float]] = {}
        self.early_span = float(self.cfg.get("fine_early_span") or 1.5 * float(self.cfg.get("interval", 1.0)))
        self._gone: list[str] = []  # hot circuits that left the graph, cleared at the next tick
        self._util: dict[str, float] = {}  # each circuit's smoothed utilization at the last tick
        self._watched: dict[str, int] = {}  # point -> queue drops at the last drop-watch reading

    def set_circuits(self, circuits: Iterable[WatchedLink]) -> None:
        """The circuits as the graph has them now. One that left the graph while hot (e.g. an offload
        circuit the TE loop released while its elephant still filled it) is never observed calm again,
        so it is cleared here: a ``hot_spot_cleared`` (reason "circuit removed") and the fine-data
        releases come out of the next :meth:`tick`. Without it fine monitoring stayed on for good."""
        new = {c.id: c for c in circuits}
        for cid in sorted(set(self.circuits) - set(new)):
            if self.classifier.forget(cid):
                self._gone.append(cid)
            self._fresh.pop(cid, None)
        self.circuits = new
        self._settled &= set(self.circuits)  # a circuit that comes back settles again
        for c in self.circuits.values():
            for sw, port in c.ends:
                self.tracker.set_capacity(point_id(sw, port), c.capacity_mbps)

    def port_stats(self, now: float, switch: str, port: int, snap: PortSnapshot) -> PointSample | None:
        s = self.tracker.update(point_id(switch, port), now, snap)
        if s is not None:
            self._pending[s.point] = s
        return s

    def _flows(self, circuit: WatchedLink, now: float) -> list[FlowRate] | None:
        if self.fine is None:
            return None
        agents = {self.agents[s] for s in circuit.switches if s in self.agents} or None
        return self.fine.flow_rates(now, agents)

    def tick(self, now: float) -> TickResult:
        res = TickResult(samples=list(self._pending.values()))
        for cid in self._gone:  # hot circuits that left the graph since the last tick
            ev = Event(now, cid, HOT_SPOT_CLEARED, detail={"reason": "circuit removed"})
            res.events.append(ev)
            res.actions += self.manager.on_event(ev)
        self._gone = []
        kept = {cid: v for cid, v in self._fresh.items() if now - v[2] < self.early_span}
        self._fresh = {}  # early() is only for the first fine_early_span s after the hot spot
        for c in self.circuits.values():
            ends = [self._pending.get(point_id(s, p)) for s, p in c.ends]
            ends = [e for e in ends if e is not None]
            if not ends:
                continue
            util = max((e.smoothed_util or 0.0) for e in ends)
            drops = sum(e.drops for e in ends)
            mbps = max(e.smoothed_mbps for e in ends)
            res.circuits[c.id] = {"util": util, "drops": drops, "mbps": mbps}
            self._util[c.id] = util
            if c.id not in self._settled:  # first interval: drops from while its ports were dark
                self._settled.add(c.id)
                drops = 0
            # fine data is read for hot circuits; with fine data everywhere (the per-flow polling
            # baseline) it is there already, so the hot-spot interval itself can name the elephant
            read = self.classifier.is_hot(c.id) or bool(self.cfg.get("fine_everywhere"))
            flows = self._flows(c, now) if read else None
            evs = self.classifier.observe(c.id, now, util, drops, c.capacity_mbps, flows)
            for ev in evs:
                res.actions += self.manager.on_event(ev)
                if ev.kind == HOT_SPOT and drops > 0:
                    self._fresh[c.id] = (util, drops, now)
            res.events += evs
        named = {ev.circuit for ev in res.events if ev.kind == UNCONSTRAINED_IMBALANCE}
        for cid, v in kept.items():  # not named yet, and still hot: the early windows go on
            if cid not in self._fresh and cid not in named and self.classifier.is_hot(cid):
                self._fresh[cid] = v
        if self.classifier.tracked and self.fine is not None:
            gone = self.classifier.observe_flows(now, self.fine.flow_rates(now))
            for ev in gone:
                res.actions += self.manager.on_event(ev)
            res.events += gone
        self._pending.clear()
        return res

    def watched_points(self) -> list[tuple[str, int]]:
        """The egress ends (switch, port) the drop watch reads: every settled circuit's."""
        return sorted({end for cid, c in self.circuits.items() if cid in self._settled for end in c.ends})

    def watch_drops(self, now: float, drops: Mapping[tuple[str, int], int]) -> TickResult:
        """A drop-watch reading between ticks (``[monitor] drop_watch_interval``): the cumulative queue
        drops of some watched ends. A rise since the last reading on a circuit that is not hot makes it
        hot *now* — with the last tick's smoothed utilization — so its fine data starts and its early
        windows run, instead of waiting for the next tick (up to one Ts). Only hot spots come from here:
        calm, clearing and growth stay with :meth:`tick` (a reading never counts as a calm interval);
        a circuit in its first interval is not judged (its drops may be from while it was dark)."""
        res = TickResult()
        rise: dict[str, int] = {}
        for (sw, port), total in sorted(drops.items()):
            point = point_id(sw, port)
            before = self._watched.get(point)
            self._watched[point] = total
            if before is None or total <= before:
                continue
            for c in self.circuits.values():
                if (sw, port) in c.ends and c.id in self._settled:
                    rise[c.id] = rise.get(c.id, 0) + total - before
        for cid, n in sorted(rise.items()):
            c = self.circuits[cid]
            if self.classifier.is_hot(cid):
                continue
            util = self._util.get(cid, 0.0)
            for ev in self.classifier.observe(cid, now, util, n, c.capacity_mbps, None):
                res.actions += self.manager.on_event(ev)
                if ev.kind == HOT_SPOT:
                    self._fresh[cid] = (util, n, now)
                    ev.detail["by"] = "drop watch"
                res.events.append(ev)
        return res

    @property
    def fresh(self) -> set[str]:
        """Circuits hot by drops whose elephants are not named yet, for fine_early_span s after the hot
        spot (their fine data just started)."""
        return set(self._fresh)

    def fresh_since(self) -> float | None:
        """When the youngest of :attr:`fresh` became hot (None: none is)."""
        return max((v[2] for v in self._fresh.values()), default=None)

    def switches(self, circuit: str) -> tuple[str, ...]:
        """The switches at the ends of ``circuit`` (none if it is not watched)."""
        c = self.circuits.get(circuit)
        return c.switches if c is not None else ()

    def fresh_switches(self) -> list[str]:
        """The switches of the circuits in :attr:`fresh` (where an early window reads fine data)."""
        return sorted({s for cid in self._fresh if cid in self.circuits for s in self.circuits[cid].switches})

    def early(self, now: float) -> TickResult:
        """Name elephants on the circuits that just became hot from their first fine data, before
        the next interval: the shim calls this ``fine_first_window`` after the hot spot and then
        every ``fine_early_step`` s while :attr:`fresh` is not empty (named, or ``fine_early_span``
        s after the hot spot: the tick drops it; a tick does not, before that — a hot spot found late
        in an interval keeps its early windows after the next poll). The
        coarse sign is the hot-spot interval's (drops, smoothed utilization); the classifier's
        confidence rule (``elephant_confidence_z``) keeps the fewer samples from naming false
        elephants. A circuit left unnamed here is classified again at the next tick as before."""
        res = TickResult()
        for cid, (util, drops, _since) in sorted(self._fresh.items()):
            c = self.circuits.get(cid)
            if c is None:
                del self._fresh[cid]
                continue
            flows = self._flows(c, now)
            if not flows:
                continue
            evs = self.classifier.name_elephants(cid, now, util, drops, c.capacity_mbps, flows)
            if evs:  # named: done; otherwise look again (more samples) until the next tick
                del self._fresh[cid]
            for ev in evs:
                res.actions += self.manager.on_event(ev)
            res.events += evs
        return res
