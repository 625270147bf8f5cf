"""The several-controller labs' CI check, once: the failover lab and the soak (tests/integration) run
their ``--quick`` size with a private etcd and PostgreSQL and must log no controller handler error."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest


def run_quick(lab_module: str, out: Path, **kwargs: Any) -> dict[str, Any]:
    """``mininet_labs.<lab_module>.run(out, quick=True, **kwargs)`` quietly; skipped without the etcd client."""
    pytest.importorskip("etcd3gw")
    run = importlib.import_module(f"mininet_labs.{lab_module}").run
    res = run(out, quick=True, progress=lambda _line: None, **kwargs)
    assert res["controller_errors"] == "", res["controller_errors"]
    return res
