"""The database schema of mlte (SQLAlchemy 2.x, typed ``Mapped[...]`` columns), owned by the
Alembic migrations in ``app/db/migrations`` (docs/database.md).

Times are stored as epoch seconds (``float``) so SQLite and PostgreSQL compare them the same way;
the REST layer converts them to ISO 8601. Who writes what: the web service writes users, tokens,
reservations and the audit log; the controller writes ``topology_snapshots`` and anonymous
``circuits``/``xcons`` (its ``topology_publisher`` app, through :class:`app.db.feed.Feed`), and through
:class:`app.db.provisioning.ProvisioningStore` a reservation's circuits, its ``reservation_rules``
and the ``plans`` it executed; both add ``events``.

Two groups of tables are declared next to the code that uses them, because ``monitor/`` and
``topology/`` must import nothing from ``app/``: the monitor's ``mon_samples``/``mon_events``
(:mod:`monitor.store`) and the node capabilities ``cap_nodes`` (:mod:`topology.capabilities`).
They are still created and changed only by the migrations here: :data:`METADATA` lists all three
declarations, and a test checks that the migrated database equals them.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from monitor.store import MonBase
from topology.capabilities import CapBase


class Base(DeclarativeBase):
    """Declarative base of the tables declared in this module."""


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(256), default=None)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    # copied into the login session; raising it (new password, disabled) ends every session of the user
    session_epoch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # refuses login, sessions and tokens; the user's reservations and audit entries stay
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user", cascade="all, delete-orphan")


class ApiToken(Base):
    """An API token; only its SHA-256 is stored, the token itself is shown once at creation."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float, default=None)
    expires_at: Mapped[float | None] = mapped_column(Float, default=None)  # null: never

    user: Mapped[User] = relationship(back_populates="tokens")


class Reservation(Base):
    """A bandwidth reservation between two switch ports over a time window (an OSCARS connection)."""

    __tablename__ = "reservations"
    __table_args__ = (Index("ix_reservations_window", "start_ts", "end_ts"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    description: Mapped[str] = mapped_column(Text, default="")
    src: Mapped[str] = mapped_column(String(64))
    src_vlan: Mapped[int | None] = mapped_column(Integer, default=None)
    dst: Mapped[str] = mapped_column(String(64))
    dst_vlan: Mapped[int | None] = mapped_column(Integer, default=None)
    bandwidth: Mapped[float] = mapped_column(Float)  # Mbit/s
    start_ts: Mapped[float] = mapped_column(Float)
    end_ts: Mapped[float] = mapped_column(Float)
    mode: Mapped[str] = mapped_column(String(16), default="static")  # static | elastic
    # "none" | "1+1": a 1+1 reservation is lit on a working and a fibre-disjoint protection path
    protection: Mapped[str] = mapped_column(String(8), default="none", server_default="none")
    # Mbit/s the controller provides now (an elastic reservation's meter; null until lit, or static)
    provisioned_bw: Mapped[float | None] = mapped_column(Float, default=None)
    state: Mapped[str] = mapped_column(String(16), index=True)
    state_reason: Mapped[str] = mapped_column(Text, default="")
    ero: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True), default=None)
    path: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), default=None)  # PathResult
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    hold_expires_ts: Mapped[float | None] = mapped_column(Float, default=None)
    created_ts: Mapped[float] = mapped_column(Float)
    updated_ts: Mapped[float] = mapped_column(Float)

    owner: Mapped[User] = relationship()
    circuits: Mapped[list[Circuit]] = relationship(back_populates="reservation", order_by="Circuit.id")
    rules: Mapped[list[ReservationRule]] = relationship(back_populates="reservation", order_by="ReservationRule.id")


class Circuit(Base):
    """An optical circuit (a chain of XCONs) set up by the controller, optionally for a reservation."""

    __tablename__ = "circuits"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int | None] = mapped_column(ForeignKey("reservations.id"), index=True, default=None)
    name: Mapped[str] = mapped_column(String(128))
    a_end: Mapped[str] = mapped_column(String(64))  # packet switch port, e.g. "A:3"
    z_end: Mapped[str] = mapped_column(String(64))
    capacity: Mapped[float] = mapped_column(Float)  # Mbit/s
    state: Mapped[str] = mapped_column(String(16))  # ACTIVE (installed) | RELEASED
    created_ts: Mapped[float] = mapped_column(Float)
    updated_ts: Mapped[float] = mapped_column(Float)

    reservation: Mapped[Reservation | None] = relationship(back_populates="circuits")
    xcons: Mapped[list[Xcon]] = relationship(back_populates="circuit", cascade="all, delete-orphan")


class Xcon(Base):
    """One cross-connect inside an OTS: ``ots:in_port`` ↔ ``ots:out_port``."""

    __tablename__ = "xcons"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    circuit_id: Mapped[int] = mapped_column(ForeignKey("circuits.id", ondelete="CASCADE"), index=True)
    ots: Mapped[str] = mapped_column(String(64))
    in_port: Mapped[int] = mapped_column(Integer)
    out_port: Mapped[int] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean, default=False)

    circuit: Mapped[Circuit] = relationship(back_populates="xcons")


