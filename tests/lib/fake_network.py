"""A small simulated multi-layer network that implements ``app.update.southbound.Southbound``.

Packet switches with flow tables (priority match on OXM fields, per-rule packet counters), OTS
nodes with XCON tables and a provisioning delay, copper links, adaptations (packet port ↔ OTS port)
and fibres. Light follows the lab's model: a packet port adapted to an OTS port is up only while a
chain of applied XCONs and fibres joins it to another adapted port, so a circuit's ports come up
when its last XCON is applied and go down when any of its XCONs is removed.

Every message is applied by one scheduler thread after the node's latency (plus the provisioning
delay for an XCON add; plus the datapath lag after the barrier reply for a flow), per node in FIFO
order, so with different latencies one-shot messages land in an order of their own. After every
applied change the observers run (under the network lock, on a consistent state): that is how the
make-before-break test checks delivery after each single change.

Failure injection: ``refuse_xcon``/``refuse_flow`` (the node answers an error), ``drop_barriers``
(the message is applied but the barrier never answers), ``flap``/``break_port``, ``freeze_counters``,
``set_latency`` (and jitter), ``set_xcon_delay``, ``set_dataplane_lag``. Delays are real time and
small (milliseconds) so tests stay fast. Faucet's ``clib/fakeoftable.py`` inspired the idea of asking
a simulated table "where would this packet go?"; this is its own, much smaller, code.
"""
from __future__ import annotations

import heapq
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.update.model import FlowRule, GroupSpec, IngressChange, Outcome, Port, XconSpec, field_matches

OPort = tuple[str, int]  # (OTS name, OTS port)
Hop = tuple[str, int, int | None]  # (node, in_port, out_port); a host's hop is (host, 0, None)
TraceResult = list[Hop] | str  # hops, "blackhole" or "loop"
BLACKHOLE, LOOP = "blackhole", "loop"
MAX_HOPS = 64


@dataclass
class Change:
    """One applied change: what happened on which node, and the packet ports it turned up or down."""

    t: float
    node: str
    what: str
    ports: list[tuple[Port, bool]] = field(default_factory=list)


@dataclass
class Message:
    """One message the fake received: when it was sent and (once applied) when it took effect."""

    t: float
    node: str
    op: str  # xcon_add, xcon_remove, flow_add, flow_remove
    target: str
    barrier: bool
    applied_at: float | None = None
    error: str = ""


