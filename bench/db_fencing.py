"""What database fencing costs a controller write (issue 24): the same small transactions (one
``events`` row through ``Feed.event``) without a fence (one controller, the default) and with one (the
before-commit check: flush, ``SELECT … FOR SHARE`` of the epoch row), on SQLite and on a throw-away
PostgreSQL server (skipped when its binaries are missing). Same run, alternating blocks.

    .venv/bin/python bench/db_fencing.py --json bench/results/db_fencing.json [--n 400]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db import fencing  # noqa: E402
from app.db.feed import Feed  # noqa: E402
from app.db.migrate import open_migrated  # noqa: E402


def _ms(feed: Feed, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        feed.event("bench.fence", f"write {i}")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure(url: str, n: int, blocks: int = 4) -> dict[str, dict[str, float]]:
    db = open_migrated(url)
    try:
        guard = fencing.attach(db.engine, fencing.Guard())
        with db.session() as s:
            fencing.claim(s, 1, "bench")
        feed = Feed(db)
        _ms(feed, 20)  # warm the pool
        runs: dict[str, list[float]] = {"unfenced": [], "fenced": []}
        for _ in range(blocks):
            for name, fence in (("unfenced", fencing.NO_FENCE), ("fenced", fencing.Fence(1, "bench"))):
                guard.fence = fence
                runs[name] += _ms(feed, n // blocks)
        assert guard.refused == 0
        out = {name: {"median_ms": round(statistics.median(v), 3), "p90_ms": round(sorted(v)[int(0.9 * (len(v) - 1))], 3),
                      "n": len(v)} for name, v in runs.items()}
        out["fenced"]["extra_median_ms"] = round(out["fenced"]["median_ms"] - out["unfenced"]["median_ms"], 3)
        return out
    finally:
        fencing.detach(db.engine)
        db.dispose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400, help="writes per variant (default 400)")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args()
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        result["sqlite"] = measure(f"sqlite:///{tmp}/bench.db", args.n)
    try:
        from tests.lib.postgres import find_bindir, postgres_server
    except ImportError:
        find_bindir = None  # type: ignore[assignment]
    if find_bindir is not None and find_bindir() is not None:
        with postgres_server() as server:
            result["postgresql"] = measure(server.create_database("bench_fencing"), args.n)
    else:
        result["postgresql"] = "skipped: PostgreSQL binaries not installed"
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
