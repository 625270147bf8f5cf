"""Lab ``xcon-downtime``: how long one optical reconfiguration interrupts traffic (OSCARS-TE Fig. 7).

Fig. 2 testbed, circuit ``initial`` lit (A-X-Y-B-Y-Z-C). A UDP probe sends a sequence-numbered packet
every 1 ms from h1 to h3 while the controller reconfigures node Y over and over:

- *bypass*: tear down Y 1↔2 and Y 3↔4, set up Y 1↔4 (the router B drops out: packet link A:3–C:1);
- *restore*: tear down Y 1↔4, set up Y 1↔2 and Y 3↔4 (back through B).

Each change goes through the controller's API as an operator's tool would (``DELETE /circuit``, then
``POST /xcon`` or ``POST /circuit``), so a downtime is the whole loop the paper measures: the API call,
the FLOW_MODs and barrier, the OTS's emulated provisioning delay (drawn from [0.150, 0.220] s per
batch), the packet ports coming up, LLDP seeing the new link and forwarding re-installing its rules.

The downtime of a change is the number of probe packets lost around it times the 1-ms period (the
paper's method). The OTS agent logs each batch's provisioning delay; what is left is the controller's
overhead. Writes ``results.json`` (``downtime_ms`` list, ``min_ms``, ``mean_ms``, ``p95_ms``,
``provisioning_ms_mean``, ``controller_overhead_ms_mean``) and ``xcon_downtime.png`` (CDF and break-down).
"""
from __future__ import annotations

import inspect
import json
import math
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

if (_root := str(Path(inspect.currentframe().f_code.co_filename).resolve().parents[1])) not in sys.path:
    sys.path.insert(0, _root)  # `mn --custom` execs this file (no __file__): make the project importable

from mininet_labs.workdir import fig2_topos  # noqa: E402

topos = fig2_topos("xcon-downtime")  # `sudo mn --custom mininet_labs/xcon_downtime.py --topo xcon-downtime`: its Fig. 2 testbed

from mininet_labs.planned_vs_oneshot import PROBE_PORT, RECEIVER, SENDER  # noqa: E402

PERIOD_S = 0.001
LINK_WAIT_S = 10.0  # a change's packet links must show in the controller before the next change starts
BYPASS_DOWN = [("Y", 1, 2), ("Y", 3, 4)]
BYPASS_UP = [("Y", 1, 4)]
PAPER = {"min_ms": 150.0, "mean_ms": 217.0}
APPLIED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*applied (\d+) change\(s\) after ([\d.]+)s dark")


def loss_runs(sent: int, received: set[int]) -> list[tuple[int, int]]:
    """Runs of consecutive lost sequence numbers as (first, length), in order."""
    runs: list[tuple[int, int]] = []
    start = None
    for n in range(sent):
        if n in received:
            if start is not None:
                runs.append((start, n - start))
                start = None
        elif start is None:
            start = n
    if start is not None:
        runs.append((start, sent - start))
    return runs


def downtimes(changes: list[float], sent: int, arrivals: dict[int, float], window_s: float = 1.0,
              api_s: list[float] | None = None) -> list[dict[str, Any]]:
    """For each change (wall-clock time it was requested) the longest loss run that began within
    ``window_s`` after its API call returned (``api_s``: each call's seconds, 0 if not given) and before
    the next change: its length in packets and ms, and when it began and ended (the arrival of the
    packets either side). A change with no loss has downtime 0. (Without the next-change bound, a bypass
    that lost less than its restore 0.9 s later was given the restore's run; without the API time, on a
    loaded machine a call that took 1.6 s went dark after the window and was given no run at all.)"""
    out = []
    runs = loss_runs(sent, set(arrivals))
    for i, t in enumerate(changes):
        api = api_s[i] if api_s is not None else 0.0
        until = min(t + api + window_s, changes[i + 1] if i + 1 < len(changes) else float("inf"))
        best = None
        for first, length in runs:
            before = arrivals.get(first - 1)
            if before is None or not t - 0.05 <= before < until:
                continue
            if best is None or length > best[1]:
                best = (first, length)
        if best is None:  # no loss of its own; say whether it came while an earlier change was still dark
            dark = any(arrivals.get(first - 1, float("inf")) < t < arrivals.get(first + length, float("inf"))
                       for first, length in runs)
            out.append({"at": t, "lost": 0, "downtime_ms": 0.0, "dark_at_request": dark})
            continue
        first, length = best
        out.append({"at": t, "lost": length, "downtime_ms": round(length * PERIOD_S * 1000, 3),
                    "dark_from": arrivals.get(first - 1), "dark_to": arrivals.get(first + length)})
    return out


