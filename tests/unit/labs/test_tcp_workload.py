"""The labs' TCP workload on loopback: the long flow and the small transfers are counted apart, and a
transfer counts as done only when all its bytes arrived."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

from mininet_labs import tcp_workload

SCRIPT = Path(tcp_workload.__file__)


def _free_pair() -> int:
    while True:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


def test_long_flow_and_small_transfers_are_counted_apart(tmp_path: Path) -> None:
    port = _free_pair()
    out = tmp_path / "got.json"
    res: dict = {}
    th = threading.Thread(target=lambda: res.update(tcp_workload.receive(port, 3.0, str(out), host="127.0.0.1")))
    th.start()
    stats = tcp_workload.send("127.0.0.1", port, 1.5, 4, cc="reno", min_kb=16, max_kb=64, seed=1)
    th.join(10)
    assert stats["errors"] == 0 and stats["small_finished"] >= 4, stats
    assert res["bytes"]["long"] > 0 and res["bytes"]["small"] > 0
    done = res["small_done"]
    assert len(done) == stats["small_finished"]
    assert all(16 * 1024 <= d["bytes"] <= 64 * 1024 and d["end"] >= d["start"] for d in done)
    assert sum(d["bytes"] for d in done) <= res["bytes"]["small"]
    assert out.exists()


def test_bad_arguments_are_one_line_errors() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "send", "127.0.0.1", "5001", "1", "4", "--min-kb", "9",
                        "--max-kb", "1"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "min-kb" in r.stderr and "Traceback" not in r.stderr
    with socket.socket() as ls:  # someone listens: the unknown congestion control is what fails
        ls.bind(("127.0.0.1", 0))
        ls.listen(4)
        r = subprocess.run([sys.executable, str(SCRIPT), "send", "127.0.0.1", str(ls.getsockname()[1]), "1", "0",
                            "--cc", "nosuchcc"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and r.stderr.startswith("tcp_workload send:") and "Traceback" not in r.stderr
