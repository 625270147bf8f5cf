"""REST API blueprints, one per resource, all under ``/api/v1``."""
from __future__ import annotations

from flask import Blueprint, Flask

PREFIX = "/api/v1"


def register_api(app: Flask) -> list[Blueprint]:
    from app.web.api.docs import bp as docs_bp
    from app.web.api.network import bp as network_bp
    from app.web.api.reservations import bp as reservations_bp
    from app.web.api.telemetry import bp as telemetry_bp

    bps = [reservations_bp, network_bp, telemetry_bp, docs_bp]
    for bp in bps:
        app.register_blueprint(bp, url_prefix=PREFIX)
    return bps
