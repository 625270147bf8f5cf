"""OpenFlow over TLS on vs off against fake switches (no OVS, no root): the controller's side of the cost.

The real ``mlte controller`` (a subprocess, as in the labs) and two fake OpenFlow 1.3 switches
(``tests/lib/of13_switch.py``, another process: A and C of Fig. 2) that answer HELLO, FEATURES,
BARRIER ... over plain TCP or TLS (``mlte pki init``'s CA and certificates). Then
``bench/ctl_updates.py``'s four-rule packet plans (add, then remove; each FLOW_MOD + BARRIER after
the previous step's barrier reply) through ``POST /plan``, timed in the controller (the plan record)
and at the client. Modes alternate in one run (plain, TLS, plain, TLS ...; with ``--baseline-tree``
also a second source tree, e.g. the code before a change, each tree plain and TLS). What the switches
received is counted: messages and reads (over TLS one read = one TLS record = one controller write).

    .venv/bin/python bench/ctl_tls_fake.py --json bench/results/ctl_tls_fake.json [--rounds 4] [--plans 50]
        [--baseline-tree /tmp/mlte-before]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ctl_updates import rule_plans, stats  # noqa: E402

DPIDS = {0xA1: "A", 0xC1: "C"}  # fig2_testbed's A and C


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    """One controller from ``tree`` (plain or TLS) with its fake switches; stopped by PID on exit."""

    def __init__(self, tree: Path, work: Path, tls_dir: Path | None) -> None:
        from app.controller.client import ControllerClient

        self.tree, self.work, self.tls_dir = tree, work, tls_dir
        work.mkdir(parents=True, exist_ok=True)
        self.of_port, self.api_port = free_port(), free_port()
        self.token = work / "api-token"
        self.client = ControllerClient(port=self.api_port, token_file=str(self.token))
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Run:
        names = self.work / "names.json"
        names.write_text(json.dumps({hex(k): v for k, v in DPIDS.items()}))
        cmd = [sys.executable, "-m", "app.cli.main", "controller", "--of-port", str(self.of_port),
               "--api-port", str(self.api_port), "--names", str(names),
               "--db-url", f"sqlite:///{self.work / 'capabilities.db'}", "--state-file", "",
               "--log-file", str(self.work / "controller-errors.log"), "--api-token-file", str(self.token)]
        if self.tls_dir is not None:
            cmd += ["--tls-dir", str(self.tls_dir)]
        env = dict(os.environ, PYTHONPATH=str(self.tree))
        self._start(cmd, "controller.log", env)
        deadline = time.monotonic() + 30
        while self.client._try_health() is None:
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError(f"controller did not come up (log: {self.work / 'controller.log'})")
            time.sleep(0.1)
        sw = [sys.executable, "-m", "tests.lib.of13_switch", "--connect", f"127.0.0.1:{self.of_port}"]
        for d in DPIDS:
            sw += ["--dpid", hex(d)]
        sw += ["--report", str(self.work / "switch.json")]
        if self.tls_dir is not None:
            sw += ["--tls", str(self.tls_dir)]
        self._start(sw, "switch.log", dict(os.environ, PYTHONPATH=str(ROOT)))
        deadline = time.monotonic() + 30
        while {s.get("name") for s in self.client.switches()} < set(DPIDS.values()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"fake switches did not connect (logs in {self.work})")
            time.sleep(0.1)
        return self

    def _start(self, cmd: list[str], log: str, env: dict) -> None:
        with open(self.work / log, "w") as f:
            self.procs.append(subprocess.Popen(cmd, cwd=str(self.tree if "app.cli.main" in cmd else ROOT), env=env,
                                               stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT))

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def cpu(self) -> tuple[float, ...]:
        """CPU seconds the controller and the switch process used so far (all their threads, ns-exact)."""
        out = []
        for p in self.procs:
            out.append(sum(int((t / "schedstat").read_text().split()[0]) for t in Path(f"/proc/{p.pid}/task").iterdir()) / 1e9)
        return tuple(out)

    def errors(self) -> str:
        p = self.work / "controller-errors.log"
        return p.read_text(errors="replace") if p.exists() else ""


def measure(client, n: int, raw: dict[str, list[float]], records: list | None = None) -> None:
    """``n`` four-rule plans added then removed; their times (ms) into ``raw``, their records into ``records``."""
    for i in range(n):
        for key, plan in zip(("add", "remove"), rule_plans(200 + i), strict=True):
            t0 = time.perf_counter()
            rec = client.request("POST", "/plan", {"plan": plan.to_json()}, timeout=60)
            end_to_end = (time.perf_counter() - t0) * 1000
            if rec["state"] != "done":
                raise RuntimeError(f"plan {key} ended {rec['state']}: {rec}")
            raw.setdefault(f"rules.{key}", []).append((rec["finished_at"] - rec["started_at"]) * 1000)
            raw.setdefault(f"rules.{key}_end_to_end", []).append(end_to_end)
            if records is not None:
                records.append(rec)


def legs(records: list[dict], report: dict, raw: dict[str, list[float]]) -> None:
    """Where a plan's time goes (ms): before its first step (``plan_head``), after its last
    (``plan_tail``), step start -> messages queued (``step_to_queued``), and each step's round trip
    in three legs by the switch's clock (the same host clock):
    ``out`` queued in the controller -> read by the switch (send path, write, TLS, wire), ``switch``
    read -> reply written, ``back`` reply written -> step done in the controller (read, TLS, parse,
    event, plan runner)."""
    by_name = {DPIDS[int(k, 16)]: sorted(v["barriers"]) for k, v in report.items()}
    for rec in records:
        steps = rec["steps"]
        raw.setdefault("leg.plan_head", []).append((min(s["started_at"] for s in steps) - rec["started_at"]) * 1000)
        raw.setdefault("leg.plan_tail", []).append((rec["finished_at"] - max(s["finished_at"] for s in steps)) * 1000)
        for step in steps:
            sent, done = step["detail"]["sent_at"], step["finished_at"]
            raw.setdefault("leg.step_to_queued", []).append((sent - step["started_at"]) * 1000)
            hit = [b for b in by_name[step["target"].split("/", 1)[0]] if sent <= b[0] <= done]
            if len(hit) == 1:
                got, replied = hit[0]
                for leg, v in (("out", got - sent), ("switch", replied - got), ("back", done - replied)):
                    raw.setdefault(f"leg.{leg}", []).append(v * 1000)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=4, help="runs per mode, alternated (default 4)")
    ap.add_argument("--plans", type=int, default=50, help="add+remove plan pairs per run (default 50)")
    ap.add_argument("--socket-n", type=int, default=3000,
                    help="round trips of bench/ctl_tls_socket.py per mode (plain, tls, green) and round (0: skip; default 3000)")
    ap.add_argument("--baseline-tree", help="another source tree (e.g. before a change), measured alike")
    args = ap.parse_args()
    if args.rounds < 1 or args.plans < 1 or args.socket_n < 0:
        print("ctl_tls_fake: error: --rounds and --plans must be >= 1, --socket-n >= 0", file=sys.stderr)
        return 2
    trees = {"this": ROOT}
    if args.baseline_tree:
        base = Path(args.baseline_tree).resolve()
        if not (base / "app" / "cli" / "main.py").exists():
            print(f"ctl_tls_fake: error: --baseline-tree {base}: not an mlte source tree", file=sys.stderr)
            return 2
        trees = {"baseline": base, "this": ROOT}
    from app import pki

    work = Path(tempfile.mkdtemp(prefix="mlte-bench-tls-fake-"))
    pki.init(work / "pki")
    modes = [(t, tls) for _ in range(args.rounds) for t in trees for tls in (False, True)]
    sockets: dict[str, list[dict]] = {"plain": [], "tls": [], "green": []}
    raw: dict[str, dict[str, list[float]]] = {}
    errors = []
    for k, (tree, tls) in enumerate(modes):
        label = f"{tree}.{'tls' if tls else 'plain'}"
        if args.socket_n and tree == "this":  # the socket alone, same alternation (green: TLS as it was)
            for mode in ("tls", "green") if tls else ("plain",):
                line = subprocess.run([sys.executable, str(ROOT / "bench" / "ctl_tls_socket.py"), mode, str(args.socket_n)],
                                      capture_output=True, text=True, timeout=300, check=True).stdout.strip().splitlines()[-1]
                sockets[mode].append(json.loads(line))
        with Run(trees[tree], work / f"{k}-{label}", work / "pki" if tls else None) as run:
            measure(run.client, 3, {})  # warm-up, not counted
            cpu0 = run.cpu()
            records: list[dict] = []
            measure(run.client, args.plans, raw.setdefault(label, {}), records)
            cpu1 = run.cpu()
            for who, a, b in zip(("controller", "switch"), cpu0, cpu1, strict=True):  # CPU ms per add+remove pair
                raw[label].setdefault(f"cpu.{who}_ms_per_pair", []).append((b - a) * 1000 / args.plans)
            errors.append(run.errors())
        report = json.loads((run.work / "switch.json").read_text())
        legs(records, report, raw[label])
        for v in report.values():  # what the switches received per read: >1 means writes were joined
            raw[label].setdefault("switch.msgs_per_read", []).append(sum(v["received"].values()) / max(v["reads"], 1))
        print(f"{label} ({run.work}): add median {statistics.median(raw[label]['rules.add'][-args.plans:]):.2f} ms", flush=True)
    out: dict = {"rounds": args.rounds, "plans_per_run": args.plans, "trees": {k: str(v) for k, v in trees.items()},
                 "switch": "tests/lib/of13_switch.py (2 fake OF1.3 datapaths, one process)",
                 "results": {label: {k.split(".", 1)[1]: stats(v) for k, v in r.items()} for label, r in raw.items()},
                 "load_avg": os.getloadavg()}
    cost = {}
    for tree in trees:
        off, on = raw[f"{tree}.plain"], raw[f"{tree}.tls"]
        cost[tree] = {k.split(".", 1)[1]: round((statistics.median(on[k]) / statistics.median(off[k]) - 1) * 100, 1)
                      for k in off}
    out["tls_cost_pct"] = cost
    if args.socket_n:  # bench/ctl_tls_socket.py: the controller's socket alone, microseconds per round trip
        out["socket_us_per_round_trip"] = {
            mode: {k: round(statistics.median(r[k] for r in runs), 1) for k in ("wall_us_per_rt", "cpu_us_per_rt")}
            for mode, runs in sockets.items()}
        out["socket_runs"] = sockets
    out["controller_errors"] = "".join(errors)
    shutil.rmtree(work, ignore_errors=True)
    print(f"TLS cost (on vs off, medians): {cost}", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
