"""What the control API's credential costs per request (no switch, no OVS; issue 24 item 5).

Two ``mlte controller`` processes without switches, one with the bearer token required (the
default) and one with ``[controller] api_auth = false``; the same client requests go to both,
alternating in rounds so that machine load hits both alike: ``GET /switches`` (a read) and
``POST /names`` (a change). Reports the median round trip of each and the credential's share.
``bench/ctl_updates.py`` measures the same on whole updates on the Fig. 2 testbed.

    .venv/bin/python bench/ctl_api_auth.py --json bench/results/ctl_api_auth.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.controller.client import ControllerClient  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(work: Path, name: str, auth: bool) -> tuple[subprocess.Popen, ControllerClient]:
    cfg = work / f"{name}.toml"
    cfg.write_text(f"[controller]\napi_auth = {'true' if auth else 'false'}\n[monitor]\nenabled = false\n")
    token, api = work / f"{name}-token", free_port()
    log = open(work / f"{name}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "-c", str(cfg), "controller",
                             "--of-port", str(free_port()), "--api-port", str(api), "--db-url", "",
                             "--api-token-file", str(token)],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    client = ControllerClient(port=api, token_file=str(token), auth=auth)
    client.wait_ready(60)
    return proc, client


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)


def timed(call) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, per_round = (10, 20) if args.quick else (40, 50)
    work = Path(tempfile.mkdtemp(prefix="mlte-bench-auth-"))
    procs: list[subprocess.Popen] = []
    try:
        p_on, on = start(work, "on", True)
        procs.append(p_on)
        p_off, off = start(work, "off", False)
        procs.append(p_off)
        names = {"names": {"0xa1": "A"}}
        samples: dict[str, dict[str, list[float]]] = {k: {"on": [], "off": []} for k in ("get_switches", "post_names")}
        for client in (on, off):  # warm up both (connections, first-request imports)
            for _ in range(20):
                client.switches()
        for r in range(rounds):
            order = (("on", on), ("off", off)) if r % 2 == 0 else (("off", off), ("on", on))
            for label, client in order:
                for _ in range(per_round):
                    samples["get_switches"][label].append(timed(client.switches))
                    samples["post_names"][label].append(timed(lambda c=client: c.request("POST", "/names", names)))
        out: dict = {"requests_per_kind_and_mode": rounds * per_round, "quick": args.quick, "target_pct": 10.0}
        for kind, by in samples.items():
            med = {k: round(statistics.median(v), 1) for k, v in by.items()}
            out[kind] = {"median_us": med, "p90_us": {k: round(sorted(v)[int(0.9 * (len(v) - 1))], 1)
                                                       for k, v in by.items()},
                         "cost_pct": round((med["on"] - med["off"]) / med["off"] * 100, 2)}
            print(f"{kind}: median {med['on']} us with the credential, {med['off']} us without "
                  f"({out[kind]['cost_pct']} %)", flush=True)
    finally:
        for proc in procs:
            stop(proc)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
