"""docs/rest.md: every ``sh`` example runs verbatim (one bash script, ``set -euo pipefail``) against a
live ``mlte web`` server, and its output shows what the document says it does."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.lib.webserver import ROOT, create_user_cli, serve_cli


def sh_blocks() -> list[str]:
    text = (ROOT / "docs" / "rest.md").read_text()
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_doc_has_examples_for_every_operation() -> None:
    script = "\n".join(sh_blocks())
    for needle in ("/commit", "/cancel", "-X PATCH", "/history", "/restorations", "/api/v1/available", "/api/v1/topology",
                   "/api/v1/circuits", "/api/v1/plans", "/api/v1/utilization", "/api/v1/events", "-G \"$MLTE/api/v1/reservations\""):
        assert needle in script, needle


def test_curl_examples_run(tmp_path) -> None:  # noqa: ANN001
    if shutil.which("curl") is None or shutil.which("python3") is None:
        pytest.skip("the examples need curl and python3 on PATH")
    db = str(tmp_path / "doc.db")
    token = create_user_cli(db, "alice")
    script = "set -euo pipefail\n" + "\n".join(sh_blocks())
    with serve_cli(db, log_path=tmp_path / "server.log") as url:
        proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "MLTE": url, "TOKEN": token})
    out = proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "created reservation 1" in out
    assert "HELD ['A'" in proc.stderr  # the create example prints state and path
    assert '"state":"RESERVED"' in out and '"state":"CANCELLED"' in out
    assert '"circuits":[]' in out and '"rules":[]' in out  # nothing lit
    assert out.count('{"items":[]}') == 3  # no restoration, no circuit, no plan
    assert '"bandwidth":6.0' in out and '"end":"2099-01-01T13:00:00Z"' in out
    assert '"total":1' in out and '"available":' in out
    assert re.search(r'"protection":\{"available":10\.0,.*"nodes":\["A","X:\d","X:\d","Z:\d","Z:\d","C"\]', out)
    assert re.search(r'"field":"bandwidth".*\n+HTTP 409', out), out[-2500:]
    assert '"available":10.0,"bottleneck":"Z:4"' in out  # the path's real maximum, not the access link's 14
    assert re.search(r'"field":"end".*\n+HTTP 400', out)
    assert (tmp_path / "topology.json").stat().st_size > 1000
