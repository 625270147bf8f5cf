"""A plan's southbound that starts the verification probes when the plan first reads a counter.

A reservation is verified in the data plane: probe frames enter at its ingress ports while its
verify step watches the new rules' counters. The probes used to start with the plan, so they ran
through the XCONs' provisioning delay and the circuit coming up, before any rule of theirs existed,
and went wherever default forwarding sent those broadcast frames. On a 50-PoP WAN lab with 49
reservations starting together that was ~5,000 frames/s flooding 100 userspace bridges for seconds:
barrier replies came 2.6 s to over 5 s late and 41 of the 49 plans failed. Counters are read only
by the verify step (and a release's drain, which has no probes), so the first read is when the
probes are needed.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from app.update.model import FlowRule, GroupSpec, Outcome, Port, XconSpec
from app.update.southbound import Southbound


class ProbedSouthbound:
    """``sb`` for one plan; ``start()`` (called once, at the first counter read) starts the probes and
    returns their stop, which :meth:`stop` calls (if they were started)."""

    def __init__(self, sb: Southbound, start: Callable[[], Callable[[], None]]) -> None:
        self.sb = sb
        self._start = start
        self._stop: Callable[[], None] | None = None

    @property
    def probing(self) -> bool:
        return self._stop is not None

    def stop(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()

    def _probe(self) -> None:
        if self._stop is None:
            self._stop = self._start()

    def flow_packets(self, r: FlowRule) -> int | None:
        self._probe()
        return self.sb.flow_packets(r)

    def flow_packets_many(self, rules: Sequence[FlowRule]) -> list[int | None]:
        self._probe()
        return self.sb.flow_packets_many(rules)

    def flow_bytes(self, r: FlowRule) -> int | None:
        return self.sb.flow_bytes(r)

    def install_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        return self.sb.install_xcon(x, barrier)

    def remove_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        return self.sb.remove_xcon(x, barrier)

    def install_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self.sb.install_flow(r, barrier)

    def remove_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self.sb.remove_flow(r, barrier)

    def wait_ports_up(self, ports: Sequence[Port], stable_s: float, timeout_s: float) -> Outcome:
        return self.sb.wait_ports_up(ports, stable_s, timeout_s)

    def wait_link(self, a: Port, b: Port, timeout_s: float) -> Outcome:
        return self.sb.wait_link(a, b, timeout_s)

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome:
        return self.sb.set_meter(switch, meter_id, kbps)

    def remove_meter(self, switch: str, meter_id: int) -> Outcome:
        return self.sb.remove_meter(switch, meter_id)

    def set_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        return self.sb.set_group(g, barrier)

    def remove_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        return self.sb.remove_group(g, barrier)
