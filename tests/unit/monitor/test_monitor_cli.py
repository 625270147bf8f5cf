"""``mlte monitor`` commands (no root needed)."""
from __future__ import annotations

import json
import socket
import threading
import time

from app.cli.main import main
from monitor.sflow.encoder import EncFlow, build_frame, encode_datagram, encode_flow_sample
from topology.flow import FiveTuple


def test_detect_latency_csv(tmp_path, capsys):
    f = tmp_path / "lat.csv"
    rows = ["t,latency_ms"] + [f"{i * 0.2:.1f},{10.0 if i < 100 else 13.0}" for i in range(200)]
    f.write_text("\n".join(rows) + "\n")
    assert main(["monitor", "detect-latency", str(f), "--json", "--baseline"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 200 and [(c["old_ms"], c["new_ms"]) for c in out["changes"]] == [(10.0, 13.0)]
    assert out["changes"][0]["t"] == 24.0


def test_detect_latency_bad_input_is_one_line_error(tmp_path, capsys):
    assert main(["monitor", "detect-latency", str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("t,latency_ms\n1,2\nx,y\n")
    assert main(["monitor", "detect-latency", str(bad)]) == 2
    assert "bad.csv:3" in capsys.readouterr().err


def test_sflow_collect_json(capsys):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    key = FiveTuple("10.0.0.1", "10.0.0.3", 17, 4000, 5000)
    data = encode_datagram([encode_flow_sample(EncFlow(build_frame(key, 100), sampling_rate=10))])

    def send():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(20):
            time.sleep(0.05)
            tx.sendto(data, ("127.0.0.1", port))
            tx.sendto(b"\x00\x00\x00\x05junk", ("127.0.0.1", port))
        tx.close()

    th = threading.Thread(target=send)
    th.start()
    assert main(["monitor", "sflow-collect", "--port", str(port), "--duration", "1.5", "--json"]) == 0
    th.join()
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["decoded"] >= 10 and out["stats"]["bad"] == out["stats"]["decoded"]
    assert out["flows"][0]["flow"] == key.as_dict()
