"""Database models of the reservation service (SQLAlchemy 2.x, typed ``Mapped[...]`` columns).

Times are stored as epoch seconds (``float``) so SQLite and PostgreSQL compare them the same way;
the REST layer converts them to ISO 8601. The controller writes ``topology_snapshots`` and
``circuits``/``xcons`` (its ``db_feed`` app, through :class:`app.web.feed.Feed`) and may add
``events``; the web service writes the rest. Utilization series and monitoring events are not
here: they live in the monitor's ``mon_samples``/``mon_events`` (``app/web/monitor_read.py``).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    """Own declarative base: the web service's tables only."""


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(256), default=None)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user", cascade="all, delete-orphan")


class ApiToken(Base):
    """An API token; only its SHA-256 is stored, the token itself is shown once at creation."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[float] = mapped_column(Float)

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
    state: Mapped[str] = mapped_column(String(16), index=True)
    state_reason: Mapped[str] = mapped_column(Text, default="")
    ero: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True), default=None)
    path: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), default=None)  # PathResult
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    hold_expires_ts: Mapped[float | None] = mapped_column(Float, default=None)
    created_ts: Mapped[float] = mapped_column(Float)
    updated_ts: Mapped[float] = mapped_column(Float)

    owner: Mapped[User] = relationship()
    circuits: Mapped[list[Circuit]] = relationship(back_populates="reservation")


class Circuit(Base):
    """An optical circuit (a chain of XCONs) set up by the controller, optionally for a reservation."""

    __tablename__ = "circuits"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reservation_id: Mapped[int | None] = mapped_column(ForeignKey("reservations.id"), index=True, default=None)
    name: Mapped[str] = mapped_column(String(128))
    a_end: Mapped[str] = mapped_column(String(64))  # packet switch port, e.g. "A:3"
    z_end: Mapped[str] = mapped_column(String(64))
    capacity: Mapped[float] = mapped_column(Float)  # Mbit/s
    state: Mapped[str] = mapped_column(String(16))  # e.g. PLANNED | ACTIVE | DOWN | RELEASED
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