class _Pending:
    """The barrier side of one message: set when the node has applied (or refused) it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.error = ""
        self.at: float | None = None


@dataclass
class Host:
    name: str
    switch: str
    port: int
    mac: str
    ip: str


class FakeNetwork:
    """The simulated network (thread-safe; ``close()`` stops its scheduler)."""

    def __init__(self, *, xcon_delay_s: float = 0.02, barrier_timeout_s: float = 0.2,
                 lldp_delay_s: float = 0.002, seed: int = 0) -> None:
        self.xcon_delay_s = xcon_delay_s
        self.barrier_timeout_s = barrier_timeout_s
        self.lldp_delay_s = lldp_delay_s
        self.rng = random.Random(seed)
        self.switches: set[str] = set()
        self.ots: dict[str, set[int]] = {}
        self.hosts: dict[str, Host] = {}
        self.host_at: dict[Port, str] = {}
        self.copper: dict[Port, Port] = {}
        self.adapt: dict[Port, OPort] = {}
        self.adapt_rev: dict[OPort, Port] = {}
        self.fibre: dict[OPort, OPort] = {}
        # state
        self.tables: dict[str, dict[tuple, FlowRule]] = {}
        self.counters: dict[str, dict[tuple, int]] = {}
        self.byte_counters: dict[str, dict[tuple, int]] = {}  # a packet's "size" key (bytes), 0 if absent
        self.meters: dict[str, dict[int, float]] = {}  # switch -> meter id -> rate (kbit/s)
        self.groups: dict[str, dict[int, tuple[int, ...]]] = {}  # switch -> fast-failover group -> its ports
        self._installed_seq: dict[tuple, int] = {}
        self.xcon: dict[str, dict[int, int]] = {}
        self.port_state: dict[Port, tuple[bool, float]] = {}
        self.forced_down: set[Port] = set()
        self.cut: set[OPort] = set()  # OTS ports of cut fibres: no light crosses them
        # failure injection
        self._refuse_xcon: dict[str, tuple[frozenset[int] | None, str]] = {}
        self._refuse_flow: dict[str, str] = {}
        self._drop_barriers: dict[str, int | None] = {}  # node -> barriers left to drop (None: all)
        self._latency: dict[str, tuple[float, float]] = {}
        self._xcon_delay: dict[str, float] = {}
        self._lag: dict[str, float] = {}
        self._frozen: set[str] = set()
        # observation
        self.changes: list[Change] = []
        self.messages: list[Message] = []
        self.errors: list[str] = []  # asynchronous errors of messages sent without a barrier
        self.observer_errors: list[BaseException] = []
        self._observers: list[Callable[[FakeNetwork, Change], None]] = []
        # scheduler
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._last_due: dict[str, float] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="fake-network", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ building
    def add_switch(self, name: str) -> None:
        self.switches.add(name)
        self.tables.setdefault(name, {})
        self.counters.setdefault(name, {})
        self.byte_counters.setdefault(name, {})

    def add_ots(self, name: str, ports: Iterable[int]) -> None:
        self.ots[name] = set(ports)
        self.xcon.setdefault(name, {})

    def add_host(self, name: str, switch: str, port: int, mac: str, ip: str) -> None:
        self.hosts[name] = Host(name, switch, port, mac.lower(), ip)
        self.host_at[switch, port] = name
        self._recompute_ports(time.time())

    def add_link(self, a: Port, b: Port) -> None:
        """A copper packet link (always lit)."""
        self.copper[a], self.copper[b] = b, a
        self._recompute_ports(time.time())

    def add_adaptation(self, port: Port, oport: OPort) -> None:
        self.adapt[port], self.adapt_rev[oport] = oport, port
        self._recompute_ports(time.time())

    def add_fibre(self, a: OPort, b: OPort) -> None:
        self.fibre[a], self.fibre[b] = b, a

    @classmethod
    def from_spec(cls, spec: Any, **kw: Any) -> FakeNetwork:
        """A network wired like a ``topology.spec.LabSpec`` (one source of truth for topologies)."""
        net = cls(**kw)
        for s in spec.switches:
            net.add_switch(s.name)
        for o in spec.ots:
            net.add_ots(o.name, o.ports)
        for h in spec.hosts:
            net.add_host(h.name, h.switch, h.port, h.mac, h.ip)
        for link in spec.links:
            if link.kind == "packet":
                net.add_link((link.a, link.a_port), (link.b, link.b_port))
            elif link.kind == "adaptation":
                net.add_adaptation((link.a, link.a_port), (link.b, link.b_port))
            elif link.kind == "optical":
                net.add_fibre((link.a, link.a_port), (link.b, link.b_port))
        net._recompute_ports(time.time() - 10.0, force=True)
        return net

    def preload(self, xcons: Iterable[XconSpec] = (), rules: Iterable[FlowRule] = ()) -> None:
        """Put XCONs and rules in place at once (the state before a test), ports long stable."""
        with self._lock:
            for x in xcons:
                self.xcon[x.ots][x.in_port], self.xcon[x.ots][x.out_port] = x.out_port, x.in_port
            for r in rules:
                self._put_rule(r)
            self._recompute_ports(time.time() - 10.0, force=True)

    def close(self) -> None:
        """Stop the scheduler; an observer that raised fails the test here, loudly."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=2)
        if self.observer_errors:
            raise AssertionError(f"an observer raised: {self.observer_errors[0]!r}") from self.observer_errors[0]

    # ------------------------------------------------------------------ failure injection
    def refuse_xcon(self, ots: str, ports: Iterable[int] | None = None, error: str = "OFPBAC_BAD_OUT_PORT") -> None:
        """``ots`` answers ``error`` to XCON adds (on ``ports`` only, if given)."""
        self._refuse_xcon[ots] = (None if ports is None else frozenset(ports), error)

    def refuse_flow(self, switch: str, error: str = "OFPFMFC_TABLE_FULL") -> None:
        self._refuse_flow[switch] = error

    def drop_barriers(self, node: str, count: int | None = None) -> None:
        """``node`` applies what it gets but answers no barrier (only the next ``count`` ones, if given)."""
        self._drop_barriers[node] = count

    def set_latency(self, node: str, seconds: float, jitter_s: float = 0.0) -> None:
        self._latency[node] = (seconds, jitter_s)

    def set_xcon_delay(self, ots: str, seconds: float) -> None:
        self._xcon_delay[ots] = seconds

    def set_dataplane_lag(self, switch: str, seconds: float) -> None:
        """The datapath uses a rule ``seconds`` after its barrier reply."""
        self._lag[switch] = seconds

    def freeze_counters(self, switch: str) -> None:
        """Packets still flow through ``switch`` but its rule counters never rise."""
        self._frozen.add(switch)

    def break_port(self, port: Port) -> None:
        with self._lock:
            self.forced_down.add(port)
            self._changed(port[0], f"port {port[0]}:{port[1]} broken")

    def cut_fibre(self, a: OPort, repair: bool = False) -> None:
        """Cut (or repair) the fibre at OTS port ``a``: circuits across it go dark at both ends."""
        ends = {a, self.fibre[a]}
        with self._lock:
            self.cut = self.cut - ends if repair else self.cut | ends
            self._changed(a[0], f"fibre {a[0]}:{a[1]} {'repaired' if repair else 'cut'}")

    def flap(self, port: Port, times: int = 4, period_s: float = 0.01) -> None:
        """Toggle ``port`` down/up ``times`` times (even: ends as it began), one toggle per period."""
        def toggle() -> None:
            if port in self.forced_down:
                self.forced_down.discard(port)
            else:
                self.forced_down.add(port)
            self._changed(port[0], f"port {port[0]}:{port[1]} flap")
        now = time.time()
        with self._cond:
            for k in range(times):
                self._push(now + (k + 1) * period_s, toggle)

    # ------------------------------------------------------------------ observation
    def observe(self, fn: Callable[[FakeNetwork, Change], None]) -> None:
        """Call ``fn(net, change)`` after every applied change (under the lock: the state is consistent)."""
        with self._lock:
            self._observers.append(fn)

    def flows(self, switch: str) -> list[FlowRule]:
        with self._lock:
            return list(self.tables[switch].values())

    def all_flows(self) -> list[FlowRule]:
        with self._lock:
            return [r for t in self.tables.values() for r in t.values()]

    def xcons(self, ots: str) -> set[XconSpec]:
        """The applied XCONs of ``ots`` (each once, lower port first)."""
        with self._lock:
            return {XconSpec(ots, a, b) for a, b in self.xcon[ots].items() if a < b}

    def all_xcons(self) -> set[XconSpec]:
        return set().union(*(self.xcons(o) for o in self.ots))

    def port_up(self, port: Port) -> bool:
        with self._lock:
            return self.port_state.get(port, (False, 0.0))[0]

    def output_for(self, switch: str, packet: dict[str, Any]) -> int | None:
        """The port the datapath of ``switch`` sends ``packet`` (with its ``in_port``) to; None: no rule."""
        with self._lock:
            rule = self._lookup(switch, packet)
            return None if rule is None else self._out_port(rule)

    def trace(self, start: str | Port, packet: dict[str, Any]) -> TraceResult:
        """Walk ``packet`` from a host (name) or a switch port across switches, links and lit circuits."""
        with self._lock:
            return self._walk(start, packet, count=False)

    def send(self, start: str | Port, packet: dict[str, Any]) -> TraceResult:
        """As :meth:`trace`, and every rule the packet matched counts it (unless counters are frozen)."""
        with self._lock:
            return self._walk(start, packet, count=True)

    def delivered_to(self, start: str | Port, packet: dict[str, Any]) -> str | None:
        """The host a packet reaches, or None (black hole, loop)."""
        t = self.trace(start, packet)
        return None if isinstance(t, str) else t[-1][0]

    # ------------------------------------------------------------------ Southbound
    def install_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        delay = self._xcon_delay.get(x.ots, self.xcon_delay_s)
        return self._message(x.ots, "xcon_add", x.target(), barrier, delay, lambda: self._xcon_check(x),
                             lambda: self._xcon_add(x))

    def remove_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        return self._message(x.ots, "xcon_remove", x.target(), barrier, 0.0, lambda: self._ots_check(x.ots),
                             lambda: self._xcon_remove(x))

    def install_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self._message(r.switch, "flow_add", r.target(), barrier, 0.0, lambda: self._flow_check(r, True),
                             lambda: self._flow_add(r), lag=self._lag.get(r.switch, 0.0))

    def remove_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self._message(r.switch, "flow_remove", r.target(), barrier, 0.0,
                             lambda: self._flow_check(r, False), lambda: self._flow_remove(r),
                             lag=self._lag.get(r.switch, 0.0))

    def wait_ports_up(self, ports: Sequence[Port], stable_s: float, timeout_s: float) -> Outcome:
        unknown = [p for p in ports if p not in self.port_state]
        if unknown:
            return Outcome.refused(f"unknown packet ports {unknown}")
        deadline = time.time() + timeout_s
        with self._cond:
            while True:
                now = time.time()
                states = [self.port_state[p] for p in ports]
                down = [p for p, (up, _) in zip(ports, states, strict=True) if not up]
                if not down:
                    stable_at = max(since for _, since in states) + stable_s
                    if now >= stable_at:
                        return Outcome.done(now)
                if now >= deadline:
                    what = (f"down: {', '.join(f'{s}:{p}' for s, p in down)}" if down
                            else "flapping: not stable yet")
                    return Outcome.refused(f"ports {', '.join(f'{s}:{p}' for s, p in ports)} not up and stable "
                                           f"for {stable_s * 1000:.0f} ms within {timeout_s} s ({what})")
                wake = deadline if down else min(deadline, stable_at)
                self._cond.wait(max(0.0, wake - now) + 0.0005)

    def wait_link(self, a: Port, b: Port, timeout_s: float) -> Outcome:
        deadline = time.time() + timeout_s
        with self._cond:
            while True:
                now = time.time()
                seen_at = self._link_seen_at(a, b)
                if seen_at is not None and now >= seen_at:
                    return Outcome.done(now)
                if now >= deadline:
                    return Outcome.refused(f"LLDP did not see {a[0]}:{a[1]}-{b[0]}:{b[1]} within {timeout_s} s")
                wake = deadline if seen_at is None else min(deadline, seen_at)
                self._cond.wait(max(0.0, wake - now) + 0.0005)

    def flow_packets(self, r: FlowRule) -> int | None:
        with self._lock:
            if r.key() not in self.tables.get(r.switch, {}):
                return None
            return self.counters[r.switch][r.key()]

    def flow_packets_many(self, rules: Sequence[FlowRule]) -> list[int | None]:
        return [self.flow_packets(r) for r in rules]

    def flow_bytes(self, r: FlowRule) -> int | None:
        """The rule's byte counter (FLOW_STATS byte_count), None if it is not in the table."""
        with self._lock:
            if r.key() not in self.tables.get(r.switch, {}):
                return None
            return self.byte_counters[r.switch][r.key()]

    # ------------------------------------------------------------------ meters (OpenFlow 1.3)
    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome:
        """Add or modify a drop meter of ``kbps`` (the node answers after its latency)."""
        return self._message(switch, "meter_set", f"{switch}/meter {meter_id} {kbps:g} kbit/s", True, 0.0,
                             lambda: "" if switch in self.switches and kbps > 0 else "OFPMMFC_BAD_RATE",
                             lambda: self.meters.setdefault(switch, {}).__setitem__(meter_id, float(kbps)))

    def remove_meter(self, switch: str, meter_id: int) -> Outcome:
        return self._message(switch, "meter_remove", f"{switch}/meter {meter_id}", True, 0.0,
                             lambda: "" if switch in self.switches else "not a packet switch",
                             lambda: self.meters.get(switch, {}).pop(meter_id, None))

    # ------------------------------------------------------------------ internals: messages
    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._heap:
                    self._cond.wait()
                    continue
                now = time.time()
                due = self._heap[0][0]
                if due > now:
                    self._cond.wait(due - now)
                    continue
                _, _, fn = heapq.heappop(self._heap)
                fn()
                self._cond.notify_all()

    def _push(self, due: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, fn))
        self._cond.notify_all()

    def _message(self, node: str, op: str, target: str, barrier: bool, delay: float,
                 check: Callable[[], str], apply: Callable[[], None], lag: float = 0.0) -> Outcome:
        """After the node's latency and ``delay`` the node ``check``s the message (an error, or "")
        and answers; the datapath ``apply``s it ``lag`` after that. With a barrier, wait for the answer."""
        p = _Pending()
        with self._cond:
            now = time.time()
            base, jitter = self._latency.get(node, (0.0, 0.0))
            due = max(now + base + self.rng.uniform(0.0, jitter) + delay, self._last_due.get(node, 0.0))
            self._last_due[node] = due + lag
            msg = Message(now, node, op, target, barrier)
            self.messages.append(msg)

            def applied() -> None:
                apply()
                msg.applied_at = time.time()

            def answer() -> None:
                p.error = check()
                p.at = time.time()
                msg.error = p.error
                if p.error:
                    if not barrier:
                        self.errors.append(f"{node}: {op} {target}: {p.error}")
                elif lag:
                    self._push(due + lag, applied)
                else:
                    applied()
                p.event.set()

            self._push(due, answer)
        if not barrier:
            return Outcome.done(now, sent=True)
        if self._drop_barrier(node):  # the node works; its reply is lost
            time.sleep(max(0.0, now + self.barrier_timeout_s - time.time()))
            return Outcome.timed_out(f"no BARRIER_REPLY from {node} within {self.barrier_timeout_s} s")
        if not p.event.wait(self.barrier_timeout_s + delay + base + jitter + 1.0):
            return Outcome.timed_out(f"no BARRIER_REPLY from {node}")
        if p.error:
            return Outcome.refused(f"{node} refused {op} {target}: {p.error}", p.at, errors=[p.error])
        return Outcome.done(p.at)

    def _drop_barrier(self, node: str) -> bool:
        with self._lock:
            if node not in self._drop_barriers:
                return False
            left = self._drop_barriers[node]
            if left is not None:
                if left <= 1:
                    del self._drop_barriers[node]
                else:
                    self._drop_barriers[node] = left - 1
            return True

    # ------------------------------------------------------------------ groups (OpenFlow 1.3)
    def set_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        """Add or modify a fast-failover group (the node answers after its latency)."""
        return self._message(g.switch, "group_set", g.target(), barrier, 0.0,
                             lambda: "" if g.switch in self.switches else "not a packet switch",
                             lambda: self.groups.setdefault(g.switch, {}).__setitem__(g.group_id, g.ports))

    def remove_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        return self._message(g.switch, "group_remove", g.target(), barrier, 0.0,
                             lambda: "" if g.switch in self.switches else "not a packet switch",
                             lambda: self.groups.get(g.switch, {}).pop(g.group_id, None))

    def _out_port(self, r: FlowRule) -> int | None:
        """Where a rule sends now: its port, or its fast-failover group's first live port (None: all down)."""
        if r.group is None:
            return r.out_port
        ports = self.groups.get(r.switch, {}).get(r.group, ())
        return next((p for p in ports if self.port_state.get((r.switch, p), (False, 0.0))[0]), None)

    # ------------------------------------------------------------------ internals: applying
    def _xcon_check(self, x: XconSpec) -> str:
        ports = self.ots.get(x.ots)
        if ports is None or x.in_port not in ports or x.out_port not in ports:
            return "OFPBAC_BAD_OUT_PORT"
        refuse = self._refuse_xcon.get(x.ots)
        if refuse is not None and (refuse[0] is None or refuse[0] & x.ports):
            return refuse[1]
        table = self.xcon[x.ots]
        if table.get(x.in_port, x.out_port) != x.out_port or table.get(x.out_port, x.in_port) != x.in_port:
            return "OFPFMFC_OVERLAP"  # a port already cross-connected elsewhere
        return ""

    def _xcon_add(self, x: XconSpec) -> None:
        table = self.xcon[x.ots]
        if table.get(x.in_port) != x.out_port:  # an identical ADD is a no-op
            table[x.in_port], table[x.out_port] = x.out_port, x.in_port
            self._changed(x.ots, f"xcon {x.target()} added")

    def _xcon_remove(self, x: XconSpec) -> None:
        table = self.xcon[x.ots]
        if table.get(x.in_port) == x.out_port:  # strict: only this XCON, never another one on its port
            del table[x.in_port], table[x.out_port]
            self._changed(x.ots, f"xcon {x.target()} removed")

    def _ots_check(self, ots: str) -> str:
        return "" if ots in self.ots else "not an OTS"

    def _flow_check(self, r: FlowRule, adding: bool) -> str:
        if r.switch not in self.switches:
            return "not a packet switch"
        if adding and r.meter is not None and r.meter not in self.meters.get(r.switch, {}):
            return "OFPMMFC_UNKNOWN_METER"  # OVS refuses a rule whose meter does not exist
        if adding and r.group is not None and r.group not in self.groups.get(r.switch, {}):
            return "OFPBAC_BAD_OUT_GROUP"
        return self._refuse_flow.get(r.switch, "") if adding else ""

    def _flow_add(self, r: FlowRule) -> None:
        self._put_rule(r)
        self._changed(r.switch, f"flow {r.target()} added")

    def _flow_remove(self, r: FlowRule) -> None:
        old = self.tables[r.switch].get(r.key())
        if old is not None and old.cookie == r.cookie:  # strict delete, full cookie mask
            del self.tables[r.switch][r.key()]
            del self.counters[r.switch][r.key()]
            del self.byte_counters[r.switch][r.key()]
            self._changed(r.switch, f"flow {r.target()} removed")

    def _put_rule(self, r: FlowRule) -> None:
        key = r.key()
        if key not in self.tables[r.switch]:
            self.counters[r.switch][key] = 0  # an overwrite keeps its counters (no OFPFF_RESET_COUNTS)
            self.byte_counters[r.switch][key] = 0
            self._seq += 1
            self._installed_seq[(r.switch, key)] = self._seq
        self.tables[r.switch][key] = r

    def _changed(self, node: str, what: str) -> None:
        now = time.time()
        ports = self._recompute_ports(now)
        change = Change(now, node, what, ports)
        self.changes.append(change)
        for fn in list(self._observers):
            try:
                fn(self, change)
            except Exception as exc:  # kept and raised by close(): the scheduler must go on
                self.observer_errors.append(exc)

    # ------------------------------------------------------------------ internals: light and links
    def _far_end(self, port: Port) -> tuple[Port | None, list[Hop]]:
        """The packet port a lit circuit joins ``port`` to (None if dark) and the OTS hops on the way."""
        o = self.adapt.get(port)
        hops: list[Hop] = []
        seen: set[OPort] = set()
        while o is not None and o not in seen:
            seen.add(o)
            out = self.xcon.get(o[0], {}).get(o[1])
            if out is None:
                return None, hops
            hops.append((o[0], o[1], out))
            nxt = (o[0], out)
            if nxt in self.adapt_rev:
                return self.adapt_rev[nxt], hops
            if nxt in self.cut:
                return None, hops
            o = self.fibre.get(nxt)
        return None, hops

    def _recompute_ports(self, now: float, force: bool = False) -> list[tuple[Port, bool]]:
        """Port states from light and forced-down flags; ``force`` restamps every port (set-up time)."""
        ports = set(self.host_at) | set(self.copper) | set(self.adapt)
        turned: list[tuple[Port, bool]] = []
        for p in sorted(ports):
            lit = p not in self.adapt or self._far_end(p)[0] is not None
            up = lit and p not in self.forced_down
            old = self.port_state.get(p)
            if force:
                self.port_state[p] = (up, now)
            elif old is None or old[0] != up:
                self.port_state[p] = (up, now)
                if old is not None:
                    turned.append((p, up))
        return turned

    def _link_seen_at(self, a: Port, b: Port) -> float | None:
        """When LLDP sees ``a``–``b`` (both up and joined, ``lldp_delay_s`` after the later came up)."""
        sa, sb = self.port_state.get(a), self.port_state.get(b)
        if not (sa and sb and sa[0] and sb[0]):
            return None
        joined = self.copper.get(a) == b or self._far_end(a)[0] == b
        return max(sa[1], sb[1]) + self.lldp_delay_s if joined else None

    # ------------------------------------------------------------------ internals: forwarding
    def _lookup(self, switch: str, packet: dict[str, Any]) -> FlowRule | None:
        best: FlowRule | None = None
        for r in self.tables[switch].values():
            if all(field_matches(v, packet.get(k)) for k, v in r.match):
                if (best is None or r.priority > best.priority or (
                        r.priority == best.priority
                        and self._installed_seq[(switch, r.key())] < self._installed_seq[(switch, best.key())])):
                    best = r
        return best

    def _walk(self, start: str | Port, packet: dict[str, Any], count: bool) -> TraceResult:
        if isinstance(start, str):
            h = self.hosts[start]
            sw, in_port = h.switch, h.port
        else:
            sw, in_port = start
        hops: list[Hop] = []
        seen: set[Port] = set()
        while len(hops) < MAX_HOPS:
            if (sw, in_port) in seen:
                return LOOP
            seen.add((sw, in_port))
            rule = self._lookup(sw, {**packet, "in_port": in_port})
            if rule is None:
                return BLACKHOLE
            if count and sw not in self._frozen:
                self.counters[sw][rule.key()] += 1
                self.byte_counters[sw][rule.key()] += int(packet.get("size", 0))
            out = self._out_port(rule)
            if out is None:
                return BLACKHOLE
            hops.append((sw, in_port, out))
            if not self.port_state.get((sw, out), (False, 0.0))[0]:
                return BLACKHOLE
            if (sw, out) in self.host_at:
                hops.append((self.host_at[sw, out], 0, None))
                return hops
            if (sw, out) in self.copper:
                sw, in_port = self.copper[sw, out]
            elif (sw, out) in self.adapt:
                far, ots_hops = self._far_end((sw, out))
                if far is None:
                    return BLACKHOLE
                hops.extend(ots_hops)
                sw, in_port = far
            else:
                return BLACKHOLE
            if not self.port_state.get((sw, in_port), (False, 0.0))[0]:
                return BLACKHOLE
        return LOOP


