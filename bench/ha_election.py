"""How long the leader election alone takes to hand over (no controller, no switches).

Per etcd timing (``tuned``: heartbeat 50 ms / election timeout 500 ms, what app.ha.etcd_server
starts; ``default``: etcd's 100 ms / 1000 ms, whose shortest lease is 2 s): a private etcd, then N runs
of two candidates with ttl 1 s. Candidate A wins and refreshes its lease every ttl/4; B runs the
election loop (``app.ha.election.run``, polling every ttl/4). Three figures per run:

- ``death``: A stops refreshing at a random moment (as if SIGKILLed) -> B's ``on_elected``;
- ``lease_gone``: the same moment -> the key gone from etcd (a third client polls every 10 ms): etcd's
  share of ``death``, the rest is B's poll interval and its campaign;
- ``resign``: A revokes its lease (a clean shutdown) -> B's ``on_elected``.

    .venv/bin/python bench/ha_election.py --json bench/results/ha_election.json [--quick] [--runs N]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.ha.election import Election, run  # noqa: E402
from app.ha.etcd_server import etcd_server  # noqa: E402

TTL = 1.0
TIMINGS = {"tuned": (50, 500), "default": (100, 1000)}


def summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"median_s": round(statistics.median(s), 3), "p90_s": round(s[int(0.9 * (len(s) - 1))], 3),
            "min_s": round(s[0], 3), "max_s": round(s[-1], 3), "n": len(s)}


def one_run(endpoint: str, resign: bool) -> dict[str, float]:
    key = f"/mlte/bench/{uuid.uuid4().hex}"
    a = Election(endpoint, key=key, candidate="a", ttl=TTL)
    if a.campaign() is None:
        raise RuntimeError("candidate a lost an uncontested election")
    elected = threading.Event()
    elected_at: list[float] = []
    stop_b = threading.Event()

    def on_elected(epoch: int) -> None:
        elected_at.append(time.monotonic())
        elected.set()

    b = Election(endpoint, key=key, candidate="b", ttl=TTL)
    loop_b = threading.Thread(target=run, args=(b, on_elected, lambda why: None),
                              kwargs={"stop": stop_b}, daemon=True)
    loop_b.start()
    try:
        # A leads for a while at a random phase of its keepalive and of B's poll
        until = time.monotonic() + random.uniform(0.6, 1.1)
        while time.monotonic() < until:
            if not a.keepalive():
                raise RuntimeError(f"leader a lost its lease while refreshing: {a.deposed_reason}")
            time.sleep(min(TTL / 4, max(0.0, until - time.monotonic())))
        if elected.is_set():
            raise RuntimeError("b was elected while a led")
        t0 = time.monotonic()
        if resign:
            a.resign()
        gone_at = None
        watcher = Election(endpoint, key=key, candidate="watcher", ttl=TTL)
        deadline = t0 + 15
        while time.monotonic() < deadline and (gone_at is None or not elected.is_set()):
            if gone_at is None and (elected.is_set() or watcher.leader() is None):
                gone_at = time.monotonic()
            time.sleep(0.01)
        if not elected_at or gone_at is None:
            raise RuntimeError("b was not elected within 15 s")
        return {"takeover_s": elected_at[0] - t0, "lease_gone_s": gone_at - t0}
    finally:
        stop_b.set()
        loop_b.join(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--quick", action="store_true", help="a short smoke run (3 runs per figure)")
    ap.add_argument("--runs", type=int, default=None, help="runs per figure (default 20, 3 with --quick)")
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 20)
    out: dict[str, object] = {"bench": "ha_election", "ttl_s": TTL, "poll_interval_s": TTL / 4, "runs": runs,
                              "timings": {}}
    for name, (heartbeat, election) in TIMINGS.items():
        with etcd_server(heartbeat_ms=heartbeat, election_ms=election) as etcd:
            deaths = [one_run(etcd.endpoint, resign=False) for _ in range(runs)]
            resigns = [one_run(etcd.endpoint, resign=True) for _ in range(runs)]
        res = {"heartbeat_ms": heartbeat, "election_timeout_ms": election,
               "death": summary([d["takeover_s"] for d in deaths]),
               "lease_gone": summary([d["lease_gone_s"] for d in deaths]),
               "resign": summary([r["takeover_s"] for r in resigns])}
        out["timings"][name] = res  # type: ignore[index]
        print(f"{name:8s} (heartbeat {heartbeat} ms, election {election} ms): takeover after death "
              f"median {res['death']['median_s']:.3f}s p90 {res['death']['p90_s']:.3f}s "
              f"(lease gone {res['lease_gone']['median_s']:.3f}s); after resign "
              f"median {res['resign']['median_s']:.3f}s", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
