"""Does the OTS agent provision a two-way XCON (2 FLOW_MODs + 1 BARRIER) as one batch with one delay?

No OVS, no root: the agent's upstream face is driven by the foreign OF1.0 test controller
(``tests/lib/of10_client.py``); the bridge side stays unconnected. For each way of sending —
``one-write`` (both FLOW_MODs and the barrier in one TCP write), ``back-to-back`` (three writes, no
pause), ``gap-Nms`` (three writes N ms apart), ``no-barrier`` (both FLOW_MODs in one write, no
barrier) — it sets up and tears down XCON 1<->2 ``--tries`` times with a fixed provisioning delay.
It records the latency in units of the delay (from the barrier's write to its reply; for
``no-barrier`` from the write to the last PORT_STATUS that lights a port) and whether the set-up
was split: a port went dark again after it had been lit (seen in PORT_STATUS), or the barrier took
1.5 delays or more, or (when the agent keeps a batch log) more than one batch ran.

    .venv/bin/python bench/ots_batching.py --json bench/results/ots_batching.json --label after [--quick]

The JSON file keeps one entry per ``--label`` (a new run replaces the one with the same label).
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from os_ken.ofproto import ofproto_v1_0 as ofp  # noqa: E402
from os_ken.ofproto import ofproto_v1_0_parser as parser  # noqa: E402

from ots_virtual import of10  # noqa: E402
from ots_virtual.agent import OtsAgent  # noqa: E402
from tests.lib.of10_client import Of10Controller, delete_xcon, xcon  # noqa: E402

PORTS = {1: "ODU2", 2: "ODU2"}


def one_try(ctl: Of10Controller, agent: OtsAgent, delay: float, mode: str) -> dict[str, float | bool]:
    """Set up XCON 1<->2, then tear it down; what happened on the set-up. Latency: to the barrier
    reply from the barrier's write, or for ``no-barrier`` to the last "lit" PORT_STATUS from the write."""
    batches_before = getattr(agent, "batch_count", None)
    start = ctl.mark()
    msgs = [of10.serialize(xcon(1, 2), ctl.next_xid()), of10.serialize(xcon(2, 1), ctl.next_xid())]
    bxid = ctl.next_xid()
    barrier = of10.serialize(parser.OFPBarrierRequest(of10.DP), bxid)
    gap = mode_gap(mode)
    if mode == "no-barrier":
        sent = time.monotonic()
        ctl.send(b"".join(msgs))
    elif gap is None:
        sent = time.monotonic()
        ctl.send(b"".join([*msgs, barrier]))
    else:
        for m in msgs:
            ctl.send(m)
            if gap:
                time.sleep(gap)
        sent = time.monotonic()
        ctl.send(barrier)
    if mode == "no-barrier":
        for port in (1, 2):
            ctl.wait_for(lambda r, p=port: r.header.msg_type == ofp.OFPT_PORT_STATUS and r.msg.desc.port_no == p
                         and not r.msg.desc.config & ofp.OFPPC_PORT_DOWN, start=start, timeout=10 * delay + 5)
        time.sleep(2 * delay + 0.3)  # a second batch, if any, darkens and relights the ports meanwhile
        done = max(r.at for r in ctl.received[start:] if r.header.msg_type == ofp.OFPT_PORT_STATUS
                   and not r.msg.desc.config & ofp.OFPPC_PORT_DOWN)
    else:
        done = ctl.wait_for(lambda r: r.header.xid == bxid and r.header.msg_type == ofp.OFPT_BARRIER_REPLY,
                            start=start, timeout=10 * delay + 5).at
    latency = (done - sent) / delay
    blink = False
    for port in (1, 2):
        seq = [s.desc.config & ofp.OFPPC_PORT_DOWN for s in ctl.port_statuses(start) if s.desc.port_no == port]
        lit = [i for i, down in enumerate(seq) if not down]
        blink |= bool(lit) and any(seq[lit[0]:])
    batches = None if batches_before is None else agent.batch_count - batches_before
    ctl.send(b"".join(of10.serialize(m, ctl.next_xid()) for m in (delete_xcon(1), delete_xcon(2))))
    ctl.barrier()
    split = blink or (batches is not None and batches != 1) or (mode != "no-barrier" and latency >= 1.5)
    return {"latency_x_delay": latency, "port_went_dark_after_lit": blink, "split": split,
            "batches": batches if batches is not None else -1}


def run_mode(delay: float, mode: str, tries: int) -> dict[str, object]:
    ctl = Of10Controller()
    agent = OtsAgent("bench-batch", 0x0F0B, PORTS, ctl.address, delay=lambda: delay, claim=False, ovs_wait=0)
    agent.start()
    try:
        ctl.wait_connected()
        rows = [one_try(ctl, agent, delay, mode) for _ in range(tries)]
    finally:
        agent.stop()
        ctl.close()
    lat = sorted(float(r["latency_x_delay"]) for r in rows)
    return {
        "tries": tries,
        "split": sum(bool(r["split"]) for r in rows),
        "single_batch": sum(not r["split"] for r in rows),
        "port_went_dark_after_lit": sum(bool(r["port_went_dark_after_lit"]) for r in rows),
        "latency_x_delay": {"median": round(statistics.median(lat), 3), "max": round(lat[-1], 3),
                                    "min": round(lat[0], 3)},
    }


def mode_gap(mode: str) -> float | None:
    """Seconds between the writes for ``mode`` (None = one write)."""
    if mode in ("one-write", "no-barrier"):
        return None
    if mode == "back-to-back":
        return 0.0
    if mode.startswith("gap-") and mode.endswith("ms"):
        return float(mode[4:-2]) / 1000
    raise SystemExit(f"unknown mode {mode!r}")


def git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="", help="write results here")
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--delays", default="0.3,1.0", help="comma-separated fixed provisioning delays, s")
    ap.add_argument("--modes", default="one-write,back-to-back,gap-2ms,gap-20ms,no-barrier",
                    help="comma-separated: one-write, back-to-back, gap-<N>ms, no-barrier")
    ap.add_argument("--label", default="run", help="name of this run in the JSON file (e.g. before, after)")
    ap.add_argument("--quick", action="store_true", help="3 tries, one delay (smoke run)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    tries = 3 if args.quick else args.tries
    delays = [0.3] if args.quick else [float(d) for d in args.delays.split(",")]
    modes = args.modes.split(",")
    for m in modes:
        mode_gap(m)  # unknown modes fail before anything runs
    results = []
    for delay in delays:
        for mode in modes:
            row = {"delay_s": delay, "mode": mode, **run_mode(delay, mode, tries)}
            print(json.dumps(row), flush=True)
            results.append(row)
    run = {"label": args.label, "git": git_rev(), "python": platform.python_version(),
           "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "tries": tries, "results": results}
    if args.json:
        save_run(Path(args.json), run)
    return 0


def save_run(path: Path, run: dict[str, object]) -> None:
    """Keep every labelled run in one file (e.g. "before" and "after" a fix); a run replaces the
    earlier one with the same label."""
    doc: dict[str, object] = {"bench": "ots_batching", "runs": []}
    if path.exists():
        doc = json.loads(path.read_text())
    runs = [r for r in doc["runs"] if r.get("label") != run["label"]]  # type: ignore[union-attr]
    doc["runs"] = [*runs, run]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
