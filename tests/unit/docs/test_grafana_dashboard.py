"""docs/grafana/mlte.json is a dashboard Grafana can load, and every query in it names a metric the
controller or ``mlte web`` really exports; docs/monitor.md documents every exported metric."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.controller.db_writer import DbWriter
from app.controller.mastership import Mastership
from app.controller.metrics import ControllerMetrics
from app.controller.metrics_collector import NetworkCollector
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "mlte.json"
#: a metric in a PromQL selector: a name right before ``{`` or ``[`` (every query here selects a job)
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]")
OURS = re.compile(r"\b((?:mlte|process)_[a-z0-9_]+)")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def _names(text: str) -> dict[str, set[str]]:
    """``{family: sample names}`` of one exposition, as Prometheus stores them."""
    return {f.name: {f.name + s for s in SUFFIXES.get(f.type, ("",))} for f in text_string_to_metric_families(text)}


_TEXTS: list[str] = []


def _expositions() -> list[str]:
    """One scrape of a controller's registry (every source present) and of a web app's."""
    if not _TEXTS:
        import tempfile

        from app.web import create_app

        metrics = ControllerMetrics()
        metrics.attach(NetworkCollector(NetworkView(), OpenFlowSouthbound(), Mastership(), writer=lambda: DbWriter()))
        _TEXTS.append(metrics.render().decode())
        with tempfile.TemporaryDirectory() as tmp:
            app = create_app({"DATABASE": f"{tmp}/web.db", "TOPOLOGY": "fig2", "TESTING": True, "SECRET_KEY": "test"})
            try:
                _TEXTS.append(app.extensions["mlte_metrics"].render().decode())
            finally:
                app.extensions["mlte"].db.dispose()
    return _TEXTS


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Every family both processes export, each with every series a source can have."""
    names: dict[str, set[str]] = {}
    for text in _expositions():
        names.update(_names(text))
    return names


def _queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return out


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"]), p["title"]
    variables = {v["name"] for v in dash["templating"]["list"]}
    for _title, expr in _queries():
        assert set(re.findall(r"\$(\w+)", expr)) <= variables, expr


def test_every_query_names_an_exported_metric(exported) -> None:  # noqa: ANN001
    series = set().union(*exported.values())
    for title, expr in _queries():
        used = set(SELECTOR.findall(expr)) | set(OURS.findall(expr))
        assert used, (title, expr)
        assert used <= series, f"{title}: {sorted(used - series)} not exported ({expr})"


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    text = " ".join(expr for _t, expr in _queries())
    for family in ("mlte_switches", "mlte_ports", "mlte_links", "mlte_circuits_lit", "mlte_web_reservations",
                   "mlte_plans_total", "mlte_plan_step_duration_seconds_bucket", "mlte_monitor_cycle_duration_seconds",
                   "mlte_te_decisions_total", "mlte_te_decision_duration_seconds_bucket", "mlte_db_writer_queue_jobs",
                   "mlte_handler_failures_total", "mlte_service_failures_total", "mlte_openflow_messages_sent_total",
                   "mlte_mastership_leader", "mlte_mastership_epoch", "mlte_web_requests_total",
                   "mlte_web_request_duration_seconds_bucket", "mlte_web_users"):
        assert family in text, family


def test_every_exported_metric_is_documented(exported) -> None:  # noqa: ANN001
    doc = (ROOT / "docs" / "monitor.md").read_text()
    section = doc[doc.index("## Metrics"):]
    missing = [name for name in exported if name.startswith("mlte_") and not name.endswith("_created")
               and not any(f"`{s}`" in section or f"`{s}{{" in section for s in {name, *exported[name]})]
    assert missing == []


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: apt-get install prometheus)")
def test_prometheus_own_tools_accept_the_queries_and_the_expositions(exported, tmp_path) -> None:  # noqa: ANN001
    """Prometheus's ``promtool``: every dashboard query parses as PromQL (as a recording rule), and both
    expositions pass its lint (names, units, ``_total`` on counters, help texts)."""
    assert PROMTOOL is not None
    rules = [{"record": f"mlte:query{i}", "expr": re.sub(r"\$(\w+)", r"\1", expr)}
             for i, (_t, expr) in enumerate(_queries())]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"SUCCESS: {len(rules)} rules found" in out.stdout, out.stdout + out.stderr
    for text in _expositions():
        out = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr
