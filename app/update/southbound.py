"""What the executor drives: the network, seen as a few blocking calls.

The os-ken shim implements this on the eventlet hub (FLOW_MODs, barriers, PORT_STATUS, LLDP links,
FLOW_STATS); ``tests/lib/fake_network.py`` implements it over a simulated network. Keeping the
executor behind this protocol is what lets the ordering, roll-back and make-before-break logic be
tested without a switch.

Contract, for every method:

- it blocks until done or failed (a barrier reply, a port event, a timeout) and never raises for
  something the network did: a refusal or a timeout is an ``Outcome(ok=False, error=...)``;
- a failed ``Outcome`` means *nothing was applied*, unless ``detail["unknown"]`` is true
  (``Outcome.timed_out``): no barrier reply came, so the message may still be applied and a
  roll-back removes it;
- ``barrier=False`` sends the message and returns at once (one-shot mode): ``ok`` then only says
  it was sent;
- removals are exact: ``remove_xcon`` deletes that XCON only if its ports are joined to each other
  (OF1.0 DELETE_STRICT on ``in_port`` filtered by ``out_port``), ``remove_flow`` deletes that rule only
  (DELETE_STRICT with its cookie and a full cookie mask); removing what is not there is a success.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from app.update.model import FlowRule, GroupSpec, Outcome, Port, XconSpec


@runtime_checkable
class Southbound(Protocol):
    def install_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        """Add both directions of ``x``; with ``barrier``, return once the OTS has applied them
        (after its provisioning delay)."""
        ...

    def remove_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        """Delete both directions of ``x`` (only if the OTS joins exactly these ports)."""
        ...

    def install_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        """Add ``r``, overwriting a rule with the same key; with ``barrier``, return on the BARRIER_REPLY."""
        ...

    def remove_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        """Strictly delete exactly ``r`` (its key and cookie)."""
        ...

    def wait_ports_up(self, ports: Sequence[Port], stable_s: float, timeout_s: float) -> Outcome:
        """Return once every packet port is up and has not changed state for ``stable_s``."""
        ...

    def wait_link(self, a: Port, b: Port, timeout_s: float) -> Outcome:
        """Return once LLDP has seen the packet link ``a``–``b`` (either direction)."""
        ...

    def flow_packets(self, r: FlowRule) -> int | None:
        """The packet counter of the rule with ``r``'s key now; None if the switch has no such rule."""
        ...

    def flow_packets_many(self, rules: Sequence[FlowRule]) -> list[int | None]:
        """:meth:`flow_packets` of each of ``rules``, read together (a verify or drain step reads every
        rule of a path each poll: one round trip for all, not one per rule)."""
        ...

    def flow_bytes(self, r: FlowRule) -> int | None:
        """The byte counter of the rule with ``r``'s key now (an elastic reservation's measured demand);
        None if the switch has no such rule."""
        ...

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome:
        """Make ``meter_id`` on ``switch`` a drop meter of ``kbps`` kbit/s (added the first time, modified
        after), returning on the BARRIER_REPLY; the rules that name it are then held to that rate."""
        ...

    def remove_meter(self, switch: str, meter_id: int) -> Outcome:
        """Delete ``meter_id`` on ``switch`` (after the rules that used it are gone)."""
        ...

    def set_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        """Make ``g`` a fast-failover group on its switch (added the first time, modified after); with
        ``barrier``, return on the BARRIER_REPLY. Rules that name it need it first."""
        ...

    def remove_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        """Delete group ``g.group_id`` on ``g.switch`` (after the rules that use it); absent is a success."""
        ...
