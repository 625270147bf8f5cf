"""How long the OTS agent takes to set up and tear down an XCON pair, beyond the provisioning delay.

Needs root and OVS. Builds bridge ``otsbench<rand>`` (netdev) with two veth pairs (peers up, so
ports have carrier), holding the network lock. Baseline: the same two flows sent straight to the
bridge by a plain OF1.0 controller (FLOW_MOD x2 + BARRIER). Then the agent (delay 0) over the same
bridge: XCON pair + BARRIER, time until both virtual ports report link up, and DELETE pair + BARRIER.
Writes medians/p90 in ms and the ratio agent/baseline to ``--json``.

    sudo .venv/bin/python bench/ots_xcon.py --json bench/results/ots_xcon.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from os_ken.ofproto import ofproto_v1_0 as ofp  # noqa: E402
from os_ken.ofproto import ofproto_v1_0_parser as parser  # noqa: E402

from mininet_labs.netlock import net_lock  # noqa: E402
from ots_virtual import of10  # noqa: E402
from ots_virtual.agent import OtsAgent  # noqa: E402
from tests.lib.of10_client import Of10Controller, delete_xcon, xcon  # noqa: E402


def sh(*cmd: str, check: bool = True) -> None:
    subprocess.run(cmd, check=check, capture_output=True, timeout=30)


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"median_ms": round(statistics.median(ms), 3), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
            "max_ms": round(ms[-1], 3), "n": len(ms)}


def baseline(bridge: str, n: int) -> list[float]:
    ctl = Of10Controller()
    sh("ovs-vsctl", "set-controller", bridge, f"tcp:127.0.0.1:{ctl.port}")
    try:
        ctl.wait_connected(20)
        out = []
        for i in range(n):
            t0 = time.monotonic()
            if i % 2 == 0:
                ctl.send(xcon(1, 2))
                ctl.send(xcon(2, 1))
            else:
                ctl.send(parser.OFPFlowMod(of10.DP, parser.OFPMatch(), command=ofp.OFPFC_DELETE))
            out.append(ctl.barrier().at - t0)
        return out
    finally:
        sh("ovs-vsctl", "del-controller", bridge, check=False)
        ctl.close()


def agent_runs(bridge: str, n: int) -> dict[str, list[float]]:
    ctl = Of10Controller()
    agent = OtsAgent(bridge, 0xB0, {1: "ODU2", 2: "ODU2"}, ctl.address, 0.0, 0.0)
    setup, lit, teardown = [], [], []
    try:
        agent.start()
        ctl.wait_connected(30)
        ctl.features()
        for _ in range(n):
            mark = ctl.mark()
            t0 = time.monotonic()
            ctl.send(xcon(1, 2))
            ctl.send(xcon(2, 1))
            setup.append(ctl.barrier().at - t0)
            up = set()
            for port in (1, 2):
                r = ctl.wait_for(lambda r, p=port: r.header.msg_type == ofp.OFPT_PORT_STATUS
                                 and r.msg.desc.port_no == p and r.msg.desc.state == 0, start=mark)
                up.add(r.at)
            lit.append(max(up) - t0)
            t0 = time.monotonic()
            ctl.send(delete_xcon(1))
            ctl.send(delete_xcon(2))
            teardown.append(ctl.barrier().at - t0)
        return {"setup_barrier": setup, "setup_link_up": lit, "teardown_barrier": teardown}
    finally:
        agent.stop()
        ctl.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 6 if args.quick else 40
    tag = secrets.token_hex(2)
    bridge = f"otsbench{tag}"
    with net_lock():
        try:
            sh("ovs-vsctl", "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
               "fail-mode=secure", "protocols=OpenFlow10")
            for p in (1, 2):
                a, b = f"otsb{tag}a{p}", f"otsb{tag}b{p}"
                sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
                sh("ip", "link", "set", a, "up")
                sh("ip", "link", "set", b, "up")
                sh("ovs-vsctl", "add-port", bridge, a, "--", "set", "interface", a, f"ofport_request={p}")
            base = baseline(bridge, 2 * n)
            runs = agent_runs(bridge, n)
        finally:
            sh("ovs-vsctl", "--if-exists", "del-br", bridge, check=False)
            for p in (1, 2):
                sh("ip", "link", "del", f"otsb{tag}a{p}", check=False)
    result = {"baseline_flowmod_barrier": summary(base), **{k: summary(v) for k, v in runs.items()}}
    b = result["baseline_flowmod_barrier"]["median_ms"]
    result["ratio_setup_barrier_vs_baseline"] = round(result["setup_barrier"]["median_ms"] / b, 2)
    result["ratio_teardown_barrier_vs_baseline"] = round(result["teardown_barrier"]["median_ms"] / b, 2)
    result["provisioning_delay_s"] = 0.0
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
