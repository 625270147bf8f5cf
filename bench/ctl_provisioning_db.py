"""What the reservation app's database calls cost per reservation (issue 25: the controller's CPU on
germany50, where its database writer thread was a quarter of the samples with reservations arriving).

One *cycle* is what a reservation arriving and ending costs the controller's store
(:class:`app.db.provisioning.ProvisioningStore`): ``due`` (asked every second), the provision plan
recorded, ``mark_active`` with its rules, ``to_release`` and ``to_restore`` (asked every second),
``xcons_in_use`` and ``mark_released`` after its end, and the polls once more. The database is a file
SQLite database of germany50's loaded size: 300 reservations with installations (49 with a circuit,
each with 12 rules), 100 of them finished and released. CPU time per cycle (``time.process_time``),
median of ``--repeat`` batches of ``--cycles``.

``--before REV`` also runs the same cycles against the code of git revision REV (a temporary
``git worktree``; each batch in a child process, alternating with the current code's, so both share
the machine's load). ``--rules`` sets the rules each arriving reservation records (24: a germany50
arrival's path).

Usage: bench/ctl_provisioning_db.py --json PATH [--quick] [--before REV] [--repeat N] [--cycles N] [--rules N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
T = 1_900_000_000.0
CALLS = ("due", "record_plan", "mark_active", "to_release", "to_restore", "xcons_in_use", "mark_released")


def _rules(i: int, n: int) -> list[dict[str, Any]]:
    return [{"switch": f"s{k}", "table": 0, "priority": 300, "cookie": 0x4D4C544500000000 + i * 64 + k,
             "match": {"in_port": 1 + k % 3, "vlan_vid": 100 + i % 3000}, "actions": [{"output": 3}]}
            for k in range(n)]


def _circuit(i: int) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "a_end": f"s{i % 50}:3", "z_end": f"s{(i + 1) % 50}:4", "capacity": 10.0,
             "xcons": [(f"o{i % 50}", 1, 3 + i % 7), (f"o{(i + 1) % 50}", 3 + i % 7, 2)]}]


def child(db_path: str, cycles: int, n_rules: int) -> dict[str, Any]:
    """One batch against whatever ``app`` is first on ``sys.path``: the per-cycle CPU and per call."""
    from app.db import migrate
    from app.db.models import Reservation, User
    from app.db.provisioning import ProvisioningStore
    from app.db.states import FINISHED, PROVISIONING

    db = migrate.open_migrated(f"sqlite:///{db_path}")
    store = ProvisioningStore(db)
    with db.session() as s, s.begin():
        s.add(User(id=1, name="bench", is_admin=False, created_at=0.0))

    def reservation(i: int) -> int:
        with db.session() as s, s.begin():
            res = Reservation(name=f"r{i}", description="", src="s1:1", src_vlan=100, dst="s2:1", dst_vlan=100,
                              bandwidth=0.1, start_ts=T - 10, end_ts=T + 3600, mode="static", state=PROVISIONING,
                              state_reason="", ero=[], path={}, owner_id=1, created_ts=0.0, updated_ts=0.0)
            s.add(res)
            s.flush()
            return int(res.id)

    def finish(rid: int) -> None:
        with db.session() as s, s.begin():
            res = s.get(Reservation, rid)
            assert res is not None
            res.state = FINISHED

    ids = []
    for i in range(300):  # the background: what germany50's loaded stage holds
        rid = reservation(i)
        store.mark_active(rid, _circuit(i) if i < 49 else None, _rules(i, 12), T)
        ids.append(rid)
    for rid in ids[200:]:
        finish(rid)
        store.mark_released(rid, T)
    spent = dict.fromkeys(CALLS, 0.0)

    def timed(name: str, *args: Any, **kw: Any) -> Any:
        t = time.process_time()
        out = getattr(store, name)(*args, **kw)
        spent[name] += time.process_time() - t
        return out

    steps: list[dict[str, Any]] = [{"id": f"s{k}", "kind": "flow_add", "target": "s1", "deps": [], "started_at": T, "finished_at": T,
              "ok": True, "error": None} for k in range(2 * n_rules)]

    def cycle(i: int) -> None:
        rid = reservation(1000 + i)
        timed("due", T)
        timed("record_plan", {"kind": "provision", "mode": "ordered", "reservation_id": rid, "state": "done",
                              "started_at": T, "finished_at": T + 1, "steps": steps})
        timed("mark_active", rid, None, _rules(1000 + i, n_rules), T)
        timed("to_release")
        timed("to_restore", T)
        finish(rid)
        timed("to_release")
        timed("xcons_in_use", [("o1", 1, 3)], rid)
        timed("mark_released", rid, T)
        timed("due", T)
        timed("to_release")
        timed("to_restore", T)

    for i in range(5):  # warm-up: SQLAlchemy's statement caches
        cycle(i)
    spent = dict.fromkeys(CALLS, 0.0)
    t0 = time.process_time()
    for i in range(cycles):
        cycle(10 + i)
    total = time.process_time() - t0
    db.dispose()
    return {"cycle_ms": 1000 * total / cycles, "calls_ms": {k: round(1000 * v / cycles, 3) for k, v in spent.items()}}


def batch(code: Path, cycles: int, n_rules: int) -> dict[str, Any]:
    """One batch in a child process whose ``app`` is ``code``'s."""
    with tempfile.TemporaryDirectory(prefix="provdb-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(code)}
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(Path(tmp) / "b.db"),
                              "--cycles", str(cycles), "--rules", str(n_rules)],
                             cwd=code, env=env, capture_output=True, text=True, timeout=600, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"the batch against {code} failed: {out.stderr.strip().splitlines()[-1:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cycle_ms_median": round(statistics.median(r["cycle_ms"] for r in runs), 2),
            "cycle_ms": [round(r["cycle_ms"], 2) for r in runs],
            "calls_ms_median": {k: round(statistics.median(r["calls_ms"][k] for r in runs), 2) for k in CALLS}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--before", metavar="REV", help="also the code of git revision REV, alternating batch by batch")
    ap.add_argument("--repeat", type=int, default=5, help="batches per side (default 5)")
    ap.add_argument("--cycles", type=int, default=30, help="reservations per batch (default 30)")
    ap.add_argument("--rules", type=int, default=24, help="rules each arriving reservation records (default 24)")
    ap.add_argument("--quick", action="store_true", help="2 batches of 10 (bench/run.py ctl --quick)")
    ap.add_argument("--child", metavar="DB", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.cycles = 2, 10
    if a.child:
        print(json.dumps(child(a.child, a.cycles, a.rules)))
        return 0
    if not a.json:
        ap.error("--json is required")
    if a.repeat < 1 or a.cycles < 1 or a.rules < 1:
        ap.error("--repeat, --cycles and --rules must be at least 1")
    worktree = None
    try:
        if a.before:
            worktree = Path(tempfile.mkdtemp(prefix="provdb-before-"))
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(worktree), a.before],
                           check=True, capture_output=True, text=True)
        now, before = [], []
        for i in range(a.repeat):
            now.append(batch(ROOT, a.cycles, a.rules))
            if worktree is not None:
                before.append(batch(worktree, a.cycles, a.rules))
            print(f"batch {i + 1}/{a.repeat}: now {now[-1]['cycle_ms']:.1f} ms per reservation"
                  + (f", before {before[-1]['cycle_ms']:.1f} ms" if before else ""), file=sys.stderr, flush=True)
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                           capture_output=True, check=False)
    doc: dict[str, Any] = {"bench": "ctl_provisioning_db", "command": " ".join(sys.argv), "rules": a.rules,
                           "cycles": a.cycles, "now": summary(now)}
    if before:
        doc["before"] = {"revision": a.before, **summary(before)}
    Path(a.json).write_text(json.dumps(doc, indent=2))
    print(json.dumps({k: v for k, v in doc.items() if k in ("now", "before")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
