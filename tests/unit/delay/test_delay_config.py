"""Delay-link settings are checked before anything is touched; the C tools refuse bad input in one line."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from mininet_labs.delay import DelayConfig, DelayConfigError, DelayLink, path_record
from mininet_labs.delay.build import BuildError, ensure_binary
from mininet_labs.delay.config import check_ifname
from mininet_labs.delay.measure import summary


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"delay_ms": -1}, "delay_ms"),
    ({"delay_ms": math.nan}, "delay_ms"),
    ({"delay_ms": True}, "delay_ms"),
    ({"delay_ms": "10"}, "delay_ms"),
    ({"delay_ms": 60_001}, "delay_ms"),
    ({"delay_ms": 5, "jitter_ms": 6}, "jitter_ms"),
    ({"delay_ms": 5, "jitter_ms": -0.1}, "jitter_ms"),
    ({"delay_ms": 5, "loss": 1.5}, "loss"),
    ({"delay_ms": 5, "loss": -0.01}, "loss"),
    ({"delay_ms": 5, "rate_mbps": 0}, "rate_mbps"),
    ({"delay_ms": 5, "rate_mbps": math.inf}, "rate_mbps"),
    ({"delay_ms": 5, "limit": 0}, "limit"),
    ({"delay_ms": 5, "limit": 2.5}, "limit"),
    ({"delay_ms": 5, "seed": -1}, "seed"),
])
def test_bad_settings_raise_one_line_naming_the_setting(kwargs, field):
    with pytest.raises(DelayConfigError) as e:
        DelayConfig(**kwargs)
    msg = str(e.value)
    assert msg.startswith(field) and "\n" not in msg


def test_element_and_netem_arguments_say_the_same_thing():
    c = DelayConfig(12.5, jitter_ms=1.25, loss=0.02, rate_mbps=20, limit=500, seed=7)
    assert c.element_args() == ["--delay-us", "12500.000", "--jitter-us", "1250.000", "--loss", "0.02",
                                "--limit", "500", "--seed", "7", "--rate-bps", "20000000"]
    assert c.netem_args() == ["limit", "500", "delay", "12500us", "1250us", "loss", "2%", "rate", "20000000bit"]
    plain = DelayConfig(3)
    assert plain.netem_args() == ["limit", "10000", "delay", "3000us"]
    assert "--rate-bps" not in plain.element_args()


@pytest.mark.parametrize("name", ["", "a" * 16, "eth 0", "a/b", None])
def test_bad_interface_names(name):
    with pytest.raises(DelayConfigError):
        check_ifname(name)


def test_delay_link_refuses_before_touching_anything():
    with pytest.raises(DelayConfigError, match="differ"):
        DelayLink("dlyx0", "dlyx0", 5)
    with pytest.raises(DelayConfigError, match="backend"):
        DelayLink("dlyx0", "dlyx1", 5, backend="tbf")
    with pytest.raises(DelayConfigError, match="rt_priority"):
        DelayLink("dlyx0", "dlyx1", 5, rt_priority=100)
    with pytest.raises(DelayConfigError, match="loss"):
        DelayLink("dlyx0", "dlyx1", 5, loss=2)


def test_build_is_idempotent_and_named_by_source():
    first = ensure_binary("dlyfwd")
    mtime = first.stat().st_mtime_ns
    again = ensure_binary("dlyfwd")
    assert again == first and again.stat().st_mtime_ns == mtime
    assert first.parent.name == "_build" and first.name.startswith("dlyfwd-")
    with pytest.raises(BuildError, match="unknown tool"):
        ensure_binary("rm")


@pytest.mark.parametrize(("tool", "args", "says"), [
    ("dlyfwd", ["--a", "x", "--b", "y", "--loss", "2"], "--loss must be a number in [0, 1]: 2"),
    ("dlyfwd", ["--a", "x", "--b", "y", "--delay-us", "1000", "--jitter-us", "2000"], "must not exceed"),
    ("dlyfwd", ["--a", "x", "--b", "x"], "must differ"),
    ("dlyfwd", ["--a", "x"], "usage"),
    ("dlyfwd", ["--bogus"], "usage"),
    ("dlyfwd", ["--a", "x", "--b", "y", "--delay-us", "ten"], "--delay-us must be a number"),
    ("dlyprobe", ["send", "--port", "0", "--duration", "1"], "--port must be a number"),
    ("dlyprobe", ["send", "--port", "9", "--duration", "1"], "send needs --dst"),
    ("dlyprobe", ["recv", "--port", "9", "--duration", "1"], "recv needs --out"),
    ("dlyprobe", ["send", "--dst", "nowhere", "--port", "9", "--duration", "1", "--rate-bps", "1e6"],
     "not an IPv4 address"),
    ("dlyprobe", ["fly"], "usage"),
])
def test_tools_reject_bad_arguments_in_one_line(tool, args, says):
    proc = subprocess.run([str(ensure_binary(tool)), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{tool}: ") and says in lines[0]


def test_cli_usage_error_exits_2():
    proc = subprocess.run([sys.executable, "-m", "mininet_labs.delay", "frobnicate"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("usage:")


def test_summary_and_path_record_state_what_was_measured():
    s = summary(np.array([10.0, 10.2, 10.4, 10.6]))
    assert s is not None and s["mean"] == pytest.approx(10.3) and s["n"] == 4 and s["min"] == 10.0
    assert summary(np.array([])) is None
    link = {"backend": "element", "configured": DelayConfig(10).to_json()}
    rtt = {"sent": 10, "received": 10, "rtt_ms": {"mean": 20.2, "p50": 20.1}}
    base = {"sent": 10, "received": 10, "rtt_ms": {"mean": 0.1, "p50": 0.1}}
    assert path_record(link, rtt, base)["measured_one_way_ms"] == pytest.approx(10.0)
    dead = path_record(link, {"sent": 10, "received": 0, "rtt_ms": None})
    assert dead["measured_one_way_ms"] is None  # nothing came back: no delay is claimed
