"""Node-capability store keyed by DPID (OSCARS-TE §III.7), in any SQLAlchemy database.

The PCE must know per node how fast it switches, whether it allows one rule per port, how many
rules fit, VLAN restrictions and the granularity of each port before it places bandwidth; the
controller fills the store from FEATURES_REPLY / the OTS capabilities message and config.
Plain SQLAlchemy 2.x (own ``DeclarativeBase``, tables prefixed ``cap_``), no Flask. The table is
declared here but created and changed only by mlte's migrations (``app/db/migrations``,
docs/database.md): :class:`CapabilityStore` takes an engine that its process's entry point has
already migrated, so this module imports nothing from ``app/``.

    store = CapabilityStore(open_migrated("sqlite:///mlte.db").engine)  # app.db.migrate, at the entry
    store.upsert(NodeCapabilities(dpid=0xF01, switch_type="optical", switching_time=0.185, ...))
    store.get(0xF01).granularity[3]  # "ODU2"
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from topology import granularity as gran
from topology.errors import TopologyError

SWITCH_TYPES = ("packet", "optical")
_TYPE_ALIASES = {"ots": "optical", "optical": "optical", "packet": "packet"}


class CapabilityError(TopologyError):
    """Invalid capabilities."""


class CapBase(DeclarativeBase):
    """Declarative base of the capability tables (listed in ``app.db.models.METADATA``)."""


class CapNode(CapBase):
    """One row per switch. The dpid is stored as 16 hex digits: SQL integers are signed 64-bit."""

    __tablename__ = "cap_nodes"

    dpid: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(64))
    switch_type: Mapped[str] = mapped_column(String(16))
    switching_time: Mapped[float] = mapped_column(Float)
    one_rule_per_port: Mapped[bool] = mapped_column(Boolean)
    flow_table_capacity: Mapped[int | None] = mapped_column(Integer)
    vlan_restrictions: Mapped[Any] = mapped_column(JSON, nullable=True)
    match_fields: Mapped[Any] = mapped_column(JSON, nullable=True)
    granularity: Mapped[dict[str, str]] = mapped_column(JSON)
    setup_time_min: Mapped[float | None] = mapped_column(Float)
    setup_time_max: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


@dataclass(frozen=True)
class NodeCapabilities:
    """What one switch can do.

    ``switching_time`` (s): time to apply a rule (ps-scale for packet switches, the XCON setup
    time for an OTS). ``vlan_restrictions``: None = none; else a JSON value such as
    ``[[100, 199]]`` (allowed VLAN id ranges) or ``"no-vlan-match"`` (an OTS switches containers).
    ``granularity``: port -> ODU granularity (OTS ports only). ``setup_time_min``/``max``: XCON
    provisioning range (s). ``flow_table_capacity``: max rules (None = unknown).
    """

    dpid: int
    switch_type: str
    switching_time: float
    one_rule_per_port: bool = False
    flow_table_capacity: int | None = None
    vlan_restrictions: Any = None
    match_fields: list[str] | None = None
    granularity: dict[int, str] = field(default_factory=dict)
    setup_time_min: float | None = None
    setup_time_max: float | None = None
    name: str | None = None
    updated_at: float = 0.0

    def validated(self) -> NodeCapabilities:
        """A normalised copy (canonical type and granularity names), or CapabilityError."""
        where = f"capabilities of dpid {self.dpid!r}"
        if isinstance(self.dpid, bool) or not isinstance(self.dpid, int) or not 0 <= self.dpid < 2**64:
            raise CapabilityError(f"{where}: dpid must be an integer in [0, 2^64)")
        stype = _TYPE_ALIASES.get(str(self.switch_type).lower())
        if stype is None:
            raise CapabilityError(f"{where}: switch_type must be one of {', '.join(SWITCH_TYPES)}, "
                                  f"got {self.switch_type!r}")
        if not isinstance(self.switching_time, (int, float)) or self.switching_time < 0:
            raise CapabilityError(f"{where}: switching_time must be >= 0 s, got {self.switching_time!r}")
        if self.flow_table_capacity is not None and (
                isinstance(self.flow_table_capacity, bool) or not isinstance(self.flow_table_capacity, int)
                or self.flow_table_capacity < 0):
            raise CapabilityError(f"{where}: flow_table_capacity must be an integer >= 0 or None")
        lo, hi = self.setup_time_min, self.setup_time_max
        if (lo is None) != (hi is None) or (lo is not None and hi is not None and not 0 <= lo <= hi):
            raise CapabilityError(f"{where}: need 0 <= setup_time_min <= setup_time_max (both or neither)")
        if isinstance(self.vlan_restrictions, list):
            for r in self.vlan_restrictions:
                if not (isinstance(r, (list, tuple)) and len(r) == 2 and 0 <= r[0] <= r[1] <= 4095):
                    raise CapabilityError(f"{where}: VLAN ranges must be [lo, hi] within 0..4095, got {r!r}")
        ports: dict[int, str] = {}
        for p, g in self.granularity.items():
            try:
                ports[int(p)] = gran.normalize(g)
            except (TopologyError, ValueError) as exc:
                raise CapabilityError(f"{where}: port {p!r}: {exc}") from None
        if ports and stype != "optical":
            raise CapabilityError(f"{where}: only optical switches have port granularities")
        vlans = [list(r) for r in self.vlan_restrictions] if isinstance(self.vlan_restrictions, list) \
            else self.vlan_restrictions
        return replace(self, switch_type=stype, granularity=dict(sorted(ports.items())), vlan_restrictions=vlans,
                       match_fields=list(self.match_fields) if self.match_fields is not None else None)

    @classmethod
    def from_ots_report(cls, data: dict[str, Any]) -> NodeCapabilities:
        """From the virtual OTS's capabilities message, as a dict (docs/ots.md, "Vendor message")."""
        try:
            ports = {int(p): v["granularity"] for p, v in data.get("ports", {}).items()}
            lo, hi = float(data["setup_time_min"]), float(data["setup_time_max"])
            return cls(dpid=int(data["dpid"]), name=data.get("name"), switch_type=data.get("switch_type", "optical"),
                       switching_time=(lo + hi) / 2, one_rule_per_port=bool(data.get("one_rule_per_port", True)),
                       flow_table_capacity=data.get("table_capacity"), vlan_restrictions=data.get("vlan_restrictions"),
                       match_fields=list(data.get("match_fields", ["in_port"])), granularity=ports,
                       setup_time_min=lo, setup_time_max=hi).validated()
        except (KeyError, TypeError, ValueError) as exc:
            raise CapabilityError(f"bad OTS capabilities report: {exc!r}") from None


