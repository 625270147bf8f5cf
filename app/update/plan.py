"""A plan: typed steps in a dependency graph, checked acyclic, with the inverse of every change.

Steps that change the network (``XconStep``, ``FlowStep``, ``GroupStep``) have an inverse, so a failed plan can be
rolled back by :meth:`Plan.undo`; steps that wait for the network (``CircuitUpStep``, ``VerifyStep``,
``DrainStep``) change nothing and have none. Steps with no dependency path between them may run in
parallel. A plan is a value: the executor runs it, tests read its structure, ``to_json`` stores it.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar

from app.update.model import FlowRule, GroupSpec, Port, XconSpec, port_str

ADD, REMOVE = "add", "remove"
ORDERED, ONE_SHOT = "ordered", "one_shot"
MODES = (ORDERED, ONE_SHOT)
PATH, INGRESS = "path", "ingress"  # FlowStep roles: transit/egress rules, the rule that moves traffic


class PlanError(ValueError):
    """A plan that cannot run: a cycle, an unknown dependency, a duplicate id, a step that breaks before make."""


def _op(op: str) -> str:
    if op not in (ADD, REMOVE):
        raise PlanError(f"step op {op!r} is neither {ADD!r} nor {REMOVE!r}")
    return op

_S = TypeVar("_S", bound="Step")


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node of a plan: ``id`` unique in the plan, ``deps`` the ids that must be done first."""

    id: str
    deps: frozenset[str] = frozenset()
    tag: ClassVar[str] = ""
    writes: ClassVar[bool] = False  # changes network state, so has an inverse

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise PlanError(f"step id {self.id!r} must be a non-empty string")
        object.__setattr__(self, "deps", frozenset(self.deps))

    @property
    def kind(self) -> str:
        return self.tag

    def target(self) -> str:
        return ""

    def inverse(self) -> Step | None:
        """The step that undoes this one (deps empty: :meth:`Plan.undo` orders them)."""
        return None

    def with_deps(self: _S, deps: Iterable[str]) -> _S:
        return replace(self, deps=frozenset(deps))

    def _fields(self) -> dict[str, Any]:
        return {}

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "step": self.tag, "kind": self.kind, "target": self.target(),
                "deps": sorted(self.deps), **self._fields()}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Step:
        cls = _STEP_TYPES.get(d.get("step", ""))
        if cls is None:
            raise PlanError(f"unknown step type {d.get('step')!r}")
        return cls._from_json(d)

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        """Each step type reads its own fields; the base class is no step a plan can hold."""
        raise PlanError(f"{cls.__name__} is not a concrete step type")


def _undo_id(step_id: str) -> str:
    return f"undo:{step_id}"


@dataclass(frozen=True, kw_only=True)
class _AddRemove(Step):
    """A step that adds or removes one object (an XCON, a group); its inverse does the opposite."""

    op: str
    writes: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        _op(self.op)

    @property
    def kind(self) -> str:
        return f"{self.tag}_{self.op}"

    def inverse(self) -> Step:
        return replace(self, id=_undo_id(self.id), deps=frozenset(), op=REMOVE if self.op == ADD else ADD)


@dataclass(frozen=True, kw_only=True)
class XconStep(_AddRemove):
    """Add or remove one bidirectional XCON."""

    xcon: XconSpec
    tag: ClassVar[str] = "xcon"

    def target(self) -> str:
        return self.xcon.target()

    def _fields(self) -> dict[str, Any]:
        return {"op": self.op, "xcon": self.xcon.to_json()}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), op=d["op"], xcon=XconSpec.from_json(d["xcon"]))