def wait_for_links(session: Any, want: set[tuple[str, int, str, int]], t: float,
                   note: Callable[[str], None]) -> float | None:
    """Wait until the controller shows the change's packet links; ms after the change was requested, or
    None (noted) when they did not show within ``LINK_WAIT_S``. Why: the next change must not start while
    this one is still dark, or the two share one loss run and neither downtime is measured (a CI run's
    bypass whose link LLDP missed was still dark when its restore began: 1,118 ms and 0 ms)."""
    try:
        session.wait_links(want, timeout=LINK_WAIT_S)
    except TimeoutError:
        note(f"the change's links did not show within {LINK_WAIT_S:g} s: going on")
        return None
    return round((time.time() - t) * 1000, 1)


def wait_for_traffic(beat: Path, since: float, t: float, note: Callable[[str], None]) -> float | None:
    """Wait until the probe's receiver has had a packet after ``since`` (when the change's links showed,
    so after it went dark); ms after the change was requested, or None (noted) when none came within
    ``LINK_WAIT_S``. Why: links in the controller's view do not prove the data plane switched. On a
    loaded CI machine a bypass's traffic was still dark when its restore began 0.7 s after its links
    showed: one loss run for both, and the restore measured at 0 ms."""
    end = time.monotonic() + LINK_WAIT_S
    while time.monotonic() < end:
        try:
            last = float(beat.read_text().split()[1])
        except (OSError, IndexError, ValueError):  # not written yet
            last = 0.0
        if last > since:
            return round((last - t) * 1000, 1)
        time.sleep(0.01)
    note(f"no probe packet came through within {LINK_WAIT_S:g} s of the change's links: going on")
    return None


def provisioning_delays(agent_log: Path) -> list[tuple[float, float]]:
    """(wall-clock time the batch was applied, provisioning delay s) of every batch that set something up."""
    out = []
    if not agent_log.exists():
        return out
    for line in agent_log.read_text(errors="replace").splitlines():
        m = APPLIED.match(line)
        if m and float(m.group(3)) > 0:
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((t, float(m.group(3))))
    return out


def attribute(changes: list[dict[str, Any]], delays: list[tuple[float, float]]) -> None:
    """Give each change the provisioning delay of the batches that set something up after it was
    requested and before the next change (summed: a change the OTS applies as two batches, one after
    the other, is dark for both), and the rest of its downtime as controller overhead."""
    for i, c in enumerate(changes):
        end = changes[i + 1]["at"] if i + 1 < len(changes) else float("inf")
        mine = [d for t, d in delays if c["at"] <= t < end]
        d = sum(mine) if mine else None
        c["batches"] = len(mine)
        c["provisioning_ms"] = None if d is None else round(d * 1000, 1)
        c["overhead_ms"] = None if d is None else round(c["downtime_ms"] - d * 1000, 1)


