"""Fine monitoring only on hot spots: which switches get sFlow (or per-flow stats), and when.

On a ``hot_spot`` event for a circuit, fine data is turned on for exactly the packet switches of
that circuit; on ``hot_spot_cleared`` it is turned off on the switches no other hot circuit
still needs (reference counted). Tracked offloaded elephants keep their switches on until
*elephant gone*. The manager only returns :class:`FineAction` values; the controller app executes
them (``OvsSflow.enable/disable`` or flow-stats polling) — Faucet's "return actions" style.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from monitor.events import ELEPHANT_GONE, HOT_SPOT, HOT_SPOT_CLEARED, UNCONSTRAINED_IMBALANCE, Event

ENABLE = "enable"
DISABLE = "disable"


@dataclass(frozen=True, order=True)
class FineAction:
    op: str  # enable | disable
    switch: str


class FineMonitorManager:
    """``circuit_switches(circuit)`` names the packet switches a circuit crosses (from the graph)."""

    def __init__(self, circuit_switches: Callable[[str], Iterable[str]]) -> None:
        self.circuit_switches = circuit_switches
        self._holders: dict[str, set[str]] = {}  # switch -> holders (circuits / "flow:<key>")

    @property
    def enabled(self) -> set[str]:
        return {s for s, h in self._holders.items() if h}

    def hold(self, holder: str, switches: Iterable[str]) -> list[FineAction]:
        """Keep fine data on ``switches`` for ``holder`` (e.g. per-flow statistics everywhere, the
        baseline of ``bench/monitor_detection.py``): enable actions for the switches newly on."""
        return self._hold(holder, switches)

    def _hold(self, holder: str, switches: Iterable[str]) -> list[FineAction]:
        out = []
        for sw in sorted(set(switches)):
            holders = self._holders.setdefault(sw, set())
            if not holders:
                out.append(FineAction(ENABLE, sw))
            holders.add(holder)
        return out

    def _release(self, holder: str) -> list[FineAction]:
        out = []
        for sw in sorted(self._holders):
            holders = self._holders[sw]
            if holder in holders:
                holders.discard(holder)
                if not holders:
                    out.append(FineAction(DISABLE, sw))
        return out

    def on_event(self, ev: Event) -> list[FineAction]:
        if ev.kind == HOT_SPOT:
            return self._hold(f"circuit:{ev.circuit}", self.circuit_switches(ev.circuit))
        if ev.kind == HOT_SPOT_CLEARED:
            return self._release(f"circuit:{ev.circuit}")
        if ev.kind == UNCONSTRAINED_IMBALANCE:  # keep watching the elephants until they are gone
            out: list[FineAction] = []
            for f in ev.flows:
                out += self._hold(f"flow:{f}", self.circuit_switches(ev.circuit))
            return out
        if ev.kind == ELEPHANT_GONE:
            out = []
            for f in ev.flows:
                out += self._release(f"flow:{f}")
            return out
        return []

    def move_flow(self, flow: str, switches: Iterable[str]) -> list[FineAction]:
        """An elephant was offloaded: watch it on its new path's switches instead."""
        holder = f"flow:{flow}"
        enable = self._hold(holder, switches)
        keep = set(switches)
        out = []
        for sw in sorted(self._holders):
            holders = self._holders[sw]
            if sw not in keep and holder in holders:
                holders.discard(holder)
                if not holders:
                    out.append(FineAction(DISABLE, sw))
        return enable + out