@dataclass(frozen=True, kw_only=True)
class FlowStep(Step):
    """Add (or overwrite) or strictly remove one packet rule.

    ``restore`` is the rule an add overwrites (same key), so undo puts it back instead of deleting.
    ``settle_s`` is waited after the barrier reply: the reply precedes the datapath switch (by up
    to 0.3 ms on our machines), and the next step must not rely on this rule before it is live.
    """

    op: str
    rule: FlowRule
    restore: FlowRule | None = None
    role: str = PATH
    settle_s: float = 0.0
    tag: ClassVar[str] = "flow"
    writes: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        _op(self.op)
        if self.role not in (PATH, INGRESS):
            raise PlanError(f"step {self.id}: role {self.role!r} is neither {PATH!r} nor {INGRESS!r}")
        if self.restore is not None:
            if self.op != ADD:
                raise PlanError(f"step {self.id}: only an add overwrites a rule to restore")
            if self.restore.key() != self.rule.key():
                raise PlanError(f"step {self.id}: restore {self.restore.target()} is not the entry "
                                f"{self.rule.target()} overwrites (different switch, priority or match)")
        if self.settle_s < 0:
            raise PlanError(f"step {self.id}: settle_s {self.settle_s} < 0")

    @property
    def kind(self) -> str:
        return f"flow_{self.op}"

    def target(self) -> str:
        return self.rule.target()

    def inverse(self) -> Step:
        if self.restore is not None:
            return FlowStep(id=_undo_id(self.id), op=ADD, rule=self.restore, role=self.role,
                            settle_s=self.settle_s)
        return FlowStep(id=_undo_id(self.id), op=REMOVE if self.op == ADD else ADD, rule=self.rule,
                        role=self.role, settle_s=self.settle_s)

    def _fields(self) -> dict[str, Any]:
        return {"op": self.op, "role": self.role, "rule": self.rule.to_json(),
                "restore": None if self.restore is None else self.restore.to_json(), "settle_s": self.settle_s}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        restore = d.get("restore")
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), op=d["op"], rule=FlowRule.from_json(d["rule"]),
                   restore=None if restore is None else FlowRule.from_json(restore), role=d.get("role", PATH),
                   settle_s=d.get("settle_s", 0.0))


@dataclass(frozen=True, kw_only=True)
class GroupStep(_AddRemove):
    """Set or remove one fast-failover group (before the rules that output to it, after they are gone).

    ``restore`` is the group a set overwrites (same switch and id), so undo puts it back: removing a
    group would remove the rules that use it (OpenFlow 1.3 §6.5), traffic and all."""

    group: GroupSpec
    restore: GroupSpec | None = None
    tag: ClassVar[str] = "group"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.restore is not None and (self.op != ADD or (self.restore.switch, self.restore.group_id) != (
                self.group.switch, self.group.group_id)):
            raise PlanError(f"step {self.id}: only a set restores a group, and only the one it overwrites")

    def target(self) -> str:
        return self.group.target()

    def inverse(self) -> Step:
        if self.restore is not None:
            return GroupStep(id=_undo_id(self.id), op=ADD, group=self.restore)
        return super().inverse()

    def _fields(self) -> dict[str, Any]:
        return {"op": self.op, "group": self.group.to_json(),
                "restore": None if self.restore is None else self.restore.to_json()}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        restore = d.get("restore")
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), op=d["op"], group=GroupSpec.from_json(d["group"]),
                   restore=None if restore is None else GroupSpec.from_json(restore))


def _ports(ports: Iterable[Port]) -> tuple[Port, ...]:
    return tuple((str(s), int(p)) for s, p in ports)


@dataclass(frozen=True, kw_only=True)
class CircuitUpStep(Step):
    """The circuit-up barrier: every packet port of the new circuits up and stable for ``stable_s``,
    and every packet link seen by LLDP. XCON barrier replies alone say the OTS applied the change,
    not that the packet layer sees a usable link (the paper's "stable connection" barrier)."""

    ports: tuple[Port, ...]
    links: tuple[tuple[Port, Port], ...] = ()
    stable_s: float = 0.05
    timeout_s: float = 5.0
    tag: ClassVar[str] = "circuit_up"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ports", _ports(self.ports))
        object.__setattr__(self, "links", tuple((_ports([a])[0], _ports([b])[0]) for a, b in self.links))
        if not self.ports and not self.links:
            raise PlanError(f"step {self.id}: a circuit-up barrier needs ports or links to wait for")
        if self.stable_s < 0 or self.timeout_s <= 0:
            raise PlanError(f"step {self.id}: stable_s must be >= 0 and timeout_s > 0")

    def target(self) -> str:
        links = [f"{port_str(a)}-{port_str(b)}" for a, b in self.links]
        return "ports " + ",".join(map(port_str, self.ports)) + (f"; links {','.join(links)}" if links else "")

    def _fields(self) -> dict[str, Any]:
        return {"ports": [list(p) for p in self.ports], "links": [[list(a), list(b)] for a, b in self.links],
                "stable_s": self.stable_s, "timeout_s": self.timeout_s}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), ports=tuple(tuple(p) for p in d["ports"]),
                   links=tuple((tuple(a), tuple(b)) for a, b in d.get("links", ())),
                   stable_s=d["stable_s"], timeout_s=d["timeout_s"])


