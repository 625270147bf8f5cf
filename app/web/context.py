"""Per-request helpers: the read session, write transactions holding the admission lock, the clock."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import current_app, g, request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.lifecycle import due_condition
from app.db.models import Reservation
from app.web.errors import ApiError
from app.web.throttle import LoginThrottle

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.db.engine import Database
    from app.web.topology_source import TopologySource
    from topology.graph import MultiLayerGraph


@dataclass
class WebState:
    """What ``create_app`` puts into ``app.extensions["mlte"]``."""

    db: Database
    topology: TopologySource
    clock: Callable[[], float]
    hold_seconds: float
    login_throttle: LoginThrottle
    grooming: bool = False  # [web] grooming: reservations may ride circuits others booked


def state() -> WebState:
    return current_app.extensions["mlte"]


def now() -> float:
    return state().clock()


def read_session() -> Session:
    """A session for this request's reads (closed at teardown)."""
    if "db_session" not in g:
        g.db_session = state().db.session()
    return g.db_session


def close_session(_exc: BaseException | None = None) -> None:
    s = g.pop("db_session", None)
    if s is not None:
        s.close()


@contextmanager
def write_tx() -> Iterator[Session]:
    """A transaction holding the admission lock; commits on success, rolls back on any error.

    Time-driven transitions (expired holds, started/ended windows) are applied first, so every
    decision sees current states.
    """
    from app.web import service

    close_session()  # give the read connection back first: a request never holds two connections
    st = state()
    with st.db.writer():
        s = st.db.session()
        try:
            st.db.lock_for_write(s)
            service.advance(s, st.clock())
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()


def advance_if_due() -> None:
    """Apply due time-driven transitions before a read; takes the write lock only when needed."""
    t = now()
    due = read_session().execute(select(func.count()).select_from(Reservation).where(due_condition(t))).scalar()
    if due:
        with write_tx():
            pass
        read_session().commit()  # end the read snapshot so the transitions are visible
        read_session().expire_all()


def graph(session: Session) -> MultiLayerGraph:
    return state().topology.graph(session)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_body() -> Any:
    """The request body as JSON; malformed JSON or a wrong content type is a 4xx naming ``body``."""
    ctype = (request.mimetype or "").lower()
    if ctype != "application/json":
        raise ApiError("Content-Type must be application/json", field="Content-Type", status=415)
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise ApiError("request body is empty; send a JSON object", field="body")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(f"malformed JSON: {exc}", field="body") from None
