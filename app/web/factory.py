"""The Flask application factory of the reservation service (see :mod:`app.web`)."""
from __future__ import annotations

import secrets
import time
from typing import Any

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from app.db.engine import Database
from app.db.migrate import open_migrated
from app.web.context import WebState, close_session
from app.web.errors import ApiError
from app.web.throttle import LoginThrottle
from app.web.topology_source import TopologySource


def create_app(test_config: dict[str, Any] | None = None, db: Database | None = None) -> Flask:
    """Build the Flask app; see the module docstring for the configuration keys.

    The app owns one :class:`Database` for the process: ``db`` if the caller (``mlte web``) has
    opened and migrated it already, else one on ``DATABASE``, migrated here."""
    from app.config import DEFAULTS

    app = Flask(__name__)
    app.config.update(
        DATABASE=DEFAULTS["db"]["url"],
        TOPOLOGY="controller",
        UNIT_MBPS=DEFAULTS["ots"]["unit_mbps"],
        HOLD_SECONDS=DEFAULTS["web"]["hold_seconds"],
        LOGIN_MAX_FAILURES=DEFAULTS["web"]["login_max_failures"],
        LOGIN_WINDOW_SECONDS=DEFAULTS["web"]["login_window_seconds"],
        GROOMING=DEFAULTS["web"]["grooming"],
        CLOCK=time.time,
        SECRET_KEY=secrets.token_hex(32),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        WTF_CSRF_TIME_LIMIT=None,
        MAX_CONTENT_LENGTH=1 << 20,
        JSON_SORT_KEYS=False,
    )
    if test_config:
        app.config.update(test_config)

    if db is None:
        # every table, the monitor's and the capability store's included (docs/database.md)
        db = open_migrated(app.config["DATABASE"])
    app.extensions["mlte"] = WebState(
        db=db, topology=TopologySource(app.config["TOPOLOGY"], app.config["UNIT_MBPS"]),
        clock=app.config["CLOCK"], hold_seconds=float(app.config["HOLD_SECONDS"]),
        login_throttle=LoginThrottle(int(app.config["LOGIN_MAX_FAILURES"]),
                                     float(app.config["LOGIN_WINDOW_SECONDS"]), app.config["CLOCK"]),
        grooming=bool(app.config["GROOMING"]))
    app.teardown_appcontext(close_session)
    from app.web import metrics

    metrics.install(app, db)  # GET /metrics; its request hooks go first, so they time every request

    from flask_wtf.csrf import CSRFProtect

    csrf = CSRFProtect(app)

    from app.web.api import register_api
    from app.web.ui import ui_bp

    api_blueprints = register_api(app)
    for bp in api_blueprints:
        csrf.exempt(bp)  # the API authenticates every mutating call with a bearer token, never a cookie
    app.register_blueprint(ui_bp)
    _register_error_handlers(app)
    return app


def _wants_json() -> bool:
    return request.path.startswith("/api/")


def _register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError):  # noqa: ANN202
        if not _wants_json():
            from app.web.ui import render_error

            return render_error(exc.status, exc.message)
        resp = jsonify(exc.to_json())
        resp.status_code = exc.status
        if exc.status == 401:
            resp.headers["WWW-Authenticate"] = 'Bearer realm="mlte"'
        return resp

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):  # noqa: ANN202
        if exc.code is not None and exc.code < 400:  # a redirect raised as an exception passes as it is
            return exc
        if not _wants_json():  # a page with the site's navigation, not Werkzeug's bare one
            from app.web.ui import render_error

            resp = app.make_response(render_error(exc.code or 500, exc.description or exc.name))
        else:
            resp = jsonify({"error": {"status": exc.code, "message": exc.description, "field": None}})
            resp.status_code = exc.code or 500
        if exc.code == 405 and exc.valid_methods:
            resp.headers["Allow"] = ", ".join(exc.valid_methods)
        return resp

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):  # noqa: ANN202
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        from app.web.ui import render_error

        status, message = (400, str(exc)) if getattr(exc, "user_error", False) else (500, "internal error (logged)")
        if _wants_json():
            return jsonify({"error": {"status": status, "message": message, "field": None}}), status
        return render_error(status, message)  # escaped: a message may quote user input