class Traffic:
    """Packets every ``interval_s`` along each flow ``(start, packet, expected host)``, counting fates."""

    def __init__(self, net: FakeNetwork, flows: Sequence[tuple[str | Port, dict[str, Any], str]],
                 interval_s: float = 0.001) -> None:
        self.net, self.flows, self.interval_s = net, list(flows), interval_s
        self.sent = self.delivered = self.lost = self.looped = self.misdelivered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-traffic", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for start, packet, expect in self.flows:
                t = self.net.send(start, packet)
                self.sent += 1
                if t == BLACKHOLE:
                    self.lost += 1
                elif t == LOOP:
                    self.looped += 1
                elif t[-1][0] != expect:
                    self.misdelivered += 1
                else:
                    self.delivered += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


# ---------------------------------------------------------------------- the Fig. 2 scenario
def fig2_network(**kw: Any) -> FakeNetwork:
    """The Fig. 2 testbed (topology.spec.fig2_testbed) as a fake network, nothing installed."""
    from topology.spec import fig2_testbed
    return FakeNetwork.from_spec(fig2_testbed(), **kw)


@dataclass
class Fig2Move:
    """Reservation ``ident`` between h1 (A:1) and h3 (C:3), moved from A-X-Y-B-Y-Z-C to A-X-Z-C.

    Old: circuits "initial" (links A:3-B:1, B:2-C:1) and reservation rules through B. New: circuit
    "offload" (X 4-5, Z 5-4: link A:4-C:2). The ingress rules at A and C are overwritten in place.
    (The "direct" circuit X 1-3, Z 3-2 reuses X:1 and Z:2, so it cannot be made before break.)
    """

    old_xcons: list[XconSpec]
    old_rules: list[FlowRule]  # transit/egress of the old path
    old_ingress: list[FlowRule]
    new_xcons: list[XconSpec]
    new_ports: list[Port]
    new_links: list[tuple[Port, Port]]
    new_rules: list[FlowRule]  # egress of the new path
    ingress: list[IngressChange]
    forward: tuple[str, dict[str, Any], str]  # (start host, packet, destination host)
    reverse: tuple[str, dict[str, Any], str]

    @property
    def old_state_rules(self) -> list[FlowRule]:
        return self.old_rules + self.old_ingress