class ReservationRule(Base):
    """A packet-switch flow rule the controller installed for a reservation.

    ``installed`` stays true until the controller reports it removed
    (:meth:`app.db.provisioning.ProvisioningStore.mark_released`). The cookie is stored as 16 hex
    digits: OpenFlow cookies are unsigned 64-bit, SQL integers signed.
    """

    __tablename__ = "reservation_rules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    switch: Mapped[str] = mapped_column(String(64))
    table_id: Mapped[int] = mapped_column(Integer, default=0)
    priority: Mapped[int] = mapped_column(Integer)
    cookie: Mapped[str] = mapped_column(String(16))
    match: Mapped[dict[str, Any]] = mapped_column(JSON)
    actions: Mapped[list[Any]] = mapped_column(JSON)
    installed: Mapped[bool] = mapped_column(Boolean, default=True, index=True)
    installed_ts: Mapped[float] = mapped_column(Float)
    removed_ts: Mapped[float | None] = mapped_column(Float, default=None)

    reservation: Mapped[Reservation] = relationship(back_populates="rules")


class Plan(Base):
    """An update plan the controller executed (provision, release, move...), with its steps.

    ``steps`` is a JSON list of ``{id, kind, target, deps, started_at, finished_at, ok, error}``.
    """

    __tablename__ = "plans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    mode: Mapped[str] = mapped_column(String(16))  # ordered | one_shot
    reservation_id: Mapped[int | None] = mapped_column(ForeignKey("reservations.id"), index=True, default=None)
    state: Mapped[str] = mapped_column(String(16), index=True)  # done | failed | rolled_back | running
    error: Mapped[str | None] = mapped_column(Text, default=None)
    started_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, default=None)  # None while running
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # several controllers (issue 24, app/db/plan_records.py): the running plan, its leader and step states
    uid: Mapped[str | None] = mapped_column(String(64), unique=True, index=True, default=None)
    epoch: Mapped[int | None] = mapped_column(BigInteger, default=None)
    source: Mapped[str | None] = mapped_column(String(32), default=None)
    owner: Mapped[str | None] = mapped_column(String(128), default=None)
    body: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    step_states: Mapped[dict[str, str] | None] = mapped_column(JSON, default=None)
    claimed_epoch: Mapped[int | None] = mapped_column(BigInteger, default=None)
    claim_done: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AuditEntry(Base):
    """One change made through the service: who, what, to which object, with the new values."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), default=None)
    action: Mapped[str] = mapped_column(String(32))
    entity: Mapped[str] = mapped_column(String(32))
    entity_id: Mapped[int | None] = mapped_column(Integer, default=None)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Event(Base):
    """A controller or service event (link down, circuit up, reservation activated...)."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    kind: Mapped[str] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(String(16), default="info")  # info | warning | error
    message: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Restoration(Base):
    """One repair of a lit reservation after a failure broke its path (docs/failures.md).

    ``cause``: what failed as the controller saw it (e.g. "fibre X:3"); ``detected_ts``: when the
    controller learnt of it; ``finished_ts``: when the reservation was ACTIVE on a verified new path
    (outcome "restored") or given up for now (outcome "degraded", retried later: a new row per try).
    ``old_path`` / ``new_path``: edge keys.
    """

    __tablename__ = "restorations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int] = mapped_column(ForeignKey("reservations.id"), index=True)
    cause: Mapped[str] = mapped_column(Text)
    detected_ts: Mapped[float] = mapped_column(Float)
    started_ts: Mapped[float] = mapped_column(Float)
    finished_ts: Mapped[float | None] = mapped_column(Float, default=None)
    outcome: Mapped[str] = mapped_column(String(16))  # restored | degraded | failed
    reason: Mapped[str] = mapped_column(Text, default="")
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    old_path: Mapped[list[str]] = mapped_column(JSON, default=list)
    new_path: Mapped[list[str]] = mapped_column(JSON, default=list)


class TopologySnapshot(Base):
    """The multi-layer graph as ``MultiLayerGraph.to_json()``; the newest row is the current topology."""

    __tablename__ = "topology_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    graph: Mapped[dict[str, Any]] = mapped_column(JSON)


class AdmissionLock(Base):
    """A single row that admission transactions lock (``SELECT ... FOR UPDATE``) on PostgreSQL.

    Serialising admission decisions on one row makes "check capacity, then book" atomic; on SQLite
    the same is achieved with ``BEGIN IMMEDIATE``.
    """

    __tablename__ = "admission_lock"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    counter: Mapped[int] = mapped_column(Integer, default=0)


class ControllerEpoch(Base):
    """The epoch of the newest controller leader (one row, id 1): the database fence (issue 24).

    A new leader raises ``epoch`` to its own (:func:`app.db.fencing.claim`); every write of a fenced
    controller locks this row ``FOR SHARE`` just before it commits and is refused if ``epoch`` is
    newer than its own (:func:`app.db.fencing.check`). ``since`` is epoch seconds, like every time here.
    """

    __tablename__ = "controller_epoch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    holder: Mapped[str] = mapped_column(Text, default="")
    since: Mapped[float] = mapped_column(Float, default=0.0)


class TeRecordRow(Base):
    """One offload or grown circuit of the TE loop (:class:`app.te.takeover.TeRecord`), shared by every
    controller on the database so the next leader adopts it (:class:`app.te.store.DbTeStore`).

    ``body`` is the record's JSON body (XCONs, rules, flows); ``epoch`` the writer's leader epoch
    (None: a controller without election); ``since`` epoch seconds.
    """

    __tablename__ = "te_records"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    ident: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    since: Mapped[float] = mapped_column(Float, default=0.0)
    threshold_mbps: Mapped[float] = mapped_column(Float, default=0.0)
    epoch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


#: Every table the migrations own, in the order of their declarations (Alembic's ``target_metadata``).
METADATA: tuple[MetaData, ...] = (Base.metadata, MonBase.metadata, CapBase.metadata)


def owned_tables() -> frozenset[str]:
    """Names of the tables the migrations own (anything else in the database is left alone)."""
    return frozenset(name for md in METADATA for name in md.tables)