def packet_layer(changes: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Split each change's time after its XCON was confirmed, from the controller's journal: ``lit_to_link_ms``
    (the ``xcon_add`` confirmation to the last ``link_add`` LLDP reported for the change) and
    ``link_to_traffic_ms`` (that link to the probe's first packet through). Why: the overhead is
    otherwise one number, and the journal says whether LLDP or the rules after it took the time."""
    for i, c in enumerate(changes):
        end = changes[i + 1]["at"] if i + 1 < len(changes) else float("inf")
        mine = [e for e in events if c["at"] <= e["t"] < end]
        lit = next((e["t"] for e in mine if e["type"] == "xcon_add" and e.get("ok")), None)
        links = [e["t"] for e in mine if e["type"] == "link_add" and lit is not None and e["t"] >= lit]
        c["lit_to_link_ms"] = round((links[-1] - lit) * 1000, 1) if links else None
        c["link_to_traffic_ms"] = (round((c["dark_to"] - links[-1]) * 1000, 1)
                                   if links and c.get("dark_to") is not None else None)


def summarise(changes: list[dict[str, Any]]) -> dict[str, Any]:
    ms = sorted(c["downtime_ms"] for c in changes)
    prov = [c["provisioning_ms"] for c in changes if c.get("provisioning_ms") is not None]
    over = [c["overhead_ms"] for c in changes if c.get("overhead_ms") is not None]
    p95 = ms[max(0, math.ceil(0.95 * len(ms)) - 1)] if ms else None  # nearest rank
    return {"downtime_ms": ms, "min_ms": ms[0] if ms else None,
            "mean_ms": round(statistics.fmean(ms), 1) if ms else None, "p95_ms": p95,
            "max_ms": ms[-1] if ms else None,
            "provisioning_ms_mean": round(statistics.fmean(prov), 1) if prov else None,
            "controller_overhead_ms_mean": round(statistics.fmean(over), 1) if over else None,
            "controller_overhead_ms_max": max(over) if over else None,
            "lit_to_link_ms_mean": _mean_of(changes, "lit_to_link_ms"),
            "link_to_traffic_ms_mean": _mean_of(changes, "link_to_traffic_ms")}


def _mean_of(changes: list[dict[str, Any]], key: str) -> float | None:
    xs = [c[key] for c in changes if c.get(key) is not None]
    return round(statistics.fmean(xs), 1) if xs else None


def run(out: Path, *, quick: bool = False, reps: int | None = None,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """``reps`` bypass + restore pairs (default 30, 15 with ``quick``) under one running probe."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.labclock import LabClock
    from mininet_labs.session import LabSession
    from mininet_labs.workdir import fig2_dirs, finish

    reps = (15 if quick else 30) if reps is None else reps
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    dirs = fig2_dirs(out, {"send.py": SENDER, "recv.py": RECEIVER})
    out, work, spec, static, delay = dirs.out, dirs.work, dirs.spec, dirs.static, dirs.delay
    settle = 0.3  # after the probe is through again: two changes' loss runs are apart
    # the probe's longest life: per change the API call, the longest waits for its links and its traffic and
    # the settle, with room to spare. It is stopped a settle after the last change, so a slow machine never
    # leaves the last changes unprobed (a CI run's fixed-length probe ended before its last change).
    seconds = 2.0 + reps * 2 * (settle + 2 * LINK_WAIT_S + 5.0)
    clock = LabClock(progress)
    note = clock.note

    res: dict[str, Any] = {"lab": "xcon-downtime", "quick": quick, "reps": reps, "probe_interval_ms": 1.0,
                           "provisioning_delay_s": list(delay), "paper": PAPER}
    changes: list[dict[str, Any]] = []
    with clock.locked(), LabSession(spec, work, delay=delay, static_file=str(static)) as session:
        client = session.client
        client.circuit(FIG2_CIRCUITS["initial"])
        session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)
        for h, ip in (("h1", "10.0.0.3"), ("h3", "10.0.0.1")):
            session.lab.node(h).cmd(f"ping -c2 -W1 {ip} >/dev/null 2>&1")
        note(f"Fig. 2 testbed up, circuit 'initial' lit; probe h1 -> h3 every 1 ms for {seconds:.0f} s")
        h1, h3 = session.lab.node("h1"), session.lab.node("h3")
        got_file, beat = work / "got.json", work / "probe-beat"
        recv = h3.popen([sys.executable, str(work / "recv.py"), str(PROBE_PORT), str(seconds + 3), str(got_file),
                         str(beat)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        send = h1.popen([sys.executable, str(work / "send.py"), "10.0.0.3", str(PROBE_PORT), str(seconds),
                         str(PERIOD_S)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        probe_end = time.monotonic() + seconds
        try:
            time.sleep(1.0)
            for i in range(reps):
                for kind, down, up, links in (("bypass", BYPASS_DOWN, BYPASS_UP, "bypass"),
                                              ("restore", BYPASS_UP, BYPASS_DOWN, "initial")):
                    t = time.time()
                    client.remove_circuit(down)
                    client.circuit(up, parallel=True)  # Y's XCONs behind one barrier: one batch, one delay
                    change = {"kind": kind, "at": t, "api_ms": round((time.time() - t) * 1000, 1)}
                    changes.append(change)
                    change["links_ms"] = wait_for_links(session, directed(FIG2_CIRCUIT_LINKS[links]), t, note)
                    change["traffic_ms"] = wait_for_traffic(beat, time.time(), t, note)
                    time.sleep(settle)
                note(f"repetition {i + 1}/{reps}: bypass {changes[-2]['api_ms']:.0f} ms, "
                     f"restore {changes[-1]['api_ms']:.0f} ms in the API")
        except BaseException:  # stop the probe at once; the session's exit removes the rest
            finish([send, recv], 0.01)
            raise
        if time.monotonic() > probe_end:
            note("the changes outlasted the probe: the last ones were measured without it")
        send.terminate()  # the last change's settle is behind us: stop the probe, then its receiver
        ((sent_out, _),) = finish([send], 10)
        time.sleep(0.3)  # the last packets in flight
        recv.terminate()
        finish([recv], 10)
        res["controller_errors"] = session.controller_errors()
        events = client.events()  # the journal dies with the controller: keep it for the break-down
        (work / "events.json").write_text(json.dumps(events))
    sent = int(sent_out.split()[0])
    arrivals = {int(k): v for k, v in json.loads(got_file.read_text()).items()}
    for c, d in zip(changes, downtimes([c["at"] for c in changes], sent, arrivals,
                                       api_s=[c["api_ms"] / 1000 for c in changes]), strict=True):
        c.update({k: v for k, v in d.items() if k != "at"})
    attribute(changes, provisioning_delays(work / "ots-Y.log"))
    packet_layer(changes, events)
    res.update(summarise(changes))
    res.update({"sent": sent, "lost": sent - len(arrivals), "changes": changes})
    note(f"downtime over {len(changes)} changes: min {res['min_ms']} ms, mean {res['mean_ms']} ms, "
         f"p95 {res['p95_ms']} ms (paper: min 150, mean 217); provisioning {res['provisioning_ms_mean']} ms, "
         f"controller overhead {res['controller_overhead_ms_mean']} ms on average (XCON confirmed -> LLDP link "
         f"{res['lit_to_link_ms_mean']} ms, link -> traffic {res['link_to_traffic_ms_mean']} ms)")
    plot(res, out / "xcon_downtime.png")
    res["lab_seconds"] = clock.durations()
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    progress(f"wrote {out / 'results.json'} and {out / 'xcon_downtime.png'}")
    return res


def plot(res: dict[str, Any], path: Path) -> None:
    """Left: CDF of the downtime (paper's min and mean marked). Right: per change, provisioning delay
    and controller overhead stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = res["downtime_ms"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    if ms:
        a.step(ms, [(i + 1) / len(ms) for i in range(len(ms))], where="post", label="mlte (Mininet, OTS agent)")
    for v, style, name in ((PAPER["min_ms"], ":", "paper min 150 ms"), (PAPER["mean_ms"], "--", "paper mean 217 ms")):
        a.axvline(v, color="grey", ls=style, lw=1, label=name)
    a.set_xlabel("downtime (ms)")
    a.set_ylabel("CDF")
    a.set_title("Router bypass at Y: traffic downtime per change", fontsize=9)
    a.legend(fontsize=7, loc="lower right")
    ch = [c for c in res["changes"] if c.get("provisioning_ms") is not None]
    xs = range(len(ch))
    b.bar(xs, [c["provisioning_ms"] for c in ch], label="emulated provisioning delay")
    b.bar(xs, [max(c["overhead_ms"], 0) for c in ch], bottom=[c["provisioning_ms"] for c in ch],
          label="controller + packet layer")
    b.set_xlabel("change (bypass, restore, ...)")
    b.set_ylabel("ms")
    b.set_title("Break-down", fontsize=9)
    b.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
