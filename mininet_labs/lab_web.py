"""The reservation service (``mlte web``) beside a lab's controller: one user, its token, the REST URL.

Labs that drive reservations the way an operator does start it on the controller's database; this
starts it, waits until it answers and has a topology snapshot, and always stops it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from app.controller.client import wait_until
from mininet_labs import lab_registry

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LabWeb:
    url: str  # .../api/v1
    headers: dict[str, str]  # the lab user's bearer token
    port: int


def get(url: str, headers: dict) -> Any:
    """The JSON at ``url``, or None (not answering, not found, not JSON)."""
    try:
        r = requests.get(url, headers=headers, timeout=5)
        return r.json() if r.ok else None
    except (requests.RequestException, ValueError):
        return None


@contextmanager
def lab_web(db: Path | str, log: Path, extra: tuple[str, ...] = ()) -> Iterator[LabWeb]:
    """``mlte web`` on ``db`` (the controller's SQLite file, or a database URL), with a user ``lab``;
    output to ``log``; ``extra``: more ``mlte web`` options (e.g. ``--grooming``)."""
    from mininet_labs.session import free_port

    user = subprocess.run([sys.executable, "-m", "app.cli.main", "web", "create-user", "lab", "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    if user.returncode != 0:  # say why (a CalledProcessError alone hid it in a CI run)
        raise RuntimeError(f"mlte web create-user failed ({user.returncode}): {user.stderr.strip()}")
    headers = {"Authorization": f"Bearer {user.stdout.strip().splitlines()[-1]}"}
    port = free_port()
    with open(log, "w") as out:
        web = subprocess.Popen([sys.executable, "-m", "app.cli.main", "web", "--db", str(db), "--host", "127.0.0.1",
                                "--port", str(port), "--topology", "controller", *extra], cwd=ROOT, stdout=out,
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lab_registry.track(web.pid)
        url = f"http://127.0.0.1:{port}/api/v1"
        try:
            wait_until(lambda: get(url + "/openapi.json", headers) is not None, 30, "the web service")
            wait_until(lambda: ((get(url + "/topology", headers) or {}).get("graph") or {}).get("nodes"), 30,
                       "a topology snapshot")
            yield LabWeb(url, headers, port)
        finally:
            web.terminate()
            try:
                web.wait(timeout=15)
            except subprocess.TimeoutExpired:
                web.kill()
