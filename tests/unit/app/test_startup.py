"""``mlte web`` / ``mlte controller`` check every setting before serving: one line naming the setting,
exit status 2, no traceback, and nothing served (``waitress`` and the os-ken launcher are replaced by
tripwires, so a check that lets a bad setting through fails the test instead of serving)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


class Served(Exception):
    """Raised by the tripwires: the command got as far as serving."""


@pytest.fixture(autouse=True)
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    import waitress
    import waitress.server

    def served(*_a: object, **_k: object) -> None:
        raise Served("the server was started")

    monkeypatch.setattr(waitress, "serve", served)
    monkeypatch.setattr(waitress.server, "create_server", served)
    import app.controller.launcher as launcher

    monkeypatch.setattr(launcher, "run", served)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run ``mlte argv``; assert exit 2 and a single ``mlte: error:`` line containing ``needles``."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("mlte: error: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def web(tmp_path: Path, port: int, *extra: str) -> list[str]:
    return ["web", "--db", str(tmp_path / "ok.db"), "--port", str(port), *extra]


@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536"])
def test_web_port_out_of_range(tmp_path, capsys, port) -> None:  # noqa: ANN001
    one_line_error(capsys, web(tmp_path, 1, "--port", port), "--port", port, "1..65535")


def test_web_port_in_use(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port))
        busy.listen()
        one_line_error(capsys, web(tmp_path, free_port, "--host", "127.0.0.1"), "--port", f"127.0.0.1:{free_port}",
                       "in use")


def test_web_bad_host(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    one_line_error(capsys, web(tmp_path, free_port, "--host", "999.1.1.1"), "--host", "999.1.1.1")


@pytest.mark.parametrize(("db", "needles"), [
    ("foo://x", ("--db foo://x", "unknown database driver 'foo'")),
    ("postgresql+psycopg://u@127.0.0.1:1/x", ("--db postgresql+psycopg://u@127.0.0.1:1/x", "Connection refused")),
    ("postgresql://u:hunter2@127.0.0.1:1/x", ("u:***@127.0.0.1", "Connection refused")),
])
def test_web_bad_database(tmp_path, capsys, free_port, db, needles) -> None:  # noqa: ANN001
    line = one_line_error(capsys, ["web", "--db", db, "--port", str(free_port)], *needles)
    assert "hunter2" not in line


def test_web_unwritable_sqlite(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    (tmp_path / "afile").write_text("")
    for path in (tmp_path / "no" / "dir" / "x.db", tmp_path / "afile" / "x.db"):
        one_line_error(capsys, ["web", "--db", str(path), "--port", str(free_port)], f"--db {path}",
                       "cannot create or open the SQLite file")
        assert not path.exists()
    from app.db.migrate import open_migrated

    open_migrated(f"sqlite:///{tmp_path / 'ro.db'}").dispose()  # a migrated database ...
    ro = f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true"  # ... opened read-only
    one_line_error(capsys, ["web", "--db", ro, "--port", str(free_port)], "--db", "not writable")


@pytest.mark.parametrize(("content", "needle"), [
    ("not json", "not JSON"),
    ('{"nodes": 3}', "not a MultiLayerGraph.to_json() graph"),
    ('{"nodes": [{"id": "A"}], "links": []}', "without id/kind"),
    ('{"nodes": [], "links": []}', "no packet switch"),
    ('{"nodes": [{"id": "A", "kind": "packet"}, {"id": "B", "kind": "packet"}], "links": '
     '[{"u": "A", "v": "B", "key": "packet:A:1-B:1", "kind": "packet", "capacity": "lots"}]}', "not a number"),
])
def test_web_bad_topology_file(tmp_path, capsys, free_port, content, needle) -> None:  # noqa: ANN001
    f = tmp_path / "weird.json"
    f.write_text(content)
    one_line_error(capsys, web(tmp_path, free_port, "--topology", str(f)), "--topology", "weird.json", needle)


def test_web_unknown_topology_word(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    one_line_error(capsys, web(tmp_path, free_port, "--topology", "fig3"), "--topology", "'fig3'", "fig2")


def test_web_good_settings_reach_the_server(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    """The tripwire fires only once every check has passed: the checks refuse nothing good."""
    from topology.spec import fig2_testbed, spec_to_graph

    topo = tmp_path / "fig2.json"
    topo.write_text(json.dumps(spec_to_graph(fig2_testbed()).to_dict()))
    with pytest.raises(Served):
        main(web(tmp_path, free_port, "--host", "127.0.0.1", "--topology", str(topo)))


def test_config_check_refuses_bad_web_port(tmp_path, capsys) -> None:  # noqa: ANN001
    for port in (0, 99999):
        f = tmp_path / "web.toml"
        f.write_text(f"[web]\nport = {port}\n")
        one_line_error(capsys, ["config", "check", str(f)], "[web] port", str(port), "1..65535")
        one_line_error(capsys, ["-c", str(f), "web"], "[web] port")


def test_controller_bad_settings(tmp_path, capsys, free_port) -> None:  # noqa: ANN001
    ok_db = ["--db-url", str(tmp_path / "ctl.db")]
    one_line_error(capsys, ["controller", "--db-url", "foo://x"], "--db-url foo://x", "unknown database driver")
    one_line_error(capsys, ["controller", "--db-url", "postgresql+psycopg://u@127.0.0.1:1/x"], "--db-url",
                   "Connection refused")
    one_line_error(capsys, ["controller", "--db-url", str(tmp_path / "no" / "x.db")], "--db-url",
                   "cannot create or open")
    f = tmp_path / "ctl.toml"
    f.write_text("[controller]\nlisten_port = 0\n")
    one_line_error(capsys, ["-c", str(f), "controller", *ok_db], "[controller] listen_port", "1..65535")
    f.write_text("[controller]\napi_port = 70000\n")
    one_line_error(capsys, ["-c", str(f), "controller", *ok_db], "[controller] api_port", "1..65535")
    bad = tmp_path / "vendor.json"
    bad.write_text("{")
    one_line_error(capsys, ["controller", *ok_db, "--static-file", str(bad)], "--static-file", "invalid JSON")
    bad.write_bytes(b"\xff\xfe{")  # not UTF-8 (issue 14 item 8: was a UnicodeDecodeError traceback)
    one_line_error(capsys, ["controller", *ok_db, "--static-file", str(bad)], "--static-file", "not UTF-8")
    with pytest.raises(Served):  # good settings pass every check
        main(["controller", *ok_db, "--of-port", str(free_port), "--api-port", str(free_port + 1 if free_port < 65535 else 1024)])


def test_no_traceback_from_a_real_process(tmp_path, free_port) -> None:  # noqa: ANN001
    """The production entry point, unpatched: a bad driver is one line on stderr, exit 2."""
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "web", "--db", "foo://x", "--port", str(free_port)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "--db foo://x" in proc.stderr


def test_controller_start_line_is_not_a_warning_and_every_lock_is_greened(tmp_path, free_port) -> None:  # noqa: ANN001
    """Issue 14 item 8: the start banner was logged as WARNING, and eventlet reported "1 RLock(s) were
    not greened" (numpy's RNG lock, made by the argument parser's eager import of pce.otter)."""
    import os
    import time

    api_port = free_port + 1 if free_port < 65535 else 1024
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # eventlet skips its check under pytest
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "controller", "--of-port", str(free_port),
                                 "--api-port", str(api_port), "--db-url", ""],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env=env)
        try:
            deadline = time.monotonic() + 60
            while "mlte controller: OpenFlow on" not in err_path.read_text() and proc.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    text = err_path.read_text()
    start = [ln for ln in text.splitlines() if "mlte controller: OpenFlow on" in ln]
    assert start == [f"mlte controller: OpenFlow on 127.0.0.1:{free_port}, control API on http://127.0.0.1:{api_port}"], text
    assert "not greened" not in text and "WARNING" not in start[0]


def test_building_the_parser_loads_no_solver_or_numpy() -> None:
    code = ("import sys; from app.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in ('numpy', 'scipy', 'highspy', 'pulp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_web_start_line_names_the_topology(tmp_path, free_port) -> None:  # noqa: ANN001
    """Issue 14 item 3: the start-up line says which topology is served."""
    import os
    import time

    log = tmp_path / "web.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "web", "--db", str(tmp_path / "w.db"),
                                 "--port", str(free_port), "--topology", "fig2"], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while "serving on" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    line = next(ln for ln in log.read_text().splitlines() if "serving on" in ln)
    assert line.endswith("; topology: the built-in lab topology fig2 (not the live network)"), line
