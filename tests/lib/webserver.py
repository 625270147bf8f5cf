"""Live reservation-service servers for tests: waitress in a thread, or ``mlte web`` as a subprocess.

Both bind 127.0.0.1 on a free port and are stopped by the caller (context managers).
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            requests.get(url, timeout=2)
            return
        except requests.ConnectionError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


@contextlib.contextmanager
def serve_app(app, threads: int = 16) -> Iterator[str]:  # noqa: ANN001
    """Serve a Flask app with waitress in a background thread; yields the base URL."""
    from waitress import wasyncore
    from waitress.server import create_server

    server = create_server(app, host="127.0.0.1", port=0, threads=threads, ident="mlte-test",
                           connection_limit=200, backlog=256)
    url = f"http://127.0.0.1:{server.effective_port}"
    stop = threading.Event()

    def loop() -> None:
        # waitress's own run() never returns; poll in short rounds so the loop thread itself can close
        # every socket (closing them from another thread makes the poll fail on a dead descriptor)
        while not stop.is_set():
            wasyncore.loop(timeout=0.1, map=server._map, use_poll=True, count=1)
        server.task_dispatcher.shutdown(timeout=10)
        wasyncore.close_all(server._map)

    t = threading.Thread(target=loop, daemon=True, name="waitress-test")
    t.start()
    try:
        wait_http(url + "/api/v1/openapi.json")
        yield url
    finally:
        stop.set()
        t.join(timeout=30)


@contextlib.contextmanager
def serve_cli(db: str, *, log_path: Path, extra: list[str] | None = None) -> Iterator[str]:
    """Run ``mlte web`` as a subprocess (the production entry point); yields the base URL."""
    port = free_port()
    extra = list(extra or [])
    if "--topology" not in extra:  # a topology chosen on purpose: the lab testbed, unless a test names one
        extra += ["--topology", "fig2"]
    cmd = [sys.executable, "-m", "app.cli.main", "web", "--db", db, "--host", "127.0.0.1", "--port", str(port),
           *extra]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url + "/api/v1/openapi.json", proc=proc)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def create_user_cli(db: str, name: str, *, admin: bool = False, password: str | None = None) -> str:
    """``mlte web create-user`` and return the printed token."""
    cmd = [sys.executable, "-m", "app.cli.main", "web", "create-user", name, "--db", db]
    if admin:
        cmd.append("--admin")
    if password:
        cmd += ["--password", password]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[-1]