def fig2_move(ident: int = 7, band: str = "reservation", priority: int = 30000) -> Fig2Move:
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS
    h1, h3 = "00:00:00:00:00:01", "00:00:00:00:00:03"

    def rule(sw: str, in_port: int, dst: str, out: int) -> FlowRule:
        return FlowRule(sw, band, ident, priority, (("in_port", in_port), ("eth_dst", dst)), out)

    old_ingress = [rule("A", 1, h3, 3), rule("C", 3, h1, 1)]
    new_ingress = [rule("A", 1, h3, 4), rule("C", 3, h1, 2)]
    return Fig2Move(
        old_xcons=[XconSpec(*x) for x in FIG2_CIRCUITS["initial"]],
        old_rules=[rule("B", 1, h3, 2), rule("C", 1, h3, 3), rule("B", 2, h1, 1), rule("A", 3, h1, 1)],
        old_ingress=old_ingress,
        new_xcons=[XconSpec(*x) for x in FIG2_CIRCUITS["offload"]],
        new_ports=[("A", 4), ("C", 2)],
        new_links=[((a, ap), (b, bp)) for a, ap, b, bp in FIG2_CIRCUIT_LINKS["offload"]],
        new_rules=[rule("C", 2, h3, 3), rule("A", 4, h1, 1)],
        ingress=[IngressChange(n, o) for n, o in zip(new_ingress, old_ingress, strict=True)],
        forward=("h1", {"eth_src": h1, "eth_dst": h3, "eth_type": 0x0800}, "h3"),
        reverse=("h3", {"eth_src": h3, "eth_dst": h1, "eth_type": 0x0800}, "h1"),
    )
