"""``GET /metrics`` of the reservation service in the Prometheus text format (docs/monitor.md "Metrics").

Reservations by state and users are read from the database when Prometheus scrapes (a custom
collector: the database is the one source, nothing is counted twice); requests by endpoint and
status and their latency are recorded by two request hooks. Each app gets its own
``CollectorRegistry`` (never the global default), so tests run several apps in one process.

The answer needs a login: any user's bearer token (or a login session). It shows counts only — no
user name, no endpoint port, no path — so an unprivileged account made for the scraper is enough
(``mlte web user create prometheus``); without any credential the service, which may face a network,
tells nobody how many users or reservations it has.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from flask import Flask, Response, current_app, g, request
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select

from app.db.models import Reservation, User
from app.db.states import STATES

if TYPE_CHECKING:
    from app.db.engine import Database

EXTENSION = "mlte_metrics"
#: the classic text format (every metric name here is plain ASCII): Prometheus 2.x and 3.x both read it
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: a page or an API call: ~5 ms when idle; admission and the PCE take longer
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNMATCHED = "unmatched"  # the endpoint label of a request no route matched (a 404): bounded cardinality
#: methods kept as label values; any other method a client sends is ``other`` (labels never take
#: arbitrary values from a request)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class DatabaseCollector:
    """Reservations by state and users by role, counted in the database at scrape time."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def describe(self) -> list[Metric]:
        return []  # no query at registration

    def collect(self) -> Iterator[Metric]:
        with self.db.session() as s:
            by_state = dict(s.execute(select(Reservation.state, func.count()).group_by(Reservation.state)).all())
            users = s.execute(select(User.is_admin, User.disabled, func.count())
                              .group_by(User.is_admin, User.disabled)).all()
        res = GaugeMetricFamily("mlte_web_reservations", "Reservations, by state (every state of the life cycle)",
                                labels=["state"])
        for st in STATES:
            res.add_metric([st], by_state.get(st, 0))
        yield res
        fam = GaugeMetricFamily("mlte_web_users", "Users, by role (admin, user) and status (enabled, disabled)",
                                labels=["role", "status"])
        counts = {(bool(a), bool(d)): n for a, d, n in users}
        for admin in (True, False):
            for disabled in (False, True):
                fam.add_metric(["admin" if admin else "user", "disabled" if disabled else "enabled"],
                               counts.get((admin, disabled), 0))
        yield fam


class WebMetrics:
    """One app's registry: the database collector, the request counters, this process's figures."""

    def __init__(self, db: Database, *, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        if process:
            ProcessCollector(registry=self.registry)
        self.registry.register(DatabaseCollector(db))
        self.requests = Counter("mlte_web_requests", "HTTP requests answered, by endpoint (the route's rule), "
                                "method and status", ["endpoint", "method", "status"], registry=self.registry)
        self.latency = Histogram("mlte_web_request_duration_seconds", "Time to answer a request, by endpoint "
                                 "and method", ["endpoint", "method"], buckets=LATENCY_BUCKETS, registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _started() -> None:
    g.metrics_started = time.perf_counter()


def _answered(response: Response) -> Response:
    metrics = _of_app()
    rule = request.url_rule.rule if request.url_rule is not None else UNMATCHED
    method = request.method if request.method in METHODS else "other"
    metrics.requests.labels(rule, method, str(response.status_code)).inc()
    started = g.get("metrics_started")
    if started is not None:  # None: a hook registered before ours answered first
        metrics.latency.labels(rule, method).observe(time.perf_counter() - started)
    return response


def _of_app() -> WebMetrics:
    return current_app.extensions[EXTENSION]


def _scrape() -> Response:
    from app.web.auth import require_user
    from app.web.context import advance_if_due, read_session

    require_user(read_session(), allow_session=True)
    advance_if_due()  # the time-driven transitions first, as every read of the reservations does
    return Response(_of_app().render(), content_type=CONTENT_TYPE)


def install(app: Flask, db: Database) -> WebMetrics:
    """The app's registry, its request hooks (call before any other ``before_request`` is registered,
    so every request is timed from the start) and ``GET /metrics``."""
    metrics = WebMetrics(db)
    app.extensions[EXTENSION] = metrics
    app.before_request(_started)
    app.after_request(_answered)
    app.add_url_rule("/metrics", "metrics", _scrape, methods=["GET"])
    return metrics