def _rules(rules: Iterable[FlowRule], step_id: str) -> tuple[FlowRule, ...]:
    out = tuple(rules)
    if not out:
        raise PlanError(f"step {step_id}: no rules to watch")
    return out


@dataclass(frozen=True, kw_only=True)
class VerifyStep(Step):
    """Data-plane verification: each rule's packet counter rises by ``min_packets`` within ``timeout_s``.
    A barrier reply never counts as proof that traffic moved."""

    rules: tuple[FlowRule, ...]
    min_packets: int = 1
    timeout_s: float = 2.0
    tag: ClassVar[str] = "verify"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "rules", _rules(self.rules, self.id))
        if self.min_packets < 1 or self.timeout_s <= 0:
            raise PlanError(f"step {self.id}: min_packets must be >= 1 and timeout_s > 0")

    def target(self) -> str:
        return "; ".join(r.target() for r in self.rules)

    def _fields(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "min_packets": self.min_packets,
                "timeout_s": self.timeout_s}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), rules=tuple(map(FlowRule.from_json, d["rules"])),
                   min_packets=d["min_packets"], timeout_s=d["timeout_s"])


@dataclass(frozen=True, kw_only=True)
class DrainStep(Step):
    """The old path is empty: none of ``rules``' counters moved for ``quiet_s`` (a missing rule is quiet)."""

    rules: tuple[FlowRule, ...]
    quiet_s: float = 0.2
    timeout_s: float = 5.0
    tag: ClassVar[str] = "drain"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "rules", _rules(self.rules, self.id))
        if self.quiet_s <= 0 or self.timeout_s <= self.quiet_s:
            raise PlanError(f"step {self.id}: need 0 < quiet_s < timeout_s")

    def target(self) -> str:
        return "; ".join(r.target() for r in self.rules)

    def _fields(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "quiet_s": self.quiet_s, "timeout_s": self.timeout_s}

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> Step:
        return cls(id=d["id"], deps=frozenset(d.get("deps", ())), rules=tuple(map(FlowRule.from_json, d["rules"])),
                   quiet_s=d["quiet_s"], timeout_s=d["timeout_s"])


_STEP_TYPES: dict[str, type[Step]] = {c.tag: c for c in (XconStep, FlowStep, GroupStep, CircuitUpStep, VerifyStep,
                                                          DrainStep)}