def _to_row(c: NodeCapabilities, row: CapNode) -> None:
    row.name = c.name
    row.switch_type = c.switch_type
    row.switching_time = float(c.switching_time)
    row.one_rule_per_port = bool(c.one_rule_per_port)
    row.flow_table_capacity = c.flow_table_capacity
    row.vlan_restrictions = c.vlan_restrictions
    row.match_fields = c.match_fields
    row.granularity = {str(p): g for p, g in c.granularity.items()}
    row.setup_time_min = c.setup_time_min
    row.setup_time_max = c.setup_time_max
    row.updated_at = c.updated_at


def _from_row(row: CapNode) -> NodeCapabilities:
    return NodeCapabilities(
        dpid=int(row.dpid, 16), name=row.name, switch_type=row.switch_type, switching_time=row.switching_time,
        one_rule_per_port=row.one_rule_per_port, flow_table_capacity=row.flow_table_capacity,
        vlan_restrictions=row.vlan_restrictions, match_fields=row.match_fields,
        granularity={int(p): g for p, g in sorted(row.granularity.items(), key=lambda x: int(x[0]))},
        setup_time_min=row.setup_time_min, setup_time_max=row.setup_time_max, updated_at=row.updated_at)


class CapabilityStore:
    """Upsert/get/list/delete node capabilities in a database migrated by its owner."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine  # migrated and disposed by its owner (the process's entry point)

    def upsert(self, caps: NodeCapabilities, now: float | None = None) -> NodeCapabilities:
        """Insert or replace the capabilities of ``caps.dpid``; returns what was stored."""
        c = replace(caps.validated(), updated_at=time.time() if now is None else now)
        with Session(self.engine) as s, s.begin():
            row = s.get(CapNode, f"{c.dpid:016x}")
            if row is None:
                row = CapNode(dpid=f"{c.dpid:016x}")
                s.add(row)
            _to_row(c, row)
        return c

    def get(self, dpid: int) -> NodeCapabilities | None:
        """The capabilities of ``dpid``, or None if unknown."""
        with Session(self.engine) as s:
            row = s.get(CapNode, f"{dpid:016x}")
            return None if row is None else _from_row(row)

    def list(self, switch_type: str | None = None) -> list[NodeCapabilities]:
        """All stored nodes (optionally of one type), by dpid."""
        stmt = select(CapNode).order_by(CapNode.dpid)
        if switch_type is not None:
            stype = _TYPE_ALIASES.get(switch_type)
            if stype is None:
                raise CapabilityError(f"unknown switch type {switch_type!r}")
            stmt = stmt.where(CapNode.switch_type == stype)
        with Session(self.engine) as s:
            return [_from_row(r) for r in s.scalars(stmt)]

    def delete(self, dpid: int) -> bool:
        """Forget ``dpid``; True if it was stored."""
        with Session(self.engine) as s, s.begin():
            row = s.get(CapNode, f"{dpid:016x}")
            if row is None:
                return False
            s.delete(row)
            return True
