"""Load on the reservation REST API: requests/s for list and create, on SQLite and PostgreSQL.

Runs the real ``mlte web`` (waitress) on 127.0.0.1 against a fresh database per backend and drives it
with a fixed number of client threads for a fixed time per operation (bounded, loopback only).
Baseline: ``GET /api/v1/openapi.json`` on the same server (no database work), so ratios show what the
database and admission control cost. PostgreSQL uses the throw-away server of
``tests/lib/postgres.py`` and is skipped (noted in the JSON) when its binaries are missing.

    .venv/bin/python bench/rest_load.py --json bench/results/rest_load.json [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.lib.postgres import find_bindir, postgres_server  # noqa: E402
from tests.lib.webserver import create_user_cli, serve_cli  # noqa: E402

T0 = 4_000_000_000.0  # far future: every window is valid


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


def drive(threads: int, seconds: float, make_call) -> dict:  # noqa: ANN001
    """Run ``make_call(session, i)`` from ``threads`` threads for ``seconds``; count OK answers."""
    stop = time.monotonic() + seconds
    lat: list[float] = []
    ok = bad = 0
    lock = threading.Lock()
    counter = iter(range(10**9))

    def worker() -> None:
        nonlocal ok, bad
        with requests.Session() as s:
            while time.monotonic() < stop:
                with lock:
                    i = next(counter)
                t = time.perf_counter()
                good = make_call(s, i)
                d = time.perf_counter() - t
                with lock:
                    lat.append(d)
                    ok += good
                    bad += not good

    started = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.monotonic() - started
    lat.sort()
    return {"requests": ok + bad, "ok": ok, "failed": bad, "seconds": round(wall, 2),
            "rps": round(ok / wall, 1), "p50_ms": round(1000 * statistics.median(lat), 2) if lat else None,
            "p95_ms": round(1000 * lat[int(0.95 * (len(lat) - 1))], 2) if lat else None}


def bench_backend(db_url: str, tmp: Path, threads: int, seconds: float, preload: int) -> dict:
    token = create_user_cli(db_url, "bench")
    h = {"Authorization": f"Bearer {token}"}
    with serve_cli(db_url, log_path=tmp / "server.log", extra=["--threads", str(threads)]) as url:
        def create(s: requests.Session, i: int, offset: float = 0.0) -> bool:
            # one window per request: admission runs the PCE but always finds room, so we measure cost
            start = T0 + offset + i * 7200
            r = s.post(f"{url}/api/v1/reservations", headers=h, timeout=60, json={
                "name": f"bench-{i}", "src": "A:1", "dst": "C:3", "bandwidth": 1.0,
                "start": iso(start), "end": iso(start + 3600)})
            return r.status_code == 201

        with requests.Session() as s:
            for i in range(preload):
                assert create(s, i, offset=-1e8), "preload failed"
        baseline = drive(threads, seconds, lambda s, i: s.get(f"{url}/api/v1/openapi.json", timeout=60).ok)
        listing = drive(threads, seconds, lambda s, i: s.get(f"{url}/api/v1/reservations?limit=50", headers=h,
                                                            timeout=60).ok)
        creating = drive(threads, seconds, create)
    return {"baseline_openapi": baseline, "list": listing, "create": creating,
            "list_ratio_to_baseline": round(listing["rps"] / baseline["rps"], 3),
            "create_ratio_to_baseline": round(creating["rps"] / baseline["rps"], 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--quick", action="store_true", help="short smoke run")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0, help="per operation and backend")
    args = ap.parse_args(argv)
    seconds = 2.0 if args.quick else args.seconds
    preload = 50 if args.quick else 200
    out: dict = {"command": " ".join(["bench/rest_load.py", *(argv if argv is not None else sys.argv[1:])]),
                 "threads": args.threads, "seconds_per_operation": seconds, "preloaded_reservations": preload,
                 "topology": "fig2", "backends": {}}
    with tempfile.TemporaryDirectory(prefix="mlte-rest-bench-") as tmpdir:
        tmp = Path(tmpdir)
        out["backends"]["sqlite"] = bench_backend(str(tmp / "bench.db"), tmp, args.threads, seconds, preload)
        if find_bindir() is None:
            out["backends"]["postgresql"] = {"skipped": "PostgreSQL binaries not installed"}
        else:
            with contextlib.ExitStack() as stack:
                pg = stack.enter_context(postgres_server())
                url = pg.create_database("bench")
                out["backends"]["postgresql"] = bench_backend(url, tmp, args.threads, seconds, preload)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
