"""Fine monitoring without sFlow: temporary per-5-tuple counting rules and their OpenFlow statistics.

Design (plain logic; the os-ken shim in ``app/controller/monitor_app.py`` turns the returned
:class:`RuleOp` values into FLOW_MODs and feeds flow-stats replies back):

* While fine monitoring is on for a packet switch, it gets one **learn rule** per forwarding rule
  (priority ``LEARN_PRIORITY`` above forwarding's 100): ``eth_type=IPv4, eth_dst=M →
  output(P), set eth_dst=LEARN_MAC, output(CONTROLLER, max_len=LEARN_COPY_BYTES)``. The packet still leaves on the
  forwarding port unchanged (actions run in order); the controller gets a copy whose destination
  MAC is rewritten to a MAC no host has, so the forwarding app does not deliver it a second time.
  The learn rule's cookie carries the index of ``M``.
* The first copy of a new flow names its 5-tuple; the controller installs a **count rule**
  (priority ``COUNT_PRIORITY``) matching that 5-tuple and ``eth_dst=M`` with the same output.
  Later packets of the flow hit the count rule, so only the first packets of each flow reach
  the controller. Count rules idle out after ``idle_timeout`` s (the switch removes them; a flow
  missing from a stats reply is forgotten and learnt again if it comes back).
* Every Ts the controller asks for the flow statistics of the count rules (by cookie) on exactly
  the fine switches; rate = Δbyte_count / Δduration of each rule (the switch's own clock) between
  the rule's counter refresh steps (:mod:`monitor.refresh_steps`: userspace OVS refreshes them every
  ~0.5 s, so two replies hold zero, one or two refreshes' bytes). A
  flow crossing several fine switches is counted on each: its rate is the **maximum**, like
  the sFlow estimator. Rates are exact (no sampling), so they carry no sample count.
* Forwarding changes (a re-route) are followed by :meth:`FlowCounting.sync` with the forwarding
  app's current rules: learn and count rules whose output port changed are rewritten.
* Turning fine monitoring off deletes every learn and count rule of the switch by cookie.

IPv4 only (the lab's hosts); IPv6 flows are forwarded normally and not counted.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from monitor.refresh_steps import RefreshSteps
from monitor.sflow.estimator import FlowRate
from monitor.sflow.packet import HEADER_ETHERNET, parse_header
from topology import rule_plan
from topology.flow import FiveTuple

COOKIE_BASE = rule_plan.COOKIE_BASE  # "MLTE", like the controller's other cookies (0x4d4c5445000000xx)
KIND_LEARN = rule_plan.FLOW_LEARN.kind
KIND_COUNT = rule_plan.FLOW_COUNT.kind
KIND_MASK = 0xFFFFFFFF000000FF
ALL_MASK = 0xFFFFFFFF000000FE  # learn + count
EXACT_MASK = 0xFFFFFFFFFFFFFFFF  # one rule by its cookie
ID_LIMIT = 1 << 24
LEARN_PRIORITY = rule_plan.FLOW_LEARN.priority()
COUNT_PRIORITY = rule_plan.FLOW_COUNT.priority()
LEARN_MAC = "02:4d:4c:54:45:4c"  # locally administered; never a host's address
# a learn copy carries the packet's first bytes only: the 5-tuple is in its headers (Ethernet, a VLAN tag,
# IPv4 with options, the ports), and a full-size copy of every new flow's first packets was most of the
# monitor's control-channel bytes in the elastic-offload lab
LEARN_COPY_BYTES = 128
ADD, DELETE = "add", "delete"


def cookie(kind: int, ident: int) -> int:
    """``0x4d4c5445 | ident (24 bits) | kind (8 bits)``."""
    return COOKIE_BASE | (ident % ID_LIMIT) << 8 | kind


def cookie_kind(value: int) -> int | None:
    if value & 0xFFFFFFFF00000000 != COOKIE_BASE:
        return None
    return value & 0xFF


def cookie_id(value: int) -> int:
    return (value >> 8) & (ID_LIMIT - 1)


@dataclass(frozen=True)
class RuleOp:
    """One FLOW_MOD for the shim: add (or overwrite) / delete a learn or count rule."""

    op: str  # add | delete
    kind: int  # KIND_LEARN | KIND_COUNT
    cookie: int
    eth_dst: str
    port: int = 0  # output port (add)
    key: FiveTuple | None = None  # count rules


@dataclass(frozen=True)
class FlowCount:
    """A counted flow: bytes since its count rule went in, its rate, when the switch last reported."""

    bytes: int
    mbps: float
    t: float  # monotonic time of the stats reply that brought this count (a reply without news keeps it)
    seconds: float = 0.0  # how long its count rule had counted when these bytes were (the rule's clock)


@dataclass
class _Count:
    key: FiveTuple
    mac: str
    port: int
    ident: int
    counter: RefreshSteps = field(default_factory=RefreshSteps)
    bytes_seen: int | None = None  # the newest reply's byte count
    updated: float | None = None  # when a reply last brought news (a refresh step, or the first rate)


@dataclass
class _Switch:
    learn: dict[str, tuple[int, int]] = field(default_factory=dict)  # mac -> (port, ident)
    counts: dict[FiveTuple, _Count] = field(default_factory=dict)
    by_id: dict[int, FiveTuple] = field(default_factory=dict)
    next_id: int = 1


def flow_key(frame: bytes) -> FiveTuple | None:
    """The IPv4 5-tuple of an Ethernet frame (None for anything else). Ports only for TCP and UDP:
    the count rule can match nothing else (an SCTP flow is counted per address pair and protocol)."""
    key, _src, _dst, _vlan = parse_header(HEADER_ETHERNET, frame)
    if key is None or ":" in key.src:
        return None
    return key if key.proto in (6, 17) else FiveTuple(key.src, key.dst, key.proto)


class FlowCounting:
    """Counting rules and per-flow rates for the switches with fine monitoring on.

    Rates come from each rule's refresh steps (:class:`monitor.refresh_steps.RefreshSteps`):
    ``min_duration`` is the shortest span a rate is taken over (a few packets over a few milliseconds
    explode), ``refresh`` the switch's counter refresh period at most (userspace OVS: 0.5 s). A flow's
    count is news only when its byte count moved. ``stale``: a flow with no news for this long has no
    rate any more. ``max_flows``: count rules per switch (the rest are not counted; a flood of new flows
    cannot fill the switch's table).
    """

    def __init__(self, min_duration: float = 0.2, stale: float = 3.0, max_flows: int = 1000,
                 refresh: float = 0.5) -> None:
        self.min_duration = min_duration
        self.refresh = refresh
        self.stale = stale
        self.max_flows = max_flows
        self.switches: dict[str, _Switch] = {}
        self.not_counted = 0

    @property
    def enabled(self) -> set[str]:
        return set(self.switches)

    def enable(self, switch: str, forwarding: Mapping[str, int]) -> list[RuleOp]:
        """Fine monitoring on: learn rules mirroring ``forwarding`` (eth_dst → port)."""
        self.switches.setdefault(switch, _Switch())
        return self.sync(switch, forwarding)

    def disable(self, switch: str) -> bool:
        """Fine monitoring off: forget the switch (the shim deletes its rules by cookie mask)."""
        return self.switches.pop(switch, None) is not None

    def sync(self, switch: str, forwarding: Mapping[str, int]) -> list[RuleOp]:
        """Follow the forwarding rules: add/rewrite/delete learn rules and re-point count rules."""
        st = self.switches.get(switch)
        if st is None:
            return []
        ops: list[RuleOp] = []
        for mac in sorted(set(st.learn) - set(forwarding)):
            _port, ident = st.learn.pop(mac)
            ops.append(RuleOp(DELETE, KIND_LEARN, cookie(KIND_LEARN, ident), mac))
        for mac, port in sorted(forwarding.items()):
            old = st.learn.get(mac)
            if old is not None and old[0] == port:
                continue
            ident = old[1] if old else self._mac_id(st, mac)
            st.learn[mac] = (port, ident)
            ops.append(RuleOp(ADD, KIND_LEARN, cookie(KIND_LEARN, ident), mac, port))
        for key, c in sorted(st.counts.items()):
            port = forwarding.get(c.mac)
            if port is None:
                ops.append(self._drop(st, key))
            elif port != c.port:
                c.port = port
                ops.append(RuleOp(ADD, KIND_COUNT, cookie(KIND_COUNT, c.ident), c.mac, port, key))
        return ops

    @staticmethod
    def _mac_id(st: _Switch, mac: str) -> int:
        used = {ident for _p, ident in st.learn.values()}
        ident = 1
        while ident in used:
            ident += 1
        return ident

    def _drop(self, st: _Switch, key: FiveTuple) -> RuleOp:
        c = st.counts.pop(key)
        st.by_id.pop(c.ident, None)
        return RuleOp(DELETE, KIND_COUNT, cookie(KIND_COUNT, c.ident), c.mac, c.port, key)

    def learned(self, switch: str, learn_cookie: int, frame: bytes) -> RuleOp | None:
        """A copy from a learn rule arrived: a count rule for its flow, or None (known flow, not
        IPv4, fine monitoring already off, or the switch's count-rule budget is used up)."""
        st = self.switches.get(switch)
        if st is None or cookie_kind(learn_cookie) != KIND_LEARN:
            return None
        ident = cookie_id(learn_cookie)
        mac = next((m for m, (_p, i) in st.learn.items() if i == ident), None)
        key = flow_key(frame)
        if mac is None or key is None or key in st.counts:
            return None
        if len(st.counts) >= self.max_flows:
            self.not_counted += 1
            return None
        cid = st.next_id
        while cid in st.by_id or cid == 0:
            cid = cid % (ID_LIMIT - 1) + 1
        st.next_id = cid % (ID_LIMIT - 1) + 1
        port = st.learn[mac][0]
        st.counts[key] = _Count(key, mac, port, cid, self._counter())
        st.by_id[cid] = key
        return RuleOp(ADD, KIND_COUNT, cookie(KIND_COUNT, cid), mac, port, key)

    def _counter(self) -> RefreshSteps:
        return RefreshSteps(min_span=self.min_duration, window=max(1.0, 2 * self.refresh), refresh=self.refresh,
                            stall=2 * self.refresh)

    def count_cookies(self, switch: str, keys: Iterable[FiveTuple]) -> list[int]:
        """The cookies of ``keys``' count rules on ``switch`` (those it has), to read them alone."""
        st = self.switches.get(switch)
        if st is None:
            return []
        return sorted(cookie(KIND_COUNT, st.counts[k].ident) for k in set(keys) if k in st.counts)

    def stats(self, switch: str, entries: Iterable[tuple[int, int, float]], now: float, *,
              complete: bool = True) -> None:
        """One flow-stats reply of ``switch``: (cookie, byte_count, duration_s) per rule.

        ``complete`` (a reply for every count rule): those missing from it were removed by the switch
        (idle timeout) and are forgotten; a reply for some rules only (by cookie) forgets nothing.
        """
        st = self.switches.get(switch)
        if st is None:
            return
        seen: set[int] = set()
        for ck, byte_count, duration in entries:
            if cookie_kind(ck) != KIND_COUNT:
                continue
            key = st.by_id.get(cookie_id(ck))
            if key is None:
                continue
            seen.add(cookie_id(ck))
            c = st.counts[key]
            c.bytes_seen = byte_count
            if c.counter.sample(byte_count, duration) and c.counter.rate is not None:
                c.updated = now
        for ident, key in list(st.by_id.items()):
            if complete and ident not in seen:
                c = st.counts.pop(key)
                del st.by_id[ident]
                if c.counter.last is None:
                    st.counts[key] = c  # installed after the request left: keep until the next reply
                    st.by_id[ident] = key

    def flow_rates(self, now: float | None = None, agents: set[str] | None = None) -> list[FlowRate]:
        """Per-flow rates over the fine switches (``agents`` = switch names; None = all): the maximum
        over switches, as :class:`FlowRate` with ``samples = 0`` (exact counts, no sampling error)."""
        best: dict[FiveTuple, tuple[float, list[tuple[str, int]]]] = {}
        for name, st in sorted(self.switches.items()):
            if agents is not None and name not in agents:
                continue
            for key, c in st.counts.items():
                if c.updated is None or (now is not None and now - c.updated > self.stale):
                    continue
                rate, points = best.get(key, (0.0, []))
                best[key] = (max(rate, c.counter.rate or 0.0), [*points, (name, c.port)])
        return sorted((FlowRate(k, r, 0, tuple(p)) for k, (r, p) in best.items()), key=lambda f: -f.bytes_per_s)

    def flow_counts(self, now: float | None = None) -> dict[FiveTuple, FlowCount]:
        """Bytes each counted flow has sent since its count rule went in (the maximum over the fine
        switches), with its rate: the TE loop's offload gain predicts what a flow still has to send
        from what it sent. A lower bound of the flow's bytes (what passed before the rule is not in)."""
        out: dict[FiveTuple, FlowCount] = {}
        for st in self.switches.values():
            for key, c in st.counts.items():
                if c.updated is None or c.bytes_seen is None or (now is not None and now - c.updated > self.stale):
                    continue
                old = out.get(key)
                if old is None or c.bytes_seen > old.bytes:
                    out[key] = FlowCount(c.bytes_seen, (c.counter.rate or 0.0) * 8 / 1e6, c.updated,
                                         c.counter.counted_s)
        return out

    def rules(self, switch: str) -> dict[str, int]:
        """How many learn / count rules the switch should hold now (API, tests)."""
        st = self.switches.get(switch)
        return {"learn": len(st.learn), "count": len(st.counts)} if st else {"learn": 0, "count": 0}
