"""Builders of ordered multi-layer update plans (no I/O: they return a :class:`Plan`).

The order follows OSCARS-TE ("Traffic Optimization in Multi-Layered WANs using SDN", §III): lower
layers first, end points last. XCONs on the OTS nodes go in first (in parallel); a circuit-up
barrier waits until the packet ports of the new circuit are up and stable and LLDP sees the packet
link; then transit and egress rules (in parallel, each confirmed by a barrier); then, last, the
ingress rules that move traffic; then data-plane verification (counters rise on the new path).
A move is make-before-break: the old path is removed, in reverse order, only once its counters
stopped rising. :func:`one_shot` turns any plan into the paper's comparison case: every message at
once, no barriers, no waits.

Defaults (all overridable per call): ``stable_ms`` D = 50 ms, circuit-up timeout 5 s, verification
timeout 2 s and 1 packet per rule, drain quiet period 200 ms within 5 s, ``settle_ms`` 1 ms after a
flow barrier (a BARRIER_REPLY precedes the datapath switch by up to 0.3 ms on our machines).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from app.update.model import FlowRule, GroupSpec, IngressChange, Port, XconSpec
from app.update.plan import (
    ADD,
    INGRESS,
    ONE_SHOT,
    PATH,
    REMOVE,
    CircuitUpStep,
    DrainStep,
    FlowStep,
    GroupStep,
    Plan,
    PlanError,
    Step,
    VerifyStep,
    XconStep,
)

DEFAULT_STABLE_MS = 50.0
DEFAULT_CIRCUIT_TIMEOUT_S = 5.0
DEFAULT_VERIFY_TIMEOUT_S = 2.0
DEFAULT_MIN_PACKETS = 1
DEFAULT_QUIET_MS = 200.0
DEFAULT_DRAIN_TIMEOUT_S = 5.0
DEFAULT_SETTLE_MS = 1.0

Link = tuple[Port, Port]


class _Ids:
    """Short readable step ids: ``path+C.1`` is the first rule added on C by the path layer."""

    def __init__(self) -> None:
        self.n: Counter[tuple[str, str]] = Counter()

    def __call__(self, prefix: str, switch: str) -> str:
        self.n[prefix, switch] += 1
        return f"{prefix}{switch}.{self.n[prefix, switch]}"


def _xcon_id(sign: str, x: XconSpec) -> str:
    return f"xcon{sign}{x.ots}:{x.in_port}-{x.out_port}"


def _unique(items: Sequence, what: str, key=lambda v: v) -> list:
    seen: set = set()
    for v in items:
        k = key(v)
        if k in seen:
            raise PlanError(f"{what} listed twice: {v!r}")
        seen.add(k)
    return list(items)


def _ingress(items: Iterable[FlowRule | IngressChange]) -> list[IngressChange]:
    return [i if isinstance(i, IngressChange) else IngressChange(i) for i in items]


def _check_rule_keys(rules: Sequence[FlowRule], what: str) -> None:
    _unique(rules, what, key=FlowRule.key)


def _circuit(xcons: Sequence[XconSpec], ports: Sequence[Port], links: Sequence[Link], stable_ms: float,
             timeout_s: float) -> tuple[list[Step], set[str]]:
    """XCON adds (parallel) and the circuit-up barrier after all of them; returns (steps, ids to wait for)."""
    _unique(xcons, "XCON")
    steps: list[Step] = [XconStep(id=_xcon_id("+", x), op=ADD, xcon=x) for x in xcons]
    xcon_ids = {s.id for s in steps}
    ports = list(ports) or sorted({p for link in links for p in link})
    if not ports and not links:
        if xcons:
            raise PlanError("new XCONs but no packet ports or links to wait for: the circuit-up barrier "
                            "needs the circuit's packet ports")
        return steps, set()
    up = CircuitUpStep(id="circuit-up", deps=frozenset(xcon_ids), ports=tuple(ports), links=tuple(links),
                       stable_s=stable_ms / 1000.0, timeout_s=timeout_s)
    return [*steps, up], {up.id}


def _ingress_steps(changes: Sequence[IngressChange], ids: _Ids, settle_s: float
                   ) -> tuple[list[FlowStep], list[FlowStep], list[FlowRule]]:
    """(rules to pre-install with the path, the swap steps, old ingress rules left for the teardown)."""
    pre: list[FlowStep] = []
    swap: list[FlowStep] = []
    leftover: list[FlowRule] = []
    for c in changes:
        sw = c.new.switch
        if c.old is None:
            swap.append(FlowStep(id=ids("ingress+", sw), op=ADD, rule=c.new, role=INGRESS, settle_s=settle_s))
        elif c.overwrites:
            swap.append(FlowStep(id=ids("ingress+", sw), op=ADD, rule=c.new, restore=c.old, role=INGRESS,
                                 settle_s=settle_s))
        elif c.new.priority > c.old.priority:  # the new rule shadows the old one; the old goes with the old path
            swap.append(FlowStep(id=ids("ingress+", sw), op=ADD, rule=c.new, role=INGRESS, settle_s=settle_s))
            leftover.append(c.old)
        else:  # the new rule waits under the old one; deleting the old one is the swap
            pre.append(FlowStep(id=ids("path+", sw), op=ADD, rule=c.new, role=PATH, settle_s=settle_s))
            swap.append(FlowStep(id=ids("ingress-", sw), op=REMOVE, rule=c.old, role=INGRESS, settle_s=settle_s))
    return pre, swap, leftover


def _ingress_checks(changes: Sequence[IngressChange], path_rules: Sequence[FlowRule]) -> None:
    _check_rule_keys([c.new for c in changes], "ingress rule")
    path_keys = {r.key() for r in path_rules}
    for c in changes:
        if c.new.key() in path_keys:
            raise PlanError(f"ingress rule {c.new.target()} is also a path rule")


def _verify(verify: bool, rules: Sequence[FlowRule], deps: set[str], min_packets: int, timeout_s: float
            ) -> list[Step]:
    if not verify or not rules:
        return []
    return [VerifyStep(id="verify", deps=frozenset(deps), rules=tuple(rules), min_packets=min_packets,
                       timeout_s=timeout_s)]


def provision(circuit_xcons: Sequence[XconSpec], circuit_ports: Sequence[Port], circuit_links: Sequence[Link],
              transit_rules: Sequence[FlowRule], ingress_rules: Sequence[FlowRule | IngressChange], *,
              verify: bool = True, verify_rules: Sequence[FlowRule] | None = None,
              stable_ms: float = DEFAULT_STABLE_MS, circuit_timeout_s: float = DEFAULT_CIRCUIT_TIMEOUT_S,
              verify_timeout_s: float = DEFAULT_VERIFY_TIMEOUT_S, min_packets: int = DEFAULT_MIN_PACKETS,
              settle_ms: float = DEFAULT_SETTLE_MS, plan_id: str | None = None,
              groups: Sequence[GroupSpec] = (), old_groups: Sequence[GroupSpec] = ()) -> Plan:
    """Set up a new path: XCONs → circuit-up → transit/egress rules and ``groups`` → ingress rules → verify.

    ``circuit_ports`` empty: the ends of ``circuit_links``. ``verify`` needs traffic (by default every
    new rule must count ``min_packets``); pass ``verify=False`` for a path nothing uses yet. ``groups``
    (fast-failover groups the ingress rules output to) go in with the path, before the ingress;
    ``old_groups`` are the ones they overwrite (a roll-back puts them back). Any failure rolls the
    whole plan back (no commit point)."""
    settle = settle_ms / 1000.0
    _check_rule_keys(transit_rules, "transit rule")
    changes = _ingress(ingress_rules)
    _ingress_checks(changes, transit_rules)
    steps, up = _circuit(circuit_xcons, circuit_ports, circuit_links, stable_ms, circuit_timeout_s)
    ids = _Ids()
    pre, swap, leftover = _ingress_steps(changes, ids, settle)
    if leftover:
        raise PlanError("provision cannot shadow an old ingress rule it never removes: use move()")
    path: list[Step] = [FlowStep(id=ids("path+", r.switch), deps=frozenset(up), op=ADD, rule=r, settle_s=settle)
                        for r in transit_rules]
    path += [s.with_deps(up) for s in pre] + _group_steps(groups, ADD, up, old_groups)
    path_ids = {s.id for s in path} or up  # the swap waits for the path (which waited for the circuit)
    swap = [s.with_deps(path_ids) for s in swap]
    default_verify = [c.new for c in changes] + list(transit_rules)
    steps += path + swap + _verify(verify, default_verify if verify_rules is None else verify_rules,
                                   {s.id for s in swap} or path_ids, min_packets, verify_timeout_s)
    kw: dict[str, Any] = {} if plan_id is None else {"id": plan_id}
    return Plan(tuple(steps), "provision", **kw)


def _group_steps(groups: Sequence[GroupSpec], op: str, deps: Iterable[str], old: Sequence[GroupSpec] = ()
                 ) -> list[Step]:
    _unique(groups, "group", key=lambda g: (g.switch, g.group_id))
    was = {(g.switch, g.group_id): g for g in old}
    sign = "+" if op == ADD else "-"
    return [GroupStep(id=f"group{sign}{g.switch}.{g.group_id}", deps=frozenset(deps), op=op, group=g,
                      restore=was.get((g.switch, g.group_id))) for g in groups]


def cross_connect(xcons: Sequence[XconSpec], *, parallel: bool = False, plan_id: str | None = None) -> Plan:
    """XCONs alone (``POST /circuit``): one after the other, each applied before the next, or all at
    once (``parallel``: one provisioning delay). No circuit-up wait (the caller names no packet
    ports); any failure rolls back every XCON that went in, or may have (its barrier never answered)."""
    _unique(xcons, "XCON")
    steps: list[Step] = []
    for x in xcons:
        deps = frozenset() if parallel or not steps else frozenset({steps[-1].id})
        steps.append(XconStep(id=_xcon_id("+", x), deps=deps, op=ADD, xcon=x))
    kw: dict[str, Any] = {} if plan_id is None else {"id": plan_id}
    return Plan(tuple(steps), "circuit", **kw)


def release(circuit_xcons: Sequence[XconSpec], transit_rules: Sequence[FlowRule], ingress_rules: Sequence[FlowRule],
            *, drain: bool = True, quiet_ms: float = DEFAULT_QUIET_MS,
            drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, plan_id: str | None = None,
            groups: Sequence[GroupSpec] = ()) -> Plan:
    """Tear a path down in reverse order: ingress rules → (drain) → transit/egress rules and ``groups``
    → XCONs.

    Commit point: the ingress removals. A failure before it reinstalls what went; after it, traffic
    no longer enters the path, so the rest is removed as far as possible and the plan reports failed."""
    _unique(circuit_xcons, "XCON")
    _check_rule_keys(list(transit_rules) + list(ingress_rules), "rule")
    ids = _Ids()
    ingress = [FlowStep(id=ids("ingress-", r.switch), op=REMOVE, rule=r, role=INGRESS) for r in ingress_rules]
    before = {s.id for s in ingress}
    steps: list[Step] = list(ingress)
    if drain and transit_rules:
        d = DrainStep(id="drain", deps=frozenset(before), rules=tuple(transit_rules), quiet_s=quiet_ms / 1000.0,
                      timeout_s=drain_timeout_s)
        steps.append(d)
        before = {d.id}
    path: list[Step] = [FlowStep(id=ids("path-", r.switch), deps=frozenset(before), op=REMOVE, rule=r)
                        for r in transit_rules]
    path += _group_steps(groups, REMOVE, before)
    steps += path
    before = {s.id for s in path} or before
    steps += [XconStep(id=_xcon_id("-", x), deps=frozenset(before), op=REMOVE, xcon=x) for x in circuit_xcons]
    kw = {} if plan_id is None else {"id": plan_id}
    return Plan(tuple(steps), "release", commit=frozenset(s.id for s in ingress), **kw)


def move(old_xcons: Sequence[XconSpec], old_rules: Sequence[FlowRule], new_xcons: Sequence[XconSpec],
         new_ports: Sequence[Port], new_links: Sequence[Link], new_rules: Sequence[FlowRule],
         ingress: Sequence[IngressChange], *, verify: bool = True, verify_rules: Sequence[FlowRule] | None = None,
         drain: bool = True, stable_ms: float = DEFAULT_STABLE_MS,
         circuit_timeout_s: float = DEFAULT_CIRCUIT_TIMEOUT_S, verify_timeout_s: float = DEFAULT_VERIFY_TIMEOUT_S,
         min_packets: int = DEFAULT_MIN_PACKETS, quiet_ms: float = DEFAULT_QUIET_MS,
         drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, settle_ms: float = DEFAULT_SETTLE_MS,
         plan_id: str | None = None) -> Plan:
    """Make-before-break move of traffic from an old path to a new one.

    New XCONs → circuit-up → new transit/egress rules → ingress swap (``ingress``) → verify → drain
    (the old path's counters stop rising) → old ingress leftovers → old transit/egress rules → old
    XCONs. ``old_rules`` are the old path's transit/egress rules (an entry equal to an ingress
    change's ``old`` is handled by that change); a rule in both ``old_rules`` and ``new_rules`` is
    shared and left alone. PlanError when the move cannot be made before break: a new XCON on a
    port an old XCON holds, or a new rule overwriting a different old one while traffic uses it.
    Commit point: the drain (else verify, else the swap); a later failure is not rolled back.
    """
    settle = settle_ms / 1000.0
    _unique(old_xcons, "old XCON")
    held = {(x.ots, p): x for x in old_xcons for p in x.ports}
    for x in new_xcons:
        for p in sorted(x.ports):
            if (x.ots, p) in held and held[x.ots, p] != x:
                raise PlanError(f"new XCON {x.target()} needs port {x.ots}:{p} held by old XCON "
                                f"{held[x.ots, p].target()}: cannot make before break (release, then provision)")
    kept_xcons = set(old_xcons) & set(new_xcons)  # shared hops stay
    changes = list(ingress)
    ingress_old = {c.old for c in changes if c.old is not None}
    _check_rule_keys(old_rules, "old rule")
    _check_rule_keys(new_rules, "new rule")
    old_by_key = {r.key(): r for r in old_rules if r not in ingress_old}
    shared = set()
    for r in new_rules:
        o = old_by_key.get(r.key())
        if o is None:
            continue
        if o != r:
            raise PlanError(f"new rule {r.target()} overwrites old rule {o.target()} while traffic uses it: "
                            "give the new path its own match (e.g. in_port) or priority")
        shared.add(r)
    new_path = [r for r in new_rules if r not in shared]
    old_path = [r for r in old_rules if r not in shared and r not in ingress_old]
    _ingress_checks(changes, new_path)
    old_ingress_keys = {r.key(): r for r in ingress_old}
    for r in new_path:
        if r.key() in old_ingress_keys:
            raise PlanError(f"new path rule {r.target()} overwrites the old ingress rule "
                            f"{old_ingress_keys[r.key()].target()}: that is the swap, give it as an IngressChange")
    live_keys = {r.key() for r in old_path}
    for c in changes:
        if c.new.key() in live_keys:
            raise PlanError(f"ingress rule {c.new.target()} overwrites old path rule {c.new.key()!r}")

    steps, up = _circuit([x for x in new_xcons if x not in kept_xcons], new_ports, new_links, stable_ms,
                         circuit_timeout_s)
    ids = _Ids()
    pre, swap, leftover = _ingress_steps(changes, ids, settle)
    path = [FlowStep(id=ids("path+", r.switch), deps=frozenset(up), op=ADD, rule=r, settle_s=settle)
            for r in new_path] + [s.with_deps(up) for s in pre]
    path_ids = {s.id for s in path} or up  # the swap waits for the path (which waited for the circuit)
    swap = [s.with_deps(path_ids) for s in swap]
    steps += path + swap
    commit = {s.id for s in swap}
    default_verify = [c.new for c in changes] + new_path
    check = _verify(verify, default_verify if verify_rules is None else verify_rules, commit or path_ids,
                    min_packets, verify_timeout_s)
    steps += check
    before = {s.id for s in check} or commit or path_ids
    watched = leftover + old_path
    if check:
        commit = {s.id for s in check}
    if drain and watched:
        d = DrainStep(id="drain", deps=frozenset(before), rules=tuple(watched), quiet_s=quiet_ms / 1000.0,
                      timeout_s=drain_timeout_s)
        steps.append(d)
        before = commit = {d.id}
    gone = [FlowStep(id=ids("ingress-", r.switch), deps=frozenset(before), op=REMOVE, rule=r, role=INGRESS)
            for r in leftover]
    steps += gone
    before = {s.id for s in gone} or before
    old = [FlowStep(id=ids("path-", r.switch), deps=frozenset(before), op=REMOVE, rule=r) for r in old_path]
    steps += old
    before = {s.id for s in old} or before
    steps += [XconStep(id=_xcon_id("-", x), deps=frozenset(before), op=REMOVE, xcon=x)
              for x in old_xcons if x not in kept_xcons]
    kw = {} if plan_id is None else {"id": plan_id}
    return Plan(tuple(steps), "move", commit=frozenset(commit), **kw)


def one_shot(plan: Plan, *, verify: bool = True, plan_id: str | None = None) -> Plan:
    """The same messages with no ordering: every change sent at once without barriers, no circuit-up
    barrier, no drain, no settling; ``verify`` keeps the verification for the report (after all sends)."""
    writes = [s.with_deps(()) for s in plan.steps if s.writes]
    writes = [replace(s, settle_s=0.0) if isinstance(s, FlowStep) else s for s in writes]
    checks: list[Step] = [s.with_deps(w.id for w in writes) for s in plan.steps
              if verify and isinstance(s, VerifyStep)]
    return Plan(tuple(writes + checks), plan.kind, ONE_SHOT, plan_id or f"{plan.id}-one-shot")

