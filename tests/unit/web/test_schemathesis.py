"""schemathesis (v4 CLI) against the served OpenAPI document of a live waitress server: no 5xx, no
response that violates the documented status codes, content types, headers or schemas."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.web import create_app
from app.web.auth import create_user
from tests.lib.webserver import serve_app

CHECKS = ",".join(["not_a_server_error", "status_code_conformance", "content_type_conformance",
                   "response_schema_conformance", "response_headers_conformance"])


def _schemathesis() -> list[str]:
    exe = Path(sys.executable).with_name("schemathesis")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    if found is None:
        pytest.skip("schemathesis CLI not installed")
    return [found]


def test_schemathesis_finds_nothing(tmp_path) -> None:  # noqa: ANN001
    app = create_app({"DATABASE": str(tmp_path / "st.db"), "SECRET_KEY": "st", "TOPOLOGY": "fig2"})
    db = app.extensions["mlte"].db
    with db.session() as s:
        _, token = create_user(s, "root", admin=True)
        s.commit()
    report = tmp_path / "junit.xml"
    try:
        with serve_app(app) as url:
            proc = subprocess.run(
                [*_schemathesis(), "run", f"{url}/api/v1/openapi.json", "-H", f"Authorization: Bearer {token}",
                 "--checks", CHECKS, "--max-examples", "40", "--seed", "7", "--generation-database", "none",
                 "--no-color", "--report", "junit", "--report-junit-path", str(report)],
                capture_output=True, text=True, timeout=300)
    finally:
        db.dispose()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "17 selected / 17 total" in " ".join(out.split()), out[-3000:]
    assert report.exists() and 'failures="0"' in report.read_text()
