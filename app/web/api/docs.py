"""``/api/v1/openapi.json`` and the browsable API docs page ``/api/v1/docs`` (no JS, no CDN)."""
from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from app.web.openapi import document

bp = Blueprint("api_docs", __name__)


@bp.get("/openapi.json")
def openapi_json():  # noqa: ANN201
    return jsonify(document())


@bp.get("/docs")
def docs_page():  # noqa: ANN201
    return render_template("api_docs.html", doc=document())
