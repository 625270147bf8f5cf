"""sFlow v5 decoder throughput on one core, against a header-only struct-unpack loop.

Workload: datagrams shaped like OVS's (agent IPv4, 7 flow samples with 128-byte sampled headers of
TCP/UDP frames, 1 datagram in 8 carrying 4 counter samples instead). The baseline walks the same
datagrams with ``struct.unpack_from`` reading only the datagram header and each sample's format
and length (the least any decoder must do); the ratio says what full decoding costs on top.

    .venv/bin/python bench/monitor_sflow_decoder.py [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.sflow import SflowDecoder  # noqa: E402
from monitor.sflow.encoder import (  # noqa: E402
    EncCounters,
    EncFlow,
    build_frame,
    encode_counter_sample,
    encode_datagram,
    encode_flow_sample,
)
from topology.flow import FiveTuple  # noqa: E402


def workload(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 8 == 7:
            samples = [encode_counter_sample(EncCounters(if_index=k, sequence=i)) for k in range(1, 5)]
        else:
            samples = []
            for j in range(7):
                key = FiveTuple(f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}", f"10.1.0.{rng.randrange(1, 255)}",
                                rng.choice([6, 17]), rng.randrange(1024, 65535), rng.choice([80, 443, 5001]))
                samples.append(encode_flow_sample(EncFlow(build_frame(key, 1400), sampling_rate=64, sequence=i * 7 + j)))
        out.append(encode_datagram(samples, agent="127.0.1.1", sequence=i))
    return out


def baseline_walk(data: bytes) -> int:
    off = 8
    atype = struct.unpack_from("!I", data, 4)[0]
    off += 4 if atype == 1 else 16
    n = struct.unpack_from("!I", data, off + 12)[0]
    off += 16
    for _ in range(n):
        _fmt, length = struct.unpack_from("!II", data, off)
        off += 8 + length
    return n


def timed(fn, items: list[bytes], min_seconds: float) -> tuple[float, int]:
    """(seconds, datagrams processed) running ``fn`` over ``items`` repeatedly for ≥ min_seconds."""
    done = 0
    t0 = time.perf_counter()
    while True:
        for d in items:
            fn(d)
        done += len(items)
        el = time.perf_counter() - t0
        if el >= min_seconds:
            return el, done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short smoke run")
    ap.add_argument("--json", default="", help="write results here")
    args = ap.parse_args(argv)
    seconds = 0.3 if args.quick else 3.0
    items = workload(200 if args.quick else 2000)
    dec = SflowDecoder()
    samples_per_dg = sum(len(dg.flow_samples) + len(dg.counter_samples) for dg in map(dec.decode, items)) / len(items)
    assert dec.stats()["bad"] == 0
    b_s, b_n = timed(baseline_walk, items, seconds)
    d_s, d_n = timed(dec.decode, items, seconds)
    res = {
        "benchmark": "monitor_sflow_decoder",
        "command": "python bench/monitor_sflow_decoder.py" + (" --quick" if args.quick else ""),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "datagram_bytes_mean": round(sum(map(len, items)) / len(items), 1),
        "samples_per_datagram": round(samples_per_dg, 3),
        "decoder_datagrams_per_s": round(d_n / d_s),
        "decoder_samples_per_s": round(d_n / d_s * samples_per_dg),
        "baseline_datagrams_per_s": round(b_n / b_s),
        "baseline_over_decoder": round((b_n / b_s) / (d_n / d_s), 2),
    }
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
