"""The OpenAPI document: served, documents every API route, and the docs page renders it."""
from __future__ import annotations

import re

from app.web.openapi import document


def test_served_document_lists_every_route(client, app) -> None:  # noqa: ANN001
    doc = client.get("/api/v1/openapi.json").get_json()
    assert doc["openapi"].startswith("3.") and doc == document()
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    served = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/") or rule.rule.endswith(("openapi.json", "/docs")):
            continue
        path = re.sub(r"<(?:int:)?(\w+)>", r"{\1}", rule.rule)
        served |= {(path, m) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert served == documented


def test_every_ref_resolves() -> None:
    doc = document()
    text = repr(doc)
    for name in set(re.findall(r"#/components/schemas/(\w+)", text)):
        assert name in doc["components"]["schemas"], name


def test_docs_page(client) -> None:  # noqa: ANN001
    r = client.get("/api/v1/docs")
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert "/api/v1/reservations/{res_id}/commit" in html and "cdn" not in html.lower()