WAIT_TAGS = frozenset({CircuitUpStep.tag, DrainStep.tag})  # steps one-shot mode leaves out


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class Plan:
    """Steps in a dependency graph (checked acyclic). ``commit``: once all these steps are done, a
    failure no longer rolls back (traffic is already on the new, verified path); the executor then
    finishes what it can and reports ``failed``."""

    steps: tuple[Step, ...]
    kind: str
    mode: str = ORDERED
    id: str = field(default_factory=_new_id)
    commit: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "commit", frozenset(self.commit))
        self.check()

    # ------------------------------------------------------------------ structure
    def check(self) -> None:
        """PlanError unless ids are unique, deps known, the graph acyclic and the mode fits the steps."""
        if self.mode not in MODES:
            raise PlanError(f"plan {self.id}: mode {self.mode!r} is not one of {MODES}")
        ids: set[str] = set()
        for s in self.steps:
            if s.id in ids:
                raise PlanError(f"plan {self.id}: step id {s.id!r} used twice")
            ids.add(s.id)
        for s in self.steps:
            if s.id in s.deps:
                raise PlanError(f"plan {self.id}: step {s.id!r} depends on itself")
            unknown = s.deps - ids
            if unknown:
                raise PlanError(f"plan {self.id}: step {s.id!r} depends on unknown steps {sorted(unknown)}")
        if self.commit - ids:
            raise PlanError(f"plan {self.id}: commit names unknown steps {sorted(self.commit - ids)}")
        if self.mode == ONE_SHOT:
            waits = [s.id for s in self.steps if s.tag in WAIT_TAGS]
            if waits:
                raise PlanError(f"plan {self.id}: one-shot mode does not wait, but has {waits}")
        self.order()  # raises on a cycle

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def order(self) -> list[Step]:
        """The steps in a topological order (Kahn, ties in plan order); PlanError on a cycle."""
        indeg = {s.id: len(s.deps) for s in self.steps}
        users: dict[str, list[str]] = {s.id: [] for s in self.steps}
        for s in self.steps:
            for d in s.deps:
                users[d].append(s.id)
        pos = {s.id: i for i, s in enumerate(self.steps)}
        ready = sorted((i for i, n in indeg.items() if n == 0), key=pos.__getitem__)
        out: list[str] = []
        while ready:
            sid = ready.pop(0)
            out.append(sid)
            for u in users[sid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
            ready.sort(key=pos.__getitem__)
        if len(out) != len(self.steps):
            stuck = sorted(i for i, n in indeg.items() if n > 0)
            raise PlanError(f"plan {self.id}: dependency cycle among {stuck}")
        return [self.step(i) for i in out]

    def layers(self) -> list[list[Step]]:
        """Steps grouped by depth (longest dependency chain before them): each layer may run in parallel."""
        depth: dict[str, int] = {}
        for s in self.order():
            depth[s.id] = 1 + max((depth[d] for d in s.deps), default=-1)
        out: list[list[Step]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
        for s in self.steps:
            out[depth[s.id]].append(s)
        return out

    def ancestors(self, step_id: str) -> set[str]:
        """Every step that must be done before ``step_id`` (transitively)."""
        seen: set[str] = set()
        todo = list(self.step(step_id).deps)
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(self.step(d).deps)
        return seen

    def descendants(self, step_id: str) -> set[str]:
        """Every step that waits (transitively) for ``step_id``."""
        return {s.id for s in self.steps if step_id in self.ancestors(s.id)}

    # ------------------------------------------------------------------ roll-back
    def undo(self, step_ids: Iterable[str]) -> Plan:
        """The roll-back plan of ``step_ids``: the inverse of each change, in reverse dependency order
        (the inverse of ``s`` waits for the inverse of every undone step that depended on ``s``).
        Waiting steps are not repeated: a roll-back removes or restores rules, it adds no circuit.
        XCONs do not wait for each other's inverse (each is its own cross-connect): one that cannot be
        removed must not keep the others of a hop-by-hop chain in place."""
        chosen = [s for s in self.order() if s.id in set(step_ids) and s.writes]
        anc = {s.id: self.ancestors(s.id) for s in chosen}
        inverses: list[Step] = []
        for s in chosen:
            inv = s.inverse()
            assert inv is not None
            after = {t.id for t in chosen if s.id in anc[t.id] and not (s.tag == t.tag == XconStep.tag)}
            # only the nearest: u is implied when it waits for another t in ``after`` (inv(u) precedes inv(t))
            nearest = {u for u in after if not any(t in anc[u] for t in after if t != u)}
            inverses.append(inv.with_deps(_undo_id(t) for t in nearest))
        return Plan(tuple(reversed(inverses)), "rollback", ORDERED, f"{self.id}-rollback")

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "mode": self.mode, "commit": sorted(self.commit),
                "layers": [[s.id for s in layer] for layer in self.layers()],
                "steps": [s.to_json() for s in self.steps]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Plan:
        return cls(tuple(Step.from_json(s) for s in d["steps"]), d["kind"], d.get("mode", ORDERED), d["id"],
                   frozenset(d.get("commit", ())))
