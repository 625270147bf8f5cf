"""``mlte topology show|draw|check-vendor-file`` through the real CLI entry point."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from app.cli.main import main
from topology.graph import MultiLayerGraph
from topology.spec import fig2_testbed, spec_to_graph

EXAMPLE = str(Path(__file__).resolve().parents[3] / "mininet_labs" / "data" / "fig2-optical.yaml")


def test_show_spec_text_and_json(capsys, tmp_path):
    assert main(["topology", "show", "--spec", "fig2"]) == 0
    assert "3 packet switches, 3 OTS (16 virtual ports)" in capsys.readouterr().out
    assert main(["topology", "show", "--spec", "fig2", "--json"]) == 0
    g = MultiLayerGraph.from_json(capsys.readouterr().out)
    assert g == spec_to_graph(fig2_testbed())


def test_show_from_file_merged_with_vendor_file(capsys, tmp_path):
    f = tmp_path / "g.json"
    g = spec_to_graph(fig2_testbed())
    g.remove_edge("optical:X:2-Y:1")
    f.write_text(g.to_json())
    assert main(["topology", "show", "--from", str(f), "--vendor-file", EXAMPLE, "--json"]) == 0
    out = capsys.readouterr()
    merged = MultiLayerGraph.from_json(out.out)
    assert "optical:X:2-Y:1" in merged.edges_of_kind("optical")  # the file filled the gap
    assert out.err == ""


def test_draw_and_check(capsys, tmp_path):
    f = tmp_path / "g.json"
    f.write_text(spec_to_graph(fig2_testbed()).to_json())
    png = tmp_path / "g.png"
    assert main(["topology", "draw", str(f), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png2 = tmp_path / "v.png"
    assert main(["topology", "draw", EXAMPLE, "-o", str(png2), "--potential", "hide"]) == 0
    assert png2.stat().st_size > 10_000
    assert main(["topology", "check-vendor-file", EXAMPLE]) == 0
    assert "OK: 3 OTS, 16 ports, 5 fibres, 6 adaptations" in capsys.readouterr().out


def test_user_errors_exit_2_without_traceback(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nots: [{name: X, dpid: 1, ports: {1: ODU7}}]\n")
    assert main(["topology", "check-vendor-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "ots[0].ports.1: unknown granularity 'ODU7'" in err and "Traceback" not in err
    assert main(["topology", "show", "--controller", "http://127.0.0.1:9"]) == 2
    assert "unreachable" in capsys.readouterr().err
    assert main(["topology", "show", "--from", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read" in capsys.readouterr().err
    assert main(["topology", "draw", "--spec", "fig2", "-o", str(tmp_path / "no" / "dir" / "g.png")]) == 2
    err = capsys.readouterr().err
    assert "g.png: cannot write" in err and "Traceback" not in err


@pytest.fixture
def fake_controller():
    g = spec_to_graph(fig2_testbed())
    g.set_xcon_active("X:1", "X:3")
    body = dict(g.to_dict(), problems=["scan: port Z:6 dark"])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            data = json.dumps(body).encode() if self.path == "/topology" else b"{}"
            self.send_response(200 if self.path == "/topology" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", g
    server.shutdown()
    server.server_close()


def test_show_from_controller(capsys, fake_controller):
    url, g = fake_controller
    assert main(["topology", "show", "--controller", url, "--json"]) == 0
    out = capsys.readouterr()
    assert MultiLayerGraph.from_json(out.out) == g
    assert "controller: scan: port Z:6 dark" in out.err
