"""Monitoring cost per interval: split (coarse everywhere, sFlow on hot spots) vs per-flow stats polling.

Emulated load, computed from real OpenFlow 1.3 encodings: every request is serialised by os-ken's
parser; every reply is built byte for byte from os-ken's OF1.3 struct formats (multipart replies
split at 64 KiB) *and parsed back with os-ken's parser* to check the encoding and the entry count.

Model (documented in docs/performance/monitor.md):
* S packet switches with P ports and Q queues per port; F active flows, each installed as one
  5-tuple rule (eth_type, ip_proto, ipv4_src/dst, tcp_src/dst → output) on each of the h switches
  of its path, so a switch holds F·h/S rules.
* Baseline = per-flow polling: every Ts, one FLOW_STATS request and its replies per switch.
* Split = PORT_STATS + QUEUE_STATS request/reply per switch every Ts (control channel), plus sFlow
  export from the H hot switches only (UDP to the collector, not the control channel; reported
  separately and in the total). OVS samples each packet once per bridge, so a hot switch's sampled
  traffic = ports × link rate × load at 1500-byte packets, 1-in-N sampling, OVS-like datagrams
  (128-byte headers, ≤ 1400-byte datagrams, built by our encoder and decoded back).
* Equal detection delay: per-flow polling sees an elephant's rate after two polls (≤ 2·Ts);
  split sees the drops in the first interval (≤ Ts, hot spot), then names the elephant from sFlow
  samples: a first look after ``[monitor] fine_first_window`` (0.5 s), repeated every 0.1 s, else
  one ``fine_window`` (= Ts) later: ≤ 2·Ts (measured in the lab by bench/monitor_detection.py).

    .venv/bin/python bench/monitor_cost.py [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from os_ken.ofproto import ofproto_parser  # noqa: E402
from os_ken.ofproto import ofproto_v1_3 as ofp  # noqa: E402
from os_ken.ofproto import ofproto_v1_3_parser as parser  # noqa: E402

from monitor.sflow import decode_datagram  # noqa: E402
from monitor.sflow.encoder import EncFlow, build_frame, encode_datagram, encode_flow_sample  # noqa: E402
from topology.flow import FiveTuple  # noqa: E402

MAX_MSG = 65535


class _Dp:
    ofproto, ofproto_parser, id = ofp, parser, 1

    def set_xid(self, msg):
        msg.xid = 1


def _request_bytes(msg) -> int:
    msg.set_xid(1)
    msg.serialize()
    return len(msg.buf)


def _flow_entry(i: int) -> bytes:
    match = parser.OFPMatch(eth_type=0x0800, ip_proto=6, ipv4_src=f"10.0.{i // 250 % 250}.{i % 250 + 1}",
                            ipv4_dst="10.1.0.1", tcp_src=1024 + i % 60000, tcp_dst=5001)
    mbuf = bytearray()
    mlen = match.serialize(mbuf, 0)
    ibuf = bytearray()
    parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(2)]).serialize(ibuf, 0)
    length = ofp.OFP_FLOW_STATS_0_SIZE + mlen + len(ibuf)
    head = struct.pack(ofp.OFP_FLOW_STATS_0_PACK_STR, length, 0, 10, 0, 100, 0, 0, 0, 0, 1000, 1_000_000)
    return head + bytes(mbuf) + bytes(ibuf)


def _multipart(mp_type: int, entries: list[bytes]) -> tuple[int, int, int]:
    """(bytes, messages, entries parsed back) of the multipart reply carrying ``entries``."""
    msgs, cur, total, parsed = [], [], 0, 0
    room = MAX_MSG - ofp.OFP_MULTIPART_REPLY_SIZE
    for e in entries:
        if sum(map(len, cur)) + len(e) > room:
            msgs.append(cur)
            cur = []
        cur.append(e)
    msgs.append(cur)
    for k, chunk in enumerate(msgs):
        body = b"".join(chunk)
        flags = ofp.OFPMPF_REPLY_MORE if k < len(msgs) - 1 else 0
        length = ofp.OFP_MULTIPART_REPLY_SIZE + len(body)
        buf = struct.pack("!BBHI", ofp.OFP_VERSION, ofp.OFPT_MULTIPART_REPLY, length, 1)
        buf += struct.pack("!HH4x", mp_type, flags) + body
        msg = ofproto_parser.msg(_Dp(), ofp.OFP_VERSION, ofp.OFPT_MULTIPART_REPLY, length, 1, buf)
        parsed += len(msg.body)
        total += length
    return total, len(msgs), parsed


def per_flow_polling(switches: int, rules_per_switch: int) -> dict:
    req = _request_bytes(parser.OFPFlowStatsRequest(_Dp(), 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                                    0, 0, parser.OFPMatch()))
    entries = [_flow_entry(i) for i in range(rules_per_switch)]
    rep, nmsg, parsed = _multipart(ofp.OFPMP_FLOW, entries)
    assert parsed == rules_per_switch, (parsed, rules_per_switch)
    return {"request_bytes": req, "reply_bytes": rep, "reply_messages": nmsg,
            "flow_entry_bytes": len(entries[0]) if entries else 0, "per_interval_bytes": switches * (req + rep)}


def coarse_polling(switches: int, ports: int, queues: int) -> dict:
    preq = _request_bytes(parser.OFPPortStatsRequest(_Dp(), 0, ofp.OFPP_ANY))
    pentries = [struct.pack(ofp.OFP_PORT_STATS_PACK_STR, p + 1, *([7] * 12), 10, 0) for p in range(ports)]
    prep, _, pparsed = _multipart(ofp.OFPMP_PORT_STATS, pentries)
    qreq = _request_bytes(parser.OFPQueueStatsRequest(_Dp(), 0, ofp.OFPP_ANY, ofp.OFPQ_ALL))
    qentries = [struct.pack(ofp.OFP_QUEUE_STATS_PACK_STR, p + 1, q, 1, 2, 3, 10, 0)
                for p in range(ports) for q in range(queues)]
    qrep, _, qparsed = _multipart(ofp.OFPMP_QUEUE, qentries)
    assert pparsed == ports and qparsed == ports * queues
    return {"port_stats_bytes": preq + prep, "queue_stats_bytes": qreq + qrep,
            "per_interval_bytes": switches * (preq + prep + qreq + qrep)}


def sflow_export(hot_switches: int, ports: int, link_mbps: float, load: float, sampling: int,
                 interval: float) -> dict:
    key = FiveTuple("10.0.0.1", "10.1.0.1", 6, 40000, 5001)
    sample = encode_flow_sample(EncFlow(build_frame(key, 1446), sampling_rate=sampling))
    per_dg = 1
    while len(encode_datagram([sample] * (per_dg + 1))) <= 1400:
        per_dg += 1
    dg = encode_datagram([sample] * per_dg)
    assert len(decode_datagram(dg).flow_samples) == per_dg
    pps = ports * link_mbps * load * 1e6 / 8 / 1500
    samples = hot_switches * pps * interval / sampling
    datagrams = samples / per_dg
    udp_ip = 28
    return {"samples_per_interval": round(samples, 1), "samples_per_datagram": per_dg,
            "datagram_bytes": len(dg), "per_interval_bytes": round(datagrams * (len(dg) + udp_ip))}


def run(flows: int, sampling: int, a: argparse.Namespace) -> dict:
    rules = flows * a.hops // a.switches
    base = per_flow_polling(a.switches, rules)
    coarse = coarse_polling(a.switches, a.ports, a.queues)
    fine = sflow_export(a.hot, a.ports, a.link_mbps, a.load, sampling, a.interval)
    split_ctl = coarse["per_interval_bytes"]
    split_total = split_ctl + fine["per_interval_bytes"]
    return {"flows": flows, "sampling": sampling, "rules_per_switch": rules, "per_flow_polling": base, "coarse": coarse, "sflow": fine,
            "split_control_channel_bytes": split_ctl, "split_total_bytes": split_total,
            "ratio_control_channel": round(base["per_interval_bytes"] / split_ctl, 1),
            "ratio_total_incl_sflow": round(base["per_interval_bytes"] / split_total, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--switches", type=int, default=20)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--queues", type=int, default=1)
    ap.add_argument("--hops", type=int, default=4, help="switches per flow path")
    ap.add_argument("--hot", type=int, default=2, help="switches with sFlow on (one hot circuit)")
    ap.add_argument("--link-mbps", type=float, default=100.0)
    ap.add_argument("--load", type=float, default=0.5, help="fraction of each hot switch port's rate in use")
    ap.add_argument("--sampling", default="64,512", help="1-in-N sFlow sampling values to report")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--flows", default="1000,10000")
    ap.add_argument("--quick", action="store_true", help="(same run; the model is cheap)")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    res = {"benchmark": "monitor_cost", "command": "python bench/monitor_cost.py " + " ".join(argv or sys.argv[1:]),
           "model": {k: getattr(a, k) for k in ("switches", "ports", "queues", "hops", "hot", "link_mbps",
                                                "load", "sampling", "interval")},
           "detection_delay_bound_s": {"per_flow_polling": 2 * a.interval, "split": 2 * a.interval},
           "results": [run(int(f), int(n), a) for f in a.flows.split(",") for n in a.sampling.split(",")]}
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
